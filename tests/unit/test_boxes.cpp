// The box geometry of the commit: check_disjoint_blocks and merge_adjacent_boxes (a group writer's boxes for rank 0).
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>
#include <vector>

#include "runtime/src/pipeline/overlap.hpp"

using namespace ckpt;
using namespace ckpt::detail;

namespace {

BlockRecord box(std::uint32_t var, std::uint32_t rank, Shape start, Shape count) {
  BlockRecord b;
  b.var = var;
  b.rank = rank;
  b.start = std::move(start);
  b.count = std::move(count);
  return b;
}

Index global_vars(std::size_t n, std::vector<BlockRecord> blocks) {
  Index idx;
  for (std::size_t v = 0; v < n; ++v) {
    VarRecord r;
    r.name = "v" + std::to_string(v);
    r.kind = RegionKind::global;
    idx.vars.push_back(r);
  }
  idx.blocks = std::move(blocks);
  return idx;
}

/// How often each cell of a 2-D grid (w x h) is covered by the boxes of variable `var`.
std::vector<int> cover(const std::vector<BlockRecord>& boxes, std::uint32_t var, std::uint64_t w, std::uint64_t h) {
  std::vector<int> c(w * h, 0);
  for (const BlockRecord& b : boxes)
    if (b.var == var)
      for (std::uint64_t x = b.start[0]; x < b.start[0] + b.count[0]; ++x)
        for (std::uint64_t y = b.start[1]; y < b.start[1] + b.count[1]; ++y) ++c[x * h + y];
  return c;
}

/// A random guillotine partition of [x0, x0 + w) x [y0, y0 + h) into boxes of variable `var`.
void cut(std::mt19937& rng, std::uint32_t var, std::uint64_t x0, std::uint64_t y0, std::uint64_t w, std::uint64_t h,
         std::vector<BlockRecord>& out) {
  if ((w == 1 && h == 1) || rng() % 4 == 0) {
    out.push_back(box(var, static_cast<std::uint32_t>(rng() % 64), {x0, y0}, {w, h}));
    return;
  }
  if (h == 1 || (w > 1 && rng() % 2 == 0)) {
    const std::uint64_t k = 1 + rng() % (w - 1);
    cut(rng, var, x0, y0, k, h, out);
    cut(rng, var, x0 + k, y0, w - k, h, out);
  } else {
    const std::uint64_t k = 1 + rng() % (h - 1);
    cut(rng, var, x0, y0, w, k, out);
    cut(rng, var, x0, y0 + k, w, h - k, out);
  }
}

}  // namespace

TEST(Boxes, AGroupsSlabsMergeIntoOneBoxWithTheLowestRank) {
  std::vector<BlockRecord> b;
  for (std::uint32_t r : {5u, 2u, 7u, 0u, 3u, 6u, 1u, 4u}) b.push_back(box(0, 8 + r, {100 * r}, {100}));
  merge_adjacent_boxes(b);
  ASSERT_EQ(b.size(), 1u);
  EXPECT_EQ(b[0].rank, 8u);
  EXPECT_EQ(b[0].start, Shape{0});
  EXPECT_EQ(b[0].count, Shape{800});
}

TEST(Boxes, ATiling3DMergesIntoItsBox) {
  std::vector<BlockRecord> b;
  std::uint32_t rank = 0;
  for (std::uint64_t x = 0; x < 2; ++x)
    for (std::uint64_t y = 0; y < 3; ++y)
      for (std::uint64_t z = 0; z < 4; ++z) b.push_back(box(0, rank++, {4 * x, 5 * y, 6 * z}, {4, 5, 6}));
  std::reverse(b.begin(), b.end());
  merge_adjacent_boxes(b);
  ASSERT_EQ(b.size(), 1u);
  EXPECT_EQ(b[0].start, (Shape{0, 0, 0}));
  EXPECT_EQ(b[0].count, (Shape{8, 15, 24}));
  EXPECT_EQ(b[0].rank, 0u);
}

