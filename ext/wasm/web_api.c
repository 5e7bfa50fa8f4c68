/* web_api.c -- the JavaScript-facing entry points of attnext's browser build (make PLATFORM=wasm
 * web): one in-memory SQLite database with attnext registered, SQL in, rows out as JSON text.
 *
 *   const m = await createAttnext();                     // build/wasm/web/attnext-web.js
 *   m.ccall('attnext_web_open', 'number', [], []);        // 0 = SQLITE_OK
 *   const out = m.ccall('attnext_web_exec', 'string', ['string', 'string'],
 *                       ["SELECT attn_predict('news', ?1) AS label", '["Okafor scores twice"]']);
 *   JSON.parse(out)   // {"columns":["label"],"rows":[["Sports"]]}   or {"error":"..."}
 *
 * A browser has no file system to hand SQLite and no shell: the page keeps its rows in the one
 * in-memory database this file opens, and every statement goes through attnext_web_exec.
 * Parameters come as a JSON array (null, numbers and strings bind as such, arrays and objects as
 * their JSON text), so that the page never splices a user's text into SQL. Compiled with
 * sqlite3.h (not sqlite3ext.h), as shell_init.c: this file is part of the program.
 */
#include <math.h>
#include <sqlite3.h>
#include <string.h>

int sqlite3_attnext_init(sqlite3 *db, char **pzErrMsg, const sqlite3_api_routines *pApi);

static sqlite3 *web_db;
static char *web_result; /* the last answer, owned here until the next call */

/* Opens (again: the old database is dropped) the in-memory database. Returns an SQLite code. */
int attnext_web_open(void) {
  if (web_db) sqlite3_close_v2(web_db);
  web_db = NULL;
  sqlite3_initialize();
  sqlite3_auto_extension((void (*)(void))sqlite3_attnext_init);
  return sqlite3_open(":memory:", &web_db);
}

/* s += text as a JSON string */
static void json_string(sqlite3_str *s, const char *text) {
  sqlite3_str_appendchar(s, 1, '"');
  for (const unsigned char *p = (const unsigned char *)text; *p; p++) {
    switch (*p) {
    case '"': sqlite3_str_appendall(s, "\\\""); break;
    case '\\': sqlite3_str_appendall(s, "\\\\"); break;
    case '\n': sqlite3_str_appendall(s, "\\n"); break;
    case '\r': sqlite3_str_appendall(s, "\\r"); break;
    case '\t': sqlite3_str_appendall(s, "\\t"); break;
    default:
      if (*p < 0x20) sqlite3_str_appendf(s, "\\u%04x", *p);
      else sqlite3_str_appendchar(s, 1, (char)*p);
    }
  }
  sqlite3_str_appendchar(s, 1, '"');
}

/* s += one column of the current row: numbers as numbers (an infinity as null), NULL as
 * null, a BLOB as its byte count (the page shows no binary data) */
static void json_column(sqlite3_str *s, sqlite3_stmt *stmt, int i) {
  switch (sqlite3_column_type(stmt, i)) {
  case SQLITE_NULL: sqlite3_str_appendall(s, "null"); break;
  case SQLITE_INTEGER: sqlite3_str_appendf(s, "%lld", sqlite3_column_int64(stmt, i)); break;
  case SQLITE_FLOAT: {
    double v = sqlite3_column_double(stmt, i);
    if (isfinite(v)) sqlite3_str_appendf(s, "%!.17g", v);
    else sqlite3_str_appendall(s, "null"); /* JSON has no infinity */
    break;
  }
  case SQLITE_BLOB:
    sqlite3_str_appendf(s, "{\"blob_bytes\":%d}", sqlite3_column_bytes(stmt, i));
    break;
  default: json_string(s, (const char *)sqlite3_column_text(stmt, i));
  }
}

/* Binds params (a JSON array, or NULL/empty for none) to stmt's ?1..?N: each element is read
 * by SQLite's own JSON functions, so that its type survives. Returns an SQLite code, the
 * message in *err. */
