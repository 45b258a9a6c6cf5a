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
#include <cstdint>
#include <cstring>
#include <limits>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "base/store.hpp"
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

// ---- Adversarial cases (review of the restart by rows and keys) ----

namespace {
/// Row g of the generic array "v" [rows, 3] f64 written at `step`: step * 1e7 + g * 10 + c.
double value_of(std::int64_t step, std::uint64_t g, std::uint64_t c) {
  return static_cast<double>(step) * 1e7 + static_cast<double>(g) * 10.0 + static_cast<double>(c);
}

/// The first global row of `rank` when rank r holds rows[r].
std::uint64_t first_of(const std::vector<std::uint64_t>& rows, int rank) {
  std::uint64_t g = 0;
  for (int q = 0; q < rank; ++q) g += rows[static_cast<std::size_t>(q)];
  return g;
}

/// Writes step `step` from every rank of the world with `o`: "v" [n, 3] f64 (value_of) and "id" [n]
/// i64 holding ids[g] for this rank's global rows g, rank r holding rows[r] rows.
void write_ids(const Options& o, std::int64_t step, const std::vector<std::uint64_t>& rows,
               const std::vector<std::int64_t>& ids) {
  const int rank = world_rank();
  const std::uint64_t n = rows[static_cast<std::size_t>(rank)], g0 = first_of(rows, rank);
  std::vector<double> v(n * 3);
  std::vector<std::int64_t> id(n);
  for (std::uint64_t i = 0; i < n; ++i) {
    id[i] = ids[g0 + i];
    for (std::uint64_t c = 0; c < 3; ++c) v[i * 3 + c] = value_of(step, g0 + i, c);
  }
  Runtime rt(MPI_COMM_WORLD, o);
  ASSERT_TRUE(rt.status().ok()) << rt.status().to_string();
  ASSERT_TRUE(rt.protect("v", v.data(), DType::f64, Joined{{n, 3}}).ok());
  ASSERT_TRUE(rt.protect("id", id.data(), DType::i64, Joined{{n}}).ok());
  Status s = rt.checkpoint(step).wait();
  ASSERT_TRUE(s.ok()) << s.to_string();
  ASSERT_TRUE(rt.close().ok());
  MPI_Barrier(MPI_COMM_WORLD);
}

/// The global row of `id` in `ids` (which holds it once).
std::uint64_t row_of_id(const std::vector<std::int64_t>& ids, std::int64_t id) {
  return static_cast<std::uint64_t>(std::find(ids.begin(), ids.end(), id) - ids.begin());
}

/// Rank 0 flips a byte in the middle of the block of variable `var` written by `rank` in checkpoint
/// directory `ckpt_dir` (the index says where it is); every rank goes on after it.
void damage_block(const std::string& ckpt_dir, const std::string& var, std::uint32_t rank) {
  if (world_rank() == 0) {
    auto idx = ckpt::detail::load_checkpoint_dir(ckpt_dir);
    ASSERT_TRUE(idx.ok()) << idx.status().to_string();
    const long vi = idx->find_var(var);
    ASSERT_GE(vi, 0);
    bool done = false;
    for (const auto& b : idx->blocks) {
      if (b.var != static_cast<std::uint32_t>(vi) || b.rank != rank || b.length == 0) continue;
      const std::string path = ckpt_dir + "/" + idx->files[b.file].name;
      auto bytes = ckpt::detail::read_file(path, 1ull << 30);
      ASSERT_TRUE(bytes.ok()) << bytes.status().to_string();
      auto data = bytes.value();
      data[b.offset + b.length / 2] ^= 0x10;
      ASSERT_TRUE(ckpt::detail::write_file(path, data.data(), data.size(), false).ok());
      done = true;
    }
    ASSERT_TRUE(done) << "no block of " << var << " by rank " << rank << " in " << ckpt_dir;
  }
  MPI_Barrier(MPI_COMM_WORLD);
}
}  // namespace

