/* test_golden_train.c -- the engine's training loop against PyTorch, on the fixtures in
 * tests/fixtures/golden_train/ (written by tests/gen_fixtures.py; its comment above
 * train_cases says what they hold).
 *
 * test_golden compares one network's forward, backward and Adam step; this test runs the
 * trainer itself (nn_trainer_epoch: its batches, its learning-rate schedule, its optimizer, an
 * ensemble's members) for 2 epochs of 2 batches and compares, with PyTorch's float64 loop over
 * the same batches:
 *   cosine                 lr_schedule "cosine": LambdaLR(lambda s: (1 + cos(pi s / S)) / 2)
 *                          stepped after every batch
 *   lazy_adam              torch.optim.SparseAdam for the rows of the word and subword tables
 *                          that the batch reads, torch.optim.Adam for every other parameter
 *   ensemble               2 networks, each learning from its own loss (their sum)
 *   cosine_lazy_ensemble   the three together
 *   dropouts               the default recipe's embed_dropout 0.5, word_dropout 0.2, dropout
 *                          0.5, with the engine's own draws: gen_fixtures.py ran this test with
 *                          --record (seed 1) and gave PyTorch the batches (words dropped to
 *                          <UNK>) and masks it recorded; here the engine must draw them again,
 *                          read from the workspace after each step, and then agree with PyTorch
 * all with subwords and label smoothing 0.1 (the default recipe's), class weights set, the
 * dropouts 0 but in `dropouts`. Compared: each step's learning rate (read from the optimizer
 * after the step), the running mean of the epoch's batch losses that the progress callback
 * gets, and every parameter after the 4 steps. The trainer starts as a warm start from a model
 * holding the fixture's parameters, with the vocabulary "tok2".."tok29" of tests/golden.h, so
 * the rows' words are the fixture's ids.
 *
 * The trainer shuffles: its rows have distinct lengths, so its sort by length fixes each
 * batch's rows and their order, and only the order of the 2 batches in an epoch is the
 * shuffle's. The test tries seeds 1, 2, ... until the trainer takes the batches in the
 * fixture's order (the progress callback stops a run at the first batch that differs), so the
 * check does not depend on how the engine draws its shuffles.
 *
 * Tolerance: test_golden's, |got - expected| <= 1e-6 or relative error <= 1e-4; linear
 * attention's attn.bias (a zero gradient up to rounding: Adam moves it by up to ~lr a step in a
 * direction rounding decides) with atol the sum of the learning rates.
 *
 *   build/tests/test_golden_train             every fixture of tests/fixtures/golden_train
 *   build/tests/test_golden_train FILE...     the given fixtures
 *   build/tests/test_golden_train --record OUT FILE
 *                          tests/gen_fixtures.py's: train on FILE with its seed, write each
 *                          step's batch and masks to OUT (record_step), compare nothing
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "golden.h"
#include "train.h"

#define TRAIN_FIXTURE_DIR "tests/fixtures/golden_train"
#define MAX_SEEDS 200 /* each seed takes the fixture's order with probability 1/4 */

static FILE *record_out; /* --record FILE: write the run's batches and masks there */

/* What the progress callback compares a run with, and what it records. */
typedef struct train_run {
  nn_trainer *tr;
  const int *tokens, *lengths, *labels; /* (S, B, T), (S, B), (S, B): the fixture's batches */
  const int *member_tokens;             /* (S, K, B, T) or NULL: see on_batch */
  int K;                                /* the model's members */
  int S, B, T;
  int step;           /* steps done */
  float *lrs;         /* (S) the learning rate of each step */
  double *train_loss; /* (S) the running mean the callback got */
  char mismatch[256]; /* why the run was stopped: the first batch that differs */
  /* the dropouts: the masks the fixture's PyTorch loop used, the engine's own draws recorded
   * by --record (NULL: none) */
  const float *emb_masks;  /* (S, K, B, T, E) embed_dropout, batch row order; 0 at padding */
  const float *head_masks; /* (S, K, B, F) dropout after fc1 */
  int E, F;
  float *emb_got, *head_got; /* (K, B, T, E), (K, B, F) this step's, gathered */
  double mask_diff;          /* the largest difference of a mask value */
  FILE *record;              /* --record: each step's batch and masks, see record_step */
} train_run;

