-- store_edges.sql -- the model store with some of its tables missing or emptied by hand: the
-- next save still works, and never gives a version number that a table of the store still
-- names.
.load ./attnext
.read tests/sql/docs.inc
.headers on
CREATE VIEW opts(o) AS SELECT
  '{"epochs":1,"hidden":8,"embed_dim":8,"fc_hidden":8,"progress":false}';
SELECT json_extract(attn_fit('n', 'SELECT text, label FROM docs', o), '$.version') AS first
  FROM opts;

-- attn_models dropped (the docs call the store's tables ordinary tables): trains again, past
-- the versions its log and attn_versions remember
DROP TABLE attn_models;
SELECT json_extract(attn_fit('n', 'SELECT text, label FROM docs', o), '$.version') AS after_drop
  FROM opts;

-- only attn_versions (as a fresh database holding schema.sql's attn_versions alone)
DROP TABLE attn_models; DROP TABLE attn_training_log; DROP TABLE attn_lineage;
SELECT json_extract(attn_fit('n', 'SELECT text, label FROM docs', o), '$.version') AS versions_only
  FROM opts;
DROP TABLE attn_models; DROP TABLE attn_versions; DROP TABLE attn_lineage;
SELECT json_extract(attn_fit('n', 'SELECT text, label FROM docs', o), '$.version') AS log_only
  FROM opts;
SELECT name, version FROM attn_models ORDER BY version;

-- a version's rows deleted everywhere but attn_lineage (the history): its number is not given
-- again, and its lineage row is not replaced
DELETE FROM attn_models; DELETE FROM attn_training_log; DELETE FROM attn_versions;
SELECT json_extract(attn_fit('n', 'SELECT text, label FROM docs', o), '$.version') AS lineage_only
  FROM opts;
SELECT version, function FROM attn_lineage ORDER BY version;
