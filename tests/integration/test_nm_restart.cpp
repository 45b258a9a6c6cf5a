// Restart on a different number of ranks. CKPTTEST_PHASE=write writes checkpoints with this run's
// rank count into CKPTTEST_NM_DIR; CKPTTEST_PHASE=read restarts from them with another count.
// CTest runs write(4) -> read(2) and write(2) -> read(4) as fixtures, and with CKPT_LAYOUT=series and
// CKPT_SEGMENT_STEPS=1 write(4) -> read(3) and read(1), the two steps (5 and 10) in two segments.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <string>
#include <vector>

#include "ckpt/ckpt.hpp"
#include "test_util.hpp"

using namespace ckpt;
using ckpt::test::world_rank;
using ckpt::test::world_size;

namespace {
constexpr std::uint64_t kRows = 29, kCols = 11, kParticles = 1001;

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

/// Uneven split of n items over `size` ranks (the last ranks get one less).
void split(std::uint64_t n, int rank, int size, std::uint64_t& start, std::uint64_t& count) {
  const std::uint64_t base = n / size, extra = n % size;
  count = base + (static_cast<std::uint64_t>(rank) < extra ? 1 : 0);
  start = rank * base + std::min<std::uint64_t>(rank, extra);
}

double value(std::uint64_t i, std::uint64_t j) { return 1.0 / (1.0 + i) + 3.0 * j; }

/// Tracers: a joined array of rows [kTracerCols], rank r writing tracer_rows(r) of them (rank 1 none),
/// global row g holding tracer(g, j).
constexpr std::uint64_t kTracerCols = 3;
std::uint64_t tracer_rows(int rank) { return static_cast<std::uint64_t>((rank * 5 + 3) % 8); }
double tracer(std::uint64_t g, std::uint64_t j) { return 100.0 * static_cast<double>(g) + static_cast<double>(j); }

struct Data {
  std::uint64_t r0 = 0, nr = 0, p0 = 0, np = 0;
  std::vector<double> field;      // [kRows, kCols] split by rows
  std::vector<std::int64_t> ids;  // [kParticles] split unevenly
  double time = 0;                // same on every rank
  std::int32_t writers = 0;       // the rank count that wrote the checkpoint
  std::int32_t rank_tag = 0;      // differs per rank
  Data(int rank, int size) {
    split(kRows, rank, size, r0, nr);
    // Particles split the other way round, so boxes of 4 and 2 ranks straddle each other.
    split(kParticles, size - 1 - rank, size, p0, np);
    field.resize(nr * kCols);
    ids.resize(np);
  }
  Status protect(Runtime& rt) {
    CKPT_RETURN_IF_ERROR(rt.protect("field", field.data(), DType::f64, Block{{kRows, kCols}, {r0, 0}, {nr, kCols}}));
    CKPT_RETURN_IF_ERROR(rt.protect("particles/id", ids.data(), DType::i64, Block{{kParticles}, {p0}, {np}}));
    CKPT_RETURN_IF_ERROR(rt.protect_scalar("writers", &writers));
    return rt.protect_scalar("time", &time);
  }
};
}  // namespace