/* The masks the step just drew, from the workspace's layout (model.c nn_workspace_prepare: row
 * j of the batch sorted by length is batch row order[j]; its position t is packed row
 * off[t] + j) into batch row order: emb (B, T, E), 0 at padding; head (B, F). A dropout at 0
 * has no mask: ones. */
static void gather_masks(const nn_workspace *ws, int E, int F, float *emb, float *head) {
  memset(emb, 0, sizeof(float) * (size_t)ws->B * ws->T * E);
  for (int j = 0; j < ws->B; j++) {
    int b = ws->order[j];
    for (int t = 0; t < ws->lens[j]; t++) {
      float *dst = emb + ((size_t)b * ws->T + t) * E;
      if (ws->emb_mask) memcpy(dst, ws->emb_mask + (size_t)(ws->off[t] + j) * E, sizeof *dst * E);
      else
        for (int e = 0; e < E; e++) dst[e] = 1.0f; /* embed_dropout 0: no mask */
    }
    if (ws->mask) memcpy(head + (size_t)b * F, ws->mask + (size_t)j * F, sizeof(float) * F);
    else
      for (int f = 0; f < F; f++) head[(size_t)b * F + f] = 1.0f;
  }
}

/* Member k's copy of the batch's tokens (B, T): its own words dropped (train.c make_batch). */
static const int *member_tokens(const train_run *r, int k) {
  return r->tr->current.tokens + (size_t)k * r->tr->member_stride;
}

/* --record: a step as int32 B, T, E, F, K, tokens (K, B, T) after word_dropout (0 at padding),
 * lengths (B), labels (B), then float32 lr, embed_dropout masks (K, B, T, E), dropout masks
 * (K, B, F); little-endian, read by tests/gen_fixtures.py's engine_record. */
static void record_step(train_run *r, const nn_batch *b) {
  int32_t head[5] = {b->B, b->T, r->E, r->F, r->K};
  fwrite(head, sizeof head, 1, r->record);
  for (int k = 0; k < r->K; k++)
    for (int i = 0; i < b->B * b->T; i++) {
      int32_t v = i % b->T < b->lengths[i / b->T] ? member_tokens(r, k)[i] : 0;
      fwrite(&v, sizeof v, 1, r->record);
    }
  for (int i = 0; i < b->B; i++) {
    int32_t v = b->lengths[i];
    fwrite(&v, sizeof v, 1, r->record);
  }
  for (int i = 0; i < b->B; i++) {
    int32_t v = b->labels[i];
    fwrite(&v, sizeof v, 1, r->record);
  }
  fwrite(&r->tr->adam.lr, sizeof(float), 1, r->record);
  fwrite(r->emb_got, sizeof(float), (size_t)r->K * b->B * b->T * r->E, r->record);
  fwrite(r->head_got, sizeof(float), (size_t)r->K * b->B * r->F, r->record);
}

