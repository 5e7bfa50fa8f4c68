/* compat.h -- every call of the engine and the extension that is not ISO C11 or pthreads, in one
 * place, so that a port to another system is a change of this file and the build, not of the
 * code that uses it. Linux (glibc) is the reference; each call has a branch for Windows (mingw-w64
 * and MSVC's C runtime) and one for other POSIX systems (macOS, the BSDs, Emscripten). Static
 * inline only: no object file, no state. WebAssembly (Emscripten) has no shared libraries:
 * without its dynamic linking, dlopen aborts the program instead of failing, so the nn_dl_*
 * calls there fail (or do nothing) without calling it.
 *
 *   nn_os_random        bytes for the hash tables' keys (getrandom)
 *   nn_memrchr          the last byte c of a buffer (memrchr)
 *   nn_os_cpu_count     the CPUs this process may run on (sched_getaffinity, sysconf)
 *   nn_os_aligned_alloc, nn_os_aligned_free   64-byte aligned blocks (aligned_alloc, free)
 *   nn_os_gmtime        UTC calendar time, thread-safe (gmtime_r)
 *   nn_os_seconds       a monotonic clock, for durations (clock_gettime)
 *   nn_c_locale ...     numbers read and written in the "C" locale whatever the process's
 *                       (newlocale, strtod_l, strtof_l, uselocale)
 *   nn_dl_open ...      loading a shared library: attnext_cuda.so (dlopen, dlsym, dladdr)
 *   nn_os_open_nonblock, nn_os_clear_nonblock   opening a path without waiting on a FIFO
 *   nn_getc_unlocked    getc without the stream's lock (getc_unlocked)
 */
#ifndef ATTNEXT_COMPAT_H
#define ATTNEXT_COMPAT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#if defined(_WIN32)
#ifndef WIN32_LEAN_AND_MEAN
#define WIN32_LEAN_AND_MEAN
#endif
#include <fcntl.h>
#include <io.h>
#include <locale.h>
#include <malloc.h>
#include <windows.h>
#else
#include <dlfcn.h>
#include <fcntl.h>
#include <locale.h>
#include <unistd.h>
#if defined(__linux__)
#include <sched.h>
#include <sys/random.h>
#endif
#if defined(__APPLE__)
#include <xlocale.h>
#endif
#if defined(__EMSCRIPTEN__)
#include <sys/random.h>
#endif
#endif

/* ---------------------------------------------------------------- random bytes */

/* n bytes from the system's generator (n <= 256); 0 on success, -1 when it cannot give them now
 * (the caller has a fallback): never blocks */
static inline int nn_os_random(void *buf, size_t n) {
#if defined(__linux__)
  return getrandom(buf, n, GRND_NONBLOCK) == (ssize_t)n ? 0 : -1;
#elif defined(_WIN32)
  /* RtlGenRandom (advapi32's SystemFunction036): no CNG handle, no extra library to link */
  typedef BOOLEAN(WINAPI * gen_fn)(PVOID, ULONG);
  HMODULE lib = LoadLibraryA("advapi32.dll");
  gen_fn gen = lib ? (gen_fn)(uintptr_t)GetProcAddress(lib, "SystemFunction036") : NULL;
  int ok = gen && gen(buf, (ULONG)n);
  if (lib) FreeLibrary(lib);
  return ok ? 0 : -1;
#elif defined(__APPLE__) || defined(__FreeBSD__) || defined(__OpenBSD__) || defined(__NetBSD__)
  arc4random_buf(buf, n);
  return 0;
#elif defined(__EMSCRIPTEN__)
  /* the host's generator (Node's crypto.randomFillSync, a browser's crypto.getRandomValues) */
  return getentropy(buf, n) == 0 ? 0 : -1;
#else
  (void)buf;
  (void)n;
  return -1;
#endif
}

/* ---------------------------------------------------------------- strings */

/* the last byte c among s[0 .. n), or NULL */
static inline const void *nn_memrchr(const void *s, int c, size_t n) {
#if defined(__GLIBC__)
  return memrchr(s, c, n);
#else
  const unsigned char *p = (const unsigned char *)s + n;
  while (p > (const unsigned char *)s)
    if (*--p == (unsigned char)c) return p;
  return NULL;
#endif
}

/* ---------------------------------------------------------------- CPUs */

