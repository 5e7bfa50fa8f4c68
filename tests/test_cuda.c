/* test_cuda.c -- the CUDA backend (engine/backend_cuda.cu, attnext_cuda.so) against PyTorch and
 * against the CPU backend, and the engine's behaviour where there is no GPU.
 *
 * Everywhere (a child process with $ATTNEXT_CUDA_LIB pointing at a missing library, and this
 * process where the machine has no usable GPU):
 *   - device "cuda" fails with: device "cuda" requested but no CUDA device is available (<why>)
 *     from nn_model_create and nn_trainer_create;
 *   - device "auto" runs on the CPU, and a weights file trained with "cuda" loads there;
 *   - nn_version_string says why there is no CUDA backend.
 * With a GPU (else exit 77, "no CUDA device: <why>"), tolerance rtol 1e-3 with atol 1e-5
 * (float32 on the GPU: cuBLAS's summation order, float atomics in the attention sums, expf /
 * tanhf within 2 ulp of glibc's):
 *   1. every golden fixture (tests/golden.h: PyTorch's logits, attention, loss, gradients and
 *      5 Adam steps) on the CUDA backend;
 *   2. CPU vs CUDA on random batches of larger models, every cell / attention / direction /
 *      depth: training forward, gradients, folded inference; also the same model shared by 4
 *      threads, each with its workspace, gives the single-thread logits;
 *   3. a short training run (synthetic headlines, 4 epochs) on both backends: final validation
 *      loss within 2% and accuracy within 0.02 of the CPU's, weights within 0.05; a second
 *      CUDA run with the same seed gives the same bits (the backend uses no float atomics);
 *   4. a batch too large for the GPU fails with the CUDA message (no abort), and the model
 *      works again afterwards.
 * The library is ./attnext_cuda.so (make builds it where nvcc is found) unless
 * $ATTNEXT_CUDA_LIB says otherwise; run from the repository root.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "golden.h"
#include "model.h"

#define CUDA_RTOL 1e-3
#define CUDA_ATOL 1e-5

static const char *labels3[3] = {"a", "b", "c"};

static nn_model *make_model(const char *json, int device, int V, uint64_t seed, char *err) {
  nn_config cfg;
  test_config_base(&cfg);
  if (nn_config_parse_json(&cfg, json, NULL, err) != NN_OK) return NULL;
  cfg.device = (nn_device)device;
  cfg.vocab_size = V;
  const char **toks = calloc((size_t)V, sizeof *toks);
  int *lens = calloc((size_t)V, sizeof *lens);
  char(*names)[12] = calloc((size_t)V, sizeof *names);
  nn_vocab *vocab = NULL;
  nn_model *m = NULL;
  if (toks && lens && names) {
    for (int i = 0; i < V; i++) {
      snprintf(names[i], sizeof names[i], i == 0 ? "<PAD>" : i == 1 ? "<UNK>" : "w%d", i);
      toks[i] = names[i];
      lens[i] = (int)strlen(names[i]);
    }
    if (nn_vocab_from_list(&vocab, toks, lens, V, err) == NN_OK &&
        nn_model_create(&m, &cfg, vocab, labels3, 3, seed, err) != NN_OK)
      m = NULL;
  }
  free(toks);
  free(lens);
  free(names);
  return m;
}

/* ---------------------------------------------------------------- without a GPU */

