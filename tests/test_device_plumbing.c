/* test_device_plumbing.c -- the engine's host/device plumbing, on any machine: a model on a
 * device backend must give the CPU's results bit for bit when the device's operations are the
 * CPU's. The device is tests/fake_device.c (build/tests/fake_device.so, loaded as the CUDA
 * library through $ATTNEXT_CUDA_LIB): its memory sits behind tagged pointers the host cannot
 * dereference, so any host code reading backend memory directly crashes this test.
 *
 * Compared bit for bit, CPU model vs device model, for every cell, attention, bidirectional,
 * two layers, no fc1, dropout: initial weights (nn_model_weights), training forward (logits,
 * attention), gradients (nn_model_grads), 3 Adam steps on the device (nn_adam_step_on) against
 * nn_adam_step, weights written through nn_model_params then used, folded inference
 * (nn_model_prepare_inference), nn_model_save bytes, nn_model_load of a "cuda" file, and two
 * whole training runs (nn_trainer_*). Also: an injected device error comes back from
 * nn_model_forward / backward / the trainer as NN_ERROR with the device's message, the next
 * call works again, and no device allocation is left once everything is freed.
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "config_base.h"
#include "model.h"
#include "nn_internal.h"
#include "nn_mem.h"

#define V 40
#define C 3

static nn_model *make_model(const char *json, int device, uint64_t seed) {
  char err[NN_ERR_LEN];
  nn_config cfg;
  test_config_base(&cfg);
  int rc = nn_config_parse_json(&cfg, json, NULL, err);
  CHECK(rc == NN_OK, "config %s: %s", json, err);
  cfg.device = (nn_device)device;
  cfg.vocab_size = V;
  const char *toks[V];
  int lens[V];
  char names[V][12];
  for (int i = 0; i < V; i++) {
    snprintf(names[i], sizeof names[i], i == 0 ? "<PAD>" : i == 1 ? "<UNK>" : "w%d", i);
    toks[i] = names[i];
    lens[i] = (int)strlen(names[i]);
  }
  nn_vocab *vocab = NULL;
  rc = nn_vocab_from_list(&vocab, toks, lens, V, err);
  CHECK(rc == NN_OK, "vocab: %s", err);
  const char *labels[C] = {"a", "b", "c"};
  nn_model *m = NULL;
  rc = nn_model_create(&m, &cfg, vocab, labels, C, seed, err);
  CHECK(rc == NN_OK, "nn_model_create(%s, device %d): %s", json, device, err);
  return m;
}

static int same(const void *a, const void *b, size_t bytes, const char *what, const char *json) {
  int ok = memcmp(a, b, bytes) == 0;
  CHECK(ok, "%s: %s differs between the CPU and the device", json, what);
  if (!ok) {
    const float *x = a, *y = b;
    for (size_t i = 0; i < bytes / 4; i++)
      if (memcmp(x + i, y + i, 4) != 0) {
        fprintf(stderr, "  first difference at %zu: %.9g vs %.9g\n", i, x[i], y[i]);
        break;
      }
  }
  return ok;
}

/* One configuration through every model-level path. */
static void check_config(const char *json) {
  char err[NN_ERR_LEN];
  nn_model *cpu = make_model(json, NN_DEVICE_CPU, 11), *dev = make_model(json, NN_DEVICE_CUDA, 11);
  if (!cpu || !dev) goto out;
  CHECK(!cpu->be->device_memory && dev->be->device_memory, "%s: backends %s / %s", json,
        cpu->be->name, dev->be->name);
  size_t n = nn_model_param_count(cpu);
  same(nn_model_weights(cpu), nn_model_weights(dev), n * 4, "initial weights", json);

  /* a batch of mixed lengths */
  enum { B = 7, T = 9 };
  int tokens[B * T], lengths[B] = {3, 9, 1, 5, 9, 2, 6}, labels[B];
  nn_rng r;
  nn_rng_seed(&r, 5);
  for (int i = 0; i < B * T; i++) tokens[i] = (int)nn_rng_below(&r, V);
  for (int b = 0; b < B; b++) labels[b] = (int)nn_rng_below(&r, C);
  nn_batch batch = {tokens, lengths, labels, B, T};
  float logits[2][B * C], attn[2][B * T], dl[B * C];
  nn_workspace *ws[2] = {NULL, NULL};
  nn_adam adam[2];
  int have_adam = 0;
  nn_workspace_create(&ws[0], NULL, err);
  nn_workspace_create(&ws[1], NULL, err);
  nn_model *m[2] = {cpu, dev};
  for (int step = 0; step < 4; step++) {
    for (int k = 0; k < 2; k++) {
      nn_rng dr;
      nn_rng_seed(&dr, 100 + step);
      int rc = nn_model_forward(m[k], ws[k], &batch, 1, &dr, logits[k], attn[k], err);
      CHECK(rc == NN_OK, "%s: forward %d on %s: %s", json, step, m[k]->be->name, err);
      nn_cross_entropy(dl, logits[k], labels, NULL, B, C);
      rc = nn_model_zero_grads(m[k], err);
      if (rc == NN_OK) rc = nn_model_backward(m[k], ws[k], &batch, dl, err);
      CHECK(rc == NN_OK, "%s: backward %d on %s: %s", json, step, m[k]->be->name, err);
    }
    char what[64];
    snprintf(what, sizeof what, "logits (step %d)", step);
    same(logits[0], logits[1], sizeof logits[0], what, json);
    snprintf(what, sizeof what, "attention (step %d)", step);
    same(attn[0], attn[1], sizeof attn[0], what, json);
    snprintf(what, sizeof what, "gradients (step %d)", step);
    same(nn_model_grads(cpu), nn_model_grads(dev), n * 4, what, json);
    if (step == 3) break;
    if (!have_adam) {
      CHECK(nn_adam_init(&adam[0], n, 1e-2f, err) == NN_OK, "adam: %s", err);
      CHECK(nn_adam_init_on(&adam[1], dev->be, NULL, n, 1e-2f, err) == NN_OK, "adam on device: %s",
            err);
      have_adam = 1;
    }
    nn_adam_step(&adam[0], nn_model_params(cpu), nn_model_grads(cpu));
    CHECK(nn_adam_step_on(&adam[1], dev->be, nn_model_train_params(dev), dev->grads, err) == NN_OK,
          "adam step on device: %s", err);
    if (step == 2) /* right after steps on the device: the host copy must still be refreshed */
      for (int k = 0; k < 2; k++)
        CHECK(nn_model_prepare_inference(m[k], err) == NN_OK, "%s: prepare: %s", json, err);
    snprintf(what, sizeof what, "weights after Adam step %d", step + 1);
    same(nn_model_weights(cpu), nn_model_weights(dev), n * 4, what, json);
  }
  if (have_adam) {
    nn_adam_free(&adam[0]);
    nn_adam_free_on(&adam[1], dev->be);
  }

  /* weights written through the host mirror, then used; then written again through the same
   * pointer, kept across a forward (as test_gradcheck does), and used again */
  float *kept[2];
  for (int k = 0; k < 2; k++) {
    kept[k] = nn_model_params(m[k]);
    for (size_t i = 0; i < n; i += 7) kept[k][i] *= 0.5f;
  }
  for (int round = 0; round < 2; round++) {
    for (int k = 0; k < 2; k++) {
      int rc = nn_model_forward(m[k], ws[k], &batch, 0, NULL, logits[k], attn[k], err);
      CHECK(rc == NN_OK, "%s: inference: %s", json, err);
    }
    same(logits[0], logits[1], sizeof logits[0],
         round ? "logits after writing through a kept pointer" : "logits after writing weights",
         json);
    for (int k = 0; k < 2; k++) kept[k][n - 1] += 0.25f; /* fc2.bias: moves the logits */
  }

  /* folded inference */
  for (int k = 0; k < 2; k++) {
    CHECK(nn_model_prepare_inference(m[k], err) == NN_OK, "%s: prepare_inference: %s", json, err);
    int rc = nn_model_forward(m[k], ws[k], &batch, 0, NULL, logits[k], attn[k], err);
    CHECK(rc == NN_OK, "%s: folded inference: %s", json, err);
  }
  CHECK(dev->fold[0] != NULL, "%s: the device model has no folded table", json);
  same(logits[0], logits[1], sizeof logits[0], "folded logits", json);
  same(attn[0], attn[1], sizeof attn[0], "folded attention", json);

  /* save (downloads) and load (uploads) */
  unsigned char *blob[2] = {NULL, NULL};
  size_t len[2] = {0, 0};
  for (int k = 0; k < 2; k++)
    CHECK(nn_model_save(m[k], &blob[k], &len[k], err) == NN_OK, "%s: save: %s", json, err);
  if (blob[0] && blob[1]) {
    /* the configs differ in "device" only: compare the tensors' bytes at the end */
    size_t tail = n * 4;
    CHECK(len[0] >= tail && len[1] >= tail &&
              memcmp(blob[0] + len[0] - tail, blob[1] + len[1] - tail, tail) == 0,
          "%s: saved tensors differ", json);
    nn_model *loaded = NULL;
    CHECK(nn_model_load(&loaded, blob[1], len[1], err) == NN_OK, "%s: load: %s", json, err);
    if (loaded) {
      CHECK(loaded->be->device_memory && nn_model_config(loaded)->device == NN_DEVICE_CUDA,
            "%s: a \"cuda\" file loads on the device", json);
      nn_workspace *lw = NULL;
      nn_workspace_create(&lw, NULL, err);
      CHECK(nn_model_forward(loaded, lw, &batch, 0, NULL, logits[1], attn[1], err) == NN_OK,
            "%s: forward of the loaded model: %s", json, err);
      same(logits[0], logits[1], sizeof logits[0], "logits of the loaded model", json);
      nn_workspace_free(lw);
      nn_model_free(loaded);
    }
    /* an "auto" file predicts on the CPU, where one text at a time is fastest */
    nn_model *as_auto = NULL;
    unsigned char *auto_blob = NULL;
    size_t auto_len = 0;
    m[1]->cfg.device = NN_DEVICE_AUTO;
    CHECK(nn_model_save(m[1], &auto_blob, &auto_len, err) == NN_OK, "%s: save: %s", json, err);
    m[1]->cfg.device = NN_DEVICE_CUDA;
    CHECK(auto_blob && nn_model_load(&as_auto, auto_blob, auto_len, err) == NN_OK, "%s: load: %s",
          json, err);
    CHECK(as_auto && !as_auto->be->device_memory &&
              nn_model_config(as_auto)->device == NN_DEVICE_AUTO,
          "%s: an \"auto\" file loads on the CPU, its config still \"auto\"", json);
    nn_model_free(as_auto);
    free(auto_blob);
  }
  free(blob[0]);
  free(blob[1]);
  nn_workspace_free(ws[0]);
  nn_workspace_free(ws[1]);
out:
  nn_model_free(cpu);
  nn_model_free(dev);
}

