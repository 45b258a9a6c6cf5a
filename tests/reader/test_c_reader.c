/* The C reader (ckpt_reader_* in ckpt/ckpt.h): a checkpoint written through the C API by every rank,
 * then read by every rank on its own (no communicator): steps, variable descriptions, a box across
 * every rank's block, each rank's local array and scalar, verify; then collectively
 * (ckpt_reader_open_comm on MPI_COMM_WORLD and on a split communicator): boxes across two ranks'
 * blocks, another rank's local array, and errors every rank agrees on (code and message); then a
 * flipped byte in one block makes exactly the reads that touch it fail with CKPT_CORRUPT naming the
 * variable, also collectively, and a damaged index is rank 0's error on every rank. C99, -pedantic
 * -Werror. Last, the same readers on a root of layout series. Scratch directory: $CKPTTEST_TMP. Exit status
 * 0 when every check held. */
#include <dirent.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "ckpt/ckpt.h"
#include "ckpt_check.h"

#define CHECK_RC(got, want) CHECK_CODE(got, want, ckpt_last_error())

enum { ROWS = 3, COLS = 5 };

static double field_value(uint64_t r, uint64_t c) { return 0.5 * (double)(r * COLS + c); }

/* MPI_Bcast calls made by this process (the profiling interface: ckpt's calls land here too), to tell
 * a collective open from a serial one, which makes none. */
static int g_bcasts = 0;
int MPI_Bcast(void* buf, int count, MPI_Datatype type, int root, MPI_Comm comm) {
  ++g_bcasts;
  return PMPI_Bcast(buf, count, type, root, comm);
}

