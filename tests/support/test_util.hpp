// Helpers for ckpt tests: a fresh scratch directory per test (the same on every rank).
#ifndef CKPT_TESTS_SUPPORT_TEST_UTIL_HPP
#define CKPT_TESTS_SUPPORT_TEST_UTIL_HPP

#include <fcntl.h>
#include <gtest/gtest.h>
#include <mpi.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "base/posix_io.hpp"
#include "ckpt/ckpt.hpp"

namespace ckpt::test {

/// rt.latest() for a test: the newest step, -1 when there is none; an error fails the test (and gives -2).
inline std::int64_t newest_step(Runtime& rt) {
  auto newest = rt.latest();
  if (!newest.ok()) {
    ADD_FAILURE() << "latest(): " << newest.status().to_string();
    return -2;
  }
  return newest->value_or(-1);
}

/// The test knob CKPT_TEST_FLUSH_DELAY_MS (the flush thread sleeps this many ms before each chunk
/// write) for the Runtimes made while this lives: set in the environment, unset at the end.
class FlushDelay {
 public:
  explicit FlushDelay(int ms) { ::setenv("CKPT_TEST_FLUSH_DELAY_MS", std::to_string(ms).c_str(), 1); }
  ~FlushDelay() { ::unsetenv("CKPT_TEST_FLUSH_DELAY_MS"); }
  FlushDelay(const FlushDelay&) = delete;
  FlushDelay& operator=(const FlushDelay&) = delete;
};

/// Pages of the file at `path` in the page cache (mincore of a shared mapping, which faults nothing
/// in); the file's length in pages into `pages` when given. 0 when the file cannot be read.
inline std::size_t resident_pages(const std::string& path, std::size_t* pages = nullptr) {
  const int fd = ::open(path.c_str(), O_RDONLY);
  struct stat st {};
  if (fd < 0 || ::fstat(fd, &st) != 0) {
    if (fd >= 0) ::close(fd);
    return 0;
  }
  const std::size_t len = static_cast<std::size_t>(st.st_size), page = 4096;
  if (pages != nullptr) *pages = (len + page - 1) / page;
  std::size_t n = 0;
  void* m = len == 0 ? MAP_FAILED : ::mmap(nullptr, len, PROT_READ, MAP_SHARED, fd, 0);
  if (m != MAP_FAILED) {
    std::vector<unsigned char> v((len + page - 1) / page);
    if (::mincore(m, len, v.data()) == 0)
      for (unsigned char c : v) n += c & 1u;
    ::munmap(m, len);
  }
  ::close(fd);
  return n;
}

/// Options() (the defaults and the CKPT_* variables) with `dir`.
inline Options options_in(const std::string& dir) {
  Options o;
  o.dir = dir;
  return o;
}

inline int world_rank() {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}
inline int world_size() {
  int s = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &s);
  return s;
}

/// True on every rank when `b` is true on every rank (a collective: use it for checks that decide
/// whether a test goes on, so that no rank leaves a test alone and strands the others).
inline bool all_true(bool b) {
  int v = b ? 1 : 0, all = 0;
  MPI_Allreduce(&v, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  return all == 1;
}

/// An empty directory named after the running test, created by rank 0; every rank gets the path.
inline std::string scratch_dir(const std::string& suffix = "") {
  const char* base = std::getenv("CKPTTEST_TMP");
  std::string root = base ? base : "/tmp/ckpt-test";
  auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  std::string dir = root + "/" + info->test_suite_name() + "." + info->name() + suffix;
  for (auto& c : dir)
    if (c == ' ') c = '_';
  if (world_rank() == 0) {
    ckpt::detail::remove_tree(dir);
    ckpt::detail::make_dirs(dir);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  return dir;
}

}  // namespace ckpt::test

#endif  // CKPT_TESTS_SUPPORT_TEST_UTIL_HPP
