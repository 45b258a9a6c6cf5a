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
#include "base/step_log.hpp"
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
        if (m.file == "index" && (!l.ok() || l.value() != 1)) fail(m, "latest() did not fall back to step 1");
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

// ---- layout series (issue 15, docs/format.md "Series layout") ------------------------------------
// The same promise for the series files: a flip in a segment's data.<rank> or step log (header or
// record) is detected (restart(2) fails, or `ckpt verify <root>` reports it, or the record is skipped
// as a torn tail) and never returns wrong data. Then torn tails at (a dense sample of) every byte of
// the last record, and hostile roots. Every check uses a fresh Runtime: a Runtime keeps what it read.

namespace {

Options series_options(const std::string& dir) {
  Options o = Options::defaults();
  o.dir = dir;
  o.layout = Options::Layout::series;
  o.fsync = false;
  o.keep = 1000;
  return o;
}

/// Writes `steps` with a series Runtime on `dir` (data of `salt`); true on every rank when all went well.
bool write_series(const std::string& dir, std::initializer_list<std::int64_t> steps, std::uint64_t salt = 0) {
  const int rank = world_rank(), size = world_size();
  Runtime rt(MPI_COMM_WORLD, series_options(dir));
  bool ok = rt.status().ok();
  State st(rank, size);
  ok = ok && st.protect(rt).ok();
  for (std::int64_t s : steps) {
    if (!ok) break;
    st.fill(s + static_cast<std::int64_t>(salt), rank);
    st.step = s;
    ok = rt.checkpoint(s).wait().ok();
  }
  ok = rt.close().ok() && ok;
  return all_true(ok);
}

/// What a fresh series Runtime on `dir` restores: restart(want) (when want >= 0), then restart().
struct Restored {
  bool ok = false;         ///< restart(want) succeeded
  bool exact = false;      ///< ... and every rank's data equals what was captured for `want` (of `salt`)
  bool any_ok = false;     ///< restart() succeeded
  std::int64_t step = -1;  ///< the step restart() restored
  bool any_exact = false;  ///< ... and every rank's data equals what was captured for it
  std::optional<std::int64_t> latest;
  std::string error;  ///< of restart(want), else of restart()
};
Restored restore_series(const std::string& dir, std::int64_t want, std::uint64_t salt = 0) {
  const int rank = world_rank(), size = world_size();
  Restored out;
  Runtime rt(MPI_COMM_WORLD, series_options(dir));
  if (!rt.status().ok()) {
    out.error = rt.status().to_string();
    (void)rt.close();
    return out;
  }
  State st(rank, size);
  (void)st.protect(rt);
  auto exact = [&](std::int64_t step) {
    State ref(rank, size);
    ref.fill(step + static_cast<std::int64_t>(salt), rank);
    return all_true(std::memcmp(ref.grid.data(), st.grid.data(), st.grid.size() * 8) == 0 &&
                    std::memcmp(ref.ids.data(), st.ids.data(), st.ids.size() * 4) == 0 && st.step == step);
  };
  auto newest = rt.latest();  // an error reads as no step here: the callers compare it with the step wanted
  if (newest.ok()) out.latest = newest.value();
  if (want >= 0) {
    st.clobber();
    Status s = rt.restart(want);
    out.ok = s.ok();
    out.exact = out.ok && exact(want);
    if (!s.ok()) out.error = s.to_string();
  }
  st.clobber();
  auto r = rt.restart();
  out.any_ok = r.ok();
  out.step = r.ok() ? r.value() : -1;
  out.any_exact = r.ok() && exact(out.step);
  if (out.error.empty() && !r.ok()) out.error = r.status().to_string();
  (void)rt.close();
  return out;
}

/// The complete records of a step log, as the library parses it (docs/format.md, "Step log").
std::vector<detail::LogRecord> log_records(const std::vector<std::uint8_t>& log, std::int64_t segment = 0) {
  const detail::StepLog parsed = detail::parse_step_log(detail::MemoryLogBytes(log.data(), log.size()), segment);
  std::vector<detail::LogRecord> out;
  for (const auto& r : parsed.records)
    if (!r.damaged) out.push_back(r);
  return out;
}

}  // namespace

