/* pool.h -- a small persistent thread pool for the CPU backend's data parallelism.
 * Owned by whoever creates it (the trainer, a batched classifier): no global state. */
#ifndef ATTNEXT_POOL_H
#define ATTNEXT_POOL_H

#include "nn.h" /* nn_allocator */

typedef struct nn_pool nn_pool;
typedef void (*nn_task_fn)(void *ctx, int task);

/* threads: total threads including the caller (0 = one per online CPU, capped at 64); the
 * pool's memory from mem (NULL: the C library). */
int nn_pool_create(nn_pool **out, int threads, const nn_allocator *mem, char *err);
int nn_pool_threads(const nn_pool *pool);
/* Run fn(ctx, i) for i in [0, ntasks) on the pool's threads, the caller among them; returns
 * when all are done. Tasks are claimed in index order by whichever thread is free (a worker
 * that got no core runs none), so a task must depend on its index only, never on the thread. */
void nn_pool_run(nn_pool *pool, nn_task_fn fn, void *ctx, int ntasks);
void nn_pool_free(nn_pool *pool);
int nn_cpu_count(void);
/* One OpenBLAS thread per call while our code runs: our own threads split the work, and
 * OpenBLAS's threading of small GEMMs costs more than it gains (measured: 4 s vs 0.6 s an
 * epoch). Between nn_blas_enter and nn_blas_leave (nested, any threads) OpenBLAS runs with one
 * thread; when the last caller leaves, the host's own setting is put back. */
void nn_blas_enter(void);
void nn_blas_leave(void);

#endif
