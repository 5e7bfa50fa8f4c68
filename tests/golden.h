/* golden.h -- the golden-fixture runner shared by tests/test_golden.c (the CPU) and
 * tests/test_cuda.c (the GPU): reads a fixture of tests/fixtures/golden (see test_golden.c for
 * what it holds and how values are compared), builds the model on golden_device and compares
 * forward, loss, backward and 5 Adam steps with tolerances golden_rtol / golden_atol.
 * run_fixture(path) records failures with check.h's CHECK. */
#ifndef ATTNEXT_GOLDEN_H
#define ATTNEXT_GOLDEN_H
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "config_base.h"
#include "nn_internal.h"

/* Tolerances and device: test_golden keeps these (the CPU, rtol 1e-4); test_cuda sets its own. */
static double golden_rtol = 1e-4, golden_atol = 1e-6;
static int golden_device = NN_DEVICE_CPU; /* the engine under test; -1: the fixture's config */
#define RTOL golden_rtol
#define ATOL golden_atol
#define G_NOISE 1e-6
#define ADAM_LR 1e-2f
#define ADAM_STEPS 5
#define FIXTURE_DIR "tests/fixtures/golden"

static int verbose = 0;

/* ---------------------------------------------------------------- reading fixtures */

static unsigned char *read_file(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  unsigned char *buf = NULL;
  if (fseek(f, 0, SEEK_END) == 0) {
    long n = ftell(f);
    if (n >= 0 && fseek(f, 0, SEEK_SET) == 0 && (buf = malloc((size_t)n + 1)) != NULL) {
      if (fread(buf, 1, (size_t)n, f) != (size_t)n) {
        free(buf);
        buf = NULL;
      } else {
        *len = (size_t)n;
      }
    }
  }
  fclose(f);
  return buf;
}

static int64_t numel(const nn_st_tensor *t) {
  int64_t n = 1;
  for (int i = 0; i < t->ndim; i++) n *= t->shape[i];
  return n;
}

/* The F32 tensor `name` of the fixture as a malloc'd float array of *n elements, or NULL
 * (with a failed CHECK saying why). */
static float *get_f32(const nn_st_file *fx, const char *name, int64_t *n) {
  const nn_st_tensor *t = nn_st_find(fx, name);
  CHECK(t != NULL, "fixture tensor %s is missing", name);
  if (!t) return NULL;
  CHECK(t->dtype == NN_DTYPE_F32, "fixture tensor %s: expected F32", name);
  if (t->dtype != NN_DTYPE_F32 || (int64_t)t->nbytes != numel(t) * 4) return NULL;
  float *out = malloc(t->nbytes ? t->nbytes : 1);
  if (!out) return NULL;
  memcpy(out, t->data, t->nbytes);
  *n = numel(t);
  return out;
}

/* The I64 tensor `name` as a malloc'd int array. */
static int *get_i64(const nn_st_file *fx, const char *name, int64_t *n, int64_t shape[2]) {
  const nn_st_tensor *t = nn_st_find(fx, name);
  CHECK(t != NULL, "fixture tensor %s is missing", name);
  if (!t) return NULL;
  CHECK(t->dtype == NN_DTYPE_I64, "fixture tensor %s: expected I64", name);
  if (t->dtype != NN_DTYPE_I64 || (int64_t)t->nbytes != numel(t) * 8) return NULL;
  int64_t count = numel(t);
  int *out = malloc((size_t)(count ? count : 1) * sizeof(int));
  if (!out) return NULL;
  for (int64_t i = 0; i < count; i++) {
    int64_t v;
    memcpy(&v, t->data + 8 * i, 8);
    out[i] = (int)v;
  }
  *n = count;
  if (shape) {
    shape[0] = t->ndim > 0 ? t->shape[0] : 1;
    shape[1] = t->ndim > 1 ? t->shape[1] : 1;
  }
  return out;
}

/* Remove the key "num_classes" (not an nn_config option) from the flat JSON object `json`
 * in place and return its value, or -1 when absent. */
