// The node-local level and the drain to `dir` (docs/design.md, "Levels"), at 4 ranks as 2 simulated
// nodes (ranks_per_node 2): node k's directory is <local>/node<k>; deleting it loses node k.
#include <dirent.h>
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <initializer_list>
#include <optional>
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

Options level_opts(const std::string& root, int drain_every, int keep = 2, int ranks_per_node = kRanksPerNode) {
  Options o = Options::defaults();
  o.dir = root + "/global";
  o.local_dir = root + "/local";
  o.ranks_per_node = ranks_per_node;
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

/// A run that restarts from step `from`, then checkpoints `first`..`last` (state filled with `salt` +
/// step), each waited for: a roll-back when `from` is older than the newest step.
void continue_from(const Options& o, std::int64_t from, int first, int last, int salt) {
  Runtime rt(MPI_COMM_WORLD, o);
  ASSERT_TRUE(rt.status().ok()) << rt.status().to_string();
  State s(world_rank(), world_size());
  ASSERT_TRUE(s.protect(rt).ok());
  Status r = rt.restart(from);
  ASSERT_TRUE(r.ok()) << r.to_string();
  for (int step = first; step <= last; ++step) {
    s.fill(salt + step);
    Status st = rt.checkpoint(step).wait();
    ASSERT_TRUE(st.ok()) << st.to_string();
  }
  ASSERT_TRUE(rt.close().ok());
  MPI_Barrier(MPI_COMM_WORLD);
}

/// restart() into a fresh state; expects step `want` holding the state filled with `salt` (the step
/// itself by default), read from `level`, bit for bit. `go_on`: the run then checkpoints step want + 1
/// (salt + 1), going on along the restored timeline.
void expect_restart(const Options& o, std::int64_t want, const std::string& level,
                    std::optional<int> salt = std::nullopt, bool go_on = false) {
  Runtime rt(MPI_COMM_WORLD, o);
  ASSERT_TRUE(rt.status().ok()) << rt.status().to_string();
  State s(world_rank(), world_size()), expected(world_rank(), world_size());
  expected.fill(salt.value_or(static_cast<int>(want)));
  s.fill(-1);
  ASSERT_TRUE(s.protect(rt).ok());
  EXPECT_EQ(ckpt::test::newest_step(rt), want);
  auto r = rt.restart();
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r.value(), want);
  EXPECT_EQ(rt.restart_level(), level);
  EXPECT_TRUE(all_true(s == expected)) << "restored data differ from step " << want;
  if (!go_on) return;
  s.fill(salt.value_or(static_cast<int>(want)) + 1);
  Status st = rt.checkpoint(want + 1).wait();
  EXPECT_TRUE(st.ok()) << st.to_string();
  EXPECT_TRUE(rt.close().ok());
  MPI_Barrier(MPI_COMM_WORLD);
}

std::vector<std::int64_t> committed(const std::string& root) {
  auto steps = ckpt::detail::make_directory_store(root)->committed_steps();
  std::sort(steps.begin(), steps.end());
  return steps;
}

std::string node_dir(const std::string& root, int node) { return root + "/local/node" + std::to_string(node); }

/// Simulates the loss of `nodes`: rank 0 deletes their directories, then every rank goes on.
void lose_nodes(const std::string& root, std::initializer_list<int> nodes) {
  if (world_rank() == 0)
    for (int k : nodes) ckpt::detail::remove_tree(node_dir(root, k));
  MPI_Barrier(MPI_COMM_WORLD);
}

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
  lose_nodes(root, {1});
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
  lose_nodes(root, {0});
  expect_restart(o, 4, "global");
}

TEST(Levels, JoinedRowsFindsAStepOnlyTheNodesHold) {
  // drain_every 0: step 1 is in the node directories only; restart(1) restores it from there, so
  // joined_rows(1) must size it from there too (it read `dir` only and said not_found).
  ASSERT_EQ(world_size(), 4);
  const auto root = scratch_dir();
  const Options o = level_opts(root, 0);
  const std::uint64_t mine = 3 + static_cast<std::uint64_t>(world_rank()), total = 3 * 4 + 6;
  {
    Runtime rt(MPI_COMM_WORLD, o);
    ASSERT_TRUE(rt.status().ok()) << rt.status().to_string();
    std::vector<double> rows(mine * 2, world_rank());
    ASSERT_TRUE(rt.protect("rows", rows.data(), DType::f64, Joined{{mine, 2}, std::nullopt}).ok());
    ASSERT_TRUE(rt.checkpoint(1).wait().ok());
    ASSERT_TRUE(rt.close().ok());
  }
  EXPECT_TRUE(committed(o.dir).empty());
  MPI_Barrier(MPI_COMM_WORLD);
  Runtime rt(MPI_COMM_WORLD, o);
  ASSERT_TRUE(rt.status().ok()) << rt.status().to_string();
  auto jr = rt.joined_rows(1, "rows");
  ASSERT_TRUE(jr.ok()) << jr.status().to_string();
  EXPECT_EQ(jr->total, total);
  const JoinedRows want = balanced_rows(total, world_rank(), world_size());
  EXPECT_EQ(jr->begin, want.begin);
  EXPECT_EQ(jr->end, want.end);
  // Each rank takes back the rows it wrote: the node level holds only its own node's files, so the
  // balanced split (rank 1's share holds rows rank 2 wrote on the other node) needs the drained copy.
  const std::uint64_t first = 3 * static_cast<std::uint64_t>(world_rank()) +
                              static_cast<std::uint64_t>(world_rank() * (world_rank() - 1) / 2);
  std::vector<double> back(mine * 2, -1.0);
  ASSERT_TRUE(rt.protect("rows", back.data(), DType::f64, Joined{{mine, 2}, first}).ok());
  const Status st = rt.restart(1);
  ASSERT_TRUE(st.ok()) << st.to_string();
  EXPECT_EQ(rt.restart_level(), "local");
  EXPECT_TRUE(all_true(std::all_of(back.begin(), back.end(), [](double x) { return x == world_rank(); })));
}

