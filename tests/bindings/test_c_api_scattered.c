/* Scattered regions through the C API at 4 ranks (ckpt_protect_scattered, ckpt_update_scattered): AMR blocks
 * with ghost cells, each its own allocation, checkpointed without packing by the application and stored as
 * one joined array of their interiors (ckpt_inspect, ckpt_reader_step_read); restarted into new allocations
 * on 3 ranks by block id (ckpt_set_restart_keys) and on 4 ranks by the balanced split into pieces of 2 rows
 * and then by key after ckpt_update_scattered, interiors equal and ghosts untouched each time; the
 * refusals (a piece with rows and no memory, a selection that does not fit or lacks start or alloc, negative
 * extents and row counts cast to uint64_t, a changed row or kind, an unknown name). C99, built with -Wall
 * -Wextra -pedantic -Werror. Scratch directory: $CKPTTEST_TMP. Exit status 0 when every check held. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ckpt/ckpt.h"
#include "ckpt_check.h"

#define CHECK_RC(got, want, rt) CHECK_CODE(got, want, ckpt_error_message(rt))

/* A block: NV variables of NZ x NX interior cells, allocated with one ghost cell around each NZ x NX plane. */
enum { NV = 2, NZ = 3, NX = 4, AZ = NZ + 2, AX = NX + 2, INTERIOR = NV * NZ * NX, ALLOCATED = NV * AZ * AX };
static const uint64_t kRow[3] = {NV, NZ, NX};
static const uint64_t kStart[3] = {0, 1, 1};
static const uint64_t kAlloc[3] = {NV, AZ, AX};
static const double kGhost = -7.0;

static int64_t block_id(uint64_t g) { return 500 + (int64_t)((29 * g) % 101) * 2; }
static double cell(int64_t id, uint64_t c) { return (double)id * 1000.0 + (double)c; }
/* The writing job: rank r holds r + 2 blocks, the global blocks [first_block(r), first_block(r + 1)). */
static uint64_t first_block(int r) { return (uint64_t)(r * (r + 3) / 2); }

/* Fills the `rows` ghosted blocks at b with kGhost, and their interiors with the cells of ids[k] (ids NULL:
 * kGhost everywhere, an allocation to restart into). */
static void fill_blocks(double* b, uint64_t rows, const int64_t* ids) {
  for (uint64_t i = 0; i < rows * ALLOCATED; ++i) b[i] = kGhost;
  if (ids == NULL) return;
  for (uint64_t k = 0; k < rows; ++k)
    for (uint64_t v = 0; v < NV; ++v)
      for (uint64_t z = 0; z < NZ; ++z)
        for (uint64_t x = 0; x < NX; ++x)
          b[k * ALLOCATED + (v * AZ + z + 1) * AX + x + 1] = cell(ids[k], (v * NZ + z) * NX + x);
}

/* The number of cells of the ghosted block at b that differ from block `id` (interior) or from kGhost. */
static int wrong_cells(const double* b, int64_t id) {
  int wrong = 0;
  for (uint64_t v = 0; v < NV; ++v)
    for (uint64_t z = 0; z < AZ; ++z)
      for (uint64_t x = 0; x < AX; ++x) {
        const int inside = z >= 1 && z <= NZ && x >= 1 && x <= NX;
        const double want = inside ? cell(id, (v * NZ + z - 1) * NX + x - 1) : kGhost;
        wrong += b[(v * AZ + z) * AX + x] != want;
      }
  return wrong;
}

static int create(MPI_Comm comm, const char* options, ckpt_runtime** rt) {
  return ckpt_create_handle_options(&comm, sizeof comm, NULL, options, rt);
}

