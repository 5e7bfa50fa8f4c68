/* attn_deploy.c -- the SQL functions attn_deploy, attn_import and attn_prune: which version of
 * a model predicts, a model brought in from a safetensors file, and which versions are kept.
 *
 *   SELECT attn_deploy('news', 2);        -- version 2 of 'news' predicts from now on -> 2
 *   SELECT attn_deploy('news', 'best');   -- the version of highest validation F1 -> its version
 *   SELECT attn_deploy('news', 'previous'); -- the one deployed before the current (rollback)
 *   SELECT attn_import('news', readfile('news.safetensors'));   -- new version, deployed -> 3
 *   SELECT attn_prune('news', 3);  -- keeps the 3 newest, the deployed one and 'previous' -> 12
 */
#include <stdint.h>
#include <string.h>

#include "attn_ext.h"
#include "json.h"

/* The version that attn_deploy(name, 'best') or (name, 'previous') means, into *version.
 *   best:     the highest "val_f1" of the metrics JSON (ties: the latest version); versions
 *             without it (imported: metrics NULL, or not JSON) are not candidates.
 *   previous: the largest deployed_seq among the versions not deployed now that were ever
 *             deployed (deployed_seq > 0). Twice in a row goes back and forth between two.
 * SQLITE_ERROR with *msg when there is none. */
static int attn_deploy_resolve(sqlite3 *db, const char *fn, const char *name, int best,
                               int64_t *version, char **msg) {
  sqlite3_stmt *stmt = NULL;
  sqlite3_value *chosen = NULL; /* the version picked (a copy: the statement steps on) */
  /* best: the first of the highest val_f1 in the order of the versions, latest first; the
   * metrics are read by the engine's JSON parser (a text that is not JSON is no candidate) */
  const char *sql = best ? "SELECT version, metrics FROM main.attn_models WHERE name = ?1 AND "
                           "metrics IS NOT NULL ORDER BY version DESC"
                         : "SELECT version FROM main.attn_models WHERE name = ?1 AND deployed = 0 "
                           "AND deployed_seq > 0 ORDER BY deployed_seq DESC, version DESC LIMIT 1";
  double best_f1 = 0;
  int rc = sqlite3_prepare_v2(db, sql, -1, &stmt, NULL);
  if (rc == SQLITE_OK) sqlite3_bind_text(stmt, 1, name, -1, SQLITE_STATIC);
  while (rc == SQLITE_OK && (rc = sqlite3_step(stmt)) == SQLITE_ROW) {
    if (best) {
      const char *metrics = (const char *)sqlite3_column_text(stmt, 1);
      nn_json *doc = NULL;
      char err[NN_ERR_LEN];
      int st = metrics ? nn_json_parse(&doc, metrics, (size_t)sqlite3_column_bytes(stmt, 1),
                                       &attn_mem, err)
                       : NN_NOMEM;
      if (st == NN_NOMEM) {
        rc = SQLITE_NOMEM;
        break;
      }
      const nn_json *f1 = nn_json_get(doc, "val_f1");
      int better = f1 && f1->type == NN_JSON_NUMBER && (!chosen || f1->number > best_f1);
      if (better) best_f1 = f1->number;
      nn_json_free(doc);
      if (!better) {
        rc = SQLITE_OK;
        continue;
      }
    }
    sqlite3_value_free(chosen);
    chosen = sqlite3_value_dup(sqlite3_column_value(stmt, 0));
    rc = chosen ? SQLITE_OK : SQLITE_NOMEM;
    if (!best) break;
  }
  if (rc == SQLITE_DONE || rc == SQLITE_OK) rc = chosen ? SQLITE_ROW : SQLITE_DONE;
  if (rc == SQLITE_ROW && sqlite3_value_type(chosen) != SQLITE_INTEGER) {
    /* a store edited by hand: a version such as 1.5 or 'v1' names no row attn_deploy can set */
    const char *v = (const char *)sqlite3_value_text(chosen);
    *msg = sqlite3_mprintf("%s: model '%s' has a version that is not an integer in attn_models "
                           "(%s, the one '%s' would deploy): fix or delete that row",
                           fn, name, v ? v : "NULL", best ? "best" : "previous");
    rc = SQLITE_ERROR;
  } else if (rc == SQLITE_ROW) {
    *version = sqlite3_value_int64(chosen);
    rc = SQLITE_OK;
  } else if (rc == SQLITE_DONE) {
    *msg = best ? sqlite3_mprintf("%s: model '%s' has no version with a validation F1 in its "
                                  "metrics (versions trained without a validation split, as the "
                                  "default recipe does below "
                                  "5,000 labelled rows, and imported versions have none)",
                                  fn, name)
                : sqlite3_mprintf("%s: model '%s' has no previously deployed version", fn, name);
    rc = SQLITE_ERROR;
  } else if (rc == SQLITE_NOMEM) {
    *msg = sqlite3_mprintf("%s: out of memory", fn);
  } else {
    *msg = sqlite3_mprintf("%s: %s", fn, sqlite3_errmsg(db));
    rc = SQLITE_ERROR;
  }
  sqlite3_value_free(chosen);
  sqlite3_finalize(stmt);
  return rc;
}