/* ---------------------------------------------------------------- training */

#define ROWS 240
static char texts[ROWS][64];
static const char *text_ptrs[ROWS], *label_ptrs[ROWS];

static void make_texts(void) {
  static const char *words[3][5] = {{"goal", "match", "team", "coach", "league"},
                                    {"stock", "market", "bank", "profit", "shares"},
                                    {"chip", "software", "robot", "phone", "cloud"}};
  static const char *common[4] = {"today", "new", "report", "week"};
  static const char *names[3] = {"sport", "business", "tech"};
  nn_rng r;
  nn_rng_seed(&r, 3);
  for (int i = 0; i < ROWS; i++) {
    int c = i % 3, len = 1 + (int)nn_rng_below(&r, 7), pos = 0;
    for (int t = 0; t < len; t++) {
      const char *w =
          nn_rng_below(&r, 3) ? words[c][nn_rng_below(&r, 5)] : common[nn_rng_below(&r, 4)];
      pos += snprintf(texts[i] + pos, sizeof texts[i] - (size_t)pos, "%s%s", t ? " " : "", w);
    }
    text_ptrs[i] = texts[i];
    label_ptrs[i] = names[c];
  }
}

/* Train 3 epochs on the CPU and on the device; bit-identical when exact (one shard on the CPU:
 * batch_size <= 32), else within rtol 1e-4 (the CPU sums 2+ shards' gradients). */