/* CPUs this process may run on (its affinity mask: taskset, a container's cpuset), else the
 * online count; 1 when the system does not say */
static inline long nn_os_cpu_count(void) {
#if defined(_WIN32)
  DWORD_PTR process, system;
  if (GetProcessAffinityMask(GetCurrentProcess(), &process, &system) && process) {
    long n = 0;
    for (; process; process &= process - 1) n++;
    return n;
  }
  SYSTEM_INFO info;
  GetSystemInfo(&info);
  return (long)info.dwNumberOfProcessors;
#else
  long n = 1;
#if defined(_SC_NPROCESSORS_ONLN)
  n = sysconf(_SC_NPROCESSORS_ONLN);
#endif
#if defined(__linux__) && defined(CPU_COUNT)
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0) n = CPU_COUNT(&set);
#endif
  return n;
#endif
}

/* ---------------------------------------------------------------- memory */

/* bytes (a multiple of align) aligned to align, freed by nn_os_aligned_free only: Windows's
 * C runtime has no aligned_alloc, and its aligned blocks need their own free */
static inline void *nn_os_aligned_alloc(size_t align, size_t bytes) {
#if defined(_WIN32)
  return _aligned_malloc(bytes, align);
#else
  return aligned_alloc(align, bytes);
#endif
}
static inline void nn_os_aligned_free(void *p) {
#if defined(_WIN32)
  _aligned_free(p);
#else
  free(p);
#endif
}

/* ---------------------------------------------------------------- time */

/* *t as UTC into *out; NULL on failure */
static inline struct tm *nn_os_gmtime(const time_t *t, struct tm *out) {
#if defined(_WIN32)
  return gmtime_s(out, t) == 0 ? out : NULL;
#else
  return gmtime_r(t, out);
#endif
}

/* Seconds on a clock that never goes back (CLOCK_MONOTONIC), the one clock of the engine and the
 * extension for durations: an epoch's time, rows per second, a wait's deadline. mingw-w64's
 * winpthreads has clock_gettime too. */
static inline double nn_os_seconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* ---------------------------------------------------------------- the "C" locale */

/* A handle on the "C" locale's numbers (decimal point '.'), NULL when it cannot be had (the
 * callers then use the process's locale). Reading with it never changes the process's locale;
 * formatting switches the calling thread's only. */
#if defined(_WIN32)
typedef _locale_t nn_c_locale;
static inline nn_c_locale nn_c_locale_new(void) { return _create_locale(LC_NUMERIC, "C"); }
static inline void nn_c_locale_free(nn_c_locale c) { _free_locale(c); }
static inline double nn_strtod_in(const char *s, char **end, nn_c_locale c) {
  return _strtod_l(s, end, c);
}
/* mingw-w64 declares no _strtof_l: through double, rounded twice (which can differ from one
 * rounding only for a decimal within 2^-29 of a float halfway point: never our own output) */
static inline float nn_strtof_in(const char *s, char **end, nn_c_locale c) {
  return (float)_strtod_l(s, end, c);
}
#else
typedef locale_t nn_c_locale;
static inline nn_c_locale nn_c_locale_new(void) {
  return newlocale(LC_NUMERIC_MASK, "C", (locale_t)0);
}
static inline void nn_c_locale_free(nn_c_locale c) { freelocale(c); }
static inline double nn_strtod_in(const char *s, char **end, nn_c_locale c) {
  return strtod_l(s, end, c);
}
static inline float nn_strtof_in(const char *s, char **end, nn_c_locale c) {
  return strtof_l(s, end, c);
}
#endif

/* buf = x as "%.*g" with digits digits, in the locale c (NULL: the thread's) */
static inline void nn_format_g_in(char *buf, size_t size, int digits, double x, nn_c_locale c) {
#if defined(_WIN32)
  /* mingw-w64's own snprintf (__USE_MINGW_ANSI_STDIO: two-digit exponents, as C99 and glibc;
   * the C runtime's _snprintf_l writes three), then the thread locale's point made '.' */
  (void)c;
  snprintf(buf, size, "%.*g", digits, x);
  const char *point = localeconv()->decimal_point;
  char *at = point && strcmp(point, ".") != 0 ? strstr(buf, point) : NULL;
  if (at) {
    size_t n = strlen(point);
    at[0] = '.';
    memmove(at + 1, at + n, strlen(at + n) + 1);
  }
#else
  locale_t old = c ? uselocale(c) : (locale_t)0;
  snprintf(buf, size, "%.*g", digits, x);
  if (c) uselocale(old);
#endif
}

