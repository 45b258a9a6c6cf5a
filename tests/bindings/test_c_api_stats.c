/* ckpt_checkpoint_stats at 4 ranks: every field of ckpt::CheckpointStats, filled with the figures C++ has
 * (docs/api-c-fortran.md, "The figures of a checkpoint"): synced with fsync and durable_every_ms 0 and
 * not without fsync; redundancy_s and redundancy_bytes with local_dir and redundancy partner on 4 ranks
 * as 2 nodes (ranks_per_node 2) and 0 without; staging_pinned_bytes 0 on the host device; and the ABI:
 * the exported ckpt_ticket_stats of binaries built before the struct grew writes its first nine fields
 * only, ckpt_ticket_stats_sized whole fields inside the size it is given and zeroes the bytes beyond the
 * fields it knows, and refuses a size smaller than the first nine. C99, -Wall -Wextra -pedantic -Werror.
 * Scratch directory: $CKPTTEST_TMP. Exit status 0 when every check held. */
#include <mpi.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ckpt/ckpt.h"
#include "ckpt_check.h"

#define CHECK_RC(got, want, rt) CHECK_CODE(got, want, ckpt_error_message(rt))

enum { N = 4096, SENTINEL = 0xAB };

static int create(const char* options, ckpt_runtime** rt) {
  MPI_Comm world = MPI_COMM_WORLD;
  return ckpt_create_handle_options(&world, sizeof world, NULL, options, rt);
}

/* One committed checkpoint of `data` (step 1) under `options`; its ticket (to free), or NULL. */
static ckpt_ticket* one_checkpoint(const char* options, double* data, ckpt_runtime** out) {
  ckpt_runtime* rt = NULL;
  ckpt_ticket* tk = NULL;
  uint64_t n = N;
  CHECK_RC(create(options, &rt), CKPT_OK, NULL);
  if (rt == NULL) MPI_Abort(MPI_COMM_WORLD, 1);
  CHECK_RC(ckpt_protect(rt, "data", data, CKPT_F64, 1, &n), CKPT_OK, rt);
  CHECK_RC(ckpt_checkpoint(rt, 1, NULL, &tk), CKPT_OK, rt);
  if (tk != NULL) CHECK_RC(ckpt_ticket_wait(tk), CKPT_OK, NULL);
  *out = rt;
  return tk;
}