static void check_training(const char *json, int exact) {
  char err[NN_ERR_LEN];
  nn_trainer *tr[2] = {NULL, NULL};
  nn_model *model[2] = {NULL, NULL};
  nn_epoch_stats st[2][3];
  for (int k = 0; k < 2; k++) {
    nn_config cfg;
    test_config_base(&cfg);
    CHECK(nn_config_parse_json(&cfg, json, NULL, err) == NN_OK, "%s: %s", json, err);
    cfg.device = k ? NN_DEVICE_CUDA : NN_DEVICE_CPU;
    int rc = nn_trainer_create(
        &tr[k],
        &(nn_trainer_args){.cfg = &cfg, .texts = text_ptrs, .labels = label_ptrs, .n = ROWS}, err);
    CHECK(rc == NN_OK, "%s: trainer on %s: %s", json, k ? "device" : "cpu", err);
    if (rc != NN_OK) goto out;
    for (int e = 0; e < 3; e++) {
      rc = nn_trainer_epoch(tr[k], &st[k][e], NULL, NULL, err);
      CHECK(rc == NN_OK, "%s: epoch %d on %s: %s", json, e + 1, k ? "device" : "cpu", err);
      if (rc != NN_OK) goto out;
    }
    rc = nn_trainer_take_model(tr[k], &model[k], err);
    CHECK(rc == NN_OK, "%s: take_model: %s", json, err);
    if (rc != NN_OK) goto out;
  }
  for (int e = 0; e < 3; e++) {
    printf("  %s epoch %d: train loss cpu %.9g device %.9g, val loss cpu %.9g device %.9g\n", json,
           e + 1, st[0][e].train_loss, st[1][e].train_loss, st[0][e].val_loss, st[1][e].val_loss);
    if (exact) {
      CHECK(st[0][e].train_loss == st[1][e].train_loss && st[0][e].val_loss == st[1][e].val_loss,
            "%s: epoch %d losses differ", json, e + 1);
    } else {
      CHECK_CLOSE(st[1][e].train_loss, st[0][e].train_loss, 1e-4, 1e-7, "train loss");
      CHECK_CLOSE(st[1][e].val_loss, st[0][e].val_loss, 1e-4, 1e-7, "val loss");
    }
  }
  CHECK(model[1]->be->device_memory, "%s: the device trainer's model is on the device", json);
  size_t n = nn_model_param_count(model[0]);
  const float *a = nn_model_weights(model[0]), *b = nn_model_weights(model[1]);
  if (exact) {
    same(a, b, n * 4, "trained weights", json);
  } else {
    double worst = 0;
    for (size_t i = 0; i < n; i++) {
      double d = fabs((double)a[i] - b[i]);
      if (d > worst) worst = d;
    }
    printf("  %s: trained weights differ by at most %.3g\n", json, worst);
    CHECK(worst < 1e-3, "%s: trained weights differ by %.3g", json, worst);
  }
out:
  for (int k = 0; k < 2; k++) {
    nn_trainer_free(tr[k]);
    nn_model_free(model[k]);
  }
}

