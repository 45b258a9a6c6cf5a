/* The C API (ckpt/ckpt.h) end to end at 4 ranks: create from a YAML file, protect a box of a global
 * array, a local array and a scalar, checkpoint with and without a ticket, restart a given step and
 * the newest, update, unprotect, and the error paths (codes and messages). C99, built with -Wall
 * -Wextra -pedantic -Werror. Scratch directory: $CKPTTEST_TMP. Exit status 0 when every check held. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "ckpt/ckpt.h"
#include "ckpt_check.h"

/* Code `got` equals `want`; prints the message of `rt` (or the thread's) when not. */
#define CHECK_RC(got, want, rt) CHECK_CODE(got, want, ckpt_error_message(rt))

enum { ROWS_PER_RANK = 3, COLS = 5, LOCAL_N = 7 };

/* Value of global element (r, c) at `step`. */
static double field_value(int64_t step, uint64_t r, uint64_t c) {
  return (double)step * 1000.0 + (double)(r * COLS + c);
}

static void fill(int64_t step, double* field, int32_t* local, double* t) {
  for (uint64_t r = 0; r < ROWS_PER_RANK; ++r)
    for (uint64_t c = 0; c < COLS; ++c)
      field[r * COLS + c] = field_value(step, (uint64_t)g_rank * ROWS_PER_RANK + r, c);
  for (int i = 0; i < LOCAL_N; ++i) local[i] = (int32_t)(step * 100 + g_rank * 10 + i);
  *t = 0.5 * (double)step;
}

static int matches(int64_t step, const double* field, const int32_t* local, double t) {
  double f[ROWS_PER_RANK * COLS];
  int32_t l[LOCAL_N];
  double tt;
  fill(step, f, l, &tt);
  return memcmp(f, field, sizeof f) == 0 && memcmp(l, local, sizeof l) == 0 && tt == t;
}

