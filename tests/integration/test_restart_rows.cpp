// Rows by index and by key (issue 35): a joined array restarts with each rank asking for the stored rows
// it owns now - in any order, overlapping, on another rank count - by their indices
// (Runtime::set_restart_rows) or by the values of a key column such as a block id
// (Runtime::set_restart_keys), with no all-to-all in the application. At 4 ranks: AMR-like blocks
// written by 4 ranks restarted by 3 (a sub-communicator) by key, with ghost cells kept out by a memory
// selection; explicit rows with duplicates and runs backwards; a Source resized to the rows asked for;
// every refusal, agreed on every rank.
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <cstdint>
#include <string>
#include <vector>

#include "ckpt/ckpt.hpp"
#include "test_util.hpp"

using namespace ckpt;
using ckpt::test::options_in;
using ckpt::test::world_rank;
using ckpt::test::world_size;

namespace {
constexpr std::uint64_t kCells = 8;  // elements of a block's interior (2 x 4)

/// Block ids are scattered, not row numbers: global block g has id 1000 + 37 g (mod 997) * 3.
std::int64_t block_id(std::uint64_t g) { return 1000 + static_cast<std::int64_t>((37 * g) % 997) * 3; }
/// The value of cell c of the block with id `id`.
double cell(std::int64_t id, std::uint64_t c) { return static_cast<double>(id) * 100.0 + static_cast<double>(c); }

/// Rank r of the writing job holds r + 2 blocks: global blocks [first(r), first(r) + r + 2).
std::uint64_t first_block(int r) { return static_cast<std::uint64_t>(r * (r + 3) / 2); }
std::uint64_t total_blocks(int ranks) { return first_block(ranks); }

/// Writes step `step` into `dir` from every rank of the world: "blocks" [n, 2, 4] f64, "block_id" [n]
/// i64, and "temp" [n] f32 (an f64 key would be refused) - joined arrays in global block order.
void write_blocks(const std::string& dir, std::int64_t step) {
  const int rank = world_rank();
  const std::uint64_t n = static_cast<std::uint64_t>(rank) + 2, g0 = first_block(rank);
  std::vector<double> blocks(n * kCells);
  std::vector<std::int64_t> ids(n);
  std::vector<double> temp(n);
  for (std::uint64_t b = 0; b < n; ++b) {
    ids[b] = block_id(g0 + b);
    temp[b] = 0.5 * static_cast<double>(ids[b]);
    for (std::uint64_t c = 0; c < kCells; ++c) blocks[b * kCells + c] = cell(ids[b], c);
  }
  Runtime rt(MPI_COMM_WORLD, options_in(dir));
  ASSERT_TRUE(rt.protect("blocks", blocks.data(), DType::f64, Joined{{n, 2, 4}}).ok());
  ASSERT_TRUE(rt.protect("block_id", ids.data(), DType::i64, Joined{{n}}).ok());
  ASSERT_TRUE(rt.protect("temp", temp.data(), DType::f64, Joined{{n}}).ok());
  Status s = rt.checkpoint(step).wait();
  ASSERT_TRUE(s.ok()) << s.to_string();
}
}  // namespace

