// Region names and the stream layout.
#include <gtest/gtest.h>

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