/* attn_deploy(name, version) -> version: make that version the one that predicts; version is
 * an integer, 'best' or 'previous' (attn_deploy_resolve). */
void attn_deploy_func(sqlite3_context *ctx, int argc, sqlite3_value **argv) {
  attn_conn *conn = sqlite3_user_data(ctx);
  sqlite3 *db = attn_conn_db(conn);
  const char *fn = "attn_deploy";
  const char *name = NULL;
  char *msg = NULL;
  sqlite3_stmt *stmt = NULL;
  int rc;
  if ((rc = attn_name_value(fn, argv[0], &name, &msg)) != SQLITE_OK) goto done;
  if ((rc = attn_conn_check_write(conn, fn, &msg)) != SQLITE_OK) goto done;
  int exists = 0;
  /* a store attnext did not write is refused before it is read */
  if ((rc = attn_store_check(db, fn, &exists, &msg)) != SQLITE_OK) goto done;
  const char *word =
      sqlite3_value_type(argv[1]) == SQLITE_TEXT ? (const char *)sqlite3_value_text(argv[1]) : NULL;
  int best = word && strcmp(word, "best") == 0, previous = word && strcmp(word, "previous") == 0;
  if (!best && !previous && sqlite3_value_numeric_type(argv[1]) != SQLITE_INTEGER) {
    msg = sqlite3_value_type(argv[1]) == SQLITE_NULL
              ? sqlite3_mprintf("%s: the version must be an integer, 'best' or 'previous', got "
                                "NULL",
                                fn)
              : sqlite3_mprintf("%s: the version must be an integer, 'best' or 'previous', got "
                                "'%s'",
                                fn, (const char *)sqlite3_value_text(argv[1]));
    rc = SQLITE_ERROR;
    goto done;
  }
  int64_t version = best || previous ? 0 : sqlite3_value_int64(argv[1]);
  if (!exists) {
    msg = sqlite3_mprintf("%s: no model named '%s'%s", fn, name, attn_conn_behind_hint(conn));
    rc = SQLITE_ERROR;
    goto done;
  }
  rc = sqlite3_prepare_v2(db,
                          "SELECT max(version = ?2), count(*) FROM main.attn_models "
                          "WHERE name = ?1",
                          -1, &stmt, NULL);
  if (rc != SQLITE_OK) {
    msg = sqlite3_mprintf("%s: %s", fn, sqlite3_errmsg(db));
    rc = SQLITE_ERROR;
    goto done;
  }
  sqlite3_bind_text(stmt, 1, name, -1, SQLITE_STATIC);
  sqlite3_bind_int64(stmt, 2, version);
  if (sqlite3_step(stmt) != SQLITE_ROW) {
    msg = sqlite3_mprintf("%s: %s", fn, sqlite3_errmsg(db));
    rc = SQLITE_ERROR;
    goto done;
  }
  int found = sqlite3_column_int(stmt, 0), count = sqlite3_column_int(stmt, 1);
  sqlite3_finalize(stmt);
  stmt = NULL;
  if (count == 0) {
    char *hint = attn_conn_suggest_name(conn, name);
    msg = sqlite3_mprintf("%s: no model named '%s'%s%s", fn, name, hint ? hint : "",
                          attn_conn_behind_hint(conn));
    sqlite3_free(hint);
    rc = SQLITE_ERROR;
    goto done;
  }
  if ((best || previous) &&
      (rc = attn_deploy_resolve(db, fn, name, best, &version, &msg)) != SQLITE_OK)
    goto done;
  if (!found && !best && !previous) {
    msg = sqlite3_mprintf("%s: model '%s' has no version %lld%s", fn, name, (long long)version,
                          attn_conn_behind_hint(conn));
    rc = SQLITE_ERROR;
    goto done;
  }
  /* One UPDATE: atomic on its own, and allowed inside a statement that writes. */
  rc = sqlite3_prepare_v2(db,
                          "UPDATE main.attn_models SET deployed = (version = ?2), "
                          "deployed_seq = CASE WHEN version = ?2 THEN (SELECT coalesce(max("
                          "deployed_seq), 0) + 1 FROM main.attn_models) ELSE deployed_seq END "
                          "WHERE name = ?1",
                          -1, &stmt, NULL);
  if (rc == SQLITE_OK) {
    sqlite3_bind_text(stmt, 1, name, -1, SQLITE_STATIC);
    sqlite3_bind_int64(stmt, 2, version);
    rc = sqlite3_step(stmt);
    if (rc == SQLITE_DONE) {
      rc = SQLITE_OK;
    } else if (sqlite3_extended_errcode(db) == SQLITE_BUSY_SNAPSHOT) {
      /* WAL: a statement of this connection reads a snapshot another connection's commit made
       * out of date; it cannot become a write until that statement ends */
      msg = sqlite3_mprintf("%s: cannot deploy: a statement of this connection is still "
                            "reading (e.g. a cursor not fetched to the end) and another "
                            "connection wrote since it began, so in WAL mode this connection "
                            "cannot write until it ends; finish or reset that statement first "
                            "(e.g. fetchall() the cursor), or deploy from another connection",
                            fn);
    } else {
      msg = sqlite3_mprintf("%s: cannot deploy: %s", fn, sqlite3_errmsg(db));
    }
  } else {
    msg = sqlite3_mprintf("%s: %s", fn, sqlite3_errmsg(db));
  }
  if (rc == SQLITE_OK) sqlite3_result_int64(ctx, version);
done:
  sqlite3_finalize(stmt);
  attn_conn_forget_deployed(conn);
  if (rc != SQLITE_OK) attn_result_error(ctx, rc, msg, fn);
  else sqlite3_free(msg);
}

