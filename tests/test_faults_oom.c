/* test_faults_oom.c -- out of memory from sqlite3_malloc at every allocation of the extension's
 * work, the engine's included: an error, never a crash, no half-written model, nothing leaked.
 *
 * The harness replaces SQLite's allocator (sqlite3_config(SQLITE_CONFIG_MALLOC)) with one that
 * counts allocations and fails the Nth one, loads attnext.so ($ATTNEXT, default ./attnext) into
 * an in-memory database (a copy of one made once: the docs table, model 'm' trained in it) and,
 * for each scenario, first counts the allocations of a clean run, then runs it again with
 * allocation N failing, for every N (a stride past 640), and with allocation N and every later
 * one failing (a stride of 4 and more). After each run:
 *   - the statement either succeeded or failed with an error (no crash; ASan under test-asan);
 *   - the model store is either unchanged or holds the complete new version (model row with
 *     its training log rows), never a part of it;
 *   - after the database is closed, oom_live is back to where it started: the
 *     extension freed every sqlite3_malloc'd byte also on the error paths.
 * Scenarios: loading the extension, attn_train (also with unlabelled rows: the pretraining and
 * the self-training), attn_import, attn_deploy, attn_predict,
 * attn_probs, attn_weights, attn_classify, attn_evaluate, attn_confusion, the thresholds of
 * attn_predict and attn_classify, attn_embed, attn_curve, attn_curve_svg, attn_matrix's kinds.
 * The engine allocates through the allocator ext/ gives it (attn_mem: sqlite3_malloc64), so its
 * allocations -- models, trainers, vocabularies, workspaces, parsed JSON, saved BLOBs -- are
 * counted and failed here like ext/'s, from the pool's threads too (the counters are locked).
 * A run whose error is one of the engine's out-of-memory messages ("out of memory creating the
 * model", "safetensors: out of memory", ...) failed inside the engine: each scenario prints how
 * many did, and every scenario that reaches the engine must have some (others surface as
 * SQLite's bare "out of memory"). */
#include <dlfcn.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

/* ------------------------------------------------------------------ the failing allocator */

static sqlite3_mem_methods oom_orig;
static long oom_count = 0;   /* allocations since armed */
static long oom_fail_at = 0; /* 0: never */
static long oom_failed = 0;
static int oom_persistent = 0; /* 1: allocation N and every later one fail */

static long long oom_live = 0; /* bytes allocated and not freed (by xSize) */
/* the engine's thread pool allocates and frees from its workers too */
static pthread_mutex_t oom_lock = PTHREAD_MUTEX_INITIALIZER;

/* Whether this allocation fails (oom_lock held). */
static int oom_fails(void) {
  if (oom_fail_at != 0 && (++oom_count == oom_fail_at ||
                           (oom_persistent && oom_fail_at > 0 && oom_count > oom_fail_at))) {
    oom_failed++;
    return 1;
  }
  return 0;
}

static void *oom_malloc(int n) {
  pthread_mutex_lock(&oom_lock);
  void *p = oom_fails() ? NULL : oom_orig.xMalloc(n);
  if (p) oom_live += oom_orig.xSize(p);
  pthread_mutex_unlock(&oom_lock);
  return p;
}
static void *oom_realloc(void *p, int n) {
  pthread_mutex_lock(&oom_lock);
  void *q = NULL;
  if (!oom_fails()) {
    int old = p ? oom_orig.xSize(p) : 0;
    q = oom_orig.xRealloc(p, n);
    if (q) oom_live += oom_orig.xSize(q) - old;
  }
  pthread_mutex_unlock(&oom_lock);
  return q;
}
static void oom_free(void *p) {
  pthread_mutex_lock(&oom_lock);
  if (p) oom_live -= oom_orig.xSize(p);
  oom_orig.xFree(p);
  pthread_mutex_unlock(&oom_lock);
}
static int oom_size(void *p) { return oom_orig.xSize(p); }
static int oom_roundup(int n) { return oom_orig.xRoundup(n); }
static int oom_init(void *a) { return oom_orig.xInit(a); }
static void oom_shutdown(void *a) { oom_orig.xShutdown(a); }

