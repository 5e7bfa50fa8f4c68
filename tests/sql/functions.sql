-- functions.sql -- every SQL function of attnext and every result column, on the small data
-- set of docs.inc. Values that depend on floating-point rounding are checked as properties
-- (sums, ranges, agreement between functions), the rest exactly.
.load ./attnext
.headers on
.read tests/sql/docs.inc

SELECT attn_version() LIKE 'attnext %backends: cpu%' AS version_ok;

-- result columns of every table-valued function (hidden columns are the arguments)
SELECT 'attn_train' AS function, group_concat(name || iif(hidden, '*', ''), ' ') AS columns
  FROM pragma_table_xinfo('attn_train')
UNION ALL SELECT 'attn_classify', group_concat(name || iif(hidden, '*', ''), ' ')
  FROM pragma_table_xinfo('attn_classify')
UNION ALL SELECT 'attn_probs', group_concat(name || iif(hidden, '*', ''), ' ')
  FROM pragma_table_xinfo('attn_probs')
UNION ALL SELECT 'attn_weights', group_concat(name || iif(hidden, '*', ''), ' ')
  FROM pragma_table_xinfo('attn_weights')
UNION ALL SELECT 'attn_evaluate', group_concat(name || iif(hidden, '*', ''), ' ')
  FROM pragma_table_xinfo('attn_evaluate')
UNION ALL SELECT 'attn_confusion', group_concat(name || iif(hidden, '*', ''), ' ')
  FROM pragma_table_xinfo('attn_confusion');

-- the model store does not exist before the first training
SELECT count(*) AS store_tables FROM sqlite_schema WHERE name LIKE 'attn\_%' ESCAPE '\';

-- attn_train: one row per epoch; keep them to compare with the training log. Without label
-- smoothing this toy's validation loss falls at every epoch, so the learning rate stays 0.01 and
-- the last epoch is the best (with it the loss has a floor, and the plateau scheduler acts).
CREATE TEMP TABLE run AS
SELECT * FROM attn_train('news', 'SELECT text, label FROM docs',
                         json_object('epochs', 15, 'hidden', 16, 'embed_dim', 16,
                                     'fc_hidden', 16, 'lr', 0.01, 'label_smoothing', 0,
                                     'validation', 'random', 'batch_size', 64, 'progress', json('false')));
SELECT count(*) AS epochs, min(epoch) AS first, max(epoch) AS last,
       sum(epoch) = count(*) * (count(*) + 1) / 2 AS epochs_in_order,
       min(train_loss) > 0 AND min(val_loss) > 0 AS losses_positive,
       max(val_accuracy) AS best_accuracy, max(val_f1) AS best_f1,
       min(lr) = 0.01 AS lr_ok, min(seconds) >= 0 AS seconds_ok,
       min(best) >= 0 AND max(best) = 1 AS best_flag_ok
FROM run;
SELECT epoch, val_accuracy, best FROM run WHERE epoch = (SELECT max(epoch) FROM run);

-- the model store: a row for version 1, deployed, and its log = the rows returned
SELECT count(*) AS store_tables FROM sqlite_schema WHERE type = 'table' AND name LIKE 'attn\_%' ESCAPE '\';
SELECT name, version, deployed, deployed_seq, labels,
       created_at GLOB '[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9]T[0-9][0-9]:[0-9][0-9]:[0-9][0-9].[0-9][0-9][0-9]Z' AS created_ok,
       json_extract(config, '$.hidden') AS hidden, json_extract(config, '$.cell') AS cell,
       json_extract(config, '$.epochs') AS config_epochs,
       json_valid(metrics) AS metrics_ok,
       hex(substr(weights, 9, 1)) = '7B' AS safetensors_header
FROM attn_models;
SELECT count(*) AS log_rows,
       sum(l.train_loss = r.train_loss AND l.val_loss = r.val_loss
           AND l.val_accuracy = r.val_accuracy AND l.val_f1 = r.val_f1 AND l.lr = r.lr
           AND l.seconds = r.seconds) AS equal_to_returned_rows
FROM attn_training_log l JOIN run r USING (epoch)
WHERE l.name = 'news' AND l.version = 1;

-- attn_predict with a name, with the default model, NULL text, numbers as text
SELECT attn_predict('news', 'Team wins the cup') AS p1,
       attn_predict('Shares slump as profits worry') AS p2,
       attn_predict('news', 'New laptop shipped for gamers') AS p3,
       attn_predict('news', NULL) IS NULL AS null_text,
       attn_predict('news', 42) IS NOT NULL AS number_ok,
       attn_predict('news', '') IS NOT NULL AS empty_ok;
