// The write side of incremental checkpoints (runtime/src/pipeline/incremental): the ranges the write thread
// writes, the chain of a rank (what a checkpoint compares with, when, and where each piece's bytes are),
// and the pieces a block's record gets.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <utility>
#include <vector>

#include "base/layout.hpp"
#include "runtime/src/pipeline/incremental.hpp"

using namespace ckpt;
using namespace ckpt::detail;

namespace {

constexpr std::uint32_t kLog2 = 16;  // 64 KiB pieces
constexpr std::uint64_t kP = std::uint64_t{1} << kLog2;

/// A plan of a small block (100 bytes), a block of 3.5 pieces and one of 2 pieces, planned for incremental.
StreamPlan test_plan() {
  std::vector<Region> regions(3);
  const std::uint64_t counts[3] = {100, 3 * kP + kP / 2, 2 * kP};
  const char* names[3] = {"small", "big", "two"};
  for (int i = 0; i < 3; ++i) {
    regions[i].name = names[i];
    regions[i].dtype = DType::u8;
    regions[i].count = {counts[i]};
  }
  return plan_stream(regions, 4096, 4 * kP, 1, kP);
}

using Ranges = std::vector<std::pair<std::uint64_t, std::uint64_t>>;

}  // namespace

TEST(Chain, PiecedBlocksStartAtAPieceAndTheWriteSkipsReusedPiecesAndPadding) {
  const StreamPlan plan = test_plan();
  ASSERT_EQ(plan.blocks[1].offset % kP, 0u);
  ASSERT_EQ(plan.blocks[2].offset % kP, 0u);
  IncrementalJob off;
  init_incremental(off, plan, 0, 4 * kP);
  EXPECT_FALSE(off.on);
  EXPECT_EQ(dirty_ranges(off, plan, 0, 4 * kP), (Ranges{{0, 4 * kP}}));  // not incremental: the whole window

  IncrementalJob inc;
  init_incremental(inc, plan, kLog2, 4 * kP);
  ASSERT_TRUE(inc.on);
  EXPECT_TRUE(inc.hashes[0].empty());  // below a piece: stored whole
  ASSERT_EQ(inc.hashes[1].size(), 4u);
  ASSERT_EQ(inc.hashes[2].size(), 2u);
  const std::uint64_t big = plan.blocks[1].offset, two = plan.blocks[2].offset;
  inc.reused[1] = {0, 1, 1, 0};  // pieces 1 and 2 of "big" are the same as before
  inc.reused[2] = {1, 0};
  // The first window holds "small" (then padding), "big"'s first pieces: written, but not pieces 1-2.
  Ranges all;
  for (std::uint64_t a = 0; a < plan.bytes; a += 4 * kP)
    for (auto r : dirty_ranges(inc, plan, a, std::min(a + 4 * kP, plan.bytes))) all.push_back(r);
  const Ranges want = {{0, 100}, {big, big + kP}, {big + 3 * kP, big + 3 * kP + kP / 2}, {two + kP, two + 2 * kP}};
  EXPECT_EQ(all, want);

  // A chunk-sized window that cuts nothing in two: the same ranges from a window per piece.
  Ranges by_piece;
  for (std::uint64_t a = 0; a < plan.bytes; a += kP)
    for (auto r : dirty_ranges(inc, plan, a, std::min(a + kP, plan.bytes))) {
      if (!by_piece.empty() && by_piece.back().second == r.first)
        by_piece.back().second = r.second;
      else
        by_piece.push_back(r);
    }
  EXPECT_EQ(by_piece, want);
}

