// durable_every_ms (issue 15): a commit is visible at once and fsynced at most every N ms; the
// ticket's stats say which. (What a kill of the processes keeps: kill_during_flush_durable.)
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <regex>
#include <string>
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
    EXPECT_EQ(ckpt::test::newest_step(rt), k);
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

/// The [ts, ts + dur] of rank `pid`'s spans named `name` on the commit thread (tid 3) in trace.json.
std::vector<std::pair<double, double>> commit_spans(const std::string& trace, const std::string& name, int pid) {
  std::ifstream in(trace);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::regex ev("\\{\"name\":\"" + name + "\",\"cat\":\"ckpt\",\"ph\":\"X\",\"pid\":" + std::to_string(pid) +
                      ",\"tid\":3,\"ts\":([0-9.]+),\"dur\":([0-9.]+)");
  std::vector<std::pair<double, double>> out;
  for (auto it = std::sregex_iterator(text.begin(), text.end(), ev); it != std::sregex_iterator(); ++it) {
    const double ts = std::stod((*it)[1].str());
    out.emplace_back(ts, ts + std::stod((*it)[2].str()));
  }
  return out;
}

TEST(Durable, SyncedAfterThePeriodWithoutAnotherCommit) {
  // The last checkpoint of a run (or the last before a long computation): no later commit carries
  // the periodic sync, yet it must be synced about durable_every_ms after it, not at close().
  Options o = Options::defaults();
  o.dir = scratch_dir();
  o.trace = scratch_dir("/trace");
  o.durable_every_ms = 200;
  {
    Runtime rt(MPI_COMM_WORLD, o);
    ASSERT_TRUE(rt.status().ok()) << rt.status().to_string();
    std::vector<double> v(5000, 1.0 + world_rank());
    ASSERT_TRUE(rt.protect("v", v.data(), DType::f64, {v.size()}).ok());
    Ticket t = rt.checkpoint(1);  // well within the first period: the commit itself does not sync
    ASSERT_TRUE(t.wait().ok());
    EXPECT_FALSE(t.stats().synced);
    ::usleep(800 * 1000);  // "compute"
    ASSERT_TRUE(rt.close().ok());
  }
  if (world_rank() != 0) return;
  const std::string trace = o.trace + "/trace.json";
  for (int pid = 0; pid < ckpt::test::world_size(); ++pid) {
    const auto commits = commit_spans(trace, "ckpt:commit", pid);
    ASSERT_EQ(commits.size(), 1u) << "rank " << pid << ": one commit in " << trace;
    const auto syncs = commit_spans(trace, "ckpt:fsync", pid);
    ASSERT_FALSE(syncs.empty()) << "rank " << pid << ": no sync after the commit before close()";
    const double after_ms = (syncs.front().first - commits.front().second) / 1e3;
    EXPECT_GT(after_ms, 100.0) << "rank " << pid << ": not before the period is over";
    EXPECT_LT(after_ms, 600.0) << "rank " << pid << ": synced " << after_ms << " ms after the commit (period 200 ms)";
  }
}

/// The steps of the committed checkpoint directories in `dir` (ckpt.<step>), in increasing order.
std::vector<long> committed_dirs(const std::string& dir) {
  std::vector<long> steps;
  const std::regex name("ckpt\\.([0-9]+)");
  for (auto& e : std::filesystem::directory_iterator(dir)) {
    std::smatch m;
    const std::string n = e.path().filename().string();
    if (std::regex_match(n, m, name)) steps.push_back(std::stol(m[1].str()));
  }
  std::sort(steps.begin(), steps.end());
  return steps;
}

