/* test_train.c -- the training loop (engine/train.c) end to end on small synthetic data sets:
 *   - a task whose label is decided by one keyword is learned to > 95% validation accuracy
 *   - the same seed gives memcmp-identical weights and identical epoch statistics; another
 *     seed gives different weights
 *   - early stopping ends a run with no signal in it, `patience` epochs after its best epoch,
 *     and the model handed over holds the best epoch's weights (equal to a run stopped there)
 *   - ReduceLROnPlateau: the lr of each epoch follows PyTorch's rule replayed over the reported
 *     validation losses, and drops by exactly the factor
 *   - option "monitor" (val_f1, val_accuracy): the best flags follow the monitored figure
 *     (strictly higher), early stopping counts epochs without a higher one, the model handed
 *     over holds that epoch's weights, the metrics JSON names it; training itself (losses, the
 *     learning rate on the validation loss) is the same as with val_loss
 *   - warm start (nn_trainer_args.base): the base model's vocabulary and labels are kept (new
 *     words are <UNK>), its first epoch starts from a lower training loss than a fresh model's
 *     on the same rows, the base model is left unchanged, rows of only some of its labels train;
 *     a label it lacks and a change of architecture are errors naming them
 *   - a progress callback that returns non-zero interrupts (NN_INTERRUPTED)
 *   - the stratified split sizes, the metrics JSON, and the error messages for no rows, one
 *     label, too many labels and too few rows for a validation split
 */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "check.h"
#include "config_base.h"
#include "nn_internal.h"
#include "train.h"

#define MAX_ROWS 12000

typedef struct dataset {
  int n;
  char *texts[MAX_ROWS];
  int text_lens[MAX_ROWS];
  char *labels[MAX_ROWS];
  int label_lens[MAX_ROWS];
} dataset;

static uint64_t lcg_state;
static uint32_t lcg_next(void) { /* the test's own generator, independent of the engine's */
  lcg_state = lcg_state * 6364136223846793005ull + 1442695040888963407ull;
  return (uint32_t)(lcg_state >> 33);
}

static char *dup_string(const char *s) {
  size_t len = strlen(s);
  char *copy = malloc(len + 1);
  memcpy(copy, s, len + 1);
  return copy;
}

static void add_row(dataset *d, const char *text, const char *label) {
  d->texts[d->n] = dup_string(text);
  d->text_lens[d->n] = (int)strlen(text);
  d->labels[d->n] = dup_string(label);
  d->label_lens[d->n] = (int)strlen(label);
  d->n++;
}

static void free_dataset(dataset *d) {
  for (int i = 0; i < d->n; i++) {
    free(d->texts[i]);
    free(d->labels[i]);
  }
  d->n = 0;
}

/* nn_trainer_create over the first n rows of d (all of them when n < 0). */
static int create_trainer(nn_trainer **tr, const dataset *d, const nn_config *cfg,
                          const nn_model *base, int n, char *err) {
  nn_trainer_args args = {.cfg = cfg,
                          .base = base,
                          .texts = (const char *const *)d->texts,
                          .text_lens = d->text_lens,
                          .labels = (const char *const *)d->labels,
                          .label_lens = d->label_lens,
                          .n = n < 0 ? d->n : n};
  return nn_trainer_create(tr, &args, err);
}

/* n rows: a keyword (one of 3 per class) at a random position among 2..7 filler words; the
 * label is the keyword's class. With random_labels the label is drawn independently. */
static void make_keyword_data(dataset *d, int n, int classes, int random_labels, uint64_t seed) {
  static const char *class_names[] = {"sports", "business", "world", "science"};
  lcg_state = seed;
  d->n = 0;
  for (int i = 0; i < n; i++) {
    int c = (int)(lcg_next() % (uint32_t)classes);
    int words = 2 + (int)(lcg_next() % 6), key_at = (int)(lcg_next() % (uint32_t)(words + 1));
    char text[256] = "";
    size_t len = 0;
    for (int w = 0; w <= words; w++) {
      char word[32];
      if (w == key_at) snprintf(word, sizeof word, "key%dx%d", c, (int)(lcg_next() % 3));
      else snprintf(word, sizeof word, "filler%d", (int)(lcg_next() % 40));
      len += (size_t)snprintf(text + len, sizeof text - len, "%s%s", w ? " " : "", word);
    }
    int label = random_labels ? (int)(lcg_next() % (uint32_t)classes) : c;
    add_row(d, text, class_names[label]);
  }
}

static void small_config(nn_config *cfg) {
  test_config_base(cfg);
  cfg->embed_dim = 16;
  cfg->hidden = 16;
  cfg->fc_hidden = 16;
  cfg->batch_size = 16;
  cfg->lr = 0.01f;
  cfg->epochs = 8;
  cfg->threads = 1;
  cfg->progress = 0;
}

typedef struct run_result {
  int status; /* of create, or of the last epoch call */
  int epochs; /* epochs run (NN_OK returns) */
  nn_epoch_stats stats[64];
  float *params; /* the taken model's parameters (malloc'd) */
  size_t param_count;
  char *json;
  char err[NN_ERR_LEN];
} run_result;

static void run_training(run_result *r, const nn_config *cfg, dataset *d, nn_progress_fn fn,
                         void *ctx) {
  memset(r, 0, sizeof *r);
  nn_trainer *tr = NULL;
  r->status = create_trainer(&tr, d, cfg, NULL, -1, r->err);
  if (r->status != NN_OK) return;
  for (;;) {
    nn_epoch_stats s;
    r->status = nn_trainer_epoch(tr, &s, fn, ctx, r->err);
    if (r->status != NN_OK) break;
    if (r->epochs < 64) r->stats[r->epochs] = s;
    r->epochs++;
  }
  if (r->status == NN_DONE) {
    r->json = nn_trainer_metrics_json(tr);
    nn_model *model = NULL;
    int status = nn_trainer_take_model(tr, &model, r->err);
    CHECK(status == NN_OK && model, "take_model: %s", r->err);
    if (model) {
      r->param_count = nn_model_param_count(model);
      r->params = malloc(r->param_count * sizeof(float));
      memcpy(r->params, nn_model_params(model), r->param_count * sizeof(float));
      nn_model *again = NULL;
      CHECK(nn_trainer_take_model(tr, &again, r->err) == NN_ERROR && !again,
            "a second take_model must fail");
      nn_model_free(model);
    }
  }
  nn_trainer_free(tr);
}

