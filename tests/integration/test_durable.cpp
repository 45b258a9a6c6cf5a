// durable_every_ms (issue 15): a commit is visible at once and fsynced at most every N ms; the
// ticket's stats say which. (What a kill of the processes keeps: kill_during_flush_durable.)
#include <gtest/gtest.h>
#include <unistd.h>

#include <vector>

#include "ckpt/ckpt.hpp"
#include "test_util.hpp"

using namespace ckpt;
using ckpt::test::scratch_dir;
using ckpt::test::world_rank;

namespace {

/// Takes `n` checkpoints `pause_ms` apart, waiting for each; their `synced` flags. The pause comes
/// before each checkpoint: the first period starts when the Runtime is made, and protect() of a small
/// state takes microseconds now that its staging is small (it used to touch 32 MiB).
std::vector<bool> run(const Options& o, int n, int pause_ms) {
  Runtime rt(MPI_COMM_WORLD, o);
  EXPECT_TRUE(rt.status().ok()) << rt.status().to_string();
  std::vector<double> v(5000, 1.0 + world_rank());
  EXPECT_TRUE(rt.protect("v", v.data(), DType::f64, {v.size()}).ok());
  std::vector<bool> synced;
  for (int k = 0; k < n; ++k) {
    v[0] = k;
    ::usleep(static_cast<useconds_t>(pause_ms) * 1000);
    Ticket t = rt.checkpoint(k);
    EXPECT_TRUE(t.wait().ok()) << t.wait().to_string();
    synced.push_back(t.stats().synced);
    // Visible at once, whatever the durability policy: the next Runtime (or a restart) finds it.
    auto latest = rt.latest();
    EXPECT_TRUE(latest.has_value() && *latest == k);
  }
  v[0] = -1;
  auto r = rt.restart();
  EXPECT_TRUE(r.ok() && r.value() == n - 1 && v[0] == n - 1);
  EXPECT_TRUE(rt.close().ok());
  return synced;
}

}  // namespace

TEST(Durable, EveryCommitFsyncedByDefault) {
  Options o = Options::defaults();
  o.dir = scratch_dir();
  EXPECT_EQ(o.durable_every_ms, 0);
  for (bool s : run(o, 3, 0)) EXPECT_TRUE(s);
}

TEST(Durable, VisibleAtOnceSyncedLater) {
  Options o = Options::defaults();
  o.dir = scratch_dir();
  o.durable_every_ms = 3600000;  // an hour: no periodic sync during the test
  for (bool s : run(o, 3, 0)) EXPECT_FALSE(s);
}

TEST(Durable, SyncedWhenThePeriodIsOver) {
  Options o = Options::defaults();
  o.dir = scratch_dir();
  o.durable_every_ms = 1;
  for (bool s : run(o, 3, 5)) EXPECT_TRUE(s) << "5 ms apart with a 1 ms period: every commit syncs";
}

TEST(Durable, NeverWithoutFsync) {
  Options o = Options::defaults();
  o.dir = scratch_dir();
  o.fsync = false;
  o.durable_every_ms = 1;
  for (bool s : run(o, 2, 2)) EXPECT_FALSE(s);
}

TEST(Durable, OptionRange) {
  Options o = Options::defaults();
  o.durable_every_ms = -1;
  EXPECT_EQ(o.validate().code(), Code::invalid_argument);
  o.durable_every_ms = 86400001;
  EXPECT_EQ(o.validate().code(), Code::invalid_argument);
}
