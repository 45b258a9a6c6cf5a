// The staging pool: fixed budget, blocking acquire, growth only by reserve().
#include <gtest/gtest.h>

#include <atomic>
#include <thread>

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