TEST(RestartRows, NewestDamagedFallsBackAndResolvesKeysInTheOlderStep) {
  // Step 1 and step 2 hold the same ids at other rows (another split, another order); step 2's data
  // file of rank 1 is cut. restart() falls back to step 1, whose own key column says where each id is.
  const std::string dir = ckpt::test::scratch_dir();
  const int rank = world_rank();
  const std::uint64_t total = 14;
  std::vector<std::int64_t> ids1(total), ids2(total);
  for (std::uint64_t g = 0; g < total; ++g) {
    ids1[g] = 500 + static_cast<std::int64_t>(g) * 7;
    ids2[total - 1 - g] = ids1[g];
  }
  write_ids(options_in(dir), 1, {2, 3, 4, 5}, ids1);
  write_ids(options_in(dir), 2, {5, 4, 3, 2}, ids2);
  if (rank == 0) {
    ASSERT_EQ(::truncate((dir + "/ckpt.2/data.1").c_str(), 0), 0) << std::strerror(errno);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  // Rank q asks for the ids of stored rows q, q + 4, ... of step 1, backwards.
  std::vector<std::int64_t> want;
  for (std::uint64_t g = static_cast<std::uint64_t>(rank); g < total; g += 4) want.insert(want.begin(), ids1[g]);
  std::vector<double> v(want.size() * 3, -1.0);
  Runtime rt(MPI_COMM_WORLD, options_in(dir));
  ASSERT_TRUE(rt.protect("v", v.data(), DType::f64, Joined{{want.size(), 3}}).ok());
  ASSERT_TRUE(rt.set_restart_keys("v", "id", want).ok());
  auto r = rt.restart();
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r.value(), 1);
  EXPECT_FALSE(r.warning().ok());
  EXPECT_NE(r.warning().message().find("step 1 after skipping newer ones"), std::string::npos)
      << r.warning().to_string();
  for (std::size_t i = 0; i < want.size(); ++i)
    for (std::uint64_t c = 0; c < 3; ++c)
      ASSERT_EQ(v[i * 3 + c], value_of(1, row_of_id(ids1, want[i]), c)) << "row " << i << " on rank " << rank;
  // restart(2) itself: the failure is the same on every rank.
  Status s = rt.restart(2);
  EXPECT_FALSE(s.ok());
  EXPECT_TRUE(ckpt::test::all_true(!s.ok()));
}