TEST(RestartRows, BlocksMoveToThreeRanksByKeyIntoGhostedAllocations) {
  const std::string dir = ckpt::test::scratch_dir();
  write_blocks(dir, 3);
  const int rank = world_rank();
  const std::uint64_t total = total_blocks(world_size());
  MPI_Comm three = MPI_COMM_NULL;
  MPI_Comm_split(MPI_COMM_WORLD, rank < 3 ? 0 : MPI_UNDEFINED, rank, &three);
  if (three != MPI_COMM_NULL) {
    // The new partition: rank q owns the blocks whose id % 3 == q, newest id first (any order works).
    std::vector<std::int64_t> owned;
    for (std::uint64_t g = 0; g < total; ++g)
      if (block_id(g) % 3 == rank) owned.push_back(block_id(g));
    std::sort(owned.rbegin(), owned.rend());
    const std::uint64_t n = owned.size();
    // Each block lives in a ghosted allocation [n + 2, 4, 6] - one ghost row above and below, one ghost
    // cell around each row - and only the interior [n, 2, 4] at (1, 1, 1) is restored.
    std::vector<double> mem((n + 2) * 4 * 6, -1.0);
    std::vector<std::int64_t> ids(n, -5);
    Runtime rt(three, options_in(dir));
    ASSERT_TRUE(rt.protect("blocks", mem.data(), DType::f64, Joined{{n, 2, 4}}).ok());
    ASSERT_TRUE(rt.set_memory_selection("blocks", MemorySelection{{1, 1, 1}, {n + 2, 4, 6}}).ok());
    ASSERT_TRUE(rt.protect("block_id", ids.data(), DType::i64, Joined{{n}}).ok());
    ASSERT_TRUE(rt.set_restart_keys("blocks", "block_id", owned).ok());
    ASSERT_TRUE(rt.set_restart_keys("block_id", "block_id", owned).ok());  // a key restores itself
    Status s = rt.restart(3);
    ASSERT_TRUE(s.ok()) << s.to_string();
    EXPECT_EQ(ids, owned);
    for (std::uint64_t b = 0; b < n + 2; ++b)
      for (std::uint64_t i = 0; i < 4; ++i)
        for (std::uint64_t j = 0; j < 6; ++j) {
          const double got = mem[(b * 4 + i) * 6 + j];
          const bool inside = b >= 1 && b <= n && i >= 1 && i <= 2 && j >= 1 && j <= 4;
          const double want = inside ? cell(owned[b - 1], (i - 1) * 4 + (j - 1)) : -1.0;
          ASSERT_EQ(got, want) << "block " << b << " at " << i << "," << j << " on rank " << rank;
        }
    MPI_Comm_free(&three);
  }
  MPI_Barrier(MPI_COMM_WORLD);
}

TEST(RestartRows, ExplicitRowsInAnyOrderWithDuplicatesAndOverlap) {
  const std::string dir = ckpt::test::scratch_dir();
  write_blocks(dir, 5);
  const int rank = world_rank();
  const std::uint64_t total = total_blocks(world_size());
  // Every rank asks for overlapping rows: runs backwards, a row twice, the last row, rows of every writer.
  std::vector<std::uint64_t> rows = {total - 1, 0, 0, 5, 6, 7, 3, 2, 1, static_cast<std::uint64_t>(rank)};
  std::vector<double> blocks(rows.size() * kCells, -2.0);
  Runtime rt(MPI_COMM_WORLD, options_in(dir));
  ASSERT_TRUE(rt.protect("blocks", blocks.data(), DType::f64, Joined{{rows.size(), 2, 4}}).ok());
  ASSERT_TRUE(rt.set_restart_rows("blocks", rows).ok());
  Status s = rt.restart(5);
  ASSERT_TRUE(s.ok()) << s.to_string();
  for (std::size_t i = 0; i < rows.size(); ++i)
    for (std::uint64_t c = 0; c < kCells; ++c)
      ASSERT_EQ(blocks[i * kCells + c], cell(block_id(rows[i]), c)) << "row " << i << " on rank " << rank;
  // clear_restart_rows: back to the balanced split (which needs its own count).
  ASSERT_TRUE(rt.clear_restart_rows("blocks").ok());
  const JoinedRows share = balanced_rows(total, rank, world_size());
  std::vector<double> balanced(share.count() * kCells);
  ASSERT_TRUE(rt.update("blocks", balanced.data(), Joined{{share.count(), 2, 4}}).ok());
  s = rt.restart(5);
  ASSERT_TRUE(s.ok()) << s.to_string();
  for (std::uint64_t i = 0; i < share.count(); ++i)
    ASSERT_EQ(balanced[i * kCells], cell(block_id(share.begin + i), 0));
  // A rank that owns no row asks for none; the others still restore theirs.
  std::vector<std::int64_t> none_or_one;
  if (rank == 1) none_or_one.push_back(block_id(total - 2));
  std::vector<double> one(none_or_one.size() * kCells + 1, -3.0);
  ASSERT_TRUE(rt.update("blocks", one.data(), Joined{{none_or_one.size(), 2, 4}}).ok());
  ASSERT_TRUE(rt.set_restart_keys("blocks", "block_id", none_or_one).ok());
  s = rt.restart(5);
  ASSERT_TRUE(s.ok()) << s.to_string();
  if (rank == 1) EXPECT_EQ(one[kCells - 1], cell(block_id(total - 2), kCells - 1));
  EXPECT_EQ(one.back(), -3.0);  // past the rows: untouched
}

