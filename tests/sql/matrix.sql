-- matrix.sql -- attn_matrix's kinds through the shell: 'dot' (the default), 'trainable' (query,
-- key and value layers drawn from a seed) and 'additive' (v . tanh(W q + U k)), the context
-- column, the seed argument and the errors. tests/test_matrix.py compares the weights with
-- PyTorch; here they are printed to 6 decimals.
.load ./attnext
.headers on
.nullvalue NULL
CREATE TABLE vec(word TEXT, vector BLOB);
-- 4 dimensions, little-endian float32: cat (1, 2, 3, 1), dog (0.5, 1, 2, 1.5),
-- the (0, 0.1, 0, 1), sat (-1, 0.5, 1, 0)
INSERT INTO vec VALUES ('cat', x'0000803f00000040000040400000803f'),
                       ('dog', x'0000003f0000803f000000400000c03f'),
                       ('the', x'00000000cdcccc3d000000000000803f'),
                       ('sat', x'000080bf0000003f0000803f00000000');

SELECT group_concat(name || iif(hidden, '*', ''), ' ') AS attn_matrix_columns
FROM pragma_table_xinfo('attn_matrix');

SELECT query_token, key_token, printf('%.6f', weight) AS dot
FROM attn_matrix('the cat sat', 'the dog', 'vec');
SELECT query_token, key_token, printf('%.6f', weight) AS trainable
FROM attn_matrix('the cat sat', 'the dog', 'vec', 'trainable', 7);
SELECT query_token, key_token, printf('%.6f', weight) AS additive
FROM attn_matrix('the cat sat', 'the dog', 'vec', 'additive', 7);
-- each query token's weights sum to 1, whatever the kind and the seed
SELECT kind, seed, count(*) AS rows, max(abs(total - 1)) < 1e-12 AS rows_sum_to_1
FROM (SELECT k.value AS kind, s.value AS seed, m.query_position, sum(m.weight) AS total
      FROM json_each('["dot", "trainable", "additive"]') AS k,
           json_each('[0, 1234, 9223372036854775807]') AS s,
           attn_matrix('the cat sat zebra', 'the dog cat', 'vec', k.value, s.value) AS m
      GROUP BY 1, 2, 3)
GROUP BY 1, 2 ORDER BY 1, 2;
-- the default seed is 1234; another seed, other weights; 'dot' has no layers to draw
SELECT (SELECT group_concat(weight) FROM attn_matrix('the cat', 'dog sat', 'vec', 'trainable'))
     = (SELECT group_concat(weight) FROM attn_matrix('the cat', 'dog sat', 'vec', 'trainable', 1234))
       AS default_1234,
       (SELECT group_concat(weight) FROM attn_matrix('the cat', 'dog sat', 'vec', 'additive', 1))
     != (SELECT group_concat(weight) FROM attn_matrix('the cat', 'dog sat', 'vec', 'additive', 2))
       AS seed_matters,
       (SELECT group_concat(weight) FROM attn_matrix('the cat', 'dog sat', 'vec', 'dot', 5))
     = (SELECT group_concat(weight) FROM attn_matrix('the cat', 'dog sat', 'vec'))
       AS dot_ignores_seed;
-- the context: one float32 vector per query token (the same on each of its rows), the
-- weighted sum of the values; under 'dot' a zero vector (zebra) attends uniformly, so its
-- context is the mean of the key vectors, (0.25, 0.55, 1, 1.25) in little-endian float32
SELECT query_token, count(DISTINCT context) AS contexts, min(length(context)) AS bytes
FROM attn_matrix('the cat sat', 'the dog', 'vec', 'trainable', 3) GROUP BY query_position;
SELECT DISTINCT hex(context) AS zebra_context FROM attn_matrix('zebra', 'the dog', 'vec');

-- the picture of each kind
SELECT kind, substr(svg, 1, 5) AS head,
       instr(svg, CASE kind WHEN 'dot' THEN 'Scaled dot-product attention'
                            WHEN 'trainable' THEN 'Trainable attention (query, key, value layers, seed 7)'
                            ELSE 'Additive attention (seed 7)' END) > 0 AS titled,
       (length(svg) - length(replace(svg, '</title></rect>', ''))) / 15 AS cells
FROM (SELECT k.value AS kind, attn_matrix_svg('the cat sat', 'the dog', 'vec', k.value, 7) AS svg
      FROM json_each('["dot", "trainable", "additive"]') AS k);

-- errors name the function and the argument
SELECT * FROM attn_matrix('the cat', 'dog', 'vec', 'cosine');
SELECT * FROM attn_matrix('the cat', 'dog', 'vec', 'trainable', -1);
SELECT * FROM attn_matrix('the cat', 'dog', 'vec', 'trainable', 2.5);
SELECT * FROM attn_matrix('the cat', 'dog', 'vec', 'additive', 'x');
SELECT * FROM attn_matrix('the cat', 'dog', 'vec', 'additive', NULL);
SELECT * FROM attn_matrix('the cat', 'dog', 'vec', 'additive', 1, 2);
SELECT attn_matrix_svg('the cat', 'dog', 'vec', 'additive', 1e300);
SELECT attn_matrix_svg('the cat', 'dog', 'vec', 'additive', 1, 2);
