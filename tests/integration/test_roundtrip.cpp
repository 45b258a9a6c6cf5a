// End-to-end: protect, checkpoint asynchronously, overwrite, restart, compare bit for bit.
// Runs at 1 and at 4 ranks (same source).
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <unistd.h>

#include <csignal>
#include <cstring>
#include <fstream>
#include <numeric>
#include <vector>

#include "ckpt/ckpt.hpp"
#include "test_util.hpp"

using namespace ckpt;
using ckpt::test::scratch_dir;
using ckpt::test::world_rank;
using ckpt::test::world_size;

namespace {

Options opts_for(const std::string& dir) {
  Options o = Options::defaults();
  o.dir = dir;
  o.fsync = true;
  return o;
}

/// A rank's state: part of a global 2D array, a local array whose length depends on the rank,
/// scalars (one equal on all ranks, one not) and opaque bytes.
struct State {
  static constexpr std::uint64_t kCols = 37;
  std::uint64_t rows_global = 0, row0 = 0, rows = 0;
  std::vector<double> grid;
  std::vector<std::int32_t> ids;
  double time = 0;
  std::uint64_t seed = 0;
  std::vector<unsigned char> blob;

  explicit State(int rank, int size) {
    rows_global = 10 * static_cast<std::uint64_t>(size) + 3;  // not divisible by the rank count
    const std::uint64_t base = rows_global / size, extra = rows_global % size;
    rows = base + (static_cast<std::uint64_t>(rank) < extra ? 1 : 0);
    row0 = rank * base + std::min<std::uint64_t>(rank, extra);
    grid.resize(rows * kCols);
    ids.resize(100 + 17 * rank);
    blob.resize(1000);
  }
  void fill(double salt, int rank) {
    for (std::uint64_t i = 0; i < rows; ++i)
      for (std::uint64_t j = 0; j < kCols; ++j) grid[i * kCols + j] = salt + 1000.0 * (row0 + i) + j;
    std::iota(ids.begin(), ids.end(), static_cast<std::int32_t>(salt) + rank * 1000);
    time = salt * 0.5;
    seed = 12345 + rank + static_cast<std::uint64_t>(salt);
    for (std::size_t i = 0; i < blob.size(); ++i) blob[i] = static_cast<unsigned char>(i * 7 + salt);
  }
  Status protect(Runtime& rt) {
    CKPT_RETURN_IF_ERROR(
        rt.protect("grid/rho", grid.data(), DType::f64, Block{{rows_global, kCols}, {row0, 0}, {rows, kCols}}));
    CKPT_RETURN_IF_ERROR(rt.protect("ids", ids.data(), DType::i32, {ids.size()}));
    CKPT_RETURN_IF_ERROR(rt.protect_scalar("time", &time));
    CKPT_RETURN_IF_ERROR(rt.protect_scalar("seed", &seed));
    return rt.protect("blob", blob.data(), DType::bytes, {blob.size()});
  }
  bool operator==(const State& o) const {
    return grid == o.grid && ids == o.ids && std::memcmp(&time, &o.time, sizeof time) == 0 && seed == o.seed &&
           blob == o.blob;
  }
};

}  // namespace

