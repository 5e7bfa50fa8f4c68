-- curve.sql -- attn_curve(name, query [, thresholds]) and attn_curve_svg(name, query) through
-- the shell: the columns, one row per distinct probability of each class (descending), the
-- counts adding up, the last row of each class predicting every row, given thresholds, the
-- picture and the errors. Values that depend on rounding are checked as properties
-- (tests/test_curve_sql.py compares the rows with scikit-learn).
.load ./attnext
.headers on
.nullvalue NULL
.read tests/sql/docs.inc

SELECT count(*) AS epochs FROM attn_train('news', 'SELECT text, label FROM docs',
  json_object('epochs', 15, 'hidden', 16, 'embed_dim', 16, 'fc_hidden', 16, 'lr', 0.01,
              'progress', json('false')));

SELECT group_concat(name || iif(hidden, '*', ''), ' ') AS attn_curve_columns
FROM pragma_table_xinfo('attn_curve');

-- every distinct probability of each class, highest first; the counts of each row add up
CREATE TEMP TABLE c AS
SELECT rowid AS r, * FROM attn_curve('news', 'SELECT text, label FROM docs');
SELECT label, count(*) BETWEEN 2 AND 300 AS points_ok,
       sum(true_positives + false_negatives = 100) = count(*) AS positives_100,
       sum(false_positives + true_negatives = 200) = count(*) AS negatives_200,
       min(threshold) > 0 AND max(threshold) < 1 AS thresholds_inside
FROM c GROUP BY label ORDER BY label;
SELECT count(*) AS rows_out_of_order FROM c AS a JOIN c AS b ON b.r = a.r + 1 AND b.label = a.label
WHERE NOT (b.threshold < a.threshold AND b.true_positives >= a.true_positives
           AND b.false_positives >= a.false_positives
           AND b.true_positives + b.false_positives > a.true_positives + a.false_positives);
-- rates from the counts: recall = tp / 100, false_positive_rate = fp / 200, precision, f1
SELECT sum(abs(recall - true_positives / 100.0) < 1e-12
           AND abs(false_positive_rate - false_positives / 200.0) < 1e-12
           AND abs(precision - true_positives * 1.0 / (true_positives + false_positives)) < 1e-12
           AND abs(f1 - 2.0 * true_positives / (2 * true_positives + false_positives + false_negatives)) < 1e-12)
         = count(*) AS rates_ok
FROM c;
-- the lowest threshold of a class predicts it for every row: recall 1, false_positive_rate 1
SELECT label, recall, false_positive_rate, true_positives, false_positives
FROM c WHERE r IN (SELECT max(r) FROM c GROUP BY label) ORDER BY label;
-- the model separates the classes: one threshold with recall 1 and no false positive each
SELECT label, max(recall = 1 AND false_positive_rate = 0) AS separable FROM c GROUP BY label;
-- the rows' probabilities: attn_classify's top class is one of the thresholds of its label
SELECT count(*) AS rows, sum(exists(SELECT 1 FROM c WHERE c.label = k.label
                                     AND abs(c.threshold - k.probability) < 1e-5)) AS found
FROM attn_classify('news', 'SELECT id, text FROM docs') AS k;

-- given thresholds: one row each per class, in the order given
SELECT label, threshold, recall, false_positive_rate, precision, true_positives,
       false_positives, true_negatives, false_negatives
FROM attn_curve('news', 'SELECT text, label FROM docs', '[0.5, 0, 1]');
SELECT label, threshold, true_positives, false_positives
FROM attn_curve('news', 'SELECT text, label FROM docs WHERE id <= 9', 0.5);
-- a class with no rows in the query: recall, f1 NULL; rows of one class: no false positives
SELECT label, recall, f1, false_positive_rate, true_positives, false_positives
FROM attn_curve('news', 'SELECT text, label FROM docs WHERE label = ''Sports''', '[0.5]');

-- attn_curve_svg: one ROC and one precision-recall line per class, a legend with the areas
SELECT substr(svg, 1, 5) AS head, svg LIKE '%</svg>' || char(10) AS closed,
       (length(svg) - length(replace(svg, '<polyline', ''))) / 9 AS polylines,
       svg LIKE '%Business: AUC 1.0000, average precision 1.0000 (100 rows)%' AS legend_ok
FROM (SELECT attn_curve_svg('news', 'SELECT text, label FROM docs') AS svg);

-- errors name the function and the argument, and quote a number as it reads back
SELECT * FROM attn_curve('news', 'SELECT text, label FROM docs', 1.5);
SELECT * FROM attn_curve('news', 'SELECT text, label FROM docs', 1.0000000000000002);
SELECT * FROM attn_curve('news', 'SELECT text, label FROM docs', '[0.5, 1.0000000000000002]');
SELECT * FROM attn_curve('news', 'SELECT text, label FROM docs', -0.1);
SELECT attn_predict('news', 'Team wins the cup', 1.0000000000000002);
SELECT * FROM attn_curve('news', 'SELECT text, label FROM docs', '[0.2, -1]');
SELECT * FROM attn_curve('news', 'SELECT text, label FROM docs', '[0.2, null]');
SELECT * FROM attn_curve('news', 'SELECT text, label FROM docs', '{"t": 0.5}');
SELECT * FROM attn_curve('news', 'SELECT text, label FROM docs', '[]');
SELECT * FROM attn_curve('news', 'SELECT text, label FROM docs', NULL);
SELECT * FROM attn_curve('news', 'SELECT text, label FROM docs', x'00');
SELECT * FROM attn_curve('news', 'SELECT text, label FROM docs WHERE 0');
SELECT * FROM attn_curve('news', 'SELECT text, ''Weather'' FROM docs');
SELECT * FROM attn_curve('news', 'SELECT text FROM docs');
SELECT * FROM attn_curve('news', 'SELECT text, NULL FROM docs');
SELECT * FROM attn_curve('newz', 'SELECT text, label FROM docs');
SELECT * FROM attn_curve('news');
SELECT attn_curve_svg('news', 'SELECT text, label FROM docs WHERE 0');
SELECT attn_curve_svg(NULL, 'SELECT text, label FROM docs');
SELECT attn_curve_svg('news', 'INSERT INTO docs VALUES (1000, ''x'', ''Sports'')');
