/* pool.c -- persistent worker threads with a static task assignment (see pool.h).
 *
 * Tasks are claimed by whichever thread is running (struct nn_pool): results never depend on
 * the thread that runs a task, only on the task's index.
 *
 * A training batch runs two short parallel phases (the shards' forward and backward, then the
 * gradient sum and Adam), ~650 us in all on 2 cores. Waking a sleeping thread through a
 * condition variable costs tens of microseconds there (measured: 60 ms of wall time per epoch
 * for 52-54 ms of work per shard). So both sides first spin a while (~100 us, with pause) on
 * the generation and pending counters, and only then sleep on the condition variables: the
 * gap between two phases of a batch is a few microseconds, and a pool left idle sleeps.
 *
 * On a machine that other processes keep busy the worker's spin costs more than it saves: the
 * caller it waits for is often off its core, and the spinning worker holds a core (and uses up
 * its fair share of CPU time) that the caller needs. Measured (AG News, lesson's recipe, 2
 * cores): the worker's waits longer than 100 us were 2-5% of its waits on an idle machine and
 * 39-95% with one or two other busy processes. So a worker spins only while few of its recent
 * waits were long (worker_main); the caller always spins. Under one busy process an epoch went
 * from 0.169 s to 0.154 (one thread: 0.166); idle and under two, no change beyond noise. */
#include "pool.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

#include "compat.h"
#include "nn_internal.h"
#include "nn_mem.h"

struct nn_pool {
  const nn_allocator *mem; /* of the pool, its workers array and their arguments */
  int threads;             /* including the caller */
  pthread_t *workers;
  pthread_mutex_t lock;
  pthread_cond_t start, finish;
  /* The run's tasks are claimed, not assigned: claim holds the run's generation (high 32 bits)
   * and the next unclaimed task (low 32 bits; CLOSED between runs). A thread takes task i by
   * moving claim from (g, i) to (g, i + 1): a worker that a busy machine left without a core
   * claims nothing, and the caller runs the tasks itself instead of waiting for it. A claim
   * that succeeds proves fn, ctx and ntasks (written while claim is CLOSED) are the run's. */
  atomic_ullong claim;
  atomic_int done; /* tasks of this run finished */
  atomic_int quit;
  nn_task_fn fn;
  void *ctx;
  int ntasks;
};

#define CLAIM_CLOSED 0xffffffffull

typedef struct worker_arg {
  nn_pool *pool;
  int index;
} worker_arg;

/* Claim and run tasks of generation gen until none is left; returns when the run's tasks are
 * all claimed (or another run began). */
static void run_claims(nn_pool *pool, unsigned long long gen) {
  for (;;) {
    unsigned long long w = atomic_load(&pool->claim);
    if ((w >> 32) != gen || (w & CLAIM_CLOSED) == CLAIM_CLOSED) return;
    nn_task_fn fn = pool->fn;
    void *ctx = pool->ctx;
    int n = pool->ntasks;
    unsigned long long i = w & CLAIM_CLOSED;
    if (i >= (unsigned long long)n) return;
    if (!atomic_compare_exchange_weak(&pool->claim, &w, w + 1)) continue;
    fn(ctx, (int)i);
    if (atomic_fetch_add(&pool->done, 1) + 1 == n) { /* the last: wake a sleeping caller */
      pthread_mutex_lock(&pool->lock);
      pthread_cond_signal(&pool->finish);
      pthread_mutex_unlock(&pool->lock);
    }
  }
}

enum {
  POOL_SPINS = 4000,      /* ~100 us of pause instructions */
  POOL_SHORT_SPINS = 400, /* a worker's spin while its waits are long (~10 us) */
  LONG_WAIT_US = 100,     /* a wait longer than the full spin */
  LONG_SHARE_WINDOW = 16, /* the share of long waits: a moving average over ~16 waits, */
  LONG_SHARE_ONE = 1024,  /* in 1/1024ths; */
  LONG_SHARE_BUSY = 205,  /* above 20% the machine is busy (idle: 2-5%, busy: 39-95%) */
};