int main(int argc, char** argv) {
  int provided = 0, size = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const char* tmp = getenv("CKPTTEST_TMP");
  char base[512], options[2000];
  snprintf(base, sizeof base, "%s/c_api_stats", tmp != NULL ? tmp : "/tmp/ckpt-c-api-stats-test");
  if (g_rank == 0) fresh_dir(base);
  MPI_Barrier(MPI_COMM_WORLD);
  double* data = (double*)malloc(N * sizeof(double));
  for (int i = 0; i < N; ++i) data[i] = g_rank * 1e4 + i;

  /* ---- fsync on, durable_every_ms 0: synced; no redundancy; the host device pins nothing ---- */
  {
    ckpt_runtime* rt = NULL;
    snprintf(options, sizeof options, "{\"dir\": \"%s/synced\", \"fsync\": true, \"durable_every_ms\": 0}", base);
    ckpt_ticket* tk = one_checkpoint(options, data, &rt);
    ckpt_checkpoint_stats s;
    memset(&s, 0, sizeof s);
    s.synced = -1;
    CHECK_RC(ckpt_ticket_stats(tk, &s), CKPT_OK, NULL); /* the macro: ckpt_ticket_stats_sized, whole struct */
    CHECK(s.step == 1);
    CHECK(s.bytes == N * sizeof(double));
    CHECK(s.bytes_written >= s.bytes);
    CHECK(s.committed_s >= s.durable_s && s.durable_s > 0.0 && s.blocked_s > 0.0);
    CHECK(s.staging_bytes > 0);
    CHECK(s.synced == 1);
    CHECK(s.redundancy_s == 0.0 && s.redundancy_bytes == 0);
    const char* device = NULL;
    CHECK_RC(ckpt_device_name(rt, &device), CKPT_OK, rt);
    CHECK(s.staging_pinned_bytes <= s.staging_bytes);
    if (device != NULL && strcmp(device, "host") == 0) CHECK(s.staging_pinned_bytes == 0);

    /* The ABI. Binaries built before the struct grew call the exported function, which writes the
     * first nine fields only: the bytes after them stay as the caller left them. */
    const size_t v1 = offsetof(ckpt_checkpoint_stats, redundancy_s);
    unsigned char buf[sizeof(ckpt_checkpoint_stats) + 32];
    memset(buf, SENTINEL, sizeof buf);
    CHECK_RC((ckpt_ticket_stats)(tk, (ckpt_checkpoint_stats*)(void*)buf), CKPT_OK, NULL);
    ckpt_checkpoint_stats old;
    memcpy(&old, buf, sizeof old);
    CHECK(old.step == 1 && old.bytes == s.bytes && old.bytes_written == s.bytes_written &&
          old.staging_bytes == s.staging_bytes && old.committed_s == s.committed_s);
    int untouched = 1;
    for (size_t i = v1; i < sizeof buf; ++i) untouched &= buf[i] == SENTINEL;
    CHECK(untouched);
    /* Whole fields inside the size given: v1 + 12 holds redundancy_s (8 bytes), not redundancy_bytes;
     * the 4 bytes after redundancy_s are zeroed, the rest untouched. */
    memset(buf, SENTINEL, sizeof buf);
    CHECK_RC(ckpt_ticket_stats_sized(tk, (ckpt_checkpoint_stats*)(void*)buf, v1 + 12), CKPT_OK, NULL);
    memcpy(&old, buf, sizeof old);
    CHECK(old.step == 1 && old.redundancy_s == s.redundancy_s);
    int zeroed = 1;
    for (size_t i = v1 + 8; i < v1 + 12; ++i) zeroed &= buf[i] == 0;
    CHECK(zeroed);
    untouched = 1;
    for (size_t i = v1 + 12; i < sizeof buf; ++i) untouched &= buf[i] == SENTINEL;
    CHECK(untouched);
    /* A caller built with a larger struct (a newer header): the fields this library knows, then zeros. */
    memset(buf, SENTINEL, sizeof buf);
    CHECK_RC(ckpt_ticket_stats_sized(tk, (ckpt_checkpoint_stats*)(void*)buf, sizeof buf), CKPT_OK, NULL);
    memcpy(&old, buf, sizeof old);
    CHECK(old.synced == 1 && old.step == 1 && old.staging_pinned_bytes == s.staging_pinned_bytes);
    zeroed = 1;
    for (size_t i = offsetof(ckpt_checkpoint_stats, synced) + sizeof old.synced; i < sizeof buf; ++i)
      zeroed &= buf[i] == 0;
    CHECK(zeroed);
    /* Smaller than the first nine fields: refused, nothing written. */
    memset(buf, SENTINEL, sizeof buf);
    CHECK_RC(ckpt_ticket_stats_sized(tk, (ckpt_checkpoint_stats*)(void*)buf, v1 - 1), CKPT_INVALID_ARGUMENT, NULL);
    CHECK(strstr(ckpt_last_error(), "stats_size") != NULL);
    CHECK(buf[0] == SENTINEL);
    CHECK_RC(ckpt_ticket_stats(NULL, &s), CKPT_INVALID_ARGUMENT, NULL);
    CHECK_RC(ckpt_ticket_stats(tk, (ckpt_checkpoint_stats*)NULL), CKPT_INVALID_ARGUMENT, NULL);
    ckpt_ticket_free(tk);
    CHECK_RC(ckpt_close(rt), CKPT_OK, rt);
    ckpt_free(rt);
  }

  /* ---- fsync off: not synced ---- */
  {
    ckpt_runtime* rt = NULL;
    snprintf(options, sizeof options, "{\"dir\": \"%s/unsynced\", \"fsync\": false}", base);
    ckpt_ticket* tk = one_checkpoint(options, data, &rt);
    ckpt_checkpoint_stats s;
    memset(&s, 0, sizeof s);
    s.synced = -1;
    CHECK_RC(ckpt_ticket_stats(tk, &s), CKPT_OK, NULL);
    CHECK(s.step == 1 && s.synced == 0);
    ckpt_ticket_free(tk);
    CHECK_RC(ckpt_close(rt), CKPT_OK, rt);
    ckpt_free(rt);
  }

  /* ---- local_dir + redundancy partner, 4 ranks as 2 nodes: the copy to the partner node ---- */
  if (size % 2 == 0) {
    ckpt_runtime* rt = NULL;
    snprintf(options, sizeof options,
             "{\"dir\": \"%s/global\", \"local_dir\": \"%s/local\", \"ranks_per_node\": 2, "
             "\"redundancy\": \"partner\", \"fsync\": false}",
             base, base);
    ckpt_ticket* tk = one_checkpoint(options, data, &rt);
    ckpt_checkpoint_stats s;
    memset(&s, 0, sizeof s);
    CHECK_RC(ckpt_ticket_stats(tk, &s), CKPT_OK, NULL);
    CHECK(s.step == 1);
    CHECK(s.redundancy_bytes >= N * sizeof(double)); /* this rank's data went to the other node */
    CHECK(s.redundancy_s > 0.0 && s.redundancy_s <= s.committed_s);
    ckpt_ticket_free(tk);
    CHECK_RC(ckpt_close(rt), CKPT_OK, rt);
    ckpt_free(rt);
  }
  free(data);

  return check_finish("c_api_stats");
}
