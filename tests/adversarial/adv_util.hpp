// Helpers of the adversarial suite (issue 14): a watchdog that turns a hang into a failure naming the
// case, collective checks, and small file tools for hostile directory contents.
#ifndef CKPT_TESTS_ADVERSARIAL_ADV_UTIL_HPP
#define CKPT_TESTS_ADVERSARIAL_ADV_UTIL_HPP

#include <gtest/gtest.h>
#include <mpi.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <initializer_list>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "base/format.hpp"
#include "base/posix_io.hpp"
#include "ckpt/ckpt.hpp"
#include "test_util.hpp"

namespace ckpt::adv {

using test::all_true;
using test::scratch_dir;
using test::world_rank;
using test::world_size;

/// Every case runs under a watchdog: a hang (a rank left waiting in a collective, a FIFO opened for
/// reading) becomes a failure that names the case and the promise, within `seconds`, instead of a
/// ctest timeout of the whole program.
class Watchdog {
 public:
  explicit Watchdog(int seconds) {
    auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    m_name = std::string(info->test_suite_name()) + "." + info->name();
    m_thread = std::thread([this, seconds] {
      std::unique_lock<std::mutex> lk(m_mu);
      if (!m_cv.wait_for(lk, std::chrono::seconds(seconds), [&] { return m_done; })) {
        std::fprintf(stderr, "rank %d: HANG: %s did not finish within %d s (promise: no hang)\n", world_rank(),
                     m_name.c_str(), seconds);
        std::fflush(stderr);
        std::_Exit(86);
      }
    });
  }
  ~Watchdog() {
    {
      std::lock_guard<std::mutex> lk(m_mu);
      m_done = true;
    }
    m_cv.notify_all();
    m_thread.join();
  }

 private:
  std::string m_name;
  std::mutex m_mu;
  std::condition_variable m_cv;
  bool m_done = false;
  std::thread m_thread;
};

/// The fixture of every gtest case: a watchdog of 60 s (times the sanitizer scale) and a scratch dir.
class Adversarial : public ::testing::Test {
 protected:
  Adversarial() : m_watchdog(timeout()) {}
  static int timeout() {
    const char* scale = std::getenv("ADVTEST_TIMEOUT_SCALE");
    return 60 * (scale ? std::max(1, std::atoi(scale)) : 1);
  }
  Options opts(const std::string& dir) {
    Options o = Options::defaults();
    o.dir = dir;
    o.fsync = false;
    o.chunk_bytes = 64 << 10;
    return o;
  }
  Watchdog m_watchdog;
};

/// A status the same on every rank (code and message): collective outcomes must agree.
inline bool same_on_all_ranks(const Status& s) {
  const std::string text = s.to_string();
  unsigned long long h = std::hash<std::string>{}(text), lo = 0, hi = 0;
  MPI_Allreduce(&h, &lo, 1, MPI_UNSIGNED_LONG_LONG, MPI_MIN, MPI_COMM_WORLD);
  MPI_Allreduce(&h, &hi, 1, MPI_UNSIGNED_LONG_LONG, MPI_MAX, MPI_COMM_WORLD);
  return lo == hi;
}

/// True when `text` contains `part`.
inline bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

inline bool exists(const std::string& p) {
  struct stat st {};
  return ::lstat(p.c_str(), &st) == 0;
}

inline void write_text(const std::string& path, const std::string& text) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f << text;
}

/// Protects the scalar "x" and commits each of `steps` with x = step (use in ASSERT_NO_FATAL_FAILURE).
inline void commit_steps(Runtime& rt, double& x, std::initializer_list<std::int64_t> steps) {
  ASSERT_TRUE(rt.protect_scalar("x", &x).ok());
  for (std::int64_t s : steps) {
    x = static_cast<double>(s);
    Status st = rt.checkpoint(s).wait();
    ASSERT_TRUE(st.ok()) << "checkpoint " << s << ": " << st.to_string();
  }
}

/// Flips (XOR 0x5a) the byte in the middle of block `b` of `file`.
inline void flip_middle_byte(const std::string& file, const detail::BlockRecord& b) {
  FILE* f = std::fopen(file.c_str(), "r+b");
  ASSERT_NE(f, nullptr) << file;
  const long at = static_cast<long>(b.offset + b.length / 2);
  std::fseek(f, at, SEEK_SET);
  const int c = std::fgetc(f);
  std::fseek(f, at, SEEK_SET);
  std::fputc(c ^ 0x5a, f);
  std::fclose(f);
}

/// Flips one byte in the middle of the first non-empty block of `ckpt_dir` (rank 0 only).
inline void corrupt_first_block(const std::string& ckpt_dir) {
  auto bytes = detail::read_file(ckpt_dir + "/index", 1u << 30);
  ASSERT_TRUE(bytes.ok()) << bytes.status().to_string();
  auto idx = detail::decode_index(bytes->data(), bytes->size());
  ASSERT_TRUE(idx.ok()) << idx.status().to_string();
  for (auto& b : idx->blocks) {
    if (b.length == 0) continue;
    flip_middle_byte(ckpt_dir + "/" + idx->files[b.file].name, b);
    return;
  }
  FAIL() << "no block to corrupt in " << ckpt_dir;
}

/// Flips a byte in the middle of every block of variable `var` written by `rank` in the checkpoint
/// at `ckpt_dir` (directory layout).
inline void corrupt_blocks_of(const std::string& ckpt_dir, const std::string& var, std::uint32_t rank) {
  auto bytes = detail::read_file(ckpt_dir + "/index", 1u << 30);
  ASSERT_TRUE(bytes.ok()) << bytes.status().to_string();
  auto idx = detail::decode_index(bytes->data(), bytes->size());
  ASSERT_TRUE(idx.ok()) << idx.status().to_string();
  int hit = 0;
  for (auto& b : idx->blocks) {
    if (b.length == 0 || idx->vars[b.var].name != var || b.rank != rank) continue;
    flip_middle_byte(ckpt_dir + "/" + idx->files[b.file].name, b);
    ++hit;
  }
  ASSERT_GT(hit, 0) << "no block of '" << var << "' of rank " << rank << " in " << ckpt_dir;
}

}  // namespace ckpt::adv

#endif  // CKPT_TESTS_ADVERSARIAL_ADV_UTIL_HPP