/* what a waiting loop tells the core: pause (x86), yield (arm: the other hardware thread of
 * the core, or the hypervisor, gets the cycles) */
static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__) || defined(__arm__)
  __asm__ __volatile__("yield" ::: "memory");
#endif
}

static void *worker_main(void *p) {
  worker_arg arg = *(worker_arg *)p;
  nn_pool *pool = arg.pool;
  nn_mem_free(pool->mem, p);
  unsigned long long seen = 0;
  int long_share = 0; /* of this worker's recent waits, in 1/1024ths (only timing depends on it) */
  for (;;) {
    int spins = long_share > LONG_SHARE_BUSY ? POOL_SHORT_SPINS : POOL_SPINS;
    double waited_from = nn_os_seconds();
    for (int i = 0;
         i < spins && !atomic_load(&pool->quit) && (atomic_load(&pool->claim) >> 32) == seen; i++)
      cpu_relax();
    pthread_mutex_lock(&pool->lock);
    while (!atomic_load(&pool->quit) && (atomic_load(&pool->claim) >> 32) == seen)
      pthread_cond_wait(&pool->start, &pool->lock);
    pthread_mutex_unlock(&pool->lock);
    int was_long = nn_os_seconds() - waited_from > LONG_WAIT_US * 1e-6;
    long_share += ((was_long ? LONG_SHARE_ONE : 0) - long_share) / LONG_SHARE_WINDOW;
    if (atomic_load(&pool->quit)) break;
    seen = atomic_load(&pool->claim) >> 32;
    run_claims(pool, seen);
  }
  return NULL;
}

/* CPUs this process may run on (its affinity mask: taskset, a container's cpuset), else the
 * online count. */
int nn_cpu_count(void) {
  long n = nn_os_cpu_count();
  return n < 1 ? 1 : n > 64 ? 64 : (int)n;
}

int nn_pool_create(nn_pool **out, int threads, const nn_allocator *mem, char *err) {
  *out = NULL;
  if (threads <= 0) threads = nn_cpu_count();
  if (threads > 64) threads = 64;
  nn_pool *pool = nn_mem_calloc(mem, 1, sizeof *pool);
  if (!pool) goto nomem;
  pool->mem = mem;
  pool->threads = 1;
  atomic_store(&pool->claim, CLAIM_CLOSED);
  pthread_mutex_init(&pool->lock, NULL);
  pthread_cond_init(&pool->start, NULL);
  pthread_cond_init(&pool->finish, NULL);
  if (threads > 1) {
    pool->workers = nn_mem_calloc(mem, (size_t)threads, sizeof *pool->workers);
    if (!pool->workers) goto nomem;
    for (int i = 1; i < threads; i++) {
      worker_arg *arg = nn_mem_alloc(mem, sizeof *arg);
      if (!arg) break;
      arg->pool = pool;
      arg->index = i;
      if (pthread_create(&pool->workers[i], NULL, worker_main, arg) != 0) {
        nn_mem_free(mem, arg);
        break; /* fewer threads than asked: still correct, just slower */
      }
      pool->threads = i + 1;
    }
  }
  *out = pool;
  return NN_OK;
nomem:
  nn_pool_free(pool);
  snprintf(err, NN_ERR_LEN, "out of memory creating a thread pool");
  return NN_NOMEM;
}

int nn_pool_threads(const nn_pool *pool) { return pool ? pool->threads : 1; }

/* The parallel phases hold the BLAS setting for their whole length, so that the GEMMs inside
 * them do not switch it back and forth. */
