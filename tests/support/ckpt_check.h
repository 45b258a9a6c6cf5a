/* Checks of the C tests (tests/bindings/test_c_api*.c, tests/reader/test_c_reader.c): a failed check
 * prints rank, file, line and what failed, counts in g_failures and goes on; main() returns the count.
 * Also the scratch-file helpers they share (fresh_dir, write_text).
 * One translation unit per test: the counters are static. */
#ifndef CKPT_TESTS_CKPT_CHECK_H
#define CKPT_TESTS_CKPT_CHECK_H

#include <stdio.h>
#include <stdlib.h>

#include "ckpt/ckpt.h"

static int g_rank = 0;
static int g_failures = 0;

#define CHECK(cond)                                                                             \
  do {                                                                                          \
    if (!(cond)) {                                                                              \
      fprintf(stderr, "rank %d: %s:%d: CHECK(%s) failed\n", g_rank, __FILE__, __LINE__, #cond); \
      ++g_failures;                                                                             \
    }                                                                                           \
  } while (0)

/* Code `got` equals `want`; prints `message` (the error text that explains it) when not. */
#define CHECK_CODE(got, want, message)                                                                        \
  do {                                                                                                        \
    int rc_ = (got);                                                                                          \
    if (rc_ != (want)) {                                                                                      \
      fprintf(stderr, "rank %d: %s:%d: %s returned %s, expected %s (%s)\n", g_rank, __FILE__, __LINE__, #got, \
              ckpt_code_name(rc_), ckpt_code_name(want), (message));                                          \
      ++g_failures;                                                                                           \
    }                                                                                                         \
  } while (0)

/* Empties directory `dir` (rm -rf, then mkdir -p); a check fails when it cannot. Called by one rank. */
static inline void fresh_dir(const char* dir) {
  char cmd[2200];
  snprintf(cmd, sizeof cmd, "rm -rf '%s' && mkdir -p '%s'", dir, dir);
  CHECK(system(cmd) == 0);
}

/* Writes `text` to the file `path` (a config file); a check fails when it cannot. */
static inline void write_text(const char* path, const char* text) {
  FILE* f = fopen(path, "w");
  CHECK(f != NULL);
  if (f != NULL) {
    fputs(text, f);
    fclose(f);
  }
}

#ifdef MPI_VERSION /* tests on MPI ranks (mpi.h included first) */
/* The end of an MPI test's main(): every rank's failed checks summed, rank 0 prints the verdict of
 * test `name`, MPI finalized; main() returns what this returns. */
static inline int check_finish(const char* name) {
  int failures = 0, size = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  MPI_Allreduce(&g_failures, &failures, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (g_rank == 0) printf("%s: %s (%d failed checks over %d ranks)\n", name, failures ? "FAILED" : "ok", failures, size);
  MPI_Finalize();
  return failures ? 1 : 0;
}
#endif

#endif /* CKPT_TESTS_CKPT_CHECK_H */