static int take_num_classes(char *json) {
  char *key = strstr(json, "\"num_classes\"");
  if (!key) return -1;
  char *p = key + strlen("\"num_classes\"");
  while (*p == ' ' || *p == ':') p++;
  char *end;
  long value = strtol(p, &end, 10);
  char *start = key;
  char *q = start;
  while (q > json && (q[-1] == ' ' || q[-1] == '\n')) q--;
  if (q > json && q[-1] == ',') {
    start = q - 1; /* drop the comma before */
  } else {
    while (*end == ' ') end++;
    if (*end == ',') end++; /* or the comma after */
  }
  memmove(start, end, strlen(end) + 1);
  return (int)value;
}

/* ---------------------------------------------------------------- comparing */

typedef struct worst {
  double rel; /* worst relative error |got - expected| / |expected| where |expected| >= REL_FLOOR */
  double abs; /* worst absolute difference */
  double loose_abs; /* worst absolute difference of the loosely compared (noise-driven) values */
} worst;
#define REL_FLOOR 1e-3 /* below it a relative error says little; ATOL decides there */

/* Compare n values; loose[i] != 0 selects atol_loose instead of ATOL for element i. One
 * CHECK_CLOSE on the element with the worst CHECK_CLOSE error (so a broken tensor prints one
 * line, not thousands). */
static void compare(worst *acc, const char *what, const float *got, const float *expected,
                    int64_t n, const unsigned char *loose, double atol_loose) {
  double worst_check = -1, worst_rel = 0, worst_abs = 0, worst_loose = 0;
  int64_t at = 0;
  for (int64_t i = 0; i < n; i++) {
    int is_loose = loose && loose[i];
    double e = check_rel_err(got[i], expected[i], is_loose ? atol_loose : ATOL);
    double d = fabs((double)got[i] - (double)expected[i]);
    if (e != e || d != d) e = d = INFINITY; /* NaN */
    if (e > worst_check) {
      worst_check = e;
      at = i;
    }
    if (is_loose) {
      if (d > worst_loose) worst_loose = d;
      continue;
    }
    if (d > worst_abs) worst_abs = d;
    if (fabs(expected[i]) >= REL_FLOOR && d / fabs(expected[i]) > worst_rel)
      worst_rel = d / fabs(expected[i]);
  }
  if (n == 0) return;
  char label[256];
  snprintf(label, sizeof label, "%s[%lld]", what, (long long)at);
  CHECK_CLOSE(got[at], expected[at], RTOL, loose && loose[at] ? atol_loose : ATOL, label);
  if (verbose) printf("    %-40s max rel err %.3g, max abs err %.3g\n", what, worst_rel, worst_abs);
  if (worst_rel > acc->rel) acc->rel = worst_rel;
  if (worst_abs > acc->abs) acc->abs = worst_abs;
  if (worst_loose > acc->loose_abs) acc->loose_abs = worst_loose;
}

/* ---------------------------------------------------------------- one fixture */

static int is_param_name(const char *name) {
  static const char *const data[] = {"tokens", "lengths", "labels", "class_weights",
                                     "logits", "attn",    "loss",   "adam_losses"};
  for (size_t i = 0; i < sizeof data / sizeof *data; i++)
    if (strcmp(name, data[i]) == 0) return 0;
  return strncmp(name, "grad.", 5) != 0 && strncmp(name, "adam_final.", 11) != 0;
}