/* Count allocations from now on; fail the Nth (n = 0: count only). */
static void oom_arm(long n) {
  pthread_mutex_lock(&oom_lock);
  oom_count = 0;
  oom_failed = 0;
  oom_fail_at = n > 0 ? n : -1;
  pthread_mutex_unlock(&oom_lock);
}
static long oom_disarm(void) {
  pthread_mutex_lock(&oom_lock);
  long n = oom_count;
  oom_fail_at = 0;
  pthread_mutex_unlock(&oom_lock);
  return n;
}

/* An error the engine wrote: its out-of-memory messages say what it was doing ("out of memory
 * creating the model", "... for a batch of 8 rows") or name its part ("safetensors: out of
 * memory"); ext/'s own are "attn_x: out of memory". */
static int engine_oom_message(const char *msg) {
  return strstr(msg, "out of memory ") || strstr(msg, "safetensors: out of memory") ||
         strstr(msg, "weights: out of memory") || strstr(msg, "nn_model_save: out of memory");
}

/* ------------------------------------------------------------------ helpers */

static const char *ext_path(void) {
  const char *p = getenv("ATTNEXT");
  return p && *p ? p : "./attnext";
}

static int exec(sqlite3 *db, const char *sql) {
  char *err = NULL;
  int rc = sqlite3_exec(db, sql, NULL, NULL, &err);
  if (rc != SQLITE_OK) fprintf(stderr, "setup failed: %s: %s\n", sql, err ? err : "?");
  sqlite3_free(err);
  return rc;
}

/* Run sql to the end (binding blob to ?1 when given): SQLITE_DONE or the error code. */
static int run(sqlite3 *db, const char *sql, const void *blob, int nblob, char *msg, size_t cap) {
  sqlite3_stmt *stmt = NULL;
  int rc = sqlite3_prepare_v2(db, sql, -1, &stmt, NULL);
  if (rc == SQLITE_OK && blob) rc = sqlite3_bind_blob(stmt, 1, blob, nblob, SQLITE_TRANSIENT);
  if (rc == SQLITE_OK) {
    while ((rc = sqlite3_step(stmt)) == SQLITE_ROW) {
    }
  }
  snprintf(msg, cap, "%s", sqlite3_errmsg(db));
  sqlite3_finalize(stmt);
  return rc;
}

static long long query_int(sqlite3 *db, const char *sql) {
  sqlite3_stmt *stmt = NULL;
  long long v = -1;
  if (sqlite3_prepare_v2(db, sql, -1, &stmt, NULL) == SQLITE_OK && sqlite3_step(stmt) == SQLITE_ROW)
    v = sqlite3_column_int64(stmt, 0);
  sqlite3_finalize(stmt);
  return v;
}

/* the lesson's recipe: the extension's allocations (all this test sees) are the same with any
 * recipe, and the default's subword table and GRU made each run about 2.5x longer (157 s in all) */
static const char *TINY =
    "{\"recipe\":\"lesson\",\"epochs\":2,\"patience\":5,\"hidden\":4,\"embed_dim\":4,"
    "\"fc_hidden\":4,\"vocab_size\":40,\"progress\":false}";

/* An in-memory database with the extension loaded, and nothing in it. */
static sqlite3 *open_empty(void) {
  sqlite3 *db = NULL;
  if (sqlite3_open(":memory:", &db) != SQLITE_OK) return NULL;
  sqlite3_db_config(db, SQLITE_DBCONFIG_ENABLE_LOAD_EXTENSION, 1, NULL);
  char *err = NULL;
  if (sqlite3_load_extension(db, ext_path(), NULL, &err) != SQLITE_OK) {
    fprintf(stderr, "cannot load %s: %s\n", ext_path(), err ? err : "?");
    sqlite3_free(err);
    sqlite3_close(db);
    return NULL;
  }
  return db;
}

/* A database with the extension, a docs table and (with_model) a trained model 'm', made from
 * nothing: the templates below, and the BLOB attn_import gets. */
