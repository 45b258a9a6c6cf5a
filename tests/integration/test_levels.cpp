// The node-local level and the drain to `dir` (docs/design.md, "Levels"), at 4 ranks as 2 simulated
// nodes (ranks_per_node 2): node k's directory is <local>/node<k>; deleting it loses node k.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "base/posix_io.hpp"
#include "base/store.hpp"
#include "ckpt/ckpt.hpp"
#include "test_util.hpp"

using namespace ckpt;
using ckpt::test::all_true;
using ckpt::test::scratch_dir;
using ckpt::test::world_rank;
using ckpt::test::world_size;

namespace {

constexpr int kRanksPerNode = 2;

Options level_opts(const std::string& root, int drain_every, int keep = 2) {
  Options o = Options::defaults();
  o.dir = root + "/global";
  o.local_dir = root + "/local";
  o.ranks_per_node = kRanksPerNode;
  o.drain_every = drain_every;
  o.keep = keep;
  o.chunk_bytes = 64 << 10;  // several windows per rank: the drain reads and writes in pieces
  return o;
}

bool exists(const std::string& p) {
  struct stat st {};
  return ::stat(p.c_str(), &st) == 0;
}

/// A block of a global 2D array (~240 KB per rank), a rank-dependent local array and a scalar.
struct State {
  static constexpr std::uint64_t kRows = 100, kCols = 300;
  int rank, size;
  std::vector<double> grid = std::vector<double>(kRows * kCols);
  std::vector<std::int32_t> ids;
  std::int64_t step = 0;
  State(int r, int s) : rank(r), size(s), ids(50 + 7 * r) {}
  void fill(int salt) {
    for (std::uint64_t i = 0; i < grid.size(); ++i) grid[i] = salt * 1e6 + rank * 1e5 + static_cast<double>(i);
    for (std::size_t i = 0; i < ids.size(); ++i) ids[i] = salt * 1000 + rank * 100 + static_cast<std::int32_t>(i);
    step = salt;
  }
  Status protect(Runtime& rt) {
    CKPT_RETURN_IF_ERROR(rt.protect("grid", grid.data(), DType::f64,
                                    Block{{kRows * static_cast<std::uint64_t>(size), kCols},
                                          {kRows * static_cast<std::uint64_t>(rank), 0},
                                          {kRows, kCols}}));
    CKPT_RETURN_IF_ERROR(rt.protect("ids", ids.data(), DType::i32, {ids.size()}));
    return rt.protect_scalar("step", &step);
  }
  bool operator==(const State& o) const { return grid == o.grid && ids == o.ids && step == o.step; }
};

/// Checkpoints steps `first`..`last` (state filled with the step as salt), each waited for.
void write_steps(const Options& o, int first, int last) {
  Runtime rt(MPI_COMM_WORLD, o);
  ASSERT_TRUE(rt.status().ok()) << rt.status().to_string();
  State s(world_rank(), world_size());
  ASSERT_TRUE(s.protect(rt).ok());
  for (int step = first; step <= last; ++step) {
    s.fill(step);
    Status st = rt.checkpoint(step).wait();
    ASSERT_TRUE(st.ok()) << st.to_string();
  }
  Status c = rt.close();  // waits for this rank's drains (node leaders also retain)
  ASSERT_TRUE(c.ok()) << c.to_string();
  MPI_Barrier(MPI_COMM_WORLD);  // every rank closed: the node leaders' retention is done too
}

/// restart() into a fresh state; expects step `want`, read from `level`, bit for bit.
void expect_restart(const Options& o, std::int64_t want, const std::string& level) {
  Runtime rt(MPI_COMM_WORLD, o);
  ASSERT_TRUE(rt.status().ok()) << rt.status().to_string();
  State s(world_rank(), world_size()), expected(world_rank(), world_size());
  expected.fill(static_cast<int>(want));
  s.fill(-1);
  ASSERT_TRUE(s.protect(rt).ok());
  auto latest = rt.latest();
  ASSERT_TRUE(latest.has_value());
  EXPECT_EQ(*latest, want);
  auto r = rt.restart();
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r.value(), want);
  EXPECT_EQ(rt.restart_level(), level);
  EXPECT_TRUE(all_true(s == expected)) << "restored data differ from step " << want;
}

std::vector<std::int64_t> committed(const std::string& root) {
  auto steps = ckpt::detail::make_directory_store(root)->committed_steps();
  std::sort(steps.begin(), steps.end());
  return steps;
}

std::string node_dir(const std::string& root, int node) { return root + "/local/node" + std::to_string(node); }

}  // namespace