static void free_run(run_result *r) {
  free(r->params);
  free(r->json);
  r->params = NULL;
  r->json = NULL;
}

/* The value of "key": in a flat JSON object of numbers (NAN when absent or null). */
static double json_value(const char *json, const char *key) {
  char pattern[64];
  snprintf(pattern, sizeof pattern, "\"%s\":", key);
  const char *at = json ? strstr(json, pattern) : NULL;
  if (!at || strncmp(at + strlen(pattern), "null", 4) == 0) return NAN;
  return strtod(at + strlen(pattern), NULL);
}

static int interrupt_at_3(void *ctx, int done, int total, double loss, double rows_per_second) {
  int *calls = ctx;
  (*calls)++;
  CHECK(done >= 1 && done <= total && isfinite(loss) && rows_per_second >= 0,
        "progress arguments: done %d total %d loss %g rows/s %g", done, total, loss,
        rows_per_second);
  return done == 3;
}

/* The progress calls of a run: one after every training batch (1..total in every epoch), then
 * the last one repeated every 8 validation batches (where an interrupt is answered too). */
typedef struct progress_calls {
  int calls, repeats, last;
} progress_calls;

static int count_calls(void *ctx, int done, int total, double loss, double rows_per_second) {
  progress_calls *p = ctx;
  if (p->last == total && done == total) {
    p->repeats++;
    return 0;
  }
  p->calls++;
  int expect = (p->calls - 1) % total + 1;
  if (done != expect) /* one message, not one per batch */
    CHECK(done == expect, "progress batches_done %d on call %d (total %d)", done, p->calls, total);
  p->last = done;
  return 0;
}

/* Interrupts at the first repeat of the last report: in the first epoch's validation. */
static int interrupt_in_validation(void *ctx, int done, int total, double loss,
                                   double rows_per_second) {
  int *last = ctx, stop = *last == total && done == total;
  *last = done;
  return stop;
}

static dataset data; /* large: static */

/* Option "monitor" = which (val_f1 or val_accuracy), against the same run under val_loss. */
static void check_monitor(const nn_config *base, nn_monitor which) {
  const char *name = nn_monitor_name(which);
  nn_config cfg = *base;
  run_result r, stop, loss_run;
  const run_result *loss = &loss_run;
  cfg.monitor = NN_MONITOR_VAL_LOSS;
  run_training(&loss_run, &cfg, &data, NULL, NULL);
  cfg.monitor = which;
  run_training(&r, &cfg, &data, NULL, NULL);
  CHECK(r.status == NN_DONE, "monitor %s: run status %d: %s", name, r.status, r.err);
  double highest = -INFINITY;
  int best = 0, differs = 0;
  for (int e = 0; e < r.epochs; e++) {
    double figure = which == NN_MONITOR_VAL_F1 ? r.stats[e].val_f1 : r.stats[e].val_accuracy;
    int expect_best = figure > highest;
    printf("monitor %s epoch %d: val_loss %.6f val_f1 %.4f val_acc %.4f lr %g%s%s\n", name, e + 1,
           r.stats[e].val_loss, r.stats[e].val_f1, r.stats[e].val_accuracy, r.stats[e].lr,
           r.stats[e].best ? " best" : "",
           e < loss->epochs && loss->stats[e].best ? " (loss best)" : "");
    CHECK(r.stats[e].best == expect_best, "monitor %s: epoch %d best flag %d, expected %d", name,
          e + 1, r.stats[e].best, expect_best);
    if (expect_best) highest = figure, best = e + 1;
    if (e < loss->epochs) { /* the same training: the monitor only reads the figures */
      CHECK(r.stats[e].val_loss == loss->stats[e].val_loss && r.stats[e].lr == loss->stats[e].lr &&
                r.stats[e].train_loss == loss->stats[e].train_loss,
            "monitor %s: epoch %d trains differently from val_loss", name, e + 1);
      differs += r.stats[e].best != loss->stats[e].best;
    }
  }
  CHECK(differs > 0, "monitor %s: the best flags equal val_loss's: the test shows nothing", name);
  CHECK(r.epochs == cfg.epochs || r.epochs == best + cfg.patience,
        "monitor %s: stopped after %d epochs, best %d, patience %d", name, r.epochs, best,
        cfg.patience);
  CHECK((int)json_value(r.json, "best_epoch") == best,
        "monitor %s: json best_epoch %g, expected %d", name, json_value(r.json, "best_epoch"),
        best);
  char expect_json[64];
  snprintf(expect_json, sizeof expect_json, "\"monitor\":\"%s\"", name);
  CHECK(r.json && strstr(r.json, expect_json), "monitor %s: json %s", name, r.json);
  if (best > 0)
    CHECK_CLOSE(json_value(r.json, "val_f1"), r.stats[best - 1].val_f1, 1e-8, 0, "json val_f1");
  /* the weights kept are those of the monitored best epoch: a run stopped there */
  nn_config cfg_stop = cfg;
  cfg_stop.epochs = best;
  cfg_stop.patience = 1000;
  run_training(&stop, &cfg_stop, &data, NULL, NULL);
  CHECK(stop.status == NN_DONE && stop.epochs == best, "monitor %s: run to epoch %d: %d epochs",
        name, best, stop.epochs);
  if (r.params && stop.params && r.param_count == stop.param_count)
    CHECK(memcmp(r.params, stop.params, r.param_count * sizeof(float)) == 0,
          "monitor %s: the taken model is not epoch %d's weights", name, best);
  printf("monitor %s: %d epochs, best %d (val_loss's best flags differ at %d epochs)\n", name,
         r.epochs, best, differs);
  free_run(&r);
  free_run(&stop);
  free_run(&loss_run);
}