static sqlite3 *make_db(int with_model) {
  sqlite3 *db = open_empty();
  if (!db) return NULL;
  static const char *words[3][4] = {{"goal", "match", "team", "coach"},
                                    {"chip", "phone", "cloud", "code"},
                                    {"bank", "stocks", "market", "bond"}};
  static const char *labels[3] = {"sports", "tech", "money"};
  exec(db, "CREATE TABLE docs(id INTEGER PRIMARY KEY, text, label)");
  for (int i = 0; i < 60; i++) {
    char sql[256];
    int c = i % 3;
    snprintf(sql, sizeof sql, "INSERT INTO docs(text, label) VALUES('%s %s the %s', '%s')",
             words[c][i % 4], words[c][(i / 4) % 4], words[c][(i + 1) % 4], labels[c]);
    exec(db, sql);
  }
  if (with_model) {
    char msg[512], sql[512];
    snprintf(sql, sizeof sql, "SELECT * FROM attn_train('m', 'SELECT text, label FROM docs', '%s')",
             TINY);
    if (run(db, sql, NULL, 0, msg, sizeof msg) != SQLITE_DONE) {
      fprintf(stderr, "training the setup model failed: %s\n", msg);
      sqlite3_close(db);
      return NULL;
    }
  }
  return db;
}

/* make_db(0) and make_db(1), made once: each run copies one (sqlite3_backup, into an in-memory
 * database of its own, as make_db's) rather than inserting the rows and training model 'm'
 * again, which took five sixths of the test's time. */
static sqlite3 *g_template[2];

/* A database as make_db(with_model) makes it: a fresh connection loads the extension, then the
 * template's pages are copied into it. */
static sqlite3 *open_db(int with_model) {
  sqlite3 *db = open_empty();
  if (!db) return NULL;
  sqlite3_backup *copy = sqlite3_backup_init(db, "main", g_template[with_model], "main");
  int rc = copy ? sqlite3_backup_step(copy, -1) : SQLITE_ERROR;
  if (copy) sqlite3_backup_finish(copy);
  if (rc != SQLITE_DONE) {
    fprintf(stderr, "copying the template database failed: %s\n", sqlite3_errmsg(db));
    sqlite3_close(db);
    return NULL;
  }
  return db;
}

/* The model store as a fingerprint: rows, versions, deployed flags, weights bytes, log rows. */
static void store_state(sqlite3 *db, char *out, size_t cap) {
  sqlite3_stmt *stmt = NULL;
  out[0] = 0;
  if (sqlite3_prepare_v2(db,
                         "SELECT (SELECT group_concat(name || ':' || version || ':' || deployed || "
                         "':' || length(weights), ',') FROM (SELECT * FROM attn_models ORDER BY "
                         "name, version)), (SELECT count(*) FROM attn_training_log)",
                         -1, &stmt, NULL) != SQLITE_OK) {
    snprintf(out, cap, "no store");
    return;
  }
  if (sqlite3_step(stmt) == SQLITE_ROW)
    snprintf(out, cap, "%s | log %lld",
             sqlite3_column_text(stmt, 0) ? (const char *)sqlite3_column_text(stmt, 0) : "",
             (long long)sqlite3_column_int64(stmt, 1));
  sqlite3_finalize(stmt);
}

/* ------------------------------------------------------------------ scenarios */

typedef struct scenario {
  const char *name;
  const char *sql;
  int with_model; /* the database has model 'm' (version 1) first */
  int writes;     /* success adds a version of 'n' (2 log rows when trained) */
  int engine;     /* some failures must surface as the engine's out-of-memory errors (all but
                     attn_deploy, which flips flags in the store) */
} scenario;

static unsigned char *g_blob;
static long g_after_commit = 0;  /* errors reported after the commit (the model saved whole) */
static long g_leaky_runs = 0;    /* runs that did not free every byte they allocated */
static long g_engine_errors = 0; /* runs whose error is the engine's out of memory */
static int g_nblob;

/* One run with allocation n failing (0: none). Returns the allocations counted; *ok = result
 * is consistent. */
