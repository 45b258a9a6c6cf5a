/* faultinject: an LD_PRELOAD shim that makes write/pwrite/pwritev/fsync/fdatasync fail with a chosen
 * errno on files whose path contains a pattern - a full disk (ENOSPC) or a failing device (EIO)
 * under any transport, without root or a special file system.
 *
 * Configured from the environment at load time, or at run time by a program that finds
 * faultinj_configure()/faultinj_disarm()/faultinj_hits() with dlsym(RTLD_DEFAULT, ...):
 *   FAULTINJ_PATTERN   substring of the path (as given to open); unset or empty = disarmed
 *   FAULTINJ_OP        write | sync | any          (default write)
 *   FAULTINJ_ERRNO     ENOSPC | EIO | EDQUOT | <number>   (default ENOSPC)
 *   FAULTINJ_AFTER     bytes that may still be written to matching files before writes fail; a write
 *                      that crosses the limit is cut short, the next one fails (default 0)
 *   FAULTINJ_NTH       fail only the K-th matching call (1-based) and let the others through;
 *                      0 (default) = every call after the byte budget is spent
 * Variables deliberately do not start with CKPT_ (ckpt warns about unknown CKPT_* names).
 * Build: cc -shared -fPIC -o libfaultinject.so faultinject.c -ldl
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <unistd.h>

#define MAX_FD 4096
#define OP_WRITE 1
#define OP_SYNC 2

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static char g_pattern[512];
static int g_ops = OP_WRITE;
static int g_errno = ENOSPC;
static long long g_budget = 0; /* bytes still allowed */
static long long g_nth = 0;
static long long g_calls = 0; /* matching calls seen */
static long long g_hits = 0;  /* faults injected */
static unsigned char g_match[MAX_FD];

static ssize_t (*real_write)(int, const void*, size_t);
static ssize_t (*real_pwrite)(int, const void*, size_t, off_t);
static ssize_t (*real_pwrite64)(int, const void*, size_t, off_t);
static ssize_t (*real_pwritev)(int, const struct iovec*, int, off_t);
static ssize_t (*real_writev)(int, const struct iovec*, int);
static int (*real_fsync)(int);
static int (*real_fdatasync)(int);
static int (*real_open)(const char*, int, ...);
static int (*real_open64)(const char*, int, ...);
static int (*real_openat)(int, const char*, int, ...);
static int (*real_close)(int);

static void resolve(void) {
  if (real_write) return;
  real_pwrite = (ssize_t(*)(int, const void*, size_t, off_t))dlsym(RTLD_NEXT, "pwrite");
  real_pwrite64 = (ssize_t(*)(int, const void*, size_t, off_t))dlsym(RTLD_NEXT, "pwrite64");
  real_pwritev = (ssize_t(*)(int, const struct iovec*, int, off_t))dlsym(RTLD_NEXT, "pwritev");
  real_writev = (ssize_t(*)(int, const struct iovec*, int))dlsym(RTLD_NEXT, "writev");
  real_fsync = (int (*)(int))dlsym(RTLD_NEXT, "fsync");
  real_fdatasync = (int (*)(int))dlsym(RTLD_NEXT, "fdatasync");
  real_open = (int (*)(const char*, int, ...))dlsym(RTLD_NEXT, "open");
  real_open64 = (int (*)(const char*, int, ...))dlsym(RTLD_NEXT, "open64");
  real_openat = (int (*)(int, const char*, int, ...))dlsym(RTLD_NEXT, "openat");
  real_close = (int (*)(int))dlsym(RTLD_NEXT, "close");
  real_write = (ssize_t(*)(int, const void*, size_t))dlsym(RTLD_NEXT, "write");
}

static int parse_errno(const char* s) {
  if (s == NULL || *s == 0) return ENOSPC;
  if (strcmp(s, "ENOSPC") == 0) return ENOSPC;
  if (strcmp(s, "EIO") == 0) return EIO;
  if (strcmp(s, "EDQUOT") == 0) return EDQUOT;
  return atoi(s) > 0 ? atoi(s) : ENOSPC;
}

/* Arms the shim (replaces any earlier configuration); an empty or NULL pattern disarms it. */
void faultinj_configure(const char* pattern, const char* op, const char* err, long long after, long long nth) {
  pthread_mutex_lock(&g_lock);
  g_pattern[0] = 0;
  if (pattern) strncpy(g_pattern, pattern, sizeof g_pattern - 1);
  g_ops = (op && strcmp(op, "sync") == 0) ? OP_SYNC : (op && strcmp(op, "any") == 0) ? (OP_WRITE | OP_SYNC) : OP_WRITE;
  g_errno = parse_errno(err);
  g_budget = after < 0 ? 0 : after;
  g_nth = nth < 0 ? 0 : nth;
  g_calls = 0;
  g_hits = 0;
  pthread_mutex_unlock(&g_lock);
}
void faultinj_disarm(void) { faultinj_configure(NULL, NULL, NULL, 0, 0); }
long long faultinj_hits(void) {
  pthread_mutex_lock(&g_lock);
  long long h = g_hits;
  pthread_mutex_unlock(&g_lock);
  return h;
}

__attribute__((constructor)) static void faultinj_init(void) {
  resolve();
  const char* p = getenv("FAULTINJ_PATTERN");
  if (p && *p) {
    const char* a = getenv("FAULTINJ_AFTER");
    const char* n = getenv("FAULTINJ_NTH");
    faultinj_configure(p, getenv("FAULTINJ_OP"), getenv("FAULTINJ_ERRNO"), a ? atoll(a) : 0, n ? atoll(n) : 0);
  }
}