TEST(RestartRows, KeyColumnThatIsOptionalAndMissing) {
  // Step 1 has "v" and "id"; step 2 (a code that lost its ids) only "v". A restart by "id" cannot use
  // step 2: restart(2) fails the same on every rank, restart() falls back to step 1. An optional
  // region keyed by "id" that no step has is skipped.
  const std::string dir = ckpt::test::scratch_dir();
  const int rank = world_rank();
  std::vector<std::int64_t> ids(8);
  for (std::uint64_t g = 0; g < ids.size(); ++g) ids[g] = 90 - static_cast<std::int64_t>(g) * 3;
  write_ids(options_in(dir), 1, {2, 2, 2, 2}, ids);
  {
    std::vector<double> v(6, 7.0);
    Runtime rt(MPI_COMM_WORLD, options_in(dir));
    ASSERT_TRUE(rt.protect("v", v.data(), DType::f64, Joined{{2, 3}}).ok());
    ASSERT_TRUE(rt.checkpoint(2).wait().ok());
  }
  MPI_Barrier(MPI_COMM_WORLD);
  std::vector<std::int64_t> want = {ids[static_cast<std::size_t>(7 - rank)], ids[static_cast<std::size_t>(rank)]};
  std::vector<double> v(6, -1.0), extra(4, -4.0);
  std::vector<std::int64_t> id(2, -1);
  Runtime rt(MPI_COMM_WORLD, options_in(dir));
  ASSERT_TRUE(rt.protect("v", v.data(), DType::f64, Joined{{2, 3}}).ok());
  ASSERT_TRUE(rt.protect("id", id.data(), DType::i64, Joined{{2}}).ok());
  ASSERT_TRUE(rt.protect("extra", extra.data(), DType::f64, Joined{{2, 2}}).ok());
  ASSERT_TRUE(rt.set_optional("id", true).ok());
  ASSERT_TRUE(rt.set_optional("extra", true).ok());
  ASSERT_TRUE(rt.set_restart_keys("v", "id", want).ok());
  ASSERT_TRUE(rt.set_restart_keys("id", "id", want).ok());
  ASSERT_TRUE(rt.set_restart_keys("extra", "id", want).ok());
  Status s = rt.restart(2);
  EXPECT_EQ(s.code(), Code::not_found) << s.to_string();
  EXPECT_NE(s.message().find("key 'id' is not in checkpoint 2"), std::string::npos) << s.to_string();
  EXPECT_TRUE(ckpt::test::all_true(s.code() == Code::not_found));
  EXPECT_EQ(v[0], -1.0);  // nothing read
  auto r = rt.restart();
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r.value(), 1);
  EXPECT_NE(r.warning().message().find("key 'id' is not in checkpoint 2"), std::string::npos)
      << r.warning().to_string();
  EXPECT_NE(r.warning().message().find("extra"), std::string::npos) << r.warning().to_string();
  EXPECT_EQ(rt.skipped_optional(), std::vector<std::string>{"extra"});
  EXPECT_EQ(id, want);
  for (std::size_t i = 0; i < 2; ++i)
    for (std::uint64_t c = 0; c < 3; ++c) EXPECT_EQ(v[i * 3 + c], value_of(1, row_of_id(ids, want[i]), c));
  EXPECT_EQ(extra, std::vector<double>(4, -4.0));  // skipped: untouched
}

TEST(RestartRows, RowsAcrossManyBlocksWithEmptyWriters) {
  // Writers of 1, 0, 3 and 0 rows (blocks of no rows start where the next one does), then every rank
  // asks for every stored row several times in its own order: runs cut at each block's bound, runs of
  // one row, a run over three blocks; by index and by key.
  const std::string dir = ckpt::test::scratch_dir();
  const int rank = world_rank();
  const std::vector<std::uint64_t> rows = {1, 0, 3, 0};
  const std::vector<std::int64_t> ids = {-7, 42, 0, -1000000000000LL};
  write_ids(options_in(dir), 3, rows, ids);
  for (const std::vector<std::uint64_t>& one_row :
       {std::vector<std::uint64_t>{1, 1, 1, 1}, std::vector<std::uint64_t>{0, 0, 0, 4}}) {
    const std::string d = dir + "/w" + std::to_string(one_row[0]);
    write_ids(options_in(d), 4, one_row, ids);
  }
  std::vector<std::uint64_t> want = {0, 1, 2, 3, 3, 2, 1, 0, 2, 0, 3, 1};
  std::rotate(want.begin(), want.begin() + rank * 3, want.end());
  want.push_back(0);  // a run 0..3 across three blocks and a row asked for again
  want.push_back(1);
  want.push_back(2);
  want.push_back(3);
  for (const std::string& d : {dir, dir + "/w1", dir + "/w0"}) {
    SCOPED_TRACE(d);
    const std::int64_t step = d == dir ? 3 : 4;
    for (const bool by_key : {false, true}) {
      std::vector<double> v(want.size() * 3, -1.0);
      Runtime rt(MPI_COMM_WORLD, options_in(d));
      ASSERT_TRUE(rt.protect("v", v.data(), DType::f64, Joined{{want.size(), 3}}).ok());
      if (by_key) {
        std::vector<std::int64_t> keys;
        for (std::uint64_t g : want) keys.push_back(ids[g]);
        ASSERT_TRUE(rt.set_restart_keys("v", "id", keys).ok());
      } else {
        ASSERT_TRUE(rt.set_restart_rows("v", want).ok());
      }
      Status s = rt.restart(step);
      ASSERT_TRUE(s.ok()) << s.to_string();
      for (std::size_t i = 0; i < want.size(); ++i)
        for (std::uint64_t c = 0; c < 3; ++c)
          ASSERT_EQ(v[i * 3 + c], value_of(step, want[i], c)) << "row " << i << " by_key " << by_key;
    }
  }
}

