/* test_allocator.c -- the engine's allocations go through the caller's nn_allocator (nn.h), the
 * way ext/ points them at sqlite3_malloc64.
 *
 * The allocator here hands out blocks 8 bytes past malloc's (8-byte aligned, as SQLite's are),
 * counts them and can fail the Nth allocation (and, "persistent", every later one). For a
 * training (nn_trainer_create, its epochs, the model taken, its metrics JSON, nn_model_save),
 * a model load (nn_model_load_ex), a forward on a workspace, and the JSON and options parsers:
 *   - a clean run allocates through the hook only (blocks live while the objects do, none after),
 *     and the CPU backend's buffers are 64-byte aligned on top of it;
 *   - with allocation N failing, for every N, each call returns NN_OK or NN_NOMEM with an
 *     "out of memory" message (never another status, never a crash), and once everything is
 *     freed no block is left (ASan under make test-asan finds a block freed by the wrong
 *     allocator: free() of a pointer 8 bytes into a malloc'd block).
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "json.h"
#include "nn_internal.h"

/* ------------------------------------------------------------------ the counting allocator */

typedef struct counting {
  pthread_mutex_t lock; /* the trainer's pool threads allocate too */
  long count, fail_at;  /* fail_at 0: never */
  int persistent;
  long live, failed;
} counting;

static int counting_fails(counting *c) {
  c->count++;
  if (c->fail_at > 0 && (c->count == c->fail_at || (c->persistent && c->count > c->fail_at))) {
    c->failed++;
    return 1;
  }
  return 0;
}

static void *counting_alloc(void *ctx, size_t n) {
  counting *c = ctx;
  pthread_mutex_lock(&c->lock);
  unsigned char *p = counting_fails(c) ? NULL : malloc(n + 8);
  if (p) c->live++;
  pthread_mutex_unlock(&c->lock);
  return p ? p + 8 : NULL; /* 8-byte aligned, not 16: as sqlite3_malloc */
}
static void *counting_resize(void *ctx, void *p, size_t n) {
  counting *c = ctx;
  pthread_mutex_lock(&c->lock);
  unsigned char *q = NULL;
  if (!counting_fails(c)) {
    q = realloc(p ? (unsigned char *)p - 8 : NULL, n + 8);
    if (q && !p) c->live++;
  }
  pthread_mutex_unlock(&c->lock);
  return q ? q + 8 : NULL;
}
static void counting_release(void *ctx, void *p) {
  counting *c = ctx;
  pthread_mutex_lock(&c->lock);
  c->live--;
  free((unsigned char *)p - 8);
  pthread_mutex_unlock(&c->lock);
}

static counting g_counting = {PTHREAD_MUTEX_INITIALIZER, 0, 0, 0, 0, 0};
static const nn_allocator g_mem = {counting_alloc, counting_resize, counting_release, &g_counting};

static void arm(long fail_at, int persistent) {
  g_counting.count = g_counting.failed = 0;
  g_counting.fail_at = fail_at;
  g_counting.persistent = persistent;
}

/* ------------------------------------------------------------------ the work */

#define ROWS 48
static const char *texts[ROWS], *labels[ROWS];

static void make_rows(void) {
  static char buf[ROWS][64];
  static const char *words[3][3] = {
      {"goal", "match", "team"}, {"chip", "phone", "cloud"}, {"bank", "stocks", "bond"}};
  static const char *names[3] = {"sports", "tech", "money"};
  for (int i = 0; i < ROWS; i++) {
    int c = i % 3;
    snprintf(buf[i], sizeof buf[i], "%s %s and %s", words[c][i % 3], words[c][(i / 3) % 3],
             i % 5 ? "the" : "a");
    texts[i] = buf[i];
    labels[i] = names[c];
  }
}

static nn_config small_config(void) {
  nn_config cfg;
  nn_config_default(&cfg);
  char err[NN_ERR_LEN];
  int rc = nn_config_parse_json(&cfg,
                                "{\"recipe\":\"lesson\",\"epochs\":2,\"hidden\":8,\"embed_dim\":8,"
                                "\"fc_hidden\":8,\"vocab_size\":40,\"progress\":false,"
                                "\"batch_size\":8,\"threads\":2}",
                                NULL, err);
  CHECK(rc == NN_OK, "config: %s", err);
  return cfg;
}

/* A status the engine may give when memory runs out: NN_OK, or NN_NOMEM saying so. */
static int oom_or_ok(int rc, const char *err, const char *what, long n) {
  if (rc == NN_OK) return 1;
  CHECK(rc == NN_NOMEM && strstr(err, "out of memory"),
        "%s with allocation %ld failing: status %d, message '%s'", what, n, rc, err);
  return 0;
}

static unsigned char *g_blob; /* a saved model (C library memory) */
static size_t g_blob_len;

/* Train, take the model, write its metrics and BLOB, free everything. Returns 1 when all of it
 * succeeded. keep: copy the BLOB to g_blob. */
