/* tool_cuda_bench.c -- the attnext side of tests/bench/cuda_bench.py: training epochs and
 * batched inference of the engine alone (no SQLite) on a chosen device.
 *   build/tests/bench/tool_cuda_bench TRAIN.tsv TEST.tsv '{"device":"cuda",...}' INFER_BATCH SECONDS
 * TRAIN / TEST: one row per line, "label<TAB>text" (cuda_bench.py writes them from the CSVs).
 * Trains for the config's epochs (nn_trainer: the same recipe as attn_train), then times
 * nn_model_forward (inference, folded first layer) over the test rows, already encoded, in
 * batches of INFER_BATCH rows for at least SECONDS seconds. The last line is a JSON object:
 *   {"device":..., "epoch_seconds":[...], "val_accuracy":..., "infer_rows_per_s":...,
 *    "infer_batch":..., "backend":"<nn_version_string>"} */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "nn_internal.h"

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

typedef struct rows {
  char **text, **label;
  int n;
} rows;

static int read_tsv(const char *path, rows *r) {
  FILE *f = fopen(path, "rb");
  if (!f) return -1;
  char *line = NULL;
  size_t cap = 0;
  ssize_t len;
  int alloc = 0;
  r->n = 0;
  r->text = r->label = NULL;
  while ((len = getline(&line, &cap, f)) > 0) {
    while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r')) line[--len] = 0;
    char *tab = strchr(line, '\t');
    if (!tab) continue;
    *tab = 0;
    if (r->n == alloc) {
      alloc = alloc ? 2 * alloc : 1024;
      r->text = realloc(r->text, sizeof *r->text * (size_t)alloc);
      r->label = realloc(r->label, sizeof *r->label * (size_t)alloc);
      if (!r->text || !r->label) return -1;
    }
    r->label[r->n] = strdup(line);
    r->text[r->n] = strdup(tab + 1);
    r->n++;
  }
  free(line);
  fclose(f);
  return 0;
}

int main(int argc, char **argv) {
  if (argc < 4) {
    fprintf(stderr, "usage: %s TRAIN.tsv TEST.tsv CONFIG_JSON [INFER_BATCH] [SECONDS]\n", argv[0]);
    return 2;
  }
  int infer_batch = argc > 4 ? atoi(argv[4]) : 4096;
  double min_seconds = argc > 5 ? atof(argv[5]) : 3.0;
  char err[NN_ERR_LEN], version[1024];
  nn_version_string(version, sizeof version);
  fprintf(stderr, "%s\n", version);
  rows train, test;
  if (read_tsv(argv[1], &train) || read_tsv(argv[2], &test) || train.n < 10 || test.n < 1) {
    fprintf(stderr, "cannot read %s / %s\n", argv[1], argv[2]);
    return 1;
  }
  nn_config cfg;
  nn_config_default(&cfg);
  cfg.progress = 0;
  if (nn_config_parse_json(&cfg, argv[3], NULL, err) != NN_OK)
    return fprintf(stderr, "%s\n", err), 1;
  nn_trainer *tr = NULL;
  if (nn_trainer_create(&tr,
                        &(nn_trainer_args){.cfg = &cfg,
                                           .texts = (const char *const *)train.text,
                                           .labels = (const char *const *)train.label,
                                           .n = train.n},
                        err) != NN_OK)
    return fprintf(stderr, "trainer: %s\n", err), 1;
  double epoch_seconds[1000];
  int epochs = 0, rc;
  nn_epoch_stats st, last;
  memset(&last, 0, sizeof last);
  while (epochs < 1000 && (rc = nn_trainer_epoch(tr, &st, NULL, NULL, err)) == NN_OK) {
    epoch_seconds[epochs++] = st.seconds;
    last = st;
    fprintf(stderr, "epoch %d: %.3fs train loss %.4f val loss %.4f val accuracy %.4f\n", st.epoch,
            st.seconds, st.train_loss, st.val_loss, st.val_accuracy);
  }
  if (rc != NN_DONE) return fprintf(stderr, "epoch: %s\n", err), 1;
  nn_model *m = NULL;
  if (nn_trainer_take_model(tr, &m, err) != NN_OK) return fprintf(stderr, "%s\n", err), 1;
  nn_trainer_free(tr);

  /* encode the test rows once */
  int T = cfg.max_len, n = test.n;
  int *ids = malloc(sizeof *ids * (size_t)n * T), *lens = malloc(sizeof *lens * (size_t)n);
  nn_token *tok = malloc(sizeof *tok * (size_t)T);
  for (int i = 0; i < n; i++) {
    int k = nn_text_encode(tok, test.text[i], (int)strlen(test.text[i]), &cfg, nn_model_vocab(m));
    lens[i] = k;
    for (int t = 0; t < T; t++) ids[(size_t)i * T + t] = t < k ? tok[t].id : NN_PAD;
  }
  int B = infer_batch;
  int *bt = malloc(sizeof *bt * (size_t)B * T), *bl = malloc(sizeof *bl * (size_t)B);
  float *logits = malloc(sizeof *logits * (size_t)B * nn_model_num_classes(m));
  nn_workspace *ws = NULL;
  nn_workspace_create(&ws, NULL, err);
  long long done = 0;
  int next = 0, rounds = 0;
  double t0 = 0;
  for (;;) {
    int Tb = 1;
    for (int b = 0; b < B; b++) {
      int i = (next + b) % n;
      bl[b] = lens[i];
      if (lens[i] > Tb) Tb = lens[i];
    }
    for (int b = 0; b < B; b++)
      memcpy(bt + (size_t)b * Tb, ids + (size_t)((next + b) % n) * T, sizeof *bt * (size_t)Tb);
    next = (next + B) % n;
    nn_batch batch = {bt, bl, NULL, B, Tb};
    if (nn_model_forward(m, ws, &batch, 0, NULL, logits, NULL, err) != NN_OK)
      return fprintf(stderr, "inference: %s\n", err), 1;
    if (++rounds == 2) t0 = now(); /* the first two batches warm up (allocation, cuBLAS) */
    if (rounds > 2) done += B;
    if (rounds > 2 && now() - t0 >= min_seconds) break;
  }
  double rps = done / (now() - t0);
  fprintf(stderr, "inference: %lld rows in batches of %d: %.0f rows/s\n", done, B, rps);
  printf("{\"device\":\"%s\",\"epoch_seconds\":[", nn_device_name(cfg.device));
  for (int e = 0; e < epochs; e++) printf("%s%.4f", e ? "," : "", epoch_seconds[e]);
  printf(
      "],\"val_accuracy\":%.4f,\"infer_rows_per_s\":%.1f,\"infer_batch\":%d,\"backend\":\"%s\"}\n",
      last.val_accuracy, rps, B, version);
  nn_workspace_free(ws);
  nn_model_free(m);
  return 0;
}
