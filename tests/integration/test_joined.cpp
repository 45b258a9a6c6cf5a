// Joined arrays: every rank's rows concatenated in rank order, row counts gathered by the runtime at
// commit, restart on any rank count (balanced split or explicit rows). CKPTTEST_PHASE=write writes
// into CKPTTEST_NM_DIR with this run's rank count; CKPTTEST_PHASE=read restarts from it with another.
// Without a phase, the single-run cases (adversarial ones included) run.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "ckpt/ckpt.hpp"
#include "ckpt/reader.hpp"
#include "test_util.hpp"

using namespace ckpt;
using ckpt::test::all_true;
using ckpt::test::world_rank;
using ckpt::test::world_size;

namespace {
constexpr std::uint64_t kWidth = 3;

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

/// Rows of every rank together at `step` (the same for every rank count, so that checkpoints written
/// by 4 and by 2 ranks hold the same array: `ckpt diff` compares them equal).
std::uint64_t total_of(std::int64_t step) { return step == 1 ? 18 : 11; }
/// First row of rank r of `size`: a quadratic split, uneven, with empty ranks (4 ranks at step 2:
/// rank 0 holds no row).
std::uint64_t first_of(int r, int size, std::int64_t step) {
  const std::uint64_t ur = static_cast<std::uint64_t>(r), us = static_cast<std::uint64_t>(size);
  return total_of(step) * ur * ur / (us * us);
}
std::uint64_t rows_of(int r, int size, std::int64_t step) {
  return first_of(r + 1, size, step) - first_of(r, size, step);
}
double value(std::int64_t step, std::uint64_t row, std::uint64_t col) {
  return static_cast<double>(step) * 1000.0 + static_cast<double>(row) + 0.125 * static_cast<double>(col);
}
std::int64_t id(std::int64_t step, std::uint64_t row) { return step * 100000 + static_cast<std::int64_t>(row) * 7; }

/// This rank's walkers at `step` (rows_of rows, values by global row).
struct Walkers {
  std::vector<double> pos;
  std::vector<std::int64_t> ids;
  void fill(int rank, int size, std::int64_t step) {
    const std::uint64_t n = rows_of(rank, size, step), r0 = first_of(rank, size, step);
    pos.assign(n * kWidth, 0);
    ids.assign(n, 0);
    for (std::uint64_t i = 0; i < n; ++i) {
      ids[i] = id(step, r0 + i);
      for (std::uint64_t c = 0; c < kWidth; ++c) pos[i * kWidth + c] = value(step, r0 + i, c);
    }
  }
  std::uint64_t rows() const { return ids.size(); }
};

Options options(const std::string& dir, const std::string& transport = "posix") {
  Options o;
  o.dir = dir;
  o.transport = transport;
  return o;
}

/// Writes steps 1 and 2 (row counts change between them) with this run's rank count.
void write_steps(const std::string& dir, const std::string& transport = "posix") {
  const int rank = world_rank(), size = world_size();
  Runtime rt(MPI_COMM_WORLD, options(dir, transport));
  ASSERT_TRUE(rt.status().ok()) << rt.status().to_string();
  Walkers w;
  w.fill(rank, size, 1);
  ASSERT_TRUE(rt.protect("walkers/pos", w.pos.data(), DType::f64, Joined{{w.rows(), kWidth}}).ok());
  ASSERT_TRUE(rt.protect("walkers/id", w.ids.data(), DType::i64, Joined{{w.rows()}}).ok());
  Status s = rt.checkpoint(1).wait();
  ASSERT_TRUE(s.ok()) << s.to_string();
  w.fill(rank, size, 2);
  // A rank with no rows passes a null pointer (an empty vector's data()).
  ASSERT_TRUE(rt.update("walkers/pos", w.rows() ? w.pos.data() : nullptr, Joined{{w.rows(), kWidth}}).ok());
  ASSERT_TRUE(rt.update("walkers/id", w.rows() ? w.ids.data() : nullptr, Joined{{w.rows()}}).ok());
  s = rt.checkpoint(2).wait();
  ASSERT_TRUE(s.ok()) << s.to_string();
}

/// Restarts step `step` (written with any rank count) on this run's ranks, balanced, and checks every row.
void read_balanced(const std::string& dir, std::int64_t step) {
  const int rank = world_rank(), size = world_size();
  Runtime rt(MPI_COMM_WORLD, options(dir));
  ASSERT_TRUE(rt.status().ok()) << rt.status().to_string();
  auto rows = rt.joined_rows(step, "walkers/pos");
  ASSERT_TRUE(rows.ok()) << rows.status().to_string();
  EXPECT_EQ(rows->total, total_of(step));
  EXPECT_EQ(rows->begin, balanced_rows(rows->total, rank, size).begin);
  std::vector<double> pos(rows->count() * kWidth, -1);
  std::vector<std::int64_t> ids(rows->count(), -1);
  ASSERT_TRUE(rt.protect("walkers/pos", pos.data(), DType::f64, Joined{{rows->count(), kWidth}}).ok());
  ASSERT_TRUE(rt.protect("walkers/id", ids.data(), DType::i64, Joined{{rows->count()}}).ok());
  Status s = rt.restart(step);
  ASSERT_TRUE(s.ok()) << s.to_string();
  for (std::uint64_t i = 0; i < rows->count(); ++i) {
    ASSERT_EQ(ids[i], id(step, rows->begin + i)) << "row " << rows->begin + i;
    for (std::uint64_t c = 0; c < kWidth; ++c) ASSERT_EQ(pos[i * kWidth + c], value(step, rows->begin + i, c));
  }
}
}  // namespace