/* Collective: every rank's code and ckpt_last_error() equal rank 0's (a check fails where not); returns the code. */
static int check_agreed(int rc) {
  int lo = 0, hi = 0;
  char mine[512], root[512];
  MPI_Allreduce(&rc, &lo, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  MPI_Allreduce(&rc, &hi, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  CHECK(lo == hi);
  snprintf(mine, sizeof mine, "%s", rc == CKPT_OK ? "" : ckpt_last_error());
  memcpy(root, mine, sizeof root);
  MPI_Bcast(root, (int)sizeof root, MPI_CHAR, 0, MPI_COMM_WORLD);
  if (strcmp(mine, root) != 0) fprintf(stderr, "rank %d: error '%s', rank 0's '%s'\n", g_rank, mine, root);
  CHECK(strcmp(mine, root) == 0);
  return rc;
}

/* Layout series (one segment per step): steps 4 and 6 of `field` (step 6 holds field_value + 6) in
 * `dir`_series; the serial reader opens the root, <root>/ckpt.4 and the older step, the collective one
 * the root (rank 0 names each step's segment to the others). */
static void series_case(const char* base, int size) {
  char dir[600], path[700], config[700];
  ckpt_runtime* rt = NULL;
  ckpt_reader* r = NULL;
  ckpt_reader_step* c = NULL;
  double field[ROWS * COLS], box[ROWS * COLS];
  int64_t steps[4], step = -1;
  size_t nsteps = 0;
  int i, k, nranks = 0;
  uint64_t global[2], start[2], count[2] = {ROWS, COLS};
  global[0] = (uint64_t)ROWS * (uint64_t)size, global[1] = COLS;
  start[0] = (uint64_t)g_rank * ROWS, start[1] = 0;
  snprintf(dir, sizeof dir, "%s_series", base);
  snprintf(path, sizeof path, "%s.yaml", dir);
  snprintf(config, sizeof config, "dir: %s\nlayout: series\nsegment_steps: 1\n", dir);
  if (g_rank == 0) {
    char cmd[1300];
    FILE* f = fopen(path, "w");
    fputs(config, f);
    fclose(f);
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    CHECK(system(cmd) == 0);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  CHECK_RC(ckpt_create(MPI_COMM_WORLD, path, &rt), CKPT_OK);
  CHECK_RC(ckpt_protect_block(rt, "field", field, CKPT_F64, 2, global, start, count), CKPT_OK);
  for (k = 4; k <= 6; k += 2) {
    for (i = 0; i < ROWS * COLS; ++i) field[i] = k + field_value(start[0] + (uint64_t)(i / COLS), (uint64_t)(i % COLS));
    CHECK_RC(ckpt_checkpoint(rt, k, NULL, NULL), CKPT_OK);
  }
  CHECK_RC(ckpt_close(rt), CKPT_OK);
  ckpt_free(rt);
  MPI_Barrier(MPI_COMM_WORLD);
  for (k = 0; k < 3; ++k) { /* the root serially, ckpt.4 serially, the root collectively */
    int64_t want = k == 1 ? 4 : 6;
    snprintf(path, sizeof path, k == 1 ? "%s/ckpt.4" : "%s", dir);
    if (k < 2)
      CHECK_RC(ckpt_reader_open(path, &r), CKPT_OK);
    else
      CHECK_RC(ckpt_reader_open_comm(MPI_COMM_WORLD, path, &r), CKPT_OK);
    if (r == NULL) continue;
    CHECK_RC(ckpt_reader_steps(r, steps, 4, &nsteps), CKPT_OK);
    CHECK(k == 1 ? nsteps == 1 && steps[0] == 4 : nsteps == 2 && steps[0] == 4 && steps[1] == 6);
    CHECK_RC(ckpt_reader_latest(r, &c), CKPT_OK);
    if (c != NULL) {
      CHECK_RC(ckpt_reader_step_info(c, &step, &nranks, NULL), CKPT_OK);
      CHECK(step == want && nranks == size);
      CHECK_RC(ckpt_reader_step_read(c, "field", 2, start, count, box, sizeof box), CKPT_OK);
      for (i = 0; i < ROWS * COLS; ++i)
        CHECK(box[i] == want + field_value(start[0] + (uint64_t)(i / COLS), (uint64_t)(i % COLS)));
      CHECK_RC(ckpt_reader_step_verify(c), CKPT_OK);
      ckpt_reader_step_free(c);
      c = NULL;
    }
    if (k != 1) { /* the older step, in the older segment */
      CHECK_RC(ckpt_reader_open_step(r, 4, &c), CKPT_OK);
      CHECK_RC(ckpt_reader_step_read(c, "field", 2, start, count, box, sizeof box), CKPT_OK);
      CHECK(box[0] == 4 + field_value(start[0], 0));
      ckpt_reader_step_free(c);
      c = NULL;
    }
    ckpt_reader_free(r);
    r = NULL;
  }
}

int main(int argc, char** argv) {
  int provided = 0, size = 0, i;
  char dir[512];
  const char* tmp = getenv("CKPTTEST_TMP");
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  snprintf(dir, sizeof dir, "%s/c_reader_%d", tmp ? tmp : "/tmp/ckpt-test", size);
  if (g_rank == 0) {
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s' && mkdir -p '%s'", dir, dir);
    CHECK(system(cmd) == 0);
  }
  MPI_Barrier(MPI_COMM_WORLD);

  { /* write step 4: a global [ROWS * size, COLS] array, a local array of 2 + rank values, a scalar */
    char config[700];
    ckpt_runtime* rt = NULL;
    double field[ROWS * COLS];
    int32_t local[64];
    int64_t seed = 100 + g_rank;
    uint64_t global[2], start[2], count[2] = {ROWS, COLS}, n = 2 + (uint64_t)g_rank;
    global[0] = (uint64_t)ROWS * (uint64_t)size, global[1] = COLS;
    start[0] = (uint64_t)g_rank * ROWS, start[1] = 0;
    for (i = 0; i < ROWS * COLS; ++i) field[i] = field_value(start[0] + (uint64_t)(i / COLS), (uint64_t)(i % COLS));
    for (i = 0; i < (int)n; ++i) local[i] = g_rank * 10 + i;
    snprintf(config, sizeof config, "dir: %s\n", dir);
    {
      char path[700];
      FILE* f;
      snprintf(path, sizeof path, "%s.yaml", dir);
      if (g_rank == 0) {
        f = fopen(path, "w");
        fputs(config, f);
        fclose(f);
      }
      MPI_Barrier(MPI_COMM_WORLD);
      CHECK_RC(ckpt_create(MPI_COMM_WORLD, path, &rt), CKPT_OK);
    }
    CHECK_RC(ckpt_protect_block(rt, "field", field, CKPT_F64, 2, global, start, count), CKPT_OK);
    CHECK_RC(ckpt_protect(rt, "local", local, CKPT_I32, 1, &n), CKPT_OK);
    CHECK_RC(ckpt_protect_scalar(rt, "seed", &seed, CKPT_I64), CKPT_OK);
    CHECK_RC(ckpt_annotate(rt, "field", "units", "K"), CKPT_OK);
    CHECK_RC(ckpt_checkpoint(rt, 4, NULL, NULL), CKPT_OK);
    CHECK_RC(ckpt_close(rt), CKPT_OK);
    ckpt_free(rt);
  }

  { /* read it back, every rank on its own */
    ckpt_reader* r = NULL;
    ckpt_reader_step* c = NULL;
    ckpt_var_info v;
    int64_t steps[4], step = -1;
    size_t nsteps = 0, nvars = 0, idx = 0;
    int nranks = 0;
    const char* transport = NULL;
    double box[64];
    uint64_t bstart[2] = {1, 1}, bcount[2];
    bcount[0] = (uint64_t)ROWS * (uint64_t)size - 2, bcount[1] = 3;
    CHECK_RC(ckpt_reader_open(dir, &r), CKPT_OK);
    CHECK_RC(ckpt_reader_steps(r, steps, 4, &nsteps), CKPT_OK);
    CHECK(nsteps == 1 && steps[0] == 4);
    CHECK_RC(ckpt_reader_open_step(r, 5, &c), CKPT_NOT_FOUND);
    CHECK(c == NULL);
    CHECK_RC(ckpt_reader_latest(r, &c), CKPT_OK);
    CHECK_RC(ckpt_reader_step_info(c, &step, &nranks, &transport), CKPT_OK);
    CHECK(step == 4 && nranks == size && strcmp(transport, "posix") == 0);
    CHECK_RC(ckpt_reader_step_nvars(c, &nvars), CKPT_OK);
    CHECK(nvars == 3);
    CHECK_RC(ckpt_reader_step_var(c, 0, &v), CKPT_OK);
    CHECK(strcmp(v.name, "field") == 0 && v.kind == CKPT_KIND_GLOBAL && v.dtype == CKPT_F64 && v.ndims == 2);
    CHECK(v.shape[0] == (uint64_t)ROWS * (uint64_t)size && v.shape[1] == COLS);
    CHECK(v.has_minmax && v.min == 0.0 && v.max == field_value(v.shape[0] - 1, COLS - 1));
    CHECK(v.nattrs == 1 && strcmp(v.attr_keys[0], "units") == 0 && strcmp(v.attr_values[0], "K") == 0);
    CHECK(v.nblocks == (size_t)size && v.nranks == (size_t)size);
    for (i = 0; i < size && i < (int)v.nblocks; ++i)
      CHECK(v.block_starts[2 * i] == (uint64_t)v.block_ranks[i] * ROWS && v.block_counts[2 * i] == ROWS &&
            v.block_starts[2 * i + 1] == 0 && v.block_counts[2 * i + 1] == COLS);
    CHECK_RC(ckpt_reader_step_var(c, 3, &v), CKPT_INVALID_ARGUMENT);
    CHECK_RC(ckpt_reader_step_find(c, "local", &idx), CKPT_OK);
    CHECK(idx == 1);
    CHECK_RC(ckpt_reader_step_find(c, "nope", &idx), CKPT_NOT_FOUND);
    CHECK(strstr(ckpt_last_error(), "'nope'") != NULL);

    CHECK_RC(ckpt_reader_step_read(c, "field", 2, bstart, bcount, box, sizeof box), CKPT_OK);
    for (i = 0; i < (int)(bcount[0] * bcount[1]); ++i)
      CHECK(box[i] == field_value(1 + (uint64_t)i / 3, 1 + (uint64_t)i % 3));
    CHECK_RC(ckpt_reader_step_read(c, "field", 2, bstart, bcount, box, 8), CKPT_INVALID_ARGUMENT);
    CHECK_RC(ckpt_reader_step_read(c, "field", 1, bstart, bcount, box, sizeof box), CKPT_INVALID_ARGUMENT);
    for (i = 0; i < size; ++i) {
      int32_t local[64];
      int64_t seed = 0;
      int k;
      CHECK_RC(ckpt_reader_step_read_rank(c, "local", (uint32_t)i, local, sizeof local), CKPT_OK);
      for (k = 0; k < 2 + i; ++k) CHECK(local[k] == i * 10 + k);
      CHECK_RC(ckpt_reader_step_read_rank(c, "seed", (uint32_t)i, &seed, sizeof seed), CKPT_OK);
      CHECK(seed == 100 + i);
    }
    CHECK_RC(ckpt_reader_step_read_rank(c, "field", 0, box, sizeof box), CKPT_INVALID_ARGUMENT);
    CHECK_RC(ckpt_reader_step_verify(c), CKPT_OK);
    ckpt_reader_step_free(c);
    ckpt_reader_free(r);
  }
  { /* on the communicator: rank 0 lists and reads the index once, every rank reads boxes of its own */
    ckpt_reader* r = NULL;
    ckpt_reader_step* c = NULL;
    int64_t steps[4], step = -1;
    size_t nsteps = 0, nvars = 0;
    int nranks = 0;
    double box[2 * COLS];
    int32_t local[64];
    uint64_t bstart[2], bcount[2] = {2, 3}, total = (uint64_t)ROWS * (uint64_t)size;
    const int next = (g_rank + 1) % size;
    MPI_Comm half;
    int before = g_bcasts;
    CHECK_RC(ckpt_reader_open(dir, &r), CKPT_OK); /* serial: no MPI */
    CHECK_RC(ckpt_reader_latest(r, &c), CKPT_OK);
    CHECK(g_bcasts == before);
    ckpt_reader_step_free(c);
    ckpt_reader_free(r);
    c = NULL, r = NULL;
    CHECK_RC(ckpt_reader_open_comm(MPI_COMM_WORLD, dir, &r), CKPT_OK);
    CHECK(g_bcasts > before); /* the listing came from rank 0 */
    before = g_bcasts;
    CHECK_RC(ckpt_reader_steps(r, steps, 4, &nsteps), CKPT_OK);
    CHECK(nsteps == 1 && steps[0] == 4);
    CHECK(check_agreed(ckpt_reader_open_step(r, 5, &c)) == CKPT_NOT_FOUND);
    CHECK(c == NULL);
    before = g_bcasts;
    CHECK_RC(ckpt_reader_latest(r, &c), CKPT_OK);
    CHECK(g_bcasts > before); /* so did the index */
    CHECK_RC(ckpt_reader_step_info(c, &step, &nranks, NULL), CKPT_OK);
    CHECK(step == 4 && nranks == size);
    CHECK_RC(ckpt_reader_step_nvars(c, &nvars), CKPT_OK);
    CHECK(nvars == 3);
    /* a 2x3 box across this rank's last row and the next rank's first (wrapping to row 0 at the end) */
    bstart[0] = ((uint64_t)g_rank * ROWS + ROWS - 1) % total, bstart[1] = 2;
    if (bstart[0] + 2 > total) bstart[0] = total - 2;
    CHECK_RC(ckpt_reader_step_read(c, "field", 2, bstart, bcount, box, sizeof box), CKPT_OK);
    for (i = 0; i < 6; ++i) CHECK(box[i] == field_value(bstart[0] + (uint64_t)i / 3, 2 + (uint64_t)i % 3));
    CHECK_RC(ckpt_reader_step_read_rank(c, "local", (uint32_t)next, local, sizeof local), CKPT_OK);
    for (i = 0; i < 2 + next; ++i) CHECK(local[i] == next * 10 + i);
    bstart[0] = total - 1; /* a box past the end: an error on the rank that asks, the others unaffected */
    CHECK_RC(ckpt_reader_step_read(c, "field", 2, bstart, bcount, box, sizeof box), CKPT_INVALID_ARGUMENT);
    CHECK_RC(ckpt_reader_step_verify(c), CKPT_OK);
    ckpt_reader_step_free(c);
    ckpt_reader_free(r);

    /* a communicator other than MPI_COMM_WORLD: the even and the odd ranks, each group on its own */
    MPI_Comm_split(MPI_COMM_WORLD, g_rank % 2, g_rank, &half);
    CHECK_RC(ckpt_reader_open_comm(half, dir, &r), CKPT_OK);
    CHECK_RC(ckpt_reader_open_step(r, 4, &c), CKPT_OK);
    bstart[0] = (uint64_t)g_rank * ROWS + 1, bcount[0] = 1;
    CHECK_RC(ckpt_reader_step_read(c, "field", 2, bstart, bcount, box, sizeof box), CKPT_OK);
    for (i = 0; i < 3; ++i) CHECK(box[i] == field_value(bstart[0], 2 + (uint64_t)i));
    ckpt_reader_step_free(c);
    ckpt_reader_free(r);
    MPI_Comm_free(&half);

    { /* a root that does not exist: rank 0's not_found, on every rank, with its message */
      char missing[700];
      snprintf(missing, sizeof missing, "%s/missing", dir);
      r = NULL;
      CHECK(check_agreed(ckpt_reader_open_comm(MPI_COMM_WORLD, missing, &r)) == CKPT_NOT_FOUND);
      CHECK(r == NULL);
    }
  }
  MPI_Barrier(MPI_COMM_WORLD);

  if (g_rank == 0) { /* flip a byte of the last rank's block of "field": find its last value in the data files */
    const double needle = field_value((uint64_t)ROWS * (uint64_t)size - 1, COLS - 1);
    char path[700];
    DIR* d;
    struct dirent* e;
    int flipped = 0;
    snprintf(path, sizeof path, "%s/ckpt.4", dir);
    d = opendir(path);
    CHECK(d != NULL);
    while (d && (e = readdir(d)) != NULL) {
      char file[1500];
      FILE* f;
      long len, k;
      unsigned char* buf;
      if (e->d_name[0] == '.' || strcmp(e->d_name, "index") == 0) continue;
      snprintf(file, sizeof file, "%s/%s", path, e->d_name);
      f = fopen(file, "r+b");
      if (!f) continue;
      fseek(f, 0, SEEK_END);
      len = ftell(f);
      buf = (unsigned char*)malloc((size_t)len + 1);
      fseek(f, 0, SEEK_SET);
      if (fread(buf, 1, (size_t)len, f) == (size_t)len)
        for (k = 0; k + 8 <= len && !flipped; k += 8)
          if (memcmp(buf + k, &needle, 8) == 0) {
            unsigned char b = (unsigned char)(buf[k] ^ 0x40);
            fseek(f, k, SEEK_SET);
            fwrite(&b, 1, 1, f);
            flipped = 1;
          }
      free(buf);
      fclose(f);
    }
    if (d) closedir(d);
    CHECK(flipped);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  {
    ckpt_reader* r = NULL;
    ckpt_reader_step* c = NULL;
    double box[64];
    uint64_t s0[2] = {0, 0}, n0[2] = {ROWS, COLS}, sl[2], nl[2] = {1, 1};
    sl[0] = (uint64_t)ROWS * (uint64_t)size - 1, sl[1] = 0;
    CHECK_RC(ckpt_reader_open(dir, &r), CKPT_OK);
    CHECK_RC(ckpt_reader_latest(r, &c), CKPT_OK);
    if (size > 1) CHECK_RC(ckpt_reader_step_read(c, "field", 2, s0, n0, box, sizeof box), CKPT_OK);
    CHECK_RC(ckpt_reader_step_read(c, "field", 2, sl, nl, box, sizeof box), CKPT_CORRUPT);
    CHECK(strstr(ckpt_last_error(), "'field'") != NULL);
    CHECK_RC(ckpt_reader_step_verify(c), CKPT_CORRUPT);
    CHECK(strstr(ckpt_last_error(), "1 bad block") != NULL);
    ckpt_reader_step_free(c);
    ckpt_reader_free(r);
  }
  CHECK_RC(ckpt_reader_open(NULL, NULL), CKPT_INVALID_ARGUMENT);
  { /* on the communicator, after the damage: the index is rank 0's, the reads each rank's own */
    ckpt_reader* r = NULL;
    ckpt_reader_step* c = NULL;
    double row[COLS];
    uint64_t s0[2], n0[2] = {1, COLS};
    s0[0] = (uint64_t)g_rank * ROWS, s0[1] = 0;
    CHECK_RC(ckpt_reader_open_comm(MPI_COMM_WORLD, dir, &r), CKPT_OK);
    CHECK_RC(ckpt_reader_latest(r, &c), CKPT_OK);
    /* the damaged block is the last rank's: only that rank's read fails, every other rank reads its row */
    if (g_rank != size - 1) {
      CHECK_RC(ckpt_reader_step_read(c, "field", 2, s0, n0, row, sizeof row), CKPT_OK);
      for (i = 0; i < COLS; ++i) CHECK(row[i] == field_value(s0[0], (uint64_t)i));
    } else {
      s0[0] += ROWS - 1;
      CHECK_RC(ckpt_reader_step_read(c, "field", 2, s0, n0, row, sizeof row), CKPT_CORRUPT);
    }
    CHECK_RC(ckpt_reader_step_verify(c), CKPT_CORRUPT);
    ckpt_reader_step_free(c);
    c = NULL;
    /* the index goes bad after the open: rank 0 reads it, every rank gets rank 0's error */
    MPI_Barrier(MPI_COMM_WORLD);
    if (g_rank == 0) {
      char path[700];
      FILE* f;
      snprintf(path, sizeof path, "%s/ckpt.4/index", dir);
      f = fopen(path, "r+b");
      CHECK(f != NULL);
      if (f) {
        /* flip the byte's bits: writing a constant is no change when the byte holds it already (byte 40
           lies in the index's creation time, which holds 0x5a for 17 minutes every 3 days) */
        int old = 0;
        CHECK(fseek(f, 40, SEEK_SET) == 0 && (old = fgetc(f)) != EOF);
        CHECK(fseek(f, 40, SEEK_SET) == 0 && fputc(old ^ 0x5a, f) != EOF);
        fclose(f);
      }
    }
    MPI_Barrier(MPI_COMM_WORLD);
    CHECK(check_agreed(ckpt_reader_latest(r, &c)) != CKPT_OK);
    CHECK(c == NULL);
    ckpt_reader_free(r);
    CHECK_RC(ckpt_reader_open_handle(NULL, 0, dir, &r), CKPT_INVALID_ARGUMENT);
    CHECK(r == NULL);
    CHECK_RC(ckpt_reader_open_handle(&g_rank, 1, dir, &r), CKPT_INVALID_ARGUMENT);
    CHECK(r == NULL);
  }
  {
    ckpt_reader* r = NULL;
    char missing[700];
    snprintf(missing, sizeof missing, "%s/missing", dir);
    CHECK_RC(ckpt_reader_open(missing, &r), CKPT_NOT_FOUND);
    CHECK(r == NULL);
  }

  series_case(dir, size);

  {
    int bad = g_failures, any = 0;
    MPI_Allreduce(&bad, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (g_rank == 0) printf("c_reader: %s\n", any ? "FAILED" : "ok");
    MPI_Finalize();
    return any ? 1 : 0;
  }
}
