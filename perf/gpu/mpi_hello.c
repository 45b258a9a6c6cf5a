/* The first check of perf/gpu/run.sh: the carried Open MPI starts ranks with MPI_THREAD_MULTIPLE. */
#include <mpi.h>
#include <stdio.h>

int main(int argc, char** argv) {
  int provided = 0, rank = 0, size = 0, len = 0;
  char version[MPI_MAX_LIBRARY_VERSION_STRING];
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  MPI_Get_library_version(version, &len);
  int sum = 0;
  MPI_Allreduce(&rank, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (rank == 0)
    printf("mpi hello: %d ranks, rank sum %d (want %d), thread level %s, %.60s\n", size, sum, size * (size - 1) / 2,
           provided == MPI_THREAD_MULTIPLE ? "MULTIPLE" : "below MULTIPLE", version);
  MPI_Finalize();
  return sum == size * (size - 1) / 2 && provided == MPI_THREAD_MULTIPLE ? 0 : 1;
}
