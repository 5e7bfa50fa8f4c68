/* test_self_train.c -- self-training (engine/self_train.c): the unlabelled rows the classifier
 * is surest of train again with its labels.
 *   - the rows chosen at the end of round 1 are, for each class, its quota (the training rows'
 *     proportions of round(self_training x training rows), at most half the unlabelled rows)
 *     of the rows predicted as that class
 *     with the highest probability, ties to the earlier row: checked against a choice computed
 *     here from round 1's own logits; their labels are the predicted ones
 *   - round 2 starts from the weights the first epoch started from (after the pretraining), with
 *     a new optimizer, the batch and epochs sized to its rows, epochs counting on
 *   - on two topics the pseudo-labels are right (the rows are separable), and the metrics say
 *     what round 2 had
 *   - the same seed gives the same bits at 1 and 2 threads
 *   - an interrupt while the unlabelled rows are scored stops the training (NN_INTERRUPTED),
 *     and the scoring reports no loss (NaN: attn_status shows NULL, not 0);
 *     out of memory at each allocation of the step into round 2 is NN_NOMEM, nothing leaked
 *   - quotas whose rounding adds up to more than the rows planned: the classes take theirs in
 *     class order until the rows run out, as the choice computed here
 *   - a row whose logits are not all finite (NaN weights on one word) is never chosen, and the
 *     sort of the scores stays a total order; with every logit NaN no row is chosen, and round
 *     1's model is the result
 *   - "self_training": 0, a warm start, or no unlabelled rows: one round, as before
 *   - the recipe's sizing: on with pretraining and fewer than NN_SMALL_ROWS training rows, off
 *     otherwise, and a value given is kept
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

/* Two topics of 40 words ("z00".."z39", "q00".."q39"); a row is 6 words of one topic. Labelled
 * rows: 3 of topic z for each of topic q (unequal quotas); unlabelled rows alternate. */
#define ROWS 64
#define UNLAB 600
static char text_buf[ROWS + UNLAB][120];
static const char *texts[ROWS + UNLAB];
static const char *labels[ROWS];
static int topic_of[ROWS + UNLAB];

static uint64_t lcg = 777;
static uint32_t next_u32(void) {
  lcg = lcg * 6364136223846793005ull + 1442695040888963407ull;
  return (uint32_t)(lcg >> 33);
}

static void make_rows(void) {
  for (int i = 0; i < ROWS + UNLAB; i++) {
    int topic = i < ROWS ? i % 4 == 3 : i & 1;
    size_t len = 0;
    for (int w = 0; w < 6; w++)
      len += (size_t)snprintf(text_buf[i] + len, sizeof text_buf[i] - len, "%s%c%02d", w ? " " : "",
                              topic ? 'q' : 'z', (int)(next_u32() % 40));
    texts[i] = text_buf[i];
    topic_of[i] = topic;
    if (i < ROWS) labels[i] = topic ? "one" : "zero";
  }
}

#define SMALL "\"embed_dim\":8,\"hidden\":8,\"fc_hidden\":0,\"pretrain_epochs\":3"

static int create(nn_trainer **tr, const char *json, int n_unlab, const nn_model *base, char *err) {
  nn_config cfg;
  nn_config_default(&cfg);
  if (nn_config_parse_json(&cfg, json, NULL, err) != NN_OK) return NN_ERROR;
  nn_trainer_args a = {.cfg = &cfg,
                       .texts = texts,
                       .labels = labels,
                       .n = ROWS,
                       .n_unlabelled = n_unlab,
                       .base = base,
                       .mem = use_mem};
  return nn_trainer_create(tr, &a, err);
}

typedef struct choice {
  double p;
  int row, c;
} choice;

static int by_p(const void *a, const void *b) {
  const choice *x = a, *y = b;
  if (x->p != y->p) return x->p > y->p ? -1 : 1;
  return x->row - y->row;
}

static int ascending(const void *a, const void *b) { return *(const int *)a - *(const int *)b; }

/* The rows round 2 should add, from the model's weights now: each class's quota of its surest
 * rows (an implementation of the rule apart from self_train.c's). Returns how many, in rows[]
 * ascending with their classes in cls[row - n]. */
