/* test_resource_bounds.c -- a crafted model cannot make the engine take memory or time
 * out of proportion to its file, and long loads can be stopped.
 *   - memory: a 1.6 MB model of 100,000 tokens and a 1-wide embedding (bidirectional LSTM)
 *     once added ~210 MB of inference tables at load (peak RSS); a loaded model now holds at most
 *     NN_INFER_TABLES_FACTOR x its parameters + 16 MB of tables (nn_model_memory reports it),
 *     and predicts the same without them; the lesson's model still gets both tables;
 *   - batched inference: 64 texts of 4096 characters through 8 bidirectional LSTM layers once
 *     kept every layer's activations (~530 MB); inference now keeps two layers' and splits a
 *     batch whose workspace would pass NN_INFER_WORKSPACE_MAX, with the same logits;
 *   - limits: a file's vocabulary may not be larger than its config's vocab_size (training never
 *     makes one), a model may not have more classes than training allows;
 *   - interrupts: nn_model_load_ex and nn_trainer_create (its stop) ask their callback during the work
 *     and stop with NN_INTERRUPTED. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "check.h"
#include "config.h"
#include "config_base.h"
#include "model.h"
#include "nn_internal.h"

static long peak_rss_kb(void) {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return ru.ru_maxrss;
}

/* A vocabulary of V tokens: <PAD>, <UNK>, "t2", "t3", ... */
static nn_vocab *numbered_vocab(int V, char *err) {
  const char **toks = malloc(sizeof *toks * (size_t)V);
  char *arena = malloc((size_t)V * 16);
  for (int i = 0; i < V; i++) {
    char *t = arena + (size_t)i * 16;
    if (i == 0) strcpy(t, "<PAD>");
    else if (i == 1) strcpy(t, "<UNK>");
    else snprintf(t, 16, "t%d", i);
    toks[i] = t;
  }
  nn_vocab *v = NULL;
  if (nn_vocab_from_list(&v, toks, NULL, V, err) != NN_OK) v = NULL;
  free(toks);
  free(arena);
  return v;
}

static nn_model *make_model(const char *options, int V, int C, char *err) {
  nn_config cfg;
  test_config_base(&cfg);
  if (nn_config_parse_json(&cfg, options, NULL, err) != NN_OK) return NULL;
  nn_vocab *vocab = numbered_vocab(V, err);
  if (!vocab) return NULL;
  const char **labels = malloc(sizeof *labels * (size_t)C);
  char *names = malloc((size_t)C * 16);
  for (int c = 0; c < C; c++) {
    snprintf(names + (size_t)c * 16, 16, "c%d", c);
    labels[c] = names + (size_t)c * 16;
  }
  nn_model *m = NULL;
  if (nn_model_create(&m, &cfg, vocab, labels, C, 7, err) != NN_OK) m = NULL;
  free(labels);
  free(names);
  return m;
}