TEST(RestartRows, LargeRandomPermutationElementByElement) {
  // 40000 rows of unequal writers, ids a random 63-bit injection; the ranks take a random permutation
  // of all rows in unequal parts (one rank none). Small chunks: many pieces per block, each crossed
  // by thousands of runs of one row. Every element is compared.
  const std::string dir = ckpt::test::scratch_dir();
  const int rank = world_rank();
  const std::vector<std::uint64_t> rows = {4000, 17000, 1000, 18000};
  const std::uint64_t total = 40000;
  std::mt19937_64 gen(35);
  std::vector<std::int64_t> ids(total);
  for (std::uint64_t g = 0; g < total; ++g)  // distinct: g in the low bits, noise above
    ids[g] = static_cast<std::int64_t>(((gen() & 0x3fffffffffffull) << 16) | g) * ((g % 3) == 0 ? -1 : 1);
  Options o = options_in(dir);
  o.chunk_bytes = 4096;
  write_ids(o, 9, rows, ids);
  std::vector<std::uint64_t> perm(total);
  std::iota(perm.begin(), perm.end(), 0);
  std::shuffle(perm.begin(), perm.end(), gen);
  const std::vector<std::uint64_t> parts = {13000, 0, 20000, 7000};
  const std::uint64_t p0 = first_of(parts, rank), n = parts[static_cast<std::size_t>(rank)];
  std::vector<std::uint64_t> want(perm.begin() + static_cast<std::ptrdiff_t>(p0),
                                  perm.begin() + static_cast<std::ptrdiff_t>(p0 + n));
  std::vector<std::int64_t> keys;
  for (std::uint64_t g : want) keys.push_back(ids[g]);
  for (const bool by_key : {true, false}) {
    std::vector<double> v(n * 3 + 1, -1.0);
    std::vector<std::int64_t> id(n + 1, -1);
    Runtime rt(MPI_COMM_WORLD, o);
    ASSERT_TRUE(rt.protect("v", v.data(), DType::f64, Joined{{n, 3}}).ok());
    ASSERT_TRUE(rt.protect("id", id.data(), DType::i64, Joined{{n}}).ok());
    if (by_key) {
      ASSERT_TRUE(rt.set_restart_keys("v", "id", keys).ok());
      ASSERT_TRUE(rt.set_restart_keys("id", "id", keys).ok());
    } else {
      ASSERT_TRUE(rt.set_restart_rows("v", want).ok());
      ASSERT_TRUE(rt.set_restart_rows("id", want).ok());
    }
    Status s = rt.restart(9);
    ASSERT_TRUE(s.ok()) << s.to_string();
    std::uint64_t bad = 0;
    for (std::uint64_t i = 0; i < n; ++i) {
      if (id[i] != keys[i]) ++bad;
      for (std::uint64_t c = 0; c < 3; ++c)
        if (v[i * 3 + c] != value_of(9, want[i], c)) ++bad;
    }
    EXPECT_EQ(bad, 0u) << "by_key " << by_key << " on rank " << rank;
    EXPECT_EQ(v[n * 3], -1.0);
    EXPECT_EQ(id[n], -1);
  }
}

