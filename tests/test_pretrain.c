/* test_pretrain.c -- learning from unlabelled rows (engine/pretrain.c) and the default recipe
 * sized to the data (nn_config_size_to_data):
 *   - one skip-gram pair's steps against central differences of its loss (double), for a
 *     positive and a negative pair
 *   - on a corpus of two topics, the words of a topic that no labelled row holds end up nearer
 *     the other words of their topic than the words of the other topic (mean cosine)
 *   - the unlabelled rows' words join the vocabulary, the validation rows' do not; without
 *     pretraining the unlabelled rows are not read at all
 *   - the same seed gives the same bits at 1 and 2 threads, unlabelled rows included; another
 *     seed gives other vectors
 *   - a progress callback that returns non-zero interrupts the pretraining; on rows of 4,096
 *     tokens it is asked within a pass of fewer rows than the 256 between its calls (an
 *     interrupt is answered within milliseconds, not after seconds of a row), and asking it
 *     changes no bit
 *   - the sizes the recipe chooses for 170, 425, 850 and 8,500 training rows (no pretraining
 *     unless asked for), an option given keeping its value, the lesson recipe sized to nothing,
 *     no validation split unless an option asks for one, and 128-wide embeddings below 5,000
 *     labelled rows unless the pretraining runs or embed_dim is given
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "nn_internal.h"
#include "nn_mem.h"
#include "text.h"
#include "train.h"

static double pair_loss(const double *u, const double *o, int E, double label) {
  double dot = 0.0;
  for (int e = 0; e < E; e++) dot += u[e] * o[e];
  double p = 1.0 / (1.0 + exp(-dot));
  return label > 0.0 ? -log(p) : -log(1.0 - p);
}

static void check_pair_gradients(void) {
  enum { E = 8 };
  for (int positive = 0; positive < 2; positive++) {
    float u[E], o[E], grad[E] = {0}, o_after[E];
    double ud[E], od[E];
    for (int e = 0; e < E; e++) {
      u[e] = (float)(0.3 * sin(1.7 * e + positive));
      o[e] = (float)(0.25 * cos(0.9 * e - positive));
      ud[e] = u[e];
      od[e] = o[e];
    }
    memcpy(o_after, o, sizeof o);
    const float lr = 0.5f;
    double loss = nn_skipgram_pair(u, o_after, grad, E, positive ? 1.0f : 0.0f, lr);
    CHECK_CLOSE(loss, pair_loss(ud, od, E, positive), 1e-5, 1e-7, "skip-gram pair loss");
    for (int e = 0; e < E; e++) {
      const double h = 1e-6;
      double save = ud[e];
      ud[e] = save + h;
      double up = pair_loss(ud, od, E, positive);
      ud[e] = save - h;
      double down = pair_loss(ud, od, E, positive);
      ud[e] = save;
      CHECK_CLOSE(grad[e], -lr * (up - down) / (2 * h), 1e-4, 1e-7, "step of u");
      save = od[e];
      od[e] = save + h;
      up = pair_loss(ud, od, E, positive);
      od[e] = save - h;
      down = pair_loss(ud, od, E, positive);
      od[e] = save;
      CHECK_CLOSE(o_after[e] - o[e], -lr * (up - down) / (2 * h), 1e-4, 1e-7, "step of o");
    }
  }
}

/* Two topics of 60 words each ("z00".."z59", "q00".."q59"); a row is 8 words of one topic. The
 * labelled rows (label: the topic) use only the first 4 words of each topic, the unlabelled
 * rows all 60. */
#define ROWS 64
#define UNLAB 3000
#define TOPIC_WORDS 60 /* frequent words are subsampled (t = 1e-4): keep each one rare */
static char text_buf[ROWS + UNLAB][160];
static const char *texts[ROWS + UNLAB];
static const char *labels[ROWS];

static uint64_t lcg = 12345;
static uint32_t next_u32(void) {
  lcg = lcg * 6364136223846793005ull + 1442695040888963407ull;
  return (uint32_t)(lcg >> 33);
}

static void make_rows(void) {
  for (int i = 0; i < ROWS + UNLAB; i++) {
    int topic = i & 1, words = i < ROWS ? 4 : TOPIC_WORDS;
    size_t len = 0;
    for (int w = 0; w < 8; w++)
      len += (size_t)snprintf(text_buf[i] + len, sizeof text_buf[i] - len, "%s%c%02d", w ? " " : "",
                              topic ? 'q' : 'z', (int)(next_u32() % words));
    texts[i] = text_buf[i];
    if (i < ROWS) labels[i] = topic ? "one" : "zero";
  }
}