TEST(RoundTrip, AsyncCheckpointOverwriteRestart) {
  const auto dir = scratch_dir();
  const int rank = world_rank(), size = world_size();
  Runtime rt(MPI_COMM_WORLD, opts_for(dir));
  ASSERT_TRUE(rt.status().ok()) << rt.status().to_string();
  State s(rank, size), expected(rank, size);
  ASSERT_TRUE(s.protect(rt).ok());
  s.fill(1, rank);
  expected.fill(1, rank);

  Ticket tk = rt.checkpoint(1);
  s.fill(2, rank);  // overwrite at once: the checkpoint holds the content at the call
  ASSERT_TRUE(tk.wait().ok()) << tk.wait().to_string();
  EXPECT_TRUE(tk.done());
  EXPECT_EQ(tk.step(), 1);
  const auto st = tk.stats();
  EXPECT_GT(st.bytes, 0u);
  EXPECT_GE(st.committed_s, st.durable_s);
  EXPECT_GT(st.durable_s, 0.0);  // (small data can be durable before checkpoint() has returned)
  EXPECT_GT(st.blocked_s, 0.0);

  EXPECT_EQ(ckpt::test::newest_step(rt), 1);
  ASSERT_TRUE(rt.restart(1).ok());
  EXPECT_TRUE(s == expected) << "restored state differs on rank " << rank;
  if (rank == 0) {
    char target[256] = {};
    ASSERT_GT(::readlink((dir + "/latest").c_str(), target, sizeof target - 1), 0);
    EXPECT_STREQ(target, "ckpt.1");
  }
}

TEST(RoundTrip, RetentionKeepsTheNewestAndRestartPicksNewest) {
  const auto dir = scratch_dir();
  const int rank = world_rank(), size = world_size();
  Options o = opts_for(dir);
  o.keep = 2;
  o.max_in_flight = 2;
  Runtime rt(MPI_COMM_WORLD, o);
  State s(rank, size);
  ASSERT_TRUE(s.protect(rt).ok());
  std::vector<Ticket> tickets;
  for (int step = 1; step <= 5; ++step) {
    s.fill(step, rank);
    tickets.push_back(rt.checkpoint(step));
  }
  for (auto& t : tickets) EXPECT_TRUE(t.wait().ok()) << t.wait().to_string();
  MPI_Barrier(MPI_COMM_WORLD);
  for (int step = 1; step <= 5; ++step)
    EXPECT_EQ(::access((dir + "/ckpt." + std::to_string(step)).c_str(), F_OK) == 0, step >= 4) << step;
  State expected(rank, size);
  expected.fill(5, rank);
  s.fill(0, rank);
  auto r = rt.restart();
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r.value(), 5);
  EXPECT_TRUE(s == expected);
}

TEST(RoundTrip, CheckpointEightTimesThePoolStreamsThroughIt) {
  const auto dir = scratch_dir();
  const int rank = world_rank();
  Options o = opts_for(dir);
  o.chunk_bytes = 64 << 10;
  o.pool_bytes = 256 << 10;  // 4 chunks
  o.fsync = false;           // speed; durability is covered elsewhere
  Runtime rt(MPI_COMM_WORLD, o);
  std::vector<std::uint64_t> big((8 * *o.pool_bytes) / sizeof(std::uint64_t));
  for (std::size_t i = 0; i < big.size(); ++i) big[i] = i * 2654435761u + rank;
  const auto expected = big;
  ASSERT_TRUE(rt.protect("big", big.data(), DType::u64, {big.size()}).ok());
  Ticket tk = rt.checkpoint(3);
  ASSERT_TRUE(tk.wait().ok()) << tk.wait().to_string();
  const auto st = tk.stats();
  EXPECT_EQ(st.bytes, 8 * *o.pool_bytes);
  EXPECT_EQ(st.staging_bytes, *o.pool_bytes) << "the pool must not grow past its budget";
  std::fill(big.begin(), big.end(), 0);
  ASSERT_TRUE(rt.restart(3).ok());
  EXPECT_EQ(big, expected);
}