// Node directories are bound to the root that made them (design.md, "Levels", binding).

namespace {

/// The text of a small file, or "" when it cannot be read.
std::string slurp(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) return "";
  std::string text;
  char buf[4096];
  for (std::size_t n; (n = std::fread(buf, 1, sizeof buf, f)) > 0;) text.append(buf, n);
  std::fclose(f);
  return text;
}

}  // namespace

TEST(Levels, NodeDirectoryOfAnotherRootIsRefused) {
  ASSERT_EQ(world_size(), 4);
  const auto root = scratch_dir();
  const Options a = level_opts(root, 1);
  write_steps(a, 1, 3);
  const std::string owner = slurp(node_dir(root, 1) + "/.owner"), lock = slurp(node_dir(root, 1) + "/.lock");
  EXPECT_EQ(owner.rfind("ckpt node of root ", 0), 0u) << owner;
  // Job B: another root, the same local_dir. A's node directories hold complete steps 2 and 3.
  Options b = a;
  b.dir = root + "/other-global";
  {
    Runtime rt(MPI_COMM_WORLD, b);
    const Status st = rt.status();
    EXPECT_EQ(st.code(), Code::failed_precondition) << st.to_string();  // on every rank
    EXPECT_NE(st.message().find("belongs to the root " + a.dir), std::string::npos) << st.to_string();
    EXPECT_NE(st.message().find("not to this job's root " + b.dir), std::string::npos) << st.to_string();
  }
  MPI_Barrier(MPI_COMM_WORLD);
  // Left exactly as it was: not locked, recovered, retained or rebound by B.
  EXPECT_EQ(slurp(node_dir(root, 1) + "/.owner"), owner);
  EXPECT_EQ(slurp(node_dir(root, 1) + "/.lock"), lock);
  EXPECT_EQ(committed(node_dir(root, world_rank() / kRanksPerNode)), (std::vector<std::int64_t>{2, 3}));
  EXPECT_TRUE(committed(b.dir).empty());
  MPI_Barrier(MPI_COMM_WORLD);
  // B's own node directories work; A's root still restarts from its node level.
  Options b_own = b;
  b_own.local_dir = root + "/other-local";
  write_steps(b_own, 7, 7);
  expect_restart(b_own, 7, "local");
  expect_restart(a, 3, "local");
}

TEST(Levels, NodeDirectoryWithCheckpointsButNoOwnerIsNotRead) {
  // An earlier build's (or a planted) node directory: valid-looking ckpt.2, no .owner.
  ASSERT_EQ(world_size(), 4);
  const auto root = scratch_dir();
  const Options o = level_opts(root, 0);  // nothing drained: only the node level holds the steps
  write_steps(o, 1, 2);
  if (world_rank() == 0) ASSERT_EQ(::unlink((node_dir(root, 1) + "/.owner").c_str()), 0);
  MPI_Barrier(MPI_COMM_WORLD);
  {
    Runtime rt(MPI_COMM_WORLD, o);
    const Status st = rt.status();
    EXPECT_EQ(st.code(), Code::failed_precondition) << st.to_string();
    EXPECT_NE(st.message().find(node_dir(root, 1) + " holds ckpt."), std::string::npos) << st.to_string();
    EXPECT_NE(st.message().find("no .owner"), std::string::npos) << st.to_string();
  }
  MPI_Barrier(MPI_COMM_WORLD);
  EXPECT_TRUE(exists(node_dir(root, 1) + "/ckpt.2/index"));  // not touched
  EXPECT_FALSE(exists(node_dir(root, 1) + "/.owner"));
  MPI_Barrier(MPI_COMM_WORLD);
  // Removing it (the documented way out): node 1 is adopted empty, and nothing is restorable.
  if (world_rank() == 0) ckpt::detail::remove_tree(node_dir(root, 1));
  MPI_Barrier(MPI_COMM_WORLD);
  Runtime rt(MPI_COMM_WORLD, o);
  ASSERT_TRUE(rt.status().ok()) << rt.status().to_string();
  EXPECT_EQ(ckpt::test::newest_step(rt), -1);
  State s(world_rank(), world_size());
  ASSERT_TRUE(s.protect(rt).ok());
  EXPECT_EQ(rt.restart().status().code(), Code::not_found);
  EXPECT_TRUE(exists(node_dir(root, 1) + "/.owner"));
}