static void test_table_budget(void) {
  char err[NN_ERR_LEN];
  /* the hostile shape: many tokens, a 1-wide embedding, a wide bidirectional first layer */
  nn_model *m =
      make_model("{\"cell\":\"lstm\",\"hidden\":64,\"embed_dim\":1,\"bidirectional\":true,"
                 "\"fc_hidden\":0,\"vocab_size\":100000,\"device\":\"cpu\"}",
                 100000, 2, err);
  CHECK(m != NULL, "hostile model: %s", m ? "" : err);
  if (!m) return;
  unsigned char *blob = NULL;
  size_t len = 0;
  CHECK(nn_model_save(m, &blob, &len, err) == NN_OK, "save: %s", err);
  long before = peak_rss_kb();
  nn_model *loaded = NULL;
  CHECK(nn_model_load(&loaded, blob, len, err) == NN_OK, "load: %s", err);
  long grown_kb = peak_rss_kb() - before;
  if (loaded) {
    size_t bytes = nn_model_memory(loaded);
    double bound = (2.0 + NN_INFER_TABLES_FACTOR) * (double)len + NN_INFER_TABLES_SLACK;
    printf("hostile model: BLOB %.2f MB, loaded model %.2f MB (bound %.1f MB), peak RSS +%.1f MB "
           "during the load\n",
           len / 1e6, bytes / 1e6, bound / 1e6, grown_kb / 1e3);
    CHECK(bytes <= bound, "a %zu-byte BLOB loaded into %zu bytes, more than %.0f", len, bytes,
          bound);
    CHECK(bytes >= (size_t)len, "nn_model_memory %zu less than the BLOB's %zu bytes", bytes, len);
    CHECK(grown_kb * 1024.0 <= bound + 32e6, "the load grew the peak RSS by %ld kB", grown_kb);
    CHECK(!loaded->fold[0] && !loaded->step1[0], "tables built beyond the budget");
    /* the same predictions without the tables: the created model never had them */
    int tokens[3 * 5] = {2, 99999, 5, 77, 1, 50000, 3, 0, 0, 0, 123, 4567, 89012, 2, 0};
    int lengths[3] = {5, 2, 4};
    nn_batch batch = {tokens, lengths, NULL, 3, 5};
    float a[6], b[6];
    nn_workspace *ws;
    nn_workspace_create(&ws, NULL, err);
    CHECK(nn_model_forward(m, ws, &batch, 0, NULL, a, NULL, err) == NN_OK, "%s", err);
    CHECK(nn_model_forward(loaded, ws, &batch, 0, NULL, b, NULL, err) == NN_OK, "%s", err);
    for (int i = 0; i < 6; i++) CHECK_CLOSE(b[i], a[i], 1e-5, 1e-6, "logits without tables");
    nn_workspace_free(ws);
    nn_model_free(loaded);
  }
  free(blob);
  nn_model_free(m);

  /* the lesson's AG News model keeps both tables (one-row inference speed) */
  m = make_model("{\"cell\":\"rnn\",\"hidden\":128,\"embed_dim\":100,\"fc_hidden\":100,"
                 "\"device\":\"cpu\"}",
                 5000, 4, err);
  CHECK(m != NULL, "lesson model: %s", m ? "" : err);
  if (!m) return;
  CHECK(nn_model_prepare_inference(m, err) == NN_OK, "%s", err);
  CHECK(m->fold[0] && m->step1[0] && m->head_w,
        "the lesson's model lost a table: fold %p step1 %p head %p", (void *)m->fold[0],
        (void *)m->step1[0], (const void *)m->head_w);
  size_t params = nn_model_param_count(m) * sizeof(float);
  printf("lesson model: parameters %.2f MB, prepared for inference %.2f MB\n", params / 1e6,
         nn_model_memory(m) / 1e6);
  CHECK(nn_model_memory(m) > 2 * params, "nn_model_memory %zu does not count the tables",
        nn_model_memory(m));
  nn_model_free(m);
}