TEST(CorruptionSeries, FlipsInDataAndStepLog) {
  const int rank = world_rank();
  const std::string dir = scratch_dir();
  ASSERT_TRUE(write_series(dir, {1, 2}));
  const std::string seg = dir + "/series.0";
  std::string log;
  ASSERT_TRUE(all_true(rank != 0 || cli_verify(dir, &log) == 0)) << "pristine series does not verify:\n" << log;
  const auto steps = slurp(seg + "/steps");
  const auto records = log_records(steps);
  ASSERT_TRUE(all_true(records.size() == 2)) << "expected 2 records in " << seg << "/steps";
  // Block ranges of both steps in each data file, from the records' indexes.
  std::map<std::string, std::vector<Region>> blocks;
  std::map<std::string, std::vector<std::pair<std::uint64_t, std::uint64_t>>> streams;  // file -> [first, end)
  for (const auto& rec : records) {
    auto idx = detail::decode_index(steps.data() + rec.payload, static_cast<std::size_t>(rec.length));
    ASSERT_TRUE(all_true(idx.ok())) << idx.status().to_string();
    std::map<std::string, std::pair<std::uint64_t, std::uint64_t>> stream;
    for (auto& b : idx->blocks) {
      const std::string& f = idx->files[b.file].name;
      blocks[f].push_back({b.offset, b.offset + b.length, idx->vars[b.var].name});
      auto it = stream.emplace(f, std::make_pair(b.offset, b.offset + b.length)).first;
      it->second = {std::min(it->second.first, b.offset), std::max(it->second.second, b.offset + b.length)};
    }
    for (auto& [f, r] : stream) streams[f].push_back(r);
  }
  // Bytes of a data file outside every stream (the data header's padding, from one step's stream end
  // to the next aligned offset): zero, read by nobody, checked by `ckpt verify <root>` (format.md,
  // "Series layout"). Counted apart, and each must be detected like any other flip.
  auto between_streams = [&](const std::string& f, std::uint64_t at) {
    if (f == "steps" || at < detail::kDataHeaderBytes) return false;
    for (auto& r : streams[f])
      if (at >= r.first && at < r.second) return false;
    return true;
  };
  long gap_flips = 0;
  const std::uint64_t stride = std::max<std::uint64_t>(1, env_u64("RELTEST_STRIDE", 997));
  std::vector<Mutation> muts;
  // The step log: its header and the records' headers and trailers every 5th byte, the indexes every
  // 67th (a flip in a record costs its step at most, a flip in a trailer or the padding no step, and
  // `ckpt verify` reports each); the data
  // files: the header every 9th byte, both ends of every block, every 32nd stride (every byte of the log
  // and every stride of the data with RELTEST_STRIDE=1).
  const bool sparse = stride > 1;
  std::set<std::uint64_t> in_log;
  for (std::uint64_t i = 0; i < steps.size(); i += (sparse ? 67 : 1)) in_log.insert(i);
  for (std::uint64_t i = 0; i < detail::kStepLogHeaderBytes; i += (sparse ? 5 : 1)) in_log.insert(i);
  for (const auto& rec : records) {
    for (std::uint64_t i = rec.begin; i < rec.begin + detail::kStepRecordFrameBytes; i += (sparse ? 5 : 1))
      in_log.insert(i);
    for (std::uint64_t i = rec.end - detail::kStepRecordFrameBytes; i < rec.end; i += (sparse ? 5 : 1))
      in_log.insert(i);
    for (std::uint64_t i = rec.payload + rec.length; i < rec.end - detail::kStepRecordFrameBytes; ++i)
      in_log.insert(i);  // the padding
  }
  for (auto x : in_log) muts.push_back({"steps", false, x});
  for (int r = 0; r < world_size(); ++r) {
    const std::string f = "data." + std::to_string(r);
    const std::uint64_t n = slurp(seg + "/" + f).size();
    std::set<std::uint64_t> at;
    for (std::uint64_t i = 0; i < n; i += stride * (sparse ? 32 : 1)) at.insert(i);
    for (std::uint64_t i = 0; i < std::min<std::uint64_t>(n, 64); i += (sparse ? 9 : 1)) at.insert(i);
    for (auto& b : blocks[f])
      for (std::uint64_t x : {b.lo - 1, b.lo, b.lo + 1, b.hi - 1, b.hi})
        if (x < n) at.insert(x);
    // Both ends of the header's padding and of the bytes from each stream's end to the next aligned
    // offset (4096: the default alignment).
    for (std::uint64_t x : {std::uint64_t{detail::kDataHeaderBytes}, std::uint64_t{4095}}) at.insert(x);
    for (auto& r : streams[f])
      for (std::uint64_t x : {r.second, r.second + 1, (r.second + 4095) / 4096 * 4096 - 1})
        if (x < n && between_streams(f, x)) at.insert(x);
    for (auto x : at) muts.push_back({f, false, x});
    for (auto& b : blocks[f]) muts.push_back({f, true, b.hi - 1});  // cut inside each block
  }
  long detected_restart = 0, detected_verify = 0, fell_back = 0;
  std::vector<std::string> failures;
  const auto t0 = std::chrono::steady_clock::now();
  for (const Mutation& m : muts) {
    const std::string path = seg + "/" + m.file;
    std::vector<std::uint8_t> orig;
    if (rank == 0) {
      orig = slurp(path);
      if (m.truncate) {
        EXPECT_EQ(::truncate(path.c_str(), static_cast<off_t>(m.at)), 0);
      } else {
        auto bytes = orig;
        bytes[m.at] ^= static_cast<std::uint8_t>(1u << (m.at % 8));
        put(path, bytes);
      }
    }
    MPI_Barrier(MPI_COMM_WORLD);
    const std::string what = (m.truncate ? "truncate " : "flip ") + m.file + " @" + std::to_string(m.at) + ": ";
    Restored r2 = restore_series(dir, 2);
    if (r2.ok && !r2.exact) failures.push_back(what + "restart(2) returned wrong data");
    if (r2.any_ok && !r2.any_exact)
      failures.push_back(what + "restart() returned wrong data (step " + std::to_string(r2.step) + ")");
    // (A block of step 2 that does not read back: latest() still names 2, restart() falls back, as with
    // directories. A damaged record: latest() must agree.)
    if (m.file == "steps" && r2.any_ok && r2.latest != r2.step)
      failures.push_back(what + "latest() and restart() disagree");
    bool detected = !r2.ok;
    if (!r2.ok) {
      ++detected_restart;
      if (r2.any_ok) ++fell_back;
    } else if (rank == 0) {
      if (cli_verify(dir) != 0) {
        detected = true;
        ++detected_verify;
      }
    }
    if (!m.truncate && between_streams(m.file, m.at)) ++gap_flips;
    if (!all_true(rank != 0 || detected)) failures.push_back(what + "not detected (restart(2) ok, ckpt verify ok)");
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0) {
      int fd = ::open(path.c_str(), O_WRONLY | O_TRUNC);
      EXPECT_GE(fd, 0);
      EXPECT_EQ(::pwrite(fd, orig.data(), orig.size(), 0), static_cast<ssize_t>(orig.size()));
      ::close(fd);
    }
    MPI_Barrier(MPI_COMM_WORLD);
  }
  Restored again = restore_series(dir, 2);
  EXPECT_TRUE(again.ok && again.exact) << again.error;
  if (rank == 0) {
    std::printf(
        "[corruption series] mutations %zu, detected by restart %ld (fell back to an older step %ld), "
        "detected by ckpt verify %ld (of them %ld in the bytes between streams), failures %zu, %.1f s\n",
        muts.size(), detected_restart, fell_back, detected_verify, gap_flips, failures.size(),
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    for (std::size_t i = 0; i < failures.size() && i < 20; ++i) ADD_FAILURE() << failures[i];
  }
  EXPECT_TRUE(all_true(failures.empty()));
}