TEST(Levels, LinkPlantedAtNodeDirectoryIsNotWrittenThrough) {
  ASSERT_EQ(world_size(), 4);
  const auto root = scratch_dir();
  const Options o = level_opts(root, 1);
  const std::string target = root + "/elsewhere";
  if (world_rank() == 0) {
    ASSERT_TRUE(ckpt::detail::make_dirs(target).ok());
    ASSERT_TRUE(ckpt::detail::make_dirs(root + "/local").ok());
    ASSERT_EQ(::symlink(target.c_str(), node_dir(root, 1).c_str()), 0);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  {
    Runtime rt(MPI_COMM_WORLD, o);
    const Status st = rt.status();
    EXPECT_EQ(st.code(), Code::failed_precondition) << st.to_string();
    EXPECT_NE(st.message().find(node_dir(root, 1) + " is a symbolic link"), std::string::npos) << st.to_string();
  }
  MPI_Barrier(MPI_COMM_WORLD);
  if (world_rank() == 0) {
    DIR* d = ::opendir(target.c_str());
    ASSERT_NE(d, nullptr);
    std::vector<std::string> names;
    while (dirent* e = ::readdir(d))
      if (std::strcmp(e->d_name, ".") != 0 && std::strcmp(e->d_name, "..") != 0) names.push_back(e->d_name);
    ::closedir(d);
    EXPECT_TRUE(names.empty()) << names.front();  // no lock, no owner, no checkpoint
  }
  MPI_Barrier(MPI_COMM_WORLD);
}

TEST(Levels, MarkersAreWholeOrAbsent) {
  // A crash while a marker was written leaves only its .tmp (ignored, overwritten); a damaged .owner is
  // refused as damaged, never taken for this root's.
  ASSERT_EQ(world_size(), 4);
  const auto root = scratch_dir();
  const Options o = level_opts(root, 1);
  if (world_rank() == 0) {
    ASSERT_TRUE(ckpt::detail::make_dirs(o.dir).ok());
    ASSERT_TRUE(ckpt::detail::make_dirs(node_dir(root, 0)).ok());
    ASSERT_TRUE(ckpt::detail::write_file(o.dir + "/.root.tmp", "ckpt ro", 7, false).ok());
    ASSERT_TRUE(ckpt::detail::write_file(node_dir(root, 0) + "/.owner.tmp", "", 0, false).ok());
  }
  MPI_Barrier(MPI_COMM_WORLD);
  write_steps(o, 1, 2);
  EXPECT_FALSE(exists(o.dir + "/.root.tmp"));
  EXPECT_FALSE(exists(node_dir(root, 0) + "/.owner.tmp"));
  MPI_Barrier(MPI_COMM_WORLD);
  expect_restart(o, 2, "local");
  if (world_rank() == 0)
    ASSERT_TRUE(ckpt::detail::write_file(node_dir(root, 1) + "/.owner", "ckpt node of r", 14, true).ok());
  MPI_Barrier(MPI_COMM_WORLD);
  Runtime rt(MPI_COMM_WORLD, o);
  EXPECT_EQ(rt.status().code(), Code::failed_precondition) << rt.status().to_string();
  EXPECT_NE(rt.status().message().find("has a damaged .owner"), std::string::npos) << rt.status().to_string();
}

TEST(Levels, RootThatLostItsIdentityKeepsItsNodes) {
  // `dir` lost whole (with its .root), the node level intact: the new .root takes over the node
  // directories that name the same path; another path would not match (NodeDirectoryOfAnotherRoot...).
  ASSERT_EQ(world_size(), 4);
  const auto root = scratch_dir();
  const Options o = level_opts(root, 0);
  write_steps(o, 1, 2);
  const std::string before = slurp(node_dir(root, 0) + "/.owner");
  if (world_rank() == 0) ckpt::detail::remove_tree(o.dir);
  MPI_Barrier(MPI_COMM_WORLD);
  expect_restart(o, 2, "local");
  const std::string after = slurp(node_dir(root, 0) + "/.owner"), id = slurp(o.dir + "/.root");
  EXPECT_NE(after, before);
  ASSERT_EQ(id.size(), std::string("ckpt root ").size() + 17) << id;
  EXPECT_EQ(after, "ckpt node of root " + id.substr(10, 16) + " " + o.dir + "\n");
  MPI_Barrier(MPI_COMM_WORLD);
}

TEST(Levels, KeepGlobalRetainsTheDrainedLevelApart) {
  ASSERT_EQ(world_size(), 4);
  for (const auto& [keep, keep_global] : {std::pair<int, int>{2, 4}, {3, 1}}) {
    const auto root = scratch_dir("." + std::to_string(keep) + "." + std::to_string(keep_global));
    Options o = level_opts(root, 1, keep);
    o.keep_global = keep_global;
    write_steps(o, 1, 5);
    std::vector<std::int64_t> local, global;
    for (int s = 6 - keep; s <= 5; ++s) local.push_back(s);
    for (int s = 6 - keep_global; s <= 5; ++s) global.push_back(s);
    EXPECT_EQ(committed(node_dir(root, world_rank() / kRanksPerNode)), local) << keep << "/" << keep_global;
    EXPECT_EQ(committed(o.dir), global) << keep << "/" << keep_global;
    MPI_Barrier(MPI_COMM_WORLD);
  }
}

TEST(Levels, DrainNeverLeavesNothingGlobal) {
  ASSERT_EQ(world_size(), 4);
  const auto root = scratch_dir();
  const Options o = level_opts(root, 0);
  write_steps(o, 1, 2);
  EXPECT_TRUE(committed(o.dir).empty());
  MPI_Barrier(MPI_COMM_WORLD);
  expect_restart(o, 2, "local");
  lose_nodes(root, {1});
  Runtime rt(MPI_COMM_WORLD, o);
  ASSERT_TRUE(rt.status().ok());
  State s(world_rank(), world_size());
  ASSERT_TRUE(s.protect(rt).ok());
  EXPECT_EQ(ckpt::test::newest_step(rt), -1);
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
    lose_nodes(root, {0});
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
  continue_from(o, 3, 4, 4, kNewTimeline);
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
  EXPECT_EQ(ckpt::test::newest_step(rt), 4);
  auto r = rt.restart();
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r.value(), 4);
  EXPECT_EQ(rt.restart_level(), "local");
  EXPECT_TRUE(all_true(s == expected)) << "restored data are not the new timeline's step 4";
}

/// A run without levels on the same `dir`: restart(`from`) (expects that step, from `dir`), then
/// checkpoints `first`..`last` with the salt `salt` + step.
void write_without_levels(const Options& levels, std::int64_t from, int first, int last, int salt) {
  Options o = levels;
  o.local_dir.clear();
  continue_from(o, from, first, last, salt);
}