TEST(RestartRows, KeyColumnsOfEveryIntegerWidth) {
  // Keys stored as i8 (negative), u16 (above 2^15), u64 (up to 2^63 - 1), i64 (down to -2^63) and i32
  // of shape [rows, 1]: each is widened to the same i64 key. A u64 value of 2^63 is beyond the keys
  // ckpt looks up: refused on every rank, though no rank asks for it.
  const std::string dir = ckpt::test::scratch_dir();
  const int rank = world_rank();
  const std::int64_t kMax = std::numeric_limits<std::int64_t>::max(), kMin = std::numeric_limits<std::int64_t>::min();
  const std::vector<std::int64_t> k8 = {-128, -1, 0, 127, -5, 5, 100, -100};
  const std::vector<std::int64_t> k16 = {65535, 0, 40000, 32768, 1, 2, 3, 65000};
  const std::vector<std::int64_t> k64 = {kMax, 0, std::int64_t{1} << 62, 12345, kMax - 1, 7, 8, 9};
  const std::vector<std::int64_t> ki64 = {kMin, kMax, -1, 0, 1, kMin + 1, -2, 2};
  const std::vector<std::int64_t> k32 = {-2147483647 - 1, 2147483647, 3, 4, 5, 6, 7, 8};
  for (std::int64_t step : {1, 2}) {
    std::vector<std::int8_t> a8(2);
    std::vector<std::uint16_t> a16(2);
    std::vector<std::uint64_t> a64(2);
    std::vector<std::int64_t> ai64(2);
    std::vector<std::int32_t> a32(2);
    std::vector<double> v(2);
    for (std::size_t i = 0; i < 2; ++i) {
      const std::size_t g = static_cast<std::size_t>(rank) * 2 + i;
      a8[i] = static_cast<std::int8_t>(k8[g]);
      a16[i] = static_cast<std::uint16_t>(k16[g]);
      a64[i] = static_cast<std::uint64_t>(k64[g]);
      ai64[i] = ki64[g];
      a32[i] = static_cast<std::int32_t>(k32[g]);
      v[i] = static_cast<double>(g);
    }
    if (step == 2 && rank == 2) a64[1] = std::uint64_t{1} << 63;  // row 5, id 7 before
    Runtime rt(MPI_COMM_WORLD, options_in(dir));
    ASSERT_TRUE(rt.protect("k8", a8.data(), DType::i8, Joined{{2}}).ok());
    ASSERT_TRUE(rt.protect("k16", a16.data(), DType::u16, Joined{{2}}).ok());
    ASSERT_TRUE(rt.protect("k64", a64.data(), DType::u64, Joined{{2}}).ok());
    ASSERT_TRUE(rt.protect("ki64", ai64.data(), DType::i64, Joined{{2}}).ok());
    ASSERT_TRUE(rt.protect("k32", a32.data(), DType::i32, Joined{{2, 1}}).ok());
    ASSERT_TRUE(rt.protect("v", v.data(), DType::f64, Joined{{2}}).ok());
    ASSERT_TRUE(rt.checkpoint(step).wait().ok());
  }
  MPI_Barrier(MPI_COMM_WORLD);
  struct Column {
    const char* name;
    const std::vector<std::int64_t>& keys;
  };
  for (const Column& col :
       {Column{"k8", k8}, Column{"k16", k16}, Column{"k64", k64}, Column{"ki64", ki64}, Column{"k32", k32}}) {
    SCOPED_TRACE(col.name);
    // Every rank asks for all 8 rows, starting at its own.
    std::vector<std::uint64_t> want(8);
    for (std::uint64_t i = 0; i < 8; ++i) want[i] = (i + 2 * static_cast<std::uint64_t>(rank)) % 8;
    std::vector<std::int64_t> keys;
    for (std::uint64_t g : want) keys.push_back(col.keys[g]);
    std::vector<double> v(8, -1.0);
    Runtime rt(MPI_COMM_WORLD, options_in(dir));
    ASSERT_TRUE(rt.protect("v", v.data(), DType::f64, Joined{{8}}).ok());
    ASSERT_TRUE(rt.set_restart_keys("v", col.name, keys).ok());
    Status s = rt.restart(1);
    ASSERT_TRUE(s.ok()) << s.to_string();
    for (std::uint64_t i = 0; i < 8; ++i) EXPECT_EQ(v[i], static_cast<double>(want[i])) << "row " << i;
    if (std::string(col.name) != "k64") continue;
    // Step 2: row 5 of k64 holds 2^63. Asked only for the other rows, the restart is still refused.
    ASSERT_TRUE(rt.set_restart_keys("v", "k64", {k64[0], k64[1], k64[2], k64[3], k64[4], k64[6], k64[7], 12345}).ok());
    s = rt.restart(2);
    EXPECT_EQ(s.code(), Code::invalid_argument) << s.to_string();
    EXPECT_NE(s.message().find("stored row 5 holds a value beyond the keys"), std::string::npos) << s.to_string();
    EXPECT_TRUE(ckpt::test::all_true(s.code() == Code::invalid_argument));
  }
}