/* The default recipe's choice of word dropout on the device (engine/choose.c: dense Adam
 * there, the weights copied through the host mirror, Adam's moments made again for each fold):
 * no host access to device memory (the fake device's tagged pointers), the choice told in the
 * metrics, and the training after it runs. 600 rows: the 240 texts in turn. */
static void check_choosing(void) {
  static const char *texts600[600], *labels600[600];
  for (int i = 0; i < 600; i++) {
    texts600[i] = text_ptrs[i % ROWS];
    labels600[i] = label_ptrs[i % ROWS];
  }
  char err[NN_ERR_LEN];
  nn_config cfg;
  nn_config_default(&cfg);
  CHECK(nn_config_parse_json(&cfg,
                             "{\"embed_dim\":8,\"hidden\":8,\"fc_hidden\":0,\"subword_buckets\":0,"
                             "\"epochs\":2}",
                             NULL, err) == NN_OK,
        "options: %s", err);
  cfg.device = NN_DEVICE_CUDA;
  nn_trainer *tr = NULL;
  int rc = nn_trainer_create(
      &tr, &(nn_trainer_args){.cfg = &cfg, .texts = texts600, .labels = labels600, .n = 600}, err);
  CHECK(rc == NN_OK && nn_trainer_choosing(tr), "a choosing trainer on the device: %s", err);
  if (rc != NN_OK) return;
  nn_epoch_stats st;
  int epochs = 0;
  while ((rc = nn_trainer_epoch(tr, &st, NULL, NULL, err)) == NN_OK) epochs++;
  char *metrics = nn_trainer_metrics_json(tr);
  CHECK(rc == NN_DONE && epochs == 2 && metrics && strstr(metrics, "\"word_dropout_choice\""),
        "chosen and trained on the device: %d epochs, %s (%s)", epochs, err,
        metrics ? metrics : "NULL");
  printf("  the choice on the device: %s\n", metrics ? strstr(metrics, "\"sized\"") : "NULL");
  nn_mem_free(NULL, metrics);
  nn_trainer_free(tr);
}

/* ---------------------------------------------------------------- errors */

