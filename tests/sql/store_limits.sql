-- store_limits.sql -- a model larger than the connection's largest BLOB (SQLITE_LIMIT_LENGTH) is
-- refused before it trains, with its size, the limit and the options that make it large; a
-- file that still comes out too large (its header) is refused by size at the save, never as a
-- NULL weights column. Nothing is saved by any of them. A float16 model ("storage") is bounded
-- by its own 2 bytes a parameter.
.load ./attnext
.read tests/sql/docs.inc
-- before the query runs: the subword table alone is past the limit (the documented maximum of
-- subword_buckets with the default embed_dim makes a file past SQLite's 1 GB default)
SELECT attn_fit('n', 'SELECT text, label FROM docs', '{"subword_buckets":4194304}');
SELECT * FROM attn_train('n', 'SELECT text, label FROM docs', '{"hidden":4096,"layers":4}');
.limit length 20000
SELECT attn_fit('n', 'SELECT text, label FROM docs',
  '{"epochs":1,"hidden":8,"embed_dim":16,"fc_hidden":8,"progress":false}');
-- once the vocabulary is built, before the first epoch: 300 distinct words of 16 floats
SELECT attn_fit('n', 'SELECT text || '' w'' || id, label FROM docs',
  '{"epochs":1,"hidden":4,"embed_dim":16,"fc_hidden":0,"subword_buckets":0,"progress":false}');
-- "storage": "float16": 2 bytes a parameter, so the bound is half the float32 one's
SELECT attn_fit('n', 'SELECT text, label FROM docs',
  '{"epochs":1,"hidden":8,"embed_dim":16,"fc_hidden":8,"progress":false,"storage":"float16"}');
-- parameters that fit, a header (config, vocabulary, labels) that does not
.limit length 2500
SELECT attn_fit('n', 'SELECT text, label FROM docs',
  '{"epochs":1,"hidden":4,"embed_dim":8,"fc_hidden":0,"subword_buckets":0,"progress":false}');
.limit length 1000000000
SELECT count(*) AS saved FROM sqlite_master WHERE name = 'attn_models';
SELECT json_extract(attn_fit('n', 'SELECT text, label FROM docs',
  '{"epochs":1,"hidden":4,"embed_dim":8,"fc_hidden":0,"subword_buckets":0,"progress":false}'),
  '$.version') AS fits;
-- the 300-word model refused above at 20,000 bytes fits as float16
.limit length 20000
SELECT json_extract(attn_fit('n', 'SELECT text || '' w'' || id, label FROM docs',
  '{"epochs":1,"hidden":4,"embed_dim":16,"fc_hidden":0,"subword_buckets":0,"progress":false,
    "storage":"float16"}'), '$.version') AS fits_as_float16;
SELECT length(weights) < 20000 AS under_the_limit FROM attn_models WHERE name = 'n' AND version = 2;