TEST(Levels, LocalCommitThenDrainRestartsLocally) {
  ASSERT_EQ(world_size(), 4);
  const auto root = scratch_dir();
  const Options o = level_opts(root, 1);
  write_steps(o, 1, 2);
  // Each node directory holds the whole index and the data files of its own ranks only.
  const int rank = world_rank(), node = rank / kRanksPerNode, other = 1 - node;
  EXPECT_TRUE(exists(node_dir(root, node) + "/ckpt.2/index"));
  EXPECT_TRUE(exists(node_dir(root, node) + "/ckpt.2/data." + std::to_string(rank)));
  EXPECT_FALSE(exists(node_dir(root, other) + "/ckpt.2/data." + std::to_string(rank)));
  // The drained copy in `dir` is an ordinary checkpoint of 4 ranks.
  EXPECT_EQ(committed(o.dir), (std::vector<std::int64_t>{1, 2}));
  auto idx = ckpt::detail::load_checkpoint_dir(o.dir + "/ckpt.2");
  ASSERT_TRUE(idx.ok()) << idx.status().to_string();
  EXPECT_EQ(idx->nranks, 4u);
  EXPECT_TRUE(exists(o.dir + "/ckpt.2/data." + std::to_string(rank)));
  MPI_Barrier(MPI_COMM_WORLD);

  expect_restart(o, 2, "local");
  // Without `dir` at all, the node level alone restores: the data really come from the nodes.
  if (rank == 0) ckpt::detail::remove_tree(o.dir);
  MPI_Barrier(MPI_COMM_WORLD);
  expect_restart(o, 2, "local");
}

TEST(Levels, LostNodeFallsBackToDrainedCheckpoint) {
  ASSERT_EQ(world_size(), 4);
  const auto root = scratch_dir();
  const Options o = level_opts(root, 1);
  write_steps(o, 1, 2);
  if (world_rank() == 0) ckpt::detail::remove_tree(node_dir(root, 1));  // node 1 is lost
  MPI_Barrier(MPI_COMM_WORLD);
  expect_restart(o, 2, "global");
}

TEST(Levels, DamagedLocalCopyFallsBackToDrainedCopyOfTheSameStep) {
  ASSERT_EQ(world_size(), 4);
  const auto root = scratch_dir();
  const Options o = level_opts(root, 1);
  write_steps(o, 1, 2);
  // Node 1 still lists step 2 as complete (its index is intact), but rank 3's data file is cut short.
  if (world_rank() == 0) ASSERT_EQ(::truncate((node_dir(root, 1) + "/ckpt.2/data.3").c_str(), 4096), 0);
  MPI_Barrier(MPI_COMM_WORLD);
  expect_restart(o, 2, "global");
}

TEST(Levels, DrainEveryTwo) {
  ASSERT_EQ(world_size(), 4);
  const auto root = scratch_dir();
  const Options o = level_opts(root, 2, 3);
  write_steps(o, 1, 5);
  // Every second locally complete checkpoint went to `dir`; the nodes keep the newest 3.
  EXPECT_EQ(committed(o.dir), (std::vector<std::int64_t>{2, 4}));
  EXPECT_EQ(committed(node_dir(root, world_rank() / kRanksPerNode)), (std::vector<std::int64_t>{3, 4, 5}));
  MPI_Barrier(MPI_COMM_WORLD);
  expect_restart(o, 5, "local");
  // Node 0 lost: step 5 was never drained, so the newest restorable one is the drained step 4.
  if (world_rank() == 0) ckpt::detail::remove_tree(node_dir(root, 0));
  MPI_Barrier(MPI_COMM_WORLD);
  expect_restart(o, 4, "global");
}

TEST(Levels, DrainNeverLeavesNothingGlobal) {
  ASSERT_EQ(world_size(), 4);
  const auto root = scratch_dir();
  const Options o = level_opts(root, 0);
  write_steps(o, 1, 2);
  EXPECT_TRUE(committed(o.dir).empty());
  MPI_Barrier(MPI_COMM_WORLD);
  expect_restart(o, 2, "local");
  if (world_rank() == 0) ckpt::detail::remove_tree(node_dir(root, 1));
  MPI_Barrier(MPI_COMM_WORLD);
  Runtime rt(MPI_COMM_WORLD, o);
  ASSERT_TRUE(rt.status().ok());
  State s(world_rank(), world_size());
  ASSERT_TRUE(s.protect(rt).ok());
  EXPECT_FALSE(rt.latest().has_value());
  auto r = rt.restart();
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::not_found) << r.status().to_string();
}