TEST(NtoM, Phase) {
  const std::string phase = env("CKPTTEST_PHASE"), dir = env("CKPTTEST_NM_DIR");
  ASSERT_FALSE(dir.empty()) << "CKPTTEST_NM_DIR not set";
  const int rank = world_rank(), size = world_size();
  Options o;  // CKPT_* variables choose the transport (see tests/transports)
  ASSERT_TRUE(o.error.ok()) << o.error.to_string();
  o.dir = dir;
  Data d(rank, size);
  if (phase == "write") {
    if (rank == 0) ckpt::detail::remove_tree(dir);
    MPI_Barrier(MPI_COMM_WORLD);
    Runtime rt(MPI_COMM_WORLD, o);
    ASSERT_TRUE(rt.status().ok()) << rt.status().to_string();
    ASSERT_TRUE(d.protect(rt).ok());
    d.rank_tag = rank;
    ASSERT_TRUE(rt.protect_scalar("rank_tag", &d.rank_tag).ok());
    for (std::uint64_t i = 0; i < d.nr; ++i)
      for (std::uint64_t j = 0; j < kCols; ++j) d.field[i * kCols + j] = value(d.r0 + i, j);
    for (std::uint64_t k = 0; k < d.np; ++k) d.ids[k] = static_cast<std::int64_t>((d.p0 + k) * 7919);
    d.writers = size;
    // This rank's tracer rows start after every lower rank's (the joined array's rank order).
    std::uint64_t t0 = 0;
    for (int r = 0; r < rank; ++r) t0 += tracer_rows(r);
    std::vector<double> tracers(tracer_rows(rank) * kTracerCols);
    for (std::uint64_t k = 0; k < tracers.size(); ++k) tracers[k] = tracer(t0 + k / kTracerCols, k % kTracerCols);
    ASSERT_TRUE(rt.protect("tracers", tracers.data(), DType::f64, Joined{{tracer_rows(rank), kTracerCols}}).ok());
    for (std::int64_t step : {5, 10}) {  // time tells the steps apart
      d.time = 0.25 * static_cast<double>(step);
      ASSERT_TRUE(rt.checkpoint(step).wait().ok());
    }
  } else if (phase == "read") {
    Runtime rt(MPI_COMM_WORLD, o);
    ASSERT_TRUE(rt.status().ok()) << rt.status().to_string();
    ASSERT_TRUE(d.protect(rt).ok());
    // A per-rank value cannot be restored on another rank count: a clear error, not garbage.
    ASSERT_TRUE(rt.protect_scalar("rank_tag", &d.rank_tag).ok());
    Status refused = rt.restart(10);
    EXPECT_EQ(refused.code(), Code::mismatch) << refused.to_string();
    EXPECT_NE(refused.message().find("rank_tag"), std::string::npos) << refused.message();
    ASSERT_TRUE(rt.unprotect("rank_tag").ok());
    // The tracers: this rank's share of the balanced split of every rank's rows.
    auto share = rt.joined_rows(10, "tracers");
    ASSERT_TRUE(share.ok()) << share.status().to_string();
    std::vector<double> tracers(share->count() * kTracerCols, -1.0);
    ASSERT_TRUE(rt.protect("tracers", tracers.data(), DType::f64, Joined{{share->count(), kTracerCols}}).ok());
    auto r = rt.restart();
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    EXPECT_EQ(r.value(), 10);
    for (std::uint64_t i = 0; i < d.nr; ++i)
      for (std::uint64_t j = 0; j < kCols; ++j) ASSERT_EQ(d.field[i * kCols + j], value(d.r0 + i, j)) << i << "," << j;
    for (std::uint64_t k = 0; k < d.np; ++k) ASSERT_EQ(d.ids[k], static_cast<std::int64_t>((d.p0 + k) * 7919));
    EXPECT_EQ(d.time, 2.5);
    std::uint64_t total = 0;
    for (int w = 0; w < d.writers; ++w) total += tracer_rows(w);
    EXPECT_EQ(share->total, total);
    for (std::uint64_t k = 0; k < tracers.size(); ++k)
      ASSERT_EQ(tracers[k], tracer(share->begin + k / kTracerCols, k % kTracerCols)) << k;
    // The older step (in the older segment of a series) restarts too.
    std::fill(d.ids.begin(), d.ids.end(), -1);
    ASSERT_TRUE(rt.restart(5).ok());
    EXPECT_EQ(d.time, 1.25);
    for (std::uint64_t k = 0; k < d.np; ++k) ASSERT_EQ(d.ids[k], static_cast<std::int64_t>((d.p0 + k) * 7919));
  } else {
    GTEST_SKIP() << "run through CTest (CKPTTEST_PHASE=write|read)";
  }
}