static int on_batch(void *ctx, int done, int total, double loss, double rate) {
  (void)done, (void)total, (void)rate;
  train_run *r = ctx;
  const nn_batch *b = &r->tr->current;
  int s = r->step, B = b->B, T = b->T;
  for (int k = 0; r->emb_got && k < r->K; k++)
    gather_masks(nn_workspace_member(r->tr->shard_ws[0], k), r->E, r->F,
                 r->emb_got + (size_t)k * B * T * r->E, r->head_got + (size_t)k * B * r->F);
  if (r->record) {
    record_step(r, b);
    r->step++;
    return 0;
  }
  if (s >= r->S) {
    snprintf(r->mismatch, sizeof r->mismatch, "more than %d steps", r->S);
    return 1;
  }
  /* each member's tokens: the fixture's member_tokens (S, K, B, T) when it has them (an
   * ensemble with word_dropout), else batch_tokens (S, B, T) for every member */
  int same = B == r->B;
  for (int k = 0; k < r->K && same; k++) {
    const int *want = r->member_tokens ? r->member_tokens + (size_t)(s * r->K + k) * r->B * r->T
                                       : r->tokens + (size_t)s * r->B * r->T;
    for (int i = 0; same && i < B; i++) {
      int len = b->lengths[i];
      same = len == r->lengths[s * r->B + i] && b->labels[i] == r->labels[s * r->B + i];
      for (int t = 0; same && t < len; t++)
        same = member_tokens(r, k)[(size_t)i * T + t] == want[(size_t)i * r->T + t];
    }
  }
  if (!same) {
    snprintf(r->mismatch, sizeof r->mismatch,
             "step %d: the batch has %d rows, first of length %d, not the fixture's", s + 1, B,
             B > 0 ? b->lengths[0] : 0);
    return 1;
  }
  for (int k = 0; r->emb_masks && k < r->K; k++) /* the draws PyTorch was given */
    for (int i = 0; i < B; i++) {
      size_t row = ((size_t)s * r->K + k) * r->B + i; /* in the fixture's (S, K, B) */
      for (int t = 0; t < b->lengths[i]; t++)
        for (int e = 0; e < r->E; e++) {
          double d = fabs((double)r->emb_got[(((size_t)k * B + i) * T + t) * r->E + e] -
                          r->emb_masks[(row * r->T + t) * r->E + e]);
          if (d > r->mask_diff) r->mask_diff = d;
        }
      for (int f = 0; f < r->F; f++) {
        double d = fabs((double)r->head_got[((size_t)k * B + i) * r->F + f] -
                        r->head_masks[row * r->F + f]);
        if (d > r->mask_diff) r->mask_diff = d;
      }
    }
  r->lrs[s] = r->tr->adam.lr; /* set before the step, kept until the next batch's */
  r->train_loss[s] = loss;
  r->step++;
  return 0;
}

/* A vocabulary of V tokens "<PAD>", "<UNK>", "tok2", ... (tests/golden.h's). */
static nn_vocab *dummy_vocab(int V, char *err) {
  char **toks = calloc((size_t)V, sizeof *toks);
  int *lens = calloc((size_t)V, sizeof *lens);
  nn_vocab *vocab = NULL;
  int ok = toks && lens;
  for (int i = 0; ok && i < V; i++) {
    char buf[32];
    snprintf(buf, sizeof buf, "%s", i == 0 ? "<PAD>" : i == 1 ? "<UNK>" : "");
    if (i >= 2) snprintf(buf, sizeof buf, "tok%d", i);
    toks[i] = strdup(buf);
    ok = toks[i] != NULL;
    if (ok) lens[i] = (int)strlen(buf);
  }
  if (ok && nn_vocab_from_list(&vocab, (const char *const *)toks, lens, V, err) != NN_OK)
    vocab = NULL;
  for (int i = 0; toks && i < V; i++) free(toks[i]);
  free(toks);
  free(lens);
  return vocab;
}

/* Split s in place at every sep; *n pieces. */
static char **split(char *s, char sep, int *n) {
  int count = 1;
  for (char *p = s; *p; p++) count += *p == sep;
  char **out = malloc(sizeof *out * (size_t)count);
  if (!out) return NULL;
  int k = 0;
  out[k++] = s;
  for (char *p = s; *p; p++)
    if (*p == sep) {
      *p = '\0';
      out[k++] = p + 1;
    }
  *n = count;
  return out;
}

static int is_linear_attn_bias(const char *name) {
  size_t n = strlen(name);
  return n >= 9 && strcmp(name + n - 9, "attn.bias") == 0;
}

