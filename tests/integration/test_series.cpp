// layout: series (issue 15) through the Runtime at 4 ranks: every checkpoint appended to the segment
// files, segments rolled by count and by the fullest rank's bytes (every rank together), retention by
// whole segments, restart of the newest and of older steps bit for bit, a roll-back by a later run,
// on_busy coalesce, durable_every_ms, funneled MPI, and the roots and options a series refuses.
#include <dirent.h>
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "base/store.hpp"
#include "ckpt/ckpt.hpp"
#include "test_util.hpp"

using namespace ckpt;
using ckpt::test::all_true;
using ckpt::test::scratch_dir;
using ckpt::test::world_rank;
using ckpt::test::world_size;

namespace {

Options series_opts(const std::string& dir) {
  Options o = Options::defaults();
  o.dir = dir;
  o.layout = Options::Layout::series;
  return o;
}

/// Rank r's state at `step`: r + 1 thousand doubles (ranks differ in size), a step-dependent pattern.
std::vector<double> state(std::int64_t step, int rank) {
  std::vector<double> v(static_cast<std::size_t>(rank + 1) * 1000);
  for (std::size_t i = 0; i < v.size(); ++i)
    v[i] = static_cast<double>(step) * 1e6 + rank * 1e4 + static_cast<double>(i);
  return v;
}

/// Writes state(step, rank) into `v` in place (the registered pointer stays valid: assigning a new
/// vector would free the memory the Runtime captures from).
void set_state(std::vector<double>& v, std::int64_t step, int rank) {
  const auto s = state(step, rank);
  std::copy(s.begin(), s.end(), v.begin());
}

/// The entries of `dir` (no . and ..).
std::set<std::string> entries(const std::string& dir) {
  std::set<std::string> out;
  if (DIR* d = ::opendir(dir.c_str())) {
    while (dirent* e = ::readdir(d))
      if (std::string(e->d_name) != "." && std::string(e->d_name) != "..") out.insert(e->d_name);
    ::closedir(d);
  }
  return out;
}

/// Checkpoints steps [from, to] of `v` (state(step, rank)) and waits for every one.
void run_steps(Runtime& rt, std::vector<double>& v, std::int64_t from, std::int64_t to) {
  for (std::int64_t s = from; s <= to; ++s) {
    set_state(v, s, world_rank());
    Status st = rt.checkpoint(s).wait();
    ASSERT_TRUE(st.ok() || st.code() == Code::superseded) << "step " << s << ": " << st.to_string();
  }
  ASSERT_TRUE(rt.wait_all().ok());
}

/// restart(step) restores state(step, rank) bit for bit.
bool restores(Runtime& rt, std::vector<double>& v, std::int64_t step) {
  std::fill(v.begin(), v.end(), -1.0);
  Status s = rt.restart(step);
  EXPECT_TRUE(s.ok()) << "restart(" << step << "): " << s.to_string();
  const auto want = state(step, world_rank());
  for (std::size_t i = 0; i < v.size(); ++i)
    if (v[i] != want[i]) {
      ADD_FAILURE() << "restart(" << step << "): element " << i << " is " << v[i] << ", stored " << want[i];
      break;
    }
  return all_true(s.ok() && v == want);
}

}  // namespace

