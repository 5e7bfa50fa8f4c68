/* attn_viz.c -- SVG visualisations of attention (to be written; this stub registers nothing).
 *
 * Register functions here with attn_create_function(db, conn, ...) so that they get the
 * connection's state as user data, and look models up with attn_model_get (attn_ext.h).
 */
#include "attn_ext.h"

int attn_viz_register(sqlite3 *db, attn_conn *conn) {
  (void)db;
  (void)conn;
  return SQLITE_OK;
}