/* attn_import(name, blob) -> version: validate a safetensors BLOB, store it as a new version
 * of `name` and deploy it. */
void attn_import_func(sqlite3_context *ctx, int argc, sqlite3_value **argv) {
  attn_conn *conn = sqlite3_user_data(ctx);
  const char *fn = "attn_import";
  const char *name = NULL;
  char err[NN_ERR_LEN] = "", *msg = NULL;
  nn_model *model = NULL;
  int64_t version = 0;
  int rc;
  char started_at[32];
  attn_utc_now(started_at);
  if ((rc = attn_name_value(fn, argv[0], &name, &msg)) != SQLITE_OK) goto done;
  if ((rc = attn_conn_check_write(conn, fn, &msg)) != SQLITE_OK) goto done;
  if (sqlite3_value_type(argv[1]) != SQLITE_BLOB) {
    static const char *types[] = {"", "an integer", "a real", "text", "a BLOB", "NULL"};
    msg = sqlite3_mprintf("%s: the weights must be a BLOB (a safetensors file), got %s", fn,
                          types[sqlite3_value_type(argv[1])]);
    rc = SQLITE_ERROR;
    goto done;
  }
  const unsigned char *blob = sqlite3_value_blob(argv[1]);
  static const unsigned char empty[1] = {0};
  size_t len = (size_t)sqlite3_value_bytes(argv[1]);
  attn_interrupt interrupt = {attn_conn_db(conn), NULL, 0};
  int st = nn_model_load_ex(&model, blob ? blob : empty, blob ? len : 0, attn_interrupt_check,
                            &interrupt, &attn_mem, err);
  attn_interrupt_end(&interrupt);
  if (st != NN_OK) {
    model = NULL;
    rc = attn_nn_error(st, fn, err, &msg);
    goto done;
  }
  char ended_at[32];
  attn_utc_now(ended_at);
  attn_lineage_info lineage = {"attn_import", NULL,       NULL,     NULL, NULL, NULL, NULL,
                               NULL,          started_at, ended_at, -1,   -1,   -1};
  attn_store_item item = {model, NULL, NULL, 0, 1, &lineage, 0, 0};
  rc = attn_store_save_items(conn, fn, name, &item, 1, &msg);
  version = item.version;
  if (rc == SQLITE_OK) sqlite3_result_int64(ctx, version);
done:
  nn_model_free(model);
  if (rc != SQLITE_OK) attn_result_error(ctx, rc, msg, fn);
  else sqlite3_free(msg);
}