TEST(Joined, Phase) {
  const std::string phase = env("CKPTTEST_PHASE"), dir = env("CKPTTEST_NM_DIR");
  if (phase.empty()) GTEST_SKIP() << "run through CTest (CKPTTEST_PHASE=write|read)";
  ASSERT_FALSE(dir.empty()) << "CKPTTEST_NM_DIR not set";
  if (phase == "write") {
    if (world_rank() == 0) ckpt::detail::remove_tree(dir);
    MPI_Barrier(MPI_COMM_WORLD);
    write_steps(dir);
  } else {
    read_balanced(dir, 1);
    read_balanced(dir, 2);
  }
}

TEST(Joined, SameRankCountAndRowCountsOfEveryRank) {
  const std::string dir = ckpt::test::scratch_dir();
  write_steps(dir);
  read_balanced(dir, 2);
  read_balanced(dir, 1);
}

TEST(Joined, ExplicitRowsMayOverlapAndMissRows) {
  // Each rank asks for rows [rank, rank + 2): neighbours overlap, the tail is nobody's.
  const std::string dir = ckpt::test::scratch_dir();
  write_steps(dir);
  const int rank = world_rank();
  Runtime rt(MPI_COMM_WORLD, options(dir));
  std::vector<double> pos(2 * kWidth, -1);
  Joined j{{2, kWidth}, static_cast<std::uint64_t>(rank)};
  ASSERT_TRUE(rt.protect("walkers/pos", pos.data(), DType::f64, j).ok());
  Status s = rt.restart(1);
  ASSERT_TRUE(s.ok()) << s.to_string();
  for (std::uint64_t i = 0; i < 2; ++i)
    for (std::uint64_t c = 0; c < kWidth; ++c) EXPECT_EQ(pos[i * kWidth + c], value(1, rank + i, c));
}

/// A joined array nobody has a row of: it commits, says 0 rows and restarts.
void all_ranks_empty(const std::string& transport) {
  const std::string dir = ckpt::test::scratch_dir("-empty-" + transport);
  Runtime rt(MPI_COMM_WORLD, options(dir, transport));
  ASSERT_TRUE(rt.protect("none", nullptr, DType::f32, Joined{{0, 4}}).ok());
  Status s = rt.checkpoint(0).wait();
  ASSERT_TRUE(s.ok()) << s.to_string();
  auto rows = rt.joined_rows(0, "none");
  ASSERT_TRUE(rows.ok()) << rows.status().to_string();
  EXPECT_EQ(rows->total, 0u);
  EXPECT_EQ(rows->count(), 0u);
  s = rt.restart(0);
  EXPECT_TRUE(s.ok()) << s.to_string();
}

TEST(Joined, AllRanksEmpty) { all_ranks_empty("posix"); }

// Every transport stores the rows where the index says (hdf5: one dataset of every rank's rows, in
// rank order, like a global array; empty ranks and an empty array included).
TEST(Joined, EveryTransport) {
  std::vector<std::string> transports = {"posix", "mpiio", "rbio"};
#if CKPTTEST_HAVE_HDF5
  transports.push_back("hdf5");
  transports.push_back("hdf5-sync");
#endif
  for (const std::string& t : transports) {
    SCOPED_TRACE(t);
    const std::string dir = ckpt::test::scratch_dir("-" + t);
    write_steps(dir, t);
    read_balanced(dir, 2);
    read_balanced(dir, 1);
    all_ranks_empty(t);
  }
}