// (issue 31, 3) Roll-back covers every level, also when the run that rolls back has no local_dir and
// cannot see the node directories: it records in `dir`'s timeline where its timeline began, and the
// next run with levels abandons the node steps of the older timeline before anything reads them.
// Steps 1..5 with levels (drained: 2, 4); a run without levels restarts from 2 and commits 3: the
// next run with levels must restart from that 3, not the node level's 5 of the abandoned timeline.
TEST(Levels, RunWithoutLevelsRollsTheNodeLevelBackToo) {
  ASSERT_EQ(world_size(), 4);
  const auto root = scratch_dir();
  const Options o = level_opts(root, 2, 10);
  write_steps(o, 1, 5);
  EXPECT_EQ(committed(o.dir), (std::vector<std::int64_t>{2, 4}));
  constexpr int kNew = 1000;
  write_without_levels(o, 2, 3, 3, kNew);
  expect_restart(o, 3, "global", kNew + 3, true);
  // The node level: the old timeline's 3 and 5 abandoned (3's copy removed by retention once the new
  // timeline passed it), 4 is the last run's own.
  if (world_rank() == 0)
    for (int node : {0, 1}) {
      EXPECT_EQ(committed(node_dir(root, node)), (std::vector<std::int64_t>{1, 2, 4}));
      EXPECT_TRUE(exists(node_dir(root, node) + "/ckpt.5.abandoned"));
    }
}

// The same at the newest drained step: the run without levels restarts from 4 (`dir`'s newest) and
// commits 5. The node level's own step 5 is of the old timeline - the same step number, other data:
// restoring it (the node level is read first) would be silent wrong data.
TEST(Levels, RunWithoutLevelsAtTheSameStepIsNotShadowedByTheNodeLevel) {
  ASSERT_EQ(world_size(), 4);
  const auto root = scratch_dir();
  const Options o = level_opts(root, 2, 10);
  write_steps(o, 1, 5);
  constexpr int kNew = 2000;
  write_without_levels(o, 4, 5, 5, kNew);
  expect_restart(o, 5, "global", kNew + 5, true);
  // That run's step 6 is on the node level only; with node 1 lost, the newest whole step is `dir`'s 5
  // (node 0's abandoned 5 stays abandoned).
  lose_nodes(root, {1});
  expect_restart(o, 5, "global", kNew + 5, true);
}

// A run that lacked a node rolls that node back too: steps 1..5 on 2 nodes (drained 2 and 4); a run
// on one node (every rank in node 0) restarts from 2 and commits 3 there. Node 1 still holds step 3
// of the old timeline: read beside node 0's new 3, the next run on 2 nodes would restore a mix of
// both timelines (ranks 2 and 3 the old data). It must fall back to step 2 instead.
TEST(Levels, RunThatLackedANodeRollsThatNodeBackToo) {
  ASSERT_EQ(world_size(), 4);
  const auto root = scratch_dir();
  const Options two = level_opts(root, 2, 10), one = level_opts(root, 2, 10, 4);
  write_steps(two, 1, 5);
  continue_from(one, 2, 3, 3, 4000);
  Runtime rt(MPI_COMM_WORLD, two);
  ASSERT_TRUE(rt.status().ok()) << rt.status().to_string();
  State s(world_rank(), world_size()), expected(world_rank(), world_size());
  expected.fill(2);
  ASSERT_TRUE(s.protect(rt).ok());
  auto r = rt.restart();
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r.value(), 2);
  EXPECT_TRUE(all_true(s == expected)) << "restored data are not step 2 (a mix of two timelines?)";
  if (world_rank() == 0) EXPECT_TRUE(exists(node_dir(root, 1) + "/ckpt.3.abandoned"));
}

TEST(Levels, PartnerCopyRebuildsALostNode) {
  ASSERT_EQ(world_size(), 4);
  const auto root = scratch_dir();
  Options o = level_opts(root, 0);  // nothing drained: only the partner copy can bring node 1 back
  o.redundancy = Redundancy::partner;
  const int rank = world_rank(), node = rank / kRanksPerNode, other = 1 - node;
  {
    Runtime rt(MPI_COMM_WORLD, o);
    ASSERT_TRUE(rt.status().ok()) << rt.status().to_string();
    State s(rank, world_size());
    ASSERT_TRUE(s.protect(rt).ok());
    for (int step = 1; step <= 2; ++step) {
      s.fill(step);
      Ticket t = rt.checkpoint(step);
      ASSERT_TRUE(t.wait().ok()) << t.wait().to_string();
      // Locally complete includes the partner copy: it is counted in the ticket's figures.
      EXPECT_GT(t.stats().redundancy_bytes, sizeof(double) * State::kRows * State::kCols);
      EXPECT_GT(t.stats().redundancy_s, 0.0);
    }
    ASSERT_TRUE(rt.close().ok());
  }
  MPI_Barrier(MPI_COMM_WORLD);
  // This rank's files are on its own node and, as the partner copy, on the other node.
  EXPECT_TRUE(exists(node_dir(root, node) + "/ckpt.2/data." + std::to_string(rank)));
  EXPECT_TRUE(exists(node_dir(root, other) + "/ckpt.2/partner/data." + std::to_string(rank)));
  MPI_Barrier(MPI_COMM_WORLD);
  lose_nodes(root, {1});
  expect_restart(o, 2, "partner");
  // The rebuild put node 1 back together, its partner copy of node 0 included.
  EXPECT_TRUE(exists(node_dir(root, 1) + "/ckpt.2/data.3"));
  EXPECT_TRUE(exists(node_dir(root, 1) + "/ckpt.2/partner/data.1"));
  MPI_Barrier(MPI_COMM_WORLD);
  expect_restart(o, 2, "local");
  // Now node 0 (rank 0's: the index comes from node 1) is lost, and rebuilt from the rebuilt node 1.
  lose_nodes(root, {0});
  expect_restart(o, 2, "partner");
}