static int bind_params(sqlite3_stmt *stmt, const char *params, char **err) {
  int n = sqlite3_bind_parameter_count(stmt), rc = SQLITE_OK;
  if (n == 0) return SQLITE_OK;
  if (!params || !*params) {
    *err = sqlite3_mprintf("attnext_web_exec: the statement has %d parameters, none given", n);
    return SQLITE_ERROR;
  }
  sqlite3_stmt *get = NULL;
  rc = sqlite3_prepare_v2(web_db,
                          "SELECT CASE WHEN json_type(?1, ?2) IN ('array', 'object') "
                          "THEN json_extract(?1, ?2) ELSE ?1 ->> ?2 END, json_array_length(?1)",
                          -1, &get, NULL);
  for (int i = 1; rc == SQLITE_OK && i <= n; i++) {
    char path[32];
    sqlite3_snprintf(sizeof path, path, "$[%d]", i - 1);
    sqlite3_bind_text(get, 1, params, -1, SQLITE_STATIC);
    sqlite3_bind_text(get, 2, path, -1, SQLITE_TRANSIENT);
    if (sqlite3_step(get) != SQLITE_ROW) {
      *err = sqlite3_mprintf("attnext_web_exec: the parameters must be a JSON array: %s",
                             sqlite3_errmsg(web_db));
      rc = SQLITE_ERROR;
    } else if (sqlite3_column_int(get, 1) < n) {
      *err = sqlite3_mprintf("attnext_web_exec: the statement has %d parameters, %d given", n,
                             sqlite3_column_int(get, 1));
      rc = SQLITE_ERROR;
    } else {
      rc = sqlite3_bind_value(stmt, i, sqlite3_column_value(get, 0));
    }
    sqlite3_reset(get);
  }
  if (rc != SQLITE_OK && !*err) *err = sqlite3_mprintf("%s", sqlite3_errmsg(web_db));
  sqlite3_finalize(get);
  return rc;
}

/* Runs every statement of sql (the first one with params bound) and returns a JSON object:
 * {"columns":[...],"rows":[[...],...]} of the last statement that has columns, or
 * {"error":"..."} at the first error (the statements before it stay done). The text belongs to
 * this file until the next call. */
const char *attnext_web_exec(const char *sql, const char *params) {
  sqlite3_str *s = sqlite3_str_new(NULL);
  sqlite3_str *out = NULL; /* the last result with columns */
  char *err = NULL;
  const char *tail = sql;
  int first = 1;
  if (!web_db) err = sqlite3_mprintf("attnext_web_exec: call attnext_web_open first");
  while (!err && tail && *tail) {
    sqlite3_stmt *stmt = NULL;
    if (sqlite3_prepare_v2(web_db, tail, -1, &stmt, &tail) != SQLITE_OK) {
      err = sqlite3_mprintf("%s", sqlite3_errmsg(web_db));
      break;
    }
    if (!stmt) continue; /* blanks or a comment */
    if (first && bind_params(stmt, params, &err) != SQLITE_OK) {
      sqlite3_finalize(stmt);
      break;
    }
    first = 0;
    int ncol = sqlite3_column_count(stmt);
    sqlite3_str *rows = ncol ? sqlite3_str_new(NULL) : NULL;
    if (rows) {
      sqlite3_str_appendall(rows, "{\"columns\":[");
      for (int i = 0; i < ncol; i++) {
        if (i) sqlite3_str_appendchar(rows, 1, ',');
        json_string(rows, sqlite3_column_name(stmt, i));
      }
      sqlite3_str_appendall(rows, "],\"rows\":[");
    }
    int rc, nrow = 0;
    while ((rc = sqlite3_step(stmt)) == SQLITE_ROW) {
      if (!rows) continue;
      sqlite3_str_appendall(rows, nrow++ ? ",[" : "[");
      for (int i = 0; i < ncol; i++) {
        if (i) sqlite3_str_appendchar(rows, 1, ',');
        json_column(rows, stmt, i);
      }
      sqlite3_str_appendchar(rows, 1, ']');
    }
    if (rc != SQLITE_DONE) err = sqlite3_mprintf("%s", sqlite3_errmsg(web_db));
    sqlite3_finalize(stmt);
    if (rows) {
      sqlite3_str_appendall(rows, "]}");
      if (out) sqlite3_free(sqlite3_str_finish(out));
      out = rows;
    }
  }
  if (err) {
    sqlite3_str_appendall(s, "{\"error\":");
    json_string(s, err);
    sqlite3_str_appendchar(s, 1, '}');
    sqlite3_free(err);
  } else if (out) {
    char *text = sqlite3_str_value(out);
    sqlite3_str_appendall(s, text ? text : "{\"columns\":[],\"rows\":[]}");
  } else {
    sqlite3_str_appendall(s, "{\"columns\":[],\"rows\":[]}");
  }
  if (out) sqlite3_free(sqlite3_str_finish(out));
  sqlite3_free(web_result);
  web_result = sqlite3_str_finish(s);
  return web_result ? web_result : "{\"error\":\"attnext_web_exec: out of memory\"}";
}