static int create(nn_trainer **tr, const char *json, int n_unlab, char *err) {
  nn_config cfg;
  nn_config_default(&cfg);
  if (nn_config_parse_json(&cfg, json, NULL, err) != NN_OK) return NN_ERROR;
  nn_trainer_args a = {
      .cfg = &cfg, .texts = texts, .labels = labels, .n = ROWS, .n_unlabelled = n_unlab};
  return nn_trainer_create(tr, &a, err);
}

/* the input vector of word (as the model reads it: the mean of its rows), or 0 when unknown */
static int word_vector(const nn_trainer *tr, const char *word, float *v) {
  const nn_model *m = tr->model;
  int id = nn_vocab_lookup(m->vocab, word, (int)strlen(word));
  if (id <= NN_UNK) return 0;
  const float *table = nn_model_weights(m) + m->emb; /* the host mirror on a device */
  int E = m->E;
  memcpy(v, table + (size_t)id * E, (size_t)E * sizeof *v);
  int n = m->S && m->sub_start ? m->sub_start[id + 1] - m->sub_start[id] : 0;
  for (int s = 0; s < n; s++)
    for (int e = 0; e < E; e++) v[e] += table[(size_t)m->sub_rows[m->sub_start[id] + s] * E + e];
  for (int e = 0; e < E; e++) v[e] /= (float)(1 + n);
  return 1;
}

static double cosine(const float *a, const float *b, int E) {
  double ab = 0, aa = 0, bb = 0;
  for (int e = 0; e < E; e++) ab += a[e] * b[e], aa += a[e] * a[e], bb += b[e] * b[e];
  return ab / sqrt(aa * bb + 1e-30);
}

static int stop_at_once(void *ctx, int done, int total, double loss, double rate) {
  (*(int *)ctx)++;
  return 1;
}