static long run_scenario(const scenario *s, long n, int *ok, int *failed_rc) {
  long long live = oom_live;
  sqlite3 *db = open_db(s->with_model);
  *ok = 0;
  if (!db) return -1;
  char before[4096], after[4096], msg[512];
  store_state(db, before, sizeof before);
  int uses_blob = strstr(s->sql, "?1") != NULL;
  oom_arm(n);
  int rc = run(db, s->sql, uses_blob ? g_blob : NULL, g_nblob, msg, sizeof msg);
  long count = oom_disarm();
  store_state(db, after, sizeof after);
  *failed_rc = rc;
  if (rc == SQLITE_DONE) {
    /* success: the new version is complete */
    long long models = query_int(db, "SELECT count(*) FROM attn_models WHERE name = 'n'");
    long long logs = query_int(db, "SELECT count(*) FROM attn_training_log WHERE name = 'n'");
    *ok = !s->writes || (models == 1 && (strstr(s->sql, "attn_train") ? logs >= 1 : logs == 0));
    if (!*ok)
      fprintf(stderr, "%s, N=%ld: succeeded with %lld models, %lld log rows\n", s->name, n, models,
              logs);
  } else {
    int named = strstr(msg, "attn_") != NULL || strstr(msg, "out of memory") != NULL;
    if (engine_oom_message(msg)) g_engine_errors++;
    *ok = strcmp(before, after) == 0 && named;
    if (!*ok && s->writes && named) {
      /* An allocation failing inside the COMMIT (the RELEASE of the save) itself, after the
       * data is committed: the statement reports the error although the new version is saved.
       * It must then be complete. */
      long long models = query_int(db, "SELECT count(*) FROM attn_models WHERE name = 'n'");
      long long logs = query_int(db, "SELECT count(*) FROM attn_training_log WHERE name = 'n'");
      *ok = models == 1 && (strstr(s->sql, "attn_train") ? logs >= 1 : logs == 0);
      if (*ok) g_after_commit++;
    }
    if (!*ok)
      fprintf(stderr, "%s, N=%ld: error '%s' (rc %d); store before '%s' after '%s'\n", s->name, n,
              msg, rc, before, after);
  }
  if (sqlite3_get_autocommit(db) == 0) {
    fprintf(stderr, "%s, N=%ld: left a transaction open\n", s->name, n);
    *ok = 0;
  }
  sqlite3_close(db);
  if (oom_live != live) {
    fprintf(stderr, "%s, N=%ld: %lld bytes not freed after close\n", s->name, n, oom_live - live);
    g_leaky_runs++;
    *ok = 0;
  }
  return count;
}

