-- deploy.sql -- attn_deploy(name, 'best') and attn_deploy(name, 'previous') (ext/attn_deploy.c).
-- Three trained versions whose validation F1 is then set by hand (so the choice does not depend
-- on rounding), an imported one without metrics, and the errors.
.load ./attnext
.read tests/sql/docs.inc
.headers on
.bail off
SELECT attn_fit('news', 'SELECT text, label FROM docs',
  '{"epochs":1,"hidden":8,"embed_dim":8,"fc_hidden":8,"progress":false}') IS NOT NULL AS v1,
       attn_fit('news', 'SELECT text, label FROM docs',
  '{"epochs":1,"hidden":8,"embed_dim":8,"fc_hidden":8,"progress":false}') IS NOT NULL AS v2,
       attn_fit('news', 'SELECT text, label FROM docs',
  '{"epochs":1,"hidden":8,"embed_dim":8,"fc_hidden":8,"progress":false}') IS NOT NULL AS v3;
UPDATE attn_models SET metrics = json_set(metrics, '$.val_f1', CASE version WHEN 1 THEN 0.9
  WHEN 2 THEN 0.7 ELSE 0.8 END) WHERE name = 'news';
-- an imported version (metrics NULL) is never 'best', even deployed
SELECT attn_import('news', (SELECT weights FROM attn_models WHERE name = 'news' AND version = 2)) AS imported;

-- best: the highest val_f1 (version 1)
SELECT attn_deploy('news', 'best') AS best;
SELECT version, deployed FROM attn_models WHERE name = 'news' ORDER BY version;
-- previous: the one deployed before (the imported version 4), then back again (version 1)
SELECT attn_deploy('news', 'previous') AS previous;
SELECT attn_deploy('news', 'previous') AS previous_again;
-- a chain: 2, then 3, then previous is 2, then previous is 3
SELECT attn_deploy('news', 2) AS deploy, attn_deploy('news', 3) AS deploy;
SELECT attn_deploy('news', 'previous') AS previous;
SELECT attn_deploy('news', 'previous') AS previous;
-- ties: the latest version of the highest val_f1
UPDATE attn_models SET metrics = json_set(metrics, '$.val_f1', 0.9) WHERE name = 'news' AND version = 2;
SELECT attn_deploy('news', 'best') AS best_of_a_tie;
-- a metrics value that is not JSON, or has no number: not a candidate
UPDATE attn_models SET metrics = '{not json' WHERE name = 'news' AND version = 2;
UPDATE attn_models SET metrics = json_set(metrics, '$.val_f1', 'high') WHERE name = 'news' AND version = 1;
SELECT attn_deploy('news', 'best') AS best_left;
SELECT name, version, deployed FROM attn_models WHERE deployed ORDER BY name;
-- the integers work as before
SELECT attn_deploy('news', 1) AS one, attn_deploy('news', '2') AS two_as_text;

-- errors
SELECT attn_deploy('imp', 'best');
SELECT attn_import('imp', (SELECT weights FROM attn_models WHERE name = 'news' AND version = 2)) AS imported;
SELECT attn_deploy('imp', 'best');
SELECT attn_deploy('imp', 'previous');
SELECT attn_deploy('news', 'Best');
SELECT attn_deploy('news', 'latest');
SELECT attn_deploy('news', NULL);
SELECT attn_deploy('newz', 'previous');
