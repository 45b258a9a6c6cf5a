// main() of every ckpt test: MPI with MPI_THREAD_MULTIPLE (CKPTTEST_MPI_THREAD_LEVEL=single, funneled
// or serialized asks for another level), GoogleTest, output from rank 0 only (other ranks print their
// failures), and the scratch directory from CKPTTEST_TMP.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cstdio>
#include <cstdlib>
#include <string>

namespace {
/// On ranks other than 0 the default printer is removed (one copy of the output); this prints their
/// failed assertions at once, with the rank, so a rank that leaves a test early (and leaves the others
/// waiting in a collective) says why before the hang.
class RankFailurePrinter : public ::testing::EmptyTestEventListener {
 public:
  explicit RankFailurePrinter(int rank) : m_rank(rank) {}
  void OnTestStart(const ::testing::TestInfo& info) override {
    m_test = std::string(info.test_suite_name()) + "." + info.name();
  }
  // Called with GoogleTest's mutex held: only the result itself may be used here.
  void OnTestPartResult(const ::testing::TestPartResult& r) override {
    if (!r.failed()) return;
    std::fprintf(stderr, "rank %d: %s: %s:%d: Failure\n%s\n", m_rank, m_test.c_str(),
                 r.file_name() ? r.file_name() : "?", r.line_number(), r.message());
    std::fflush(stderr);
  }

 private:
  int m_rank;
  std::string m_test;
};

/// The thread level CKPTTEST_MPI_THREAD_LEVEL names (MPI_THREAD_MULTIPLE by default).
int thread_level() {
  const char* v = std::getenv("CKPTTEST_MPI_THREAD_LEVEL");
  const std::string s = v ? v : "";
  if (s == "single") return MPI_THREAD_SINGLE;
  if (s == "funneled") return MPI_THREAD_FUNNELED;
  if (s == "serialized") return MPI_THREAD_SERIALIZED;
  return MPI_THREAD_MULTIPLE;
}
}  // namespace

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, thread_level(), &provided);
  ::testing::InitGoogleTest(&argc, argv);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (rank != 0) {
    auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
    listeners.Append(new RankFailurePrinter(rank));
  }
  int rc = RUN_ALL_TESTS();
  int worst = 0;
  MPI_Allreduce(&rc, &worst, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  if (rank != 0 && rc != 0) std::fprintf(stderr, "rank %d: tests failed\n", rank);
  MPI_Finalize();
  return worst;
}