TEST(RestartRows, FourRanksToOneAndToTwoByKey) {
  const std::string dir = ckpt::test::scratch_dir();
  write_blocks(dir, 2);
  const int rank = world_rank();
  const std::uint64_t total = total_blocks(world_size());
  // 4 -> 1: rank 0 alone (MPI_COMM_SELF) takes every block, newest id first, and one twice.
  if (rank == 0) {
    std::vector<std::int64_t> all;
    for (std::uint64_t g = 0; g < total; ++g) all.push_back(block_id(g));
    std::sort(all.rbegin(), all.rend());
    all.push_back(all[3]);
    std::vector<double> blocks(all.size() * kCells, -1.0);
    std::vector<double> temp(all.size(), -1.0);
    Runtime rt(MPI_COMM_SELF, options_in(dir));
    ASSERT_TRUE(rt.protect("blocks", blocks.data(), DType::f64, Joined{{all.size(), 2, 4}}).ok());
    ASSERT_TRUE(rt.protect("temp", temp.data(), DType::f64, Joined{{all.size()}}).ok());
    ASSERT_TRUE(rt.set_restart_keys("blocks", "block_id", all).ok());
    ASSERT_TRUE(rt.set_restart_keys("temp", "block_id", all).ok());
    Status s = rt.restart(2);
    ASSERT_TRUE(s.ok()) << s.to_string();
    for (std::size_t i = 0; i < all.size(); ++i) {
      EXPECT_EQ(temp[i], 0.5 * static_cast<double>(all[i]));
      for (std::uint64_t c = 0; c < kCells; ++c) ASSERT_EQ(blocks[i * kCells + c], cell(all[i], c)) << i;
    }
  }
  MPI_Barrier(MPI_COMM_WORLD);
  // 4 -> 2: ranks 0 and 1 split the ids by parity of the global block.
  MPI_Comm two = MPI_COMM_NULL;
  MPI_Comm_split(MPI_COMM_WORLD, rank < 2 ? 0 : MPI_UNDEFINED, rank, &two);
  if (two != MPI_COMM_NULL) {
    std::vector<std::int64_t> mine;
    for (std::uint64_t g = static_cast<std::uint64_t>(rank); g < total; g += 2) mine.push_back(block_id(g));
    std::vector<double> blocks(mine.size() * kCells, -1.0);
    Runtime rt(two, options_in(dir));
    ASSERT_TRUE(rt.protect("blocks", blocks.data(), DType::f64, Joined{{mine.size(), 2, 4}}).ok());
    ASSERT_TRUE(rt.set_restart_keys("blocks", "block_id", mine).ok());
    Status s = rt.restart(2);
    ASSERT_TRUE(s.ok()) << s.to_string();
    for (std::size_t i = 0; i < mine.size(); ++i)
      for (std::uint64_t c = 0; c < kCells; ++c) ASSERT_EQ(blocks[i * kCells + c], cell(mine[i], c)) << i;
    MPI_Comm_free(&two);
  }
  MPI_Barrier(MPI_COMM_WORLD);
}