/* nn_rng_dropout_mask is nn_rng_uniform's loop, inlined: the same values and the same state
 * after (determinism and the weights of every earlier run depend on it) */
static void check_dropout_mask_stream(void) {
  nn_rng a, b;
  nn_rng_seed(&a, 77);
  nn_rng_seed(&b, 77);
  enum { N = 10007 };
  static float loop[N], fast[N];
  for (int i = 0; i < N; i++) loop[i] = nn_rng_uniform(&a) < 0.9f ? 1.0f / 0.9f : 0.0f;
  nn_rng_dropout_mask(&b, fast, N, 0.9f, 1.0f / 0.9f);
  CHECK(memcmp(loop, fast, sizeof loop) == 0, "dropout mask equals the nn_rng_uniform loop");
  CHECK(nn_rng_next(&a) == nn_rng_next(&b), "the generator state after the mask is the same");
}

/* Train cfg on the rows of d to the end; the model, or NULL (with a failed CHECK). */
static nn_model *train_model(const nn_config *cfg, const nn_model *base, dataset *d,
                             double *first_train_loss) {
  char err[NN_ERR_LEN] = "";
  nn_trainer *tr = NULL;
  nn_model *model = NULL;
  int status = create_trainer(&tr, d, cfg, base, -1, err);
  CHECK(status == NN_OK, "%s: create: %s", base ? "warm start" : "fresh", err);
  if (status != NN_OK) return NULL;
  nn_epoch_stats s;
  for (int e = 0; (status = nn_trainer_epoch(tr, &s, NULL, NULL, err)) == NN_OK; e++) {
    if (e == 0) *first_train_loss = s.train_loss;
    printf("%s epoch %d: train_loss %.4f val_loss %.4f val_acc %.4f\n", base ? "warm" : "fresh",
           s.epoch, s.train_loss, s.val_loss, s.val_accuracy);
  }
  CHECK(status == NN_DONE, "%s: epochs: %s", base ? "warm start" : "fresh", err);
  char *json = nn_trainer_metrics_json(tr);
  CHECK(json && (strstr(json, "\"warm_start\":true") != NULL) == (base != NULL),
        "warm_start in the metrics: %s", json);
  free(json);
  if (status == NN_DONE) CHECK(nn_trainer_take_model(tr, &model, err) == NN_OK, "take: %s", err);
  nn_trainer_free(tr);
  return model;
}

/* nn_trainer_args.row_text / row_label over a dataset (as ext/ reads its packed rows); counts
 * the calls. */
static long row_fn_calls;
static size_t text_bytes_unchecked, text_bytes_most; /* text bytes read between stop checks */
static const char *data_text(void *ctx, int i, int *len) {
  const dataset *d = ctx;
  row_fn_calls++;
  *len = d->text_lens[i];
  text_bytes_unchecked += (size_t)d->text_lens[i];
  if (text_bytes_unchecked > text_bytes_most) text_bytes_most = text_bytes_unchecked;
  return d->texts[i];
}
static int count_stop(void *ctx) { /* never stops: records how much text went by unchecked */
  (void)ctx;
  text_bytes_unchecked = 0;
  return 0;
}
static const char *data_label(void *ctx, int i, int *len) {
  const dataset *d = ctx;
  row_fn_calls++;
  *len = d->label_lens[i];
  return d->labels[i];
}

/* A model trained over d's rows given through functions (arrays: NULL). */
static nn_model *train_with_functions(const nn_config *cfg, dataset *d, char *err) {
  nn_trainer *tr = NULL;
  nn_model *model = NULL;
  nn_trainer_args args = {
      .cfg = cfg, .row_text = data_text, .row_label = data_label, .rows_ctx = d, .n = d->n};
  row_fn_calls = 0;
  int status = nn_trainer_create(&tr, &args, err);
  long calls = row_fn_calls;
  nn_epoch_stats s;
  while (status == NN_OK && (status = nn_trainer_epoch(tr, &s, NULL, NULL, err)) == NN_OK) {
  }
  CHECK(row_fn_calls == calls, "the row functions are not called after nn_trainer_create");
  if (status == NN_DONE) status = nn_trainer_take_model(tr, &model, err);
  nn_trainer_free(tr);
  return model;
}

/* Long texts: the trainer asks whether to stop at least every few MiB of text it reads, while
 * it counts the words and while it encodes the rows (a few rows of megabytes each must not
 * stall an interrupt for the whole of them). */
static void check_stop_long_texts(void) {
  char err[NN_ERR_LEN] = "";
  nn_config cfg;
  small_config(&cfg);
  dataset d;
  make_keyword_data(&d, 24, 2, 0, 29);
  size_t big = (size_t)2 << 20; /* 24 texts of 2 MiB: 48 MiB */
  for (int i = 0; i < d.n; i++) {
    char *t = malloc(big + 1);
    if (!t) break;
    for (size_t k = 0; k < big; k++) t[k] = "abcd efg "[k % 9];
    memcpy(t, d.texts[i], strlen(d.texts[i]));
    t[big] = 0;
    free(d.texts[i]);
    d.texts[i] = t;
    d.text_lens[i] = (int)big;
  }
  nn_trainer *tr = NULL;
  nn_trainer_args args = {.cfg = &cfg,
                          .row_text = data_text,
                          .row_label = data_label,
                          .rows_ctx = &d,
                          .n = d.n,
                          .stop = count_stop};
  text_bytes_unchecked = text_bytes_most = 0;
  int status = nn_trainer_create(&tr, &args, err);
  CHECK(status == NN_OK, "24 texts of 2 MiB: %s", err);
  printf("long texts: at most %.1f MiB of text read between two stop checks\n",
         (double)text_bytes_most / (1 << 20));
  CHECK(text_bytes_most <= (size_t)4 << 20,
        "at most 4 MiB of text between stop checks (2 MiB texts), got %zu bytes", text_bytes_most);
  nn_trainer_free(tr);
  free_dataset(&d);
}