static int expected_choice(nn_trainer *tr, int *rows, int *cls) {
  int n = tr->data.n, C = tr->data.C;
  choice *all = calloc((size_t)tr->data.n_unlab, sizeof *all);
  int batch[64], step = tr->batch_rows < 64 ? tr->batch_rows : 64;
  for (int first = 0; first < tr->data.n_unlab; first += step) {
    int count = tr->data.n_unlab - first < step ? tr->data.n_unlab - first : step;
    char err[NN_ERR_LEN];
    for (int b = 0; b < count; b++) batch[b] = n + first + b;
    CHECK(nn_train_forward_rows(tr, batch, count, err) == NN_OK, "forward: %s", err);
    for (int b = 0; b < count; b++) {
      const float *z = tr->logits + (size_t)b * C;
      int best = 0;
      for (int c = 1; c < C; c++)
        if (z[c] > z[best]) best = c;
      double sum = 0;
      for (int c = 0; c < C; c++) sum += exp((double)z[c] - z[best]);
      all[first + b] = (choice){(float)(1.0 / sum), n + first + b, best};
    }
  }
  qsort(all, (size_t)tr->data.n_unlab, sizeof *all, by_p);
  int count[8] = {0}; /* two classes here */
  for (int i = 0; i < n; i++) count[tr->data.row_class[i]]++;
  int want = (int)floor(tr->cfg.self_training * n + 0.5), got = 0;
  if (want > tr->data.n_unlab / 2) want = tr->data.n_unlab / 2; /* the surer half at most */
  for (int c = 0; c < C; c++) {
    int quota = (int)floor((double)want * count[c] / n + 0.5), k = 0;
    for (int i = 0; i < tr->data.n_unlab && k < quota && got < want; i++)
      if (all[i].c == c) {
        rows[got++] = all[i].row;
        cls[all[i].row - n] = c;
        k++;
      }
  }
  qsort(rows, (size_t)got, sizeof *rows, ascending);
  free(all);
  return got;
}

/* Runs the epochs of round 1; returns the trainer at its end (round 2 not begun). */
static int run_round1(nn_trainer *tr, char *err) {
  nn_epoch_stats s;
  while (!nn_trainer_self_training(tr)) {
    int rc = nn_trainer_epoch(tr, &s, NULL, NULL, err);
    if (rc != NN_OK) return rc;
  }
  return NN_OK;
}

