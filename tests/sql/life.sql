-- life.sql -- the model's life in the store through the shell: version numbers never
-- given twice (WAL and rollback journal), option "deploy", option "validation" and
-- "validation_query", attn_lineage, "class_weights" as an object, attn_status, and attn_tune's
-- random search.
.load ./attnext
.headers on
.bail off
.mode list

-- versions, in both journal modes
.open life_wal.db
.load ./attnext
PRAGMA journal_mode = WAL;
.read tests/sql/docs.inc
SELECT json_extract(attn_fit('m', 'SELECT text, label FROM docs',
  '{"epochs":1,"hidden":4,"embed_dim":4,"fc_hidden":4,"progress":false}'), '$.version') AS v;
SELECT json_extract(attn_fit('m', 'SELECT text, label FROM docs',
  '{"epochs":1,"hidden":4,"embed_dim":4,"fc_hidden":4,"deploy":"always","progress":false}'), '$.version') AS v;
-- the latest version deleted, its log left: the next is 3, not 2
DELETE FROM attn_models WHERE name = 'm' AND version = 2;
SELECT json_extract(attn_fit('m', 'SELECT text, label FROM docs',
  '{"epochs":1,"hidden":4,"embed_dim":4,"fc_hidden":4,"progress":false}'), '$.version') AS v;
-- every version and every log row deleted: still past them (attn_versions)
DELETE FROM attn_models WHERE name = 'm';
DELETE FROM attn_training_log WHERE name = 'm';
SELECT max(version) AS last_epoch_row_version FROM attn_train('m', 'SELECT text, label FROM docs',
  '{"epochs":1,"hidden":4,"embed_dim":4,"fc_hidden":4,"progress":false}');
SELECT version, deployed FROM attn_models WHERE name = 'm';
SELECT name, last_version FROM attn_versions;
.open life_delete.db
.load ./attnext
PRAGMA journal_mode = DELETE;
.read tests/sql/docs.inc
SELECT json_extract(attn_fit('m', 'SELECT text, label FROM docs',
  '{"epochs":1,"hidden":4,"embed_dim":4,"fc_hidden":4,"progress":false}'), '$.version') AS v;
DELETE FROM attn_models WHERE name = 'm' AND version = 1;
SELECT json_extract(attn_fit('m', 'SELECT text, label FROM docs',
  '{"epochs":1,"hidden":4,"embed_dim":4,"fc_hidden":4,"progress":false}'), '$.version') AS v;
SELECT version FROM attn_tune('m', 'SELECT text, label FROM docs', '{"lr":[0.01,0.02]}',
  '{"epochs":1,"hidden":4,"embed_dim":4,"fc_hidden":4,"progress":false}');

-- deploy: "if_better" (the default) compares the new version with the deployed one on the new
-- run's validation rows; "always"; "never". (300 rows are fewer than the default recipe splits
-- for validation: the runs that compare ask for the split.)
.open life_deploy.db
.load ./attnext
.read tests/sql/docs.inc
SELECT json_extract(j, '$.version') AS v, json_extract(j, '$.deployed') AS deployed,
       json_extract(j, '$.deploy_reason') AS why
FROM (SELECT attn_fit('news', 'SELECT text, label FROM docs',
  '{"epochs":6,"hidden":8,"embed_dim":8,"fc_hidden":8,"lr":0.01,"validation":"random","progress":false}') AS j);
SELECT json_extract(j, '$.version') AS v, json_extract(j, '$.deployed') AS deployed,
       json_extract(j, '$.deploy_reason') LIKE 'val_loss % does not beat the deployed version 1''s % on the same 30 validation rows' AS why
FROM (SELECT attn_fit('news', 'SELECT text, label FROM docs',
  '{"epochs":1,"hidden":8,"embed_dim":8,"fc_hidden":8,"lr":0.0001,"validation":"random","progress":false}') AS j);
SELECT json_extract(j, '$.version') AS v, json_extract(j, '$.deployed') AS deployed,
       json_extract(j, '$.deploy_reason') AS why
FROM (SELECT attn_fit('news', 'SELECT text, label FROM docs',
  '{"epochs":1,"lr":0.0001,"hidden":8,"embed_dim":8,"fc_hidden":8,"deploy":"always","progress":false}') AS j);
SELECT json_extract(j, '$.deployed') AS deployed, json_extract(j, '$.deploy_reason') AS why
FROM (SELECT attn_fit('news', 'SELECT text, label FROM docs',
  '{"epochs":6,"lr":0.01,"hidden":8,"embed_dim":8,"fc_hidden":8,"deploy":"never","progress":false}') AS j);
SELECT version, deployed, deployed_seq > 0 AS ever_deployed FROM attn_models ORDER BY version;
SELECT epoch, version, deployed FROM attn_train('news', 'SELECT text, label FROM docs',
  '{"epochs":2,"hidden":8,"embed_dim":8,"fc_hidden":8,"deploy":"never","progress":false}');