/* White box: every row's stored ids (train_data.c: blocks of 4096 rows, a start per 16 rows,
 * 16- or 32-bit ids) equal its text encoded again with the trainer's vocabulary. */
static void check_stored_ids(const nn_config *cfg, dataset *d, int want_ids16, const char *what) {
  char err[NN_ERR_LEN] = "";
  nn_trainer *tr = NULL;
  nn_trainer_args args = {
      .cfg = cfg, .row_text = data_text, .row_label = data_label, .rows_ctx = d, .n = d->n};
  int status = nn_trainer_create(&tr, &args, err);
  CHECK(status == NN_OK, "%s: create: %s", what, err);
  if (status != NN_OK) return;
  const nn_config *mc = nn_model_config(tr->model);
  const nn_vocab *vocab = nn_model_vocab(tr->model);
  nn_token *tokens = malloc((size_t)mc->max_len * sizeof *tokens);
  int bad = -1;
  for (int i = 0; tokens && i < d->n && bad < 0; i++) {
    int count = nn_text_encode(tokens, d->texts[i], d->text_lens[i], mc, vocab);
    if (count < 1) count = 1, tokens[0].id = NN_UNK;
    if (count > mc->max_len) count = mc->max_len;
    const void *ids = nn_train_row_ids(&tr->data, i);
    if (tr->data.row_length[i] != count) bad = i;
    for (int t = 0; bad < 0 && t < count; t++) {
      int id = tr->data.ids16 ? ((const uint16_t *)ids)[t] : ((const int32_t *)ids)[t];
      if (id != tokens[t].id) bad = i;
    }
  }
  CHECK(tokens && tr->data.ids16 == want_ids16 && bad < 0,
        "%s: %d rows, %d-bit ids (want %d); first row whose stored ids differ from its "
        "encoding: %d (-1: none)",
        what, d->n, tr->data.ids16 ? 16 : 32, want_ids16 ? 16 : 32, bad);
  free(tokens);
  nn_trainer_free(tr);
}

/* The rows through functions train the same weights as the same rows as arrays; over more than
 * one block of 4096 rows and a vocabulary past 16-bit ids (train_data.c keeps the ids of each
 * 4096 rows apart, 32 bits each here, a start per 16 rows), the keyword still decides. */
static void check_row_functions(void) {
  nn_config cfg;
  char err[NN_ERR_LEN] = "";
  double loss;
  small_config(&cfg);
  cfg.epochs = 2;
  make_keyword_data(&data, 9000, 3, 0, 17); /* 3 blocks of rows, 16-bit ids */
  check_stored_ids(&cfg, &data, 1, "narrow vocabulary");
  free_dataset(&data);
  make_keyword_data(&data, 800, 3, 0, 11);
  nn_model *arrays = train_model(&cfg, NULL, &data, &loss);
  nn_model *functions = train_with_functions(&cfg, &data, err);
  CHECK(arrays && functions && nn_model_param_count(arrays) == nn_model_param_count(functions) &&
            memcmp(nn_model_params(arrays), nn_model_params(functions),
                   nn_model_param_count(arrays) * sizeof(float)) == 0,
        "rows through functions: the same weights as arrays (%s)", err);
  nn_model_free(arrays);
  nn_model_free(functions);
  free_dataset(&data);
  /* 9,000 rows, each with 10 words of its own besides the keyword: 76,500 in training */
  make_keyword_data(&data, 9000, 3, 0, 13);
  for (int i = 0; i < data.n; i++) {
    char text[512];
    int len = snprintf(text, sizeof text, "%s", data.texts[i]);
    for (int k = 0; k < 10; k++)
      len += snprintf(text + len, sizeof text - (size_t)len, " u%dv%d", i, k);
    free(data.texts[i]);
    data.texts[i] = dup_string(text);
    data.text_lens[i] = len;
  }
  cfg.vocab_size = 100000;
  cfg.epochs = 3;
  cfg.batch_size = 64;
  check_stored_ids(&cfg, &data, 0, "wide vocabulary");
  nn_model *wide = train_with_functions(&cfg, &data, err);
  CHECK(wide != NULL, "9,000 rows, 76,500 words: %s", err);
  if (wide) {
    int words = nn_vocab_count(nn_model_vocab(wide)), right = 0;
    const nn_config *mc = nn_model_config(wide);
    nn_token *tokens = malloc((size_t)mc->max_len * sizeof *tokens);
    int *ids = malloc((size_t)mc->max_len * sizeof *ids);
    nn_workspace *ws = NULL;
    CHECK(tokens && ids && nn_workspace_create(&ws, NULL, err) == NN_OK, "workspace: %s", err);
    for (int i = 0; ws && i < 600; i++) { /* rows the model saw: it must have learned the keyword */
      int count =
          nn_text_encode(tokens, data.texts[i], data.text_lens[i], mc, nn_model_vocab(wide));
      for (int t = 0; t < count; t++) ids[t] = tokens[t].id;
      nn_batch batch = {ids, &count, NULL, 1, count};
      float logits[3];
      int c = 0;
      CHECK(nn_model_forward(wide, ws, &batch, 0, NULL, logits, NULL, err) == NN_OK, "forward: %s",
            err);
      for (int k = 1; k < 3; k++)
        if (logits[k] > logits[c]) c = k;
      right += strcmp(nn_model_label(wide, c), data.labels[i]) == 0;
    }
    nn_workspace_free(ws);
    free(tokens);
    free(ids);
    printf("wide vocabulary: %d words, %d of 600 rows right\n", words, right);
    CHECK(words > 65536 && right > 570,
          "ids past 16 bits over 3 blocks of rows: %d words, %d of "
          "600 right",
          words, right);
    nn_model_free(wide);
  }
  free_dataset(&data);
}

