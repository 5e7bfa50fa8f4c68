-- versions.sql -- versioning, attn_deploy, the default model, and the per-connection model
-- cache: a new deployment, a new version or a deleted row is seen by the next statement of
-- every connection (here two connections to one file, with the shell's .connection), also
-- after ROLLBACK and ROLLBACK TO. Version 1 is trained on the labels as given, version 2 on
-- upper-cased labels, so a prediction shows which version answered.
.load ./attnext
.read tests/sql/docs.inc
.headers on
SELECT count(*) AS epochs FROM attn_train('news', 'SELECT text, label FROM docs',
  '{"epochs":15,"hidden":16,"embed_dim":16,"fc_hidden":16,"lr":0.01,"progress":false}');
SELECT attn_predict('news', 'Team wins the cup') AS v1;
SELECT count(*) AS epochs FROM attn_train('news', 'SELECT text, upper(label) FROM docs',
  '{"epochs":15,"hidden":16,"embed_dim":16,"fc_hidden":16,"lr":0.01,"progress":false}');
SELECT name, version, deployed, deployed_seq FROM attn_models ORDER BY name, version;
SELECT version, count(*) AS log_rows FROM attn_training_log GROUP BY version;
SELECT attn_predict('news', 'Team wins the cup') AS v2_deployed;

-- roll back and forward
SELECT attn_deploy('news', 1) AS deploy;
SELECT attn_predict('news', 'Team wins the cup') AS v1_again, attn_predict('Team wins the cup') AS default_model;
SELECT name, version, deployed FROM attn_models ORDER BY name, version;
SELECT attn_deploy('news', 2) AS deploy;
SELECT DISTINCT attn_predict('news', text) AS labels_v2 FROM docs ORDER BY 1;

-- the default model is the most recently deployed one, whatever its name
SELECT count(*) AS epochs FROM attn_train('other', 'SELECT text, lower(label) FROM docs',
  '{"epochs":15,"hidden":16,"embed_dim":16,"fc_hidden":16,"lr":0.01,"progress":false}');
SELECT attn_predict('Team wins the cup') AS default_is_other;
SELECT attn_deploy('news', 1) AS deploy;
SELECT attn_predict('Team wins the cup') AS default_is_news_v1;
SELECT DISTINCT attn_predict(text) AS default_over_rows FROM docs WHERE id <= 3 ORDER BY 1;

-- inside a transaction: a deployment is seen at once, and ROLLBACK / ROLLBACK TO undo it
BEGIN;
SELECT attn_deploy('news', 2) AS deploy;
SELECT attn_predict('news', 'Team wins the cup') AS in_txn_v2, attn_predict('Team wins the cup') AS default_v2;
SELECT DISTINCT attn_predict(text) AS default_over_rows_v2 FROM docs WHERE id <= 3 ORDER BY 1;
ROLLBACK;
SELECT attn_predict('news', 'Team wins the cup') AS after_rollback_v1;
SELECT DISTINCT attn_predict(text) AS default_over_rows_v1 FROM docs WHERE id <= 3 ORDER BY 1;
BEGIN;
SELECT attn_predict('news', 'Team wins the cup') AS before_savepoint_v1;
SAVEPOINT s;
UPDATE attn_models SET deployed = (version = 2) WHERE name = 'news';
SELECT DISTINCT attn_predict('news', text) AS in_savepoint_v2 FROM docs WHERE id <= 3 ORDER BY 1;
ROLLBACK TO s;
SELECT DISTINCT attn_predict('news', text) AS after_rollback_to_v1 FROM docs WHERE id <= 3 ORDER BY 1;
COMMIT;

-- a second connection to the same file
.connection 1
.open test.db
.load ./attnext
SELECT attn_predict('news', 'Team wins the cup') AS conn1_v1, attn_predict('Team wins the cup') AS conn1_default;
.connection 0
SELECT attn_deploy('news', 2) AS conn0_deploys;
.connection 1
SELECT attn_predict('news', 'Team wins the cup') AS conn1_sees_v2, attn_predict('Team wins the cup') AS conn1_default;
SELECT DISTINCT attn_predict('news', text) AS conn1_rows_v2 FROM docs WHERE id <= 3 ORDER BY 1;
.connection 0
-- a new version trained on the first connection
SELECT count(*) AS epochs FROM attn_train('news', 'SELECT text, lower(label) FROM docs',
  '{"epochs":15,"hidden":16,"embed_dim":16,"fc_hidden":16,"lr":0.01,"progress":false}');
.connection 1
SELECT DISTINCT attn_predict('news', text) AS conn1_rows_v3 FROM docs WHERE id <= 3 ORDER BY 1;
SELECT label FROM attn_probs('news', 'Team wins the cup') LIMIT 1;
.connection 0
-- a deleted row, then a different model written again: under a new number (4), since a version
-- number is never given twice, even once deleted (attn_versions)
DELETE FROM attn_models WHERE name = 'news' AND version = 3;
.connection 1
SELECT attn_predict('news', 'Team wins the cup') AS conn1_deleted;
SELECT DISTINCT attn_predict('news', text) AS conn1_deleted_rows FROM docs;
SELECT * FROM attn_probs('news', 'Team wins the cup');
.connection 0
SELECT attn_import('news', (SELECT weights FROM attn_models WHERE name = 'news' AND version = 1)) AS reimported;
.connection 1
SELECT DISTINCT attn_predict('news', text) AS conn1_reimported_v3 FROM docs WHERE id <= 3 ORDER BY 1;
SELECT attn_predict('Team wins the cup') AS conn1_default_v3;
.connection 0
DELETE FROM attn_models;
.connection 1
SELECT attn_predict('Team wins the cup') AS conn1_no_default;
.connection 0
SELECT attn_predict('Team wins the cup') AS conn0_no_default;
SELECT attn_deploy('news', 1);