void openblas_set_num_threads(int) __attribute__((weak));
int openblas_get_num_threads(void) __attribute__((weak));
static void pool_run(nn_pool *pool, nn_task_fn fn, void *ctx, int ntasks);
static void blas_setting_enter(void);
static void blas_setting_leave(void);
void nn_pool_run(nn_pool *pool, nn_task_fn fn, void *ctx, int ntasks) {
  int blas = openblas_set_num_threads && openblas_get_num_threads;
  if (blas) blas_setting_enter(); /* the setting only: a phase is not one OpenBLAS call */
  pool_run(pool, fn, ctx, ntasks);
  if (blas) blas_setting_leave();
}

static void pool_run(nn_pool *pool, nn_task_fn fn, void *ctx, int ntasks) {
  if (!pool || pool->threads == 1 || ntasks <= 1) {
    for (int i = 0; i < ntasks; i++) fn(ctx, i);
    return;
  }
  pthread_mutex_lock(&pool->lock);
  pool->fn = fn; /* claim is CLOSED: no thread reads these now */
  pool->ctx = ctx;
  pool->ntasks = ntasks;
  atomic_store(&pool->done, 0);
  unsigned long long gen = ((atomic_load(&pool->claim) >> 32) + 1) & CLAIM_CLOSED;
  atomic_store(&pool->claim, gen << 32); /* sequentially consistent: publishes the above */
  pthread_cond_broadcast(&pool->start);
  pthread_mutex_unlock(&pool->lock);
  run_claims(pool, gen);
  for (int i = 0; i < POOL_SPINS && atomic_load(&pool->done) < ntasks; i++) cpu_relax();
  if (atomic_load(&pool->done) < ntasks) {
    pthread_mutex_lock(&pool->lock);
    while (atomic_load(&pool->done) < ntasks) pthread_cond_wait(&pool->finish, &pool->lock);
    pthread_mutex_unlock(&pool->lock);
  }
  atomic_store(&pool->claim, gen << 32 | CLAIM_CLOSED); /* a late worker claims nothing */
}

void nn_pool_free(nn_pool *pool) {
  if (!pool) return;
  pthread_mutex_lock(&pool->lock);
  atomic_store(&pool->quit, 1);
  pthread_cond_broadcast(&pool->start);
  pthread_mutex_unlock(&pool->lock);
  for (int i = 1; i < pool->threads; i++) pthread_join(pool->workers[i], NULL);
  nn_mem_free(pool->mem, pool->workers);
  pthread_mutex_destroy(&pool->lock);
  pthread_cond_destroy(&pool->start);
  pthread_cond_destroy(&pool->finish);
  nn_mem_free(pool->mem, pool);
}

/* OpenBLAS's thread count is process-wide and belongs to the host (numpy in the same Python
 * process, another library). We want one thread per BLAS call while our code runs (pool.h), and
 * the host's own setting back as soon as none of our calls is running: the first nn_blas_enter
 * (of any thread) saves the host's count and sets 1, the last nn_blas_leave puts the saved count
 * back. A use count and a lock are the engine's only process-wide state besides OpenBLAS's own.
 * A call that enters while the first one is still setting 1 may run with the host's count: only
 * slower, never wrong (Debian's pthread OpenBLAS is safe to call from several threads). */
void openblas_set_num_threads(int) __attribute__((weak));
int openblas_get_num_threads(void) __attribute__((weak));
static pthread_mutex_t blas_lock = PTHREAD_MUTEX_INITIALIZER;
static atomic_int blas_users;   /* setting users (nn_blas_enter calls, pool runs) not yet left */
static atomic_int blas_is_set;  /* 1 while the count is ours (under blas_lock to change) */
static int blas_saved;          /* the host's count while blas_is_set (under blas_lock) */
static atomic_int blas_calls;   /* threads inside an OpenBLAS call (nn_blas_enter .. leave) */
static atomic_int blas_forking; /* 1 while fork() waits for blas_calls to reach 0 */