static void check_warm_start(void) {
  char err[NN_ERR_LEN] = "";
  nn_config cfg;
  small_config(&cfg);
  cfg.epochs = 3;
  /* the base: 3 classes learned from their keywords */
  make_keyword_data(&data, 600, 3, 0, 21);
  double loss0 = 0, fresh_loss = 0, warm_loss = 0;
  nn_model *base = train_model(&cfg, NULL, &data, &loss0);
  if (!base) return;
  size_t count = nn_model_param_count(base);
  float *before = malloc(count * sizeof *before);
  memcpy(before, nn_model_weights(base), count * sizeof *before);
  /* new rows of the same task, with words the base never saw */
  free_dataset(&data);
  make_keyword_data(&data, 300, 3, 0, 22);
  for (int i = 0; i < data.n; i += 3) {
    char *text = malloc((size_t)data.text_lens[i] + 16);
    int len = sprintf(text, "%s newword%d", data.texts[i], i % 7);
    free(data.texts[i]);
    data.texts[i] = text;
    data.text_lens[i] = len;
  }
  nn_config warm_cfg =
      *nn_model_config(base); /* as ext/ does: the base's options, then the user's */
  CHECK(nn_config_parse_json(&warm_cfg, "{\"epochs\":2,\"lr\":0.003,\"monitor\":\"val_f1\"}", NULL,
                             err) == NN_OK,
        "warm options: %s", err);
  nn_model *fresh = train_model(&cfg, NULL, &data, &fresh_loss);
  nn_model *warm = train_model(&warm_cfg, base, &data, &warm_loss);
  if (fresh && warm) {
    printf("warm start: first epoch train loss %.4f, fresh model %.4f\n", warm_loss, fresh_loss);
    CHECK(warm_loss < fresh_loss, "warm start first epoch loss %.4f not below fresh %.4f",
          warm_loss, fresh_loss);
    const nn_vocab *bv = nn_model_vocab(base), *wv = nn_model_vocab(warm);
    int same = nn_vocab_count(bv) == nn_vocab_count(wv);
    for (int id = 0; same && id < nn_vocab_count(bv); id++) {
      int la, lb;
      const char *a = nn_vocab_token(bv, id, &la), *b = nn_vocab_token(wv, id, &lb);
      same = la == lb && memcmp(a, b, (size_t)la) == 0;
    }
    CHECK(same, "warm start: the vocabulary is not the base model's (%d vs %d tokens)",
          nn_vocab_count(wv), nn_vocab_count(bv));
    CHECK(nn_vocab_lookup(wv, "newword1", 8) == NN_UNK &&
              nn_vocab_lookup(nn_model_vocab(fresh), "newword1", 8) > NN_UNK,
          "a new word is <UNK> for the warm start, in the fresh vocabulary");
    CHECK(nn_model_num_classes(warm) == 3 &&
              strcmp(nn_model_label(warm, 2), nn_model_label(base, 2)) == 0,
          "warm start labels");
    CHECK(nn_model_config(warm)->monitor == NN_MONITOR_VAL_F1 && nn_model_config(warm)->epochs == 2,
          "warm start options apply");
    CHECK(memcmp(before, nn_model_weights(base), count * sizeof *before) == 0,
          "warm start changed the base model's weights");
    size_t moved = 0;
    for (size_t i = 0; i < count; i++) moved += nn_model_weights(warm)[i] != before[i];
    CHECK(moved > count / 100, "warm start: only %zu of %zu weights moved", moved, count);
  }
  nn_model_free(fresh);
  nn_model_free(warm);

  /* rows of two of the three labels: the model keeps all three */
  dataset *d = &data;
  int kept = 0;
  for (int i = 0; i < d->n; i++) {
    if (strcmp(d->labels[i], "world") == 0) {
      free(d->texts[i]);
      free(d->labels[i]);
      continue;
    }
    d->texts[kept] = d->texts[i], d->text_lens[kept] = d->text_lens[i];
    d->labels[kept] = d->labels[i], d->label_lens[kept] = d->label_lens[i];
    kept++;
  }
  d->n = kept;
  double loss_subset = 0;
  warm = train_model(&warm_cfg, base, &data, &loss_subset);
  CHECK(warm && nn_model_num_classes(warm) == 3 && isfinite(loss_subset),
        "warm start on 2 of 3 labels: loss %g", loss_subset);
  nn_model_free(warm);

  /* errors: a label the base lacks (the first one named), an architecture option changed */
  nn_trainer *tr = NULL;
  free(d->labels[5]);
  d->labels[5] = dup_string("politics");
  d->label_lens[5] = 8;
  int status = create_trainer(&tr, d, &warm_cfg, base, -1, err);
  CHECK(status == NN_ERROR && !tr &&
            strcmp(err, "label \"politics\" of row 6 is not one of the base model's 3 labels: a "
                        "warm start keeps the base model's labels") == 0,
        "new label: %d %s", status, err);
  printf("warm start, new label: %s\n", err);
  const char *changes[][2] = {
      {"{\"hidden\":8}",
       "option \"hidden\" cannot change when training from a model: the base model has 16, got 8"},
      {"{\"attention\":\"dot\"}", "option \"attention\" cannot change when training from a model: "
                                  "the base model has \"linear\", got \"dot\""},
      {"{\"stopwords\":false}", "option \"stopwords\" cannot change when training from a model: "
                                "the base model has true, got false"},
  };
  for (int k = 0; k < 3; k++) {
    nn_config c = *nn_model_config(base);
    CHECK(nn_config_parse_json(&c, changes[k][0], NULL, err) == NN_OK, "parse %s: %s",
          changes[k][0], err);
    status = create_trainer(&tr, d, &c, base, -1, err);
    CHECK(status == NN_ERROR && !tr && strcmp(err, changes[k][1]) == 0, "%s: %d %s", changes[k][0],
          status, err);
    printf("warm start, %s: %s\n", changes[k][0], err);
  }
  free(before);
  nn_model_free(base);
  free_dataset(&data);
}