/* attn_prune(name, keep) -> the number of versions removed: every version of `name` except the
 * `keep` newest, the deployed one and the one attn_deploy(name, 'previous') would restore, with
 * their training logs and lineage, in one savepoint. Version numbers are never given again
 * (attn_versions keeps the largest). */
void attn_prune_func(sqlite3_context *ctx, int argc, sqlite3_value **argv) {
  attn_conn *conn = sqlite3_user_data(ctx);
  sqlite3 *db = attn_conn_db(conn);
  const char *fn = "attn_prune";
  const char *name = NULL;
  char *msg = NULL;
  sqlite3_stmt *stmt = NULL;
  int rc, exists = 0;
  int64_t removed = 0, previous = -1;
  (void)argc;
  if ((rc = attn_name_value(fn, argv[0], &name, &msg)) != SQLITE_OK) goto done;
  if (sqlite3_value_numeric_type(argv[1]) != SQLITE_INTEGER || sqlite3_value_int64(argv[1]) < 0) {
    msg = sqlite3_mprintf("%s: keep must be an integer from 0 (the versions to keep besides the "
                          "deployed one and 'previous'), got %s%s%s",
                          fn, sqlite3_value_type(argv[1]) == SQLITE_TEXT ? "'" : "",
                          sqlite3_value_type(argv[1]) == SQLITE_NULL
                              ? "NULL"
                              : (const char *)sqlite3_value_text(argv[1]),
                          sqlite3_value_type(argv[1]) == SQLITE_TEXT ? "'" : "");
    rc = SQLITE_ERROR;
    goto done;
  }
  int64_t keep = sqlite3_value_int64(argv[1]);
  if ((rc = attn_conn_check_write(conn, fn, &msg)) != SQLITE_OK) goto done;
  if ((rc = attn_store_check(db, fn, &exists, &msg)) != SQLITE_OK) goto done;
  if (exists) {
    rc = sqlite3_prepare_v2(db, "SELECT count(*) FROM main.attn_models WHERE name = ?1", -1, &stmt,
                            NULL);
    if (rc == SQLITE_OK) {
      sqlite3_bind_text(stmt, 1, name, -1, SQLITE_STATIC);
      rc = sqlite3_step(stmt) == SQLITE_ROW ? SQLITE_OK : SQLITE_ERROR;
      exists = rc == SQLITE_OK && sqlite3_column_int64(stmt, 0) > 0;
    }
    sqlite3_finalize(stmt);
    stmt = NULL;
    if (rc != SQLITE_OK) {
      msg = sqlite3_mprintf("%s: %s", fn, sqlite3_errmsg(db));
      goto done;
    }
  }
  if (!exists) {
    char *hint = attn_conn_suggest_name(conn, name);
    msg = sqlite3_mprintf("%s: no model named '%s'%s%s", fn, name, hint ? hint : "",
                          attn_conn_behind_hint(conn));
    sqlite3_free(hint);
    rc = SQLITE_ERROR;
    goto done;
  }
  /* the version 'previous' would restore, when there is one */
  char *none = NULL;
  if (attn_deploy_resolve(db, fn, name, 0, &previous, &none) != SQLITE_OK) previous = -1;
  sqlite3_free(none);
  if (sqlite3_exec(db, "SAVEPOINT attn_prune", NULL, NULL, NULL) != SQLITE_OK) {
    msg = sqlite3_mprintf("%s: cannot prune: %s", fn, sqlite3_errmsg(db));
    rc = SQLITE_ERROR;
    goto done;
  }

  /* the log and lineage of the doomed versions first, while attn_models still names them */
  static const char *const deletes[3] = {
      "DELETE FROM main.attn_training_log WHERE name = ?1 AND version IN (%s)",
      "DELETE FROM main.attn_lineage WHERE name = ?1 AND version IN (%s)",
      "DELETE FROM main.attn_models WHERE name = ?1 AND version IN (%s)"};
  const char *doomed = "SELECT version FROM main.attn_models WHERE name = ?1 AND deployed = 0 "
                       "AND version <> ?3 AND version NOT IN (SELECT version FROM "
                       "main.attn_models WHERE name = ?1 ORDER BY version DESC LIMIT ?2)";
  for (int i = 0; i < 3 && rc == SQLITE_OK; i++) {
    char *sql = sqlite3_mprintf(deletes[i], doomed);
    if (!sql) {
      rc = SQLITE_NOMEM;
      break;
    }
    /* attn_lineage may be absent in a store from an older attnext: nothing to delete there */
    rc = sqlite3_prepare_v2(db, sql, -1, &stmt, NULL);
    sqlite3_free(sql);
    if (rc != SQLITE_OK && i == 1 &&
        sqlite3_table_column_metadata(db, "main", "attn_lineage", NULL, NULL, NULL, NULL, NULL,
                                      NULL) != SQLITE_OK) {
      rc = SQLITE_OK;
      continue;
    }
    if (rc == SQLITE_OK) {
      sqlite3_bind_text(stmt, 1, name, -1, SQLITE_STATIC);
      sqlite3_bind_int64(stmt, 2, keep);
      sqlite3_bind_int64(stmt, 3, previous);
      rc = sqlite3_step(stmt) == SQLITE_DONE ? SQLITE_OK : SQLITE_ERROR;
      if (i == 2 && rc == SQLITE_OK) removed = sqlite3_changes64(db);
    }
    sqlite3_finalize(stmt);
    stmt = NULL;
  }
  if (rc != SQLITE_OK) {
    if (rc == SQLITE_NOMEM) msg = sqlite3_mprintf("%s: out of memory", fn);
    else if (sqlite3_extended_errcode(db) == SQLITE_BUSY_SNAPSHOT)
      msg = sqlite3_mprintf("%s: cannot prune: a statement of this connection is still reading "
                            "(e.g. a cursor not fetched to the end) and another connection "
                            "wrote since it began; finish or reset that statement first",
                            fn);
    else msg = sqlite3_mprintf("%s: cannot prune: %s", fn, sqlite3_errmsg(db));
    sqlite3_exec(db, "ROLLBACK TO attn_prune", NULL, NULL, NULL);
    rc = SQLITE_ERROR;
  }
  sqlite3_exec(db, "RELEASE attn_prune", NULL, NULL, NULL);

  if (rc == SQLITE_OK) sqlite3_result_int64(ctx, removed);
done:

  sqlite3_finalize(stmt);
  attn_conn_forget_deployed(conn);
  if (rc != SQLITE_OK) attn_result_error(ctx, rc, msg, fn);
  else sqlite3_free(msg);
}