static void check_pretraining(void) {
  char err[NN_ERR_LEN];
  const char *opts = "{\"embed_dim\":16,\"hidden\":8,\"fc_hidden\":0,\"pretrain_epochs\":20,"
                     "\"epochs\":1,\"threads\":1,\"val_fraction\":0.25}";
  nn_trainer *tr = NULL;
  int rc = create(&tr, opts, UNLAB, err);
  CHECK(rc == NN_OK, "create: %s", err);
  if (rc != NN_OK) return;
  CHECK(tr->data.n_unlab == UNLAB, "unlabelled rows %d", tr->data.n_unlab);
  rc = nn_trainer_pretrain(tr, NULL, NULL, err);
  CHECK(rc == NN_OK, "pretrain: %s", err);
  /* the words after the 4th of each topic are in no labelled row; cosines of the vectors less
   * their mean (skip-gram vectors share a common direction) */
  enum { E = 16, W = 2 * TOPIC_WORDS };
  static float vec[W][E];
  float mean[E] = {0};
  int known = 1;
  for (int k = 0; k < W; k++) {
    char x[8];
    snprintf(x, sizeof x, "%c%02d", k < TOPIC_WORDS ? 'z' : 'q', k % TOPIC_WORDS);
    known &= word_vector(tr, x, vec[k]);
    for (int e = 0; e < E; e++) mean[e] += vec[k][e] / W;
  }
  for (int k = 0; k < W; k++)
    for (int e = 0; e < E; e++) vec[k][e] -= mean[e];
  double same = 0, other = 0;
  int ns = 0, no = 0;
  for (int k1 = 0; k1 < W; k1++) {
    if (k1 % TOPIC_WORDS < 4) continue;
    for (int k2 = 0; k2 < W; k2++) {
      if (k2 == k1) continue;
      if ((k1 < TOPIC_WORDS) == (k2 < TOPIC_WORDS)) same += cosine(vec[k1], vec[k2], E), ns++;
      else other += cosine(vec[k1], vec[k2], E), no++;
    }
  }
  CHECK(known, "a word of the unlabelled rows is missing from the vocabulary");
  same /= ns ? ns : 1;
  other /= no ? no : 1;
  printf("pretraining: mean cosine within a topic %.3f, across topics %.3f\n", same, other);
  CHECK(same > other + 0.3, "within %.3f, across %.3f", same, other);
  char *metrics = nn_trainer_metrics_json(tr);
  CHECK(metrics && strstr(metrics, "\"unlabelled_rows\":3000") &&
            strstr(metrics, "\"pretrain_epochs\":20"),
        "metrics %s", metrics ? metrics : "NULL");
  nn_mem_free(NULL, metrics);

  /* the same bits at 2 threads; another seed differs */
  nn_trainer *tr2 = NULL, *tr3 = NULL;
  CHECK(create(&tr2,
               "{\"embed_dim\":16,\"hidden\":8,\"fc_hidden\":0,\"pretrain_epochs\":20,"
               "\"epochs\":1,\"threads\":2,\"val_fraction\":0.25}",
               UNLAB, err) == NN_OK,
        "create: %s", err);
  CHECK(create(&tr3,
               "{\"embed_dim\":16,\"hidden\":8,\"fc_hidden\":0,\"pretrain_epochs\":20,"
               "\"epochs\":1,\"threads\":1,\"val_fraction\":0.25,\"seed\":7}",
               UNLAB, err) == NN_OK,
        "create: %s", err);
  if (tr2 && tr3) {
    nn_epoch_stats s1, s2;
    CHECK(nn_trainer_epoch(tr, &s1, NULL, NULL, err) == NN_OK, "epoch: %s", err);
    CHECK(nn_trainer_epoch(tr2, &s2, NULL, NULL, err) == NN_OK, "epoch: %s", err);
    CHECK(nn_trainer_pretrain(tr3, NULL, NULL, err) == NN_OK, "pretrain: %s", err);
    size_t bytes = tr->model->nparams * sizeof(float);
    CHECK(tr->model->nparams == tr2->model->nparams &&
              memcmp(nn_model_weights(tr->model), nn_model_weights(tr2->model), bytes) == 0,
          "1 and 2 threads differ after the pretraining and an epoch");
    CHECK(s1.train_loss == s2.train_loss, "train loss %.9g and %.9g", s1.train_loss, s2.train_loss);
    size_t table = (size_t)(tr->model->V + tr->model->S) * tr->model->E * sizeof(float);
    CHECK(tr3->model->V == tr->model->V &&
              memcmp(nn_model_weights(tr->model) + tr->model->emb,
                     nn_model_weights(tr3->model) + tr3->model->emb, table) != 0,
          "another seed gave the same vectors");
  }
  nn_trainer_free(tr);
  nn_trainer_free(tr2);
  nn_trainer_free(tr3);

  /* pretraining off: the unlabelled rows are not read (their words are not in the vocabulary) */
  tr = NULL;
  CHECK(create(&tr, "{\"pretrain_epochs\":0,\"embed_dim\":8,\"hidden\":8}", UNLAB, err) == NN_OK,
        "create: %s", err);
  if (tr) {
    float v[8];
    CHECK(tr->data.n_unlab == 0, "unlabelled rows read without pretraining: %d", tr->data.n_unlab);
    CHECK(!word_vector(tr, "z59", v), "a word of the unlabelled rows only is in the vocabulary");
    nn_trainer_free(tr);
  }

  /* an interrupt during the pretraining */
  tr = NULL;
  int calls = 0;
  CHECK(create(&tr, "{\"embed_dim\":8,\"hidden\":8,\"pretrain_epochs\":5}", UNLAB, err) == NN_OK,
        "create: %s", err);
  if (tr) {
    nn_epoch_stats s;
    rc = nn_trainer_epoch(tr, &s, stop_at_once, &calls, err);
    CHECK(rc == NN_INTERRUPTED && calls == 1, "interrupt: status %d after %d calls (%s)", rc, calls,
          err);
    nn_trainer_free(tr);
  }
}

/* Long rows: 2 labelled and 2 unlabelled texts of 4,096 words of 5,000 (few subsampled). */
static int count_calls(void *ctx, int done, int total, double loss, double rate) {
  int *calls = ctx;
  return ++calls[0] == calls[1]; /* stop at call calls[1] (0: never) */
}