int main(void) {
  check_dropout_mask_stream();
  check_row_functions();
  check_stop_long_texts();
  check_warm_start();
  nn_config cfg;
  run_result a, b;
  char err[NN_ERR_LEN];
  nn_trainer *tr = NULL;

  /* ---- learning: the keyword decides the label */
  make_keyword_data(&data, 800, 3, 0, 7);
  small_config(&cfg);
  progress_calls seen = {0, 0, 0};
  run_training(&a, &cfg, &data, count_calls, &seen);
  CHECK(a.status == NN_DONE, "run status %d: %s", a.status, a.err);
  CHECK(a.epochs == cfg.epochs, "epochs run %d, expected %d", a.epochs, cfg.epochs);
  for (int e = 0; e < a.epochs; e++)
    printf("epoch %d: train_loss %.4f val_loss %.4f val_acc %.4f val_f1 %.4f lr %g %.3fs%s\n",
           a.stats[e].epoch, a.stats[e].train_loss, a.stats[e].val_loss, a.stats[e].val_accuracy,
           a.stats[e].val_f1, a.stats[e].lr, a.stats[e].seconds, a.stats[e].best ? " best" : "");
  double best_acc = 0;
  int best_epoch = 0;
  for (int e = 0; e < a.epochs; e++) {
    CHECK(a.stats[e].epoch == e + 1, "stats.epoch %d at index %d", a.stats[e].epoch, e);
    CHECK(a.stats[e].seconds > 0, "epoch seconds %g", a.stats[e].seconds);
    if (a.stats[e].best) best_acc = a.stats[e].val_accuracy, best_epoch = e + 1;
  }
  CHECK(best_acc > 0.95, "validation accuracy at the best epoch %.4f, expected > 0.95", best_acc);
  CHECK(a.stats[0].train_loss > a.stats[a.epochs - 1].train_loss,
        "train loss should fall: %g -> %g", a.stats[0].train_loss,
        a.stats[a.epochs - 1].train_loss);
  /* 800 rows, 16 per batch, 15% validation: the callback saw every training batch */
  int val_rows = (int)json_value(a.json, "val_rows"),
      train_rows = (int)json_value(a.json, "train_rows");
  int batches = (train_rows + 15) / 16, val_batches = (val_rows + 15) / 16;
  CHECK(seen.calls == batches * a.epochs, "progress calls %d, expected %d", seen.calls,
        batches * a.epochs);
  CHECK(seen.repeats == val_batches / 8 * a.epochs,
        "progress repeats in validation %d, expected %d", seen.repeats, val_batches / 8 * a.epochs);
  printf("metrics: %s\n", a.json ? a.json : "(null)");
  CHECK(train_rows + val_rows == 800, "train %d + val %d rows", train_rows, val_rows);
  /* the split by text: exactly the rows whose text's position is below 0.15 validate (each
   * class keeps training rows here, so none came back) */
  int below = 0;
  for (int i = 0; i < data.n; i++)
    below += nn_train_text_position(data.texts[i], data.text_lens[i]) < 0.15;
  CHECK(val_rows == below && abs(val_rows - 120) <= 40,
        "val rows %d, expected the %d rows whose text falls below 0.15 (about 15%% of 800)",
        val_rows, below);
  CHECK(a.json &&
            strstr(a.json, "\"split\":\"text_hash\",\"split_fraction\":0.15,\"split_moved\":0"),
        "the metrics say how the rows were split: %s", a.json);
  CHECK((int)json_value(a.json, "best_epoch") == best_epoch, "json best_epoch %g vs %d",
        json_value(a.json, "best_epoch"), best_epoch);
  CHECK((int)json_value(a.json, "epochs_run") == a.epochs, "json epochs_run");
  CHECK(json_value(a.json, "val_accuracy") == a.stats[best_epoch - 1].val_accuracy ||
            fabs(json_value(a.json, "val_accuracy") - a.stats[best_epoch - 1].val_accuracy) < 1e-9,
        "json val_accuracy %g vs %g", json_value(a.json, "val_accuracy"),
        a.stats[best_epoch - 1].val_accuracy);
  CHECK_CLOSE(json_value(a.json, "val_loss"), a.stats[best_epoch - 1].val_loss, 1e-8, 0,
              "json val_loss");
  CHECK_CLOSE(json_value(a.json, "val_f1"), a.stats[best_epoch - 1].val_f1, 1e-8, 0, "json val_f1");
  CHECK(json_value(a.json, "seconds") > 0, "json seconds");

  /* ---- determinism: same seed, same bits; another seed, other bits */
  run_training(&b, &cfg, &data, NULL, NULL);
  CHECK(b.status == NN_DONE && a.params && b.params && a.param_count == b.param_count,
        "second run: %d %s", b.status, b.err);
  if (a.params && b.params && a.param_count == b.param_count) {
    CHECK(memcmp(a.params, b.params, a.param_count * sizeof(float)) == 0,
          "same seed: weights differ");
    int same_stats = a.epochs == b.epochs;
    for (int e = 0; same_stats && e < a.epochs; e++)
      same_stats = a.stats[e].train_loss == b.stats[e].train_loss &&
                   a.stats[e].val_loss == b.stats[e].val_loss &&
                   a.stats[e].val_f1 == b.stats[e].val_f1 && a.stats[e].lr == b.stats[e].lr;
    CHECK(same_stats, "same seed: epoch statistics differ");
    printf("same seed: %zu parameters memcmp-identical\n", a.param_count);
  }
  free_run(&b);
  cfg.seed = 99;
  run_training(&b, &cfg, &data, NULL, NULL);
  CHECK(b.status == NN_DONE, "other seed run: %d %s", b.status, b.err);
  if (a.params && b.params && a.param_count == b.param_count) {
    size_t differ = 0;
    for (size_t i = 0; i < a.param_count; i++) differ += a.params[i] != b.params[i];
    CHECK(differ > a.param_count / 2, "other seed: only %zu of %zu weights differ", differ,
          a.param_count);
    printf("other seed: %zu of %zu weights differ\n", differ, a.param_count);
  }
  free_run(&a);
  free_run(&b);
  free_dataset(&data);

  /* ---- early stopping and ReduceLROnPlateau on labels with no signal */
  make_keyword_data(&data, 400, 3, 1, 11);
  small_config(&cfg);
  cfg.lr = 0.03f;
  cfg.epochs = 40;
  cfg.patience = 4;
  cfg.lr_patience = 1;
  cfg.lr_factor = 0.5f;
  run_training(&a, &cfg, &data, NULL, NULL);
  CHECK(a.status == NN_DONE, "noise run status %d: %s", a.status, a.err);
  int best = 0;
  for (int e = 0; e < a.epochs; e++) {
    printf("noise epoch %d: val_loss %.6f lr %g%s\n", e + 1, a.stats[e].val_loss, a.stats[e].lr,
           a.stats[e].best ? " best" : "");
    if (a.stats[e].best) best = e + 1;
  }
  CHECK(a.epochs < cfg.epochs, "early stopping did not trigger (%d epochs)", a.epochs);
  CHECK(a.epochs == best + cfg.patience, "stopped after %d epochs, best %d, patience %d", a.epochs,
        best, cfg.patience);
  /* best flags: strictly lower than every earlier validation loss */
  double lowest = INFINITY;
  for (int e = 0; e < a.epochs; e++) {
    int expect_best = a.stats[e].val_loss < lowest;
    CHECK(a.stats[e].best == expect_best, "epoch %d best flag %d", e + 1, a.stats[e].best);
    if (expect_best) lowest = a.stats[e].val_loss;
  }
  /* ReduceLROnPlateau replayed (torch/optim/lr_scheduler.py, mode min, rel threshold 1e-4) */
  double lr = 0.03, plateau_best = INFINITY;
  int bad = 0, drops = 0;
  for (int e = 0; e < a.epochs; e++) {
    CHECK(a.stats[e].lr == lr, "epoch %d lr %.17g, expected %.17g", e + 1, a.stats[e].lr, lr);
    if (e > 0 && a.stats[e].lr < a.stats[e - 1].lr) {
      drops++;
      CHECK_CLOSE(a.stats[e].lr / a.stats[e - 1].lr, 0.5, 1e-12, 0, "lr drop factor");
    }
    double v = a.stats[e].val_loss;
    if (v < plateau_best * (1 - 1e-4)) plateau_best = v, bad = 0;
    else bad++;
    if (bad > cfg.lr_patience) lr *= 0.5, bad = 0;
  }
  CHECK(drops >= 1, "the learning rate never dropped");
  printf("noise run: %d epochs, best %d, %d lr drops\n", a.epochs, best, drops);

  /* the handed-over model holds the best epoch's weights: a run of exactly `best` epochs
   * (same seed, so the same stream) ends with them */
  nn_config cfg_stop = cfg;
  cfg_stop.epochs = best;
  cfg_stop.patience = 1000;
  run_training(&b, &cfg_stop, &data, NULL, NULL);
  CHECK(b.status == NN_DONE && b.epochs == best, "run to the best epoch: %d epochs", b.epochs);
  if (a.params && b.params && a.param_count == b.param_count)
    CHECK(memcmp(a.params, b.params, a.param_count * sizeof(float)) == 0,
          "the taken model is not the best epoch's weights");
  CHECK(a.json && strstr(a.json, "\"monitor\":\"val_loss\""), "default monitor in %s", a.json);
  free_run(&b);

  /* ---- monitor: the same noise run, the best epoch by validation F1 or accuracy */
  free_run(&a);
  cfg.patience = 3;
  cfg.seed = 3; /* a run whose best epochs by loss, F1 and accuracy are not all the same */
  check_monitor(&cfg, NN_MONITOR_VAL_F1);
  check_monitor(&cfg, NN_MONITOR_VAL_ACCURACY);

  /* ---- interrupt: in the batches, and in the validation */
  int calls = 0;
  run_training(&a, &cfg, &data, interrupt_at_3, &calls);
  CHECK(a.status == NN_INTERRUPTED, "interrupt: status %d (%s)", a.status, a.err);
  CHECK(calls == 3, "callback calls %d", calls);
  free_run(&a);
  int last = 0;
  nn_config small_batches = cfg;
  small_batches.batch_size = 4; /* validation batches enough to ask */
  run_training(&a, &small_batches, &data, interrupt_in_validation, &last);
  CHECK(a.status == NN_INTERRUPTED && a.epochs == 0,
        "interrupt in the validation: status %d after %d epochs (%s)", a.status, a.epochs, a.err);
  free_run(&a);

  /* ---- the split by text: a text's side is its own, whatever rows are beside it */
  free_dataset(&data);
  small_config(&cfg);
  char text[64];
  int lone = -1; /* a text on the validation side, for a class of one row */
  for (int k = 0; lone < 0; k++) {
    snprintf(text, sizeof text, "epsilon %d", k);
    if (nn_train_text_position(text, (int)strlen(text)) < 0.15) lone = k;
  }
  for (int i = 0; i < 200; i++) {
    snprintf(text, sizeof text, "alpha beta %d", i);
    add_row(&data, text, i % 2 ? "a" : "b");
  }
  for (int i = 0; i < 50; i++) add_row(&data, "the same words", "a"); /* one side, all 50 */
  snprintf(text, sizeof text, "epsilon %d", lone);
  add_row(&data, text, "c");
  int expect_val = 0;
  for (int i = 0; i < data.n - 1; i++)
    expect_val += nn_train_text_position(data.texts[i], data.text_lens[i]) < 0.15;
  CHECK(create_trainer(&tr, &data, &cfg, NULL, -1, err) == NN_OK, "create, split by text: %s", err);
  if (tr) {
    char *json = nn_trainer_metrics_json(tr);
    printf("split by text: %s\n", json);
    CHECK((int)json_value(json, "val_rows") == expect_val &&
              (int)json_value(json, "split_moved") == 1,
          "val rows %g (expected %d: the lone class's row trains), split_moved %g",
          json_value(json, "val_rows"), expect_val, json_value(json, "split_moved"));
    for (int i = 0; i < data.n; i++) {
      int val = nn_train_is_val(&tr->data, i);
      int want = i < data.n - 1 && nn_train_text_position(data.texts[i], data.text_lens[i]) < 0.15;
      CHECK(val == want, "row %d (\"%s\") validates: %d, expected %d", i, data.texts[i], val, want);
      if (val != want) break;
    }
    free(json);
    nn_trainer_free(tr);
    tr = NULL;
  }
  /* the same rows in another order, and with a third of them gone: each text on its side */
  for (int i = 0; i < data.n / 2; i++) {
    char *t = data.texts[i], *l = data.labels[i];
    int tl = data.text_lens[i], ll = data.label_lens[i], j = data.n - 2 - i;
    data.texts[i] = data.texts[j], data.text_lens[i] = data.text_lens[j];
    data.labels[i] = data.labels[j], data.label_lens[i] = data.label_lens[j];
    data.texts[j] = t, data.text_lens[j] = tl, data.labels[j] = l, data.label_lens[j] = ll;
  }
  CHECK(create_trainer(&tr, &data, &cfg, NULL, 160, err) == NN_OK, "create, 160 rows: %s", err);
  for (int i = 0; tr && i < 160; i++) {
    int want = nn_train_text_position(data.texts[i], data.text_lens[i]) < 0.15;
    CHECK(nn_train_is_val(&tr->data, i) == want, "reordered row %d (\"%s\") validates: %d", i,
          data.texts[i], nn_train_is_val(&tr->data, i));
    if (nn_train_is_val(&tr->data, i) != want) break;
  }
  nn_trainer_free(tr);
  tr = NULL;

  /* ---- the lesson's split sizes: classes of 100, 60 and 1 rows; the single row trains */
  free_dataset(&data);
  for (int i = 0; i < 100; i++) add_row(&data, "alpha beta", "a");
  for (int i = 0; i < 60; i++) add_row(&data, "gamma delta", "b");
  add_row(&data, "epsilon", "c");
  small_config(&cfg);
  cfg.recipe = NN_RECIPE_LESSON; /* stratified */
  CHECK(create_trainer(&tr, &data, &cfg, NULL, -1, err) == NN_OK, "create with a 1-row class: %s",
        err);
  if (tr) {
    char *json = nn_trainer_metrics_json(tr);
    printf("before training: %s\n", json);
    CHECK((int)json_value(json, "val_rows") == 15 + 9, "val rows %g, expected 15 + 9",
          json_value(json, "val_rows"));
    CHECK((int)json_value(json, "train_rows") == 85 + 51 + 1, "train rows %g",
          json_value(json, "train_rows"));
    CHECK(json && strstr(json, "\"val_loss\":null") && strstr(json, "\"best_epoch\":0"),
          "no epoch yet: %s", json);
    free(json);
    nn_trainer_free(tr);
    tr = NULL;
  }

  /* ---- errors */
  struct {
    int n;
    const char *expect;
  } cases[] = {{0, "no training rows"}, {1, "need at least 2 distinct labels, got 1 (\"a\")"}};
  for (int k = 0; k < 2; k++) {
    err[0] = 0;
    int status = create_trainer(&tr, &data, &cfg, NULL, cases[k].n, err);
    CHECK(status == NN_ERROR && !tr && strcmp(err, cases[k].expect) == 0,
          "%d rows: status %d, message \"%s\", expected \"%s\"", cases[k].n, status, err,
          cases[k].expect);
    printf("error for %d rows: %s\n", cases[k].n, err);
  }
  free_dataset(&data);
  add_row(&data, "one", "x");
  add_row(&data, "two", "x");
  add_row(&data, "three", "y");
  int status = create_trainer(&tr, &data, &cfg, NULL, 2, err);
  CHECK(status == NN_ERROR && strcmp(err, "need at least 2 distinct labels, got 1 (\"x\")") == 0,
        "one label: %s", err);
  /* the lesson's split, classes of 2 and 1 rows: round(0.15 * 2) = 0, so no validation row */
  status = create_trainer(&tr, &data, &cfg, NULL, 3, err);
  CHECK(status == NN_ERROR &&
            strcmp(err, "too few rows for a validation split (3 rows in 2 classes): with "
                        "val_fraction 0.15 a class needs at least 4 rows to give one to "
                        "validation") == 0,
        "too few rows: %s", err);
  printf("error for 3 rows: %s\n", err);
  /* the split by text, no text below 0.15 */
  cfg.recipe = NN_RECIPE_DEFAULT;
  free_dataset(&data);
  for (int k = 0; data.n < 3; k++) {
    snprintf(text, sizeof text, "row %d", k);
    if (nn_train_text_position(text, (int)strlen(text)) >= 0.15)
      add_row(&data, text, k % 2 ? "x" : "y");
  }
  status = create_trainer(&tr, &data, &cfg, NULL, 3, err);
  CHECK(status == NN_ERROR &&
            strcmp(err, "too few rows for a validation split (3 rows in 2 classes): with "
                        "val_fraction 0.15 no row's text falls in the validation split (a text "
                        "does with chance 0.15); give more rows, a larger val_fraction or "
                        "\"validation\": \"none\"") == 0,
        "too few rows, split by text: %s", err);
  printf("error for 3 rows split by text: %s\n", err);
  free_dataset(&data);
  for (int i = 0; i < 10001; i++) {
    char label[16];
    snprintf(label, sizeof label, "L%d", i);
    add_row(&data, "text", label);
  }
  status = create_trainer(&tr, &data, &cfg, NULL, -1, err);
  CHECK(status == NN_ERROR && strstr(err, "10001") && strstr(err, "10000"), "too many labels: %s",
        err);
  printf("error for 10001 labels: %s\n", err);
  free_dataset(&data);
  /* labels containing a NUL byte are rejected (the model keeps labels as C strings) */
  add_row(&data, "one", "x");
  add_row(&data, "two", "y");
  data.label_lens[1] = 2; /* "y\0" */
  status = create_trainer(&tr, &data, &cfg, NULL, -1, err);
  CHECK(status == NN_ERROR && strstr(err, "NUL"), "NUL in a label: %s", err);
  free_dataset(&data);
  return check_finish("test_train");
}