static void check_choice_and_restart(void) {
  char err[NN_ERR_LEN];
  nn_trainer *tr = NULL;
  int rc = create(&tr, "{" SMALL ",\"self_training\":1.5,\"threads\":1}", UNLAB, NULL, err);
  CHECK(rc == NN_OK, "create: %s", err);
  if (rc != NN_OK) return;
  CHECK(tr->pseudo_max == 96, "planned rows %d, want 1.5 x 64 = 96", tr->pseudo_max);
  rc = nn_trainer_pretrain(tr, NULL, NULL, err);
  CHECK(rc == NN_OK, "pretrain: %s", err);
  size_t P = tr->param_count;
  float *start = malloc(P * sizeof *start);
  memcpy(start, nn_model_weights(tr->model), P * sizeof *start);
  int epochs1 = tr->cfg.epochs, batch1 = tr->cfg.batch_size;
  rc = run_round1(tr, err);
  CHECK(rc == NN_OK, "round 1: %s", err);
  CHECK(tr->epochs_run == epochs1 && tr->round == 0, "round 1 ran %d of %d epochs", tr->epochs_run,
        epochs1);
  CHECK(memcmp(tr->start_params, start, P * sizeof *start) == 0,
        "the weights kept for round 2 are the first epoch's start");
  int want_rows[UNLAB], want_cls[UNLAB];
  int want = expected_choice(tr, want_rows, want_cls);
  CHECK(want == 96, "expected %d rows chosen", want);
  nn_epoch_stats s;
  rc = nn_trainer_epoch(tr, &s, NULL, NULL, err); /* scores, chooses, restarts, one epoch */
  CHECK(rc == NN_OK, "round 2's first epoch: %s", err);
  CHECK(tr->round == 1 && tr->n_pseudo == want, "round %d with %d rows, want 1 with %d", tr->round,
        tr->n_pseudo, want);
  int same = 1, right = 0, ones = 0;
  for (int k = 0; k < tr->n_pseudo && k < want; k++) {
    int r = tr->pseudo_rows[k];
    same &= r == want_rows[k] && tr->data.row_class[r] == want_cls[r - tr->data.n];
    right += (tr->data.row_class[r] == 0) == topic_of[r]; /* class 0 is "one": labels sort */
    ones += tr->data.row_class[r] == 0;
  }
  CHECK(same, "the rows chosen and their labels are each class's surest");
  CHECK(ones == 24, "%d rows of class one, want its quota 96 x 16 / 64 = 24", ones);
  CHECK(right >= tr->n_pseudo - 2, "%d of %d pseudo-labels right", right, tr->n_pseudo);
  CHECK(s.epoch == epochs1 + 1, "round 2's first epoch is %d, want %d", s.epoch, epochs1 + 1);
  int rows2 = ROWS + want, batch2 = nn_config_sized_batch(rows2);
  int epochs2 = nn_config_sized_epochs((rows2 + batch2 - 1) / batch2);
  CHECK(tr->cfg.batch_size == batch2 && tr->cfg.epochs == epochs1 + epochs2,
        "round 2: batch %d epochs %d, want %d and %d + %d", tr->cfg.batch_size, tr->cfg.epochs,
        batch2, epochs1, epochs2);
  CHECK(tr->adam.step == (rows2 + batch2 - 1) / batch2, "a new optimizer: %lld steps",
        (long long)tr->adam.step);
  CHECK(batch1 == 8, "round 1's batch %d", batch1);
  while ((rc = nn_trainer_epoch(tr, &s, NULL, NULL, err)) == NN_OK) {
  }
  CHECK(rc == NN_DONE && nn_trainer_done(tr), "round 2 ends: %d %s", rc, err);
  CHECK(tr->epochs_run == epochs1 + epochs2, "%d epochs in all", tr->epochs_run);
  char *metrics = nn_trainer_metrics_json(tr);
  char expect[200];
  snprintf(expect, sizeof expect,
           "\"self_training\":{\"pseudo_labelled_rows\":%d,\"first_epoch\":%d,\"batch_size\":%d,"
           "\"epochs\":%d,",
           want, epochs1 + 1, batch2, epochs2);
  CHECK(metrics && strstr(metrics, expect), "metrics %s, want %s", metrics ? metrics : "NULL",
        expect);
  CHECK(metrics && strstr(metrics, "\"sized\":{\"validation\":\"none\",\"batch_size\":8,"),
        "sized: round 1's batch: %s", metrics ? metrics : "NULL");
  nn_mem_free(NULL, metrics);
  free(start);
  nn_trainer_free(tr);
}

/* self_training 2 / 64: 2 rows planned, quotas round(2 x 16 / 64) = 1 and round(2 x 48 / 64) =
 * 2; class 0 takes its 1, class 1 the 1 left. */
static void check_quota_rounding(void) {
  char err[NN_ERR_LEN];
  nn_trainer *tr = NULL;
  int rc = create(&tr, "{" SMALL ",\"self_training\":0.03125,\"threads\":1}", UNLAB, NULL, err);
  CHECK(rc == NN_OK && tr->pseudo_max == 2, "create: %s, %d rows planned", err,
        tr ? tr->pseudo_max : -1);
  if (rc != NN_OK) return;
  CHECK(run_round1(tr, err) == NN_OK, "round 1: %s", err);
  int want_rows[UNLAB], want_cls[UNLAB];
  int want = expected_choice(tr, want_rows, want_cls);
  nn_epoch_stats s;
  rc = nn_trainer_epoch(tr, &s, NULL, NULL, err);
  CHECK(rc == NN_OK && tr->n_pseudo == 2 && want == 2, "%d rows chosen, want %d (%d %s)",
        tr->n_pseudo, want, rc, err);
  int same = tr->n_pseudo == want, per_class[2] = {0, 0};
  for (int k = 0; k < tr->n_pseudo && k < want; k++) {
    int r = tr->pseudo_rows[k];
    same &= r == want_rows[k] && tr->data.row_class[r] == want_cls[r - tr->data.n];
    per_class[tr->data.row_class[r] & 1]++;
  }
  CHECK(same && per_class[0] == 1 && per_class[1] == 1,
        "the quotas capped in class order: %d and %d rows", per_class[0], per_class[1]);
  nn_trainer_free(tr);
}

