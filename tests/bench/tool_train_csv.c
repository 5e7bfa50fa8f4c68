/* tool_train_csv.c -- train the engine on a `title,category` CSV and evaluate on another,
 * without SQLite: the engine's own view of a training run, for benchmarks and quick checks.
 *   build/tests/bench/tool_train_csv TRAIN.csv TEST.csv ['{"epochs":5,...}']
 * Prints one line per epoch and the test accuracy / weighted F1 of the best weights. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "nn_internal.h"

typedef struct rows {
  char **text, **label;
  int *text_len, *label_len;
  int n, cap;
} rows;

/* RFC 4180: fields separated by commas, quoted fields with "" for a quote, CRLF or LF. */
static int read_field(FILE *f, char **out, int *len, int *end_of_line) {
  size_t cap = 64, n = 0;
  char *buf = malloc(cap);
  int c = fgetc(f), quoted = 0;
  if (c == EOF) {
    free(buf);
    return 0;
  }
  if (c == '"') {
    quoted = 1;
    c = fgetc(f);
  }
  for (;;) {
    if (c == EOF) break;
    if (quoted) {
      if (c == '"') {
        c = fgetc(f);
        if (c != '"') {
          quoted = 0;
          continue;
        }
      }
    } else if (c == ',' || c == '\n' || c == '\r') {
      break;
    }
    if (n + 1 >= cap) buf = realloc(buf, cap *= 2);
    buf[n++] = (char)c;
    c = fgetc(f);
  }
  if (c == '\r') c = fgetc(f);
  *end_of_line = c != ',';
  buf[n] = 0;
  *out = buf;
  *len = (int)n;
  return 1;
}

static rows read_csv(const char *path) {
  rows r = {0};
  FILE *f = fopen(path, "rb");
  if (!f) {
    perror(path);
    exit(1);
  }
  int header = 1;
  for (;;) {
    char *a, *b;
    int la, lb, eol;
    if (!read_field(f, &a, &la, &eol)) break;
    if (eol || !read_field(f, &b, &lb, &eol)) {
      free(a);
      break;
    }
    while (!eol) { /* ignore extra columns */
      char *x;
      int lx;
      if (!read_field(f, &x, &lx, &eol)) break;
      free(x);
    }
    if (header) {
      header = 0;
      free(a);
      free(b);
      continue;
    }
    if (r.n == r.cap) {
      r.cap = r.cap ? 2 * r.cap : 1024;
      r.text = realloc(r.text, sizeof(char *) * r.cap);
      r.label = realloc(r.label, sizeof(char *) * r.cap);
      r.text_len = realloc(r.text_len, sizeof(int) * r.cap);
      r.label_len = realloc(r.label_len, sizeof(int) * r.cap);
    }
    r.text[r.n] = a;
    r.text_len[r.n] = la;
    r.label[r.n] = b;
    r.label_len[r.n] = lb;
    r.n++;
  }
  fclose(f);
  return r;
}

static void free_rows(rows *r) {
  for (int i = 0; i < r->n; i++) {
    free(r->text[i]);
    free(r->label[i]);
  }
  free(r->text);
  free(r->label);
  free(r->text_len);
  free(r->label_len);
}

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}
/* CPU seconds of the process (all its threads): another process on the machine moves it less
 * than wall time */