TEST(Levels, DrainsThroughTheConfiguredTransport) {
  ASSERT_EQ(world_size(), 4);
  // The file each transport writes in `dir` (transports/*.cpp); the node level is posix whatever it is.
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"mpiio", "coio."}, {"rbio", "rbio."}, {"hdf5", ".h5"}};
  for (const auto& [transport, file] : cases) {
    const auto root = scratch_dir("." + transport);
    Options o = level_opts(root, 1);
    o.transport = transport;
    {
      Runtime probe(MPI_COMM_WORLD, o);
      if (probe.status().code() == Code::unavailable) {
        std::printf("transport %s not built: %s\n", transport.c_str(), probe.status().to_string().c_str());
        continue;
      }
    }
    write_steps(o, 1, 2);
    auto idx = ckpt::detail::load_checkpoint_dir(o.dir + "/ckpt.2");
    ASSERT_TRUE(idx.ok()) << transport << ": " << idx.status().to_string();
    EXPECT_EQ(idx->transport, transport);
    ASSERT_FALSE(idx->files.empty());
    EXPECT_NE(idx->files[0].name.find(file), std::string::npos) << transport << ": " << idx->files[0].name;
    if (world_rank() == 0) ckpt::detail::remove_tree(node_dir(root, 0));
    MPI_Barrier(MPI_COMM_WORLD);
    SCOPED_TRACE(transport);
    expect_restart(o, 2, "global");
  }
}

TEST(Levels, SynchronousTransportIsRefused) {
  const auto root = scratch_dir();
  Options o = level_opts(root, 1);
  o.transport = "hdf5-sync";
  Runtime rt(MPI_COMM_WORLD, o);
  EXPECT_FALSE(rt.status().ok());
  if (rt.status().code() != Code::unavailable)  // hdf5-sync built: refused for the node level
    EXPECT_NE(rt.status().message().find("local_dir"), std::string::npos) << rt.status().to_string();
}

TEST(Levels, OptionsAreParsedAndChecked) {
  setenv("CKPT_LOCAL_DIR", "/tmp/x-local", 1);
  setenv("CKPT_DRAIN_EVERY", "3", 1);
  setenv("CKPT_RANKS_PER_NODE", "2", 1);
  Options o;
  unsetenv("CKPT_LOCAL_DIR");
  unsetenv("CKPT_DRAIN_EVERY");
  unsetenv("CKPT_RANKS_PER_NODE");
  ASSERT_TRUE(o.error.ok()) << o.error.to_string();
  EXPECT_EQ(o.local_dir, "/tmp/x-local");
  EXPECT_EQ(o.drain_every, 3);
  EXPECT_EQ(o.ranks_per_node, 2);
  setenv("CKPT_DRAIN_EVERY", "-1", 1);
  Options bad;
  unsetenv("CKPT_DRAIN_EVERY");
  EXPECT_FALSE(bad.error.ok());
  Options same = Options::defaults();
  same.local_dir = same.dir;
  EXPECT_EQ(same.validate().code(), Code::invalid_argument);
}

// A roll-back with levels: steps 1..6 exist on both levels; a run restarts from step 3 and commits
// step 4 of a new timeline locally, never draining it. The drained level's steps 5 and 6 belong to the
// abandoned timeline: latest() and restart() must find the new step 4, not the drained step 6.
TEST(Levels, RollBackAbandonsTheDrainedLevelsNewerSteps) {
  ASSERT_EQ(world_size(), 4);
  const auto root = scratch_dir();
  write_steps(level_opts(root, 1, 10), 1, 6);
  const Options o = level_opts(root, 0, 10);
  constexpr int kNewTimeline = 100;  // salt of the new timeline's step 4
  {
    Runtime rt(MPI_COMM_WORLD, o);
    ASSERT_TRUE(rt.status().ok()) << rt.status().to_string();
    State s(world_rank(), world_size());
    ASSERT_TRUE(s.protect(rt).ok());
    ASSERT_TRUE(rt.restart(3).ok());
    s.fill(kNewTimeline + 4);
    Status st = rt.checkpoint(4).wait();
    ASSERT_TRUE(st.ok()) << st.to_string();
    ASSERT_TRUE(rt.close().ok());
  }
  MPI_Barrier(MPI_COMM_WORLD);
  EXPECT_EQ(committed(o.dir), (std::vector<std::int64_t>{1, 2, 3}));  // the old 4 too: never restored for 4
  if (world_rank() == 0) {
    EXPECT_TRUE(exists(o.dir + "/ckpt.4.abandoned"));
    EXPECT_TRUE(exists(o.dir + "/ckpt.6.abandoned"));
    EXPECT_TRUE(exists(o.dir + "/ckpt.5.abandoned"));
  }
  Runtime rt(MPI_COMM_WORLD, o);
  ASSERT_TRUE(rt.status().ok());
  State s(world_rank(), world_size()), expected(world_rank(), world_size());
  expected.fill(kNewTimeline + 4);
  ASSERT_TRUE(s.protect(rt).ok());
  EXPECT_EQ(rt.latest().value_or(-1), 4);
  auto r = rt.restart();
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r.value(), 4);
  EXPECT_EQ(rt.restart_level(), "local");
  EXPECT_TRUE(all_true(s == expected)) << "restored data are not the new timeline's step 4";
}