/* NaN in the kept weights: the embedding row of one word (the rows holding it score NaN), then
 * every weight. */
static void check_not_finite(void) {
  for (int all = 0; all < 2; all++) {
    char err[NN_ERR_LEN];
    nn_trainer *tr = NULL;
    int rc = create(&tr, "{" SMALL ",\"self_training\":1.5,\"threads\":1}", UNLAB, NULL, err);
    CHECK(rc == NN_OK, "create: %s", err);
    if (rc != NN_OK) return;
    CHECK(run_round1(tr, err) == NN_OK, "round 1: %s", err);
    int id = nn_vocab_lookup(nn_model_vocab(tr->model), "q07", 3), E = tr->model->E, poisoned = 0;
    CHECK(id > NN_UNK, "q07 is in the vocabulary");
    if (all)
      for (size_t i = 0; i < tr->param_count; i++) tr->best_params[i] = NAN;
    for (int k = 0; k < tr->K && !all; k++) {
      float *row = tr->best_params + nn_model_member(tr->model, k)->emb + (size_t)id * E;
      for (int e = 0; e < E; e++) row[e] = NAN;
    }
    for (int r = ROWS; r < ROWS + UNLAB; r++) poisoned += strstr(texts[r], "q07") != NULL;
    nn_epoch_stats s;
    rc = nn_trainer_epoch(tr, &s, NULL, NULL, err);
    if (all) {
      CHECK(rc == NN_DONE && tr->n_pseudo == 0 && tr->round == 1 && nn_trainer_done(tr),
            "every logit NaN: no row chosen, one round (%d, %d rows, %s)", rc, tr->n_pseudo, err);
    } else {
      int chosen_poisoned = 0;
      for (int k = 0; k < tr->n_pseudo; k++)
        chosen_poisoned += strstr(texts[tr->pseudo_rows[k]], "q07") != NULL;
      CHECK(rc == NN_OK && tr->n_pseudo == 96 && poisoned > 20 && chosen_poisoned == 0,
            "NaN logits on the %d rows with q07: %d of them among the %d rows chosen (%d %s)",
            poisoned, chosen_poisoned, tr->n_pseudo, rc, err);
    }
    nn_trainer_free(tr);
  }
}

/* the final weights of a whole training */
static float *train_all(const char *json, int n_unlab, size_t *P, int *pseudo) {
  char err[NN_ERR_LEN];
  nn_trainer *tr = NULL;
  if (create(&tr, json, n_unlab, NULL, err) != NN_OK) {
    CHECK(0, "create %s: %s", json, err);
    return NULL;
  }
  nn_epoch_stats s;
  int rc;
  while ((rc = nn_trainer_epoch(tr, &s, NULL, NULL, err)) == NN_OK) {
  }
  CHECK(rc == NN_DONE, "%s: %s", json, err);
  nn_model *m = NULL;
  CHECK(nn_trainer_take_model(tr, &m, err) == NN_OK, "take: %s", err);
  *P = tr->param_count;
  *pseudo = tr->n_pseudo;
  float *w = malloc(*P * sizeof *w);
  memcpy(w, nn_model_weights(m), *P * sizeof *w);
  nn_model_free(m);
  nn_trainer_free(tr);
  return w;
}