static void check_errors(void (*fail_after)(long)) {
  char err[NN_ERR_LEN] = "";
  nn_model *dev = make_model("{\"cell\":\"lstm\",\"attention\":\"self\"}", NN_DEVICE_CUDA, 1);
  nn_workspace *ws = NULL;
  nn_workspace_create(&ws, NULL, err);
  int tokens[6] = {2, 3, 4, 5, 6, 0}, lengths[2] = {3, 2}, labels[2] = {0, 1};
  nn_batch batch = {tokens, lengths, labels, 2, 3};
  float logits[2 * C], dl[2 * C];
  nn_rng r;
  nn_rng_seed(&r, 1);
  fail_after(5);
  int rc = nn_model_forward(dev, ws, &batch, 1, &r, logits, NULL, err);
  CHECK(rc == NN_ERROR && strstr(err, "injected failure"), "forward with a device error: rc %d, %s",
        rc, err);
  printf("  forward with an injected device error: %s\n", err);
  fail_after(-1);
  rc = nn_model_forward(dev, ws, &batch, 1, &r, logits, NULL, err);
  CHECK(rc == NN_OK, "forward after the error: %s", err);
  nn_cross_entropy(dl, logits, labels, NULL, 2, C);
  fail_after(3);
  rc = nn_model_backward(dev, ws, &batch, dl, err);
  CHECK(rc == NN_ERROR && strstr(err, "backward: fake device: injected failure"),
        "backward with a device error: rc %d, %s", rc, err);
  printf("  backward with an injected device error: %s\n", err);
  fail_after(-1);
  nn_workspace_free(ws);
  nn_model_free(dev);

  /* in the trainer: the error ends the epoch with the message */
  nn_config cfg;
  test_config_base(&cfg);
  cfg.device = NN_DEVICE_CUDA;
  cfg.hidden = 8;
  cfg.embed_dim = 8;
  nn_trainer *tr = NULL;
  rc = nn_trainer_create(
      &tr, &(nn_trainer_args){.cfg = &cfg, .texts = text_ptrs, .labels = label_ptrs, .n = ROWS},
      err);
  CHECK(rc == NN_OK, "trainer: %s", err);
  if (tr) {
    nn_epoch_stats st;
    fail_after(200);
    rc = nn_trainer_epoch(tr, &st, NULL, NULL, err);
    fail_after(-1);
    CHECK(rc == NN_ERROR && strstr(err, "injected failure"), "epoch with a device error: rc %d, %s",
          rc, err);
    printf("  epoch with an injected device error: %s\n", err);
    nn_trainer_free(tr);
  }
}