TEST(RestartRows, OptionalKeyedRegionWithSelectionKeepsItsSettingThroughUpdate) {
  // An optional region (restored through its packed shadow) with a memory selection and restart keys,
  // set before an update() that moves it: the setting is kept; the ghost cells stay untouched.
  const std::string dir = ckpt::test::scratch_dir();
  write_blocks(dir, 7);
  const int rank = world_rank();
  const std::vector<std::int64_t> want = {block_id(13 - static_cast<std::uint64_t>(rank)), block_id(0)};
  std::vector<double> first((2 + 2) * 2 * 4, -9.0), mem((2 + 2) * 2 * 4, -1.0);
  Runtime rt(MPI_COMM_WORLD, options_in(dir));
  ASSERT_TRUE(rt.protect("blocks", first.data(), DType::f64, Joined{{2, 2, 4}}).ok());
  ASSERT_TRUE(rt.set_optional("blocks", true).ok());
  ASSERT_TRUE(rt.set_restart_keys("blocks", "block_id", want).ok());
  ASSERT_TRUE(rt.update("blocks", mem.data(), Joined{{2, 2, 4}}).ok());
  ASSERT_TRUE(rt.set_memory_selection("blocks", MemorySelection{{1, 0, 0}, {4, 2, 4}}).ok());
  Status s = rt.restart(7);
  ASSERT_TRUE(s.ok()) << s.to_string();
  EXPECT_TRUE(rt.skipped_optional().empty());
  EXPECT_EQ(first, std::vector<double>(first.size(), -9.0));
  for (std::uint64_t b = 0; b < 4; ++b)
    for (std::uint64_t c = 0; c < kCells; ++c) {
      const double want_v = b == 0 || b == 3 ? -1.0 : cell(want[b - 1], c);
      EXPECT_EQ(mem[b * kCells + c], want_v) << "row " << b << " cell " << c;
    }
}

TEST(RestartRows, NodeLevelWithKeysThatCrossNodesFallsBackToTheDrainedCopy) {
  // local_dir, 2 ranks per node, every step drained: a node directory holds only its own ranks' data
  // files, so rows asked for across nodes cannot come from it; the drained copy in `dir` restores them.
  const std::string root = ckpt::test::scratch_dir();
  const int rank = world_rank();
  Options o = options_in(root + "/global");
  o.local_dir = root + "/local";
  o.ranks_per_node = 2;
  o.drain_every = 1;
  std::vector<std::int64_t> ids(8);
  for (std::uint64_t g = 0; g < 8; ++g) ids[g] = 3000 + static_cast<std::int64_t>(g * g);
  write_ids(o, 5, {2, 2, 2, 2}, ids);
  for (const bool cross : {false, true}) {
    SCOPED_TRACE(cross ? "rows of the other node" : "rows of this rank");
    // Own rows (reversed): the node level serves them; rows of another node's rank: the drained copy.
    const std::uint64_t from = cross ? (static_cast<std::uint64_t>(rank) * 2 + 4) % 8 : rank * 2u;
    const std::vector<std::int64_t> want = {ids[from + 1], ids[from]};
    std::vector<double> v(6, -1.0);
    Runtime rt(MPI_COMM_WORLD, o);
    ASSERT_TRUE(rt.status().ok()) << rt.status().to_string();
    ASSERT_TRUE(rt.protect("v", v.data(), DType::f64, Joined{{2, 3}}).ok());
    ASSERT_TRUE(rt.set_restart_keys("v", "id", want).ok());
    auto r = rt.restart();
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    EXPECT_EQ(r.value(), 5);
    EXPECT_EQ(rt.restart_level(), cross ? "global" : "local");
    for (std::size_t i = 0; i < 2; ++i)
      for (std::uint64_t c = 0; c < 3; ++c) EXPECT_EQ(v[i * 3 + c], value_of(5, row_of_id(ids, want[i]), c));
  }
}

