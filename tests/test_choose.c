/* test_choose.c -- the default recipe's choice of word dropout (engine/choose.c): 0.2 or 0,
 * whichever two folds of the labelled rows score higher.
 *   - the sizing: chosen from NN_CHOOSE_ROWS to NN_SMALL_ROWS training rows without a split,
 *     pretraining, self-training or an ensemble, up to NN_CHOOSE_TOKENS token-epochs; a
 *     word_dropout given is kept; the lesson never
 *   - the model trained after the choice is, bit for bit, the one the option "word_dropout"
 *     given the value chosen trains (both values, on two kinds of rows); the metrics say what
 *     was chosen and the two scores
 *   - the same seed gives the same choice and bits at 1 and 2 threads
 *   - the progress counts the batches of the four folds, up to its total; an interrupt while
 *     choosing stops the training (NN_INTERRUPTED)
 *   - out of memory at each allocation of the choice is NN_NOMEM, nothing leaked (ASan)
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "failing_alloc.h"
#include "nn_internal.h"
#include "nn_mem.h"
#include "train.h"

#define ROWS 600
static char text_buf[ROWS][160];
static const char *texts[ROWS];
static const char *labels[ROWS];
static const char *const names[3] = {"a", "b", "c"};

static uint64_t lcg = 4242;
static uint32_t next_u32(void) {
  lcg = lcg * 6364136223846793005ull + 1442695040888963407ull;
  return (uint32_t)(lcg >> 33);
}

/* kind 0: each row one rare word of its class (of 60) among five words every class shares
 * (of 300): one word decides, as a package's section in its description. kind 1: six words of
 * its class (of 20): every word says it. */
static void make_rows(int kind) {
  lcg = 4242 + (uint64_t)kind;
  for (int i = 0; i < ROWS; i++) {
    int c = i % 3;
    size_t len = 0;
    if (kind == 0) {
      int at = (int)(next_u32() % 6);
      for (int w = 0; w < 6; w++)
        len +=
            (size_t)snprintf(text_buf[i] + len, sizeof text_buf[i] - len, "%s%s%03d", w ? " " : "",
                             w == at ? names[c] : "n", (int)(next_u32() % (w == at ? 60 : 300)));
    } else {
      for (int w = 0; w < 6; w++)
        len += (size_t)snprintf(text_buf[i] + len, sizeof text_buf[i] - len, "%s%s%02d",
                                w ? " " : "", names[c], (int)(next_u32() % 20));
    }
    texts[i] = text_buf[i];
    labels[i] = names[c];
  }
}

#define NET "\"embed_dim\":8,\"hidden\":8,\"fc_hidden\":0,\"subword_buckets\":0"
#define SMALL NET ",\"epochs\":40"

static int create(nn_trainer **tr, const char *json, int n, char *err) {
  nn_config cfg;
  nn_config_default(&cfg);
  if (nn_config_parse_json(&cfg, json, NULL, err) != NN_OK) return NN_ERROR;
  nn_trainer_args a = {.cfg = &cfg, .texts = texts, .labels = labels, .n = n, .mem = use_mem};
  return nn_trainer_create(tr, &a, err);
}

static void check_sizing(void) {
  make_rows(1);
  static const struct {
    const char *json;
    int n, choosing;
  } cases[] = {
      {"{" SMALL "}", ROWS, 1},
      {"{" SMALL "}", NN_CHOOSE_ROWS, 1},
      {"{" SMALL "}", NN_CHOOSE_ROWS - 1, 0},        /* halves too small to score */
      {"{" SMALL ",\"word_dropout\":0.2}", ROWS, 0}, /* given: kept */
      {"{" SMALL ",\"word_dropout\":0}", ROWS, 0},
      {"{" SMALL ",\"ensemble\":2}", ROWS, 0},            /* not measured */
      {"{" SMALL ",\"validation\":\"random\"}", ROWS, 0}, /* a split: not measured */
      {"{" SMALL ",\"pretrain_epochs\":2}", ROWS, 0},     /* pretraining: not measured */
      {"{\"recipe\":\"lesson\",\"epochs\":1}", ROWS, 0},
      /* 600 rows of 6 tokens: 277 epochs read NN_CHOOSE_TOKENS tokens, 278 more */
      {"{" NET ",\"epochs\":277}", ROWS, 1},
      {"{" NET ",\"epochs\":278}", ROWS, 0},
  };
  for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
    char err[NN_ERR_LEN];
    nn_trainer *tr = NULL;
    int rc = create(&tr, cases[k].json, cases[k].n, err);
    CHECK(rc == NN_OK, "create %s: %s", cases[k].json, err);
    if (rc != NN_OK) continue;
    CHECK(nn_trainer_choosing(tr) == cases[k].choosing, "%s, %d rows: choosing %d, want %d",
          cases[k].json, cases[k].n, nn_trainer_choosing(tr), cases[k].choosing);
    nn_trainer_free(tr);
  }
}

/* Every epoch of a run (the choice in the first), the model's weights (malloc'd, *P of them),
 * and the metrics (malloc'd). */