/* fork() beside a running training (a prefork server, Python's 'fork' start method). The child
 * has only the thread that forked, and gets every lock as it was at that instant: a lock held by
 * another thread stays held in the child for ever, and the child's first BLAS call hangs. Two
 * such locks: ours (blas_lock, held a few instructions or one openblas_set_num_threads at a
 * time), and OpenBLAS 0.3's buffer lock (blas_memory_alloc), held inside sgemm, which OpenBLAS's
 * own fork handler does not cover. So fork waits until no thread holds ours and none of our
 * threads is inside an OpenBLAS call (new calls wait for the fork meanwhile; a call lasts
 * microseconds to milliseconds), and the child starts with no users and no calls: the calls
 * that were running belong to threads the child does not have. The setting stays as it was (1
 * while ours); the child's first nn_blas_leave puts the host's saved count back. glibc removes
 * the handlers when the library is unloaded (dlclose), and a later load registers them again. */
static pthread_once_t blas_fork_once = PTHREAD_ONCE_INIT;
#ifndef _WIN32 /* no fork() on Windows */
static void blas_fork_prepare(void) {
  pthread_mutex_lock(&blas_lock);
  atomic_store(&blas_forking, 1);
  while (atomic_load(&blas_calls) > 0) sched_yield();
}
static void blas_fork_parent(void) {
  atomic_store(&blas_forking, 0);
  pthread_mutex_unlock(&blas_lock);
}
static void blas_fork_child(void) {
  atomic_store(&blas_users, 0);
  atomic_store(&blas_calls, 0);
  atomic_store(&blas_forking, 0);
  pthread_mutex_unlock(&blas_lock); /* held by this thread, the one that forked */
}
static void blas_fork_register(void) {
  pthread_atfork(blas_fork_prepare, blas_fork_parent, blas_fork_child);
}
#else
static void blas_fork_register(void) {}
#endif

/* Count this thread inside an OpenBLAS call, unless a fork is under way: then wait for it (on
 * blas_lock, which blas_fork_prepare holds until the fork is done), not counted meanwhile. */
static void blas_call_begin(void) {
  for (;;) {
    atomic_fetch_add(&blas_calls, 1);
    if (!atomic_load(&blas_forking)) return;
    atomic_fetch_sub(&blas_calls, 1);
    pthread_mutex_lock(&blas_lock);
    pthread_mutex_unlock(&blas_lock);
  }
}

/* The setting part of nn_blas_enter / leave: the count is 1 between them (nested, any threads). */
static void blas_setting_enter(void) {
  if (atomic_fetch_add(&blas_users, 1) > 0 && atomic_load(&blas_is_set)) return;
  pthread_mutex_lock(&blas_lock);
  if (!atomic_load(&blas_is_set) && atomic_load(&blas_users) > 0) {
    blas_saved = openblas_get_num_threads();
    if (blas_saved != 1) openblas_set_num_threads(1);
    atomic_store(&blas_is_set, 1);
  }
  pthread_mutex_unlock(&blas_lock);
}

static void blas_setting_leave(void) {
  if (atomic_fetch_sub(&blas_users, 1) != 1) return;
  pthread_mutex_lock(&blas_lock);
  if (atomic_load(&blas_users) == 0 && atomic_load(&blas_is_set)) {
    if (blas_saved != 1 && blas_saved > 0) openblas_set_num_threads(blas_saved);
    atomic_store(&blas_is_set, 0);
  }
  pthread_mutex_unlock(&blas_lock);
}

/* Around each OpenBLAS call (backend_cpu.c). The setting first: it may wait on blas_lock while a
 * fork is under way, and must not be counted as a call then (the fork waits for the calls). */
void nn_blas_enter(void) {
  if (!openblas_set_num_threads || !openblas_get_num_threads) return;
  pthread_once(&blas_fork_once, blas_fork_register);
  blas_setting_enter();
  blas_call_begin();
}

void nn_blas_leave(void) {
  if (!openblas_set_num_threads || !openblas_get_num_threads) return;
  atomic_fetch_sub(&blas_calls, 1);
  blas_setting_leave();
}