TEST(RoundTrip, SmallStateStagesSmallFromTheFirstCheckpointAndRestores) {
  // LULESH-like (issue 15): 39 arrays of 6 KiB (234 KiB per rank), protected one by one, a scalar, a
  // checkpoint every step. Default chunk_bytes and pool_bytes: the staging is about the state, not two
  // 16 MiB chunks, and is all there at the first checkpoint (allocated in protect(), not in checkpoint()).
  const int rank = world_rank();
  for (Options::OnBusy busy : {Options::OnBusy::wait, Options::OnBusy::coalesce}) {
    SCOPED_TRACE(on_busy_name(busy));
    const auto dir = scratch_dir();
    Options o = opts_for(dir);
    o.on_busy = busy;
    Runtime rt(MPI_COMM_WORLD, o);
    ASSERT_TRUE(rt.status().ok()) << rt.status().to_string();
    std::vector<std::vector<double>> fields(39, std::vector<double>(768));
    std::uint64_t cycle = 0;
    for (std::size_t f = 0; f < fields.size(); ++f)
      ASSERT_TRUE(rt.protect("f" + std::to_string(f), fields[f].data(), DType::f64, {fields[f].size()}).ok());
    ASSERT_TRUE(rt.protect_scalar("cycle", &cycle).ok());
    const std::uint64_t payload = 39 * 768 * 8 + 8;
    std::vector<Ticket> tickets;
    for (int k = 0; k < 6; ++k) {
      cycle = static_cast<std::uint64_t>(k);
      for (std::size_t f = 0; f < fields.size(); ++f)
        for (std::size_t i = 0; i < fields[f].size(); ++i) fields[f][i] = k * 1e6 + rank * 1e3 + f + i * 1e-3;
      tickets.push_back(rt.checkpoint(k));
      if (busy == Options::OnBusy::wait) ASSERT_TRUE(tickets.back().wait().ok());
    }
    ASSERT_TRUE(rt.wait_all().ok());
    const std::uint64_t staging = tickets.front().stats().staging_bytes;
    EXPECT_EQ(tickets.front().stats().bytes, payload);
    // One stream rounded up to pages (wait); two with coalesce (a capture waits next to one in flight).
    const std::uint64_t streams = busy == Options::OnBusy::wait ? 1 : 2;
    EXPECT_LE(staging, streams * ((payload + 4095) / 4096 + 1) * 4096) << staging;
    EXPECT_LE(staging, 2 * payload + streams * 2 * 4096) << staging;
    for (auto& t : tickets) {
      EXPECT_FALSE(t.wait().failed()) << t.wait().to_string();
      EXPECT_EQ(t.stats().staging_bytes, staging) << "the pool did not grow in checkpoint " << t.step();
    }
    for (auto& f : fields) std::fill(f.begin(), f.end(), -1.0);
    cycle = 99;
    ASSERT_TRUE(rt.restart(5).ok());
    EXPECT_EQ(cycle, 5u);
    for (std::size_t f = 0; f < fields.size(); ++f)
      for (std::size_t i = 0; i < fields[f].size(); i += 97)
        ASSERT_EQ(fields[f][i], 5 * 1e6 + rank * 1e3 + f + i * 1e-3) << "field " << f << " element " << i;
  }
}

TEST(RoundTrip, CorruptedBlockIsDetectedAndRestartFallsBack) {
  const auto dir = scratch_dir();
  const int rank = world_rank(), size = world_size();
  Runtime rt(MPI_COMM_WORLD, opts_for(dir));
  State s(rank, size), s1(rank, size);
  ASSERT_TRUE(s.protect(rt).ok());
  s.fill(1, rank);
  s1.fill(1, rank);
  ASSERT_TRUE(rt.checkpoint(1).wait().ok());
  s.fill(2, rank);
  ASSERT_TRUE(rt.checkpoint(2).wait().ok());
  MPI_Barrier(MPI_COMM_WORLD);
  if (rank == size - 1) {  // flip one byte in the middle of the last rank's grid block
    const std::string f = dir + "/ckpt.2/data." + std::to_string(rank);
    std::fstream io(f, std::ios::in | std::ios::out | std::ios::binary);
    io.seekp(4096 + 100);
    char c = 0;
    io.read(&c, 1);
    io.seekp(4096 + 100);
    c ^= 0x10;
    io.write(&c, 1);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  Status bad = rt.restart(2);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.code(), Code::corrupt) << bad.to_string();
  EXPECT_NE(bad.message().find("grid/rho"), std::string::npos) << bad.message();
  EXPECT_NE(bad.message().find("rank " + std::to_string(size - 1)), std::string::npos) << bad.message();
  auto r = rt.restart();
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r.value(), 1) << "falls back to the older checkpoint";
  EXPECT_TRUE(s == s1);
}