TEST(Chain, ACheckpointComparesWithTheNewestCommittedOneUntilTheChainIsFull) {
  const StreamPlan plan = test_plan();
  Chain chain(3);
  EXPECT_EQ(chain.previous(1, 0), nullptr);  // no chain yet: full
  std::vector<std::uint64_t> own(plan.blocks.size());
  for (std::size_t i = 0; i < own.size(); ++i) own[i] = 4096 + plan.blocks[i].offset;
  std::uint64_t settled = 0;
  // Checkpoint `step` (id 0x11 x step) of `job` committed: what the next checkpoint compares with.
  auto commit = [&](std::int64_t step, const IncrementalJob& job) {
    chain.committed(step, 0x11 * static_cast<std::uint64_t>(step), "data.0", job, plan, own);
    chain.settle();
    return chain.previous(step + 1, ++settled);
  };

  IncrementalJob j1;
  init_incremental(j1, plan, kLog2, 4 * kP);
  for (auto& h : j1.hashes[1]) h = Hash128{1, 1};
  auto t1 = commit(1, j1);
  ASSERT_NE(t1, nullptr);
  EXPECT_EQ(t1->step, 1);
  EXPECT_EQ(t1->base_step, 1);
  EXPECT_EQ(t1->length, 1);
  ASSERT_EQ(t1->files.size(), 1u);
  EXPECT_EQ(t1->files[0], (RefFile{0, 1, 0x11, "data.0"}));
  ASSERT_EQ(t1->blocks.count("big"), 1u);
  EXPECT_EQ(t1->blocks.count("small"), 0u);  // stored whole: nothing to compare
  EXPECT_EQ(t1->blocks.at("big").first, plan.blocks[1].length);
  EXPECT_EQ(t1->blocks.at("big").second[3].offset, own[1] + 3 * kP);
  EXPECT_EQ(chain.previous(1, 1), nullptr);  // a step not above the chain's newest starts a new chain

  // Step 2 reuses piece 0 of "big": it keeps step 1's place; its other pieces are step 2's.
  IncrementalJob j2;
  init_incremental(j2, plan, kLog2, 4 * kP);
  j2.previous = t1;
  j2.reused[1][0] = 1;
  BlockRecord b;
  b.length = plan.blocks[1].length;
  std::vector<RefFile> refs;
  ASSERT_TRUE(pieced_block(j2, 1, "big", 8192, b, refs));
  EXPECT_EQ(b.piece_log2, kLog2);
  EXPECT_EQ(b.offset, 0u);
  ASSERT_EQ(b.pieces.size(), 4u);
  EXPECT_EQ(b.pieces[0].ref, 1u);
  EXPECT_EQ(b.pieces[0].offset, own[1]);
  EXPECT_EQ(b.pieces[1].ref, 0u);
  EXPECT_EQ(b.pieces[1].offset, 8192 + kP);
  EXPECT_EQ(refs, (std::vector<RefFile>{t1->files[0]}));
  BlockRecord whole;
  EXPECT_FALSE(pieced_block(j2, 2, "two", 0, whole, refs));  // nothing reused: stored whole
  EXPECT_FALSE(whole.pieced());

  auto t2 = commit(2, j2);
  ASSERT_NE(t2, nullptr);
  EXPECT_EQ(t2->length, 2);
  EXPECT_EQ(t2->base_step, 1);
  ASSERT_EQ(t2->files.size(), 2u);  // step 1's file (piece 0) and step 2's
  const ChainPiece& p0 = t2->blocks.at("big").second[0];
  EXPECT_EQ(t2->files[p0.file].step, 1);
  EXPECT_EQ(p0.offset, own[1]);
  const ChainPiece& p1 = t2->blocks.at("big").second[1];
  EXPECT_EQ(t2->files[p1.file].step, 2);

  IncrementalJob j3;
  init_incremental(j3, plan, kLog2, 4 * kP);
  j3.previous = t2;
  j3.reused[2][1] = 1;
  EXPECT_EQ(commit(3, j3), nullptr);  // a chain of 3 is full: the next checkpoint is full

  // A checkpoint compared with the chain that reused nothing refers to nothing: a new chain starts there.
  chain.reset();
  auto t5 = commit(5, j1);
  IncrementalJob j6;
  init_incremental(j6, plan, kLog2, 4 * kP);
  j6.previous = t5;
  auto t6 = commit(6, j6);
  ASSERT_NE(t6, nullptr);
  EXPECT_EQ(t6->base_step, 6);
  EXPECT_EQ(t6->length, 1);
  ASSERT_EQ(t6->files.size(), 1u);
  EXPECT_EQ(t6->files[0].step, 6);
  chain.reset();
  EXPECT_EQ(chain.previous(5, 3), nullptr);
}

TEST(Chain, ACheckpointWaitsForTheOutcomeOfTheOneBefore) {
  const StreamPlan plan = test_plan();
  Chain chain(10);
  std::atomic<bool> got{false};
  std::thread digest([&] {
    auto t = chain.previous(2, 1);  // one job started before: wait for its outcome
    EXPECT_NE(t, nullptr);
    got = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_FALSE(got.load());
  IncrementalJob j1;
  init_incremental(j1, plan, kLog2, 4 * kP);
  chain.committed(1, 0x11, "data.0", j1, plan, std::vector<std::uint64_t>(plan.blocks.size(), 4096));
  chain.settle();
  digest.join();
  EXPECT_TRUE(got.load());
}

TEST(Chain, AChunkThatIsNotAMultipleOfThePieceTurnsIncrementalOff) {
  IncrementalJob inc;
  init_incremental(inc, test_plan(), kLog2, 3 * kP / 2);
  EXPECT_FALSE(inc.on);
}
