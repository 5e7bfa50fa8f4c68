-- thresholds.sql -- attn_predict(name, text, min_probability [, fallback]) and
-- attn_classify(name, query [, min_probability [, fallback]]): below the threshold a prediction
-- is NULL or the fallback value; the decisions of both functions agree with their probability.
-- The model is trained briefly on docs.inc so that its probabilities spread over (1/3, 1):
-- values that depend on rounding are checked as properties.
.load ./attnext
.headers on
.nullvalue NULL
.read tests/sql/docs.inc

SELECT count(*) AS epochs FROM attn_train('news', 'SELECT text, label FROM docs',
  json_object('epochs', 2, 'hidden', 8, 'embed_dim', 8, 'fc_hidden', 8, 'lr', 0.01,
              'progress', json('false')));

-- the arguments: attn_classify has two more, hidden
SELECT group_concat(name || iif(hidden, '*', ''), ' ') AS attn_classify_columns
FROM pragma_table_xinfo('attn_classify');
SELECT DISTINCT narg FROM pragma_function_list WHERE name = 'attn_predict' ORDER BY narg;

-- every row's probability, and a threshold between the lowest and the highest
CREATE TEMP TABLE p AS
SELECT id, label, probability FROM attn_classify('news', 'SELECT id, text FROM docs');
CREATE TEMP TABLE t AS
SELECT (SELECT probability FROM p ORDER BY probability LIMIT 1 OFFSET 150) AS threshold;
SELECT min(probability) < threshold AND threshold < max(probability) AS threshold_inside,
       sum(probability < threshold) BETWEEN 100 AND 200 AS some_below
FROM p, t;

-- attn_classify: below the threshold the label is NULL, the probability still reported
SELECT count(*) AS rows,
       sum(c.label IS NULL) = sum(c.probability < t.threshold) AS null_below,
       sum(c.label = p.label) = sum(c.probability >= t.threshold) AS label_at_or_above,
       sum(c.probability = p.probability) AS same_probability
FROM attn_classify('news', 'SELECT id, text FROM docs', (SELECT threshold FROM t)) AS c
JOIN p USING (id), t;
-- ... or the fallback, of any type, returned as given
SELECT sum(c.label = 'unknown') = sum(c.probability < t.threshold) AS fallback_below,
       sum(c.label = p.label) = sum(c.probability >= t.threshold) AS label_at_or_above
FROM attn_classify('news', 'SELECT id, text FROM docs', (SELECT threshold FROM t), 'unknown') AS c
JOIN p USING (id), t;
SELECT DISTINCT typeof(label) AS fallback_type
FROM attn_classify('news', 'SELECT id, text FROM docs', 1, -1);
SELECT DISTINCT label AS fallback_value
FROM attn_classify('news', 'SELECT id, text FROM docs', 1, -1);
-- 0 keeps every label; 1 keeps none short of a certain prediction
SELECT sum(c.label = p.label) AS kept_at_0
FROM attn_classify('news', 'SELECT id, text FROM docs', 0) AS c JOIN p USING (id);
SELECT sum(label IS NULL) = sum(probability < 1) AS none_at_1
FROM attn_classify('news', 'SELECT id, text FROM docs', 1);
-- a NULL text gives a NULL label, not the fallback; numbers as text read as numbers
SELECT id, label, probability FROM attn_classify('news', 'SELECT 1, NULL', 0.5, 'unknown');
SELECT count(*) AS rows, sum(label IS NULL) = sum(probability < 0.5) AS text_threshold_ok
FROM attn_classify('news', 'SELECT id, text FROM docs', '0.5');

-- attn_predict: the same decisions, away from the threshold's rounding. attn_predict runs the
-- single-row kernels and attn_classify the batched ones, whose probabilities agree to float
-- rounding only (OpenBLAS's sgemm or ours), so a row within 1e-5 of the threshold -- the row the
-- threshold was taken from among them -- may fall on either side and is left out; the
-- comparison at the threshold itself (>=) is attn_classify's above and 0 / 1 below.
SELECT sum(attn_predict('news', d.text, t.threshold) IS NULL) = sum(p.probability < t.threshold)
         AS predict_null_below,
       sum(attn_predict('news', d.text, t.threshold, 'unknown') = 'unknown')
         = sum(p.probability < t.threshold) AS predict_fallback_below,
       sum(attn_predict('news', d.text, t.threshold) = p.label)
         = sum(p.probability >= t.threshold) AS predict_label_at_or_above
FROM docs d JOIN p ON p.id = d.id, t
WHERE abs(p.probability - t.threshold) > 1e-5;
SELECT sum(attn_predict('news', text, 0) = attn_predict('news', text)) AS same_at_0,
       sum(attn_predict('news', text, 1, 7) = 7) AS fallback_at_1
FROM docs;
SELECT attn_predict('news', NULL, 0.5, 'unknown') AS null_text,
       typeof(attn_predict('news', 'Team wins the cup', 1, x'00')) AS blob_fallback,
       attn_predict('news', 'Team wins the cup', 1, NULL) AS null_fallback;

-- errors name the function and the argument
SELECT attn_predict('news', 'Team wins the cup', 1.5);
SELECT attn_predict('news', 'Team wins the cup', -0.1);
SELECT attn_predict('news', 'Team wins the cup', 1e999);
SELECT attn_predict('news', 'Team wins the cup', -1e999);
SELECT attn_predict('news', 'Team wins the cup', 'high');
SELECT attn_predict('news', 'Team wins the cup', NULL);
SELECT attn_predict('news', 'Team wins the cup', x'3f000000');
SELECT attn_predict('news', 'Team wins the cup', printf('%.60c', 'x'));
SELECT attn_predict('news', 'Team wins the cup', 0.5, 'unknown', 1);
SELECT attn_predict('newz', 'Team wins the cup', 0.5);
SELECT attn_predict('news', NULL, 2);
SELECT * FROM attn_classify('news', 'SELECT id, text FROM docs', 2);
SELECT * FROM attn_classify('news', 'SELECT id, text FROM docs', 'high', 'unknown');
SELECT * FROM attn_classify('news', 'SELECT id, text FROM docs', NULL);
SELECT * FROM attn_classify('news', 'SELECT id, text FROM docs', 0.5, 'unknown', 1);
SELECT * FROM attn_classify('news', 'SELECT id, text FROM docs') WHERE arg_fallback = 'unknown';
SELECT * FROM attn_classify('news');