SELECT attn_fit('news', 'SELECT text, label FROM docs', '{"deploy":"maybe"}');

-- validation: "last", "none", validation_query, and the combinations refused
SELECT json_extract(j, '$.train_rows') AS train_rows, json_extract(j, '$.val_rows') AS val_rows
FROM (SELECT attn_fit('last', 'SELECT text, label FROM docs',
  '{"epochs":1,"hidden":4,"embed_dim":4,"fc_hidden":4,"validation":"last","val_fraction":0.1,"progress":false}') AS j);
CREATE TABLE toy(text, label);
INSERT INTO toy VALUES ('I love this movie', 'pos'), ('what a great film', 'pos'),
  ('I hate this movie', 'neg'), ('what a terrible film', 'neg');
SELECT attn_fit('toy', 'SELECT text, label FROM toy', '{"epochs":5,"validation":"random"}');
-- with no options the toy trains: so few rows have no validation split, every row trains
SELECT json_extract(j, '$.train_rows') AS train_rows, json_extract(j, '$.val_rows') AS val_rows,
       json_extract(j, '$.deployed') AS deployed, json_extract(j, '$.sized.batch_size') AS batch_size,
       json_extract(j, '$.epochs_run') AS epochs
FROM (SELECT attn_fit('toy_defaults', 'SELECT text, label FROM toy') AS j);
SELECT json_extract(j, '$.train_rows') AS train_rows, json_extract(j, '$.val_rows') AS val_rows,
       json_extract(j, '$.best_epoch') AS best_epoch, json_extract(j, '$.val_loss') AS val_loss
FROM (SELECT attn_fit('toy', 'SELECT text, label FROM toy',
  '{"epochs":60,"stopwords":false,"validation":"none","progress":false}') AS j);
SELECT text, attn_predict('toy', text) AS predicted, label FROM toy;
SELECT json_extract(j, '$.train_rows') AS train_rows, json_extract(j, '$.val_rows') AS val_rows
FROM (SELECT attn_fit('vq', 'SELECT text, label FROM docs WHERE id <= 240',
  '{"epochs":1,"hidden":4,"embed_dim":4,"fc_hidden":4,"validation_query":"SELECT text, label FROM docs WHERE id > 240","progress":false}') AS j);
SELECT attn_fit('vq', 'SELECT text, label FROM docs', '{"validation_query":"SELECT text, label FROM docs","validation":"last"}');
SELECT attn_fit('vq', 'SELECT text, label FROM docs', '{"validation":"query"}');
SELECT attn_fit('vq', 'SELECT text, label FROM docs', '{"validation":"none","patience":2}');
SELECT attn_fit('vq', 'SELECT text, label FROM docs', '{"validation":"none","deploy":"if_better"}');

-- lineage
SELECT name, version, function, query, rows, length(rows_sha256) AS sha_chars, validation_rows,
       json_extract(options, '$.validation_query') AS vq, attnext, backend LIKE CASE WHEN attn_version() LIKE '%(compute capability%' THEN 'cuda (%' ELSE 'cpu (%' END AS this_backend,
       started_at <= ended_at AS ordered
FROM attn_lineage WHERE name IN ('vq', 'toy') ORDER BY name, version;

-- class_weights as an object
SELECT count(*) AS epochs FROM attn_train('cw', 'SELECT text, label FROM docs',
  '{"epochs":2,"hidden":4,"embed_dim":4,"fc_hidden":4,"class_weights":{"Sports":2.5},"progress":false}');
SELECT json_extract(options, '$.class_weights.Sports') AS sports_weight FROM attn_lineage WHERE name = 'cw';
SELECT * FROM attn_train('cw', 'SELECT text, label FROM docs', '{"class_weights":{"golf":2}}');

-- attn_status: nothing trains now
SELECT count(*) AS running FROM attn_status;

-- attn_tune: a random search of 3 trials out of 12, one after the other and two at a time
SELECT trial, config, chosen FROM attn_tune('rs', 'SELECT text, label FROM docs',
  '{"lr":[0.001,0.003,0.01,0.03],"hidden":[4,8,16]}',
  '{"epochs":2,"embed_dim":4,"fc_hidden":4,"search":"random","trials":3,"parallel":false,"progress":false}');
SELECT trial, config, chosen FROM attn_tune('rs2', 'SELECT text, label FROM docs',
  '{"lr":[0.001,0.003,0.01,0.03],"hidden":[4,8,16]}',
  '{"epochs":2,"embed_dim":4,"fc_hidden":4,"search":"random","trials":3,"parallel":true,"progress":false}');
SELECT count(*) AS same_weights FROM attn_models AS a JOIN attn_models AS b
  ON a.name = 'rs' AND b.name = 'rs2' AND a.version = b.version AND a.weights = b.weights;
SELECT * FROM attn_tune('rs', 'SELECT text, label FROM docs', '{"lr":[0.001]}', '{"trials":2}');