int main(int argc, char** argv) {
  int provided = 0, size = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);

  const char* tmp = getenv("CKPTTEST_TMP");
  char dir[512], yaml[600], bad_yaml[600];
  snprintf(dir, sizeof dir, "%s/c_api", tmp != NULL ? tmp : "/tmp/ckpt-c-api-test");
  snprintf(yaml, sizeof yaml, "%s.yaml", dir);
  snprintf(bad_yaml, sizeof bad_yaml, "%s.bad.yaml", dir);
  if (g_rank == 0) {
    char text[700];
    fresh_dir(dir);
    snprintf(text, sizeof text, "dir: %s\nkeep: 3\nfsync: false\n", dir);
    write_text(yaml, text);
    write_text(bad_yaml, "no_such_option: 1\n");
  }
  MPI_Barrier(MPI_COMM_WORLD);

  /* ---- create: error paths, then from a YAML file ---- */
  CHECK(strlen(ckpt_version()) > 0);
  CHECK(strcmp(ckpt_code_name(CKPT_MISMATCH), "mismatch") == 0);
  CHECK(strcmp(ckpt_code_name(CKPT_SUPERSEDED), "superseded") == 0);
  CHECK(strcmp(ckpt_code_name(42), "unknown") == 0);
  ckpt_runtime* rt = (ckpt_runtime*)&rt; /* must be reset to NULL on failure */
  CHECK_RC(ckpt_create(MPI_COMM_WORLD, bad_yaml, &rt), CKPT_INVALID_ARGUMENT, NULL);
  CHECK(rt == NULL);
  CHECK(strstr(ckpt_last_error(), "no_such_option") != NULL);
  CHECK(strstr(ckpt_error_message(NULL), "no_such_option") != NULL);
  {
    char missing[700];
    snprintf(missing, sizeof missing, "%s/does-not-exist.yaml", dir);
    CHECK(ckpt_create(MPI_COMM_WORLD, missing, &rt) != CKPT_OK);
    CHECK(rt == NULL);
    CHECK(strstr(ckpt_last_error(), "does-not-exist.yaml") != NULL);
  }
  {
    int wrong = 0;
    CHECK_RC(ckpt_create_handle(&wrong, sizeof wrong + 1, NULL, &rt), CKPT_INVALID_ARGUMENT, NULL);
    CHECK(rt == NULL);
    CHECK_RC(ckpt_create_handle(NULL, 0, NULL, NULL), CKPT_INVALID_ARGUMENT, NULL);
  }
  /* A Fortran handle works as well; closed and freed at once. */
  CHECK_RC(ckpt_create_fortran((int)MPI_Comm_c2f(MPI_COMM_WORLD), yaml, &rt), CKPT_OK, NULL);
  CHECK(rt != NULL);
  ckpt_free(rt);
  rt = NULL;

  CHECK_RC(ckpt_create(MPI_COMM_WORLD, yaml, &rt), CKPT_OK, NULL);
  if (rt == NULL) {
    fprintf(stderr, "rank %d: no runtime: %s\n", g_rank, ckpt_last_error());
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  int r = -1, n = -1;
  CHECK_RC(ckpt_rank(rt, &r), CKPT_OK, rt);
  CHECK_RC(ckpt_size(rt, &n), CKPT_OK, rt);
  CHECK(r == g_rank && n == size);
  CHECK(strcmp(ckpt_error_message(rt), "") == 0);

  /* ---- protect ---- */
  double field[ROWS_PER_RANK * COLS];
  int32_t local[LOCAL_N];
  double t = 0;
  const uint64_t global[2] = {(uint64_t)size * ROWS_PER_RANK, COLS};
  const uint64_t start[2] = {(uint64_t)g_rank * ROWS_PER_RANK, 0};
  const uint64_t count[2] = {ROWS_PER_RANK, COLS};
  const uint64_t ldims[1] = {LOCAL_N};
  CHECK_RC(ckpt_protect_block(rt, "grid/field", field, CKPT_F64, 2, global, start, count), CKPT_OK, rt);
  CHECK_RC(ckpt_protect(rt, "local", local, CKPT_I32, 1, ldims), CKPT_OK, rt);
  CHECK_RC(ckpt_protect_scalar(rt, "time", &t, CKPT_F64), CKPT_OK, rt);
  CHECK_RC(ckpt_annotate(rt, "grid/field", "units", "K"), CKPT_OK, rt);

  /* protect: error paths, each with its code and a message on the runtime */
  CHECK_RC(ckpt_protect_scalar(rt, "time", &t, CKPT_F64), CKPT_INVALID_ARGUMENT, rt);
  CHECK(strstr(ckpt_error_message(rt), "time") != NULL);
  CHECK(strstr(ckpt_last_error(), "time") != NULL);
  CHECK_RC(ckpt_protect(rt, "bad_dtype", local, 0, 1, ldims), CKPT_INVALID_ARGUMENT, rt);
  CHECK(strstr(ckpt_error_message(rt), "dtype") != NULL);
  CHECK_RC(ckpt_protect(rt, "bad_dtype", local, 99, 1, ldims), CKPT_INVALID_ARGUMENT, rt);
  CHECK_RC(ckpt_protect(rt, "bad_ndims", local, CKPT_I32, -1, ldims), CKPT_INVALID_ARGUMENT, rt);
  CHECK_RC(ckpt_protect(rt, "bad_ndims", local, CKPT_I32, CKPT_MAX_DIMS + 1, ldims), CKPT_INVALID_ARGUMENT, rt);
  CHECK_RC(ckpt_protect(rt, "null_dims", local, CKPT_I32, 1, NULL), CKPT_INVALID_ARGUMENT, rt);
  CHECK_RC(ckpt_protect(rt, "null_ptr", NULL, CKPT_I32, 1, ldims), CKPT_INVALID_ARGUMENT, rt);
  CHECK_RC(ckpt_protect(rt, "../escape", local, CKPT_I32, 1, ldims), CKPT_INVALID_ARGUMENT, rt);
  CHECK_RC(ckpt_protect(rt, NULL, local, CKPT_I32, 1, ldims), CKPT_INVALID_ARGUMENT, rt);
  CHECK_RC(ckpt_protect(NULL, "x", local, CKPT_I32, 1, ldims), CKPT_INVALID_ARGUMENT, NULL);
  CHECK(strstr(ckpt_last_error(), "NULL") != NULL);
  CHECK_RC(ckpt_protect_block(rt, "box", field, CKPT_F64, 2, global, start, NULL), CKPT_INVALID_ARGUMENT, rt);
  CHECK_RC(ckpt_annotate(rt, "no_such_region", "k", "v"), CKPT_NOT_FOUND, rt);
  CHECK_RC(ckpt_unprotect(rt, "no_such_region"), CKPT_NOT_FOUND, rt);
  CHECK_RC(ckpt_update(rt, "no_such_region", local, 1, ldims), CKPT_NOT_FOUND, rt);

  /* ---- checkpoint 1 with a ticket, checkpoint 2 without ---- */
  fill(1, field, local, &t);
  ckpt_ticket* tk = NULL;
  CHECK_RC(ckpt_checkpoint(rt, 1, NULL, &tk), CKPT_OK, rt);
  CHECK(tk != NULL);
  fill(99, field, local, &t); /* the data was captured: overwriting it is allowed at once */
  CHECK_RC(ckpt_ticket_wait(tk), CKPT_OK, NULL);
  int done = 0;
  CHECK_RC(ckpt_ticket_done(tk, &done), CKPT_OK, NULL);
  CHECK(done == 1);
  ckpt_checkpoint_stats st;
  memset(&st, 0, sizeof st);
  CHECK_RC(ckpt_ticket_stats(tk, &st), CKPT_OK, NULL);
  CHECK(st.step == 1);
  CHECK(st.bytes == sizeof field + sizeof local + sizeof t);
  CHECK(st.committed_s > 0 && st.blocked_s >= 0 && st.bytes_written >= st.bytes);
  ckpt_ticket_free(tk);
  CHECK_RC(ckpt_ticket_wait(NULL), CKPT_INVALID_ARGUMENT, NULL);
  CHECK_RC(ckpt_ticket_done(NULL, &done), CKPT_INVALID_ARGUMENT, NULL);
  ckpt_ticket_free(NULL);

  fill(2, field, local, &t);
  CHECK_RC(ckpt_checkpoint(rt, 2, NULL, NULL), CKPT_OK, rt);
  CHECK_RC(ckpt_poll(rt), CKPT_OK, rt); /* funneled: commits what every rank wrote; threaded: nothing */
  CHECK_RC(ckpt_poll(NULL), CKPT_INVALID_ARGUMENT, NULL);
  CHECK_RC(ckpt_wait_all(rt), CKPT_OK, rt);
  CHECK_RC(ckpt_checkpoint(rt, -1, NULL, NULL), CKPT_INVALID_ARGUMENT, rt);
  CHECK(strstr(ckpt_error_message(rt), "-1") != NULL);

  int64_t step = -7;
  CHECK_RC(ckpt_latest(rt, &step), CKPT_OK, rt);
  CHECK(step == 2);

  /* ---- restart a given step, then the newest ---- */
  fill(0, field, local, &t);
  CHECK_RC(ckpt_restart_step(rt, 1), CKPT_OK, rt);
  CHECK(matches(1, field, local, t));
  fill(0, field, local, &t);
  step = -7;
  CHECK_RC(ckpt_restart(rt, &step), CKPT_OK, rt);
  CHECK(step == 2);
  CHECK(matches(2, field, local, t));
  CHECK_RC(ckpt_restart_step(rt, 99), CKPT_NOT_FOUND, rt);
  CHECK(strlen(ckpt_error_message(rt)) > 0);

  /* ---- update: the local array grows; checkpoint 3 holds the new extents ---- */
  int32_t bigger[2 * LOCAL_N];
  const uint64_t bdims[1] = {2 * LOCAL_N};
  for (int i = 0; i < 2 * LOCAL_N; ++i) bigger[i] = g_rank * 1000 + i;
  CHECK_RC(ckpt_update(rt, "local", bigger, 1, bdims), CKPT_OK, rt);
  CHECK_RC(ckpt_checkpoint(rt, 3, NULL, NULL), CKPT_OK, rt);
  CHECK_RC(ckpt_wait_all(rt), CKPT_OK, rt);
  memset(bigger, 0, sizeof bigger);
  CHECK_RC(ckpt_restart_step(rt, 3), CKPT_OK, rt);
  CHECK(bigger[2 * LOCAL_N - 1] == g_rank * 1000 + 2 * LOCAL_N - 1);
  /* step 2 stored 7 elements: restarting it into 14 is a mismatch, named in the message */
  CHECK_RC(ckpt_restart_step(rt, 2), CKPT_MISMATCH, rt);
  CHECK(strstr(ckpt_error_message(rt), "local") != NULL);

  /* ---- unprotect: a restart fills only what is still protected ---- */
  CHECK_RC(ckpt_unprotect(rt, "local"), CKPT_OK, rt);
  fill(0, field, local, &t);
  CHECK_RC(ckpt_restart_step(rt, 2), CKPT_OK, rt);
  CHECK(field[COLS + 1] == field_value(2, (uint64_t)g_rank * ROWS_PER_RANK + 1, 1) && t == 1.0);

  /* ---- joined arrays: rank r holds r rows (rank 0 none); restart reads the balanced split ---- */
  {
    const int64_t nrows = g_rank; /* rows before rank r: r (r - 1) / 2 */
    double rows[4 * 2];
    for (int64_t i = 0; i < nrows; ++i)
      for (int c = 0; c < 2; ++c) rows[i * 2 + c] = 10.0 * (double)((g_rank * (g_rank - 1)) / 2 + i) + c;
    uint64_t jdims[2] = {(uint64_t)nrows, 2};
    CHECK_RC(ckpt_protect_joined(rt, "joined", nrows ? rows : NULL, CKPT_F64, 2, jdims, CKPT_BALANCED), CKPT_OK, rt);
    CHECK_RC(ckpt_protect_joined(rt, "joined0", rows, CKPT_F64, 0, jdims, CKPT_BALANCED), CKPT_INVALID_ARGUMENT, rt);
    /* first_row: a row (>= 0) or CKPT_BALANCED; any other negative value is an error naming it */
    CHECK_RC(ckpt_protect_joined(rt, "joined_neg", rows, CKPT_F64, 2, jdims, -2), CKPT_INVALID_ARGUMENT, rt);
    CHECK(strstr(ckpt_error_message(rt), "first_row") != NULL && strstr(ckpt_error_message(rt), "-2") != NULL);
    CHECK_RC(ckpt_update_joined(rt, "joined", nrows ? rows : NULL, 2, jdims, INT64_MIN), CKPT_INVALID_ARGUMENT, rt);
    CHECK(strstr(ckpt_error_message(rt), "first_row") != NULL);
    /* an extent or start of 2^63 or more is a negative number that was cast: refused, naming it */
    {
      int32_t one = 0;
      const uint64_t wrapped[1] = {(uint64_t)(int64_t)-5}, g1[1] = {4}, s1[1] = {(uint64_t)(int64_t)-1}, c1[1] = {1};
      CHECK_RC(ckpt_protect(rt, "wrapped", &one, CKPT_U8, 1, wrapped), CKPT_INVALID_ARGUMENT, rt);
      CHECK(strstr(ckpt_error_message(rt), "dims[0]") != NULL);
      CHECK_RC(ckpt_protect_block(rt, "wrapped", &one, CKPT_I32, 1, g1, s1, c1), CKPT_INVALID_ARGUMENT, rt);
      CHECK(strstr(ckpt_error_message(rt), "start[0]") != NULL);
    }
    CHECK_RC(ckpt_checkpoint(rt, 5, NULL, NULL), CKPT_OK, rt);
    CHECK_RC(ckpt_wait_all(rt), CKPT_OK, rt);
    uint64_t total = 0, begin = 0, end = 0;
    CHECK_RC(ckpt_joined_rows(rt, 5, "joined", &total, &begin, &end), CKPT_OK, rt);
    CHECK(total == (uint64_t)(size * (size - 1)) / 2);
    CHECK(end - begin <= 4);
    CHECK_RC(ckpt_joined_rows(rt, 5, "grid/field", &total, &begin, &end), CKPT_MISMATCH, rt);
    CHECK_RC(ckpt_joined_rows(rt, 5, "joined", NULL, &begin, &end), CKPT_INVALID_ARGUMENT, rt);
    CHECK_RC(ckpt_joined_rows(rt, 5, "joined", &total, &begin, &end), CKPT_OK, rt);
    memset(rows, 0, sizeof rows);
    jdims[0] = end - begin;
    CHECK_RC(ckpt_update_joined(rt, "joined", rows, 2, jdims, CKPT_BALANCED), CKPT_OK, rt);
    CHECK_RC(ckpt_restart_step(rt, 5), CKPT_OK, rt);
    for (uint64_t i = 0; i < end - begin; ++i) CHECK(rows[i * 2 + 1] == 10.0 * (double)(begin + i) + 1);
    /* explicit rows: every rank reads row 0 */
    jdims[0] = 1;
    CHECK_RC(ckpt_update_joined(rt, "joined", rows, 2, jdims, 0), CKPT_OK, rt);
    CHECK_RC(ckpt_restart_step(rt, 5), CKPT_OK, rt);
    CHECK(rows[0] == 0.0 && rows[1] == 1.0);
    /* rows past the end: a mismatch naming the array */
    CHECK_RC(ckpt_update_joined(rt, "joined", rows, 2, jdims, (int64_t)total), CKPT_OK, rt);
    CHECK_RC(ckpt_restart_step(rt, 5), CKPT_MISMATCH, rt);
    CHECK(strstr(ckpt_error_message(rt), "joined") != NULL);
    CHECK_RC(ckpt_unprotect(rt, "joined"), CKPT_OK, rt);
    /* an optional region missing from checkpoint 5 is left untouched */
    double added = 42.0;
    CHECK_RC(ckpt_protect_scalar(rt, "added", &added, CKPT_F64), CKPT_OK, rt);
    CHECK_RC(ckpt_restart_step(rt, 5), CKPT_NOT_FOUND, rt);
    CHECK_RC(ckpt_set_optional(rt, "nope", 1), CKPT_NOT_FOUND, rt);
    CHECK_RC(ckpt_set_optional(rt, "added", 1), CKPT_OK, rt);
    CHECK_RC(ckpt_restart_step(rt, 5), CKPT_OK, rt);
    CHECK(added == 42.0);
    CHECK_RC(ckpt_unprotect(rt, "added"), CKPT_OK, rt);
  }

  /* ---- a memory selection: the 3 x 4 interior of a 5 x 6 allocation, ghosts left as they are ---- */
  {
    double u[5][6];
    for (int i = 0; i < 5; ++i)
      for (int j = 0; j < 6; ++j) u[i][j] = (i >= 1 && i < 4 && j >= 1 && j < 5) ? 100.0 * g_rank + 10 * i + j : -1.0;
    const uint64_t box[2] = {3, 4}, start[2] = {1, 1}, alloc[2] = {5, 6}, too_far[2] = {2, 3};
    const uint64_t negative[2] = {(uint64_t)-1, 1};
    CHECK_RC(ckpt_protect(rt, "interior", u, CKPT_F64, 2, box), CKPT_OK, rt);
    CHECK_RC(ckpt_set_memory_selection(rt, "interior", 2, too_far, alloc), CKPT_INVALID_ARGUMENT, rt);
    CHECK(strstr(ckpt_error_message(rt), "interior") != NULL);
    CHECK_RC(ckpt_set_memory_selection(rt, "interior", 1, start, alloc), CKPT_INVALID_ARGUMENT, rt);
    CHECK_RC(ckpt_set_memory_selection(rt, "interior", 2, NULL, alloc), CKPT_INVALID_ARGUMENT, rt);
    CHECK_RC(ckpt_set_memory_selection(rt, "interior", 2, negative, alloc), CKPT_INVALID_ARGUMENT, rt);
    CHECK_RC(ckpt_set_memory_selection(rt, "nope", 2, start, alloc), CKPT_NOT_FOUND, rt);
    CHECK_RC(ckpt_set_memory_selection(rt, "interior", 2, start, alloc), CKPT_OK, rt);
    CHECK_RC(ckpt_checkpoint(rt, 9, NULL, NULL), CKPT_OK, rt);
    CHECK_RC(ckpt_wait_all(rt), CKPT_OK, rt);
    for (int i = 0; i < 5; ++i)
      for (int j = 0; j < 6; ++j) u[i][j] = 7.0;
    CHECK_RC(ckpt_restart_step(rt, 9), CKPT_OK, rt);
    for (int i = 0; i < 5; ++i)
      for (int j = 0; j < 6; ++j)
        CHECK(u[i][j] == ((i >= 1 && i < 4 && j >= 1 && j < 5) ? 100.0 * g_rank + 10 * i + j : 7.0));
    CHECK_RC(ckpt_unprotect(rt, "interior"), CKPT_OK, rt);
  }

  /* ---- close: later calls fail, close is idempotent, free is NULL-safe ---- */
  CHECK_RC(ckpt_close(rt), CKPT_OK, rt);
  CHECK_RC(ckpt_close(rt), CKPT_OK, rt);
  CHECK_RC(ckpt_checkpoint(rt, 4, NULL, NULL), CKPT_FAILED_PRECONDITION, rt);
  CHECK_RC(ckpt_restart_step(rt, 2), CKPT_FAILED_PRECONDITION, rt);
  CHECK_RC(ckpt_report_error(rt, CKPT_IO_ERROR, "from a binding"), CKPT_IO_ERROR, rt);
  CHECK(strstr(ckpt_error_message(rt), "io_error: from a binding") != NULL);
  ckpt_free(rt);
  ckpt_free(NULL);

  return check_finish("c_api");
}