TEST(Joined, WrongRegistrationsAreNamedNotRestoredFromOtherRows) {
  const std::string dir = ckpt::test::scratch_dir();
  write_steps(dir);
  const int rank = world_rank(), size = world_size();
  Runtime rt(MPI_COMM_WORLD, options(dir));
  const JoinedRows share = balanced_rows(total_of(2), rank, size);
  std::vector<double> pos((share.count() + 1) * kWidth, -1);

  // One row too many on rank 0 only: every rank fails, naming the variable and the rows.
  const std::uint64_t n = share.count() + (rank == 0 ? 1 : 0);
  ASSERT_TRUE(rt.protect("walkers/pos", pos.data(), DType::f64, Joined{{n, kWidth}}).ok());
  Status s = rt.restart(2);
  EXPECT_EQ(s.code(), Code::mismatch) << s.to_string();
  EXPECT_NE(s.message().find("walkers/pos"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("balanced split"), std::string::npos) << s.message();

  // Rows past the end.
  const std::uint64_t past = total_of(2);
  ASSERT_TRUE(rt.update("walkers/pos", pos.data(), Joined{{1, kWidth}, past}).ok());
  s = rt.restart(2);
  EXPECT_EQ(s.code(), Code::mismatch) << s.to_string();
  EXPECT_NE(s.message().find("holds"), std::string::npos) << s.message();

  // Other row extents.
  ASSERT_TRUE(rt.update("walkers/pos", pos.data(), Joined{{share.count(), kWidth - 1}}).ok());
  s = rt.restart(2);
  EXPECT_EQ(s.code(), Code::mismatch) << s.to_string();

  // The same name registered as a Block: a kind mismatch, not rows of another rank.
  ASSERT_TRUE(rt.unprotect("walkers/pos").ok());
  ASSERT_TRUE(rt.protect("walkers/pos", pos.data(), DType::f64,
                         Block{{past, kWidth}, {share.begin, 0}, {share.count(), kWidth}})
                  .ok());
  s = rt.restart(2);
  EXPECT_EQ(s.code(), Code::mismatch) << s.to_string();
  EXPECT_NE(s.message().find("joined"), std::string::npos) << s.message();
  // A Block cannot be updated into a joined region, nor the reverse.
  EXPECT_EQ(rt.update("walkers/pos", pos.data(), Joined{{1, kWidth}}).code(), Code::invalid_argument);

  // joined_rows() of something that is not a joined array, or not there.
  EXPECT_EQ(rt.joined_rows(2, "nope").status().code(), Code::not_found);
  EXPECT_EQ(rt.joined_rows(99, "walkers/pos").status().code(), Code::not_found);
}

// The public Reader (what the tools read through) reads a joined array like a global array: its shape
// is every rank's rows, a box may straddle the blocks of several ranks (and the empty block of a rank
// without rows), and it is not read by rank.
TEST(Joined, ReaderReadsBoxesAcrossRanks) {
  const std::string dir = ckpt::test::scratch_dir();
  write_steps(dir);
  const int size = world_size();
  auto r = Reader::open(MPI_COMM_WORLD, dir);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  for (const std::int64_t step : {1, 2}) {
    SCOPED_TRACE("step " + std::to_string(step));
    auto c = r->open_step(step);
    ASSERT_TRUE(c.ok()) << c.status().to_string();
    CheckpointReader& cr = c.value();
    const std::uint64_t total = total_of(step);
    auto v = cr.variable("walkers/pos");
    ASSERT_TRUE(v.ok()) << v.status().to_string();
    EXPECT_EQ(v->kind, VarKind::joined);
    EXPECT_STREQ(var_kind_name(v->kind), "joined");
    EXPECT_EQ(v->shape, (Shape{total, kWidth}));
    ASSERT_EQ(v->blocks.size(), static_cast<std::size_t>(size));
    for (const BlockInfo& b : v->blocks) {
      const int br = static_cast<int>(b.rank);
      EXPECT_EQ(b.start, (Shape{first_of(br, size, step), 0})) << "rank " << br;
      EXPECT_EQ(b.count, (Shape{rows_of(br, size, step), kWidth})) << "rank " << br;
    }
    // The whole array, then a box of rows [2, total - 1) and columns [1, 3) (several ranks' rows).
    std::vector<double> all(total * kWidth, -1);
    Status s = cr.read("walkers/pos", all.data(), all.size() * sizeof(double));
    ASSERT_TRUE(s.ok()) << s.to_string();
    for (std::uint64_t i = 0; i < total; ++i)
      for (std::uint64_t k = 0; k < kWidth; ++k) ASSERT_EQ(all[i * kWidth + k], value(step, i, k)) << i << "," << k;
    const std::uint64_t rows = total - 3;
    std::vector<double> box(rows * 2, -1);
    s = cr.read("walkers/pos", {2, 1}, {rows, 2}, box.data(), box.size() * sizeof(double));
    ASSERT_TRUE(s.ok()) << s.to_string();
    for (std::uint64_t i = 0; i < rows; ++i)
      for (std::uint64_t k = 0; k < 2; ++k) ASSERT_EQ(box[i * 2 + k], value(step, 2 + i, 1 + k)) << i << "," << k;
    std::vector<std::int64_t> ids(total, -1);
    s = cr.read("walkers/id", ids.data(), ids.size() * sizeof(std::int64_t));
    ASSERT_TRUE(s.ok()) << s.to_string();
    for (std::uint64_t i = 0; i < total; ++i) ASSERT_EQ(ids[i], id(step, i)) << i;
    // Not by rank; a box past the rows is named.
    EXPECT_EQ(cr.read_rank("walkers/pos", 0, all.data(), all.size() * sizeof(double)).code(), Code::invalid_argument);
    EXPECT_EQ(cr.read("walkers/pos", {total, 0}, {1, kWidth}, all.data(), all.size() * sizeof(double)).code(),
              Code::invalid_argument);
    EXPECT_TRUE(cr.verify().ok());
  }
}

TEST(Joined, RanksThatDisagreeOnTheRowExtentsFailTheCommit) {
  const std::string dir = ckpt::test::scratch_dir();
  const int rank = world_rank();
  Runtime rt(MPI_COMM_WORLD, options(dir));
  std::vector<double> a(2 * 4, 1.0);
  const std::uint64_t width = rank == world_size() - 1 ? 4 : 3;
  ASSERT_TRUE(rt.protect("atoms", a.data(), DType::f64, Joined{{2, width}}).ok());
  Status s = rt.checkpoint(5).wait();
  if (world_size() == 1) {
    EXPECT_TRUE(s.ok()) << s.to_string();
    return;
  }
  EXPECT_EQ(s.code(), Code::invalid_argument) << s.to_string();
  EXPECT_NE(s.message().find("atoms"), std::string::npos) << s.message();
  EXPECT_EQ(ckpt::test::newest_step(rt), -1);
}

TEST(Joined, BadRegistrations) {
  Runtime rt(MPI_COMM_WORLD, options(ckpt::test::scratch_dir()));
  double x = 0;
  EXPECT_EQ(rt.protect("j", &x, DType::f64, Joined{}).code(), Code::invalid_argument);
  EXPECT_EQ(rt.protect("j", &x, DType::f64, Joined{{1, 0}}).code(), Code::invalid_argument);
  EXPECT_EQ(rt.protect("j", nullptr, DType::f64, Joined{{1}}).code(), Code::invalid_argument);
  EXPECT_EQ(rt.protect("j", &x, DType::f64, Joined{{-1}}).code(), Code::invalid_argument);
  ASSERT_TRUE(rt.protect("j", &x, DType::f64, Joined{{1}}).ok());
  EXPECT_EQ(rt.update("j", &x, Dims{1}).code(), Code::invalid_argument);  // a joined array stays joined
  EXPECT_TRUE(all_true(true));
}

TEST(Joined, BalancedRows) {
  EXPECT_EQ(balanced_rows(10, 0, 4).begin, 0u);
  EXPECT_EQ(balanced_rows(10, 0, 4).end, 2u);
  EXPECT_EQ(balanced_rows(10, 3, 4).end, 10u);
  std::uint64_t next = 0;
  for (int r = 0; r < 7; ++r) {
    auto s = balanced_rows(100, r, 7);
    EXPECT_EQ(s.begin, next);
    EXPECT_LE(s.count(), 15u);
    EXPECT_GE(s.count(), 14u);
    next = s.end;
  }
  EXPECT_EQ(next, 100u);
  const std::uint64_t big = ~std::uint64_t{0} - 5;
  EXPECT_EQ(balanced_rows(big, 2, 3).end, big);
  EXPECT_EQ(balanced_rows(5, 9, 3).count(), 0u);  // out of range: nothing
}