static float *train_all(const char *json, size_t *P, float *word_dropout, char **metrics) {
  char err[NN_ERR_LEN];
  nn_trainer *tr = NULL;
  int rc = create(&tr, json, ROWS, err);
  CHECK(rc == NN_OK, "create %s: %s", json, err);
  if (rc != NN_OK) return NULL;
  nn_epoch_stats s;
  while ((rc = nn_trainer_epoch(tr, &s, NULL, NULL, err)) == NN_OK) {
  }
  CHECK(rc == NN_DONE, "%s: %s", json, err);
  *word_dropout = tr->cfg.word_dropout;
  if (metrics) {
    char *m = nn_trainer_metrics_json(tr);
    *metrics = m ? strdup(m) : NULL;
    nn_mem_free(NULL, m);
  }
  nn_model *m = NULL;
  CHECK(nn_trainer_take_model(tr, &m, err) == NN_OK, "take: %s", err);
  CHECK(m && nn_model_config(m)->word_dropout == *word_dropout,
        "the model's config says the word dropout it trained with");
  *P = tr->param_count;
  float *w = malloc(*P * sizeof *w);
  memcpy(w, nn_model_weights(m), *P * sizeof *w);
  nn_model_free(m);
  nn_trainer_free(tr);
  return w;
}

/* Train with options (a JSON object's members, no braces) and choosing, then with the value
 * chosen given as "word_dropout": the same bits. Returns the value chosen (-1: a failure);
 * *metrics (malloc'd) the first run's, when asked for. */
static float same_as_given(const char *options, char **metrics) {
  size_t P = 0, Pg = 0;
  float chosen = -1, given = -2;
  char json[300];
  snprintf(json, sizeof json, "{%s}", options);
  float *w = train_all(json, &P, &chosen, metrics);
  snprintf(json, sizeof json, "{%s,\"word_dropout\":%s}", options, chosen > 0 ? "0.2" : "0");
  float *g = train_all(json, &Pg, &given, NULL);
  int same = w && g && P == Pg && chosen == given && memcmp(w, g, P * sizeof *w) == 0;
  CHECK(same, "%s: chosen %g, the same bits as word_dropout %g given", options, chosen, given);
  if (!strstr(options, "subword_buckets"))
    CHECK(P > 16384 * 128, "%s: %zu parameters: the default's 128-wide subword table", options, P);
  free(w);
  free(g);
  return same ? chosen : -1.0f;
}

static void check_same_bits_as_given(void) {
  int chose[2] = {0, 0};
  for (int kind = 0; kind < 2; kind++) {
    make_rows(kind);
    char *metrics = NULL;
    float chosen = same_as_given(SMALL ",\"threads\":1", &metrics);
    if (chosen >= 0) chose[chosen > 0] = 1;
    char want[64];
    snprintf(want, sizeof want, "\"word_dropout\":%s", chosen > 0 ? "0.2" : "0");
    CHECK(metrics && strstr(metrics, want) &&
              strstr(metrics, "\"word_dropout_choice\":{\"folds\":2,\"weighted_f1\":{\"0.2\":"),
          "the metrics say the choice: %s", metrics ? metrics : "NULL");
    free(metrics);
  }
  /* one rare word per row: read 20% of the time as <UNK>, it teaches less; every word saying
   * the class: the two score alike, and the tie keeps 0.2 */
  CHECK(chose[0] && chose[1], "both settings chosen on the two kinds of rows (0: %d, 0.2: %d)",
        chose[0], chose[1]);
  /* the default's own shape: 128-wide word and subword rows (the lazy lists of the folds read
   * both), batches sized, two threads */
  make_rows(0);
  same_as_given("\"hidden\":8,\"fc_hidden\":0,\"epochs\":4,\"threads\":2", NULL);
}

static int calls = 0, stop_at = 0, last_done = 0, last_total = 0, monotone = 1;
static int progress(void *ctx, int done, int total, double loss, double rate) {
  (void)ctx, (void)loss, (void)rate;
  calls++;
  if (done < last_done || (last_total && total != last_total) || done > total) monotone = 0;
  last_done = done;
  last_total = total;
  return stop_at && calls >= stop_at;
}

/* Halves whose batches outnumber the training's: 513 rows make 17 batches of 32, a half of 256
 * rows 32 batches of 8. Each n here chooses and trains (ASan: no write past a buffer). */
static void check_uneven_halves(void) {
  make_rows(1);
  int most = 0;
  for (int n = 513; n <= 530; n++) {
    char err[NN_ERR_LEN];
    nn_trainer *tr = NULL;
    int rc = create(&tr, "{" NET ",\"epochs\":1}", n, err);
    CHECK(rc == NN_OK && nn_trainer_choosing(tr), "create %d rows: %s", n, err);
    if (rc != NN_OK) continue;
    int main_batches = (n + tr->cfg.batch_size - 1) / tr->cfg.batch_size;
    rc = nn_trainer_choose(tr, progress, NULL, err);
    CHECK(rc == NN_OK, "%d rows: %s", n, err);
    /* the progress's total: 2 settings x (both halves' batches), 1 epoch */
    if (last_total / 2 > 2 * main_batches) most++;
    nn_epoch_stats s;
    while ((rc = nn_trainer_epoch(tr, &s, NULL, NULL, err)) == NN_OK) {
    }
    CHECK(rc == NN_DONE, "%d rows, the training after the choice: %s", n, err);
    nn_trainer_free(tr);
  }
  CHECK(most > 0, "a half's batches outnumbered the training's (%d times)", most);
}