int main(int argc, char** argv) {
  int provided = 0, size = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const char* tmp = getenv("CKPTTEST_TMP");
  char dir[512], opts[700];
  snprintf(dir, sizeof dir, "%s/c_api_scattered", tmp != NULL ? tmp : "/tmp/ckpt-c-api-scattered-test");
  snprintf(opts, sizeof opts, "dir: %s\nfsync: false\n", dir);
  if (g_rank == 0) fresh_dir(dir);
  MPI_Barrier(MPI_COMM_WORLD);
  const uint64_t total = first_block(size);

  /* ---- write: rank r's r + 2 blocks, each malloc'ed on its own, one row per piece (rows NULL) ---- */
  {
    enum { MAX_MINE = 16 };
    const uint64_t first = first_block(g_rank), n = first_block(g_rank + 1) - first;
    int64_t ids[MAX_MINE];
    void* ptrs[MAX_MINE];
    for (uint64_t k = 0; k < n && k < MAX_MINE; ++k) {
      ids[k] = block_id(first + k);
      ptrs[k] = malloc(ALLOCATED * sizeof(double));
      fill_blocks((double*)ptrs[k], 1, &ids[k]);
    }
    ckpt_runtime* rt = NULL;
    CHECK_RC(create(MPI_COMM_WORLD, opts, &rt), CKPT_OK, NULL);
    if (rt == NULL) MPI_Abort(MPI_COMM_WORLD, 1);
    uint64_t idims[1] = {n};
    CHECK_RC(ckpt_protect_scattered(rt, "blocks", CKPT_F64, 3, kRow, (size_t)n, ptrs, NULL, kStart, kAlloc), CKPT_OK,
             rt);
    CHECK_RC(ckpt_protect_joined(rt, "block_id", ids, CKPT_I64, 1, idims, CKPT_BALANCED), CKPT_OK, rt);
    ckpt_ticket* tk = NULL;
    CHECK_RC(ckpt_checkpoint(rt, 1, NULL, &tk), CKPT_OK, rt);
    for (uint64_t k = 0; k < n; ++k) fill_blocks((double*)ptrs[k], 1, NULL); /* captured: free to change */
    CHECK_RC(ckpt_ticket_wait(tk), CKPT_OK, NULL);
    ckpt_ticket_free(tk);

    /* Stored as one joined array [total, NV, NZ, NX] of the interiors, in rank order, without the ghosts. */
    ckpt_reader_step* c = NULL;
    CHECK_RC(ckpt_inspect(rt, 1, &c), CKPT_OK, rt);
    size_t i = 0;
    ckpt_var_info info;
    CHECK_RC(ckpt_reader_step_find(c, "blocks", &i), CKPT_OK, NULL);
    CHECK_RC(ckpt_reader_step_var(c, i, &info), CKPT_OK, NULL);
    CHECK(info.kind == CKPT_KIND_JOINED && info.dtype == CKPT_F64 && info.ndims == 4 && info.shape[0] == total &&
          info.shape[1] == NV && info.shape[2] == NZ && info.shape[3] == NX);
    double* all = (double*)malloc(total * INTERIOR * sizeof(double));
    uint64_t s0[4] = {0, 0, 0, 0}, cnt[4] = {total, NV, NZ, NX};
    CHECK_RC(ckpt_reader_step_read(c, "blocks", 4, s0, cnt, all, total * INTERIOR * sizeof(double)), CKPT_OK, NULL);
    int wrong = 0;
    for (uint64_t g = 0; g < total; ++g)
      for (uint64_t e = 0; e < INTERIOR; ++e) wrong += all[g * INTERIOR + e] != cell(block_id(g), e);
    CHECK(wrong == 0);
    free(all);
    ckpt_reader_step_free(c);
    ckpt_free(rt);
    for (uint64_t k = 0; k < n; ++k) free(ptrs[k]);
  }

  /* ---- restart on 3 ranks by key, into new allocations: rank q owns the blocks whose id % 3 == q, in
   * descending id order ---- */
  {
    MPI_Comm three = MPI_COMM_NULL;
    MPI_Comm_split(MPI_COMM_WORLD, g_rank < 3 ? 0 : MPI_UNDEFINED, g_rank, &three);
    if (three != MPI_COMM_NULL) {
      int64_t* mine = (int64_t*)malloc((total + 1) * sizeof(int64_t));
      int64_t* ids = (int64_t*)malloc((total + 1) * sizeof(int64_t));
      void** ptrs = (void**)malloc((total + 1) * sizeof(void*));
      size_t n = 0;
      for (uint64_t g = total; g-- > 0;) /* in reverse block order: not the order they were stored in */
        if (block_id(g) % 3 == g_rank) mine[n++] = block_id(g);
      for (size_t k = 0; k < n; ++k) {
        ptrs[k] = malloc(ALLOCATED * sizeof(double));
        fill_blocks((double*)ptrs[k], 1, NULL);
        ids[k] = -1;
      }
      ckpt_runtime* rt = NULL;
      CHECK_RC(create(three, opts, &rt), CKPT_OK, NULL);
      uint64_t idims[1] = {n};
      CHECK_RC(ckpt_protect_scattered(rt, "blocks", CKPT_F64, 3, kRow, n, ptrs, NULL, kStart, kAlloc), CKPT_OK, rt);
      CHECK_RC(ckpt_protect_joined(rt, "block_id", ids, CKPT_I64, 1, idims, CKPT_BALANCED), CKPT_OK, rt);
      CHECK_RC(ckpt_set_restart_keys(rt, "blocks", "block_id", mine, n), CKPT_OK, rt);
      CHECK_RC(ckpt_set_restart_keys(rt, "block_id", "block_id", mine, n), CKPT_OK, rt);
      CHECK_RC(ckpt_restart_step(rt, 1), CKPT_OK, rt);
      for (size_t k = 0; k < n; ++k) {
        CHECK(ids[k] == mine[k]);
        CHECK(wrong_cells((const double*)ptrs[k], mine[k]) == 0);
      }
      uint64_t owned = 0, n_here = n;
      MPI_Allreduce(&n_here, &owned, 1, MPI_UINT64_T, MPI_SUM, three);
      CHECK(owned == total); /* the 3 ranks restored every block */
      ckpt_free(rt);
      for (size_t k = 0; k < n; ++k) free(ptrs[k]);
      free(ptrs);
      free(ids);
      free(mine);
      MPI_Comm_free(&three);
    }
    MPI_Barrier(MPI_COMM_WORLD);
  }

  /* ---- restart on 4 ranks: the balanced share in pieces of up to 2 rows (k ghosted allocations back to
   * back) after an empty piece, then ckpt_update_scattered to this rank's own blocks, reversed, by key ---- */
  {
    ckpt_runtime* rt = NULL;
    CHECK_RC(create(MPI_COMM_WORLD, opts, &rt), CKPT_OK, NULL);
    /* Nothing yet: no piece at all is a valid registration (0 rows). */
    CHECK_RC(ckpt_protect_scattered(rt, "blocks", CKPT_F64, 3, kRow, 0, NULL, NULL, kStart, kAlloc), CKPT_OK, rt);
    const uint64_t begin = total * (uint64_t)g_rank / (uint64_t)size;
    const uint64_t end = total * (uint64_t)(g_rank + 1) / (uint64_t)size;
    void* ptrs[64];
    uint64_t rows[64];
    size_t np = 0;
    ptrs[np] = NULL; /* an empty piece: skipped */
    rows[np++] = 0;
    for (uint64_t left = end - begin; left > 0 && np < 64;) {
      rows[np] = left < 2 ? left : 2;
      ptrs[np] = malloc(rows[np] * ALLOCATED * sizeof(double));
      fill_blocks((double*)ptrs[np], rows[np], NULL);
      left -= rows[np++];
    }
    CHECK_RC(ckpt_update_scattered(rt, "blocks", 3, kRow, np, ptrs, rows, kStart, kAlloc), CKPT_OK, rt);
    CHECK_RC(ckpt_restart_step(rt, 1), CKPT_OK, rt);
    uint64_t g = begin;
    for (size_t p = 1; p < np; ++p)
      for (uint64_t k = 0; k < rows[p]; ++k, ++g)
        CHECK(wrong_cells((const double*)ptrs[p] + k * ALLOCATED, block_id(g)) == 0);
    CHECK(g == end);
    for (size_t p = 1; p < np; ++p) free(ptrs[p]);

    /* This rank's own blocks of the writing job, in reverse order, one piece of all of them. */
    const uint64_t first = first_block(g_rank), n = first_block(g_rank + 1) - first;
    int64_t want[16];
    for (uint64_t k = 0; k < n && k < 16; ++k) want[k] = block_id(first + n - 1 - k);
    double* one = (double*)malloc(n * ALLOCATED * sizeof(double));
    fill_blocks(one, n, NULL);
    void* piece[1] = {one};
    uint64_t nrows[1] = {n};
    CHECK_RC(ckpt_update_scattered(rt, "blocks", 3, kRow, 1, piece, nrows, kStart, kAlloc), CKPT_OK, rt);
    CHECK_RC(ckpt_set_restart_keys(rt, "blocks", "block_id", want, (size_t)n), CKPT_OK, rt);
    CHECK_RC(ckpt_restart_step(rt, 1), CKPT_OK, rt);
    for (uint64_t k = 0; k < n; ++k) CHECK(wrong_cells(one + k * ALLOCATED, want[k]) == 0);

    /* ---- the refusals ---- */
    double plain[8] = {0};
    void* with_null[2] = {plain, NULL};
    uint64_t two[2] = {1, 2}, four[1] = {4};
    CHECK_RC(ckpt_protect_scattered(rt, "a", CKPT_F64, 1, four, 2, with_null, two, NULL, NULL), CKPT_INVALID_ARGUMENT,
             rt);
    CHECK(strstr(ckpt_error_message(rt), "piece 1 has 2 rows and a null pointer") != NULL);
    CHECK_RC(ckpt_protect_scattered(rt, "a", CKPT_F64, 1, four, 2, NULL, two, NULL, NULL), CKPT_INVALID_ARGUMENT, rt);
    CHECK(strstr(ckpt_error_message(rt), "ptrs is NULL") != NULL);
    /* A selection with start but no alloc; one that does not fit (1 + 3 > 4); one for rows of one element. */
    CHECK_RC(ckpt_protect_scattered(rt, "a", CKPT_F64, 3, kRow, 1, piece, NULL, kStart, NULL), CKPT_INVALID_ARGUMENT,
             rt);
    CHECK(strstr(ckpt_error_message(rt), "alloc is NULL") != NULL && strstr(ckpt_error_message(rt), "'a'") != NULL);
    const uint64_t small[3] = {NV, NZ, AX};
    CHECK_RC(ckpt_protect_scattered(rt, "a", CKPT_F64, 3, kRow, 1, piece, NULL, kStart, small), CKPT_INVALID_ARGUMENT,
             rt);
    CHECK(strstr(ckpt_error_message(rt), "memory selection") != NULL);
    CHECK_RC(ckpt_protect_scattered(rt, "a", CKPT_F64, 0, NULL, 1, piece, NULL, kStart, kAlloc), CKPT_INVALID_ARGUMENT,
             rt);
    CHECK(strstr(ckpt_error_message(rt), "needs row extents") != NULL);
    /* Negative numbers cast to uint64_t: a row extent, a piece's rows. */
    const uint64_t negative_row[1] = {(uint64_t)(int64_t)-4};
    CHECK_RC(ckpt_protect_scattered(rt, "a", CKPT_F64, 1, negative_row, 1, piece, NULL, NULL, NULL),
             CKPT_INVALID_ARGUMENT, rt);
    CHECK(strstr(ckpt_error_message(rt), "row[0]") != NULL && strstr(ckpt_error_message(rt), "-4") != NULL);
    uint64_t negative_rows[2] = {1, (uint64_t)(int64_t)-2};
    void* twice[2] = {plain, plain};
    CHECK_RC(ckpt_protect_scattered(rt, "a", CKPT_F64, 1, four, 2, twice, negative_rows, NULL, NULL),
             CKPT_INVALID_ARGUMENT, rt);
    CHECK(strstr(ckpt_error_message(rt), "rows[1]") != NULL && strstr(ckpt_error_message(rt), "-2") != NULL);
    CHECK_RC(ckpt_protect_scattered(rt, "a", 99, 1, four, 1, piece, NULL, NULL, NULL), CKPT_INVALID_ARGUMENT, rt);
    CHECK_RC(ckpt_protect_scattered(NULL, "a", CKPT_F64, 1, four, 1, piece, NULL, NULL, NULL), CKPT_INVALID_ARGUMENT,
             NULL);
    CHECK_RC(ckpt_protect_scattered(rt, NULL, CKPT_F64, 1, four, 1, piece, NULL, NULL, NULL), CKPT_INVALID_ARGUMENT,
             rt);
    /* Nothing was registered by the refused calls: "a" is free. */
    CHECK_RC(ckpt_protect_scattered(rt, "a", CKPT_F64, 1, four, 1, twice, NULL, NULL, NULL), CKPT_OK, rt);
    CHECK_RC(ckpt_protect_scattered(rt, "a", CKPT_F64, 1, four, 1, twice, NULL, NULL, NULL), CKPT_INVALID_ARGUMENT, rt);
    CHECK(strstr(ckpt_error_message(rt), "already protected") != NULL);
    /* The row extents and the kind cannot change; an update needs a protected region. */
    const uint64_t other_row[3] = {NV, NZ, NX - 1};
    CHECK_RC(ckpt_update_scattered(rt, "blocks", 3, other_row, 1, piece, nrows, kStart, kAlloc), CKPT_INVALID_ARGUMENT,
             rt);
    CHECK(strstr(ckpt_error_message(rt), "cannot change") != NULL);
    uint64_t jdims[2] = {1, 4};
    CHECK_RC(ckpt_update_joined(rt, "blocks", plain, 2, jdims, CKPT_BALANCED), CKPT_INVALID_ARGUMENT, rt);
    CHECK(strstr(ckpt_error_message(rt), "update it with Scattered") != NULL);
    CHECK_RC(ckpt_protect_joined(rt, "joined", plain, CKPT_F64, 2, jdims, CKPT_BALANCED), CKPT_OK, rt);
    CHECK_RC(ckpt_update_scattered(rt, "joined", 1, four, 1, twice, NULL, NULL, NULL), CKPT_INVALID_ARGUMENT, rt);
    CHECK(strstr(ckpt_error_message(rt), "not as Scattered pieces") != NULL);
    const uint64_t s4[4] = {0, 0, 1, 1}, a4[4] = {1, NV, AZ, AX};
    CHECK_RC(ckpt_set_memory_selection(rt, "blocks", 4, s4, a4), CKPT_INVALID_ARGUMENT, rt);
    CHECK(strstr(ckpt_error_message(rt), "Scattered::memory") != NULL);
    CHECK_RC(ckpt_update_scattered(rt, "nope", 1, four, 1, twice, NULL, NULL, NULL), CKPT_NOT_FOUND, rt);

    /* The refusals changed nothing: "blocks" still restores into `one`. */
    fill_blocks(one, n, NULL);
    CHECK_RC(ckpt_unprotect(rt, "a"), CKPT_OK, rt);
    CHECK_RC(ckpt_unprotect(rt, "joined"), CKPT_OK, rt);
    CHECK_RC(ckpt_restart_step(rt, 1), CKPT_OK, rt);
    for (uint64_t k = 0; k < n; ++k) CHECK(wrong_cells(one + k * ALLOCATED, want[k]) == 0);
    ckpt_free(rt);
    free(one);
  }

  return check_finish("c_api_scattered");
}