/* What must hold when the CUDA backend is unavailable for reason `why`. */
static void check_unavailable(const char *why) {
  char err[NN_ERR_LEN] = "", want[NN_ERR_LEN];
  snprintf(want, sizeof want, "device \"cuda\" requested but no CUDA device is available (");
  nn_model *m = make_model("{}", NN_DEVICE_CUDA, 20, 1, err);
  CHECK(m == NULL && strncmp(err, want, strlen(want)) == 0 && strstr(err, why),
        "device cuda without a GPU: got \"%s\"", err);
  printf("  device \"cuda\": %s\n", err);
  nn_model_free(m);

  nn_config cfg;
  test_config_base(&cfg);
  cfg.device = NN_DEVICE_CUDA;
  /* distinct texts: the split by text puts copies of one text on one side */
  const char *texts[12], *labels[12];
  static const char *const words[12] = {"a b c", "d e", "f g",   "h i j", "k l", "m n o",
                                        "p q",   "r s", "t u v", "w x",   "y z", "b d f"};
  for (int i = 0; i < 12; i++) {
    texts[i] = words[i];
    labels[i] = i % 2 ? "x" : "y";
  }
  nn_trainer *tr = NULL;
  int rc = nn_trainer_create(
      &tr, &(nn_trainer_args){.cfg = &cfg, .texts = texts, .labels = labels, .n = 12}, err);
  CHECK(rc == NN_ERROR && strstr(err, "device \"cuda\" requested but no CUDA device"),
        "trainer with device cuda without a GPU: rc %d, %s", rc, err);
  nn_trainer_free(tr);

  m = make_model("{}", NN_DEVICE_AUTO, 20, 1, err);
  CHECK(m && !m->be->device_memory, "device \"auto\" without a GPU runs on the CPU (%s)", err);
  if (m) {
    nn_workspace *ws = NULL;
    nn_workspace_create(&ws, NULL, err);
    int tokens[3] = {2, 3, 4}, lengths[1] = {3};
    nn_batch b = {tokens, lengths, NULL, 1, 3};
    float logits[3];
    CHECK(nn_model_forward(m, ws, &b, 0, NULL, logits, NULL, err) == NN_OK, "auto forward: %s",
          err);
    /* a weights file trained with "cuda" loads on the CPU */
    m->cfg.device = NN_DEVICE_CUDA;
    unsigned char *blob = NULL;
    size_t len = 0;
    CHECK(nn_model_save(m, &blob, &len, err) == NN_OK, "save: %s", err);
    nn_model *loaded = NULL;
    rc = blob ? nn_model_load(&loaded, blob, len, err) : NN_ERROR;
    CHECK(rc == NN_OK && loaded && !loaded->be->device_memory &&
              nn_model_config(loaded)->device == NN_DEVICE_CUDA,
          "a \"cuda\" weights file loads on the CPU: %s", rc == NN_OK ? "ok" : err);
    printf("  device \"auto\" runs on the CPU; a \"cuda\" weights file loads on the CPU\n");
    nn_model_free(loaded);
    free(blob);
    nn_workspace_free(ws);
    nn_model_free(m);
  }
  char version[1024];
  nn_version_string(version, sizeof version);
  CHECK(strstr(version, "cuda: ") && strstr(version, why), "version string: %s", version);
  printf("  %s\n", version);
}

/* A library that is not there: run in a child, before this process looks for the real one. */
static void check_missing_library(void) {
  fflush(stdout);
  pid_t pid = fork();
  if (pid == 0) {
    setenv("ATTNEXT_CUDA_LIB", "/nonexistent/attnext_cuda.so", 1);
    printf("without the library (ATTNEXT_CUDA_LIB=/nonexistent/attnext_cuda.so):\n");
    check_unavailable("/nonexistent/attnext_cuda.so: cannot open shared object file");
    fflush(stdout);
    _exit(check_failures ? 1 : 0);
  }
  int status = 0;
  CHECK(pid > 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0,
        "the missing-library checks failed (status %d)", status);
}

/* ---------------------------------------------------------------- with a GPU */

/* |a - b| <= atol * scale + rtol |b| over n values, scale = max |b| (at least 1): one CHECK */
static void close_all(const float *a, const float *b, size_t n, const char *what,
                      const char *json) {
  double scale = 1.0, worst = 0.0;
  size_t at = 0;
  for (size_t i = 0; i < n; i++)
    if (fabs(b[i]) > scale) scale = fabs(b[i]);
  for (size_t i = 0; i < n; i++) {
    double d = fabs((double)a[i] - b[i]), allowed = CUDA_ATOL * scale + CUDA_RTOL * fabs(b[i]);
    double e = d / allowed;
    if (!(e <= worst)) { /* NaN too */
      worst = e;
      at = i;
    }
  }
  CHECK(worst <= 1.0, "%s: %s[%zu]: cuda %.9g cpu %.9g (%.3g of the tolerance)", json, what, at,
        n ? a[at] : 0.0, n ? b[at] : 0.0, worst);
}

