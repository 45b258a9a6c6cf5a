// Corruption sweep (issue 9): write real checkpoints, then damage each file of the newest one - a
// single-bit flip at many offsets (every RELTEST_STRIDE bytes, every header/footer byte, both ends of
// every block) and truncation at many lengths - and check after each change:
//  * a change in bytes that restart reads (index, block payload): restart(step) fails with a Status
//    naming the file (and for a block the variable), latest()/restart() fall back to the previous
//    checkpoint and restore its data bit for bit;
//  * a change in bytes that restart does not read (data-file header, padding between blocks, tail):
//    restart(step) still restores the exact data, and `ckpt verify` (data header checksum, zero
//    padding) reports the checkpoint as bad.
// RELTEST_STRIDE=1 flips every byte (the long run); the default keeps the test to a few seconds.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "base/format.hpp"
#include "base/posix_io.hpp"
#include "ckpt/ckpt.hpp"
#include "test_util.hpp"

using namespace ckpt;
using ckpt::test::all_true;
using ckpt::test::scratch_dir;
using ckpt::test::world_rank;
using ckpt::test::world_size;

namespace {

std::uint64_t env_u64(const char* name, std::uint64_t dflt) {
  const char* v = std::getenv(name);
  return v && *v ? std::strtoull(v, nullptr, 10) : dflt;
}

std::uint64_t mix(std::uint64_t x) {  // splitmix64
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

/// A rank's state: a 2D global array (>= 64 KiB per rank: aligned blocks, padding), a small local
/// array, scalars. Values are a pure function of (step, rank, index).
struct State {
  static constexpr std::uint64_t kCols = 64;
  std::uint64_t rows_global = 0, row0 = 0, rows = 0;
  std::vector<double> grid;
  std::vector<std::int32_t> ids;
  std::int64_t step = 0;
  double time = 0;
  State(int rank, int size) {
    const std::uint64_t per = 150;  // 150 x 64 x 8 = 75 KiB per rank
    rows_global = per * static_cast<std::uint64_t>(size) + 1;
    const std::uint64_t base = rows_global / size, extra = rows_global % size;
    rows = base + (static_cast<std::uint64_t>(rank) < extra ? 1 : 0);
    row0 = rank * base + std::min<std::uint64_t>(rank, extra);
    grid.resize(rows * kCols);
    ids.resize(37 + 5 * rank);
  }
  void fill(std::int64_t s, int rank) {
    for (std::uint64_t i = 0; i < grid.size(); ++i) {
      std::uint64_t bits = mix(static_cast<std::uint64_t>(s) * 1000003 + row0 * kCols + i) & ~(0x7ffull << 52);
      bits |= 0x3ffull << 52;  // a finite double in [1, 2)
      std::memcpy(&grid[i], &bits, 8);
    }
    for (std::size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<std::int32_t>(mix(s * 7 + rank * 1000 + i));
    step = s;
    time = 0.25 * static_cast<double>(s);
  }
  void clobber() {
    std::fill(grid.begin(), grid.end(), -1.0);
    std::fill(ids.begin(), ids.end(), -1);
    step = -1;
    time = -1;
  }
  bool equals(std::int64_t s, int rank) const {
    State ref = *this;
    ref.fill(s, rank);
    return std::memcmp(ref.grid.data(), grid.data(), grid.size() * 8) == 0 &&
           std::memcmp(ref.ids.data(), ids.data(), ids.size() * 4) == 0 && step == s && time == ref.time;
  }
  Status protect(Runtime& rt) {
    CKPT_RETURN_IF_ERROR(
        rt.protect("grid/rho", grid.data(), DType::f64, Block{{rows_global, kCols}, {row0, 0}, {rows, kCols}}));
    CKPT_RETURN_IF_ERROR(rt.protect("ids", ids.data(), DType::i32, {ids.size()}));
    CKPT_RETURN_IF_ERROR(rt.protect_scalar("step", &step));
    return rt.protect_scalar("time", &time);
  }
};

/// `ckpt verify` on a checkpoint directory: 0 = OK, else the exit code (1 bad data, 2 unusable).
/// Its output goes to `log` (shown when a check fails).
int cli_verify(const std::string& dir, std::string* log = nullptr) {
  const char* cli = std::getenv("RELTEST_CLI");
  if (cli == nullptr) return -1;
  const std::string out = dir + ".verify." + std::to_string(world_rank()) + ".log";
  const std::string cmd = std::string(cli) + " verify " + dir + " >" + out + " 2>&1";
  const int rc = std::system(cmd.c_str());
  if (log != nullptr) {
    auto bytes = detail::read_file(out, 1 << 20);
    if (bytes.ok()) log->assign(bytes->begin(), bytes->end());
  }
  ::unlink(out.c_str());
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : 128;
}

struct Region {
  std::uint64_t lo, hi;
  std::string var;
};

struct Mutation {
  std::string file;  // name in the checkpoint directory
  bool truncate = false;
  std::uint64_t at = 0;  // byte offset (flip) or new length (truncate)
};

std::vector<std::uint8_t> slurp(const std::string& path) {
  auto r = detail::read_file(path, 1ull << 32);
  return r.ok() ? std::move(r).value() : std::vector<std::uint8_t>{};
}

void put(const std::string& path, const std::vector<std::uint8_t>& bytes) {
  int fd = ::open(path.c_str(), O_WRONLY | O_TRUNC);
  ASSERT_GE(fd, 0) << path;
  ASSERT_EQ(::pwrite(fd, bytes.data(), bytes.size(), 0), static_cast<ssize_t>(bytes.size()));
  ::close(fd);
}

struct Figures {
  long flips = 0, truncations = 0, detected_by_restart = 0, detected_by_verify = 0, fallbacks = 0;
};

void sweep(const std::string& transport) {
  const int rank = world_rank(), size = world_size();
  const std::string dir = scratch_dir();
  Options o = Options::defaults();
  o.dir = dir;
  o.transport = transport;
  o.fsync = false;
  o.keep = 2;
  Runtime rt(MPI_COMM_WORLD, o);
  ASSERT_TRUE(rt.status().ok()) << rt.status().to_string();
  State st(rank, size);
  ASSERT_TRUE(st.protect(rt).ok());
  for (std::int64_t s : {1, 2}) {
    st.fill(s, rank);
    ASSERT_TRUE(rt.checkpoint(s).wait().ok());
  }
  const std::string cdir = dir + "/ckpt.2";
  // Checks before the sweep are collective (all_true): a rank that failed alone and left the test
  // would leave the others waiting in the next collective. The same for the barrier after them:
  // rank 0 must not change a file while another rank still reads the pristine one.
  std::string verify_log;
  const int verified = rank == 0 ? cli_verify(cdir, &verify_log) : 0;
  ASSERT_TRUE(all_true(verified == 0)) << "pristine checkpoint does not verify:\n" << verify_log;

  // Every rank reads the index (shared file system) and derives the same list of mutations.
  auto idx_bytes = slurp(cdir + "/index");
  auto idx = detail::decode_index(idx_bytes.data(), idx_bytes.size());
  ASSERT_TRUE(all_true(idx.ok())) << idx.status().to_string();
  std::map<std::string, std::vector<Region>> blocks;  // file -> block ranges
  for (auto& b : idx->blocks)
    blocks[idx->files[b.file].name].push_back({b.offset, b.offset + b.length, idx->vars[b.var].name});
  const std::uint64_t stride = std::max<std::uint64_t>(1, env_u64("RELTEST_STRIDE", 997));
  std::vector<Mutation> muts;
  std::vector<std::string> files{"index"};
  for (auto& f : idx->files) files.push_back(f.name);
  bool stat_ok = true;
  for (auto& f : files) {
    struct stat sb {};
    if (::stat((cdir + "/" + f).c_str(), &sb) != 0) {
      ADD_FAILURE() << "cannot stat " << f;
      stat_ok = false;
      continue;
    }
    const std::uint64_t n = static_cast<std::uint64_t>(sb.st_size);
    std::set<std::uint64_t> flips, cuts;
    const bool is_index = f == "index";
    // The index: every 3rd byte (every byte with RELTEST_STRIDE=1) plus its whole header and footer.
    for (std::uint64_t i = 0; i < n; i += (is_index ? (stride > 1 ? 3 : 1) : stride)) flips.insert(i);
    for (std::uint64_t i = 0; i < std::min<std::uint64_t>(n, 64); ++i) flips.insert(i);  // every header byte
    for (std::uint64_t i = 64; i < std::min<std::uint64_t>(n, 4096 + 64); i += std::min<std::uint64_t>(stride, 257))
      flips.insert(i);  // header padding, sampled
    for (auto& r : blocks[f])
      for (std::uint64_t x : {r.lo - 1, r.lo, r.lo + 1, r.hi - 1, r.hi})
        if (x < n) flips.insert(x);
    for (std::uint64_t i = n > 64 ? n - 64 : 0; i < n; ++i) flips.insert(i);  // tail / footer
    for (std::uint64_t i = 0; i < n; i += (is_index ? 7 : stride * 8)) cuts.insert(i);
    for (std::uint64_t x : {0ull, 1ull, 8ull, 16ull, 56ull, 63ull, 64ull, 65ull, 4095ull, 4096ull, 4097ull})
      if (x < n) cuts.insert(x);
    if (n > 0) cuts.insert(n - 1);
    for (auto& r : blocks[f])
      for (std::uint64_t x : {r.lo, r.lo + 1, r.hi - 1})
        if (x < n) cuts.insert(x);
    for (auto x : flips) muts.push_back({f, false, x});
    for (auto x : cuts) muts.push_back({f, true, x});
  }
  ASSERT_TRUE(all_true(stat_ok));
  MPI_Barrier(MPI_COMM_WORLD);  // everybody has read the pristine files

  Figures fig;
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<std::string> failures;
  auto fail = [&](const Mutation& m, const std::string& why) {
    if (failures.size() < 20)
      failures.push_back((m.truncate ? "truncate " : "flip ") + m.file + " @" + std::to_string(m.at) + ": " + why);
  };
  for (const Mutation& m : muts) {
    const std::string path = cdir + "/" + m.file;
    std::vector<std::uint8_t> orig;
    if (rank == 0) {
      orig = slurp(path);
      if (m.truncate) {
        EXPECT_EQ(::truncate(path.c_str(), static_cast<off_t>(m.at)), 0);  // EXPECT: rank 1 waits in a barrier
      } else {
        auto bytes = orig;
        bytes[m.at] ^= static_cast<std::uint8_t>(1u << (m.at % 8));
        put(path, bytes);
      }
    }
    MPI_Barrier(MPI_COMM_WORLD);
    (m.truncate ? fig.truncations : fig.flips)++;
    // Does the change touch bytes that restart reads?
    bool read_by_restart = m.file == "index";
    std::string var;
    for (auto& r : blocks[m.file])
      if (m.truncate ? m.at < r.hi : (m.at >= r.lo && m.at < r.hi)) {
        read_by_restart = true;
        if (var.empty()) var = r.var;
      }
    st.clobber();
    Status s = rt.restart(2);
    if (read_by_restart) {
      if (s.ok()) {
        fail(m, "restart(2) succeeded on damaged bytes");
      } else {
        ++fig.detected_by_restart;
        const std::string msg = s.message();
        if (msg.find(m.file) == std::string::npos) fail(m, "the error does not name the file: " + msg);
        if (!m.truncate && !var.empty() && msg.find("'" + var + "'") == std::string::npos &&
            msg.find("variable") == std::string::npos)
          fail(m, "the error does not name the variable " + var + ": " + msg);
        // The newest intact checkpoint is used instead.
        auto l = rt.latest();
        if (m.file == "index" && (!l || *l != 1)) fail(m, "latest() did not fall back to step 1");
        st.clobber();
        auto r = rt.restart();
        if (!r.ok() || r.value() != 1 || !all_true(st.equals(1, rank)))
          fail(m, "restart() did not fall back to step 1 bit for bit");
        else
          ++fig.fallbacks;
      }
    } else {
      if (!s.ok() || !all_true(st.equals(2, rank)))
        fail(m, "change outside the blocks broke restart: " + s.to_string());
      if (rank == 0) {
        const int v = cli_verify(cdir);
        if (v == 0)
          fail(m, "ckpt verify did not notice the change (header/padding/tail)");
        else
          ++fig.detected_by_verify;
      }
    }
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0) {
      if (m.truncate) {
        int fd = ::open(path.c_str(), O_WRONLY);
        EXPECT_GE(fd, 0);
        EXPECT_EQ(::pwrite(fd, orig.data(), orig.size(), 0), static_cast<ssize_t>(orig.size()));
        ::close(fd);
      } else {
        put(path, orig);
      }
    }
    MPI_Barrier(MPI_COMM_WORLD);
  }
  // Afterwards the checkpoint is intact again and loads.
  st.clobber();
  EXPECT_TRUE(rt.restart(2).ok());
  EXPECT_TRUE(all_true(st.equals(2, rank)));
  if (rank == 0) {
    std::printf(
        "[corruption %s] files %zu, flips %ld, truncations %ld, detected by restart %ld (fallback ok %ld), "
        "outside the blocks and detected by ckpt verify %ld, failures %zu, %.1f s\n",
        transport.c_str(), files.size(), fig.flips, fig.truncations, fig.detected_by_restart, fig.fallbacks,
        fig.detected_by_verify, failures.size(),
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    for (auto& f : failures) ADD_FAILURE() << f;
  }
  EXPECT_TRUE(all_true(failures.empty()));
  EXPECT_TRUE(rt.close().ok());
}

}  // namespace

TEST(Corruption, Posix) { sweep("posix"); }
TEST(Corruption, Mpiio) { sweep("mpiio"); }
TEST(Corruption, Rbio) { sweep("rbio"); }