static void check_long_rows(void) {
  enum { N = 4, WORDS = 4096 };
  static char *long_texts[N];
  static const char *long_labels[N] = {"a", "b", "a", "b"};
  for (int i = 0; i < N; i++) {
    long_texts[i] = malloc(WORDS * 6 + 1);
    size_t len = 0;
    for (int w = 0; w < WORDS; w++)
      len +=
          (size_t)sprintf(long_texts[i] + len, "%sw%04d", w ? " " : "", (int)(next_u32() % 5000));
  }
  float *tables[2] = {NULL, NULL};
  size_t size = 0;
  int calls[2] = {0, 0};
  for (int run = 0; run < 3; run++) { /* without fn, with fn, with fn stopping at its 2nd call */
    char err[NN_ERR_LEN];
    nn_config cfg;
    nn_config_default(&cfg);
    CHECK(nn_config_parse_json(&cfg,
                               "{\"embed_dim\":128,\"hidden\":8,\"max_len\":4096,"
                               "\"pretrain_epochs\":1,\"validation\":\"none\",\"threads\":1}",
                               NULL, err) == NN_OK,
          "%s", err);
    nn_trainer_args a = {.cfg = &cfg,
                         .texts = (const char *const *)long_texts,
                         .labels = long_labels,
                         .n = N / 2,
                         .n_unlabelled = N / 2};
    nn_trainer *tr = NULL;
    int rc = nn_trainer_create(&tr, &a, err);
    CHECK(rc == NN_OK, "create: %s", err);
    if (rc != NN_OK) break;
    calls[0] = 0;
    calls[1] = run == 2 ? 2 : 0;
    rc = nn_trainer_pretrain(tr, run ? count_calls : NULL, calls, err);
    if (run == 2) {
      CHECK(rc == NN_INTERRUPTED && calls[0] == 2, "stopped at the 2nd call, within the pass: %d",
            rc);
    } else {
      CHECK(rc == NN_OK, "pretrain: %s", err);
      size = (size_t)(tr->model->V + tr->model->S) * tr->model->E;
      tables[run] = malloc(size * sizeof(float));
      memcpy(tables[run], nn_model_weights(tr->model) + tr->model->emb, size * sizeof(float));
    }
    if (run == 1)
      CHECK(calls[0] >= 3, "%d calls in one pass of %d rows of %d tokens", calls[0], N, WORDS);
    nn_trainer_free(tr);
  }
  CHECK(tables[0] && tables[1] && memcmp(tables[0], tables[1], size * sizeof(float)) == 0,
        "the vectors are the same bits with and without a progress callback");
  free(tables[0]);
  free(tables[1]);
  for (int i = 0; i < N; i++) free(long_texts[i]);
}

/* the validation rows' words stay out of the vocabulary; the unlabelled rows' join it */
static void check_vocabulary(void) {
  static const char *t[] = {"alpha beta", "gamma delta", "alpha gamma",         "beta delta",
                            "alpha beta", "gamma delta", "alpha gamma",         "beta delta",
                            "alpha beta", "gamma delta", "unlabelledword alpha"};
  static const char *l[] = {"a", "b", "a", "b", "a", "b", "a", "b", "a", "b"};
  for (int r = 0; r < 10; r++) {
    char err[NN_ERR_LEN];
    nn_config cfg;
    nn_config_default(&cfg);
    nn_config_parse_json(
        &cfg, "{\"embed_dim\":4,\"hidden\":4,\"pretrain_epochs\":1,\"val_fraction\":0.3}", NULL,
        err);
    const char *rows[11];
    char valword[10][16];
    for (int i = 0; i < 10; i++) { /* each labelled row has a word of its own */
      snprintf(valword[i], sizeof valword[i], "%s w%d", t[i] + 0, i);
      rows[i] = valword[i];
    }
    rows[10] = t[10];
    nn_trainer_args a = {.cfg = &cfg, .texts = rows, .labels = l, .n = 10, .n_unlabelled = 1};
    nn_trainer *tr = NULL;
    int rc = nn_trainer_create(&tr, &a, err);
    CHECK(rc == NN_OK, "create: %s", err);
    if (rc != NN_OK) return;
    const nn_vocab *vocab = tr->model->vocab;
    CHECK(nn_vocab_lookup(vocab, "unlabelledword", 14) > NN_UNK,
          "a word of an unlabelled row is not in the vocabulary");
    for (int i = 0; i < 10; i++) {
      char w[8];
      snprintf(w, sizeof w, "w%d", i);
      int in = nn_vocab_lookup(vocab, w, (int)strlen(w)) > NN_UNK;
      CHECK(in == !nn_train_is_val(&tr->data, i),
            "row %d (%s): in the vocabulary %d, validation %d", i, w, in,
            nn_train_is_val(&tr->data, i));
    }
    nn_trainer_free(tr);
    break; /* one split is enough: each row's word follows its side */
  }
}

