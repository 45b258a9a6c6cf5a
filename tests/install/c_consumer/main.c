/* Uses only the installed C header: checkpoint an array, restart it, check it. */
#include <mpi.h>
#include <stdio.h>

#include "ckpt/ckpt.h"

int main(int argc, char** argv) {
  int provided = 0, ok = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  ckpt_runtime* rt = NULL;
  double v[100];
  const uint64_t n[1] = {100};
  int64_t step = -1;
  for (int i = 0; i < 100; ++i) v[i] = 0.5 * i;
  int rc = ckpt_create(MPI_COMM_WORLD, NULL, &rt);
  if (rc == CKPT_OK) rc = ckpt_protect(rt, "v", v, CKPT_F64, 1, n);
  if (rc == CKPT_OK) rc = ckpt_checkpoint(rt, 3, NULL, NULL);
  if (rc == CKPT_OK) rc = ckpt_wait_all(rt);
  for (int i = 0; i < 100; ++i) v[i] = 0;
  if (rc == CKPT_OK) rc = ckpt_restart(rt, &step);
  int64_t steps[2] = {-1, -1};
  size_t nsteps = 0;
  const char* dir = NULL;
  if (rc == CKPT_OK) rc = ckpt_steps(rt, steps, 2, &nsteps); /* the sizing functions are exported too */
  if (rc == CKPT_OK) rc = ckpt_dir(rt, &dir);
  ok = rc == CKPT_OK && step == 3 && v[99] == 49.5 && nsteps == 1 && steps[0] == 3 && dir != NULL && dir[0] == '/';
  printf("c consumer (ckpt %s): %s\n", ckpt_version(), ok ? "ok" : ckpt_error_message(rt));
  ckpt_free(rt);
  MPI_Finalize();
  return ok ? 0 : 1;
}
