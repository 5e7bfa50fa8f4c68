-- errors.sql -- every error names the function and says what is wrong (exact text), and a
-- failed call changes nothing.
.load ./attnext
.read tests/sql/docs.inc
-- before any model exists (no model store tables yet)
SELECT attn_predict('newz', 'text');
SELECT attn_predict('text');
SELECT * FROM attn_probs('newz', 'text');
SELECT * FROM attn_weights('newz', 'text');
SELECT * FROM attn_classify('newz', 'SELECT id, text FROM docs');
SELECT * FROM attn_evaluate('newz', 'SELECT text, label FROM docs');
SELECT * FROM attn_confusion('newz', 'SELECT text, label FROM docs');
SELECT attn_deploy('newz', 1);
SELECT count(*) AS store_tables FROM sqlite_schema WHERE name LIKE 'attn\_%' ESCAPE '\';

-- attn_train: arguments, options, query
SELECT * FROM attn_train('m');
SELECT * FROM attn_train(NULL, 'SELECT text, label FROM docs');
SELECT * FROM attn_train('', 'SELECT text, label FROM docs');
SELECT * FROM attn_train('m', 'SELECT text, label FROM docs', '{"hidden":"big"}');
SELECT * FROM attn_train('m', 'SELECT text, label FROM docs', '{"colour":1}');
SELECT * FROM attn_train('m', 'SELECT text, label FROM docs', 'not json');
SELECT * FROM attn_train('m', 'SELECT text, label FROM docs', 7);
SELECT * FROM attn_train('m', 'DELETE FROM docs');
SELECT * FROM attn_train('m', 'SELECT text, label FROM docs; SELECT 1');
SELECT * FROM attn_train('m', 'SELECT text, label FROM nowhere');
SELECT * FROM attn_train('m', NULL);
SELECT * FROM attn_train('m', '');
SELECT * FROM attn_train('m', 'SELECT text FROM docs');
SELECT * FROM attn_train('m', 'SELECT text, label FROM docs WHERE 0');
SELECT * FROM attn_train('m', 'SELECT text, label FROM docs UNION ALL SELECT NULL, ''x''');
-- a NULL label is an unlabelled row; a query of only those has nothing to learn labels from
SELECT * FROM attn_train('m', 'SELECT text, NULL FROM docs');
SELECT * FROM attn_train('m', 'SELECT text, NULL FROM docs', '{"unlabelled":false}');
SELECT * FROM attn_train('m', 'SELECT text, label FROM docs', '{"unlabelled":1}');
SELECT * FROM attn_train('m', 'SELECT text, 1 FROM docs');
SELECT count(*) AS store_tables FROM sqlite_schema WHERE name LIKE 'attn\_%' ESCAPE '\';

-- a good model, then errors that must not change it
SELECT count(*) AS epochs FROM attn_train('m', 'SELECT text, label FROM docs',
  '{"epochs":3,"hidden":8,"embed_dim":8,"fc_hidden":8,"progress":false}');
SELECT attn_predict('newz', 'text');
SELECT attn_predict(NULL, 'text');
SELECT attn_predict('', 'text');
SELECT attn_predict();
SELECT attn_predict('m', 'a', 'b');
SELECT * FROM attn_probs('m');
SELECT * FROM attn_probs(NULL, 'text');
SELECT * FROM attn_weights('m');
SELECT * FROM attn_classify('m');
SELECT * FROM attn_classify('m', 'SELECT id FROM docs');
SELECT * FROM attn_classify('m', 'UPDATE docs SET text = 1');
SELECT * FROM attn_evaluate('m');
SELECT * FROM attn_evaluate('m', 'SELECT text, label FROM docs UNION ALL SELECT ''x'', NULL');
SELECT * FROM attn_confusion('m', 'SELECT text, label FROM docs UNION ALL SELECT NULL, ''x''');
SELECT * FROM attn_confusion('m', 'SELECT text FROM docs');
SELECT * FROM attn_confusion('m', 'SELECT text, label FROM docs', '{"all_labels":1}');
SELECT * FROM attn_confusion('m', 'SELECT text, label FROM docs', '{"labels":"all"}');
SELECT * FROM attn_confusion('m', 'SELECT text, label FROM docs', 'all');
SELECT * FROM attn_confusion('m', 'SELECT text, label FROM docs', '{}', 4);
SELECT attn_deploy('m', 5);
SELECT attn_deploy('m', 'abc');
SELECT attn_deploy('m', NULL);
SELECT attn_deploy(NULL, 1);
SELECT attn_import('m', 'not a blob');
SELECT attn_import('m', NULL);
SELECT attn_import('m', x'0102');
SELECT attn_import('m', zeroblob(100));
SELECT attn_import(NULL, x'00');

-- a failure while saving (here a trigger refusing a log row) leaves the store as it was, both
-- in a savepoint (a plain SELECT) and inside a statement that writes (no savepoint possible:
-- the rows written so far are deleted again and the deployed version restored)
CREATE TRIGGER no_log BEFORE INSERT ON attn_training_log WHEN new.epoch = 2
BEGIN SELECT RAISE(ABORT, 'log refused'); END;
SELECT count(*) FROM attn_train('m', 'SELECT text, label FROM docs',
  '{"epochs":3,"hidden":8,"embed_dim":8,"fc_hidden":8,"progress":false}');
CREATE TEMP TABLE run AS SELECT * FROM attn_train('m', 'SELECT text, label FROM docs',
  '{"epochs":3,"hidden":8,"embed_dim":8,"fc_hidden":8,"progress":false}');
DROP TRIGGER no_log;
SELECT name, version, deployed FROM attn_models;

-- direct-only: attn_train, attn_deploy and attn_import are refused in views and triggers
CREATE VIEW v AS SELECT * FROM attn_train('m', 'SELECT text, label FROM docs');
SELECT * FROM v;
CREATE TABLE t(x);
CREATE TRIGGER tr AFTER INSERT ON t BEGIN SELECT attn_deploy('m', 1); END;
INSERT INTO t VALUES (1);
CREATE TRIGGER tr2 AFTER INSERT ON t BEGIN SELECT attn_import('m', x'00'); END;
INSERT INTO t VALUES (1);
-- pure readers are allowed in views
CREATE VIEW p AS SELECT attn_predict('m', text) AS label FROM docs;
SELECT count(*) AS view_rows FROM p;

-- nothing changed: one model, version 1, deployed, 3 log rows
.headers on
SELECT name, version, deployed FROM attn_models;
SELECT count(*) AS log_rows FROM attn_training_log;
-- a name with a NUL character: read as a C string it would be the model 'm'
SELECT attn_predict('m' || char(0) || 'x', 'text');
SELECT attn_fit('m' || char(0) || 'x', 'SELECT text, label FROM docs', '{"epochs":1}');
SELECT count(*) FROM attn_models WHERE name <> 'm' OR instr(name, char(0));