TEST(Boxes, WhatDoesNotTileStaysApart) {
  std::vector<BlockRecord> b = {
      box(0, 0, {0, 0}, {2, 2}),  // an L: (0,0) 2x2, (2,0) 2x2, (0,2) 2x2
      box(0, 1, {2, 0}, {2, 2}),  box(0, 2, {0, 2}, {2, 2}),
      box(1, 3, {0, 4}, {2, 2}),   // another variable beside (0,2)'s face: not merged into it
      box(0, 4, {10, 0}, {2, 2}),  // a gap before it
      box(0, 5, {4, 0}, {0, 2}),   // empty, touching (2,0)'s face: kept as it is
      box(0, 6, {0, 4}, {2, 3}),   // meets (0,2)'s face but is wider in dimension 1 only: merges along 1
  };
  merge_adjacent_boxes(b);
  std::map<std::uint32_t, BlockRecord> by_rank;
  for (const BlockRecord& x : b) by_rank[x.rank] = x;
  ASSERT_EQ(b.size(), 5u);
  // (0,0)+(2,0) along dimension 0 first, then (0,2)+(0,4) along 1: the survivors in their first order.
  EXPECT_EQ(by_rank.at(0).count, (Shape{4, 2}));
  EXPECT_EQ(by_rank.at(2).count, (Shape{2, 5}));
  EXPECT_EQ(by_rank.at(3).var, 1u);
  EXPECT_EQ(by_rank.at(4).start, (Shape{10, 0}));
  EXPECT_EQ(by_rank.at(5).count, (Shape{0, 2}));
}

TEST(Boxes, CountsAtTheEdgeOfU64DoNotWrap) {
  const std::uint64_t top = ~0ull;
  // [top - 1, top) and [top, top + 1): the second's end is past 2^64, so nothing joins it; [0, 1) does not
  // follow it either (top + 1 wraps to 0).
  std::vector<BlockRecord> b = {box(0, 0, {top - 1}, {1}), box(0, 1, {top}, {1}), box(0, 2, {0}, {1})};
  merge_adjacent_boxes(b);
  EXPECT_EQ(b.size(), 3u);
  std::vector<BlockRecord> c = {box(0, 0, {top - 2}, {1}), box(0, 1, {top - 1}, {1})};  // ends at 2^64 - 1
  merge_adjacent_boxes(c);
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].count, Shape{2});
}

TEST(Boxes, RandomPartitionsKeepTheirUnionAndOverlapExactly) {
  std::mt19937 rng(20261129);
  for (int trial = 0; trial < 300; ++trial) {
    const std::uint64_t w = 1 + rng() % 12, h = 1 + rng() % 12;
    // Two groups: each a partition of its own rectangle, the second shifted by (dx, dy): they overlap
    // exactly when the rectangles do.
    std::vector<BlockRecord> g1, g2;
    cut(rng, 0, 0, 0, w, h, g1);
    const std::uint64_t dx = rng() % 14, dy = rng() % 14, w2 = 1 + rng() % 6, h2 = 1 + rng() % 6;
    cut(rng, 0, dx, dy, w2, h2, g2);
    std::shuffle(g1.begin(), g1.end(), rng);
    const std::size_t before = g1.size();
    const std::vector<int> was = cover(g1, 0, 32, 32);
    ASSERT_TRUE(check_disjoint_blocks(global_vars(1, g1)).ok());
    merge_adjacent_boxes(g1);
    EXPECT_EQ(cover(g1, 0, 32, 32), was) << "trial " << trial;  // the same cells, each once
    EXPECT_LE(g1.size(), before);
    EXPECT_TRUE(check_disjoint_blocks(global_vars(1, g1)).ok());
    // Whether the groups' blocks overlap is whether their merged boxes do.
    std::vector<BlockRecord> merged2 = g2;
    merge_adjacent_boxes(merged2);
    EXPECT_EQ(cover(merged2, 0, 32, 32), cover(g2, 0, 32, 32)) << "trial " << trial;
    std::vector<BlockRecord> all_merged = g1;
    all_merged.insert(all_merged.end(), merged2.begin(), merged2.end());
    const bool rects_overlap = dx < w && dy < h;
    EXPECT_EQ(check_disjoint_blocks(global_vars(1, all_merged)).ok(), !rects_overlap) << "trial " << trial;
  }
}

TEST(Boxes, AGroupThatTilesItsRectangleSendsOneBox) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 100; ++trial) {
    // A grid decomposition (every row of blocks cut at the same columns): always merges into one box.
    std::vector<BlockRecord> b;
    std::uint64_t x = 0;
    const int rows = 1 + static_cast<int>(rng() % 5), cols = 1 + static_cast<int>(rng() % 5);
    std::vector<std::uint64_t> widths(cols);
    for (auto& c : widths) c = 1 + rng() % 4;
    for (int i = 0; i < rows; ++i) {
      const std::uint64_t hgt = 1 + rng() % 4;
      std::uint64_t y = 0;
      for (int j = 0; j < cols; ++j) {
        b.push_back(box(0, static_cast<std::uint32_t>(i * cols + j), {x, y}, {hgt, widths[j]}));
        y += widths[j];
      }
      x += hgt;
    }
    std::shuffle(b.begin(), b.end(), rng);
    merge_adjacent_boxes(b);
    EXPECT_EQ(b.size(), 1u) << "trial " << trial;
  }
}