TEST(Levels, LosingBothPartnersFallsBackToDrained) {
  ASSERT_EQ(world_size(), 4);
  const auto root = scratch_dir();
  Options o = level_opts(root, 2, 3);
  o.redundancy = Redundancy::partner;
  write_steps(o, 1, 3);  // step 2 drained, step 3 on the nodes only
  lose_nodes(root, {0});
  expect_restart(o, 3, "partner");
  // With two nodes, each is the other's partner: losing both leaves the drained step 2.
  lose_nodes(root, {0, 1});
  expect_restart(o, 2, "global");
}

TEST(Levels, RedundancyOptionsAreChecked) {
  const auto root = scratch_dir();
  setenv("CKPT_REDUNDANCY", "xor", 1);
  setenv("CKPT_XOR_GROUP", "3", 1);
  setenv("CKPT_KEEP_GLOBAL", "5", 1);
  Options x;
  unsetenv("CKPT_REDUNDANCY");
  unsetenv("CKPT_XOR_GROUP");
  unsetenv("CKPT_KEEP_GLOBAL");
  ASSERT_TRUE(x.error.ok()) << x.error.to_string();
  EXPECT_EQ(x.redundancy, Redundancy::xor_parity);
  EXPECT_EQ(x.xor_group, 3);
  EXPECT_EQ(x.keep_global, 5);
  for (const char* bad : {"1", "0", "-2", "four"}) {
    setenv("CKPT_XOR_GROUP", bad, 1);
    Options b;
    unsetenv("CKPT_XOR_GROUP");
    EXPECT_EQ(b.error.code(), Code::invalid_argument) << bad;
  }
  setenv("CKPT_REDUNDANCY", "raid5", 1);
  Options r;
  unsetenv("CKPT_REDUNDANCY");
  EXPECT_EQ(r.error.code(), Code::invalid_argument) << r.error.to_string();
  for (const Redundancy red : {Redundancy::partner, Redundancy::xor_parity}) {
    Options one = level_opts(root, 1);
    one.redundancy = red;
    one.ranks_per_node = world_size();  // a single node has nobody to protect it
    Runtime rt(MPI_COMM_WORLD, one);
    EXPECT_EQ(rt.status().code(), Code::invalid_argument) << rt.status().to_string();
  }
}

/// Checkpoints steps 1..3 with xor redundancy (drain_every 2: step 2 drained, step 3 on the nodes only);
/// `ranks_per_node` ranks per node, groups of `group` nodes. Each ticket counts the parity exchange.
Options write_xor(const std::string& root, int ranks_per_node, int group, int drain_every = 2) {
  Options o = level_opts(root, drain_every, 3, ranks_per_node);
  o.redundancy = Redundancy::xor_parity;
  o.xor_group = group;
  Runtime rt(MPI_COMM_WORLD, o);
  EXPECT_TRUE(rt.status().ok()) << rt.status().to_string();
  State s(world_rank(), world_size());
  EXPECT_TRUE(s.protect(rt).ok());
  for (int step = 1; step <= 3; ++step) {
    s.fill(step);
    Ticket t = rt.checkpoint(step);
    EXPECT_TRUE(t.wait().ok()) << t.wait().to_string();
    // Locally complete includes the parity: the exchange is in the ticket's figures.
    EXPECT_GT(t.stats().redundancy_bytes, 0u);
    EXPECT_GT(t.stats().redundancy_s, 0.0);
  }
  EXPECT_TRUE(rt.close().ok());
  MPI_Barrier(MPI_COMM_WORLD);
  const std::string mine = root + "/local/node" + std::to_string(world_rank() / ranks_per_node) + "/ckpt.3/";
  EXPECT_TRUE(exists(mine + "xor." + std::to_string(world_rank())));
  MPI_Barrier(MPI_COMM_WORLD);
  return o;
}

/// Files of node `node`'s step 3, for bit-for-bit comparison after a rebuild.
std::vector<std::vector<std::uint8_t>> node_files(const std::string& root, int node,
                                                  const std::vector<std::string>& names) {
  std::vector<std::vector<std::uint8_t>> out;
  for (auto& n : names) {
    auto b = ckpt::detail::read_file(node_dir(root, node) + "/ckpt.3/" + n, 1ull << 30);
    EXPECT_TRUE(b.ok()) << b.status().to_string();
    out.push_back(b.ok() ? b.value() : std::vector<std::uint8_t>{});
  }
  return out;
}

// 4 ranks as 4 nodes, one group of 4.
TEST(Levels, XorRebuildsOneLostNodeExactly) {
  ASSERT_EQ(world_size(), 4);
  const auto root = scratch_dir();
  const Options o = write_xor(root, 1, 4);
  // Node 2 (rank 2) lost: its data file and its parity come back bit for bit from the other three.
  const std::vector<std::string> names = {"data.2", "xor.2", "index"};
  const auto before = node_files(root, 2, names);
  MPI_Barrier(MPI_COMM_WORLD);  // everybody read them before rank 0 deletes them
  lose_nodes(root, {2});
  expect_restart(o, 3, "xor");
  EXPECT_EQ(node_files(root, 2, names), before);
  MPI_Barrier(MPI_COMM_WORLD);
  expect_restart(o, 3, "local");
  // Two nodes of the group lost: parity cannot help, the drained step 2 is what is left.
  lose_nodes(root, {0, 3});
  expect_restart(o, 2, "global");
}

// 4 ranks as 2 nodes: a group of two nodes, each one's parity the other's files (mirroring).
TEST(Levels, XorGroupOfTwoNodes) {
  ASSERT_EQ(world_size(), 4);
  const auto root = scratch_dir();
  const Options o = write_xor(root, 2, 4);
  lose_nodes(root, {0});
  expect_restart(o, 3, "xor");
}