/// Takes checkpoints `steps` with options `o`, `pause_ms` apart, waiting for each.
void checkpoints(const Options& o, std::vector<int> steps, int pause_ms) {
  Runtime rt(MPI_COMM_WORLD, o);
  ASSERT_TRUE(rt.status().ok()) << rt.status().to_string();
  std::vector<double> v(5000, 1.0 + world_rank());
  ASSERT_TRUE(rt.protect("v", v.data(), DType::f64, {v.size()}).ok());
  for (int step : steps) {
    ::usleep(static_cast<useconds_t>(pause_ms) * 1000);
    ASSERT_TRUE(rt.checkpoint(step).wait().ok());
  }
  if (world_rank() == 0 && o.durable_every_ms > 1000) {
    // Still inside the first period: nothing this run committed is synced. keep: 1 must not have
    // removed the last checkpoint on disk (step 1, synced by the first run's commit) for step 4,
    // which a power cut now would lose.
    EXPECT_EQ(committed_dirs(o.dir), (std::vector<long>{1, 4}));
  }
  ASSERT_TRUE(rt.close().ok());
}

TEST(Durable, RetentionKeepsTheLastSyncedCheckpoint) {
  Options o = Options::defaults();
  o.dir = scratch_dir();
  o.keep = 1;
  checkpoints(o, {1}, 0);  // fsynced by its commit
  o.durable_every_ms = 3600000;
  checkpoints(o, {2, 3, 4}, 0);
  // Synced from the first commit on (5 ms apart, period 1 ms): retention keeps one step again.
  o.durable_every_ms = 1;
  checkpoints(o, {5, 6, 7}, 5);
  MPI_Barrier(MPI_COMM_WORLD);
  if (world_rank() == 0) EXPECT_EQ(committed_dirs(o.dir), (std::vector<long>{7}));
}

// Incremental checkpoints with durable_every_ms (issue 36): the last synced checkpoint - step 2, left by
// an earlier run - stays restorable while the newer ones are in the page cache only: retention keeps it
// and the step it refers to (one syncfs made both durable). Steps 3..5 of the second run, unsynced,
// keep theirs (5 refers to 3 and 4).
TEST(Durable, IncrementalKeepsWhatTheLastSyncedCheckpointRefersTo) {
  Options o = Options::defaults();
  o.dir = scratch_dir();
  o.keep = 1;
  o.index_format = 2;
  o.incremental = true;
  o.incremental_piece_bytes = 64 << 10;
  std::vector<double> v(1 << 17);  // 16 pieces of 64 KiB
  auto at_step = [&](int step) {   // piece (step % 16) changes at every step
    std::vector<double> out(v.size());
    for (std::size_t i = 0; i < out.size(); ++i) {
      const std::size_t piece = i / 8192;
      int last = 0;  // the last step up to `step` that changed this piece
      for (int s = 1; s <= step; ++s)
        if (static_cast<std::size_t>(s % 16) == piece) last = s;
      out[i] = 1000.0 * last + static_cast<double>(i) + 0.5 * world_rank();
    }
    return out;
  };
  auto run_steps = [&](const Options& opts, std::vector<int> steps) {
    Runtime rt(MPI_COMM_WORLD, opts);
    ASSERT_TRUE(rt.status().ok()) << rt.status().to_string();
    ASSERT_TRUE(rt.protect("v", v.data(), DType::f64, {v.size()}).ok());
    for (int step : steps) {
      const std::vector<double> want = at_step(step);
      std::copy(want.begin(), want.end(), v.begin());
      ASSERT_TRUE(rt.checkpoint(step).wait().ok());
    }
    if (opts.durable_every_ms > 1000) {
      MPI_Barrier(MPI_COMM_WORLD);
      if (world_rank() == 0) EXPECT_EQ(committed_dirs(opts.dir), (std::vector<long>{1, 2, 3, 4, 5}));
      std::fill(v.begin(), v.end(), -1.0);
      const Status st = rt.restart(2);  // what a power cut now would leave
      EXPECT_TRUE(st.ok()) << st.to_string();
      EXPECT_TRUE(v == at_step(2));
    }
    ASSERT_TRUE(rt.close().ok());
  };
  ASSERT_NO_FATAL_FAILURE(run_steps(o, {1, 2}));  // every commit fsynced: 2 refers to 1
  o.durable_every_ms = 3600000;
  ASSERT_NO_FATAL_FAILURE(run_steps(o, {3, 4, 5}));
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