TEST(RestartRows, OnlyTheBlocksHoldingTheRowsAreRead) {
  // Rank 3's data file is damaged: rows written by ranks 0-2 still restore (its block is never read);
  // a row of its block fails the restart on every rank.
  const std::string dir = ckpt::test::scratch_dir();
  write_blocks(dir, 4);
  const int rank = world_rank();
  if (rank == 0) {
    ASSERT_EQ(::truncate((dir + "/ckpt.4/data.3").c_str(), 0), 0) << std::strerror(errno);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  std::vector<double> blocks(2 * kCells);
  Runtime rt(MPI_COMM_WORLD, options_in(dir));
  ASSERT_TRUE(rt.protect("blocks", blocks.data(), DType::f64, Joined{{2, 2, 4}}).ok());
  const std::uint64_t last_before_3 = first_block(3) - 1;
  ASSERT_TRUE(rt.set_restart_rows("blocks", {last_before_3, static_cast<std::uint64_t>(rank)}).ok());
  Status s = rt.restart(4);
  ASSERT_TRUE(s.ok()) << s.to_string();
  EXPECT_EQ(blocks[0], cell(block_id(last_before_3), 0));
  EXPECT_EQ(blocks[kCells], cell(block_id(static_cast<std::uint64_t>(rank)), 0));
  ASSERT_TRUE(rt.set_restart_rows("blocks", {0, rank == 1 ? first_block(3) : 1}).ok());
  s = rt.restart(4);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("blocks"), std::string::npos) << s.to_string();
  EXPECT_TRUE(ckpt::test::all_true(!s.ok()));
}

TEST(RestartRows, SourceIsResizedToTheRowsAskedFor) {
  const std::string dir = ckpt::test::scratch_dir();
  write_blocks(dir, 6);
  const int rank = world_rank();
  std::vector<std::int64_t> want = {block_id(static_cast<std::uint64_t>(3 * rank + 1)), block_id(0)};
  std::vector<double> store;  // the application's buffer, sized by resize()
  Source src;
  src.locate = [&] { return Place{store.data(), Dims{store.size() / kCells, 2, 4}}; };
  src.resize = [&](const Shape& count) {
    store.assign(count[0] * kCells, 0.0);
    return Status::OK();
  };
  Runtime rt(MPI_COMM_WORLD, options_in(dir));
  ASSERT_TRUE(rt.protect("blocks", DType::f64, src, SourceKind::joined).ok());
  ASSERT_TRUE(rt.set_restart_keys("blocks", "block_id", want).ok());
  Status s = rt.restart(6);
  ASSERT_TRUE(s.ok()) << s.to_string();
  ASSERT_EQ(store.size(), 2 * kCells);
  EXPECT_EQ(store[0], cell(want[0], 0));
  EXPECT_EQ(store[kCells + 7], cell(want[1], 7));
}