TEST(Levels, XorDamagedParityFallsBackToDrained) {
  ASSERT_EQ(world_size(), 4);
  const auto root = scratch_dir();
  const Options o = write_xor(root, 1, 4, 1);
  // A survivor's parity of step 3 is damaged: the rebuild notices, nothing half rebuilt stays, and the
  // restart takes the drained copy of step 3.
  if (world_rank() == 0) {
    const std::string p = node_dir(root, 1) + "/ckpt.3/xor.1";
    auto b = ckpt::detail::read_file(p, 1ull << 30);
    ASSERT_TRUE(b.ok());
    auto bytes = b.value();
    bytes[bytes.size() - 20] ^= 0x40;
    ASSERT_TRUE(ckpt::detail::write_file(p, bytes.data(), bytes.size(), false).ok());
  }
  lose_nodes(root, {3});
  expect_restart(o, 3, "global");
  EXPECT_FALSE(exists(node_dir(root, 3) + "/ckpt.3"));
  EXPECT_FALSE(exists(node_dir(root, 3) + "/ckpt.3.tmp"));
}

/// Rank 0 flips one bit in the middle of `path` (inside a block's data), then every rank goes on.
void damage(const std::string& path) {
  if (world_rank() == 0) {
    auto b = ckpt::detail::read_file(path, 1ull << 30);
    ASSERT_TRUE(b.ok()) << b.status().to_string();
    auto bytes = b.value();
    bytes[bytes.size() / 2] ^= 0x10;
    ASSERT_TRUE(ckpt::detail::write_file(path, bytes.data(), bytes.size(), false).ok());
  }
  MPI_Barrier(MPI_COMM_WORLD);
}

TEST(Levels, PartnerCopyRepairsADamagedFile) {
  // One flipped bit in node 0's copy of rank 1's file, the partner copy on node 1 intact: restart()
  // rebuilds node 0's step from it and restores the same step (it fell back a step before).
  ASSERT_EQ(world_size(), 4);
  const auto root = scratch_dir();
  Options o = level_opts(root, 0, 3);
  o.redundancy = Redundancy::partner;
  write_steps(o, 1, 3);
  const std::vector<std::string> names = {"data.0", "data.1", "index"};
  const auto before = node_files(root, 0, names);
  MPI_Barrier(MPI_COMM_WORLD);
  damage(node_dir(root, 0) + "/ckpt.3/data.1");
  expect_restart(o, 3, "partner");
  EXPECT_EQ(node_files(root, 0, names), before) << "node 0's step 3 is repaired bit for bit";
  MPI_Barrier(MPI_COMM_WORLD);
  expect_restart(o, 3, "local");
}

TEST(Levels, XorParityRepairsADamagedFile) {
  ASSERT_EQ(world_size(), 4);
  const auto root = scratch_dir();
  const Options o = write_xor(root, 1, 4, 0);  // nothing drained: only the parity can repair step 3
  const std::vector<std::string> names = {"data.2", "xor.2", "index"};
  const auto before = node_files(root, 2, names);
  MPI_Barrier(MPI_COMM_WORLD);
  damage(node_dir(root, 2) + "/ckpt.3/data.2");
  expect_restart(o, 3, "xor");
  EXPECT_EQ(node_files(root, 2, names), before) << "node 2's step 3 is repaired bit for bit";
  MPI_Barrier(MPI_COMM_WORLD);
  // Two damaged nodes of one group: the parity cannot repair both, restart falls back to step 2.
  damage(node_dir(root, 0) + "/ckpt.3/data.0");
  damage(node_dir(root, 1) + "/ckpt.3/data.1");
  Runtime rt(MPI_COMM_WORLD, o);
  ASSERT_TRUE(rt.status().ok()) << rt.status().to_string();
  State got(world_rank(), world_size()), expected(world_rank(), world_size());
  expected.fill(2);
  got.fill(-1);
  ASSERT_TRUE(got.protect(rt).ok());
  auto r = rt.restart();
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r.value(), 2);
  EXPECT_EQ(r.warning().code(), Code::corrupt) << r.warning().to_string();
  EXPECT_EQ(rt.restart_level(), "local");
  EXPECT_TRUE(all_true(got == expected));
}

/// A run whose restart fails: it registers a region that no checkpoint holds, so every step fails,
/// but only after its reads (which find damage, and rebuild the damaged nodes on the way). `from`:
/// restart(from), or nothing: restart() of the newest, which falls back through every older step.
void failing_restart(const Options& o, std::optional<std::int64_t> from) {
  Runtime rt(MPI_COMM_WORLD, o);
  ASSERT_TRUE(rt.status().ok()) << rt.status().to_string();
  State s(world_rank(), world_size());
  ASSERT_TRUE(s.protect(rt).ok());
  double unstored = 0;
  ASSERT_TRUE(rt.protect_scalar("not_in_any_checkpoint", &unstored).ok());
  const Status r = from ? rt.restart(*from) : rt.restart().status();
  EXPECT_FALSE(r.ok()) << "the restart was meant to fail";
  EXPECT_TRUE(rt.close().ok());
  MPI_Barrier(MPI_COMM_WORLD);
}