static void check_determinism(void) {
  size_t P1 = 0, P2 = 0, P0 = 0;
  int n1 = 0, n2 = 0, n0 = 0;
  float *one =
      train_all("{" SMALL ",\"self_training\":2,\"epochs\":4,\"threads\":1}", UNLAB, &P1, &n1);
  float *two =
      train_all("{" SMALL ",\"self_training\":2,\"epochs\":4,\"threads\":2}", UNLAB, &P2, &n2);
  float *none =
      train_all("{" SMALL ",\"self_training\":0,\"epochs\":4,\"threads\":1}", UNLAB, &P0, &n0);
  CHECK(one && two && P1 == P2 && n1 > 0 && n1 == n2 && memcmp(one, two, P1 * sizeof *one) == 0,
        "1 and 2 threads: the same bits (%d and %d rows added)", n1, n2);
  CHECK(none && n0 == 0 && P0 == P1 && memcmp(one, none, P1 * sizeof *one) != 0,
        "self_training 0: no row added, other weights");
  free(one);
  free(two);
  free(none);
}

static int interrupt_armed = 0, interrupt_calls = 0;
static double interrupt_loss = 0;
static int stop_when_armed(void *ctx, int done, int total, double loss, double rate) {
  (void)ctx, (void)done, (void)total, (void)rate;
  if (interrupt_armed) interrupt_calls++, interrupt_loss = loss;
  return interrupt_armed;
}

static void check_interrupt(void) {
  char err[NN_ERR_LEN];
  nn_trainer *tr = NULL;
  int rc =
      create(&tr, "{" SMALL ",\"self_training\":1,\"epochs\":2,\"threads\":1}", UNLAB, NULL, err);
  CHECK(rc == NN_OK, "create: %s", err);
  if (rc != NN_OK) return;
  CHECK(run_round1(tr, err) == NN_OK, "round 1: %s", err);
  interrupt_armed = 1;
  nn_epoch_stats s;
  rc = nn_trainer_epoch(tr, &s, stop_when_armed, NULL, err);
  CHECK(rc == NN_INTERRUPTED && tr->round == 0 && interrupt_calls == 1,
        "interrupted while scoring: %d round %d calls %d (%s)", rc, tr->round, interrupt_calls,
        err);
  /* the scoring computes no loss: attn_status shows none, not 0 */
  CHECK(isnan(interrupt_loss), "the scoring's progress reports no loss (NaN), got %g",
        interrupt_loss);
  interrupt_armed = 0;
  nn_trainer_free(tr);
}

/* Out of memory at each allocation of the step into round 2 (the scores, the rows, the new
 * optimizer...): NN_NOMEM with a message, and the trainer is still freed whole (ASan). */
static nn_trainer *oom_setup(void) {
  char err[NN_ERR_LEN];
  nn_trainer *tr = NULL;
  int rc =
      create(&tr, "{" SMALL ",\"self_training\":1,\"epochs\":1,\"threads\":1}", UNLAB, NULL, err);
  CHECK(rc == NN_OK, "create: %s", err);
  if (rc == NN_OK) CHECK(run_round1(tr, err) == NN_OK, "round 1: %s", err);
  return tr;
}

static int oom_step(nn_trainer *tr, char *err) {
  nn_epoch_stats s;
  return nn_trainer_epoch(tr, &s, NULL, NULL, err);
}

static void check_out_of_memory(void) {
  int failures = fail_each_allocation(oom_setup, oom_step, 64);
  CHECK(failures >= 3, "%d allocations of the step into round 2 were failed", failures);
}

