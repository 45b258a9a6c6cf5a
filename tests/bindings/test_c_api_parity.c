/* The C API's parity with ckpt::Runtime at 4 ranks (ckpt/ckpt.h, "The runtime's parity"): sizing before
 * a restart (ckpt_steps, ckpt_inspect: variables, dtype, kind, shape, a joined array's rows per rank and
 * in total, attributes), a restart through ckpt_protect_source whose resize callback is asked again for
 * each step ckpt_restart tries (step 2 is damaged: it falls back to step 1 and the regions get step 1's
 * extents), the resolved options (ckpt_dir after the YAML file and CKPT_DIR, ckpt_options_yaml),
 * ckpt_funneled, ckpt_restart_level, ckpt_restart_index_bytes, ckpt_skipped_optional, the fall-back's
 * warning (ckpt_restart_warning), and the error paths. C99, built with -Wall -Wextra -pedantic -Werror. Scratch
 * directory: $CKPTTEST_TMP. Exit status 0 when every check held. */
#define _POSIX_C_SOURCE 200809L /* setenv, truncate */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ckpt/ckpt.h"
#include "ckpt_check.h"

#define CHECK_RC(got, want, rt) CHECK_CODE(got, want, ckpt_error_message(rt))

enum { WIDTH = 2, MAX_RESIZES = 8 };

/* A growable array followed by callbacks: what an application keeps for a region whose length
 * depends on the step (particles, AMR blocks), and the extents each resize asked for. */
typedef struct {
  double* data;
  uint64_t n;     /* rows (joined) or elements (local) */
  uint64_t width; /* elements per row; 1 for a local vector */
  int joined;
  int resizes;
  uint64_t asked[MAX_RESIZES]; /* dims[0] of each resize call */
  int fail_resize;             /* a code to return from resize, or 0 */
} Buffer;

static int locate(void* user, void** ptr, int* ndims, uint64_t* dims) {
  Buffer* b = (Buffer*)user;
  *ptr = b->n > 0 ? b->data : NULL;
  dims[0] = b->n;
  dims[1] = b->width;
  *ndims = b->joined ? 2 : 1;
  return CKPT_OK;
}

static int resize(void* user, int ndims, const uint64_t* dims) {
  Buffer* b = (Buffer*)user;
  if (b->fail_resize) return b->fail_resize;
  if (ndims != (b->joined ? 2 : 1) || (b->joined && dims[1] != b->width)) return CKPT_MISMATCH;
  if (b->resizes < MAX_RESIZES) b->asked[b->resizes] = dims[0];
  ++b->resizes;
  double* p = (double*)realloc(b->data, (size_t)(dims[0] * b->width + 1) * sizeof(double));
  if (p == NULL) return CKPT_INTERNAL;
  b->data = p;
  b->n = dims[0];
  for (uint64_t i = 0; i < b->n * b->width; ++i) b->data[i] = -1.0; /* must all be overwritten */
  return CKPT_OK;
}

/* Sets b to n rows of width w; row k holds {id0 + k, step, ...}. */
static void fill(Buffer* b, uint64_t n, uint64_t id0, int64_t step) {
  b->data = (double*)realloc(b->data, (size_t)(n * b->width + 1) * sizeof(double));
  b->n = n;
  for (uint64_t k = 0; k < n; ++k) {
    b->data[k * b->width] = (double)(id0 + k);
    if (b->width > 1) b->data[k * b->width + 1] = (double)step;
  }
}

/* Locate callbacks that fail in each way the runtime must refuse. */
static int locate_error(void* user, void** ptr, int* ndims, uint64_t* dims) {
  (void)user, (void)dims;
  *ptr = NULL;
  *ndims = 0;
  return CKPT_IO_ERROR;
}
static int locate_negative(void* user, void** ptr, int* ndims, uint64_t* dims) {
  (void)user;
  *ptr = NULL;
  *ndims = 1;
  dims[0] = (uint64_t)(int64_t)-5;
  return CKPT_OK;
}
static int locate_too_many_dims(void* user, void** ptr, int* ndims, uint64_t* dims) {
  (void)user, (void)dims;
  *ptr = NULL;
  *ndims = CKPT_MAX_DIMS + 1;
  return CKPT_OK;
}