// A restart that fails must not set a good checkpoint aside. Steps 1..3 on 2 nodes (or 4) with partner
// copies or parity (step 3 on the nodes only); node 0's step 2 is damaged or lost, and a restart that reaches
// step 2 - restart(2), or restart() falling back past 3 - rebuilds it from the copy, then fails (the
// registration matches no step). The rebuild committed step 2 on node 0 again; that must not roll
// node 0's step 3 back (only the next checkpoint's commit begins a new timeline): step 3 stays whole on
// every node, so that after losing node 1 the next restart still restores it, bit for bit, from
// node 0's copy or the parity. Before: node 0's step 3 became ckpt.3.abandoned (with its copy of
// node 1's files, or its parity), and with node 1 lost the restart fell back to an older step.
TEST(Levels, FailedRestartThatRebuiltAnOlderStepKeepsTheNewerOnes) {
  ASSERT_EQ(world_size(), 4);
  struct Case {
    Redundancy redundancy;
    const char* level;  // restart_level() when node 1 is lost
    bool lose;          // node 0's step 2 lost (else one of its files damaged)
    std::optional<std::int64_t> from;
    int drain_every;                     // 2: step 2 drained, 3 not
    int ranks_per_node = kRanksPerNode;  // 1: 4 nodes (xor: one group of 4)
  };
  const std::vector<Case> cases = {
      {Redundancy::partner, "partner", false, 2, 0},
      {Redundancy::partner, "partner", false, std::nullopt, 0},
      {Redundancy::partner, "partner", true, 2, 0},
      {Redundancy::partner, "partner", true, std::nullopt, 2},
      {Redundancy::partner, "partner", false, 2, 2, 1},
      {Redundancy::xor_parity, "xor", false, 2, 0},
      {Redundancy::xor_parity, "xor", false, std::nullopt, 2},
      {Redundancy::xor_parity, "xor", true, 2, 2},
      {Redundancy::xor_parity, "xor", true, std::nullopt, 0},
      {Redundancy::xor_parity, "xor", false, std::nullopt, 0, 1},
  };
  int n = 0;
  for (const Case& c : cases) {
    const auto root = scratch_dir("." + std::to_string(n++));
    SCOPED_TRACE(std::string(c.level) + (c.lose ? " lost" : " damaged") + (c.from ? " restart(2)" : " restart()") +
                 " drain_every " + std::to_string(c.drain_every) + " nodes " + std::to_string(4 / c.ranks_per_node));
    Options o = level_opts(root, c.drain_every, 5, c.ranks_per_node);
    o.redundancy = c.redundancy;
    o.xor_group = 4 / c.ranks_per_node;  // one group of every node
    write_steps(o, 1, 3);
    if (c.lose) {
      if (world_rank() == 0) ckpt::detail::remove_tree(node_dir(root, 0) + "/ckpt.2");
      MPI_Barrier(MPI_COMM_WORLD);
    } else {
      damage(node_dir(root, 0) + "/ckpt.2/data.0");
    }
    failing_restart(o, c.from);
    if (world_rank() == 0)
      for (int node = 0; node < world_size() / c.ranks_per_node; ++node) {
        EXPECT_EQ(committed(node_dir(root, node)), (std::vector<std::int64_t>{1, 2, 3})) << "node " << node;
        EXPECT_FALSE(exists(node_dir(root, node) + "/ckpt.3.abandoned")) << "node " << node;
      }
    MPI_Barrier(MPI_COMM_WORLD);
    lose_nodes(root, {1});
    expect_restart(o, 3, c.level);
    expect_restart(o, 3, "local");
  }
}

// The other side: a restart that rebuilt an older step and succeeded, then checkpointed, does begin a
// new timeline on every node, the rebuilt one included - the old timeline's newer steps are abandoned
// there too, and the next restart finds the new data.
TEST(Levels, RollBackAfterARebuildAbandonsTheNewerStepsOnEveryNode) {
  ASSERT_EQ(world_size(), 4);
  for (const Redundancy red : {Redundancy::partner, Redundancy::xor_parity}) {
    const bool partner = red == Redundancy::partner;
    const auto root = scratch_dir(partner ? ".partner" : ".xor");
    SCOPED_TRACE(partner ? "partner" : "xor");
    Options o = level_opts(root, 0, 5);
    o.redundancy = red;
    if (!partner) o.xor_group = 2;
    write_steps(o, 1, 4);
    damage(node_dir(root, 0) + "/ckpt.2/data.0");
    constexpr int kNew = 300;
    continue_from(o, 2, 3, 3, kNew);  // restart(2) rebuilds node 0's step 2, then commits a new 3
    if (world_rank() == 0)
      for (int node : {0, 1}) {
        EXPECT_EQ(committed(node_dir(root, node)), (std::vector<std::int64_t>{1, 2, 3})) << "node " << node;
        EXPECT_TRUE(exists(node_dir(root, node) + "/ckpt.4.abandoned")) << "node " << node;
      }
    MPI_Barrier(MPI_COMM_WORLD);
    expect_restart(o, 3, "local", kNew + 3);
    lose_nodes(root, {0});
    expect_restart(o, 3, partner ? "partner" : "xor", kNew + 3);
  }
}

// 8 ranks as 4 nodes (levels_8 runs only these).
TEST(Levels8, PartnerSurvivesLostNodesThatAreNotNeighbours) {
  ASSERT_EQ(world_size(), 8);
  const auto root = scratch_dir();
  Options o = level_opts(root, 2, 3);
  o.redundancy = Redundancy::partner;
  write_steps(o, 1, 3);  // step 2 drained, step 3 on the nodes only
  // Nodes 0 and 2: each one's partner copy is on a node that survived (1 and 3).
  lose_nodes(root, {0, 2});
  expect_restart(o, 3, "partner");
  // Nodes 1 and 2 are neighbours: node 1's partner copy was on node 2, so step 3 is gone; the drained
  // step 2 is what is left.
  lose_nodes(root, {1, 2});
  expect_restart(o, 2, "global");
}

TEST(Levels8, XorSurvivesOneLostNodePerGroup) {
  ASSERT_EQ(world_size(), 8);
  const auto root = scratch_dir();
  // 8 ranks as 8 nodes in two groups of 4: {0..3}, {4..7}.
  const Options o = write_xor(root, 1, 4);
  lose_nodes(root, {1, 6});
  expect_restart(o, 3, "xor");
  lose_nodes(root, {4, 5});  // two of one group
  expect_restart(o, 2, "global");
}

