/* killat: an LD_PRELOAD shim that SIGKILLs its process at the n-th call of chosen file-system
 * operations - a crash at an exact step of the commit protocol (issue 14).
 *   KILLAT_OPS   comma list of rename, unlink, rmdir, fsync, fdatasync, symlink, mkdir ("all" = every one)
 *   KILLAT_N     the call (1-based, counted over the chosen operations) that kills; 0 = never
 *   KILLAT_UNDER only count calls on paths starting with this prefix (fsync/fdatasync: always counted)
 *   KILLAT_LOG   append "<op> <path>" of every counted call to this file (to enumerate the steps)
 *   KILLAT_RANK  only the process whose OMPI_COMM_WORLD_RANK is this counts (default: every process)
 * Relative paths (of the *at calls) are always counted. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static long g_count = 0;

static int chosen(const char* op) {
  const char* ops = getenv("KILLAT_OPS");
  if (ops == NULL) return 0;
  if (strcmp(ops, "all") == 0) return 1;
  size_t n = strlen(op);
  for (const char* p = ops; (p = strstr(p, op)) != NULL; p += n)
    if ((p == ops || p[-1] == ',') && (p[n] == ',' || p[n] == '\0')) return 1;
  return 0;
}

/* Counts the call; kills the process when it is the KILLAT_N-th. */
static void step(const char* op, const char* path) {
  if (!chosen(op)) return;
  const char* only = getenv("KILLAT_RANK");
  const char* me = getenv("OMPI_COMM_WORLD_RANK");
  if (only != NULL && (me == NULL || strcmp(only, me) != 0)) return;
  const char* under = getenv("KILLAT_UNDER");
  if (path != NULL && path[0] == '/' && under != NULL && strncmp(path, under, strlen(under)) != 0) return;
  const char* ns = getenv("KILLAT_N");
  long n = ns ? atol(ns) : 0;
  pthread_mutex_lock(&g_mu);
  long k = ++g_count;
  const char* log = getenv("KILLAT_LOG");
  if (log != NULL) {
    FILE* f = fopen(log, "a");
    if (f != NULL) {
      fprintf(f, "%ld %s %s\n", k, op, path ? path : "-");
      fclose(f);
    }
  }
  pthread_mutex_unlock(&g_mu);
  if (n > 0 && k == n) kill(getpid(), SIGKILL);
}

#define REAL(name, ret, args)    \
  static ret(*real) args = NULL; \
  if (real == NULL) real = (ret(*) args)dlsym(RTLD_NEXT, name)

int rename(const char* a, const char* b) {
  REAL("rename", int, (const char*, const char*));
  step("rename", a);
  return real(a, b);
}
int unlink(const char* p) {
  REAL("unlink", int, (const char*));
  step("unlink", p);
  return real(p);
}
int rmdir(const char* p) {
  REAL("rmdir", int, (const char*));
  step("rmdir", p);
  return real(p);
}
int symlink(const char* t, const char* p) {
  REAL("symlink", int, (const char*, const char*));
  step("symlink", p);
  return real(t, p);
}
int mkdir(const char* p, mode_t m) {
  REAL("mkdir", int, (const char*, mode_t));
  step("mkdir", p);
  return real(p, m);
}
int fsync(int fd) {
  REAL("fsync", int, (int));
  step("fsync", NULL);
  return real(fd);
}
int fdatasync(int fd) {
  REAL("fdatasync", int, (int));
  step("fdatasync", NULL);
  return real(fd);
}
int renameat(int da, const char* a, int db, const char* b) {
  REAL("renameat", int, (int, const char*, int, const char*));
  step("rename", a);
  return real(da, a, db, b);
}
int unlinkat(int d, const char* p, int flags) {
  REAL("unlinkat", int, (int, const char*, int));
  step((flags & AT_REMOVEDIR) ? "rmdir" : "unlink", p);
  return real(d, p, flags);
}
int mkdirat(int d, const char* p, mode_t m) {
  REAL("mkdirat", int, (int, const char*, mode_t));
  step("mkdir", p);
  return real(d, p, m);
}
