-- demo.sql -- the attnext tour that `make demo` runs: train a headline classifier on the bundled
-- data/headlines.csv, evaluate it, predict new headlines and look at its attention.
--
--   make demo                                   (builds attnext.so, then:)
--   rm -f demo.db && sqlite3 -bail demo.db < sql/demo.sql
--
-- Runs from the repository root (paths are relative to it). The headlines are invented by
-- data/make_headlines.py; the same steps on AG News itself are in sql/TUTORIAL.md.
.bail on
.headers on
.mode box --wrap 0
.load ./attnext

.print
.print '== 1. Import data/headlines.csv (800 invented headlines, 4 categories)'
.import --csv data/headlines.csv headlines
.import --csv data/new_headlines.csv new_headlines
-- Hold out every fifth row for the evaluation; training never sees it.
CREATE TABLE test_headlines AS SELECT title, category FROM headlines WHERE rowid % 5 = 0;
DELETE FROM headlines WHERE rowid % 5 = 0;
SELECT category, count(*) AS train, (SELECT count(*) FROM test_headlines t
                                     WHERE t.category = h.category) AS test
FROM headlines h GROUP BY category ORDER BY category;

.print
.print '== 2. Train: one row per epoch (15% of the training rows are the validation split)'
.print "SELECT * FROM attn_train('news', 'SELECT title, category FROM headlines', json_object(...));"
SELECT epoch, printf('%.4f', train_loss) AS train_loss, printf('%.4f', val_loss) AS val_loss,
       printf('%.3f', val_accuracy) AS val_accuracy, printf('%.3f', val_f1) AS val_f1,
       lr, printf('%.2f', seconds) AS seconds, CASE WHEN best THEN '*' ELSE '' END AS best
FROM attn_train('news', 'SELECT title, category FROM headlines',
                json_object('cell', 'gru', 'embed_dim', 64, 'hidden', 64, 'fc_hidden', 64,
                            'epochs', 20, 'batch_size', 16, 'lr', 0.002, 'patience', 5,
                            'seed', 1234));
.print 'The model store: one row per version, the deployed one predicts.'
SELECT name, version, deployed, created_at, json_array_length(labels) AS classes,
       length(weights) AS weight_bytes
FROM attn_models;

.print
.print '== 3. Evaluate on the 160 held-out headlines'
SELECT label, printf('%.3f', precision) AS precision, printf('%.3f', recall) AS recall,
       printf('%.3f', f1) AS f1, support
FROM attn_evaluate('news', 'SELECT title, category FROM test_headlines');
.print 'Confusion matrix (rows: actual, columns: predicted), from attn_confusion:'
SELECT actual,
       sum(CASE predicted WHEN 'Business' THEN count ELSE 0 END) AS Business,
       sum(CASE predicted WHEN 'Sci/Tech' THEN count ELSE 0 END) AS "Sci/Tech",
       sum(CASE predicted WHEN 'Sports' THEN count ELSE 0 END) AS Sports,
       sum(CASE predicted WHEN 'World' THEN count ELSE 0 END) AS World
FROM attn_confusion('news', 'SELECT title, category FROM test_headlines')
GROUP BY actual ORDER BY actual;

.print
.print '== 4. Predict 40 new headlines (data/new_headlines.csv, not in the training data)'
SELECT title, category AS expected, attn_predict('news', title) AS predicted,
       CASE WHEN attn_predict('news', title) = category THEN '' ELSE 'x' END AS miss
FROM new_headlines;
.print 'The same in one batched call, attn_classify:'
SELECT count(*) AS headlines, sum(c.label = n.category) AS correct,
       printf('%.3f', avg(c.probability)) AS mean_probability
FROM attn_classify('news', 'SELECT rowid, title FROM new_headlines') AS c
JOIN new_headlines AS n ON n.rowid = c.id;

.print
.print '== 5. Class probabilities of one headline: attn_probs'
SELECT label, printf('%.4f', probability) AS probability
FROM attn_probs('news', 'Kessler Trucks shares tumble after third-quarter loss');

.print
.print '== 6. Attention: which words the model read (stop words are already removed)'
SELECT position, token, printf('%.3f', weight) AS weight, start, "end",
       substr('##################################################', 1,
              CAST(round(weight * 50) AS INTEGER)) AS ""
FROM attn_weights('news', 'Glenwood Hawks striker Okafor scores twice in cup final');
SELECT position, token, printf('%.3f', weight) AS weight, start, "end",
       substr('##################################################', 1,
              CAST(round(weight * 50) AS INTEGER)) AS ""
FROM attn_weights('news', 'Astronomers find water ice on a distant moon of Saturn (AP)');

.print
.print '== 7. attn_predict(text) with one argument uses the most recently deployed model'
SELECT attn_predict('Central bank raises rates as inflation climbs') AS business,
       attn_predict('Rebels seize border town after week of fighting') AS world;

.print
.print '== 8. The build: attn_version()'
.mode list
.headers off
SELECT attn_version();
.print
.print 'demo.db now holds the model: sqlite3 demo.db, then .load ./attnext and try your own.'