TEST(CorruptionSeries, TornTailAtEveryByte) {
  const int rank = world_rank();
  const std::string dir = scratch_dir();
  ASSERT_TRUE(write_series(dir, {1, 2, 3}));
  const std::string logp = dir + "/series.0/steps";
  const auto log = slurp(logp);
  const auto records = log_records(log);
  ASSERT_TRUE(all_true(records.size() == 3));
  const std::uint64_t last = records.back().begin;
  const std::uint64_t index_end = records.back().payload + records.back().length;  // then padding, the trailer
  // Cut at / scribble 0xff from: every 3rd byte of the last record's header, every 61st of its index
  // and every byte from 2 before the index's end (every byte with RELTEST_STRIDE=1). A cut anywhere in
  // the record tears it (its trailer ends it): step 2 is the newest. A scribble before index_end leaves
  // neither a payload nor a trailer that holds: torn, step 2; from there on its header and payload
  // hold (only its padding or trailer is damaged): step 3.
  const bool dense = env_u64("RELTEST_STRIDE", 997) == 1;
  std::set<std::uint64_t> offsets;
  for (std::uint64_t i = last; i < log.size(); i += (dense ? 1 : i < last + detail::kStepRecordFrameBytes ? 3 : 61))
    offsets.insert(i);
  for (std::uint64_t i = index_end - 2; i < log.size(); ++i) offsets.insert(i);
  long cases = 0;
  std::vector<std::string> failures;
  for (int scribble = 0; scribble < 2; ++scribble) {
    for (auto at : offsets) {
      if (rank == 0) {
        auto bytes = log;
        if (scribble)
          std::fill(bytes.begin() + static_cast<long>(at), bytes.end(), 0xff);
        else
          bytes.resize(static_cast<std::size_t>(at));
        put(logp, bytes);
      }
      MPI_Barrier(MPI_COMM_WORLD);
      const std::int64_t want = scribble && at >= index_end ? 3 : 2;
      const std::int64_t older = 1 + cases % want;  // an earlier step, kept too
      ++cases;
      Restored r = restore_series(dir, older);
      const std::string what = (scribble ? "scribble @" : "cut @") + std::to_string(at) + ": ";
      if (!r.any_ok || r.step != want || !r.any_exact || r.latest != want)
        failures.push_back(what + "restart() gave step " + std::to_string(r.step) + " (want " + std::to_string(want) +
                           ", bit for bit): " + r.error);
      if (!r.ok || !r.exact) failures.push_back(what + "step " + std::to_string(older) + " is lost: " + r.error);
      MPI_Barrier(MPI_COMM_WORLD);
    }
  }
  // A torn tail stays; a new run in the root appends a new segment, and its steps win (the same step
  // numbers, other data).
  if (rank == 0) {
    auto bytes = log;
    bytes.resize(static_cast<std::size_t>(last + detail::kStepRecordFrameBytes + 1));
    put(logp, bytes);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  ASSERT_TRUE(write_series(dir, {3, 4}, 100));
  struct stat sb {};
  EXPECT_EQ(::stat((dir + "/series.1/steps").c_str(), &sb), 0) << "the new run did not append a new segment";
  Restored r3 = restore_series(dir, 3, 100);
  EXPECT_TRUE(r3.any_ok && r3.step == 4 && r3.any_exact) << "after a new run: step " << r3.step << " " << r3.error;
  EXPECT_TRUE(r3.ok && r3.exact) << "step 3 of the new run must win: " << r3.error;
  Restored r2 = restore_series(dir, 2);
  EXPECT_TRUE(r2.ok && r2.exact) << "step 2 of the first run must stay: " << r2.error;
  std::string vlog;
  EXPECT_TRUE(all_true(rank != 0 || cli_verify(dir, &vlog) == 0)) << vlog;
  if (rank == 0) {
    std::printf("[torn tail series] cases %ld (cuts and scribbles in the last record), failures %zu\n", cases,
                failures.size());
    for (std::size_t i = 0; i < failures.size() && i < 20; ++i) ADD_FAILURE() << failures[i];
  }
  EXPECT_TRUE(all_true(failures.empty()));
}

// Damage costs one step (issue 31, part 2; format.md "Step log, version 2"): a real series run of
// steps 1..4 in one segment, then step 2's record damaged in the middle of the log - its index, its
// header, header and trailer together, or its whole bytes overwritten. Restart still finds steps 3
// and 4 (bit for bit), restart(2) fails, step 1 stays, the Reader opens and verifies 1, 3 and 4, and
// `ckpt ls` calls step 2 damaged (or lists a damaged record of unknown step), never "a commit that did
// not finish".
TEST(CorruptionSeries, DamagedMiddleRecordCostsThatStepOnly) {
  const int rank = world_rank();
  const std::string dir = scratch_dir();
  ASSERT_TRUE(write_series(dir, {1, 2, 3, 4}));
  const std::string logp = dir + "/series.0/steps";
  const auto log = slurp(logp);
  const auto records = log_records(log);
  ASSERT_TRUE(all_true(records.size() == 4));
  const detail::LogRecord& two = records[1];
  struct Damage {
    const char* what;
    std::vector<std::uint64_t> at;  ///< bytes flipped
    bool known;                     ///< whether the step of the damaged record can still be named
  };
  std::vector<std::uint8_t> wipe;  // the whole record
  const std::vector<Damage> cases = {
      {"index", {two.payload + two.length / 2}, true},
      {"header", {two.begin + 28}, true},
      {"header and trailer", {two.begin + 20, two.end - 20}, false},
      {"whole record", {}, false},
  };
  const char* cli = std::getenv("RELTEST_CLI");
  for (const Damage& d : cases) {
    SCOPED_TRACE(d.what);
    if (rank == 0) {
      auto bytes = log;
      for (auto at : d.at) bytes[at] ^= 0x20;
      if (d.at.empty())
        for (std::uint64_t i = two.begin; i < two.end; ++i) bytes[i] = static_cast<std::uint8_t>(i * 37);
      put(logp, bytes);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    Restored r = restore_series(dir, 2);
    EXPECT_FALSE(r.ok) << "restart(2) read a damaged record";
    EXPECT_TRUE(r.any_ok && r.step == 4 && r.any_exact) << "restart() gave step " << r.step << ": " << r.error;
    EXPECT_EQ(r.latest.value_or(-1), 4);
    Restored r3 = restore_series(dir, 3);
    EXPECT_TRUE(r3.ok && r3.exact) << "step 3, after the damaged record, is lost: " << r3.error;
    Restored r1 = restore_series(dir, 1);
    EXPECT_TRUE(r1.ok && r1.exact) << "step 1 is lost: " << r1.error;
    if (rank == 0) {
      // The Reader: steps 1, 3 and 4 open and verify; step 2 is skipped, naming the damage.
      auto rd = Reader::open(dir);
      ASSERT_TRUE(rd.ok()) << rd.status().to_string();
      EXPECT_EQ(rd->steps(), (std::vector<std::int64_t>{1, 3, 4}));
      for (std::int64_t s : {1, 3, 4}) {
        auto c = rd->open_step(s);
        ASSERT_TRUE(c.ok()) << c.status().to_string();
        CheckpointReader cr = std::move(c).value();
        Status v = cr.verify();
        EXPECT_TRUE(v.ok()) << "step " << s << ": " << v.to_string();
      }
      EXPECT_FALSE(rd->open_step(2).ok());
      bool named = false;
      for (const std::string& sk : rd->skipped()) named = named || sk.find("damaged") != std::string::npos;
      EXPECT_TRUE(named) << "the Reader's skipped entries do not name the damaged record";
    }
    if (rank == 0 && cli != nullptr) {
      const std::string out = dir + ".ls.json";
      const int rc = std::system((std::string(cli) + " ls --json " + dir + " >" + out + " 2>&1").c_str());
      EXPECT_EQ(WIFEXITED(rc) ? WEXITSTATUS(rc) : 128, 0);
      auto bytes = detail::read_file(out, 1 << 20);
      const std::string ls = bytes.ok() ? std::string(bytes->begin(), bytes->end()) : "";
      ::unlink(out.c_str());
      EXPECT_NE(ls.find("\"latest\": 4"), std::string::npos) << ls;
      EXPECT_EQ(ls.find("did not finish"), std::string::npos) << ls;
      EXPECT_NE(ls.find("\"damaged\": true"), std::string::npos) << ls;
      if (d.known) EXPECT_NE(ls.find("the record of step 2"), std::string::npos) << ls;
      std::string vlog;
      EXPECT_EQ(cli_verify(dir, &vlog), 1) << "verify of the root must report the damaged record:\n" << vlog;
    }
    MPI_Barrier(MPI_COMM_WORLD);
  }
  // A new run after the damage: its steps commit and restart as usual (a new segment).
  ASSERT_TRUE(write_series(dir, {5}));
  Restored r5 = restore_series(dir, 3);
  EXPECT_TRUE(r5.ok && r5.exact && r5.any_ok && r5.step == 5) << r5.error;
}

TEST(CorruptionSeries, HostileRoots) {
  const int rank = world_rank();
  const std::string base = scratch_dir();
  // A pristine series root (steps 1, 2 in series.0) copied for each case.
  const std::string pristine = base + "/pristine";
  ASSERT_TRUE(write_series(pristine, {1, 2}));
  auto fresh = [&](const std::string& name) {
    const std::string d = base + "/" + name;
    if (rank == 0) {
      const std::string cmd = "cp -a " + pristine + " " + d;
      EXPECT_EQ(std::system(cmd.c_str()), 0);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    return d;
  };
  auto sh = [&](const std::string& cmd) {
    if (rank == 0) EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
    MPI_Barrier(MPI_COMM_WORLD);
  };
  auto exists = [](const std::string& p) {
    struct stat sb {};
    return ::lstat(p.c_str(), &sb) == 0;
  };
  // The step log replaced by a FIFO, a symbolic link (to the real log, elsewhere) and a directory:
  // never opened as a log (no hang, no link followed), nothing restored, and a new run still works.
  for (const char* kind : {"fifo", "symlink", "dir"}) {
    SCOPED_TRACE(kind);
    const std::string d = fresh(std::string("steps-") + kind);
    const std::string s = d + "/series.0/steps";
    if (std::string(kind) == "fifo") sh("rm " + s + " && mkfifo " + s);
    if (std::string(kind) == "symlink") sh("mv " + s + " " + d + "/moved && ln -s " + d + "/moved " + s);
    if (std::string(kind) == "dir") sh("rm " + s + " && mkdir " + s);
    Restored r = restore_series(d, -1);
    EXPECT_FALSE(r.any_ok) << "restored step " << r.step << " through a " << kind << " step log";
    EXPECT_FALSE(r.latest.has_value());
    EXPECT_TRUE(write_series(d, {5}));
    Restored r5 = restore_series(d, -1);
    EXPECT_TRUE(r5.any_ok && r5.step == 5 && r5.any_exact) << r5.error;
    EXPECT_TRUE(exists(d + "/series.1/steps"));
  }
  // data.1 a symbolic link to a copy elsewhere: not followed; restart(2) fails naming it, no data.
  {
    const std::string d = fresh("data-symlink");
    sh("mv " + d + "/series.0/data.1 " + d + "/elsewhere && ln -s " + d + "/elsewhere " + d + "/series.0/data.1");
    Restored r = restore_series(d, 2);
    EXPECT_FALSE(r.ok) << "read data.1 through a symbolic link";
    EXPECT_NE(r.error.find("data.1"), std::string::npos) << r.error;
    if (rank == 0) EXPECT_NE(cli_verify(d), 0);
  }
  // A regular file named series.3: not a segment. A series root skips its number (the new segment is
  // series.4); a directory root with one stays a directory root (it must not be read as a series).
  {
    const std::string d = fresh("file-series3");
    sh("touch " + d + "/series.3");
    EXPECT_TRUE(write_series(d, {7}));
    EXPECT_TRUE(exists(d + "/series.4/steps"));
    Restored r = restore_series(d, -1);
    EXPECT_TRUE(r.any_ok && r.step == 7 && r.any_exact) << r.error;
    const std::string dd = base + "/dir-with-file-series3";
    {
      Options o = Options::defaults();
      o.dir = dd;
      o.fsync = false;
      Runtime rt(MPI_COMM_WORLD, o);
      ASSERT_TRUE(rt.status().ok()) << rt.status().to_string();
      State st(rank, world_size());
      ASSERT_TRUE(st.protect(rt).ok());
      st.fill(3, rank);
      ASSERT_TRUE(rt.checkpoint(3).wait().ok());
      ASSERT_TRUE(rt.close().ok());
    }
    sh("touch " + dd + "/series.3");
    Options o = Options::defaults();
    o.dir = dd;
    Runtime rt(MPI_COMM_WORLD, o);
    EXPECT_TRUE(rt.status().ok()) << "a file named series.3 made a directory root unusable: "
                                  << rt.status().to_string();
    EXPECT_EQ(rt.status().ok() ? ckpt::test::newest_step(rt) : -1, 3);
    (void)rt.close();
    std::string vlog;
    if (rank == 0) EXPECT_EQ(cli_verify(dd, &vlog), 0) << vlog;
  }
  // Odd segment names (series.03, series.-1, series.1x): ignored, whatever they hold.
  {
    const std::string d = fresh("odd-names");
    sh("cp -a " + d + "/series.0 " + d + "/series.03 && cp -a " + d + "/series.0 " + d + "/series.-1 && cp -a " + d +
       "/series.0 " + d + "/series.1x");
    Restored r = restore_series(d, -1);
    EXPECT_TRUE(r.any_ok && r.step == 2 && r.any_exact) << r.error;
    EXPECT_TRUE(write_series(d, {9}));
    EXPECT_TRUE(exists(d + "/series.1/steps")) << "the new segment is not series.1";
    EXPECT_FALSE(exists(d + "/series.4"));
    std::string vlog;
    if (rank == 0) EXPECT_EQ(cli_verify(d, &vlog), 0) << vlog;
  }
  // A root with both ckpt.<n>/ and series.<k>/: refused by either layout, with a clear error.
  {
    const std::string d = fresh("both-layouts");
    sh("mkdir " + d + "/ckpt.1");
    Runtime rt(MPI_COMM_WORLD, series_options(d));
    EXPECT_FALSE(rt.status().ok());
    EXPECT_NE(rt.status().message().find("layout"), std::string::npos) << rt.status().to_string();
    (void)rt.close();
    Options o = Options::defaults();
    o.dir = d;
    Runtime rt2(MPI_COMM_WORLD, o);
    EXPECT_FALSE(rt2.status().ok());
    EXPECT_NE(rt2.status().message().find("layout"), std::string::npos) << rt2.status().to_string();
    (void)rt2.close();
  }
  // Two jobs at once on one series root: the second is refused by the directory lock, the first goes on.
  {
    const std::string d = fresh("two-jobs");
    Runtime a(MPI_COMM_WORLD, series_options(d));
    ASSERT_TRUE(a.status().ok()) << a.status().to_string();
    Runtime b(MPI_COMM_WORLD, series_options(d));
    EXPECT_FALSE(b.status().ok()) << "a second Runtime on the same series root was accepted";
    EXPECT_NE(b.status().message().find("in use"), std::string::npos) << b.status().to_string();
    (void)b.close();
    State st(rank, world_size());
    ASSERT_TRUE(st.protect(a).ok());
    st.fill(11, rank);
    EXPECT_TRUE(a.checkpoint(11).wait().ok());
    EXPECT_TRUE(a.close().ok());
    Restored r = restore_series(d, -1);
    EXPECT_TRUE(r.any_ok && r.step == 11 && r.any_exact) << r.error;
  }
}