static int random_batch(int *tokens, int *lengths, int *labels, int B, int T, int V,
                        uint64_t seed) {
  nn_rng r;
  nn_rng_seed(&r, seed);
  for (int i = 0; i < B * T; i++) tokens[i] = (int)nn_rng_below(&r, (uint32_t)V);
  for (int b = 0; b < B; b++) {
    lengths[b] = 1 + (int)nn_rng_below(&r, (uint32_t)T);
    labels[b] = (int)nn_rng_below(&r, 3);
  }
  lengths[0] = T;
  return 0;
}

typedef struct thread_job {
  nn_model *m;
  const nn_batch *batch;
  float *logits;
  int rc;
  char err[NN_ERR_LEN];
} thread_job;

static void *thread_forward(void *arg) {
  thread_job *j = arg;
  nn_workspace *ws = NULL;
  j->rc = nn_workspace_create(&ws, NULL, j->err);
  for (int k = 0; j->rc == NN_OK && k < 5; k++)
    j->rc = nn_model_forward(j->m, ws, j->batch, 0, NULL, j->logits, NULL, j->err);
  nn_workspace_free(ws);
  return NULL;
}

static void check_cpu_vs_cuda(const char *json) {
  enum { V = 500, B = 48, T = 24 };
  char err[NN_ERR_LEN];
  nn_model *cpu = make_model(json, NN_DEVICE_CPU, V, 7, err);
  nn_model *gpu = make_model(json, NN_DEVICE_CUDA, V, 7, err);
  CHECK(cpu && gpu, "%s: models: %s", json, err);
  if (!cpu || !gpu) goto out;
  static int tokens[B * T], lengths[B], labels[B];
  random_batch(tokens, lengths, labels, B, T, V, 99);
  nn_batch batch = {tokens, lengths, labels, B, T};
  static float logits[2][B * 3], attn[2][B * T], dl[B * 3];
  nn_model *m[2] = {cpu, gpu};
  nn_workspace *ws[2] = {NULL, NULL};
  size_t n = nn_model_param_count(cpu);
  for (int k = 0; k < 2; k++) {
    nn_workspace_create(&ws[k], NULL, err);
    nn_rng r;
    nn_rng_seed(&r, 3);
    int rc = nn_model_forward(m[k], ws[k], &batch, 1, &r, logits[k], attn[k], err);
    CHECK(rc == NN_OK, "%s: forward on %s: %s", json, m[k]->be->name, err);
    nn_cross_entropy(dl, logits[0], labels, NULL, B, 3); /* the same dlogits for both */
    if (k == 0) continue;
    for (int j = 0; j < 2; j++) {
      rc = nn_model_zero_grads(m[j], err);
      if (rc == NN_OK) rc = nn_model_backward(m[j], ws[j], &batch, dl, err);
      CHECK(rc == NN_OK, "%s: backward on %s: %s", json, m[j]->be->name, err);
    }
  }
  close_all(logits[1], logits[0], B * 3, "training logits", json);
  close_all(attn[1], attn[0], B * T, "attention", json);
  {
    float *g_cpu = malloc(n * 4);
    if (g_cpu) {
      memcpy(g_cpu, nn_model_grads(cpu), n * 4);
      for (int i = 0; i < nn_model_tensor_count(cpu); i++) {
        nn_tensor_info info;
        nn_model_tensor(cpu, i, &info);
        close_all(nn_model_grads(gpu) + info.offset, g_cpu + info.offset, info.size, info.name,
                  json);
      }
      free(g_cpu);
    }
  }
  for (int k = 0; k < 2; k++) {
    CHECK(nn_model_prepare_inference(m[k], err) == NN_OK, "%s: prepare_inference: %s", json, err);
    CHECK(nn_model_forward(m[k], ws[k], &batch, 0, NULL, logits[k], attn[k], err) == NN_OK,
          "%s: inference: %s", json, err);
  }
  close_all(logits[1], logits[0], B * 3, "folded inference logits", json);
  /* 4 threads on the one GPU model */
  {
    thread_job jobs[4];
    pthread_t tid[4];
    static float tl[4][B * 3];
    for (int t = 0; t < 4; t++) {
      jobs[t] = (thread_job){gpu, &batch, tl[t], NN_OK, ""};
      pthread_create(&tid[t], NULL, thread_forward, &jobs[t]);
    }
    for (int t = 0; t < 4; t++) {
      pthread_join(tid[t], NULL);
      CHECK(jobs[t].rc == NN_OK, "%s: thread %d: %s", json, t, jobs[t].err);
      close_all(tl[t], logits[1], B * 3, "threaded inference logits", json);
    }
  }
  nn_workspace_free(ws[0]);
  nn_workspace_free(ws[1]);
out:
  nn_model_free(cpu);
  nn_model_free(gpu);
}

