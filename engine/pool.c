/* pool.c -- persistent worker threads with a static task assignment (see pool.h).
 *
 * A training batch runs two short parallel phases (the shards' forward and backward, then the
 * gradient sum and Adam), ~650 us in all on 2 cores. Waking a sleeping thread through a
 * condition variable costs tens of microseconds there (measured: 60 ms of wall time per epoch
 * for 52-54 ms of work per shard). So both sides first spin a while (~100 us, with pause) on
 * the generation and pending counters, and only then sleep on the condition variables: the
 * gap between two phases of a batch is a few microseconds, and a pool left idle sleeps. */
#include "pool.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "nn.h"

struct nn_pool {
  int threads; /* including the caller */
  pthread_t *workers;
  pthread_mutex_t lock;
  pthread_cond_t start, finish;
  atomic_ulong generation; /* bumped for each run (under lock; read while spinning) */
  atomic_int pending;      /* workers still busy in this run */
  atomic_int quit;
  nn_task_fn fn;
  void *ctx;
  int ntasks;
};

typedef struct worker_arg {
  nn_pool *pool;
  int index;
} worker_arg;

static void run_share(nn_pool *pool, int index) {
  for (int i = index; i < pool->ntasks; i += pool->threads) pool->fn(pool->ctx, i);
}

enum { POOL_SPINS = 4000 }; /* ~100 us of pause instructions */

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

static void *worker_main(void *p) {
  worker_arg arg = *(worker_arg *)p;
  free(p);
  nn_pool *pool = arg.pool;
  unsigned long seen = 0;
  for (;;) {
    for (int i = 0; i < POOL_SPINS && !atomic_load(&pool->quit) &&
                    atomic_load(&pool->generation) == seen;
         i++)
      cpu_relax();
    pthread_mutex_lock(&pool->lock);
    while (!atomic_load(&pool->quit) && atomic_load(&pool->generation) == seen)
      pthread_cond_wait(&pool->start, &pool->lock);
    pthread_mutex_unlock(&pool->lock);
    if (atomic_load(&pool->quit)) break;
    seen = atomic_load(&pool->generation); /* fn, ctx, ntasks were set before it changed */
    run_share(pool, arg.index);
    if (atomic_fetch_sub(&pool->pending, 1) == 1) { /* the last: wake a sleeping caller */
      pthread_mutex_lock(&pool->lock);
      pthread_cond_signal(&pool->finish);
      pthread_mutex_unlock(&pool->lock);
    }
  }
  return NULL;
}

/* CPUs this process may run on (its affinity mask: taskset, a container's cpuset), else the
 * online count. */
int nn_cpu_count(void) {
  long n = sysconf(_SC_NPROCESSORS_ONLN);
#ifdef CPU_COUNT
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0) n = CPU_COUNT(&set);
#endif
  return n < 1 ? 1 : n > 64 ? 64 : (int)n;
}

int nn_pool_create(nn_pool **out, int threads, char *err) {
  *out = NULL;
  if (threads <= 0) threads = nn_cpu_count();
  if (threads > 64) threads = 64;
  nn_pool *pool = calloc(1, sizeof *pool);
  if (!pool) goto nomem;
  pool->threads = 1;
  pthread_mutex_init(&pool->lock, NULL);
  pthread_cond_init(&pool->start, NULL);
  pthread_cond_init(&pool->finish, NULL);
  if (threads > 1) {
    pool->workers = calloc((size_t)threads, sizeof *pool->workers);
    if (!pool->workers) goto nomem;
    for (int i = 1; i < threads; i++) {
      worker_arg *arg = malloc(sizeof *arg);
      if (!arg) break;
      arg->pool = pool;
      arg->index = i;
      if (pthread_create(&pool->workers[i], NULL, worker_main, arg) != 0) {
        free(arg);
        break; /* fewer threads than asked: still correct, just slower */
      }
      pool->threads = i + 1;
    }
  }
  nn_blas_single_thread();
  *out = pool;
  return NN_OK;
nomem:
  nn_pool_free(pool);
  snprintf(err, NN_ERR_LEN, "out of memory creating a thread pool");
  return NN_NOMEM;
}

int nn_pool_threads(const nn_pool *pool) { return pool ? pool->threads : 1; }

void nn_pool_run(nn_pool *pool, nn_task_fn fn, void *ctx, int ntasks) {
  if (!pool || pool->threads == 1 || ntasks <= 1) {
    for (int i = 0; i < ntasks; i++) fn(ctx, i);
    return;
  }
  pthread_mutex_lock(&pool->lock);
  pool->fn = fn;
  pool->ctx = ctx;
  pool->ntasks = ntasks;
  atomic_store(&pool->pending, pool->threads - 1);
  atomic_fetch_add(&pool->generation, 1); /* sequentially consistent: publishes the above */
  pthread_cond_broadcast(&pool->start);
  pthread_mutex_unlock(&pool->lock);
  run_share(pool, 0);
  for (int i = 0; i < POOL_SPINS && atomic_load(&pool->pending) > 0; i++) cpu_relax();
  if (atomic_load(&pool->pending) > 0) {
    pthread_mutex_lock(&pool->lock);
    while (atomic_load(&pool->pending) > 0) pthread_cond_wait(&pool->finish, &pool->lock);
    pthread_mutex_unlock(&pool->lock);
  }
}

void nn_pool_free(nn_pool *pool) {
  if (!pool) return;
  pthread_mutex_lock(&pool->lock);
  atomic_store(&pool->quit, 1);
  pthread_cond_broadcast(&pool->start);
  pthread_mutex_unlock(&pool->lock);
  for (int i = 1; i < pool->threads; i++) pthread_join(pool->workers[i], NULL);
  free(pool->workers);
  pthread_mutex_destroy(&pool->lock);
  pthread_cond_destroy(&pool->start);
  pthread_cond_destroy(&pool->finish);
  free(pool);
}

void openblas_set_num_threads(int) __attribute__((weak));
static void blas_single_thread_once(void) {
  if (openblas_set_num_threads) openblas_set_num_threads(1);
}
/* OpenBLAS's thread count is process-wide: set it once (a pthread_once flag, the engine's only
 * process-wide state), not from every connection at once. */
void nn_blas_single_thread(void) {
  static pthread_once_t once = PTHREAD_ONCE_INIT;
  pthread_once(&once, blas_single_thread_once);
}