TEST(RoundTrip, BadInputGetsClearErrors) {
  const auto dir = scratch_dir();
  const int rank = world_rank(), size = world_size();
  Runtime rt(MPI_COMM_WORLD, opts_for(dir));
  double x[4] = {1, 2, 3, 4};
  float f[4] = {};
  EXPECT_EQ(rt.protect("../escape", x, DType::f64, {4}).code(), Code::invalid_argument);
  EXPECT_EQ(rt.protect("/abs", x, DType::f64, {4}).code(), Code::invalid_argument);
  EXPECT_EQ(rt.protect("zero", x, DType::f64, {0}).code(), Code::invalid_argument);
  EXPECT_EQ(rt.protect("null", nullptr, DType::f64, {4}).code(), Code::invalid_argument);
  EXPECT_EQ(rt.protect("box", x, DType::f64, Block{{4}, {3}, {2}}).code(), Code::invalid_argument);
  ASSERT_TRUE(rt.protect("x", x, DType::f64, {4}).ok());
  Status twice = rt.protect("x", x, DType::f64, {4});
  EXPECT_EQ(twice.code(), Code::invalid_argument);
  EXPECT_NE(twice.message().find("already"), std::string::npos);
  EXPECT_EQ(rt.update("nope", x, Shape{4}).code(), Code::not_found);
  EXPECT_EQ(rt.checkpoint(-1).wait().code(), Code::invalid_argument);
  ASSERT_TRUE(rt.checkpoint(1).wait().ok());

  // Restart into a region of another dtype, shape or name.
  ASSERT_TRUE(rt.unprotect("x").ok());
  ASSERT_TRUE(rt.protect("x", f, DType::f32, {4}).ok());
  Status st = rt.restart(1);
  EXPECT_EQ(st.code(), Code::mismatch) << st.to_string();
  EXPECT_NE(st.message().find("'x'"), std::string::npos);
  ASSERT_TRUE(rt.unprotect("x").ok());
  ASSERT_TRUE(rt.protect("x", x, DType::f64, {3}).ok());
  EXPECT_EQ(rt.restart(1).code(), Code::mismatch);
  ASSERT_TRUE(rt.protect("y", x + 3, DType::f64, {1}).ok());
  ASSERT_TRUE(rt.unprotect("x").ok());
  Status unknown = rt.restart(1);
  EXPECT_EQ(unknown.code(), Code::not_found) << unknown.to_string();
  EXPECT_NE(unknown.message().find("'y'"), std::string::npos);
  EXPECT_EQ(rt.restart(99).code(), Code::not_found);
  (void)rank;
  (void)size;
}

