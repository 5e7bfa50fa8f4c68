/* backend_load.c -- picks a model's compute backend from its "device" option and loads the CUDA
 * backend lazily.
 *
 * The CUDA backend is a separate shared object, attnext_cuda.so (engine/backend_cuda.cu, built
 * only where nvcc is found), so that attnext.so itself never depends on the CUDA runtime: it
 * loads and works on any machine, and uses the GPU only where the library, the runtime and a
 * device are all present. The library is looked for once per process, at the first model whose
 * device is "auto" or "cuda":
 *   1. $ATTNEXT_CUDA_LIB, when set (a path; for tests and unusual installs)
 *   2. attnext_cuda.so in the directory of the object holding this code (attnext.so), via dladdr
 *   3. attnext_cuda.so on the dynamic linker's default search path
 * Its exported attnext_cuda_backend_abi() must report this build's NN_BACKEND_ABI and table size
 * (a stale library is refused, never called), then attnext_cuda_backend() says whether a device
 * is usable. The outcome (the
 * backend, or the reason there is none) is process-wide state written once under pthread_once:
 * it describes the machine, not any model, so it is the one exception to "no global state".
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifndef _WIN32
#include <unistd.h> /* getpid */
#endif

#include "backend.h"
#include "compat.h"
#include "nn_internal.h"

#ifdef _WIN32
#define CUDA_LIB_NAME "attnext_cuda.dll"
#else
#define CUDA_LIB_NAME "attnext_cuda.so"
#endif

static pthread_once_t cuda_once = PTHREAD_ONCE_INIT;
static const nn_backend *cuda_backend; /* NULL when unavailable */
static char cuda_why[400];             /* why not, or the device's description */
#ifndef _WIN32
static long cuda_pid; /* the process that started the device */
#endif

/* CUDA does not survive fork(): a child of a process that started the device gets an
 * initialisation error from every call. Such a child (a prefork server, multiprocessing's
 * "fork") computes on the CPU instead. */
static int forked_from_cuda(void) {
#ifdef _WIN32
  return 0;
#else
  return cuda_backend && (long)getpid() != cuda_pid;
#endif
}

/* Try one path; 1 when the library loaded (whatever its entry then said). */
static int try_library(const char *path, char *load_err, size_t len) {
  void *lib = nn_dl_open(path, load_err, len);
  if (!lib) return 0;
  /* The ABI first: a table of another layout would be called at the wrong offsets. */
  nn_backend_cuda_abi_fn abi =
      (nn_backend_cuda_abi_fn)(uintptr_t)nn_dl_sym(lib, NN_BACKEND_CUDA_ABI);
  size_t table_size = 0;
  unsigned number = abi ? abi(&table_size) : 0;
  if (!abi || number != NN_BACKEND_ABI || table_size != sizeof(nn_backend)) {
    char found[120];
    if (abi)
      snprintf(found, sizeof found, "backend ABI %u, table of %zu bytes", number, table_size);
    else snprintf(found, sizeof found, "no %s: built before ABI numbers", NN_BACKEND_CUDA_ABI);
    snprintf(cuda_why, sizeof cuda_why,
             "not available (stale %s refused: %s; this attnext.so needs backend ABI %u, table "
             "of %zu bytes; rebuild it from the same sources: make)",
             path, found, (unsigned)NN_BACKEND_ABI, sizeof(nn_backend));
    return 1; /* kept loaded, as below: its constructors ran */
  }
  nn_backend_cuda_entry entry =
      (nn_backend_cuda_entry)(uintptr_t)nn_dl_sym(lib, NN_BACKEND_CUDA_ENTRY);
  if (!entry) {
    snprintf(cuda_why, sizeof cuda_why, "not available (%s has no %s)", path,
             NN_BACKEND_CUDA_ENTRY);
    nn_dl_close(lib);
    return 1;
  }
  char why[300] = "";
  cuda_backend = entry(why, sizeof why);
  if (!cuda_backend) {
    snprintf(cuda_why, sizeof cuda_why, "built, no device (%s)", why[0] ? why : "unknown reason");
    return 1; /* kept loaded: the CUDA runtime does not like being unloaded */
  }
#ifndef _WIN32
  cuda_pid = (long)getpid();
#endif
  char desc[300] = "";
  if (cuda_backend->describe) cuda_backend->describe(desc, sizeof desc);
  snprintf(cuda_why, sizeof cuda_why, "%s", desc[0] ? desc : "available");
  return 1;
}

static void cuda_load(void) {
#if defined(__EMSCRIPTEN__)
  /* no shared libraries to load, and no GPU reachable through CUDA from WebAssembly */
  snprintf(cuda_why, sizeof cuda_why, "not available (WebAssembly)");
  return;
#endif
  char load_err[300] = "", path[4096];
  const char *env = getenv("ATTNEXT_CUDA_LIB");
  if (env && env[0]) {
    if (!try_library(env, load_err, sizeof load_err))
      snprintf(cuda_why, sizeof cuda_why, "not available (ATTNEXT_CUDA_LIB: %s)", load_err);
    return;
  }
  char self[4096];
  if (nn_dl_path_of((const void *)(uintptr_t)nn_backend_for_device, self, sizeof self) == 0) {
    const char *slash = strrchr(self, '/');
#ifdef _WIN32 /* a Windows path's separator */
    const char *back = strrchr(self, '\\');
    if (back && (!slash || back > slash)) slash = back;
#endif
    int dir_len = slash ? (int)(slash - self) : 0;
    snprintf(path, sizeof path, "%.*s%s" CUDA_LIB_NAME, dir_len, self, slash ? "/" : "./");
    char first_err[300];
    if (try_library(path, first_err, sizeof first_err)) return;
    /* a library that exists but does not load (e.g. no libcudart) says more than "not found" */
    if (!strstr(first_err, CUDA_LIB_NAME ": cannot open")) {
      snprintf(cuda_why, sizeof cuda_why, "not available (%s)", first_err);
      return;
    }
  }
  if (try_library(CUDA_LIB_NAME, load_err, sizeof load_err)) return;
  snprintf(cuda_why, sizeof cuda_why, "not built or not found (%s)", load_err);
}

int nn_backend_for_device(int device, const nn_backend **out, char *err) {
  *out = nn_backend_cpu();
  if (device == NN_DEVICE_CPU) return NN_OK;
  pthread_once(&cuda_once, cuda_load);
  if (forked_from_cuda()) {
    if (device != NN_DEVICE_CUDA) return NN_OK; /* auto: the CPU */
    snprintf(err, NN_ERR_LEN,
             "device \"cuda\" requested in a process forked from one that had started the GPU, "
             "where CUDA cannot run (start the process with spawn, or use device \"auto\")");
    return NN_ERROR;
  }
  if (cuda_backend) {
    *out = cuda_backend;
    return NN_OK;
  }
  if (device == NN_DEVICE_CUDA) {
    snprintf(err, NN_ERR_LEN, "device \"cuda\" requested but no CUDA device is available (%s)",
             cuda_why);
    return NN_ERROR;
  }
  return NN_OK; /* auto: the CPU */
}

const char *nn_backend_cuda_status(char *buf, size_t len) {
  pthread_once(&cuda_once, cuda_load);
  if (forked_from_cuda())
    snprintf(buf, len, "cuda: not usable in this process (forked from one that had started %s)",
             cuda_why);
  else snprintf(buf, len, "cuda: %s", cuda_why);
  return buf;
}