TEST(Levels8, XorWithSeveralRanksPerNodeAndUnevenGroups) {
  ASSERT_EQ(world_size(), 8);
  {
    // 4 nodes of 2 ranks, one group of 4: each position on the nodes is its own parity set.
    const auto root = scratch_dir(".rpn2");
    const Options o = write_xor(root, 2, 4);
    lose_nodes(root, {3});
    expect_restart(o, 3, "xor");
  }
  {
    // 8 nodes, groups of 3: {0,1,2} and {3..7} (the last group takes the nodes left over).
    const auto root = scratch_dir(".g3");
    const Options o = write_xor(root, 1, 3);
    lose_nodes(root, {2, 7});
    expect_restart(o, 3, "xor");
    lose_nodes(root, {3, 7});
    expect_restart(o, 2, "global");
  }
}

// A full node disk (levels_enospc: tests/reliability's faultinject shim preloaded, armed through
// dlsym): that rank's file goes to `dir`, and the checkpoint is committed there instead of failing.
TEST(LevelsSpill, FullNodeDiskWritesThatCheckpointGlobally) {
  ASSERT_EQ(world_size(), 4);
  using ConfigureFn = void (*)(const char*, const char*, const char*, long long, long long);
  auto configure = reinterpret_cast<ConfigureFn>(dlsym(RTLD_DEFAULT, "faultinj_configure"));
  auto hits = reinterpret_cast<long long (*)()>(dlsym(RTLD_DEFAULT, "faultinj_hits"));
  ASSERT_TRUE(configure && hits) << "run with LD_PRELOAD=libfaultinject.so (ctest levels_enospc)";
  struct Case {
    const char* what;
    const char* pattern;  // the one file that hits a full disk
    long long after;      // bytes written before it does
    const char* redundancy;
  };
  for (const Case& c : {Case{"mid-file, node 1", "/local/node1/ckpt.3.tmp/data.3", 100 << 10, "none"},
                        Case{"at the header, node 0, xor", "/local/node0/ckpt.3.tmp/data.0", 0, "xor"}}) {
    SCOPED_TRACE(c.what);
    const auto root = scratch_dir(std::string(".") + c.redundancy);
    Options o = level_opts(root, 0);  // nothing is drained: step 3 can only be in `dir` if it spilled
    o.redundancy = std::string(c.redundancy) == "xor" ? Redundancy::xor_parity : Redundancy::none;
    configure(c.pattern, "write", "ENOSPC", c.after, 0);
    write_steps(o, 1, 4);  // every ticket succeeds
    long long mine = hits(), all = 0;
    configure(nullptr, nullptr, nullptr, 0, 0);
    MPI_Allreduce(&mine, &all, 1, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
    EXPECT_GT(all, 0) << "the fault was never injected";
    EXPECT_EQ(committed(o.dir), (std::vector<std::int64_t>{3}));
    EXPECT_EQ(committed(node_dir(root, world_rank() / kRanksPerNode)), (std::vector<std::int64_t>{2, 4}));
    EXPECT_FALSE(exists(node_dir(root, world_rank() / kRanksPerNode) + "/ckpt.3.tmp"));
    EXPECT_FALSE(exists(o.dir + "/ckpt.3.tmp"));
    MPI_Barrier(MPI_COMM_WORLD);
    expect_restart(o, 4, "local");
    // Both nodes lost: step 3, written to `dir` because a disk was full, is what is left, bit for bit.
    lose_nodes(root, {0, 1});
    expect_restart(o, 3, "global");
  }
}

// A roll-back whose checkpoint spills: steps 1..5 on the node level, a run restarts from 2 and its
// step 3 goes to `dir` (node 1's disk full). The node level's 3, 4 and 5 are the old timeline's:
// restart() must give the spilled 3 from `dir` (before: the node level's 5, read first).
TEST(LevelsSpill, RollBackThatSpillsAbandonsTheNodeLevelsNewerSteps) {
  ASSERT_EQ(world_size(), 4);
  using ConfigureFn = void (*)(const char*, const char*, const char*, long long, long long);
  auto configure = reinterpret_cast<ConfigureFn>(dlsym(RTLD_DEFAULT, "faultinj_configure"));
  ASSERT_TRUE(configure) << "run with LD_PRELOAD=libfaultinject.so (ctest levels_enospc)";
  const auto root = scratch_dir();
  const Options o = level_opts(root, 0, 10);
  write_steps(o, 1, 5);
  constexpr int kNew = 3000;
  configure("/local/node1/ckpt.3.tmp/data.3", "write", "ENOSPC", 0, 0);
  continue_from(o, 2, 3, 3, kNew);
  configure(nullptr, nullptr, nullptr, 0, 0);
  EXPECT_EQ(committed(o.dir), (std::vector<std::int64_t>{3}));
  EXPECT_EQ(committed(node_dir(root, world_rank() / kRanksPerNode)), (std::vector<std::int64_t>{1, 2}));
  MPI_Barrier(MPI_COMM_WORLD);
  Runtime rt(MPI_COMM_WORLD, o);
  ASSERT_TRUE(rt.status().ok()) << rt.status().to_string();
  State s(world_rank(), world_size()), expected(world_rank(), world_size());
  expected.fill(kNew + 3);
  ASSERT_TRUE(s.protect(rt).ok());
  auto r = rt.restart();
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r.value(), 3);
  EXPECT_EQ(rt.restart_level(), "global");
  EXPECT_TRUE(all_true(s == expected)) << "restored data are not the spilled step 3 of the new timeline";
}