TEST(Series, SegmentsByCountRetentionAndRestartOfEveryKeptStep) {
  const std::string dir = scratch_dir();
  const int rank = world_rank();
  std::vector<double> v = state(0, rank);
  {
    Options o = series_opts(dir);
    o.segment_steps = 3;
    o.keep = 4;
    Runtime rt(MPI_COMM_WORLD, o);
    ASSERT_TRUE(rt.status().ok()) << rt.status().to_string();
    ASSERT_TRUE(rt.protect("v", v.data(), DType::f64, Dims{v.size()}).ok());
    run_steps(rt, v, 1, 10);
    // 10 checkpoints, 3 per segment: series.0 {1,2,3} .. series.3 {10}. keep 4 = 10, 9, 8, 7:
    // series.0 and series.1 {4,5,6} are gone, series.2 {7,8,9} and series.3 stay.
    if (rank == 0) {
      // (.timeline: where each run began its timeline, format.md "Node-local level")
      EXPECT_EQ(entries(dir), (std::set<std::string>{".lock", ".timeline", "series.2", "series.3"}));
      EXPECT_EQ(entries(dir + "/series.2"), (std::set<std::string>{"steps", "data.0", "data.1", "data.2", "data.3"}));
    }
    EXPECT_EQ(ckpt::test::newest_step(rt), 10);
    EXPECT_TRUE(restores(rt, v, 10));
    EXPECT_TRUE(restores(rt, v, 7));  // an older step in an older segment
    EXPECT_EQ(rt.restart(5).code(), Code::not_found);
    ASSERT_TRUE(rt.close().ok());
  }

  // A later run continues the series in a segment of its own, and its steps are read like the others.
  {
    Options o = series_opts(dir);
    o.keep = 3;  // 12, 11 and 10: series.3 stays, series.2 goes
    Runtime rt(MPI_COMM_WORLD, o);
    ASSERT_TRUE(rt.status().ok()) << rt.status().to_string();
    ASSERT_TRUE(rt.protect("v", v.data(), DType::f64, Dims{v.size()}).ok());
    EXPECT_TRUE(restores(rt, v, 10));
    run_steps(rt, v, 11, 12);
    if (rank == 0) EXPECT_EQ(entries(dir), (std::set<std::string>{".lock", ".timeline", "series.3", "series.4"}));
    EXPECT_EQ(ckpt::test::newest_step(rt), 12);
    EXPECT_TRUE(restores(rt, v, 10));
    EXPECT_EQ(rt.restart(9).code(), Code::not_found);
    ASSERT_TRUE(rt.close().ok());
  }
}

TEST(Series, EveryRankRollsWhenTheFullestRanksFileIsFull) {
  const std::string dir = scratch_dir();
  const int rank = world_rank();
  std::vector<double> v = state(0, rank);
  Options o = series_opts(dir);
  // Rank 3's stream is 32 KB, rank 0's 8 KB: 64K fills rank 3's file after one checkpoint only.
  o.segment_bytes = 64 << 10;
  o.keep = 1000;
  Runtime rt(MPI_COMM_WORLD, o);
  ASSERT_TRUE(rt.status().ok()) << rt.status().to_string();
  ASSERT_TRUE(rt.protect("v", v.data(), DType::f64, Dims{v.size()}).ok());
  run_steps(rt, v, 1, 6);
  if (rank == 0) {
    // Every step's files are in one segment, all four of them (no rank rolled alone).
    auto store = detail::open_store(dir);
    const auto steps = store->committed_steps();
    ASSERT_EQ(steps.size(), 6u);
    std::set<std::string> segs;
    for (auto s : steps) {
      auto idx = store->load_index(s);
      ASSERT_TRUE(idx.ok()) << idx.status().to_string();
      const std::string seg = store->checkpoint_dir(s);
      segs.insert(seg);
      for (auto& f : idx->files) EXPECT_EQ(entries(seg).count(f.name), 1u) << seg << "/" << f.name;
    }
    EXPECT_GE(segs.size(), 3u) << "64K segments of 32K streams: at most two steps per segment";
  }
  for (std::int64_t s : {1, 4, 6}) EXPECT_TRUE(restores(rt, v, s));
  ASSERT_TRUE(rt.close().ok());
}

TEST(Series, RollBackByALaterRunHidesTheNewerStepsForGood) {
  const std::string dir = scratch_dir();
  const int rank = world_rank();
  std::vector<double> v = state(0, rank);
  {
    Options o = series_opts(dir);
    o.keep = 100;
    Runtime rt(MPI_COMM_WORLD, o);
    ASSERT_TRUE(rt.protect("v", v.data(), DType::f64, Dims{v.size()}).ok());
    run_steps(rt, v, 1, 8);
    ASSERT_TRUE(rt.close().ok());
  }
  {
    Options o = series_opts(dir);
    o.keep = 100;
    Runtime rt(MPI_COMM_WORLD, o);
    ASSERT_TRUE(rt.protect("v", v.data(), DType::f64, Dims{v.size()}).ok());
    ASSERT_TRUE(restores(rt, v, 4));
    // The new timeline differs from the old one at every step.
    for (std::int64_t s = 5; s <= 6; ++s) {
      set_state(v, s + 100, rank);
      ASSERT_TRUE(rt.checkpoint(s).wait().ok());
    }
    EXPECT_EQ(ckpt::test::newest_step(rt), 6);
    std::fill(v.begin(), v.end(), 0.0);
    ASSERT_TRUE(rt.restart(6).ok());
    EXPECT_TRUE(all_true(v == state(106, rank)));
    EXPECT_EQ(rt.restart(8).code(), Code::not_found) << "step 8 of the rolled-back timeline";
    ASSERT_TRUE(rt.close().ok());
  }
  // A reader sees the same: 1..6, 5 and 6 of the new timeline.
  if (rank == 0) {
    auto store = detail::open_store(dir);
    EXPECT_EQ(store->committed_steps(), (std::vector<std::int64_t>{6, 5, 4, 3, 2, 1}));
  }
}