static void run_fixture(const char *path) {
  char err[NN_ERR_LEN] = "";
  size_t len = 0;
  unsigned char *blob = read_file(path, &len);
  nn_st_file fx;
  int have_fx = 0;
  nn_model *model = NULL;
  nn_workspace *ws = NULL;
  nn_adam adam;
  int have_adam = 0;
  char *config_json = NULL;
  int *tokens = NULL, *lengths = NULL, *labels = NULL;
  float *weights = NULL, *want_logits = NULL, *want_attn = NULL, *want_loss = NULL;
  float *want_adam = NULL, *logits = NULL, *attn = NULL, *dlogits = NULL, *expected = NULL;
  unsigned char *loose = NULL;
  worst w_logits = {0, 0, 0}, w_attn = {0, 0, 0}, w_loss = {0, 0, 0}, w_grads = {0, 0, 0};
  worst w_adam_loss = {0, 0, 0}, w_adam_final = {0, 0, 0};
  int nloose = 0, ngrads = 0;
  const int failures_before = check_failures;

  CHECK(blob != NULL, "%s: cannot read", path);
  if (!blob) goto done;
  int rc = nn_st_parse(&fx, blob, len, NULL, err);
  CHECK(rc == NN_OK, "%s: nn_st_parse: %s", path, err);
  if (rc != NN_OK) goto done;
  have_fx = 1;
  const char *case_name = nn_st_meta(&fx, "case");
  const char *meta_config = nn_st_meta(&fx, "config");
  const char *meta_params = nn_st_meta(&fx, "params");
  CHECK(meta_config && case_name && meta_params, "%s: metadata case/config/params missing", path);
  if (!meta_config || !case_name || !meta_params) goto done;

  /* config, vocabulary of V dummy tokens, labels "0".."C-1" */
  config_json = strdup(meta_config);
  if (!config_json) goto done;
  int C = take_num_classes(config_json);
  CHECK(C >= 2 && C <= 100, "%s: config num_classes %d", path, C);
  if (C < 2 || C > 100) goto done;
  nn_config cfg;
  test_config_base(&cfg);
  rc = nn_config_parse_json(&cfg, config_json, NULL, err);
  CHECK(rc == NN_OK, "%s: nn_config_parse_json(%s): %s", path, config_json, err);
  if (rc != NN_OK) goto done;
  if (golden_device >= 0) cfg.device = (nn_device)golden_device;
  int V = cfg.vocab_size;
  {
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
    if (ok) {
      rc = nn_vocab_from_list(&vocab, (const char *const *)toks, lens, V, err);
      CHECK(rc == NN_OK, "%s: nn_vocab_from_list: %s", path, err);
      ok = rc == NN_OK;
    }
    for (int i = 0; toks && i < V; i++) free(toks[i]);
    free(toks);
    free(lens);
    if (!ok) goto done;
    char names[100][8];
    const char *label_ptrs[100];
    for (int c = 0; c < C; c++) {
      snprintf(names[c], sizeof names[c], "%d", c);
      label_ptrs[c] = names[c];
    }
    rc = nn_model_create(&model, &cfg, vocab, label_ptrs, C, 1, err); /* takes vocab */
    CHECK(rc == NN_OK, "%s: nn_model_create: %s", path, err);
    if (rc != NN_OK) {
      model = NULL;
      goto done;
    }
  }

  /* parameters: the model's tensors are exactly the fixture's, in state_dict order */
  float *params = nn_model_params(model);
  const int ntensors = nn_model_tensor_count(model);
  {
    int nfixture = 0;
    for (int i = 0; i < fx.count; i++) nfixture += is_param_name(fx.tensors[i].name);
    CHECK(ntensors == nfixture, "%s: the model has %d tensors, PyTorch's state_dict %d", case_name,
          ntensors, nfixture);
    const char *p = meta_params;
    for (int i = 0; i < ntensors; i++) {
      nn_tensor_info info;
      if (nn_model_tensor(model, i, &info) != NN_OK) {
        CHECK(0, "%s: nn_model_tensor(%d) failed", case_name, i);
        goto done;
      }
      const char *comma = strchr(p, ',');
      size_t n = comma ? (size_t)(comma - p) : strlen(p);
      CHECK(strlen(info.name) == n && strncmp(info.name, p, n) == 0,
            "%s: tensor %d is %s, PyTorch's state_dict has %.*s there", case_name, i, info.name,
            (int)n, p);
      p = comma ? comma + 1 : p + n;
      const nn_st_tensor *t = nn_st_find(&fx, info.name);
      CHECK(t != NULL, "%s: model tensor %s is not in PyTorch's state_dict", case_name, info.name);
      if (!t) continue;
      int same_shape = t->ndim == info.ndim && t->dtype == NN_DTYPE_F32 &&
                       (int64_t)info.size == numel(t) && t->nbytes == info.size * 4;
      for (int d = 0; same_shape && d < info.ndim; d++) same_shape = t->shape[d] == info.shape[d];
      CHECK(same_shape, "%s: tensor %s: model shape (%lld, %lld) ndim %d, fixture ndim %d",
            case_name, info.name, (long long)info.shape[0], (long long)info.shape[1], info.ndim,
            t->ndim);
      if (!same_shape) goto done;
      memcpy(params + info.offset, t->data, t->nbytes);
    }
  }

  /* the batch */
  int64_t ntok = 0, nlen = 0, nlab = 0, ncw = 0, n = 0, shape[2];
  tokens = get_i64(&fx, "tokens", &ntok, shape);
  lengths = get_i64(&fx, "lengths", &nlen, NULL);
  labels = get_i64(&fx, "labels", &nlab, NULL);
  weights = get_f32(&fx, "class_weights", &ncw);
  if (!tokens || !lengths || !labels || !weights) goto done;
  const int B = (int)shape[0], T = (int)shape[1];
  CHECK(nlen == B && nlab == B && ncw == C, "%s: batch shapes", case_name);
  if (nlen != B || nlab != B || ncw != C) goto done;
  nn_batch batch = {tokens, lengths, labels, B, T};

  want_logits = get_f32(&fx, "logits", &n);
  want_attn = get_f32(&fx, "attn", &n);
  want_loss = get_f32(&fx, "loss", &n);
  want_adam = get_f32(&fx, "adam_losses", &n);
  logits = malloc(sizeof(float) * (size_t)(B * C));
  attn = malloc(sizeof(float) * (size_t)(B * T));
  dlogits = malloc(sizeof(float) * (size_t)(B * C));
  if (!want_logits || !want_attn || !want_loss || !want_adam || !logits || !attn || !dlogits)
    goto done;

  /* forward (training mode, dropout 0), loss, backward */
  rc = nn_workspace_create(&ws, NULL, err);
  CHECK(rc == NN_OK, "nn_workspace_create: %s", err);
  if (rc != NN_OK) {
    ws = NULL;
    goto done;
  }
  nn_rng rng;
  nn_rng_seed(&rng, 7);
  rc = nn_model_forward(model, ws, &batch, 1, &rng, logits, attn, err);
  CHECK(rc == NN_OK, "%s: nn_model_forward: %s", case_name, err);
  if (rc != NN_OK) goto done;
  compare(&w_logits, "logits", logits, want_logits, (int64_t)B * C, NULL, 0);
  compare(&w_attn, "attn", attn, want_attn, (int64_t)B * T, NULL, 0);
  float loss =
      nn_cross_entropy_smoothed(dlogits, logits, labels, weights, B, C, cfg.label_smoothing);
  compare(&w_loss, "loss", &loss, want_loss, 1, NULL, 0);
  rc = nn_model_zero_grads(model, err);
  CHECK(rc == NN_OK, "%s: nn_model_zero_grads: %s", case_name, err);
  if (rc == NN_OK) rc = nn_model_backward(model, ws, &batch, dlogits, err);
  CHECK(rc == NN_OK, "%s: nn_model_backward: %s", case_name, err);
  if (rc != NN_OK) goto done;
  const float *grads = nn_model_grads(model);
  CHECK(grads != NULL, "%s: nn_model_grads is NULL after backward", case_name);
  if (!grads) goto done;
  const size_t nparams = nn_model_param_count(model);
  for (int i = 0; i < ntensors; i++) {
    nn_tensor_info info;
    nn_model_tensor(model, i, &info);
    char name[160];
    snprintf(name, sizeof name, "grad.%s", info.name);
    free(expected);
    expected = get_f32(&fx, name, &n);
    if (!expected || n != (int64_t)info.size) continue;
    compare(&w_grads, name, grads + info.offset, expected, n, NULL, 0);
    ngrads++;
  }

  /* 5 Adam steps on the same batch */
  rc = nn_adam_init(&adam, nparams, ADAM_LR, err);
  CHECK(rc == NN_OK, "nn_adam_init: %s", err);
  if (rc != NN_OK) goto done;
  have_adam = 1;
  for (int step = 0; step < ADAM_STEPS; step++) {
    rc = nn_model_forward(model, ws, &batch, 1, &rng, logits, NULL, err);
    CHECK(rc == NN_OK, "%s: Adam step %d: nn_model_forward: %s", case_name, step, err);
    if (rc != NN_OK) goto done;
    float step_loss =
        nn_cross_entropy_smoothed(dlogits, logits, labels, weights, B, C, cfg.label_smoothing);
    char what[64];
    snprintf(what, sizeof what, "adam_losses[%d]", step);
    compare(&w_adam_loss, what, &step_loss, want_adam + step, 1, NULL, 0);
    rc = nn_model_zero_grads(model, err);
    if (rc == NN_OK) rc = nn_model_backward(model, ws, &batch, dlogits, err);
    CHECK(rc == NN_OK, "%s: Adam step %d: backward: %s", case_name, step, err);
    if (rc != NN_OK) goto done;
    nn_adam_step(&adam, nn_model_params(model), nn_model_grads(model));
  }
  params = nn_model_params(model);
  for (int i = 0; i < ntensors; i++) {
    nn_tensor_info info;
    nn_model_tensor(model, i, &info);
    char name[160], gname[160];
    snprintf(name, sizeof name, "adam_final.%s", info.name);
    snprintf(gname, sizeof gname, "grad.%s", info.name);
    int64_t ng = 0;
    float *g = get_f32(&fx, gname, &ng);
    free(expected);
    expected = get_f32(&fx, name, &n);
    free(loose);
    loose = calloc(info.size ? info.size : 1, 1);
    if (g && expected && loose && n == (int64_t)info.size && ng == n) {
      for (int64_t k = 0; k < n; k++) loose[k] = fabsf(g[k]) < G_NOISE;
      if (strcmp(info.name, "embeddings.weight") == 0 && info.ndim == 2) {
        /* rows of ids absent from the batch are never read: they must not move at all */
        const int64_t rows = info.shape[0], E = info.shape[1];
        unsigned char *used = calloc((size_t)rows, 1);
        for (int b = 0; used && b < B; b++)
          for (int t = 0; t < lengths[b] && t < T; t++)
            if (tokens[b * T + t] >= 0 && tokens[b * T + t] < rows) used[tokens[b * T + t]] = 1;
        for (int64_t r = 0; used && r < rows; r++)
          if (!used[r]) memset(loose + r * E, 0, (size_t)E);
        free(used);
      }
      for (int64_t k = 0; k < n; k++) nloose += loose[k];
      compare(&w_adam_final, name, params + info.offset, expected, n, loose,
              (double)ADAM_LR * ADAM_STEPS);
    }
    free(g);
  }

  printf("%-22s max rel err / max abs err: logits %.2g/%.2g, attn %.2g/%.2g, loss %.2g/%.2g, "
         "%d grads %.2g/%.2g, adam_losses %.2g/%.2g, adam_final %.2g/%.2g (+%d noise-driven "
         "values: max abs err %.2g)%s\n",
         case_name, w_logits.rel, w_logits.abs, w_attn.rel, w_attn.abs, w_loss.rel, w_loss.abs,
         ngrads, w_grads.rel, w_grads.abs, w_adam_loss.rel, w_adam_loss.abs, w_adam_final.rel,
         w_adam_final.abs, nloose, w_adam_final.loose_abs,
         check_failures > failures_before ? "  FAILED" : "");

done:
  if (check_failures == failures_before && !model) CHECK(0, "%s: not run", path);
  if (have_adam) nn_adam_free(&adam);
  nn_workspace_free(ws);
  nn_model_free(model);
  if (have_fx) nn_st_free(&fx);
  free(blob);
  free(config_json);
  free(tokens);
  free(lengths);
  free(labels);
  free(weights);
  free(want_logits);
  free(want_attn);
  free(want_loss);
  free(want_adam);
  free(logits);
  free(attn);
  free(dlogits);
  free(expected);
  free(loose);
}

#endif
