/* version.c -- what this build of the engine is: version, backends, BLAS library. */
#include <stdio.h>

#include "backend.h"
#include "nn_internal.h"

#define NN_VERSION "0.2.0"

/* OpenBLAS reports its build configuration; other BLAS libraries do not have this call. */
char *openblas_get_config(void) __attribute__((weak));
int openblas_get_num_threads(void) __attribute__((weak));

/* The CUDA part says whether attnext_cuda.so loaded and found a device (backend_load.c); asking
 * loads it, once per process. */
const char *nn_version_string(char *buf, size_t len) {
  char cuda[450];
  nn_backend_cuda_status(cuda, sizeof cuda);
#ifdef NN_BLAS_NONE /* make BLAS=none: every product on engine/gemm.c */
  snprintf(buf, len, "attnext %s; backends: cpu (%s kernels; own GEMM, no BLAS); %s", NN_VERSION,
           nn_backend_cpu_level(), cuda);
#else
  const char *blas = openblas_get_config ? openblas_get_config() : "unknown BLAS";
  int threads = openblas_get_num_threads ? openblas_get_num_threads() : 1;
  snprintf(buf, len, "attnext %s; backends: cpu (%s kernels; %s, %d BLAS threads); %s", NN_VERSION,
           nn_backend_cpu_level(), blas, threads, cuda);
#endif
  return buf;
}