static void run_train_fixture(const char *path) {
  char err[NN_ERR_LEN] = "";
  size_t len = 0;
  unsigned char *blob = read_file(path, &len);
  nn_st_file fx;
  int have_fx = 0;
  nn_model *base = NULL;
  nn_trainer *tr = NULL;
  char *config_json = NULL, *texts_buf = NULL, *labels_buf = NULL;
  char **texts = NULL, **labels = NULL;
  int *tokens = NULL, *lengths = NULL, *batch_labels = NULL, *mtokens = NULL;
  float *weights = NULL, *want_lrs = NULL, *want_loss = NULL, *expected = NULL;
  float *emb_masks = NULL, *head_masks = NULL;
  train_run run;
  memset(&run, 0, sizeof run);
  const int failures_before = check_failures;
  int seed = 0;
  /* declared before the first goto: C11 has no declaration right after a label (clang, emcc) */
  char first_mismatch[256] = "";

  CHECK(blob != NULL, "%s: cannot read", path);
  if (!blob) goto done;
  int rc = nn_st_parse(&fx, blob, len, NULL, err);
  CHECK(rc == NN_OK, "%s: nn_st_parse: %s", path, err);
  if (rc != NN_OK) goto done;
  have_fx = 1;
  const char *case_name = nn_st_meta(&fx, "case");
  const char *meta_config = nn_st_meta(&fx, "config");
  const char *meta_train = nn_st_meta(&fx, "train");
  const char *meta_texts = nn_st_meta(&fx, "texts");
  const char *meta_labels = nn_st_meta(&fx, "labels");
  CHECK(case_name && meta_config && meta_train && meta_texts && meta_labels,
        "%s: metadata case/config/train/texts/labels missing", path);
  if (!case_name || !meta_config || !meta_train || !meta_texts || !meta_labels) goto done;

  /* the base model: the fixture's network and parameters */
  config_json = strdup(meta_config);
  if (!config_json) goto done;
  int C = take_num_classes(config_json);
  CHECK(C >= 2 && C <= 100, "%s: config num_classes %d", path, C);
  if (C < 2 || C > 100) goto done;
  nn_config cfg;
  test_config_base(&cfg);
  rc = nn_config_parse_json(&cfg, config_json, NULL, err);
  CHECK(rc == NN_OK, "%s: nn_config_parse_json(%s): %s", case_name, config_json, err);
  if (rc != NN_OK) goto done;
  cfg.device = NN_DEVICE_CPU;
  nn_vocab *vocab = dummy_vocab(cfg.vocab_size, err);
  CHECK(vocab != NULL, "%s: vocabulary: %s", case_name, err);
  if (!vocab) goto done;
  char names[100][8];
  const char *label_ptrs[100];
  for (int c = 0; c < C; c++) {
    snprintf(names[c], sizeof names[c], "%d", c);
    label_ptrs[c] = names[c];
  }
  rc = nn_model_create(&base, &cfg, vocab, label_ptrs, C, 1, err); /* takes vocab */
  CHECK(rc == NN_OK, "%s: nn_model_create: %s", case_name, err);
  if (rc != NN_OK) {
    base = NULL;
    goto done;
  }
  const int ntensors = nn_model_tensor_count(base);
  {
    float *params = nn_model_params(base);
    int nfixture = 0;
    for (int i = 0; i < fx.count; i++)
      nfixture += strncmp(fx.tensors[i].name, "batch_", 6) != 0 &&
                  strncmp(fx.tensors[i].name, "final.", 6) != 0 &&
                  strcmp(fx.tensors[i].name, "class_weights") != 0 &&
                  strcmp(fx.tensors[i].name, "emb_masks") != 0 &&
                  strcmp(fx.tensors[i].name, "head_masks") != 0 &&
                  strcmp(fx.tensors[i].name, "member_tokens") != 0 &&
                  strcmp(fx.tensors[i].name, "lrs") != 0 &&
                  strcmp(fx.tensors[i].name, "train_loss") != 0;
    CHECK(ntensors == nfixture, "%s: the model has %d tensors, PyTorch's state_dict %d", case_name,
          ntensors, nfixture);
    for (int i = 0; i < ntensors; i++) {
      nn_tensor_info info;
      nn_model_tensor(base, i, &info);
      const nn_st_tensor *t = nn_st_find(&fx, info.name);
      CHECK(t && t->dtype == NN_DTYPE_F32 && t->nbytes == info.size * 4,
            "%s: model tensor %s (%zu values) is not in PyTorch's state_dict as such", case_name,
            info.name, info.size);
      if (!t || t->dtype != NN_DTYPE_F32 || t->nbytes != info.size * 4) goto done;
      memcpy(params + info.offset, t->data, t->nbytes);
    }
  }

  /* the rows, the batches, the class weights */
  texts_buf = strdup(meta_texts);
  labels_buf = strdup(meta_labels);
  if (!texts_buf || !labels_buf) goto done;
  int n = 0, nlab = 0;
  texts = split(texts_buf, '\n', &n);
  labels = split(labels_buf, ',', &nlab);
  if (!texts || !labels) goto done;
  CHECK(n == nlab, "%s: %d texts, %d labels", case_name, n, nlab);
  if (n != nlab) goto done;
  int64_t ncw = 0, nlrs = 0, nloss = 0, count = 0, shape[2];
  weights = get_f32(&fx, "class_weights", &ncw);
  if (!weights || ncw != C) goto done;
  double class_weights[100];
  int label_lens[100];
  for (int c = 0; c < C; c++) {
    class_weights[c] = weights[c];
    label_lens[c] = (int)strlen(names[c]);
  }
  nn_config tcfg = *nn_model_config(base);
  rc = nn_config_parse_json(&tcfg, meta_train, NULL, err);
  CHECK(rc == NN_OK, "%s: training options %s: %s", case_name, meta_train, err);
  if (rc != NN_OK) goto done;
  tcfg.device = NN_DEVICE_CPU;
  run.E = cfg.embed_dim;
  run.F = cfg.fc_hidden > 0 ? cfg.fc_hidden : cfg.hidden * (cfg.bidirectional ? 2 : 1);
  run.K = cfg.ensemble > 1 ? cfg.ensemble : 1;
  if (tcfg.embed_dropout > 0 || tcfg.dropout > 0) {
    run.emb_got = malloc(sizeof(float) * (size_t)run.K * tcfg.batch_size * tcfg.max_len * run.E);
    run.head_got = malloc(sizeof(float) * (size_t)run.K * tcfg.batch_size * run.F);
    if (!run.emb_got || !run.head_got) goto done;
  }
  /* an explicit seed: the fixture's batches and masks are that seed's draws (--record) */
  int fixed_seed = strstr(meta_train, "\"seed\"") != NULL;
  if (record_out) {
    run.record = record_out;
    run.S = 1 << 20;
    goto train;
  }
  tokens = get_i64(&fx, "batch_tokens", &count, shape);
  const nn_st_tensor *bt = nn_st_find(&fx, "batch_tokens");
  lengths = get_i64(&fx, "batch_lengths", &count, NULL);
  batch_labels = get_i64(&fx, "batch_labels", &count, NULL);
  want_lrs = get_f32(&fx, "lrs", &nlrs);
  want_loss = get_f32(&fx, "train_loss", &nloss);
  if (!tokens || !lengths || !batch_labels || !weights || !want_lrs || !want_loss || !bt ||
      bt->ndim != 3)
    goto done;
  run.S = (int)bt->shape[0];
  run.B = (int)bt->shape[1];
  run.T = (int)bt->shape[2];
  CHECK(ncw == C && nlrs == run.S && nloss == run.S && count == (int64_t)run.S * run.B,
        "%s: fixture shapes", case_name);
  if (ncw != C || nlrs != run.S || nloss != run.S) goto done;
  run.tokens = tokens;
  run.lengths = lengths;
  run.labels = batch_labels;
  if (nn_st_find(&fx, "member_tokens")) {
    int64_t nm = 0;
    mtokens = get_i64(&fx, "member_tokens", &nm, NULL);
    CHECK(mtokens && nm == (int64_t)run.S * run.K * run.B * run.T, "%s: member_tokens shape",
          case_name);
    if (!mtokens || nm != (int64_t)run.S * run.K * run.B * run.T) goto done;
    run.member_tokens = mtokens;
  }
  run.lrs = calloc((size_t)run.S, sizeof *run.lrs);
  run.train_loss = calloc((size_t)run.S, sizeof *run.train_loss);
  if (!run.lrs || !run.train_loss) goto done;
  if (nn_st_find(&fx, "emb_masks")) {
    int64_t ne = 0, nh = 0;
    emb_masks = get_f32(&fx, "emb_masks", &ne);
    head_masks = get_f32(&fx, "head_masks", &nh);
    CHECK(emb_masks && head_masks && run.emb_got &&
              ne == (int64_t)run.S * run.K * run.B * run.T * run.E &&
              nh == (int64_t)run.S * run.K * run.B * run.F,
          "%s: mask shapes", case_name);
    if (!emb_masks || !head_masks || !run.emb_got) goto done;
    run.emb_masks = emb_masks;
    run.head_masks = head_masks;
  }

train:
  /* train: seeds until the trainer takes the fixture's batches in the fixture's order (or the
   * fixture's seed) */
  for (seed = 1; seed <= MAX_SEEDS; seed++) {
    if (!fixed_seed) tcfg.seed = (uint64_t)seed;
    nn_trainer_args args;
    memset(&args, 0, sizeof args);
    args.cfg = &tcfg;
    args.base = base;
    args.texts = (const char *const *)texts;
    args.labels = (const char *const *)labels;
    args.n = n;
    rc = nn_trainer_create(&tr, &args, err);
    CHECK(rc == NN_OK, "%s: nn_trainer_create: %s", case_name, err);
    if (rc != NN_OK) goto done;
    rc = nn_trainer_set_class_weights(tr, (const char *const *)label_ptrs, label_lens,
                                      class_weights, C, err);
    CHECK(rc == NN_OK, "%s: nn_trainer_set_class_weights: %s", case_name, err);
    if (rc != NN_OK) goto done;
    run.tr = tr;
    run.step = 0;
    run.mismatch[0] = '\0';
    CHECK(tr->shards == 1, "%s: %d shards: the masks are read from shard 0's workspace", case_name,
          tr->shards);
    nn_epoch_stats stats;
    while ((rc = nn_trainer_epoch(tr, &stats, on_batch, &run, err)) == NN_OK) {
    }
    if (rc == NN_DONE && (run.step == run.S || record_out)) break;
    CHECK(rc == NN_DONE || rc == NN_INTERRUPTED, "%s: nn_trainer_epoch: %s", case_name, err);
    if (rc != NN_DONE && rc != NN_INTERRUPTED) goto done;
    if (!first_mismatch[0])
      snprintf(first_mismatch, sizeof first_mismatch, "%s",
               run.mismatch[0] ? run.mismatch : "fewer steps");
    nn_trainer_free(tr);
    tr = NULL;
    if (fixed_seed) {
      seed = MAX_SEEDS + 1;
      break;
    }
  }
  if (fixed_seed)
    CHECK(seed <= MAX_SEEDS,
          "%s: with the fixture's seed the trainer forms other batches than the fixture's: a word "
          "dropped to something else than <UNK>, or the engine draws otherwise now (then "
          "/usr/bin/python3 tests/gen_fixtures.py --train remakes the fixture, checking what it "
          "draws): %s",
          case_name, first_mismatch);
  else
    CHECK(seed <= MAX_SEEDS,
          "%s: no seed in 1..%d makes the trainer take the fixture's batches (seed 1: %s)",
          case_name, MAX_SEEDS, first_mismatch);
  if (seed > MAX_SEEDS || record_out) goto done;
  if (run.emb_masks)
    CHECK(run.mask_diff == 0,
          "%s: the engine drew other dropout masks than when the fixture was made (max difference "
          "%g): a mask value other than 0 or 1 / keep, or the engine draws otherwise now (then "
          "/usr/bin/python3 tests/gen_fixtures.py --train remakes the fixture, checking what it "
          "draws)",
          case_name, run.mask_diff);

  /* what it did, against PyTorch */
  worst w_lr = {0, 0, 0}, w_loss = {0, 0, 0}, w_final = {0, 0, 0};
  double lr_sum = 0;
  for (int s = 0; s < run.S; s++) {
    char what[64];
    snprintf(what, sizeof what, "lrs[%d]", s);
    compare(&w_lr, what, &run.lrs[s], &want_lrs[s], 1, NULL, 0);
    float got = (float)run.train_loss[s];
    snprintf(what, sizeof what, "train_loss[%d]", s);
    compare(&w_loss, what, &got, &want_loss[s], 1, NULL, 0);
    lr_sum += want_lrs[s];
  }
  const float *final = nn_model_weights(tr->model);
  nn_model *model = tr->model;
  int nloose = 0;
  for (int i = 0; i < ntensors; i++) {
    nn_tensor_info info;
    nn_model_tensor(model, i, &info);
    char name[160];
    snprintf(name, sizeof name, "final.%s", info.name);
    int64_t ne = 0;
    free(expected);
    expected = get_f32(&fx, name, &ne);
    if (!expected || ne != (int64_t)info.size) continue;
    int loose = cfg.attention == NN_ATTN_LINEAR && is_linear_attn_bias(info.name);
    unsigned char flag = 1;
    unsigned char *mask = NULL;
    if (loose) { /* one value */
      mask = &flag;
      nloose += (int)ne;
    }
    compare(&w_final, name, final + info.offset, expected, ne, mask, lr_sum);
  }
  printf("%-22s seed %d%s; max rel err / max abs err: lrs %.2g/%.2g, train_loss %.2g/%.2g, "
         "final %.2g/%.2g (+%d attn.bias: max abs err %.2g)%s\n",
         case_name, seed, run.emb_masks ? ", the fixture's masks" : "", w_lr.rel, w_lr.abs,
         w_loss.rel, w_loss.abs, w_final.rel, w_final.abs, nloose, w_final.loose_abs,
         check_failures > failures_before ? "  FAILED" : "");

done:
  if (check_failures == failures_before && !tr) CHECK(0, "%s: not run", path);
  nn_trainer_free(tr);
  nn_model_free(base);
  if (have_fx) nn_st_free(&fx);
  free(blob);
  free(config_json);
  free(texts_buf);
  free(labels_buf);
  free(texts);
  free(labels);
  free(tokens);
  free(lengths);
  free(batch_labels);
  free(mtokens);
  free(weights);
  free(want_lrs);
  free(want_loss);
  free(expected);
  free(run.lrs);
  free(run.train_loss);
  free(run.emb_got);
  free(run.head_got);
  free(emb_masks);
  free(head_masks);
}

