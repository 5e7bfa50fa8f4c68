-- embed.sql -- attn_embed(name, text) through the shell: a BLOB of hidden x directions (x
-- members) little-endian float32 (the layout sqlite-vec reads), the same bytes for the same
-- text, NULL for NULL, the errors. tests/test_embed.py compares the vector with PyTorch's and searches it
-- with sqlite-vec.
.load ./attnext
.headers on
.nullvalue NULL
.read tests/sql/docs.inc

SELECT count(*) AS epochs FROM attn_train('news', 'SELECT text, label FROM docs',
  json_object('epochs', 3, 'hidden', 8, 'embed_dim', 8, 'fc_hidden', 8, 'bidirectional',
              json('true'), 'progress', json('false')));
SELECT count(*) AS epochs FROM attn_train('uni', 'SELECT text, label FROM docs',
  json_object('epochs', 1, 'hidden', 5, 'embed_dim', 4, 'cell', 'lstm', 'attention', 'self',
              'progress', json('false')));

SELECT typeof(attn_embed('news', 'Team wins the cup')) AS type,
       length(attn_embed('news', 'Team wins the cup')) AS bytes,
       length(attn_embed('uni', 'Team wins the cup')) AS uni_bytes,
       attn_embed('news', NULL) AS null_text,
       length(attn_embed('news', '')) AS empty_bytes,
       attn_embed('news', '') = attn_embed('news', 'qqqq') AS empty_is_unk,
       attn_embed('news', 7) = attn_embed('news', '7') AS number_as_text;
-- an ensemble: its members' contexts side by side, hidden x directions x members (8 x 2 x 3 x
-- 4 bytes), as REFERENCE.md says
SELECT count(*) AS epochs FROM attn_train('ens', 'SELECT text, label FROM docs',
  json_object('epochs', 1, 'hidden', 8, 'embed_dim', 8, 'fc_hidden', 8, 'bidirectional',
              json('true'), 'ensemble', 3, 'progress', json('false')));
SELECT length(attn_embed('ens', 'Team wins the cup')) AS ensemble_bytes;
-- the same text gives the same bytes; different classes give different vectors
SELECT count(*) AS rows, count(DISTINCT attn_embed('news', text)) = count(DISTINCT text) AS distinct_ok,
       sum(attn_embed('news', text) = attn_embed('news', text)) AS same_bytes,
       min(length(attn_embed('news', text))) = 64 AND max(length(attn_embed('news', text))) = 64 AS all_64
FROM docs;
-- little-endian float32: no number is a NaN or an infinity (the exponent's bits, the low 7 of
-- byte 4 and the high one of byte 3 of each number, all set); the sign bits vary
WITH RECURSIVE i(k) AS (SELECT 0 UNION ALL SELECT k + 1 FROM i WHERE k < 15),
     v(b) AS (SELECT attn_embed('news', 'Stocks rally as investors cheer'))
SELECT sum(hex(substr(b, 4 * k + 3, 2)) GLOB '[89A-F]?[7F]F') AS non_finite,
       count(DISTINCT substr(hex(substr(b, 4 * k + 4, 1)), 1, 1) GLOB '[89A-F]') AS signs
FROM v, i;

SELECT attn_embed('newz', 'x');
SELECT attn_embed('', 'x');
SELECT attn_embed(NULL, 'x');
SELECT attn_embed('news');
SELECT attn_embed('news', 'x', 'y');