static void check_sizing(void) {
  static const struct {
    int n_train, batch, epochs, patience;
  } want[] = {
      {170, 8, 46, 15}, {425, 16, 38, 12}, {850, 32, 38, 12}, {8500, 64, 15, 10}, {1, 8, 60, 20}};
  for (size_t k = 0; k < sizeof want / sizeof *want; k++) {
    nn_config cfg;
    nn_config_default(&cfg);
    nn_config_size_to_data(&cfg, want[k].n_train, 4, 0, 0);
    CHECK(cfg.batch_size == want[k].batch && cfg.epochs == want[k].epochs &&
              cfg.patience == want[k].patience && cfg.pretrain_epochs == 0 && cfg.data_sized == 0,
          "%d rows: batch %d epochs %d patience %d pretrain %d, want %d %d %d 0", want[k].n_train,
          cfg.batch_size, cfg.epochs, cfg.patience, cfg.pretrain_epochs, want[k].batch,
          want[k].epochs, want[k].patience);
  }
  char err[NN_ERR_LEN];
  nn_config cfg;
  nn_config_default(&cfg);
  CHECK(nn_config_parse_json(&cfg, "{\"epochs\":7,\"pretrain_epochs\":3}", NULL, err) == NN_OK,
        "%s", err);
  nn_config_size_to_data(&cfg, 170, 4, 0, 0);
  CHECK(cfg.epochs == 7 && cfg.pretrain_epochs == 3 && cfg.batch_size == 8 && cfg.patience == 10,
        "given options kept: epochs %d pretrain %d batch %d patience %d", cfg.epochs,
        cfg.pretrain_epochs, cfg.batch_size, cfg.patience);
  CHECK(nn_config_parse_json(&cfg, "{\"recipe\":\"lesson\"}", NULL, err) == NN_OK, "%s", err);
  nn_config_size_to_data(&cfg, 170, 4, 0, 0);
  CHECK(cfg.epochs == 50 && cfg.batch_size == 64 && cfg.patience == 10 && cfg.pretrain_epochs == 0,
        "the lesson sized: epochs %d batch %d patience %d pretrain %d", cfg.epochs, cfg.batch_size,
        cfg.patience, cfg.pretrain_epochs);
}

/* unlabelled rows: pretraining passes sized to their tokens, subwords off while it runs */
static void check_sizing_unlabelled(void) {
  static const struct {
    const char *json;
    int n_unlab;
    int64_t tokens;
    int pretrain, buckets;
    unsigned done;
  } cases[] = {
      {"{}", 7800, 56000, 40, 0, NN_SIZED_PRETRAIN | NN_SIZED_SUBWORDS},
      {"{}", 29800, 210000, 19, 0, NN_SIZED_PRETRAIN | NN_SIZED_SUBWORDS},
      {"{}", 10000000, 70000000, 1, 0, NN_SIZED_PRETRAIN | NN_SIZED_SUBWORDS},
      {"{}", NN_PRETRAIN_ROWS - 1, 7000, 0, 16384, 0},
      {"{}", 0, 1400, 0, 16384, 0},
      {"{\"pretrain_epochs\":0}", 7800, 56000, 0, 16384, 0},
      {"{\"subword_buckets\":4096}", 7800, 56000, 40, 4096, NN_SIZED_PRETRAIN},
      {"{\"pretrain_epochs\":5}", 7800, 56000, 5, 0, NN_SIZED_SUBWORDS},
      {"{\"recipe\":\"lesson\"}", 7800, 56000, 0, 0, 0},
  };
  for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
    char err[NN_ERR_LEN];
    nn_config cfg;
    nn_config_default(&cfg);
    CHECK(nn_config_parse_json(&cfg, cases[k].json, NULL, err) == NN_OK, "%s", err);
    nn_config_size_to_data(&cfg, 200, 4, cases[k].n_unlab, cases[k].tokens);
    unsigned done = cfg.data_sized_done & (NN_SIZED_PRETRAIN | NN_SIZED_SUBWORDS);
    CHECK(cfg.pretrain_epochs == cases[k].pretrain && cfg.subword_buckets == cases[k].buckets &&
              done == cases[k].done,
          "%s, %d unlabelled rows, %lld tokens: pretrain_epochs %d subword_buckets %d sized %u, "
          "want %d %d %u",
          cases[k].json, cases[k].n_unlab, (long long)cases[k].tokens, cfg.pretrain_epochs,
          cfg.subword_buckets, done, cases[k].pretrain, cases[k].buckets, cases[k].done);
  }
}