TEST(RoundTrip, WriteFailureIsReportedAndTheNextCheckpointSucceeds) {
  // A write failure on one rank (here: RLIMIT_FSIZE, the same path as a full disk) fails the
  // checkpoint on every rank, leaves the previous one loadable, and the next one succeeds.
  const auto dir = scratch_dir();
  const int rank = world_rank(), size = world_size();
  Options o = opts_for(dir);
  o.chunk_bytes = 64 << 10;
  Runtime rt(MPI_COMM_WORLD, o);
  std::vector<double> v(200000, rank + 0.5);  // 1.6 MB per rank
  ASSERT_TRUE(rt.protect("v", v.data(), DType::f64, {v.size()}).ok());
  ASSERT_TRUE(rt.checkpoint(1).wait().ok());

  const int victim = size - 1;
  struct rlimit old {};
  ::getrlimit(RLIMIT_FSIZE, &old);
  std::signal(SIGXFSZ, SIG_IGN);
  if (rank == victim) {
    struct rlimit small = old;
    small.rlim_cur = 256 << 10;
    ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &small), 0);
  }
  std::fill(v.begin(), v.end(), -1.0);
  Status failed = rt.checkpoint(2).wait();
  if (rank == victim) ::setrlimit(RLIMIT_FSIZE, &old);
  ASSERT_FALSE(failed.ok()) << "every rank learns of the failure";
  EXPECT_NE(failed.message().find("rank " + std::to_string(victim)), std::string::npos) << failed.message();
  MPI_Barrier(MPI_COMM_WORLD);
  EXPECT_NE(::access((dir + "/ckpt.2.tmp").c_str(), F_OK), 0) << "partial files are removed";
  EXPECT_NE(::access((dir + "/ckpt.2").c_str(), F_OK), 0);
  EXPECT_EQ(ckpt::test::newest_step(rt), 1);

  std::fill(v.begin(), v.end(), 3.0);
  ASSERT_TRUE(rt.checkpoint(3).wait().ok()) << "the next checkpoint succeeds once writes work again";
  std::fill(v.begin(), v.end(), 0.0);
  ASSERT_TRUE(rt.restart(1).ok());
  EXPECT_EQ(v[0], rank + 0.5);
}

TEST(RoundTrip, UnobservedFailureIsReportedByTheNextCheckpoint) {
  const auto dir = scratch_dir();
  const int rank = world_rank();
  Options o = opts_for(dir);
  Runtime rt(MPI_COMM_WORLD, o);
  std::vector<double> v(100000, 1.0);
  ASSERT_TRUE(rt.protect("v", v.data(), DType::f64, {v.size()}).ok());
  struct rlimit old {};
  ::getrlimit(RLIMIT_FSIZE, &old);
  std::signal(SIGXFSZ, SIG_IGN);
  if (rank == 0) {
    struct rlimit small = old;
    small.rlim_cur = 64 << 10;
    ::setrlimit(RLIMIT_FSIZE, &small);
  }
  Ticket t1 = rt.checkpoint(1);  // fails in the background; nobody waits for it
  Ticket t2 = rt.checkpoint(2);  // max_in_flight = 1: waits for 1 and reports its failure
  if (rank == 0) ::setrlimit(RLIMIT_FSIZE, &old);
  Status s2 = t2.wait();
  EXPECT_FALSE(s2.ok());
  EXPECT_NE(s2.message().find("checkpoint 1 failed"), std::string::npos) << s2.message();
  EXPECT_TRUE(rt.checkpoint(2).wait().ok()) << "taking the step again works";
  EXPECT_FALSE(t1.wait().ok());
}

TEST(RoundTrip, NullTransportRunsThePipelineAndWritesNothing) {
  const auto dir = scratch_dir();
  Options o = opts_for(dir + "/null");
  o.transport = "null";
  Runtime rt(MPI_COMM_WORLD, o);
  ASSERT_TRUE(rt.status().ok());
  std::vector<float> v(1000, 2.0f);
  ASSERT_TRUE(rt.protect("v", v.data(), DType::f32, {v.size()}).ok());
  ASSERT_TRUE(rt.checkpoint(1).wait().ok());
  EXPECT_EQ(ckpt::test::newest_step(rt), -1);
  EXPECT_NE(::access((dir + "/null").c_str(), F_OK), 0) << "null creates no directory";
}

TEST(RoundTrip, UnknownAndUnbuiltTransportsAreClearErrors) {
  const auto dir = scratch_dir();
  Options o = opts_for(dir);
  o.transport = "carrier-pigeon";
  Runtime rt(MPI_COMM_WORLD, o);
  EXPECT_EQ(rt.status().code(), Code::invalid_argument);
  EXPECT_NE(rt.status().message().find("known: posix"), std::string::npos) << rt.status().message();
  double x = 0;
  EXPECT_FALSE(rt.protect_scalar("x", &x).ok()) << "a broken Runtime refuses every call";
  EXPECT_FALSE(rt.checkpoint(1).wait().ok());
}