static void test_batched_inference(void) {
  char err[NN_ERR_LEN];
  nn_model *m = make_model("{\"cell\":\"lstm\",\"layers\":8,\"bidirectional\":true,\"hidden\":4,"
                           "\"embed_dim\":4,\"fc_hidden\":4,\"char_level\":true,\"max_len\":4096,"
                           "\"device\":\"cpu\"}",
                           40, 2, err);
  CHECK(m != NULL, "deep model: %s", m ? "" : err);
  if (!m) return;
  CHECK(nn_model_prepare_inference(m, err) == NN_OK, "%s", err);
  enum { B = 64, T = 4096 };
  int *tokens = malloc(sizeof(int) * B * T), lengths[B];
  nn_rng rng;
  nn_rng_seed(&rng, 5);
  for (int i = 0; i < B * T; i++) tokens[i] = 2 + (int)nn_rng_below(&rng, 38);
  for (int b = 0; b < B; b++) lengths[b] = b % 4 ? T : T / 2 + b;
  nn_batch batch = {tokens, lengths, NULL, B, T};
  float logits[B * 2], one[2];
  nn_workspace *ws;
  nn_workspace_create(&ws, NULL, err);
  long before = peak_rss_kb();
  CHECK(nn_model_forward(m, ws, &batch, 0, NULL, logits, NULL, err) == NN_OK, "%s", err);
  long grown_kb = peak_rss_kb() - before;
  size_t arena = ws->cap * sizeof(float) + ws->icap * sizeof(int);
  printf("batched inference: %d texts of %d characters, 8 bidirectional LSTM layers: workspace "
         "%.1f MB (bound %.0f MB), peak RSS +%.1f MB\n",
         B, T, arena / 1e6, NN_INFER_WORKSPACE_MAX / 1e6, grown_kb / 1e3);
  CHECK(arena <= NN_INFER_WORKSPACE_MAX, "inference workspace %zu bytes", arena);
  CHECK(ws->B < B, "the batch was not split (last part %d rows)", ws->B);
  CHECK(grown_kb * 1024.0 <= 2.0 * NN_INFER_WORKSPACE_MAX, "peak RSS grew by %ld kB", grown_kb);
  /* the same logits as each row alone */
  int rows[] = {0, 1, 37, B - 1};
  for (int k = 0; k < 4; k++) {
    int r = rows[k];
    nn_batch single = {tokens + (size_t)r * T, &lengths[r], NULL, 1, T};
    CHECK(nn_model_forward(m, ws, &single, 0, NULL, one, NULL, err) == NN_OK, "%s", err);
    for (int c = 0; c < 2; c++)
      CHECK_CLOSE(logits[r * 2 + c], one[c], 1e-5, 1e-6, "split batch logits");
  }
  /* an error in a later part names the caller's row */
  lengths[B - 2] = T + 1;
  CHECK(nn_model_forward(m, ws, &batch, 0, NULL, logits, NULL, err) == NN_ERROR &&
            strstr(err, "batch row 62 ") != NULL,
        "bad length: %s", err);
  free(tokens);
  nn_workspace_free(ws);
  nn_model_free(m);
}

static void test_loader_limits(void) {
  char err[NN_ERR_LEN];
  /* a vocabulary larger than the config's vocab_size: training never writes one */
  nn_model *m =
      make_model("{\"vocab_size\":5,\"hidden\":2,\"embed_dim\":2,\"fc_hidden\":0}", 8, 2, err);
  CHECK(m != NULL, "%s", m ? "" : err);
  if (!m) return;
  unsigned char *blob = NULL;
  size_t len = 0;
  CHECK(nn_model_save(m, &blob, &len, err) == NN_OK, "%s", err);
  nn_model *loaded = NULL;
  CHECK(nn_model_load(&loaded, blob, len, err) == NN_ERROR &&
            strcmp(err, "weights: __metadata__ \"vocab\" has 8 tokens, more than the config's "
                        "vocab_size 5") == 0,
        "vocab over vocab_size: %s", err);
  nn_model_free(loaded);
  free(blob);
  nn_model_free(m);
  /* one class more than training allows */
  m = make_model("{\"hidden\":2,\"embed_dim\":2,\"fc_hidden\":0}", 4, NN_MAX_CLASSES + 1, err);
  CHECK(m == NULL && strstr(err, "from 2 to 10000") != NULL, "10001 classes: %s", err);
  nn_model_free(m);
  m = make_model("{\"hidden\":2,\"embed_dim\":2,\"fc_hidden\":0}", 4, NN_MAX_CLASSES, err);
  CHECK(m != NULL, "10000 classes: %s", m ? "" : err);
  nn_model_free(m);
}