/* the embeddings' width: NN_SMALL_EMBED_DIM below NN_SMALL_ROWS labelled rows, unless the
 * pretraining runs (its vectors stay 64 wide) or an option gives it */
static void check_sizing_embed_dim(void) {
  static const struct {
    const char *json;
    int n_train, n_unlab, embed_dim, sized;
  } cases[] = {
      {"{}", 1, 0, NN_SMALL_EMBED_DIM, 1},
      {"{}", 200, 0, NN_SMALL_EMBED_DIM, 1},
      {"{}", NN_SMALL_ROWS - 1, 0, NN_SMALL_EMBED_DIM, 1},
      {"{}", NN_SMALL_ROWS, 0, 64, 0},
      {"{}", 200, 7800, 64, 0},                                 /* the pretraining's vectors */
      {"{}", 200, NN_PRETRAIN_ROWS - 1, NN_SMALL_EMBED_DIM, 1}, /* too few to pretrain */
      {"{\"pretrain_epochs\":5}", 200, 0, 64, 0},
      {"{\"embed_dim\":32}", 200, 0, 32, 0},
      {"{\"embed_dim\":64}", 200, 0, 64, 0},
      {"{\"recipe\":\"lesson\"}", 200, 0, 100, 0},
      /* tables made large by options keep their width (NN_SMALL_WIDE_PARAMS) */
      {"{\"subword_buckets\":2097152}", 200, 0, 64, 0},
      {"{\"ensemble\":3}", 200, 0, 64, 0},
      {"{\"vocab_size\":20000}", 200, 0, NN_SMALL_EMBED_DIM, 1},
  };
  for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
    char err[NN_ERR_LEN];
    nn_config cfg;
    nn_config_default(&cfg);
    CHECK(nn_config_parse_json(&cfg, cases[k].json, NULL, err) == NN_OK, "%s", err);
    nn_config_size_to_data(&cfg, cases[k].n_train, 4, cases[k].n_unlab,
                           cases[k].n_unlab ? 56000 : 1400);
    int sized = (cfg.data_sized_done & NN_SIZED_EMBED_DIM) != 0;
    CHECK(cfg.embed_dim == cases[k].embed_dim && sized == cases[k].sized,
          "%s, %d labelled and %d unlabelled rows: embed_dim %d (sized %d), want %d (%d)",
          cases[k].json, cases[k].n_train, cases[k].n_unlab, cfg.embed_dim, sized,
          cases[k].embed_dim, cases[k].sized);
  }
}

/* no validation split, at any size, unless an option asks for one */
static void check_small_validation(void) {
  static const struct {
    const char *json;
    int split;
  } cases[] = {{"{}", 0},
               {"{\"monitor\":\"val_loss\"}", 1},
               {"{\"patience\":3}", 1},
               {"{\"val_fraction\":0.2}", 1},
               {"{\"validation\":\"random\"}", 1},
               {"{\"lr_patience\":2}", 1},
               {"{\"epochs\":3}", 0}};
  for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
    char err[NN_ERR_LEN];
    nn_trainer *tr = NULL;
    int rc = create(&tr, cases[k].json, 0, err);
    CHECK(rc == NN_OK, "create %s: %s", cases[k].json, err);
    if (rc != NN_OK) continue;
    CHECK((tr->data.n_val > 0) == cases[k].split &&
              (tr->cfg.validation == NN_VALIDATION_NONE) == !cases[k].split,
          "%s over %d rows: %d validation rows", cases[k].json, ROWS, tr->data.n_val);
    nn_trainer_free(tr);
  }
}

int main(void) {
  make_rows();
  check_pair_gradients();
  check_pretraining();
  check_long_rows();
  check_vocabulary();
  check_sizing();
  check_sizing_unlabelled();
  check_sizing_embed_dim();
  check_small_validation();
  return check_finish("test_pretrain");
}