static void check_threads(void) {
  make_rows(0);
  size_t P1 = 0, P2 = 0;
  float c1 = -1, c2 = -2;
  char *m1 = NULL, *m2 = NULL;
  float *one = train_all("{" SMALL ",\"threads\":1,\"batch_size\":64}", &P1, &c1, &m1);
  float *two = train_all("{" SMALL ",\"threads\":2,\"batch_size\":64}", &P2, &c2, &m2);
  const char *f1 = m1 ? strstr(m1, "\"word_dropout_choice\"") : NULL;
  const char *f2 = m2 ? strstr(m2, "\"word_dropout_choice\"") : NULL;
  CHECK(one && two && P1 == P2 && c1 == c2 && memcmp(one, two, P1 * sizeof *one) == 0 && f1 && f2 &&
            strncmp(f1, f2, strcspn(f1, "}")) == 0,
        "1 and 2 threads: the same choice (%g, %g), scores and bits", c1, c2);
  free(one);
  free(two);
  free(m1);
  free(m2);
}

static void check_progress_and_interrupt(void) {
  make_rows(1);
  char err[NN_ERR_LEN];
  nn_trainer *tr = NULL;
  int rc = create(&tr, "{" SMALL "}", ROWS, err);
  CHECK(rc == NN_OK, "create: %s", err);
  if (rc != NN_OK) return;
  /* each half (300 rows, batches sized to them) trains the 40 epochs, once per setting */
  int b = nn_config_sized_batch(ROWS / 2), want = 2 * 2 * 40 * ((ROWS / 2 + b - 1) / b);
  calls = stop_at = last_done = last_total = 0;
  monotone = 1;
  rc = nn_trainer_choose(tr, progress, NULL, err);
  CHECK(rc == NN_OK && monotone && last_done == want && last_total == want,
        "the progress counts %d of %d batches, want %d (%s)", last_done, last_total, want, err);
  CHECK(!nn_trainer_choosing(tr) && nn_trainer_choose(tr, progress, NULL, err) == NN_OK,
        "chosen once");
  nn_trainer_free(tr);

  rc = create(&tr, "{" SMALL "}", ROWS, err);
  if (rc != NN_OK) return;
  float before = tr->cfg.word_dropout;
  calls = last_done = last_total = 0;
  stop_at = want / 2;
  nn_epoch_stats s;
  rc = nn_trainer_epoch(tr, &s, progress, NULL, err);
  CHECK(rc == NN_INTERRUPTED && calls == want / 2 && tr->epochs_run == 0 &&
            tr->cfg.word_dropout == before && !tr->cfg.lazy_adam,
        "interrupted while choosing: %d after %d calls (%s), the options as they were", rc, calls,
        err);
  stop_at = 0;
  /* the fold's weights are left: the trainer trains no more, and the metrics claim no choice */
  rc = nn_trainer_epoch(tr, &s, NULL, NULL, err);
  char *metrics = nn_trainer_metrics_json(tr);
  CHECK(rc == NN_ERROR && strstr(err, "word dropout") && metrics &&
            !strstr(metrics, "word_dropout"),
        "after an interrupted choice: %d '%s', %s", rc, err, metrics ? metrics : "NULL");
  nn_mem_free(NULL, metrics);
  nn_trainer_free(tr);

  /* the model taken: nothing to choose, an error to ask */
  rc = create(&tr, "{" NET ",\"epochs\":1}", ROWS, err);
  if (rc != NN_OK) return;
  nn_model *m = NULL;
  CHECK(nn_trainer_take_model(tr, &m, err) == NN_OK, "take: %s", err);
  CHECK(!nn_trainer_choosing(tr) && nn_trainer_choose(tr, NULL, NULL, err) == NN_ERROR,
        "no choice once the model is taken (%s)", err);
  nn_model_free(m);
  nn_trainer_free(tr);
}

static nn_trainer *oom_setup(void) {
  char err[NN_ERR_LEN];
  nn_trainer *tr = NULL;
  int rc = create(&tr, "{" SMALL "}", ROWS, err);
  CHECK(rc == NN_OK, "create: %s", err);
  return tr;
}

static int oom_step(nn_trainer *tr, char *err) { return nn_trainer_choose(tr, NULL, NULL, err); }

static void check_out_of_memory(void) {
  make_rows(1);
  int failures = fail_each_allocation(oom_setup, oom_step, 32);
  CHECK(failures >= 5, "%d allocations of the choice were failed", failures);
}

int main(void) {
  check_sizing();
  check_same_bits_as_given();
  check_threads();
  check_progress_and_interrupt();
  check_uneven_halves();
  check_out_of_memory();
  return check_finish("test_choose");
}