int main(void) {
  sqlite3_config(SQLITE_CONFIG_GETMALLOC, &oom_orig);
  static sqlite3_mem_methods methods;
  methods = oom_orig;
  methods.xMalloc = oom_malloc;
  methods.xRealloc = oom_realloc;
  methods.xFree = oom_free;
  methods.xSize = oom_size;
  methods.xRoundup = oom_roundup;
  methods.xInit = oom_init;
  methods.xShutdown = oom_shutdown;
  if (sqlite3_config(SQLITE_CONFIG_MALLOC, &methods) != SQLITE_OK) {
    fprintf(stderr, "sqlite3_config(SQLITE_CONFIG_MALLOC) failed\n");
    return 1;
  }
  sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 1);
  sqlite3_initialize();
  {
    char path[1024];
    snprintf(path, sizeof path, "%s.so", ext_path());
    FILE *f = fopen(path, "rb");
    if (!f) return test_skip("the extension is not built (run make)");
    fclose(f);
  }
  /* the BLOB that attn_import gets: a model the extension saved */
  {
    sqlite3 *db = make_db(1);
    if (!db) return 1;
    sqlite3_stmt *stmt = NULL;
    sqlite3_prepare_v2(db, "SELECT weights FROM attn_models", -1, &stmt, NULL);
    if (sqlite3_step(stmt) == SQLITE_ROW) {
      g_nblob = sqlite3_column_bytes(stmt, 0);
      g_blob = malloc((size_t)g_nblob);
      memcpy(g_blob, sqlite3_column_blob(stmt, 0), (size_t)g_nblob);
    }
    sqlite3_finalize(stmt);
    sqlite3_close(db);
    if (!g_blob) return 1;
  }
  /* a warm-up open/close so that one-time allocations (e.g. dlopen state) are done */
  sqlite3_close(make_db(1));
  /* attnext.so kept loaded to the end: each run's sqlite3_load_extension then finds it mapped,
   * where it would dlopen it (and OpenBLAS) again and dlclose it at the close -- three quarters
   * of the test's time went to the dynamic loader and to mapping and unmapping, none of it in
   * the allocations injected here (the loader allocates with malloc, not SQLite's allocator).
   * Each run's connection still loads the extension and gets its own state: every scenario
   * fails allocations of the same call sites as when each run loaded it afresh, as many (but
   * two more of SQLite's page cache in attn_import, its pages laid out differently). */
  char so_path[1024];
  snprintf(so_path, sizeof so_path, "%s.so", ext_path());
  void *keep_loaded = dlopen(so_path, RTLD_NOW | RTLD_LOCAL);
  if (!keep_loaded) {
    fprintf(stderr, "cannot dlopen %s: %s\n", so_path, dlerror());
    return 1;
  }
  for (int with_model = 0; with_model < 2; with_model++) {
    g_template[with_model] = make_db(with_model);
    if (!g_template[with_model]) return 1;
  }
  sqlite3_close(open_db(1)); /* the copy's one-time allocations too */
  long long baseline = oom_live;

  char train_sql[512];
  snprintf(train_sql, sizeof train_sql,
           "SELECT * FROM attn_train('n', 'SELECT text, label FROM docs', '%s')", TINY);
  /* a third of the rows unlabelled: the pretraining, then the self-training's second round */
  char self_sql[640];
  snprintf(self_sql, sizeof self_sql,
           "SELECT * FROM attn_train('n', 'SELECT text, iif(id %% 3 = 0, NULL, label) FROM docs', "
           "'%.*s,\"pretrain_epochs\":1,\"self_training\":1}')",
           (int)strlen(TINY) - 1, TINY);
  const scenario scenarios[] = {
      {"attn_train", train_sql, 0, 1, 1},
      {"attn_train self-training", self_sql, 0, 1, 1},
      {"attn_train (second model)", train_sql, 1, 1, 1},
      {"attn_import", "SELECT attn_import('n', ?1)", 1, 1, 1},
      {"attn_deploy", "SELECT attn_deploy('m', 1)", 1, 0, 0},
      {"attn_predict", "SELECT attn_predict('m', text), attn_predict(text) FROM docs", 1, 0, 1},
      {"attn_probs", "SELECT * FROM attn_probs('m', 'goal match')", 1, 0, 1},
      {"attn_weights", "SELECT * FROM attn_weights('m', 'goal match the team')", 1, 0, 1},
      {"attn_classify", "SELECT * FROM attn_classify('m', 'SELECT id, text FROM docs')", 1, 0, 1},
      {"attn_evaluate", "SELECT * FROM attn_evaluate('m', 'SELECT text, label FROM docs')", 1, 0,
       0},
      {"attn_confusion",
       "SELECT * FROM attn_confusion('m', 'SELECT text, label || id % 2 FROM docs')", 1, 0, 1},
      {"attn_predict threshold", "SELECT attn_predict('m', text, 0.5, 'u') FROM docs", 1, 0, 1},
      {"attn_classify threshold",
       "SELECT * FROM attn_classify('m', 'SELECT id, text FROM docs', 0.5, 'u')", 1, 0, 1},
      {"attn_embed", "SELECT attn_embed('m', text) FROM docs", 1, 0, 1},
      {"attn_curve thresholds",
       "SELECT * FROM attn_curve('m', 'SELECT text, label FROM docs', '[0.2, 0.5]')", 1, 0, 1},
      {"attn_curve_svg", "SELECT attn_curve_svg('m', 'SELECT text, label FROM docs')", 1, 0, 1},
      {"attn_matrix trainable",
       "SELECT *, length(context) FROM attn_matrix('goal match', 'the team', 'model:m', "
       "'trainable', 3)",
       1, 0, 0},
  };
  for (size_t k = 0; k < sizeof scenarios / sizeof scenarios[0]; k++) {
    const scenario *s = &scenarios[k];
    int ok = 0, rc = 0;
    long total = run_scenario(s, 0, &ok, &rc);
    CHECK(total > 0 && ok && rc == SQLITE_DONE, "%s: the clean run (rc %d, %ld allocations)",
          s->name, rc, total);
    if (total <= 0) continue;
    /* 640: each run's connection checks the copied store's tables (69 allocations more than
     * when it had trained model 'm' itself), and no scenario's stride is wider for it */
    long stride = total > 640 ? total / 640 + 1 : 1, runs = 0, errors = 0, bad = 0;
    g_after_commit = g_leaky_runs = g_engine_errors = 0;
    for (int persistent = 0; persistent < 2; persistent++) {
      oom_persistent = persistent;
      for (long n = 1; n <= total; n += persistent ? 4 * stride : stride) {
        run_scenario(s, n, &ok, &rc);
        runs++;
        if (rc != SQLITE_DONE) errors++;
        if (!ok) bad++;
      }
    }
    oom_persistent = 0;
    long long used = oom_live;
    printf(
        "%-26s %5ld allocations; %ld runs failing N (and N..): %ld errors (%ld in the engine, "
        "%ld after the commit), %ld successes, %ld inconsistent, %ld leaking; in use after close "
        "%lld (baseline %lld)\n",
        s->name, total, runs, errors, g_engine_errors, g_after_commit, runs - errors, bad,
        g_leaky_runs, (long long)used, (long long)baseline);
    fflush(stdout);
    CHECK(bad == 0, "%s: %ld runs left the store inconsistent or gave an unnamed error", s->name,
          bad);
    CHECK(errors > 0, "%s: no injected failure surfaced as an error", s->name);
    if (s->engine)
      CHECK(g_engine_errors > 0,
            "%s: no injected failure reached the engine (its allocations are "
            "not SQLite's?)",
            s->name);
    CHECK(used == baseline, "%s: %lld bytes of sqlite3_malloc memory leaked", s->name,
          (long long)(used - baseline));
  }
  /* loading the extension itself with allocation N failing */
  {
    long total = 0, runs = 0, loaded = 0;
    sqlite3 *db = NULL;
    sqlite3_open(":memory:", &db);
    sqlite3_db_config(db, SQLITE_DBCONFIG_ENABLE_LOAD_EXTENSION, 1, NULL);
    oom_arm(0);
    sqlite3_load_extension(db, ext_path(), NULL, NULL);
    total = oom_disarm();
    sqlite3_close(db);
    for (long n = 1; n <= total; n++) {
      sqlite3_open(":memory:", &db);
      sqlite3_db_config(db, SQLITE_DBCONFIG_ENABLE_LOAD_EXTENSION, 1, NULL);
      char *err = NULL;
      oom_arm(n);
      int rc = sqlite3_load_extension(db, ext_path(), NULL, &err);
      oom_disarm();
      sqlite3_free(err);
      if (rc == SQLITE_OK) {
        loaded++;
        char msg[256];
        run(db, "SELECT attn_version()", NULL, 0, msg, sizeof msg);
      }
      sqlite3_close(db);
      runs++;
    }
    long long used = oom_live;
    printf("%-26s %6ld allocations; failed each of %ld: %ld loaded anyway; memory in use after "
           "close %lld (baseline %lld)\n",
           "loading the extension", total, runs, loaded, (long long)used, (long long)baseline);
    CHECK(used == baseline, "loading the extension: %lld bytes leaked",
          (long long)(used - baseline));
  }
  sqlite3_close(g_template[0]);
  sqlite3_close(g_template[1]);
  dlclose(keep_loaded);
  free(g_blob);
  return check_finish("test_faults_oom");
}