TEST(Series, CoalesceDurableEveryAndFunneled) {
  const int rank = world_rank();
  std::vector<double> v = state(0, rank);
  struct Case {
    const char* name;
    Options::OnBusy on_busy;
    int durable_every_ms;
    Options::MpiThreads threads;
  };
  for (const Case& c : {Case{"coalesce", Options::OnBusy::coalesce, 0, Options::MpiThreads::multiple},
                        Case{"durable_every", Options::OnBusy::wait, 50, Options::MpiThreads::multiple},
                        Case{"funneled", Options::OnBusy::wait, 0, Options::MpiThreads::funneled}}) {
    SCOPED_TRACE(c.name);
    const std::string dir = scratch_dir(c.name);
    Options o = series_opts(dir);
    o.on_busy = c.on_busy;
    o.durable_every_ms = c.durable_every_ms;
    o.mpi_threads = c.threads;
    o.segment_steps = 4;
    o.keep = 1000;
    Runtime rt(MPI_COMM_WORLD, o);
    ASSERT_TRUE(rt.status().ok()) << rt.status().to_string();
    ASSERT_TRUE(rt.protect("v", v.data(), DType::f64, Dims{v.size()}).ok());
    std::vector<Ticket> tickets;
    for (std::int64_t s = 1; s <= 12; ++s) {
      set_state(v, s, rank);
      tickets.push_back(rt.checkpoint(s));
    }
    ASSERT_TRUE(rt.wait_all().ok());
    int committed = 0;
    for (auto& t : tickets) {
      const Status s = t.wait();
      EXPECT_TRUE(s.ok() || s.code() == Code::superseded) << s.to_string();
      committed += s.ok() ? 1 : 0;
    }
    EXPECT_EQ(tickets.back().wait().code(), Code::ok);
    if (c.on_busy == Options::OnBusy::wait) EXPECT_EQ(committed, 12);
    EXPECT_EQ(ckpt::test::newest_step(rt), 12);
    EXPECT_TRUE(restores(rt, v, 12));
    ASSERT_TRUE(rt.close().ok());
    if (rank == 0) {
      auto store = detail::open_store(dir);
      EXPECT_EQ(static_cast<int>(store->committed_steps().size()), committed);
    }
  }
}

TEST(Series, RefusedWithAClearError) {
  const std::string dir = scratch_dir();
  std::vector<double> v(16, 1.0);
  auto refused = [&](Options o, Code code, const std::string& words) {
    Runtime rt(MPI_COMM_WORLD, o);
    EXPECT_EQ(rt.status().code(), code) << rt.status().to_string();
    EXPECT_NE(rt.status().message().find(words), std::string::npos) << rt.status().to_string();
  };
  // Transports that share files, and groups.
  Options o = series_opts(dir + "/a");
  o.transport = "mpiio";
  refused(o, Code::invalid_argument, "posix transport");
  // A root of the other layout, each way round.
  {
    Options d = Options::defaults();
    d.dir = dir + "/dirs";
    Runtime rt(MPI_COMM_WORLD, d);
    ASSERT_TRUE(rt.protect("v", v.data(), DType::f64, Dims{v.size()}).ok());
    ASSERT_TRUE(rt.checkpoint(1).wait().ok());
    ASSERT_TRUE(rt.close().ok());
  }
  refused(series_opts(dir + "/dirs"), Code::failed_precondition, "checkpoint directories");
  {
    Runtime rt(MPI_COMM_WORLD, series_opts(dir + "/series"));
    ASSERT_TRUE(rt.protect("v", v.data(), DType::f64, Dims{v.size()}).ok());
    ASSERT_TRUE(rt.checkpoint(1).wait().ok());
    ASSERT_TRUE(rt.close().ok());
  }
  Options d = Options::defaults();
  d.dir = dir + "/series";
  refused(d, Code::failed_precondition, "set layout to series");
  // Options: local_dir, and the spelling.
  Options l = series_opts(dir + "/b");
  l.local_dir = dir + "/node";
  EXPECT_EQ(l.validate().code(), Code::invalid_argument);
  EXPECT_EQ(parse_layout("series").value(), Options::Layout::series);
  EXPECT_FALSE(parse_layout("Series").ok());
}