static void check_one_round(void) {
  char err[NN_ERR_LEN];
  static const struct {
    const char *json;
    int n_unlab;
  } cases[] = {
      {"{" SMALL ",\"self_training\":0,\"epochs\":2}", UNLAB},
      {"{" SMALL ",\"self_training\":2,\"epochs\":2}", 0},
      /* sized: too few unlabelled rows for the pretraining, so none for the self-training */
      {"{\"embed_dim\":8,\"hidden\":8,\"fc_hidden\":0,\"epochs\":2}", UNLAB},
  };
  for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
    nn_trainer *tr = NULL;
    int rc = create(&tr, cases[k].json, cases[k].n_unlab, NULL, err);
    CHECK(rc == NN_OK, "create %s: %s", cases[k].json, err);
    if (rc != NN_OK) continue;
    nn_epoch_stats s;
    int epochs = 0;
    while ((rc = nn_trainer_epoch(tr, &s, NULL, NULL, err)) == NN_OK) epochs++;
    char *metrics = nn_trainer_metrics_json(tr);
    CHECK(rc == NN_DONE && epochs == 2 && tr->pseudo_max == 0 && metrics &&
              !strstr(metrics, "self_training"),
          "%s, %d unlabelled rows: %d epochs, one round (%s)", cases[k].json, cases[k].n_unlab,
          epochs, metrics ? metrics : "NULL");
    nn_mem_free(NULL, metrics);
    if (k == 0) { /* a warm start from this model reads no unlabelled row */
      nn_model *m = NULL;
      CHECK(nn_trainer_take_model(tr, &m, err) == NN_OK, "take: %s", err);
      nn_trainer *warm = NULL;
      rc = create(&warm, "{" SMALL ",\"subword_buckets\":0,\"self_training\":2,\"epochs\":2}",
                  UNLAB, m, err);
      CHECK(rc == NN_OK && warm->data.n_unlab == 0 && warm->pseudo_max == 0,
            "a warm start: one round (%s)", err);
      nn_trainer_free(warm);
      nn_model_free(m);
    }
    nn_trainer_free(tr);
  }
}

/* at most half the unlabelled rows, whatever the ratio */
static void check_cap(void) {
  char err[NN_ERR_LEN];
  nn_trainer *tr = NULL;
  int rc = create(&tr, "{" SMALL ",\"self_training\":10,\"epochs\":1}", UNLAB, NULL, err);
  CHECK(rc == NN_OK && tr->pseudo_max == UNLAB / 2, "10 x 64 rows capped at %d: %d (%s)", UNLAB / 2,
        tr ? tr->pseudo_max : -1, err);
  nn_trainer_free(tr);
}

static void check_sizing(void) {
  static const struct {
    const char *json;
    int n_train, n_unlab;
    float want;
    int sized;
  } cases[] = {
      {"{}", 200, 7800, NN_SELF_TRAINING, 1},
      {"{}", 4999, 7800, NN_SELF_TRAINING, 1},
      {"{}", 5000, 7800, 0.0f, 0},                /* many labels: the split validates */
      {"{}", 200, NN_PRETRAIN_ROWS - 1, 0.0f, 0}, /* no pretraining */
      {"{\"pretrain_epochs\":0}", 200, 7800, 0.0f, 0},
      {"{\"self_training\":0.5}", 200, 7800, 0.5f, 0}, /* given: kept */
      {"{\"self_training\":0}", 200, 7800, 0.0f, 0},
      {"{\"recipe\":\"lesson\"}", 200, 7800, 0.0f, 0},
  };
  for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
    char err[NN_ERR_LEN];
    nn_config cfg;
    nn_config_default(&cfg);
    CHECK(nn_config_parse_json(&cfg, cases[k].json, NULL, err) == NN_OK, "%s", err);
    nn_config_size_to_data(&cfg, cases[k].n_train, 4, cases[k].n_unlab, 56000);
    int sized = (cfg.data_sized_done & NN_SIZED_SELF_TRAINING) != 0;
    CHECK(cfg.self_training == cases[k].want && sized == cases[k].sized,
          "%s, %d training rows, %d unlabelled: self_training %g sized %d, want %g %d",
          cases[k].json, cases[k].n_train, cases[k].n_unlab, cfg.self_training, sized,
          cases[k].want, cases[k].sized);
  }
  char err[NN_ERR_LEN];
  nn_config cfg;
  nn_config_default(&cfg);
  CHECK(nn_config_parse_json(&cfg, "{\"self_training\":11}", NULL, err) == NN_ERROR &&
            strstr(err, "self_training"),
        "self_training past 10 is an error: %s", err);
}

int main(void) {
  make_rows();
  check_choice_and_restart();
  check_determinism();
  check_interrupt();
  check_out_of_memory();
  check_quota_rounding();
  check_not_finite();
  check_one_round();
  check_cap();
  check_sizing();
  return check_finish("test_self_train");
}