static int train_once(long n, int keep) {
  nn_config cfg = small_config();
  char err[NN_ERR_LEN] = "";
  nn_trainer_args args = {.cfg = &cfg, .texts = texts, .labels = labels, .n = ROWS, .mem = &g_mem};
  nn_trainer *tr = NULL;
  nn_model *model = NULL;
  int ok = 0;
  if (!oom_or_ok(nn_trainer_create(&tr, &args, err), err, "nn_trainer_create", n)) goto done;
  CHECK(n > 0 || g_counting.live > 0, "a trainer's memory is the allocator's (%ld blocks)",
        g_counting.live);
  for (;;) {
    nn_epoch_stats s;
    int rc = nn_trainer_epoch(tr, &s, NULL, NULL, err);
    if (rc == NN_DONE) break;
    if (!oom_or_ok(rc, err, "nn_trainer_epoch", n)) goto done;
  }
  char *json = nn_trainer_metrics_json(tr);
  if (!json) goto done;
  g_mem.release(g_mem.ctx, json);
  if (!oom_or_ok(nn_trainer_take_model(tr, &model, err), err, "nn_trainer_take_model", n))
    goto done;
  nn_trainer_free(tr);
  tr = NULL;
  if (n == 0) {
    const float *w = nn_model_weights(model);
    CHECK(((uintptr_t)w & 63) == 0, "the parameters are 64-byte aligned (%p)", (const void *)w);
  }
  unsigned char *blob = NULL;
  size_t len = 0;
  if (!oom_or_ok(nn_model_save(model, &blob, &len, err), err, "nn_model_save", n)) goto done;
  if (keep) {
    g_blob = malloc(len);
    memcpy(g_blob, blob, len);
    g_blob_len = len;
  }
  g_mem.release(g_mem.ctx, blob); /* the model's allocator's */
  ok = 1;
done:
  nn_trainer_free(tr);
  nn_model_free(model);
  return ok;
}

static int train_work(long n) { return train_once(n, 0); }

/* Load g_blob, predict two rows on a workspace, free. */
static int load_once(long n) {
  char err[NN_ERR_LEN] = "";
  nn_model *model = NULL;
  nn_workspace *ws = NULL;
  int ok = 0;
  int rc = nn_model_load_ex(&model, g_blob, g_blob_len, NULL, NULL, &g_mem, err);
  if (!oom_or_ok(rc, err, "nn_model_load_ex", n)) {
    CHECK(!model, "a failed load returns no model");
    goto done;
  }
  if (!oom_or_ok(nn_workspace_create(&ws, &g_mem, err), err, "nn_workspace_create", n)) goto done;
  int tokens[2 * 4] = {2, 3, 4, 0, 5, 1, 0, 0}, lengths[2] = {3, 2};
  nn_batch batch = {tokens, lengths, NULL, 2, 4};
  float logits[2 * 3];
  rc = nn_model_forward(model, ws, &batch, 0, NULL, logits, NULL, err);
  if (!oom_or_ok(rc, err, "nn_model_forward", n)) goto done;
  ok = 1;
done:
  nn_workspace_free(ws);
  nn_model_free(model);
  return ok;
}

/* The JSON reader and writer and the options parser. */
static int json_once(long n) {
  char err[NN_ERR_LEN] = "";
  const char *text = "{\"a\":[1,2.5,\"x\\u00e9\"],\"b\":{\"c\":null,\"d\":true},\"e\":\"long "
                     "enough to be its own block\"}";
  nn_json *doc = NULL;
  int ok = 0;
  if (!oom_or_ok(nn_json_parse(&doc, text, strlen(text), &g_mem, err), err, "nn_json_parse", n))
    goto done;
  nn_strbuf sb;
  nn_strbuf_init(&sb, &g_mem);
  nn_strbuf_append_json_compact(&sb, doc, text);
  char *out = nn_strbuf_take(&sb);
  if (!out) goto done;
  CHECK(strcmp(out, text) == 0, "compact JSON '%s'", out);
  g_mem.release(g_mem.ctx, out);
  nn_options o;
  static const char *const keys[] = {"from"}; /* a caller's own key, as ext/'s */
  int rc = nn_options_parse(&o, "{\"hidden\":12,\"from\":\"m\"}", keys, 1, &g_mem, err);
  if (!oom_or_ok(rc, err, "nn_options_parse", n)) goto done;
  nn_options_free(&o);
  nn_config cfg;
  nn_config_default(&cfg);
  char *cj = nn_config_to_json(&cfg, &g_mem);
  if (!cj) goto done;
  g_mem.release(g_mem.ctx, cj);
  ok = 1;
done:
  nn_json_free(doc);
  return ok;
}

typedef int (*work_fn)(long n);

/* The clean run's allocations, then every N (stride: at most about `runs` of them) failing,
 * once alone and once with every later one. */
static void inject(const char *name, work_fn work, long runs) {
  arm(0, 0);
  CHECK(work(0), "%s: the clean run succeeds", name);
  long total = g_counting.count;
  CHECK(total > 0 && g_counting.live == 0,
        "%s: %ld allocations through the hook, %ld blocks left after", name, total,
        g_counting.live);
  long stride = total > runs ? total / runs + 1 : 1, tried = 0, failed = 0, leaks = 0;
  for (int persistent = 0; persistent < 2; persistent++)
    for (long n = 1; n <= total; n += stride) {
      arm(n, persistent);
      if (!work(n)) failed++;
      tried++;
      if (g_counting.live != 0) {
        leaks++;
        fprintf(stderr, "%s: allocation %ld failing%s left %ld blocks\n", name, n,
                persistent ? " (and later)" : "", g_counting.live);
        g_counting.live = 0;
      }
    }
  arm(0, 0);
  printf("%-10s %5ld allocations; %ld runs with one failing: %ld failed, %ld leaked\n", name, total,
         tried, failed, leaks);
  CHECK(failed > 0, "%s: no injected failure made the work fail", name);
  CHECK(leaks == 0, "%s: %ld runs left blocks allocated", name, leaks);
}

int main(void) {
  make_rows();
  arm(0, 0);
  CHECK(train_once(0, 1) && g_blob, "a training through the hook");
  CHECK(g_counting.live == 0, "training: %ld blocks left", g_counting.live);
  inject("training", train_work, 400);
  inject("load", load_once, 400);
  inject("json", json_once, 200);
  free(g_blob);
  return check_finish("test_allocator");
}