#define ROWS 3000
static char texts[ROWS][96];
static const char *text_ptrs[ROWS], *label_ptrs[ROWS];

static void make_texts(void) {
  static const char *words[3][8] = {
      {"goal", "match", "team", "coach", "league", "cup", "season", "striker"},
      {"stock", "market", "bank", "profit", "shares", "deal", "oil", "rates"},
      {"chip", "software", "robot", "phone", "cloud", "internet", "space", "virus"}};
  static const char *common[6] = {"today", "new", "report", "week", "says", "after"};
  static const char *names[3] = {"sport", "business", "tech"};
  nn_rng r;
  nn_rng_seed(&r, 3);
  for (int i = 0; i < ROWS; i++) {
    int c = (int)nn_rng_below(&r, 3), len = 2 + (int)nn_rng_below(&r, 10), pos = 0;
    for (int t = 0; t < len; t++) {
      int own = nn_rng_below(&r, 5) < 2; /* noisy: most words say nothing of the class */
      const char *w = own                   ? words[c][nn_rng_below(&r, 8)]
                      : nn_rng_below(&r, 2) ? common[nn_rng_below(&r, 6)]
                                            : words[nn_rng_below(&r, 3)][nn_rng_below(&r, 8)];
      pos += snprintf(texts[i] + pos, sizeof texts[i] - (size_t)pos, "%s%s", t ? " " : "", w);
    }
    text_ptrs[i] = texts[i];
    label_ptrs[i] = names[c];
  }
}

/* json: the configuration trained on the CPU, on the device, and on the device again. */
static void check_training(const char *json) {
  printf("training %s\n", json);
  char err[NN_ERR_LEN];
  nn_epoch_stats last[3];
  nn_model *model[3] = {NULL, NULL, NULL};
  for (int k = 0; k < 3; k++) { /* cpu, cuda, cuda again (determinism) */
    nn_config cfg;
    test_config_base(&cfg);
    nn_config_parse_json(&cfg, json, NULL, err);
    cfg.device = k ? NN_DEVICE_CUDA : NN_DEVICE_CPU;
    nn_trainer *tr = NULL;
    int rc = nn_trainer_create(
        &tr, &(nn_trainer_args){.cfg = &cfg, .texts = text_ptrs, .labels = label_ptrs, .n = ROWS},
        err);
    CHECK(rc == NN_OK, "trainer on %s: %s", k ? "cuda" : "cpu", err);
    if (rc != NN_OK) return;
    nn_epoch_stats st;
    while ((rc = nn_trainer_epoch(tr, &st, NULL, NULL, err)) == NN_OK) {
      printf("  %s epoch %d: train loss %.6f val loss %.6f val accuracy %.4f (%.2fs)\n",
             k ? "cuda" : "cpu ", st.epoch, st.train_loss, st.val_loss, st.val_accuracy,
             st.seconds);
      last[k] = st;
    }
    CHECK(rc == NN_DONE, "training on %s: %s", k ? "cuda" : "cpu", err);
    rc = nn_trainer_take_model(tr, &model[k], err);
    CHECK(rc == NN_OK, "take_model: %s", err);
    nn_trainer_free(tr);
  }
  CHECK_CLOSE(last[1].val_loss, last[0].val_loss, 0.02, 0, "final validation loss, cuda vs cpu");
  CHECK(fabs(last[1].val_accuracy - last[0].val_accuracy) <= 0.02,
        "final validation accuracy: cuda %.4f cpu %.4f", last[1].val_accuracy,
        last[0].val_accuracy);
  if (model[1] && model[2]) {
    int same = memcmp(nn_model_weights(model[1]), nn_model_weights(model[2]),
                      nn_model_param_count(model[1]) * sizeof(float)) == 0;
    CHECK(same && last[1].val_loss == last[2].val_loss,
          "two CUDA runs with the same seed give the same bits (val loss %.9g vs %.9g)",
          last[1].val_loss, last[2].val_loss);
    printf("  two CUDA runs, same seed: %s\n", same ? "bit-identical weights" : "DIFFERENT");
  }
  if (model[0] && model[1]) {
    size_t n = nn_model_param_count(model[0]);
    const float *a = nn_model_weights(model[0]), *b = nn_model_weights(model[1]);
    double worst = 0;
    for (size_t i = 0; i < n; i++)
      if (fabs((double)a[i] - b[i]) > worst) worst = fabs((double)a[i] - b[i]);
    printf("  trained weights: max |cuda - cpu| = %.3g\n", worst);
    CHECK(worst <= 0.05, "trained weights differ by %.3g", worst);
  }
  nn_model_free(model[0]);
  nn_model_free(model[1]);
  nn_model_free(model[2]);
}