int main(int argc, char **argv) {
  /* the stand-in library next to this program */
  char lib[4096];
  const char *slash = strrchr(argv[0], '/');
  snprintf(lib, sizeof lib, "%.*s/fake_device.so", slash ? (int)(slash - argv[0]) : 1,
           slash ? argv[0] : ".");
  setenv("ATTNEXT_CUDA_LIB", lib, 1);
  char version[1024];
  nn_version_string(version, sizeof version);
  printf("%s\n", version);
  if (!strstr(version, "cuda: fake device")) {
    printf("FAIL: %s did not load as the CUDA library\n", lib);
    return 1;
  }
  void *h = dlopen(lib, RTLD_NOW | RTLD_NOLOAD);
  void (*fail_after)(long) = h ? (void (*)(long))dlsym(h, "fake_device_fail_after") : NULL;
  long (*live)(void) = h ? (long (*)(void))dlsym(h, "fake_device_live_allocations") : NULL;
  CHECK(fail_after && live, "fake_device.so exports its controls");
  if (!fail_after || !live) return check_finish("test_device_plumbing");

  /* auto picks the device when there is one */
  nn_model *a = make_model("{}", NN_DEVICE_AUTO, 1);
  CHECK(a && a->be->device_memory, "device \"auto\" uses the available device");
  /* its host mirrors 64-byte aligned, as the CPU's parameters are */
  char gerr[NN_ERR_LEN];
  const float *mirror_w = a ? nn_model_weights(a) : NULL;
  const float *mirror_g = a && nn_model_zero_grads(a, gerr) == NN_OK ? nn_model_grads(a) : NULL;
  CHECK(mirror_w && mirror_g && ((uintptr_t)mirror_w & 63) == 0 && ((uintptr_t)mirror_g & 63) == 0,
        "a device model's host mirrors of the parameters and gradients are 64-byte aligned "
        "(%p, %p)",
        (const void *)mirror_w, (const void *)mirror_g);
  nn_model_free(a);

  /* a child forked after the device started: CUDA cannot run there, so "auto" is the CPU and
   * "cuda" an error that says why (the exit status carries the child's answers) */
  fflush(stdout);
  pid_t child = fork();
  if (child == 0) {
    const nn_backend *be = NULL;
    char e[NN_ERR_LEN] = "", status[512];
    int bits = 0;
    bits |= (nn_backend_for_device(NN_DEVICE_AUTO, &be, e) == NN_OK && !be->device_memory) << 0;
    bits |= (nn_backend_for_device(NN_DEVICE_CUDA, &be, e) == NN_ERROR &&
             strstr(e, "forked from one that had started the GPU"))
            << 1;
    bits |= (strstr(nn_backend_cuda_status(status, sizeof status), "not usable") != NULL) << 2;
    nn_model *c = make_model("{}", NN_DEVICE_AUTO, 1);
    bits |= (c && !c->be->device_memory) << 3;
    nn_model_free(c);
    _exit(bits);
  }
  int wstatus = 0;
  CHECK(child > 0 && waitpid(child, &wstatus, 0) == child && WIFEXITED(wstatus),
        "the forked child ran");
  int bits = WIFEXITED(wstatus) ? WEXITSTATUS(wstatus) : 0;
  CHECK(bits & 1, "in a forked child, device \"auto\" is the CPU");
  CHECK(bits & 2, "in a forked child, device \"cuda\" is an error naming the fork");
  CHECK(bits & 4, "in a forked child, attn_version's cuda part says it is not usable");
  CHECK(bits & 8, "in a forked child, a model of device \"auto\" is made on the CPU");
  const nn_backend *parent_be = NULL;
  char perr[NN_ERR_LEN];
  CHECK(nn_backend_for_device(NN_DEVICE_AUTO, &parent_be, perr) == NN_OK &&
            parent_be->device_memory,
        "the parent still uses the device");

  static const char *configs[] = {
      "{\"cell\":\"rnn\",\"attention\":\"linear\",\"embed_dim\":8,\"hidden\":6,\"fc_hidden\":5,"
      "\"dropout\":0.3}",
      "{\"cell\":\"gru\",\"attention\":\"additive\",\"bidirectional\":1,\"embed_dim\":8,\"hidden\":"
      "6,\"fc_hidden\":5,\"dropout\":0}",
      "{\"cell\":\"lstm\",\"attention\":\"self\",\"bidirectional\":1,\"embed_dim\":8,\"hidden\":6,"
      "\"fc_hidden\":5,\"dropout\":0.2}",
      "{\"cell\":\"lstm\",\"attention\":\"linear\",\"layers\":2,\"bidirectional\":1,\"embed_dim\":"
      "7,\"hidden\":5,\"fc_hidden\":0,\"dropout\":0.1}",
      "{\"cell\":\"gru\",\"attention\":\"self\",\"layers\":2,\"embed_dim\":6,\"hidden\":9,\"fc_"
      "hidden\":4,\"dropout\":0}",
      "{\"cell\":\"rnn\",\"attention\":\"additive\",\"layers\":2,\"bidirectional\":1,\"embed_dim\":"
      "5,\"hidden\":4,\"fc_hidden\":0,\"dropout\":0.5}",
      "{\"cell\":\"gru\",\"attention\":\"dot\",\"bidirectional\":1,\"embed_dim\":8,\"hidden\":6,"
      "\"fc_hidden\":5,\"dropout\":0.2}",
  };
  for (size_t i = 0; i < sizeof configs / sizeof *configs; i++) {
    int before = check_failures;
    check_config(configs[i]);
    printf("%-140s %s\n", configs[i], check_failures > before ? "FAILED" : "bit-identical");
  }

  make_texts();
  check_training("{\"cell\":\"gru\",\"bidirectional\":1,\"attention\":\"additive\",\"embed_dim\":8,"
                 "\"hidden\":8,\"fc_hidden\":6,\"dropout\":0.2,\"batch_size\":32,\"epochs\":3,"
                 "\"threads\":1,\"val_fraction\":0.2}",
                 1);
  /* no dropouts in the sharded case: each CPU shard of 32 rows draws its own dropout stream,
   * the device's one shard another */
  check_training("{\"cell\":\"lstm\",\"attention\":\"self\",\"embed_dim\":8,\"hidden\":8,"
                 "\"fc_hidden\":6,\"dropout\":0,\"batch_size\":64,\"epochs\":3,\"threads\":2,"
                 "\"val_fraction\":0.2,\"embed_dropout\":0,\"word_dropout\":0}",
                 0);
  check_choosing();
  check_errors(fail_after);
  long left = live();
  CHECK(left == 0, "%ld device allocations left after everything was freed", left);
  printf("device allocations left: %ld\n", left);
  return check_finish("test_device_plumbing");
}