TEST(RestartRows, PartnerCopyRepairsADamagedKeyColumn) {
  // 4 nodes of one rank, partner redundancy, nothing drained. Node 2's copy of its block of "v", or
  // of its key column, is damaged: only rank 2 reads it (its rows, its share of the key column), so
  // only node 2 is damaged and its partner copy on node 3 repairs it (restart_level() "partner").
  const int rank = world_rank();
  for (const char* var : {"v", "id"}) {
    SCOPED_TRACE(var);
    const std::string root = ckpt::test::scratch_dir(std::string(".") + var);
    Options o = options_in(root + "/global");
    o.local_dir = root + "/local";
    o.ranks_per_node = 1;
    o.drain_every = 0;
    o.redundancy = Redundancy::partner;
    std::vector<std::int64_t> ids(8);
    for (std::uint64_t g = 0; g < 8; ++g) ids[g] = 77 + 11 * static_cast<std::int64_t>(g);
    write_ids(o, 1, {2, 2, 2, 2}, ids);
    write_ids(o, 2, {2, 2, 2, 2}, ids);
    damage_block(root + "/local/node2/ckpt.2", var, 2);
    const std::vector<std::int64_t> want = {ids[rank * 2u + 1], ids[rank * 2u]};
    std::vector<double> v(6, -1.0);
    Runtime rt(MPI_COMM_WORLD, o);
    ASSERT_TRUE(rt.status().ok()) << rt.status().to_string();
    ASSERT_TRUE(rt.protect("v", v.data(), DType::f64, Joined{{2, 3}}).ok());
    ASSERT_TRUE(rt.set_restart_keys("v", "id", want).ok());
    auto r = rt.restart();
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    EXPECT_EQ(r.value(), 2) << r.warning().to_string();
    EXPECT_EQ(rt.restart_level(), "partner");
    for (std::size_t i = 0; i < 2; ++i)
      for (std::uint64_t c = 0; c < 3; ++c) EXPECT_EQ(v[i * 3 + c], value_of(r.value(), row_of_id(ids, want[i]), c));
  }
}

TEST(RestartRows, RanksThatRegisterInAnotherOrderRestartByKey) {
  // A checkpoint and a plain restart do not care in which order each rank registers its regions; the
  // agreement on the regions restarted by key does not either (it named them in registration order).
  const std::string dir = ckpt::test::scratch_dir();
  const int rank = world_rank();
  std::vector<std::int64_t> ids(8);
  for (std::uint64_t g = 0; g < 8; ++g) ids[g] = 40 - 5 * static_cast<std::int64_t>(g);
  write_ids(options_in(dir), 1, {2, 2, 2, 2}, ids);
  const std::vector<std::int64_t> want = {ids[static_cast<std::size_t>(7 - rank)], ids[0], ids[3]};
  std::vector<double> v(9, -1.0);
  std::vector<std::int64_t> id(3, -1);
  Runtime rt(MPI_COMM_WORLD, options_in(dir));
  if (rank % 2 == 0) {
    ASSERT_TRUE(rt.protect("v", v.data(), DType::f64, Joined{{3, 3}}).ok());
    ASSERT_TRUE(rt.protect("id", id.data(), DType::i64, Joined{{3}}).ok());
  } else {
    ASSERT_TRUE(rt.protect("id", id.data(), DType::i64, Joined{{3}}).ok());
    ASSERT_TRUE(rt.protect("v", v.data(), DType::f64, Joined{{3, 3}}).ok());
  }
  ASSERT_TRUE(rt.set_restart_keys("v", "id", want).ok());
  ASSERT_TRUE(rt.set_restart_keys("id", "id", want).ok());
  Status s = rt.restart(1);
  ASSERT_TRUE(s.ok()) << s.to_string();
  EXPECT_EQ(id, want);
  for (std::size_t i = 0; i < 3; ++i)
    for (std::uint64_t c = 0; c < 3; ++c) EXPECT_EQ(v[i * 3 + c], value_of(1, row_of_id(ids, want[i]), c));
}