/* ---------------------------------------------------------------- shared libraries */

/* path loaded (its symbols kept to itself); NULL with the reason in err */
static inline void *nn_dl_open(const char *path, char *err, size_t len) {
#if defined(_WIN32)
  HMODULE lib = LoadLibraryA(path);
  if (!lib) snprintf(err, len, "%s: cannot open (Windows error %lu)", path, GetLastError());
  return (void *)lib;
#elif defined(__EMSCRIPTEN__)
  snprintf(err, len, "%s: cannot open (no shared libraries in WebAssembly)", path);
  return NULL;
#else
  void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    const char *e = dlerror();
    snprintf(err, len, "%s", e ? e : "dlopen failed");
  }
  return lib;
#endif
}
static inline void *nn_dl_sym(void *lib, const char *name) {
#if defined(_WIN32)
  return (void *)(uintptr_t)GetProcAddress((HMODULE)lib, name);
#elif defined(__EMSCRIPTEN__)
  (void)lib;
  (void)name;
  return NULL;
#else
  return dlsym(lib, name);
#endif
}
static inline void nn_dl_close(void *lib) {
#if defined(_WIN32)
  FreeLibrary((HMODULE)lib);
#elif defined(__EMSCRIPTEN__)
  (void)lib;
#else
  dlclose(lib);
#endif
}
/* the path of the library (or program) holding addr into buf; 0 on success */
static inline int nn_dl_path_of(const void *addr, char *buf, size_t len) {
#if defined(_WIN32)
  HMODULE self;
  if (!GetModuleHandleExA(GET_MODULE_HANDLE_EX_FLAG_FROM_ADDRESS |
                              GET_MODULE_HANDLE_EX_FLAG_UNCHANGED_REFCOUNT,
                          (LPCSTR)addr, &self))
    return -1;
  DWORD n = GetModuleFileNameA(self, buf, (DWORD)len);
  return n > 0 && n < len ? 0 : -1;
#elif defined(__EMSCRIPTEN__)
  (void)addr;
  (void)buf;
  (void)len;
  return -1;
#else
  Dl_info info;
  if (!dladdr((void *)(uintptr_t)addr, &info) || !info.dli_fname) return -1;
  int n = snprintf(buf, len, "%s", info.dli_fname);
  return n >= 0 && (size_t)n < len ? 0 : -1;
#endif
}
/* keeps the library holding addr loaded until the process ends (its code stays mapped) */
static inline void nn_dl_pin(const void *addr) {
#if defined(_WIN32)
  HMODULE self;
  (void)GetModuleHandleExA(GET_MODULE_HANDLE_EX_FLAG_FROM_ADDRESS | GET_MODULE_HANDLE_EX_FLAG_PIN,
                           (LPCSTR)addr, &self);
#elif defined(__EMSCRIPTEN__)
  (void)addr; /* linked in: never unloaded */
#else
  Dl_info info;
  if (dladdr((void *)(uintptr_t)addr, &info) && info.dli_fname)
    (void)dlopen(info.dli_fname, RTLD_NOW | RTLD_NOLOAD | RTLD_NODELETE);
#endif
}

/* ---------------------------------------------------------------- files */

/* getc without the stream's lock (the caller owns the stream) */
static inline int nn_getc_unlocked(FILE *f) {
#if defined(_WIN32)
  return _getc_nolock(f);
#else
  return getc_unlocked(f);
#endif
}

/* a descriptor of path, read-only, opened without waiting (a FIFO with no writer would block
 * open); -1 with errno set */
static inline int nn_os_open_nonblock(const char *path) {
#if defined(_WIN32)
  return _open(path, _O_RDONLY | _O_BINARY | _O_NOINHERIT);
#else
  return open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
#endif
}
/* reads on fd wait again, as a FILE expects */
static inline void nn_os_clear_nonblock(int fd) {
#if defined(_WIN32)
  (void)fd;
#else
  int flags = fcntl(fd, F_GETFL);
  if (flags >= 0) fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
#endif
}

#endif