static int create(const char* config, const char* options, ckpt_runtime** rt) {
  MPI_Comm world = MPI_COMM_WORLD;
  return ckpt_create_handle_options(&world, sizeof world, config, options, rt);
}

/* First row of rank r's balanced share of `total` rows over `size` ranks (ckpt::balanced_rows). */
static uint64_t share_begin(uint64_t total, int r, int size) { return total * (uint64_t)r / (uint64_t)size; }

int main(int argc, char** argv) {
  int provided = 0, size = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const char* tmp = getenv("CKPTTEST_TMP");
  char base[512], yaml[600], from_yaml[600], from_env[600], text[1400];
  snprintf(base, sizeof base, "%s/c_api_parity", tmp != NULL ? tmp : "/tmp/ckpt-c-api-parity-test");
  snprintf(yaml, sizeof yaml, "%s/options.yaml", base);
  snprintf(from_yaml, sizeof from_yaml, "%s/yaml_dir", base);
  snprintf(from_env, sizeof from_env, "%s/env_dir", base);
  if (g_rank == 0) {
    fresh_dir(base);
    snprintf(text, sizeof text, "dir: %s\nkeep: 5\nfsync: false\n", from_yaml);
    write_text(yaml, text);
  }
  MPI_Barrier(MPI_COMM_WORLD);

  /* ---- the resolved directory: from the YAML file, then CKPT_DIR over it ---- */
  {
    ckpt_runtime* rt = NULL;
    const char* dir = NULL;
    const char* yaml_text = NULL;
    CHECK(setenv("CKPT_DIR", from_env, 1) == 0);
    CHECK_RC(create(yaml, NULL, &rt), CKPT_OK, NULL);
    CHECK(unsetenv("CKPT_DIR") == 0);
    if (rt == NULL) MPI_Abort(MPI_COMM_WORLD, 1);
    CHECK_RC(ckpt_dir(rt, &dir), CKPT_OK, rt);
    CHECK(dir != NULL && strcmp(dir, from_env) == 0);
    CHECK_RC(ckpt_options_yaml(rt, &yaml_text), CKPT_OK, rt);
    CHECK(yaml_text != NULL && strstr(yaml_text, from_env) != NULL && strstr(yaml_text, "keep: 5") != NULL);
    CHECK_RC(ckpt_dir(rt, NULL), CKPT_INVALID_ARGUMENT, NULL);
    CHECK_RC(ckpt_dir(NULL, &dir), CKPT_INVALID_ARGUMENT, NULL);
    CHECK_RC(ckpt_options_yaml(rt, NULL), CKPT_INVALID_ARGUMENT, rt);
    ckpt_free(rt);
  }
  {
    /* mpi_threads: funneled from the options text; ckpt_steps commits on this thread first. */
    ckpt_runtime* rt = NULL;
    int funneled = -1;
    snprintf(text, sizeof text, "{\"mpi_threads\": \"funneled\", \"dir\": \"%s/funneled\"}", base);
    CHECK_RC(create(yaml, text, &rt), CKPT_OK, NULL);
    if (rt == NULL) MPI_Abort(MPI_COMM_WORLD, 1);
    CHECK_RC(ckpt_funneled(rt, &funneled), CKPT_OK, rt);
    CHECK(funneled == 1);
    CHECK_RC(ckpt_funneled(rt, NULL), CKPT_INVALID_ARGUMENT, NULL);
    double value = 1.0;
    int64_t steps[2] = {0, 0};
    size_t count = 0;
    CHECK_RC(ckpt_protect_scalar(rt, "value", &value, CKPT_F64), CKPT_OK, rt);
    CHECK_RC(ckpt_checkpoint(rt, 5, NULL, NULL), CKPT_OK, rt);
    CHECK_RC(ckpt_wait_all(rt), CKPT_OK, rt);
    CHECK_RC(ckpt_steps(rt, steps, 2, &count), CKPT_OK, rt);
    CHECK(count == 1 && steps[0] == 5);
    ckpt_free(rt);
  }

  /* ---- write: steps 1 and 2 with step-dependent lengths ---- */
  ckpt_runtime* rt = NULL;
  CHECK_RC(create(yaml, NULL, &rt), CKPT_OK, NULL);
  if (rt == NULL) MPI_Abort(MPI_COMM_WORLD, 1);
  {
    const char* dir = NULL;
    CHECK_RC(ckpt_dir(rt, &dir), CKPT_OK, rt);
    CHECK(dir != NULL && strcmp(dir, from_yaml) == 0);
    size_t count = 99;
    CHECK_RC(ckpt_steps(rt, NULL, 0, &count), CKPT_OK, rt);
    CHECK(count == 0);
  }
  ckpt_reader_step* kept = NULL;
  Buffer rows = {NULL, 0, WIDTH, 1, 0, {0}, 0};
  Buffer hist = {NULL, 0, 1, 0, 0, {0}, 0};
  int64_t step = 0;
  CHECK_RC(ckpt_protect_scalar(rt, "step", &step, CKPT_I64), CKPT_OK, rt);
  CHECK_RC(ckpt_protect_source(rt, "rows", CKPT_F64, CKPT_KIND_JOINED, locate, resize, &rows), CKPT_OK, rt);
  CHECK_RC(ckpt_protect_source(rt, "hist", CKPT_F64, CKPT_KIND_LOCAL, locate, resize, &hist), CKPT_OK, rt);
  CHECK_RC(ckpt_annotate(rt, "rows", "units", "m"), CKPT_OK, rt);
  const uint64_t r = (uint64_t)g_rank;
  /* step 1: rank r holds r + 1 rows (10 in all on 4 ranks); step 2: 2r + 1 rows (16 in all). */
  step = 1;
  fill(&rows, r + 1, r * (r + 1) / 2, 1);
  fill(&hist, r + 2, 100 * r, 1);
  CHECK_RC(ckpt_checkpoint(rt, 1, NULL, NULL), CKPT_OK, rt);
  CHECK_RC(ckpt_wait_all(rt), CKPT_OK, rt);
  step = 2;
  fill(&rows, 2 * r + 1, r * r, 2);
  fill(&hist, r + 3, 100 * r, 2);
  CHECK_RC(ckpt_checkpoint(rt, 2, NULL, NULL), CKPT_OK, rt);
  CHECK_RC(ckpt_wait_all(rt), CKPT_OK, rt);

  /* ---- inspect before allocating ---- */
  {
    int64_t steps[4] = {0, 0, 0, 0};
    size_t count = 0;
    CHECK_RC(ckpt_steps(rt, steps, 1, &count), CKPT_OK, rt);
    CHECK(count == 2 && steps[0] == 1 && steps[1] == 0);
    CHECK_RC(ckpt_steps(rt, steps, 4, &count), CKPT_OK, rt);
    CHECK(count == 2 && steps[0] == 1 && steps[1] == 2);
    CHECK_RC(ckpt_steps(rt, NULL, 4, &count), CKPT_INVALID_ARGUMENT, rt);
    CHECK_RC(ckpt_steps(rt, steps, 4, NULL), CKPT_INVALID_ARGUMENT, rt);
    CHECK_RC(ckpt_steps(NULL, steps, 4, &count), CKPT_INVALID_ARGUMENT, NULL);

    ckpt_reader_step* c = NULL;
    CHECK_RC(ckpt_inspect(rt, 2, &c), CKPT_OK, rt);
    if (c == NULL) MPI_Abort(MPI_COMM_WORLD, 1);
    size_t nvars = 0, i = 99;
    CHECK_RC(ckpt_reader_step_nvars(c, &nvars), CKPT_OK, NULL);
    CHECK(nvars == 3);
    CHECK_RC(ckpt_reader_step_find(c, "rows", &i), CKPT_OK, NULL);
    ckpt_var_info v;
    memset(&v, 0, sizeof v);
    CHECK_RC(ckpt_reader_step_var(c, i, &v), CKPT_OK, NULL);
    CHECK(v.dtype == CKPT_F64 && v.kind == CKPT_KIND_JOINED && v.ndims == 2);
    uint64_t total = 0;
    for (int q = 0; q < size; ++q) total += 2 * (uint64_t)q + 1;
    CHECK(v.ndims == 2 && v.shape[0] == total && v.shape[1] == WIDTH); /* rows in total */
    /* A two-level index (c_api_parity_index2_4): inspect read its root alone, the blocks come on request. */
    const char* format = getenv("CKPT_INDEX_FORMAT");
    const int lazy = format != NULL && strcmp(format, "2") == 0;
    CHECK(v.nblocks == (lazy ? 0 : (size_t)size) && v.nranks == v.nblocks);
    CHECK_RC(ckpt_reader_step_load_blocks(c), CKPT_OK, NULL);
    CHECK_RC(ckpt_reader_step_load_blocks(c), CKPT_OK, NULL); /* again: nothing to do */
    CHECK_RC(ckpt_reader_step_load_blocks(NULL), CKPT_INVALID_ARGUMENT, NULL);
    CHECK_RC(ckpt_reader_step_var(c, i, &v), CKPT_OK, NULL);
    CHECK(v.ndims == 2 && v.shape[0] == total && v.shape[1] == WIDTH);
    CHECK(v.nblocks == (size_t)size);
    for (size_t b = 0; b < v.nblocks && v.ndims == 2; ++b) /* rows per writer rank */
      CHECK(v.block_counts[b * 2] == 2 * (uint64_t)v.block_ranks[b] + 1);
    CHECK(v.nattrs >= 1);
    int units = 0;
    for (size_t a = 0; a < v.nattrs; ++a)
      if (strcmp(v.attr_keys[a], "units") == 0 && strcmp(v.attr_values[a], "m") == 0) units = 1;
    CHECK(units);
    CHECK_RC(ckpt_reader_step_find(c, "hist", &i), CKPT_OK, NULL);
    CHECK_RC(ckpt_reader_step_var(c, i, &v), CKPT_OK, NULL);
    CHECK(v.kind == CKPT_KIND_LOCAL && v.ndims == 1 && v.nblocks == (size_t)size);
    for (size_t b = 0; b < v.nblocks; ++b) CHECK(v.block_counts[b] == (uint64_t)v.block_ranks[b] + 3);
    uint64_t jt = 0, jb = 0, je = 0; /* the same total as ckpt_joined_rows gives */
    CHECK_RC(ckpt_joined_rows(rt, 2, "rows", &jt, &jb, &je), CKPT_OK, rt);
    CHECK(jt == total && jb == share_begin(total, g_rank, size));
    kept = c; /* outlives the runtime (checked after ckpt_free below) */
    c = (ckpt_reader_step*)&c;
    CHECK_RC(ckpt_inspect(rt, 99, &c), CKPT_NOT_FOUND, rt);
    CHECK(c == NULL);
    CHECK_RC(ckpt_inspect(rt, 1, NULL), CKPT_INVALID_ARGUMENT, rt);
    CHECK_RC(ckpt_inspect(NULL, 1, &c), CKPT_INVALID_ARGUMENT, NULL);
  }

  /* ---- the error paths of ckpt_protect_source ---- */
  {
    Buffer any = {NULL, 0, 1, 0, 0, {0}, 0};
    CHECK_RC(ckpt_protect_source(rt, "g", CKPT_F64, CKPT_KIND_GLOBAL, locate, NULL, &any), CKPT_INVALID_ARGUMENT, rt);
    CHECK(strstr(ckpt_error_message(rt), "kind") != NULL);
    CHECK_RC(ckpt_protect_source(rt, "g", CKPT_F64, -1, locate, NULL, &any), CKPT_INVALID_ARGUMENT, rt);
    CHECK_RC(ckpt_protect_source(rt, "g", CKPT_F64, CKPT_KIND_LOCAL, NULL, NULL, &any), CKPT_INVALID_ARGUMENT, rt);
    CHECK_RC(ckpt_protect_source(rt, "g", 99, CKPT_KIND_LOCAL, locate, NULL, &any), CKPT_INVALID_ARGUMENT, rt);
    CHECK_RC(ckpt_protect_source(rt, NULL, CKPT_F64, CKPT_KIND_LOCAL, locate, NULL, &any), CKPT_INVALID_ARGUMENT, rt);
    CHECK_RC(ckpt_protect_source(rt, "g", CKPT_F64, CKPT_KIND_LOCAL, locate_error, NULL, NULL), CKPT_INVALID_ARGUMENT,
             rt);
    CHECK(strstr(ckpt_error_message(rt), "'g'") != NULL && strstr(ckpt_error_message(rt), "io_error") != NULL);
    CHECK_RC(ckpt_protect_source(rt, "g", CKPT_F64, CKPT_KIND_LOCAL, locate_negative, NULL, NULL),
             CKPT_INVALID_ARGUMENT, rt);
    CHECK(strstr(ckpt_error_message(rt), "-5") != NULL);
    CHECK_RC(ckpt_protect_source(rt, "g", CKPT_F64, CKPT_KIND_LOCAL, locate_too_many_dims, NULL, NULL),
             CKPT_INVALID_ARGUMENT, rt);
    CHECK_RC(ckpt_protect_source(rt, "rows", CKPT_F64, CKPT_KIND_JOINED, locate, resize, &rows), CKPT_INVALID_ARGUMENT,
             rt); /* already protected */
  }
  CHECK_RC(ckpt_close(rt), CKPT_OK, rt);
  ckpt_free(rt);
  {
    size_t nvars = 0;
    CHECK_RC(ckpt_reader_step_nvars(kept, &nvars), CKPT_OK, NULL); /* the step handle outlives the runtime */
    CHECK(nvars == 3);
    ckpt_reader_step_free(kept);
  }

  /* ---- damage step 2: restart must fall back to step 1, resizing for each step it tries ---- */
  if (g_rank == 0) {
    char data0[700];
    snprintf(data0, sizeof data0, "%s/ckpt.2/data.0", from_yaml);
    CHECK(truncate(data0, 0) == 0);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  {
    CHECK_RC(create(yaml, NULL, &rt), CKPT_OK, NULL);
    if (rt == NULL) MPI_Abort(MPI_COMM_WORLD, 1);
    const char* level = NULL;
    CHECK_RC(ckpt_restart_level(rt, &level), CKPT_OK, rt);
    CHECK(level != NULL && strcmp(level, "") == 0);
    uint64_t index_bytes = 1;
    CHECK_RC(ckpt_restart_index_bytes(rt, &index_bytes), CKPT_OK, rt);
    CHECK(index_bytes == 0);
    CHECK_RC(ckpt_restart_index_bytes(rt, NULL), CKPT_INVALID_ARGUMENT, NULL);
    Buffer back = {NULL, 0, WIDTH, 1, 0, {0}, 0};
    Buffer hback = {NULL, 0, 1, 0, 0, {0}, 0};
    double extra = 42.0;
    int64_t restored = -1;
    step = -1;
    CHECK_RC(ckpt_protect_scalar(rt, "step", &step, CKPT_I64), CKPT_OK, rt);
    CHECK_RC(ckpt_protect_source(rt, "rows", CKPT_F64, CKPT_KIND_JOINED, locate, resize, &back), CKPT_OK, rt);
    CHECK_RC(ckpt_protect_source(rt, "hist", CKPT_F64, CKPT_KIND_LOCAL, locate, resize, &hback), CKPT_OK, rt);
    CHECK_RC(ckpt_protect_scalar(rt, "extra", &extra, CKPT_F64), CKPT_OK, rt); /* in no checkpoint */
    CHECK_RC(ckpt_set_optional(rt, "extra", 1), CKPT_OK, rt);
    size_t count = 0;
    int64_t steps[2] = {0, 0};
    CHECK_RC(ckpt_steps(rt, steps, 2, &count), CKPT_OK, rt); /* step 2's index still validates */
    CHECK(count == 2 && steps[0] == 1 && steps[1] == 2);

    CHECK_RC(ckpt_restart(rt, &restored), CKPT_OK, rt);
    CHECK(restored == 1 && step == 1);
    /* resize was asked for step 2's share first (16 rows), then step 1's (10 rows). */
    uint64_t total1 = 0, total2 = 0;
    for (int q = 0; q < size; ++q) total1 += (uint64_t)q + 1, total2 += 2 * (uint64_t)q + 1;
    const uint64_t b1 = share_begin(total1, g_rank, size), e1 = share_begin(total1, g_rank + 1, size);
    const uint64_t b2 = share_begin(total2, g_rank, size), e2 = share_begin(total2, g_rank + 1, size);
    CHECK(back.resizes == 2);
    CHECK(back.asked[0] == e2 - b2 && back.asked[1] == e1 - b1);
    CHECK(back.n == e1 - b1);
    for (uint64_t k = 0; k < back.n; ++k)
      CHECK(back.data[k * WIDTH] == (double)(b1 + k) && back.data[k * WIDTH + 1] == 1.0);
    CHECK(hback.resizes == 2 && hback.asked[0] == r + 3 && hback.asked[1] == r + 2);
    CHECK(hback.n == r + 2);
    for (uint64_t k = 0; k < hback.n; ++k) CHECK(hback.data[k] == (double)(100 * r + k));
    CHECK(extra == 42.0);
    CHECK_RC(ckpt_restart_level(rt, &level), CKPT_OK, rt);
    CHECK(level != NULL && strcmp(level, "global") == 0);
    CHECK_RC(ckpt_restart_index_bytes(rt, &index_bytes), CKPT_OK, rt);
    CHECK(index_bytes > 0); /* the one-level index of the step restored, whole on every rank */
    const char* name = NULL;
    CHECK_RC(ckpt_skipped_optional(rt, 0, &count, &name), CKPT_OK, rt);
    CHECK(count == 1 && name != NULL && strcmp(name, "extra") == 0);
    CHECK_RC(ckpt_skipped_optional(rt, 1, &count, &name), CKPT_OK, rt);
    CHECK(count == 1 && name == NULL);
    CHECK_RC(ckpt_skipped_optional(rt, 0, NULL, &name), CKPT_INVALID_ARGUMENT, NULL);
    /* The warning C++ returns in restart()'s Result: step 2 skipped because its data file is damaged
     * (corrupt), and the optional region left untouched. */
    int wcode = -1;
    const char* wmsg = NULL;
    CHECK_RC(ckpt_restart_warning(rt, &wcode, &wmsg), CKPT_OK, rt);
    CHECK_CODE(wcode, CKPT_CORRUPT, wmsg != NULL ? wmsg : "(null)");
    CHECK(wmsg != NULL && strstr(wmsg, "restarted from step 1 after skipping newer ones") != NULL &&
          strstr(wmsg, "step 2") != NULL && strstr(wmsg, "extra") != NULL);
    CHECK_RC(ckpt_restart_warning(rt, NULL, NULL), CKPT_OK, rt);
    CHECK_RC(ckpt_restart_warning(NULL, &wcode, &wmsg), CKPT_INVALID_ARGUMENT, NULL);
    /* A restart of a given step has no fall-back: it resets the warning. */
    CHECK_RC(ckpt_restart_step(rt, 1), CKPT_OK, rt);
    CHECK_RC(ckpt_restart_warning(rt, &wcode, &wmsg), CKPT_OK, rt);
    CHECK(wcode == CKPT_OK && wmsg != NULL && wmsg[0] == '\0');

    /* A resize that fails: every step fails with its code, naming the region and the callback. */
    back.fail_resize = CKPT_IO_ERROR;
    CHECK_RC(ckpt_restart(rt, &restored), CKPT_IO_ERROR, rt);
    CHECK(restored == -1 && strstr(ckpt_error_message(rt), "'rows'") != NULL &&
          strstr(ckpt_error_message(rt), "resize") != NULL);
    CHECK_RC(ckpt_restart_warning(rt, &wcode, &wmsg), CKPT_OK, rt); /* a failed restart leaves none */
    CHECK(wcode == CKPT_OK && wmsg != NULL && wmsg[0] == '\0');
    CHECK_RC(ckpt_close(rt), CKPT_OK, rt);
    CHECK_RC(ckpt_steps(rt, steps, 2, &count), CKPT_FAILED_PRECONDITION, rt);
    ckpt_free(rt);
    free(back.data);
    free(hback.data);
  }
  free(rows.data);
  free(hist.data);

  /* ---- rows by index and by key (ckpt_set_restart_rows, ckpt_set_restart_keys): blocks that move; the
   * rows of an optional region that the checkpoint lacks are not looked for ---- */
  {
    char dir[700], opts[800];
    snprintf(dir, sizeof dir, "%s/by_key", base);
    snprintf(opts, sizeof opts, "dir: %s\nfsync: false\n", dir);
    ckpt_runtime* rt = NULL;
    /* rank r writes 2 blocks of 3 values, ids 100 + 10 g for global block g = 2 r, 2 r + 1 */
    int64_t ids[2] = {100 + 20 * g_rank, 110 + 20 * g_rank};
    double vals[6];
    for (int i = 0; i < 6; ++i) vals[i] = (double)ids[i / 3] + 0.25 * (i % 3);
    uint64_t dims[2] = {2, 3}, idims[1] = {2};
    CHECK_RC(create(NULL, opts, &rt), CKPT_OK, NULL);
    CHECK_RC(ckpt_protect_joined(rt, "blocks", vals, CKPT_F64, 2, dims, CKPT_BALANCED), CKPT_OK, rt);
    CHECK_RC(ckpt_protect_joined(rt, "id", ids, CKPT_I64, 1, idims, CKPT_BALANCED), CKPT_OK, rt);
    CHECK_RC(ckpt_checkpoint(rt, 4, NULL, NULL), CKPT_OK, rt);
    CHECK_RC(ckpt_wait_all(rt), CKPT_OK, rt);
    ckpt_free(rt);

    /* Each rank now owns 3 blocks by id (the last rank's, its own and block 0: overlapping), and asks
     * by row for the first and last stored rows. */
    const int64_t last = 100 + 10 * (2 * (int64_t)size - 1);
    int64_t want[3] = {last, 100 + 20 * g_rank, 100};
    uint64_t by_row[2] = {2 * (uint64_t)size - 1, 0};
    double got[9], rowed[6];
    uint64_t d3[2] = {3, 3}, d2[2] = {2, 3};
    CHECK_RC(create(NULL, opts, &rt), CKPT_OK, NULL);
    CHECK_RC(ckpt_protect_joined(rt, "blocks", got, CKPT_F64, 2, d3, CKPT_BALANCED), CKPT_OK, rt);
    CHECK_RC(ckpt_protect_joined(rt, "rowed", rowed, CKPT_F64, 2, d2, CKPT_BALANCED), CKPT_OK, rt);
    CHECK_RC(ckpt_set_restart_keys(rt, "blocks", "id", want, 3), CKPT_OK, rt);
    CHECK_RC(ckpt_set_restart_rows(rt, "rowed", by_row, 2), CKPT_OK, rt);
    CHECK_RC(ckpt_set_optional(rt, "rowed", 1), CKPT_OK, rt); /* not in the checkpoint: left alone */
    CHECK_RC(ckpt_restart_step(rt, 4), CKPT_OK, rt);
    for (int i = 0; i < 9; ++i) CHECK(got[i] == (double)want[i / 3] + 0.25 * (i % 3));
    /* errors: NULL pointers with a count, a key nobody holds (agreed), not a joined array */
    CHECK_RC(ckpt_set_restart_rows(rt, "blocks", NULL, 2), CKPT_INVALID_ARGUMENT, rt);
    CHECK_RC(ckpt_set_restart_keys(rt, "blocks", NULL, want, 3), CKPT_INVALID_ARGUMENT, rt);
    CHECK_RC(ckpt_set_restart_keys(rt, "blocks", "id", NULL, 3), CKPT_INVALID_ARGUMENT, rt);
    CHECK_RC(ckpt_set_restart_rows(rt, "nope", by_row, 2), CKPT_NOT_FOUND, rt);
    want[1] = g_rank == 2 ? 7 : want[1];
    CHECK_RC(ckpt_set_restart_keys(rt, "blocks", "id", want, 3), CKPT_OK, rt);
    CHECK_RC(ckpt_restart_step(rt, 4), CKPT_NOT_FOUND, rt);
    CHECK(strstr(ckpt_error_message(rt), "holds 7") != NULL);
    /* cleared: back to first_row or the balanced split */
    CHECK_RC(ckpt_clear_restart_rows(rt, "blocks"), CKPT_OK, rt);
    CHECK_RC(ckpt_clear_restart_rows(rt, "nope"), CKPT_NOT_FOUND, rt);
    ckpt_free(rt);
  }

  return check_finish("c_api_parity");
}
