// The adversarial suite, a root's entries through the Runtime: a FIFO in a checkpoint, 19-digit steps,
// retention that counts only complete checkpoints, the recovery of a dead re-commit, roll-back. Run at
// 4 ranks; see test_api.cpp for the conventions and docs/reliability.md for the table.
#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <limits>
#include <vector>

#include "adv_util.hpp"

namespace ckpt::adv {
namespace {

// Promise (store, issue 16 (d)): a FIFO named `index` or `data.N` in a checkpoint never blocks
// latest() or restart(): they skip or fall back past it.
TEST_F(Adversarial, FifoIndexOrDataFileDoesNotHang) {
  const std::string dir = scratch_dir();
  Options o = opts(dir);
  o.keep = 5;
  Runtime rt(MPI_COMM_WORLD, o);
  double x = 0;
  ASSERT_NO_FATAL_FAILURE(commit_steps(rt, x, {1, 2}));
  if (world_rank() == 0) {
    ::mkdir((dir + "/ckpt.5").c_str(), 0755);
    ::mkfifo((dir + "/ckpt.5/index").c_str(), 0644);
    // ckpt.2 keeps its index, its data files become FIFOs.
    auto bytes = detail::read_file(dir + "/ckpt.2/index", 1u << 30);
    ASSERT_TRUE(bytes.ok());
    auto idx = detail::decode_index(bytes->data(), bytes->size());
    ASSERT_TRUE(idx.ok());
    for (auto& f : idx->files) {
      ::unlink((dir + "/ckpt.2/" + f.name).c_str());
      ::mkfifo((dir + "/ckpt.2/" + f.name).c_str(), 0644);
    }
  }
  MPI_Barrier(MPI_COMM_WORLD);
  EXPECT_NE(ckpt::test::newest_step(rt), 5);
  x = 0;
  auto r = rt.restart();
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r.value(), 1);
  EXPECT_EQ(x, 1);
}

// Promise (store, issue 16 (b)): a step of 19 digits (>= 10^18) is either refused at checkpoint() or
// seen by latest() and restart() - never committed "ok" and then invisible.
TEST_F(Adversarial, NineteenDigitStepIsVisible) {
  const std::string dir = scratch_dir();
  Runtime rt(MPI_COMM_WORLD, opts(dir));
  double x = 1;
  ASSERT_TRUE(rt.protect_scalar("x", &x).ok());
  ASSERT_TRUE(rt.checkpoint(7).wait().ok());
  for (std::int64_t step : {std::int64_t{1000000000000000001}, std::numeric_limits<std::int64_t>::max()}) {
    x = static_cast<double>(step % 1000);
    Status s = rt.checkpoint(step).wait();
    if (!s.ok()) {
      EXPECT_EQ(s.code(), Code::invalid_argument) << s.to_string();
      continue;
    }
    EXPECT_EQ(ckpt::test::newest_step(rt), step);
    x = -1;
    auto r = rt.restart();
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    EXPECT_EQ(r.value(), step);
    EXPECT_EQ(x, static_cast<double>(step % 1000));
  }
}

// Promise (store, issue 16 (c)): retention counts only complete checkpoints: an incomplete ckpt.100
// (no index) does not push committed ones out, and keep=2 leaves the two newest complete ones.
TEST_F(Adversarial, RetentionCountsOnlyCompleteCheckpoints) {
  const std::string dir = scratch_dir();
  if (world_rank() == 0) ::mkdir((dir + "/ckpt.100").c_str(), 0755);
  MPI_Barrier(MPI_COMM_WORLD);
  Options o = opts(dir);
  o.keep = 2;
  Runtime rt(MPI_COMM_WORLD, o);
  double x = 0;
  ASSERT_NO_FATAL_FAILURE(commit_steps(rt, x, {1, 2, 3}));
  if (world_rank() == 0) {
    EXPECT_TRUE(exists(dir + "/ckpt.3/index"));
    EXPECT_TRUE(exists(dir + "/ckpt.2/index"));
    EXPECT_FALSE(exists(dir + "/ckpt.1"));
  }
  EXPECT_EQ(ckpt::test::newest_step(rt), 3);
}

// Promise (store, issue 16 (a)): a run that died between ckpt.N -> ckpt.N.old and ckpt.N.tmp ->
// ckpt.N (re-commit of step N) left only ckpt.N.old and ckpt.N.tmp: the next start-up recovers step
// N from ckpt.N.old instead of deleting it as stale.
TEST_F(Adversarial, StartUpRecoversAnOldLeftByADeadRecommit) {
  const std::string dir = scratch_dir();
  {
    Options o = opts(dir);
    o.keep = 1;
    Runtime rt(MPI_COMM_WORLD, o);
    double x = 3;
    ASSERT_TRUE(rt.protect_scalar("x", &x).ok());
    ASSERT_TRUE(rt.checkpoint(3).wait().ok());
  }
  if (world_rank() == 0) {
    ASSERT_EQ(::rename((dir + "/ckpt.3").c_str(), (dir + "/ckpt.3.old").c_str()), 0);
    ::mkdir((dir + "/ckpt.3.tmp").c_str(), 0755);  // the re-commit's, never finished
  }
  MPI_Barrier(MPI_COMM_WORLD);
  Options o = opts(dir);
  o.keep = 1;
  Runtime rt(MPI_COMM_WORLD, o);
  ASSERT_TRUE(rt.status().ok()) << rt.status().to_string();
  double x = 0;
  ASSERT_TRUE(rt.protect_scalar("x", &x).ok());
  EXPECT_EQ(ckpt::test::newest_step(rt), 3);
  auto r = rt.restart();
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(x, 3);
}

// Promise (store, roll-back): a run that restarts from step 10 while steps 11..20 of the abandoned
// timeline exist, and commits 11 and 12 with keep=2, is found at 12 after a crash: latest() and
// restart() never take the abandoned step 20 for the newest state, and retention never removes the
// new timeline's checkpoints to keep the abandoned ones.
TEST_F(Adversarial, RollBackDoesNotMixTimelines) {
  const std::string dir = scratch_dir();
  Options o = opts(dir);
  o.keep = 100;
  double x = 0;
  {
    Runtime rt(MPI_COMM_WORLD, o);
    ASSERT_NO_FATAL_FAILURE(commit_steps(rt, x, {10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20}));  // x = step
  }
  o.keep = 2;
  {
    Runtime rt(MPI_COMM_WORLD, o);
    ASSERT_TRUE(rt.protect_scalar("x", &x).ok());
    x = -1;
    auto r = rt.restart(10);
    ASSERT_TRUE(r.ok()) << r.to_string();
    EXPECT_EQ(x, 10);
    EXPECT_EQ(ckpt::test::newest_step(rt), 20);  // nothing committed yet: the old timeline stands
    for (std::int64_t s : {11, 12}) {
      x = 1000 + s;  // the new timeline's values
      ASSERT_TRUE(rt.checkpoint(s).wait().ok());
    }
    EXPECT_EQ(ckpt::test::newest_step(rt), 12);
  }  // "crash": a new run looks at the directory
  Runtime rt(MPI_COMM_WORLD, o);
  ASSERT_TRUE(rt.protect_scalar("x", &x).ok());
  EXPECT_EQ(ckpt::test::newest_step(rt), 12);
  x = -1;
  auto r = rt.restart();
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r.value(), 12);
  EXPECT_EQ(x, 1012);
  if (world_rank() == 0) {
    EXPECT_TRUE(exists(dir + "/ckpt.11/index"));  // keep=2 kept the new timeline's two
    EXPECT_FALSE(exists(dir + "/ckpt.20"));
    EXPECT_TRUE(exists(dir + "/ckpt.20.abandoned"));   // kept aside until the new timeline reaches 20
    EXPECT_FALSE(exists(dir + "/ckpt.12.abandoned"));  // reached: removed by retention
  }
  // Reaching step 20 again removes the abandoned copies up to it; the new 20 is this timeline's.
  for (std::int64_t s : {13, 20}) {
    x = 1000 + s;
    ASSERT_TRUE(rt.checkpoint(s).wait().ok());
  }
  if (world_rank() == 0) {
    EXPECT_FALSE(exists(dir + "/ckpt.20.abandoned"));
    EXPECT_FALSE(exists(dir + "/ckpt.15.abandoned"));
  }
  x = -1;
  ASSERT_TRUE(rt.restart().ok());
  EXPECT_EQ(x, 1020);
}

}  // namespace
}  // namespace ckpt::adv