static int cmp_str(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

int main(int argc, char **argv) {
  (void)run_fixture; /* golden.h's one-network runner: test_golden's */
  const char *v = getenv("GOLDEN_VERBOSE");
  verbose = v && *v && strcmp(v, "0") != 0;
  printf("test_golden_train: the trainer vs PyTorch's loop; pass: |got - expected| <= %g or rel "
         "err <= %g (linear attention's attn.bias: atol the sum of the lrs).\n",
         ATOL, RTOL);
  if (argc == 4 && strcmp(argv[1], "--record") == 0) { /* tests/gen_fixtures.py's */
    record_out = fopen(argv[2], "wb");
    CHECK(record_out != NULL, "cannot write %s", argv[2]);
    if (record_out) {
      run_train_fixture(argv[3]);
      fclose(record_out);
    }
    return check_finish("test_golden_train");
  }
  if (argc > 1) {
    for (int i = 1; i < argc; i++) run_train_fixture(argv[i]);
    return check_finish("test_golden_train");
  }
  DIR *dir = opendir(TRAIN_FIXTURE_DIR);
  CHECK(dir != NULL, "cannot open %s (run from the repository root)", TRAIN_FIXTURE_DIR);
  if (!dir) return check_finish("test_golden_train");
  char *paths[64];
  int count = 0;
  struct dirent *e;
  while ((e = readdir(dir)) != NULL && count < 64) {
    size_t n = strlen(e->d_name);
    if (n <= 12 || strcmp(e->d_name + n - 12, ".safetensors") != 0) continue;
    size_t plen = strlen(TRAIN_FIXTURE_DIR) + n + 2;
    paths[count] = malloc(plen);
    if (!paths[count]) break;
    snprintf(paths[count], plen, "%s/%s", TRAIN_FIXTURE_DIR, e->d_name);
    count++;
  }
  closedir(dir);
  CHECK(count > 0, "no fixtures in %s: run /usr/bin/python3 tests/gen_fixtures.py --train",
        TRAIN_FIXTURE_DIR);
  qsort(paths, (size_t)count, sizeof *paths, cmp_str);
  for (int i = 0; i < count; i++) {
    run_train_fixture(paths[i]);
    free(paths[i]);
  }
  printf("%d fixtures\n", count);
  return check_finish("test_golden_train");
}