TEST(RestartRows, RefusalsAreClearAndAgreedOnEveryRank) {
  const std::string dir = ckpt::test::scratch_dir();
  write_blocks(dir, 8);
  const int rank = world_rank();
  const std::uint64_t total = total_blocks(world_size());
  std::vector<double> blocks(2 * kCells);
  double scalar = 0;
  std::vector<double> local(4);
  Runtime rt(MPI_COMM_WORLD, options_in(dir));
  ASSERT_TRUE(rt.protect("blocks", blocks.data(), DType::f64, Joined{{2, 2, 4}}).ok());
  ASSERT_TRUE(rt.protect_scalar("t", &scalar).ok());
  ASSERT_TRUE(rt.protect("local", local.data(), DType::f64, Dims{4}).ok());
  // At once: not a joined array, not protected, no key name.
  EXPECT_EQ(rt.set_restart_rows("local", {0}).code(), Code::invalid_argument);
  EXPECT_EQ(rt.set_restart_keys("t", "block_id", {1}).code(), Code::invalid_argument);
  EXPECT_EQ(rt.set_restart_rows("nope", {0}).code(), Code::not_found);
  EXPECT_EQ(rt.clear_restart_rows("nope").code(), Code::not_found);
  EXPECT_EQ(rt.set_restart_keys("blocks", "", {1, 2}).code(), Code::invalid_argument);
  ASSERT_TRUE(rt.unprotect("local").ok());
  ASSERT_TRUE(rt.unprotect("t").ok());

  auto expect_restart = [&](Code code, const std::string& words) {
    Status s = rt.restart(8);
    EXPECT_EQ(s.code(), code) << s.to_string();
    EXPECT_NE(s.message().find(words), std::string::npos) << s.to_string();
    EXPECT_TRUE(ckpt::test::all_true(s.code() == code));  // the same outcome on every rank
  };
  // A row beyond the stored ones, on one rank only: every rank fails.
  ASSERT_TRUE(rt.set_restart_rows("blocks", {0, rank == 2 ? total : 1}).ok());
  expect_restart(Code::mismatch, "the checkpoint holds " + std::to_string(total) + " rows");
  // Fewer rows asked for than registered.
  ASSERT_TRUE(rt.set_restart_rows("blocks", {1}).ok());
  expect_restart(Code::mismatch, "1 restart rows asked for");
  // A key no stored row holds (on rank 3 only).
  ASSERT_TRUE(rt.set_restart_keys("blocks", "block_id", {block_id(1), rank == 3 ? 999999 : block_id(2)}).ok());
  expect_restart(Code::not_found, "holds 999999");
  // Not an integer column; not in the checkpoint.
  ASSERT_TRUE(rt.set_restart_keys("blocks", "temp", {1, 2}).ok());
  expect_restart(Code::invalid_argument, "a key is a joined integer array");
  ASSERT_TRUE(rt.set_restart_keys("blocks", "missing_id", {1, 2}).ok());
  expect_restart(Code::not_found, "key 'missing_id' is not in checkpoint 8");
  // Ranks that disagree on which regions restart by key: refused before any routing, no rank hangs.
  if (rank == 0)
    ASSERT_TRUE(rt.set_restart_keys("blocks", "block_id", {block_id(1), block_id(2)}).ok());
  else
    ASSERT_TRUE(rt.set_restart_rows("blocks", {1, 2}).ok());
  expect_restart(Code::invalid_argument, "differs across ranks");
  // And then it works.
  ASSERT_TRUE(rt.set_restart_keys("blocks", "block_id", {block_id(1), block_id(2)}).ok());
  Status s = rt.restart(8);
  ASSERT_TRUE(s.ok()) << s.to_string();
  EXPECT_EQ(blocks[0], cell(block_id(1), 0));
  EXPECT_EQ(blocks[kCells], cell(block_id(2), 0));
}

TEST(RestartRows, DuplicateKeysAndRowCountsThatDifferAreRefused) {
  // A key column whose values repeat, and a key of another row count than the array it keys.
  const std::string dir = ckpt::test::scratch_dir();
  const int rank = world_rank();
  {
    std::vector<std::int32_t> ids = {rank * 10, rank == 2 ? 10 : rank * 10 + 1};  // rank 2 repeats rank 1's id
    std::vector<std::int32_t> short_ids = {rank};
    std::vector<double> v = {1.0 * rank, 2.0 * rank};
    Runtime rt(MPI_COMM_WORLD, options_in(dir));
    ASSERT_TRUE(rt.protect("id", ids.data(), DType::i32, Joined{{2}}).ok());
    ASSERT_TRUE(rt.protect("short", short_ids.data(), DType::i32, Joined{{1}}).ok());
    ASSERT_TRUE(rt.protect("v", v.data(), DType::f64, Joined{{2}}).ok());
    ASSERT_TRUE(rt.checkpoint(1).wait().ok());
  }
  std::vector<double> v(1);
  Runtime rt(MPI_COMM_WORLD, options_in(dir));
  ASSERT_TRUE(rt.protect("v", v.data(), DType::f64, Joined{{1}}).ok());
  ASSERT_TRUE(rt.set_restart_keys("v", "id", {10}).ok());
  Status s = rt.restart(1);
  EXPECT_EQ(s.code(), Code::invalid_argument) << s.to_string();
  EXPECT_NE(s.message().find("is not unique: value 10 (asked for by rank "), std::string::npos) << s.to_string();
  EXPECT_NE(s.message().find(") is held by stored rows 2 and 5"), std::string::npos)
      << s.to_string();
  ASSERT_TRUE(rt.set_restart_keys("v", "short", {1}).ok());
  s = rt.restart(1);
  EXPECT_EQ(s.code(), Code::mismatch) << s.to_string();
  EXPECT_NE(s.message().find("not a key of it"), std::string::npos) << s.to_string();
  // A unique value of that column works (rank-dependent key, i32 widened): the duplicate 10 is asked
  // for by no rank.
  ASSERT_TRUE(rt.set_restart_keys("v", "id", {rank == 3 ? 31 : 0}).ok());
  s = rt.restart(1);
  ASSERT_TRUE(s.ok()) << s.to_string();
  EXPECT_EQ(v[0], rank == 3 ? 6.0 : 0.0);
}
