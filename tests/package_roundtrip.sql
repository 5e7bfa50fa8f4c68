-- package_roundtrip.sql -- what the package tests run once the extension is loaded from the
-- installed package (tests/test_package_*.sh): train a small model, predict, one line out.
CREATE TABLE docs(text, label);
WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i < 59)
INSERT INTO docs SELECT CASE i % 2 WHEN 0 THEN 'goal match team win ' ELSE 'chip phone cloud app ' END
       || (i % 7), CASE i % 2 WHEN 0 THEN 'sports' ELSE 'tech' END FROM n;
SELECT count(*) > 0 FROM attn_train('m', 'SELECT text, label FROM docs',
  '{"epochs":30,"lr":0.01,"hidden":16,"embed_dim":8,"fc_hidden":8,"vocab_size":40,"progress":false}');
SELECT 'roundtrip ' || attn_predict('m', 'goal match team win') || ' ' || attn_predict('m', 'chip phone cloud app');
