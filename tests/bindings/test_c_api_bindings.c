/* The C functions for language bindings (ckpt/ckpt.h, "For language bindings") at 4 ranks:
 * ckpt_create_handle_options (options as YAML/JSON text: precedence file < text < CKPT_* variables,
 * every error agreed and named "options"), ckpt_restart_stream / ckpt_restart_step_stream and
 * ckpt_device_name. C99, built with -Wall -Wextra -pedantic -Werror. Scratch directory: $CKPTTEST_TMP.
 * Exit status 0 when every check held. */
#define _POSIX_C_SOURCE 200112L /* setenv */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "ckpt/ckpt.h"
#include "ckpt_check.h"

#define CHECK_RC(got, want, rt) CHECK_CODE(got, want, ckpt_error_message(rt))

static int is_dir(const char* path) {
  struct stat st;
  return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

/* Creates a runtime on MPI_COMM_WORLD from `config` and `options`; the code. */
static int create(const char* config, const char* options, ckpt_runtime** rt) {
  MPI_Comm world = MPI_COMM_WORLD;
  return ckpt_create_handle_options(&world, sizeof world, config, options, rt);
}

/* One checkpoint of `value` (a scalar) at `step` through a runtime made from `config` and `options`. */
static void checkpoint_once(const char* config, const char* options, int64_t step) {
  ckpt_runtime* rt = NULL;
  CHECK_RC(create(config, options, &rt), CKPT_OK, NULL);
  if (rt == NULL) return;
  double value = (double)step;
  CHECK_RC(ckpt_protect_scalar(rt, "value", &value, CKPT_F64), CKPT_OK, rt);
  CHECK_RC(ckpt_checkpoint(rt, step, NULL, NULL), CKPT_OK, rt);
  CHECK_RC(ckpt_close(rt), CKPT_OK, rt);
  ckpt_free(rt);
  /* Rank 0 applies retention after the commit, off the other ranks' path: once every rank has closed
     (rank 0's close joins its commit thread) it is done, and the checks below may look. */
  MPI_Barrier(MPI_COMM_WORLD);
}

int main(int argc, char** argv) {
  int provided = 0, size = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const char* tmp = getenv("CKPTTEST_TMP");
  char base[512], yaml[600], from_file[600], from_text[600], from_env[600], text[1400];
  snprintf(base, sizeof base, "%s/c_api_bindings", tmp != NULL ? tmp : "/tmp/ckpt-c-api-bindings-test");
  snprintf(yaml, sizeof yaml, "%s/options.yaml", base);
  snprintf(from_file, sizeof from_file, "%s/file", base);
  snprintf(from_text, sizeof from_text, "%s/text", base);
  snprintf(from_env, sizeof from_env, "%s/env", base);
  if (g_rank == 0) {
    fresh_dir(base);
    snprintf(text, sizeof text, "dir: %s\nkeep: 5\nfsync: false\n", from_file);
    write_text(yaml, text);
  }
  MPI_Barrier(MPI_COMM_WORLD);

  /* ---- precedence: the file alone, the text over the file, the environment over both ---- */
  checkpoint_once(yaml, NULL, 1);
  CHECK(is_dir(from_file));
  snprintf(text, sizeof text, "{\"dir\": \"%s\", \"keep\": 1}", from_text); /* JSON: a YAML flow map */
  checkpoint_once(yaml, text, 2);
  checkpoint_once(yaml, text, 3);
  {
    char step2[700], step3[700];
    snprintf(step2, sizeof step2, "%s/ckpt.2", from_text);
    snprintf(step3, sizeof step3, "%s/ckpt.3", from_text);
    CHECK(!is_dir(step2) && is_dir(step3)); /* keep: 1 from the text, over the file's 5 */
  }
  checkpoint_once(NULL, text, 4); /* the text alone, no file */
  CHECK(setenv("CKPT_DIR", from_env, 1) == 0);
  checkpoint_once(yaml, text, 5);
  CHECK(unsetenv("CKPT_DIR") == 0);
  {
    char step5[700];
    snprintf(step5, sizeof step5, "%s/ckpt.5", from_env);
    CHECK(is_dir(step5));
  }
  /* Nested values: groups (a list of maps) and mpiio_hints as a map, as a Python dict gives them. */
  snprintf(text, sizeof text,
           "{\"dir\": \"%s/nested\", \"mpiio_hints\": {\"cb_buffer_size\": \"16M\"}, "
           "\"groups\": [{\"name\": \"g\", \"match\": [\"value*\"], \"transport\": \"posix\"}]}",
           base);
  checkpoint_once(NULL, text, 6);

  /* ---- errors: every rank gets the same code, rt stays NULL, the message names "options" ---- */
  {
    const char* bad[] = {"{\"no_such_option\": 1}", "{\"keep\": 0}", "[1, 2]", "{\"dir\": ", "{\"keep\": [1]}"};
    const int codes[] = {CKPT_INVALID_ARGUMENT, CKPT_INVALID_ARGUMENT, CKPT_INVALID_ARGUMENT, CKPT_INVALID_ARGUMENT,
                         CKPT_INVALID_ARGUMENT};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; ++i) {
      ckpt_runtime* rt = (ckpt_runtime*)&rt;
      CHECK_RC(create(yaml, bad[i], &rt), codes[i], NULL);
      CHECK(rt == NULL);
      CHECK(strstr(ckpt_last_error(), "options") != NULL);
    }
    ckpt_runtime* rt = (ckpt_runtime*)&rt;
    CHECK_RC(create(yaml, "{\"no_such_option\": 1}", &rt), CKPT_INVALID_ARGUMENT, NULL);
    CHECK(strstr(ckpt_last_error(), "no_such_option") != NULL);
    /* A missing file is still the file's error, with or without text. */
    char missing[700];
    snprintf(missing, sizeof missing, "%s/missing.yaml", base);
    CHECK(create(missing, "{\"keep\": 2}", &rt) != CKPT_OK);
    CHECK(rt == NULL && strstr(ckpt_last_error(), "missing.yaml") != NULL);
    int wrong = 0;
    CHECK_RC(ckpt_create_handle_options(&wrong, sizeof wrong + 1, NULL, "{}", &rt), CKPT_INVALID_ARGUMENT, NULL);
    CHECK_RC(ckpt_create_handle_options(NULL, 0, NULL, NULL, NULL), CKPT_INVALID_ARGUMENT, NULL);
    /* Every rank failed alike: no rank holds a runtime the others lack (the next collective works). */
    int all = 0, mine = rt == NULL ? 1 : 0;
    MPI_Allreduce(&mine, &all, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    CHECK(all == size);
  }

  /* ---- ckpt_device_name, ckpt_restart_stream, ckpt_restart_step_stream ---- */
  ckpt_runtime* rt = NULL;
  snprintf(text, sizeof text, "{\"dir\": \"%s/restart\", \"keep\": 3, \"fsync\": false}", base);
  CHECK_RC(create(NULL, text, &rt), CKPT_OK, NULL);
  if (rt == NULL) MPI_Abort(MPI_COMM_WORLD, 1);
  const char* device = NULL;
  CHECK_RC(ckpt_device_name(rt, &device), CKPT_OK, rt);
  CHECK(device != NULL && (strcmp(device, "host") == 0 || strcmp(device, "cuda") == 0 || strcmp(device, "hip") == 0));
  CHECK_RC(ckpt_device_name(rt, NULL), CKPT_INVALID_ARGUMENT, NULL);
  CHECK_RC(ckpt_device_name(NULL, &device), CKPT_INVALID_ARGUMENT, NULL);

  int64_t step = 7;
  int32_t data[5];
  const uint64_t dims[1] = {5};
  CHECK_RC(ckpt_protect(rt, "data", data, CKPT_I32, 1, dims), CKPT_OK, rt);
  CHECK_RC(ckpt_restart_stream(rt, NULL, &step), CKPT_NOT_FOUND, rt); /* nothing written yet */
  CHECK(step == -1);
  for (int64_t s = 1; s <= 2; ++s) {
    for (int i = 0; i < 5; ++i) data[i] = (int32_t)(s * 100 + g_rank * 10 + i);
    CHECK_RC(ckpt_checkpoint(rt, s, NULL, NULL), CKPT_OK, rt);
    CHECK_RC(ckpt_wait_all(rt), CKPT_OK, rt);
  }
  /* A stream is a cudaStream_t: only the host device may be handed one that is not a real stream (it
   * ignores it); a GPU build passes the default stream. */
  void* stream = strcmp(device, "host") == 0 ? (void*)0x5eed : NULL;
  memset(data, 0, sizeof data);
  CHECK_RC(ckpt_restart_stream(rt, stream, &step), CKPT_OK, rt);
  CHECK(step == 2 && data[4] == 200 + g_rank * 10 + 4);
  memset(data, 0, sizeof data);
  CHECK_RC(ckpt_restart_step_stream(rt, 1, stream), CKPT_OK, rt);
  CHECK(data[0] == 100 + g_rank * 10);
  CHECK_RC(ckpt_restart_step_stream(rt, 99, stream), CKPT_NOT_FOUND, rt);
  CHECK_RC(ckpt_restart_stream(rt, stream, NULL), CKPT_INVALID_ARGUMENT, rt);
  CHECK_RC(ckpt_restart_stream(NULL, stream, &step), CKPT_INVALID_ARGUMENT, NULL);
  CHECK_RC(ckpt_restart_step_stream(NULL, 1, stream), CKPT_INVALID_ARGUMENT, NULL);
  CHECK_RC(ckpt_close(rt), CKPT_OK, rt);
  CHECK_RC(ckpt_restart_step_stream(rt, 1, stream), CKPT_FAILED_PRECONDITION, rt);
  CHECK_RC(ckpt_device_name(rt, &device), CKPT_OK, rt); /* still answers after close */
  ckpt_free(rt);

  return check_finish("c_api_bindings");
}