static void track(int fd, const char* path) {
  if (fd < 0 || fd >= MAX_FD) return;
  pthread_mutex_lock(&g_lock);
  g_match[fd] = (unsigned char)(g_pattern[0] && path && strstr(path, g_pattern) != NULL);
  pthread_mutex_unlock(&g_lock);
}

/* How many of `n` bytes a write on `fd` may do: n = all, 0..n-1 = cut short, -1 = fail. */
static long long decide(int fd, int op, long long n) {
  if (fd < 0 || fd >= MAX_FD) return n;
  /* Writes to files the pattern does not name never take the lock: the shim is preloaded into mpiexec
     too, whose main thread once blocked forever on g_lock inside a write() (taken re-entrantly from a
     signal handler, or held by a thread that was gone). A benign unlocked read: a byte per fd. */
  if (!g_pattern[0] || !g_match[fd]) return n;
  long long allow = n;
  pthread_mutex_lock(&g_lock);
  if (g_pattern[0] && g_match[fd] && (g_ops & op)) {
    ++g_calls;
    if (g_nth > 0) {
      if (g_calls == g_nth) allow = -1;
    } else if (op == OP_SYNC) {
      allow = -1;
    } else if (g_budget >= n) {
      g_budget -= n;
    } else if (g_budget > 0) {
      allow = g_budget;
      g_budget = 0;
    } else {
      allow = -1;
    }
    if (allow < n) ++g_hits; /* failed or cut short */
  }
  pthread_mutex_unlock(&g_lock);
  return allow;
}

/* resolve() + decide(); a refused call gets the configured errno. Returns decide()'s answer. */
static long long admit(int fd, int op, long long n) {
  resolve();
  long long a = decide(fd, op, n);
  if (a < 0) errno = g_errno;
  return a;
}

static int open_flags_mode(int flags) { return (flags & O_CREAT) || (flags & O_TMPFILE) == O_TMPFILE; }
/* The optional mode argument of open/open64/openat (a macro: va_start needs the caller's frame). */
#define OPEN_MODE(flags, mode)           \
  do {                                   \
    (mode) = 0;                          \
    if (open_flags_mode(flags)) {        \
      va_list ap_;                       \
      va_start(ap_, flags);              \
      (mode) = (mode_t)va_arg(ap_, int); \
      va_end(ap_);                       \
    }                                    \
  } while (0)

int open(const char* path, int flags, ...) {
  resolve();
  mode_t mode;
  OPEN_MODE(flags, mode);
  int fd = real_open(path, flags, mode);
  track(fd, path);
  return fd;
}
int open64(const char* path, int flags, ...) {
  resolve();
  mode_t mode;
  OPEN_MODE(flags, mode);
  int fd = real_open64 ? real_open64(path, flags, mode) : real_open(path, flags, mode);
  track(fd, path);
  return fd;
}
int openat(int dirfd, const char* path, int flags, ...) {
  resolve();
  mode_t mode;
  OPEN_MODE(flags, mode);
  int fd = real_openat(dirfd, path, flags, mode);
  track(fd, path);
  return fd;
}
int close(int fd) {
  resolve();
  if (fd >= 0 && fd < MAX_FD) {
    pthread_mutex_lock(&g_lock);
    g_match[fd] = 0;
    pthread_mutex_unlock(&g_lock);
  }
  return real_close(fd);
}

ssize_t write(int fd, const void* buf, size_t n) {
  long long a = admit(fd, OP_WRITE, (long long)n);
  if (a < 0) return -1;
  return real_write(fd, buf, (size_t)a);
}
ssize_t pwrite(int fd, const void* buf, size_t n, off_t off) {
  long long a = admit(fd, OP_WRITE, (long long)n);
  if (a < 0) return -1;
  return real_pwrite(fd, buf, (size_t)a, off);
}
ssize_t pwrite64(int fd, const void* buf, size_t n, off_t off) {
  long long a = admit(fd, OP_WRITE, (long long)n);
  if (a < 0) return -1;
  return (real_pwrite64 ? real_pwrite64 : real_pwrite)(fd, buf, (size_t)a, off);
}
static long long iov_bytes(const struct iovec* v, int cnt) {
  long long n = 0;
  for (int i = 0; i < cnt; ++i) n += (long long)v[i].iov_len;
  return n;
}
ssize_t pwritev(int fd, const struct iovec* v, int cnt, off_t off) {
  const long long n = iov_bytes(v, cnt);
  long long a = admit(fd, OP_WRITE, n);
  if (a < 0) return -1;
  if (a < n) { /* cut short: write the first `a` bytes only */
    long long done = 0;
    for (int i = 0; i < cnt && done < a; ++i) {
      size_t part = (size_t)(a - done < (long long)v[i].iov_len ? a - done : (long long)v[i].iov_len);
      ssize_t w = real_pwrite(fd, v[i].iov_base, part, off + done);
      if (w < 0) return done > 0 ? done : -1;
      done += w;
    }
    return (ssize_t)done;
  }
  return real_pwritev(fd, v, cnt, off);
}
ssize_t writev(int fd, const struct iovec* v, int cnt) {
  const long long n = iov_bytes(v, cnt);
  long long a = admit(fd, OP_WRITE, n);
  if (a < 0) return -1;
  if (a < n) { /* keep it simple: a cut-short writev fails as a whole */
    errno = g_errno;
    return -1;
  }
  return real_writev(fd, v, cnt);
}
int fsync(int fd) {
  if (admit(fd, OP_SYNC, 0) < 0) return -1;
  return real_fsync(fd);
}
int fdatasync(int fd) {
  if (admit(fd, OP_SYNC, 0) < 0) return -1;
  return real_fdatasync(fd);
}