static void check_out_of_memory(void) {
  char err[NN_ERR_LEN] = "";
  /* the widest hidden layer: the batch that asks for hundreds of GB of activations then has
   * fewer tokens, whose indexes the host lays out and copies before the device refuses */
  nn_model *m = make_model("{\"hidden\":4096,\"embed_dim\":256}", NN_DEVICE_CUDA, 100, 1, err);
  CHECK(m != NULL, "model: %s", err);
  if (!m) return;
  enum { B = 64 };
  int T = 1 << 18; /* 16M tokens: ~840 GB of activations */
  int *tokens = calloc((size_t)B * T, sizeof *tokens), lengths[B];
  float logits[B * 3];
  nn_workspace *ws = NULL;
  nn_workspace_create(&ws, NULL, err);
  if (tokens && ws) {
    for (int b = 0; b < B; b++) lengths[b] = T;
    for (size_t i = 0; i < (size_t)B * T; i++) tokens[i] = 2 + (int)(i % 90);
    nn_batch big = {tokens, lengths, NULL, B, T};
    int rc = nn_model_forward(m, ws, &big, 0, NULL, logits, NULL, err);
    CHECK(rc != NN_OK && strstr(err, "cudaMalloc"), "a batch too large for the GPU: rc %d, %s", rc,
          err);
    printf("  a batch too large for the GPU: %s\n", err);
    int small_len[2] = {2, 1};
    nn_batch small = {tokens, small_len, NULL, 2, 2};
    rc = nn_model_forward(m, ws, &small, 0, NULL, logits, NULL, err);
    CHECK(rc == NN_OK, "the model works after the failed batch: %s", err);
  }
  free(tokens);
  nn_workspace_free(ws);
  nn_model_free(m);
}

