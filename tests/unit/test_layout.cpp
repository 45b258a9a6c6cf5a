// Region names and the stream layout.
#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "base/layout.hpp"

using namespace ckpt;
using namespace ckpt::detail;

TEST(Layout, Names) {
  EXPECT_TRUE(check_name("walkers/pos").ok());
  EXPECT_TRUE(check_name("a-b_c.d/E9").ok());
  EXPECT_FALSE(check_name("").ok());
  EXPECT_FALSE(check_name("/abs").ok());
  EXPECT_FALSE(check_name("a/../b").ok());
  EXPECT_FALSE(check_name("..").ok());
  EXPECT_FALSE(check_name("a//b").ok());
  EXPECT_FALSE(check_name("a/").ok());
  EXPECT_FALSE(check_name("sp ace").ok());
  EXPECT_FALSE(check_name(std::string(256, 'a')).ok());
}

TEST(Layout, SmallBlocksPackLargeBlocksAlign) {
  std::vector<Region> rs(3);
  rs[0].name = "s";
  rs[0].dtype = DType::i32;
  rs[0].kind = RegionKind::scalar;  // 4 bytes
  rs[1].name = "big";
  rs[1].dtype = DType::f64;
  rs[1].count = {10000};  // 80000 bytes
  rs[2].name = "t";
  rs[2].dtype = DType::f64;
  rs[2].kind = RegionKind::scalar;  // 8 bytes
  auto p = plan_stream(rs, 4096);
  ASSERT_EQ(p.blocks.size(), 3u);
  EXPECT_EQ(p.blocks[0].offset, 0u);
  EXPECT_EQ(p.blocks[1].offset, 4096u);
  EXPECT_EQ(p.blocks[2].offset, 4096u + 80000u);  // already 8-aligned
  EXPECT_EQ(p.payload, 4u + 80000u + 8u);
  EXPECT_EQ(p.bytes, 4096u + 80000u + 8u);
}

TEST(Layout, OnlyScatteredRegionsHaveMemoryParts) {
  // A region at one pointer is its own part: planning it builds none (checkpoint() plans every region
  // on the application's blocked path). A scattered region's parts are its pieces with rows, in order.
  double a[8] = {}, b[12] = {};
  std::vector<Region> rs(2);
  rs[0].name = "plain";
  rs[0].ptr = a;
  rs[0].dtype = DType::f64;
  rs[0].count = {2, 4};
  rs[1].name = "scattered";
  rs[1].dtype = DType::f64;
  rs[1].kind = RegionKind::joined;
  rs[1].count = {5, 4};  // rows 0-1 in `a`, none in the empty piece, rows 2-4 in `b`
  rs[1].pieces = std::make_shared<const std::vector<PieceRef>>(
      std::vector<PieceRef>{PieceRef{a, 2}, PieceRef{nullptr, 0}, PieceRef{b, 3}});
  const StreamPlan p = plan_stream(rs, 4096);
  ASSERT_EQ(p.blocks.size(), 2u);
  EXPECT_TRUE(p.blocks[0].parts.empty());
  const std::vector<MemoryPart>& parts = p.blocks[1].parts;
  ASSERT_EQ(parts.size(), 2u);
  EXPECT_EQ(parts[0].ptr, a);
  EXPECT_EQ(parts[0].count, (Shape{2, 4}));
  EXPECT_EQ(parts[1].ptr, b);
  EXPECT_EQ(parts[1].first_row, 2u);
  EXPECT_EQ(parts[1].offset, 2u * 4 * sizeof(double));
  EXPECT_EQ(parts[1].bytes, 3u * 4 * sizeof(double));
  // memory_parts itself still answers for any region: one part, the region.
  const std::vector<MemoryPart> whole = memory_parts(rs[0]);
  ASSERT_EQ(whole.size(), 1u);
  EXPECT_EQ(whole[0].ptr, a);
  EXPECT_EQ(whole[0].bytes, sizeof a);
}
