/* slowfs: an LD_PRELOAD shim that makes writes under one directory as slow as a shared parallel file
 * system is for one node, so that perf/levels can compare a node-local level against a global
 * directory "throttled to a fraction of local bandwidth" (issue 19) on a machine with one disk.
 *   SLOWFS_UNDER  path prefix whose files are throttled (absolute; files opened under it)
 *   SLOWFS_MBPS   bandwidth of that prefix per process, in MB/s (10^6 bytes); unset or 0: no throttle
 * Every pwrite/write/pwritev/writev on a descriptor opened (open/openat/creat) under the prefix
 * sleeps so that this process's throttled bytes never run ahead of SLOWFS_MBPS since its first
 * throttled write (a token bucket without a burst). Other files are untouched. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#define MAX_FD 65536
static unsigned char g_slow[MAX_FD];
static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static double g_start = -1, g_bytes = 0;

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int under(const char* path) {
  const char* p = getenv("SLOWFS_UNDER");
  return p != NULL && p[0] != '\0' && path != NULL && strncmp(path, p, strlen(p)) == 0;
}

static void mark(int fd, const char* path) {
  if (fd >= 0 && fd < MAX_FD) g_slow[fd] = (unsigned char)under(path);
}

/* Sleeps until `n` more bytes fit into the bandwidth since the first throttled write. */
static void throttle(int fd, size_t n) {
  if (fd < 0 || fd >= MAX_FD || !g_slow[fd] || n == 0) return;
  const char* s = getenv("SLOWFS_MBPS");
  const double bps = s ? atof(s) * 1e6 : 0;
  if (bps <= 0) return;
  pthread_mutex_lock(&g_mu);
  const double t = now();
  if (g_start < 0) g_start = t;
  if (g_start + g_bytes / bps < t) { /* idle since: no credit for the idle time */
    g_start = t;
    g_bytes = 0;
  }
  g_bytes += (double)n;
  const double until = g_start + g_bytes / bps;
  pthread_mutex_unlock(&g_mu);
  const double wait = until - now();
  if (wait > 0) {
    struct timespec ts = {(time_t)wait, (long)((wait - (double)(time_t)wait) * 1e9)};
    nanosleep(&ts, NULL);
  }
}

#define REAL(name, ret, args)    \
  static ret(*real) args = NULL; \
  if (real == NULL) real = (ret(*) args)dlsym(RTLD_NEXT, name)

/* The mode argument of an open call that creates (only then is it passed). */
#define OPEN_MODE(flags, mode)           \
  mode_t mode = 0;                       \
  if ((flags) & (O_CREAT | O_TMPFILE)) { \
    va_list ap;                          \
    va_start(ap, flags);                 \
    mode = (mode_t)va_arg(ap, int);      \
    va_end(ap);                          \
  }

int open(const char* path, int flags, ...) {
  REAL("open", int, (const char*, int, ...));
  OPEN_MODE(flags, mode);
  const int fd = real(path, flags, mode);
  mark(fd, path);
  return fd;
}
int open64(const char* path, int flags, ...) {
  REAL("open64", int, (const char*, int, ...));
  OPEN_MODE(flags, mode);
  const int fd = real(path, flags, mode);
  mark(fd, path);
  return fd;
}
int openat(int dirfd, const char* path, int flags, ...) {
  REAL("openat", int, (int, const char*, int, ...));
  OPEN_MODE(flags, mode);
  const int fd = real(dirfd, path, flags, mode);
  mark(fd, path); /* a relative path is never under the (absolute) prefix */
  return fd;
}
int creat(const char* path, mode_t mode) {
  REAL("creat", int, (const char*, mode_t));
  const int fd = real(path, mode);
  mark(fd, path);
  return fd;
}
ssize_t write(int fd, const void* b, size_t n) {
  REAL("write", ssize_t, (int, const void*, size_t));
  throttle(fd, n);
  return real(fd, b, n);
}
ssize_t pwrite(int fd, const void* b, size_t n, off_t off) {
  REAL("pwrite", ssize_t, (int, const void*, size_t, off_t));
  throttle(fd, n);
  return real(fd, b, n, off);
}
ssize_t pwrite64(int fd, const void* b, size_t n, off_t off) {
  REAL("pwrite64", ssize_t, (int, const void*, size_t, off_t));
  throttle(fd, n);
  return real(fd, b, n, off);
}
static size_t iov_bytes(const struct iovec* v, int n) {
  size_t s = 0;
  for (int i = 0; i < n; ++i) s += v[i].iov_len;
  return s;
}
ssize_t writev(int fd, const struct iovec* v, int n) {
  REAL("writev", ssize_t, (int, const struct iovec*, int));
  throttle(fd, iov_bytes(v, n));
  return real(fd, v, n);
}
ssize_t pwritev(int fd, const struct iovec* v, int n, off_t off) {
  REAL("pwritev", ssize_t, (int, const struct iovec*, int, off_t));
  throttle(fd, iov_bytes(v, n));
  return real(fd, v, n, off);
}
ssize_t pwritev64(int fd, const struct iovec* v, int n, off_t off) {
  REAL("pwritev64", ssize_t, (int, const struct iovec*, int, off_t));
  throttle(fd, iov_bytes(v, n));
  return real(fd, v, n, off);
}
int close(int fd) {
  REAL("close", int, (int));
  if (fd >= 0 && fd < MAX_FD) g_slow[fd] = 0;
  return real(fd);
}