static double cpu_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: %s TRAIN.csv TEST.csv [OPTIONS_JSON]\n", argv[0]);
    return 2;
  }
  char err[NN_ERR_LEN];
  nn_config cfg;
  nn_config_default(&cfg);
  if (argc > 3 && nn_config_parse_json(&cfg, argv[3], NULL, err) != NN_OK) {
    fprintf(stderr, "options: %s\n", err);
    return 2;
  }
  rows train = read_csv(argv[1]), test = read_csv(argv[2]);
  nn_trainer *tr;
  double t0 = now();
  if (nn_trainer_create(&tr,
                        &(nn_trainer_args){.cfg = &cfg,
                                           .texts = (const char *const *)train.text,
                                           .text_lens = train.text_len,
                                           .labels = (const char *const *)train.label,
                                           .label_lens = train.label_len,
                                           .n = train.n},
                        err) != NN_OK) {
    fprintf(stderr, "train: %s\n", err);
    return 1;
  }
  printf("{\"prepare_seconds\": %.4f}\n", now() - t0);
  nn_epoch_stats st;
  int rc;
  double cpu0 = cpu_now();
  while ((rc = nn_trainer_epoch(tr, &st, NULL, NULL, err)) == NN_OK) {
    double cpu = cpu_now();
    printf("{\"epoch\": %d, \"train_loss\": %.5f, \"val_loss\": %.5f, \"val_accuracy\": %.4f, "
           "\"val_f1\": %.4f, \"lr\": %g, \"seconds\": %.4f, \"cpu_seconds\": %.4f, "
           "\"best\": %d}\n",
           st.epoch, st.train_loss, st.val_loss, st.val_accuracy, st.val_f1, st.lr, st.seconds,
           cpu - cpu0, st.best);
    cpu0 = cpu;
  }
  if (rc != NN_DONE) {
    fprintf(stderr, "epoch: %s\n", err);
    return 1;
  }
  nn_model *m;
  if (nn_trainer_take_model(tr, &m, err) != NN_OK) return fprintf(stderr, "%s\n", err), 1;
  nn_trainer_free(tr);
  { /* FNV-1a of the trained weights: equal hashes = bit-identical training */
    const unsigned char *w = (const unsigned char *)nn_model_weights(m);
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < nn_model_param_count(m) * sizeof(float); i++)
      h = (h ^ w[i]) * 1099511628211ull;
    printf("{\"weights_fnv1a\": \"%016llx\"}\n", (unsigned long long)h);
  }
  /* test: batches of 256 */
  const nn_config *mc = nn_model_config(m);
  int C = nn_model_num_classes(m), T = mc->max_len, B = 256;
  int64_t *confusion = calloc((size_t)C * C, sizeof(int64_t));
  int *tokens = malloc(sizeof(int) * B * T), *lengths = malloc(sizeof(int) * B);
  float *logits = malloc(sizeof(float) * B * C);
  nn_token *toks = malloc(sizeof(nn_token) * T);
  nn_workspace *ws;
  nn_workspace_create(&ws, NULL, err);
  int unknown = 0;
  t0 = now();
  for (int first = 0; first < test.n; first += B) {
    int count = test.n - first < B ? test.n - first : B;
    for (int b = 0; b < count; b++) {
      int n = nn_text_encode(toks, test.text[first + b], test.text_len[first + b], mc,
                             nn_model_vocab(m));
      for (int t = 0; t < n; t++) tokens[b * T + t] = toks[t].id;
      lengths[b] = n;
    }
    nn_batch batch = {tokens, lengths, NULL, count, T};
    if (nn_model_forward(m, ws, &batch, 0, NULL, logits, NULL, err) != NN_OK)
      return fprintf(stderr, "%s\n", err), 1;
    for (int b = 0; b < count; b++) {
      int best = 0;
      for (int c = 1; c < C; c++)
        if (logits[b * C + c] > logits[b * C + best]) best = c;
      int actual = nn_model_label_lookup(m, test.label[first + b], test.label_len[first + b]);
      if (actual < 0) unknown++;
      else confusion[actual * C + best]++;
    }
  }
  double infer_s = now() - t0;
  nn_class_metrics weighted;
  nn_class_metrics *per = malloc(sizeof *per * C);
  double accuracy;
  nn_metrics_from_confusion(per, &weighted, &accuracy, confusion, C);
  printf("{\"test_rows\": %d, \"test_accuracy\": %.4f, \"test_f1\": %.4f, \"unknown_labels\": %d, "
         "\"batched_rows_per_second\": %.0f}\n",
         test.n, accuracy, weighted.f1, unknown, test.n / infer_s);
  nn_workspace_free(ws);
  nn_model_free(m);
  free(confusion);
  free(tokens);
  free(lengths);
  free(logits);
  free(toks);
  free(per);
  free_rows(&train);
  free_rows(&test);
  return 0;
}