typedef struct stopper {
  int calls, stop_at; /* stop at the stop_at-th call (0: never) */
} stopper;
static int stop_fn(void *ctx) {
  stopper *s = ctx;
  s->calls++;
  return s->stop_at && s->calls >= s->stop_at;
}

static void test_interrupts(void) {
  char err[NN_ERR_LEN];
  nn_model *m = make_model("{\"hidden\":2,\"embed_dim\":2,\"fc_hidden\":0,\"vocab_size\":200000}",
                           200000, 2, err);
  CHECK(m != NULL, "%s", m ? "" : err);
  if (!m) return;
  unsigned char *blob = NULL;
  size_t len = 0;
  CHECK(nn_model_save(m, &blob, &len, err) == NN_OK, "%s", err);
  nn_model_free(m);
  stopper never = {0, 0};
  nn_model *loaded = NULL;
  CHECK(nn_model_load_ex(&loaded, blob, len, stop_fn, &never, NULL, err) == NN_OK, "%s", err);
  /* 200,000 tokens: asked at least once per 4096 while the vocabulary is built */
  CHECK(never.calls >= 200000 / 4096, "load asked %d times", never.calls);
  nn_model_free(loaded);
  for (int at = 1; at <= never.calls; at++) { /* stopped at each point: a clean NN_INTERRUPTED */
    stopper s = {0, at};
    loaded = NULL;
    int rc = nn_model_load_ex(&loaded, blob, len, stop_fn, &s, NULL, err);
    CHECK(rc == NN_INTERRUPTED && loaded == NULL && strcmp(err, "interrupted") == 0,
          "stop at call %d: rc %d, %s", at, rc, err);
    nn_model_free(loaded);
  }
  free(blob);

  /* a training run over 20,000 rows of distinct words */
  enum { N = 20000 };
  char *text = malloc((size_t)N * 32);
  const char *texts[N], *labels[N];
  for (int i = 0; i < N; i++) {
    snprintf(text + (size_t)i * 32, 32, "w%d x%d", i, i % 97);
    texts[i] = text + (size_t)i * 32;
    labels[i] = i % 2 ? "odd" : "even";
  }
  nn_config cfg;
  test_config_base(&cfg);
  cfg.hidden = 2;
  cfg.embed_dim = 2;
  cfg.fc_hidden = 0;
  cfg.vocab_size = 100000;
  cfg.device = NN_DEVICE_CPU;
  stopper count = {0, 0};
  nn_trainer *tr = NULL;
  CHECK(nn_trainer_create(&tr,
                          &(nn_trainer_args){.cfg = &cfg,
                                             .texts = texts,
                                             .labels = labels,
                                             .n = N,
                                             .stop = stop_fn,
                                             .stop_ctx = &count},
                          err) == NN_OK,
        "%s", err);
  CHECK(count.calls >= 2 * (N * 85 / 100) / 4096, "trainer creation asked %d times", count.calls);
  nn_trainer_free(tr);
  for (int at = 1; at <= count.calls; at++) {
    stopper s = {0, at};
    tr = NULL;
    int rc = nn_trainer_create(
        &tr,
        &(nn_trainer_args){
            .cfg = &cfg, .texts = texts, .labels = labels, .n = N, .stop = stop_fn, .stop_ctx = &s},
        err);
    CHECK(rc == NN_INTERRUPTED && tr == NULL && strcmp(err, "interrupted") == 0,
          "trainer stop at call %d: rc %d, %s", at, rc, err);
    nn_trainer_free(tr);
  }
  free(text);
}

int main(void) {
  /* WebAssembly's getrusage fills in no ru_maxrss: the peak RSS checks then compare 0 with 0 */
  if (peak_rss_kb() <= 0)
    printf("SKIP-PART peak RSS bounds: getrusage reports no ru_maxrss here\n");
  test_table_budget(); /* first: it measures the peak RSS */
  test_batched_inference();
  test_loader_limits();
  test_interrupts();
  return check_finish("test_resource_bounds");
}