SELECT count(*) AS rows, sum(attn_predict('news', text) = label) AS correct FROM docs;
SELECT sum(attn_predict('news', text) = attn_predict(text)) AS same_as_default FROM docs;

-- attn_probs: all classes, most probable first, sum 1
SELECT label FROM attn_probs('news', 'Club wins the final in the stadium');
SELECT count(*) AS classes, abs(sum(probability) - 1) < 1e-5 AS sums_to_1,
       min(probability) >= 0 AS nonnegative
FROM attn_probs('news', 'Club wins the final in the stadium');
SELECT (SELECT label FROM attn_probs('news', text) LIMIT 1) = attn_predict('news', text) AS top_is_predict,
       count(*) AS n
FROM docs WHERE id <= 30 GROUP BY 1;

-- attn_weights: cleaned tokens (stop words dropped, lower case), byte spans, sum 1
SELECT position, token, start, "end",
       substr('Player WINS the cup (again) in the Stadium!', start + 1, "end" - start) AS span
FROM attn_weights('news', 'Player WINS the cup (again) in the Stadium!');
SELECT abs(sum(weight) - 1) < 1e-5 AS sums_to_1, min(weight) >= 0 AS nonnegative
FROM attn_weights('news', 'Player WINS the cup (again) in the Stadium!');
SELECT position, token, start IS NULL AS no_span, abs(weight - 1) < 1e-6 AS weight_1
FROM attn_weights('news', '');
SELECT count(*) AS rows FROM attn_weights('news', NULL);

-- attn_classify: id, label, probability, in the query's order, equal to attn_predict
SELECT * FROM attn_classify('news', 'SELECT id, text FROM docs WHERE id <= 3') WHERE 0;
SELECT count(*) AS rows, sum(c.label = attn_predict('news', d.text)) AS same_as_predict,
       sum(c.rowid = d.id) AS in_order, min(c.probability) > 0.34 AS confident,
       max(c.probability) <= 1 AS probability_ok
FROM attn_classify('news', 'SELECT id, text FROM docs ORDER BY id') AS c JOIN docs d ON d.id = c.id;
SELECT id, label FROM attn_classify('news', 'SELECT id, text FROM docs ORDER BY id DESC LIMIT 4');
SELECT id, label IS NULL AS null_label, probability IS NULL AS null_probability
FROM attn_classify('news', 'SELECT ''x'', NULL UNION ALL SELECT 7.5, ''New chip launched''');
SELECT abs(c.probability - p.probability) < 1e-5 AS same_as_probs
FROM attn_classify('news', 'SELECT 1, ''Stocks rally as investors cheer''') c,
     (SELECT probability FROM attn_probs('news', 'Stocks rally as investors cheer') LIMIT 1) p;

-- attn_evaluate: one row per class (sorted), then overall; attn_confusion: every pair of the
-- labels that occur in the rows (actual or predicted), zeros too
SELECT * FROM attn_evaluate('news', 'SELECT text, label FROM docs');
SELECT * FROM attn_confusion('news', 'SELECT text, label FROM docs');
-- one row of sports: its label and its prediction, not the model's other classes; every class
-- with all_labels
SELECT * FROM attn_confusion('news', 'SELECT text, label FROM docs WHERE id = 3');
SELECT count(*) AS all_labels FROM attn_confusion('news', 'SELECT text, label FROM docs WHERE id = 3',
  '{"all_labels":true}');
SELECT count(*) AS all_labels_false FROM attn_confusion('news',
  'SELECT text, label FROM docs WHERE id = 3', '{"all_labels":false}');
-- a label the model does not know and integer labels compared as text
SELECT label, precision, recall, support
FROM attn_evaluate('news', 'SELECT text, label FROM docs WHERE id <= 6 UNION ALL SELECT ''Player wins'', ''Weather''');
SELECT * FROM attn_confusion('news', 'SELECT text, label FROM docs WHERE id <= 6 UNION ALL SELECT ''Player wins'', ''Weather''') WHERE count > 0;

-- attn_deploy and attn_import return the version
SELECT attn_deploy('news', 1) AS deployed;
SELECT attn_import('copy', (SELECT weights FROM attn_models WHERE name = 'news')) AS imported;
SELECT name, version, deployed, json_extract(config, '$.hidden') AS hidden, labels, metrics IS NULL AS no_metrics
FROM attn_models ORDER BY name, version;
SELECT sum(attn_predict('copy', text) = attn_predict('news', text)) AS copy_agrees FROM docs;

