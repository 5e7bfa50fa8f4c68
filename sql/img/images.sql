-- images.sql -- the pictures the documents show (ext/REFERENCE.md, sql/TUTORIAL.md), drawn by
-- attnext itself from the model that `make demo` trains (sql/demo.sql -> demo.db). From the
-- repository root:
--   make demo && sqlite3 demo.db < sql/img/images.sql
.bail on
.load ./attnext
SELECT writefile('sql/img/heatmap.svg',
                 attn_heatmap_svg('news', 'Glenwood Hawks striker Okafor scores twice in cup final'));
SELECT writefile('sql/img/heatmap_occlusion.svg',
                 attn_heatmap_svg('news', 'Glenwood Hawks striker Okafor scores twice in cup final',
                              'occlusion'));
SELECT writefile('sql/img/heatmap_rows.svg',
                 attn_heatmap_query_svg('news', 'SELECT title FROM new_headlines WHERE rowid IN (1, 11, 21, 31, 5, 15)'));
SELECT writefile('sql/img/training.svg', attn_training_svg('news'));
SELECT writefile('sql/img/curve.svg',
                 attn_curve_svg('news', 'SELECT title, category FROM test_headlines'));
