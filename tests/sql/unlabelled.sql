-- unlabelled rows (a NULL label) and attn_uncertain: which rows to label next
.load ./attnext
.headers on
.read tests/sql/docs.inc
-- 60 of the 300 rows lose their label: unlabelled rows, which the pretraining reads when it is
-- asked for (by default only from 5,000 unlabelled rows on: these are counted, not read); while
-- it runs, the recipe's subword tables are off
CREATE TABLE pool AS SELECT id, text, CASE WHEN id % 5 = 0 THEN NULL ELSE label END AS label
  FROM docs;
SELECT json_extract(j, '$.train_rows') AS train_rows, json_extract(j, '$.val_rows') AS val_rows,
       json_extract(j, '$.unlabelled_rows') AS unlabelled_rows,
       json_extract(j, '$.pretrain_epochs') AS pretrain_epochs,
       json_extract(j, '$.sized') AS sized, json_extract(j, '$.deployed') AS deployed
FROM (SELECT attn_fit('pool', 'SELECT text, label FROM pool',
  '{"hidden":8,"embed_dim":8,"fc_hidden":8,"progress":false,"pretrain_epochs":5}') AS j);
-- the same rows and options: the same bits (unlabelled rows included)
SELECT attn_fit('pool', 'SELECT text, label FROM pool',
  '{"hidden":8,"embed_dim":8,"fc_hidden":8,"progress":false,"pretrain_epochs":5,"deploy":"never"}') IS NOT NULL AS ok;
SELECT count(DISTINCT weights) AS distinct_weights, count(*) AS versions
  FROM attn_models WHERE name = 'pool';
-- "unlabelled": false skips them; "pretrain_epochs": 0 reads none
SELECT json_extract(j, '$.train_rows') AS train_rows, json_extract(j, '$.unlabelled_rows') AS unl, json_extract(j, '$.unlabelled_read') AS used
FROM (SELECT attn_fit('skip', 'SELECT text, label FROM pool',
  '{"hidden":8,"embed_dim":8,"fc_hidden":8,"progress":false,"unlabelled":false,"pretrain_epochs":5}') AS j);
SELECT json_extract(j, '$.train_rows') AS train_rows, json_extract(j, '$.unlabelled_rows') AS unl, json_extract(j, '$.unlabelled_read') AS used,
       json_extract(j, '$.sized') AS sized
FROM (SELECT attn_fit('nopre', 'SELECT text, label FROM pool',
  '{"hidden":8,"embed_dim":8,"fc_hidden":8,"progress":false,"pretrain_epochs":0,"epochs":3}') AS j);
-- 5,100 more texts without a label: the default recipe pretrains, its passes sized to the texts
CREATE TABLE big AS SELECT text, label FROM pool
  UNION ALL SELECT d.text || ' ' || n.value, NULL FROM docs d,
    json_each('[1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17]') n;
SELECT json_extract(j, '$.unlabelled_rows') AS unl, json_extract(j, '$.unlabelled_read') AS used,
       json_extract(j, '$.pretrain_epochs') AS pretrain_epochs, json_extract(j, '$.sized') AS sized
FROM (SELECT attn_fit('big', 'SELECT text, label FROM big',
  '{"hidden":8,"embed_dim":8,"fc_hidden":8,"progress":false,"epochs":3}') AS j);
SELECT json_extract(j, '$.unlabelled_rows') AS unl, json_extract(j, '$.unlabelled_read') AS used,
       json_extract(j, '$.sized') AS sized
FROM (SELECT attn_fit('big', 'SELECT text, label FROM big',
  '{"hidden":8,"embed_dim":8,"fc_hidden":8,"progress":false,"epochs":3,"pretrain_epochs":0}') AS j);
-- which rows to label next: the least sure first, by margin
SELECT count(*) AS rows, sum(margin >= 0 AND margin <= 1) AS margins_in_range,
       sum(probability >= 0.3 AND probability <= 1) AS probabilities_in_range,
       sum(entropy >= 0 AND entropy <= 1.0987) AS entropies_in_range
  FROM attn_uncertain('pool', 'SELECT id, text FROM pool WHERE label IS NULL');
SELECT count(*) AS out_of_order
  FROM (SELECT margin, entropy, lag(margin) OVER (ORDER BY rowid) AS m0,
               lag(entropy) OVER (ORDER BY rowid) AS e0
          FROM attn_uncertain('pool', 'SELECT id, text FROM pool WHERE label IS NULL'))
 WHERE margin < m0 OR (margin = m0 AND entropy > e0);
SELECT u.label = attn_predict('pool', p.text) AS same_as_predict, count(*) AS n
  FROM attn_uncertain('pool', 'SELECT id, text FROM pool WHERE label IS NULL') u
  JOIN pool p ON p.id = u.id GROUP BY 1;
SELECT typeof(id) AS id_type, count(*) AS n
  FROM attn_uncertain('pool', 'SELECT ''row'' || id, text FROM pool WHERE id <= 3') GROUP BY 1;
SELECT * FROM attn_uncertain('pool', 'SELECT id, text FROM pool WHERE 0');
SELECT * FROM attn_uncertain('pool', 'SELECT NULL, text FROM pool');
SELECT * FROM attn_uncertain('pool', 'SELECT id, NULL FROM pool');
SELECT * FROM attn_uncertain('nope', 'SELECT id, text FROM pool');
SELECT * FROM attn_uncertain('pool', 'SELECT id FROM pool');
SELECT * FROM attn_uncertain('pool', 'DELETE FROM pool');
SELECT * FROM attn_uncertain('pool');
-- a diverse batch first (BADGE's order): every row once, with the margin order's figures
SELECT count(*) AS rows, count(DISTINCT id) AS ids
  FROM attn_uncertain('pool', 'SELECT id, text FROM pool WHERE label IS NULL', '{"diverse": 10}');
SELECT count(*) AS changed FROM (
  SELECT id, label, probability, margin, entropy FROM attn_uncertain('pool',
    'SELECT id, text FROM pool WHERE label IS NULL', '{"diverse": 10, "seed": 3}')
  EXCEPT SELECT id, label, probability, margin, entropy FROM attn_uncertain('pool',
    'SELECT id, text FROM pool WHERE label IS NULL'));
SELECT * FROM attn_uncertain('pool', 'SELECT id, text FROM pool', '{"diverse": true}');
