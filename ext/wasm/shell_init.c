/* shell_init.c -- attnext linked into SQLite's shell for WebAssembly (make PLATFORM=wasm): the
 * shell's start-up hook registers the extension on every connection, and `.load ./attnext`
 * stays harmless.
 *
 *   $ build/wasm/sqlite3 demo.db          (node runs build/wasm/sqlite3.js)
 *   sqlite> .load ./attnext               -- succeeds, changes nothing: already registered
 *   sqlite> SELECT attn_version();
 *   -- attnext 0.2.0; backends: cpu (generic kernels; own GEMM, no BLAS); cuda: not available
 *   -- (WebAssembly)
 *
 * WebAssembly has no shared libraries (without Emscripten's dynamic linking, dlopen aborts the
 * program), so attnext is part of the shell and sqlite3_auto_extension puts its functions on
 * each connection as it opens. Scripts written for the native shell say `.load ./attnext`; here
 * SQLite's calls to dlopen, dlsym, dlclose and dlerror are renamed to the functions below when
 * sqlite3.c is compiled (-Ddlopen=attnext_wasm_dlopen ..., see the Makefile): a path naming
 * attnext resolves to an entry point that does nothing, since the extension is already there,
 * and any other path fails with a message, as a missing library does. Compiled with sqlite3.h
 * (not sqlite3ext.h): this file is part of the program, not of the extension.
 */
#include <sqlite3.h>
#include <stdio.h>
#include <string.h>

int sqlite3_attnext_init(sqlite3 *db, char **pzErrMsg, const sqlite3_api_routines *pApi);

/* SQLITE_SHELL_INIT_PROC: called by the shell's main before it opens a database */
void attnext_wasm_shell_init(void) {
  sqlite3_initialize();
  sqlite3_auto_extension((void (*)(void))sqlite3_attnext_init);
}

static int attnext_already_registered(sqlite3 *db, char **pzErrMsg,
                                      const sqlite3_api_routines *pApi) {
  (void)db;
  (void)pzErrMsg;
  (void)pApi;
  return SQLITE_OK;
}

static char dl_error[300];
static int dl_handle; /* the one library there is: its address is the handle */

/* path names attnext when its last component, up to the first '.', is "attnext" (./attnext,
 * attnext.so, /x/attnext.wasm) */
static int names_attnext(const char *path) {
  const char *base = strrchr(path, '/');
  base = base ? base + 1 : path;
  return strncmp(base, "attnext", 7) == 0 && (base[7] == 0 || base[7] == '.');
}

void *attnext_wasm_dlopen(const char *path, int flags) {
  (void)flags;
  if (path && names_attnext(path)) return &dl_handle;
  snprintf(dl_error, sizeof dl_error,
           "%s: cannot open (this WebAssembly build loads no libraries; attnext is built in)",
           path ? path : "(null)");
  return NULL;
}

void *attnext_wasm_dlsym(void *handle, const char *name) {
  if (handle == &dl_handle &&
      (strcmp(name, "sqlite3_attnext_init") == 0 || strcmp(name, "sqlite3_extension_init") == 0))
    return (void *)attnext_already_registered;
  snprintf(dl_error, sizeof dl_error, "%s: no such symbol", name);
  return NULL;
}

int attnext_wasm_dlclose(void *handle) {
  (void)handle;
  return 0;
}

char *attnext_wasm_dlerror(void) { return dl_error[0] ? dl_error : NULL; }
