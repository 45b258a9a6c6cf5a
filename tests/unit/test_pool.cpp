// The staging pool: fixed budget, blocking acquire, growth only by reserve().
#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

#include "runtime/src/pool.hpp"

using namespace ckpt::detail;

TEST(Pool, ReserveAcquireRelease) {
  auto dev = make_host_device();
  StagingPool pool(*dev, 4096);
  ASSERT_TRUE(pool.reserve(3).ok());
  EXPECT_EQ(pool.chunks(), 3u);
  EXPECT_EQ(pool.bytes(), 3u * 4096);
  Chunk* a = pool.acquire();
  Chunk* b = pool.acquire();
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  EXPECT_NE(a->data, b->data);
  EXPECT_EQ(pool.free_chunks(), 1u);
  a->data[0] = 1;
  a->data[4095] = 2;  // the whole chunk is usable
  pool.release(a);
  pool.release(b);
  EXPECT_EQ(pool.free_chunks(), 3u);
  EXPECT_EQ(pool.high_water(), 2u);
  ASSERT_TRUE(pool.reserve(2).ok());  // never shrinks
  EXPECT_EQ(pool.chunks(), 3u);
}

TEST(Pool, AcquireBlocksUntilRelease) {
  auto dev = make_host_device();
  StagingPool pool(*dev, 4096);
  ASSERT_TRUE(pool.reserve(1).ok());
  Chunk* a = pool.acquire();
  std::atomic<bool> got{false};
  std::thread t([&] {
    Chunk* b = pool.acquire();
    got = true;
    pool.release(b);
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_FALSE(got.load()) << "acquire() must wait while the pool is empty";
  pool.release(a);
  t.join();
  EXPECT_TRUE(got.load());
  EXPECT_EQ(pool.high_water(), 1u);
}

TEST(Pool, ShutdownReleasesWaiters) {
  auto dev = make_host_device();
  StagingPool pool(*dev, 4096);
  ASSERT_TRUE(pool.reserve(1).ok());
  Chunk* a = pool.acquire();
  Chunk* seen = a;
  std::thread t([&] { seen = pool.acquire(); });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  pool.shutdown();
  t.join();
  EXPECT_EQ(seen, nullptr);
  pool.release(a);
}

TEST(Pool, PiecesOfAtMostOneGiBHoldWholeChunks) {
  constexpr std::size_t MiB = 1 << 20;
  EXPECT_EQ(staging_pieces(0, 16 * MiB), std::vector<std::size_t>{});
  EXPECT_EQ(staging_pieces(10, 16 * MiB), std::vector<std::size_t>{10});
  // 16 GiB of 16 MiB chunks: 16 pieces of 64 chunks, none above 1 GiB.
  auto p = staging_pieces(1024, 16 * MiB);
  ASSERT_EQ(p.size(), 16u);
  for (auto n : p) EXPECT_EQ(n, 64u);
  // A remainder, and a chunk larger than a piece (one chunk per piece).
  EXPECT_EQ(staging_pieces(130, 16 * MiB), (std::vector<std::size_t>{64, 64, 2}));
  EXPECT_EQ(staging_pieces(3, 3u << 29), (std::vector<std::size_t>{1, 1, 1}));
}

TEST(Pool, AutoCapIsANodeShareNotPerRank) {
  constexpr std::uint64_t GiB = 1ull << 30, chunk = 16 << 20;
  // 16 GiB streams, 512 GiB node, 25 %: one rank may take 128 GiB; 8 ranks on the node 16 GiB each.
  EXPECT_EQ(auto_pool_chunks(16 * GiB, chunk, 1, 0, 512 * GiB, 0.25, 1), 1024u);
  EXPECT_EQ(auto_pool_chunks(16 * GiB, chunk, 2, 0, 512 * GiB, 0.25, 8), 1024u);  // capped: 16 GiB
  EXPECT_EQ(auto_pool_chunks(64 * GiB, chunk, 1, 0, 512 * GiB, 0.25, 8), 1024u);
  EXPECT_EQ(auto_pool_chunks(1, chunk, 1, 0, 512 * GiB, 0.25, 1), 2u);  // at least two chunks
  EXPECT_EQ(auto_pool_chunks(1, chunk, 1, 0, 1 * GiB, 0.001, 64), 2u);  // even when the share is tiny
  // Growth by half again over what is there (O(log) allocations for a growing application), capped.
  EXPECT_EQ(auto_pool_chunks(100 * chunk, chunk, 1, 10, 512 * GiB, 0.25, 1), 150u);
  EXPECT_EQ(auto_pool_chunks(100 * chunk, chunk, 1, 10, 512 * GiB, 0.25, 400), 20u);  // 128 GiB / 400 ranks
}

TEST(Pool, RetiredChunksAreNeverHandedOutAgain) {
  auto dev = make_host_device();
  StagingPool pool(*dev, 4096);
  ASSERT_TRUE(pool.reserve(2).ok());
  Chunk* a = pool.acquire();
  pool.retire(a);  // a copy into it could not be confirmed landed
  EXPECT_EQ(pool.chunks(), 1u);
  EXPECT_EQ(pool.free_chunks(), 1u);
  Chunk* b = pool.acquire();
  EXPECT_NE(b, a);
  pool.release(b);
  ASSERT_TRUE(pool.reserve(2).ok());  // the retired chunk is replaced, never handed out again
  EXPECT_EQ(pool.chunks(), 2u);
  Chunk* c = pool.acquire();
  Chunk* d = pool.acquire();
  EXPECT_NE(c, a);
  EXPECT_NE(d, a);
  pool.release(c);
  pool.release(d);
}
