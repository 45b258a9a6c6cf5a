// main() of every ckpt test: MPI with MPI_THREAD_MULTIPLE, GoogleTest, output from rank 0 only
// (other ranks print their failures), and the scratch directory from CKPTTEST_TMP.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cstdio>

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  ::testing::InitGoogleTest(&argc, argv);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (rank != 0) {
    auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
  }
  int rc = RUN_ALL_TESTS();
  int worst = 0;
  MPI_Allreduce(&rc, &worst, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  if (rank != 0 && rc != 0) std::fprintf(stderr, "rank %d: tests failed\n", rank);
  MPI_Finalize();
  return worst;
}