static int cmp_path(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

static void run_golden_on_cuda(void) {
  golden_device = NN_DEVICE_CUDA;
  golden_rtol = CUDA_RTOL;
  golden_atol = CUDA_ATOL;
  DIR *dir = opendir(FIXTURE_DIR);
  CHECK(dir != NULL, "cannot open %s (run from the repository root)", FIXTURE_DIR);
  if (!dir) return;
  char *paths[256];
  int count = 0;
  struct dirent *e;
  while ((e = readdir(dir)) != NULL && count < 256) {
    size_t n = strlen(e->d_name);
    if (n <= 12 || strcmp(e->d_name + n - 12, ".safetensors") != 0) continue;
    if (asprintf(&paths[count], "%s/%s", FIXTURE_DIR, e->d_name) > 0) count++;
  }
  closedir(dir);
  qsort(paths, (size_t)count, sizeof *paths, cmp_path);
  CHECK(count > 0, "no fixtures in %s", FIXTURE_DIR);
  for (int i = 0; i < count; i++) {
    run_fixture(paths[i]);
    free(paths[i]);
  }
}

int main(void) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  const char *v = getenv("GOLDEN_VERBOSE"); /* every tensor's worst error (golden.h) */
  verbose = v && *v && strcmp(v, "0") != 0;
  check_missing_library();
  if (!getenv("ATTNEXT_CUDA_LIB") && access("attnext_cuda.so", R_OK) == 0)
    setenv("ATTNEXT_CUDA_LIB", "./attnext_cuda.so", 1);
  char status[512];
  nn_backend_cuda_status(status, sizeof status);
  const nn_backend *be = NULL;
  char err[NN_ERR_LEN] = "";
  if (nn_backend_for_device(NN_DEVICE_CUDA, &be, err) != NN_OK) {
    const char *why = strchr(err, '(');
    char reason[NN_ERR_LEN];
    snprintf(reason, sizeof reason, "%s", why ? why + 1 : err);
    size_t len = strlen(reason);
    if (len && reason[len - 1] == ')') reason[len - 1] = 0;
    printf("without a usable GPU (%s):\n", status);
    check_unavailable(reason);
    if (check_failures) return check_finish("test_cuda");
    printf("test_cuda: %d checks of the no-GPU behaviour passed; the GPU tests did not run\n",
           check_count);
    char skip[NN_ERR_LEN + 32];
    snprintf(skip, sizeof skip, "no CUDA device: %s", reason);
    return test_skip(skip);
  }
  printf("CUDA backend: %s\n", status);
  printf("tolerance: |cuda - reference| <= %g * max(1, max|reference|) + %g * |reference|\n",
         CUDA_ATOL, CUDA_RTOL);

  printf("1. golden fixtures on the GPU (rtol %g, atol %g):\n", CUDA_RTOL, CUDA_ATOL);
  run_golden_on_cuda();

  printf("2. CPU vs CUDA on random batches:\n");
  static const char *configs[] = {
      "{\"cell\":\"rnn\",\"attention\":\"linear\",\"embed_dim\":64,\"hidden\":96,\"fc_hidden\":50,"
      "\"dropout\":0}",
      "{\"cell\":\"gru\",\"attention\":\"additive\",\"bidirectional\":1,\"embed_dim\":64,"
      "\"hidden\":128,\"fc_hidden\":100,\"dropout\":0}",
      "{\"cell\":\"lstm\",\"attention\":\"self\",\"bidirectional\":1,\"embed_dim\":48,\"hidden\":"
      "64,\"fc_hidden\":32,\"dropout\":0}",
      "{\"cell\":\"lstm\",\"attention\":\"linear\",\"layers\":2,\"bidirectional\":1,\"embed_dim\":"
      "40,\"hidden\":48,\"fc_hidden\":0,\"dropout\":0}",
      "{\"cell\":\"gru\",\"attention\":\"self\",\"layers\":3,\"embed_dim\":32,\"hidden\":40,\"fc_"
      "hidden\":20,\"dropout\":0}",
      "{\"cell\":\"rnn\",\"attention\":\"additive\",\"layers\":2,\"bidirectional\":1,\"embed_dim\":"
      "100,\"hidden\":512,\"fc_hidden\":100,\"dropout\":0}",
      "{\"cell\":\"gru\",\"attention\":\"dot\",\"bidirectional\":1,\"embed_dim\":48,\"hidden\":64,"
      "\"fc_hidden\":32,\"dropout\":0}",
  };
  for (size_t i = 0; i < sizeof configs / sizeof *configs; i++) {
    int before = check_failures;
    check_cpu_vs_cuda(configs[i]);
    printf("  %-130s %s\n", configs[i], check_failures > before ? "FAILED" : "ok");
  }

  printf("3. a short training run, CPU vs CUDA:\n");
  make_texts();
  check_training("{\"cell\":\"gru\",\"attention\":\"additive\",\"bidirectional\":1,"
                 "\"embed_dim\":32,\"hidden\":32,\"fc_hidden\":32,\"dropout\":0.1,"
                 "\"batch_size\":32,\"epochs\":4,\"threads\":2,\"lr\":0.003}");
  /* subword rows shared by many tokens: sums that must not depend on the GPU's thread order */
  check_training("{\"cell\":\"gru\",\"attention\":\"additive\",\"embed_dim\":16,"
                 "\"hidden\":16,\"fc_hidden\":0,\"subword_buckets\":500,\"embed_dropout\":0.1,"
                 "\"batch_size\":32,\"epochs\":2,\"threads\":2,\"lr\":0.003}");

  printf("4. errors:\n");
  check_out_of_memory();
  return check_finish("test_cuda");
}
