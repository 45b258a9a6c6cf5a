// The two-level index (option index_format: 2; docs/format.md, "Version 2 index"): written at commit as a
// root (`index`), a `catalog` and one `index.<w>` per writer (a rank, or an rbio writer's group), read back by restart,
// through the one place that reads an index (read_index_file). At 4 ranks, on every transport that
// writes files: global, local, joined and scalar variables restart exactly; a damaged or missing
// sub-index makes its step damaged (restart falls back to the step before); both versions in one root;
// the layouts this build does not write it in are refused. N->M restarts of it: nm_index2_* and nm_index2map_* (CMake).
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <string>
#include <utility>
#include <vector>

#include "base/index_v2.hpp"
#include "base/store.hpp"
#include "ckpt/ckpt.hpp"
#include "ckpt/reader.hpp"
#include "test_util.hpp"

using namespace ckpt;
using ckpt::test::all_true;
using ckpt::test::scratch_dir;
using ckpt::test::world_rank;
using ckpt::test::world_size;

namespace {

constexpr std::uint64_t kCols = 5;

/// A rank's state: rows of a global 2D array, a local array of its own length, a joined array of
/// 2 + rank rows, a scalar.
struct State {
  int rank = world_rank(), size = world_size();
  std::vector<double> grid = std::vector<double>(3 * kCols);
  std::vector<std::int32_t> local = std::vector<std::int32_t>(10 + 7 * static_cast<std::size_t>(rank));
  std::vector<std::int64_t> rows = std::vector<std::int64_t>(2 + static_cast<std::size_t>(rank));
  double t = 0;

  void fill(int salt) {
    for (std::size_t i = 0; i < grid.size(); ++i) grid[i] = salt * 1e6 + rank * 1e3 + static_cast<double>(i);
    for (std::size_t i = 0; i < local.size(); ++i) local[i] = salt * 100000 + rank * 1000 + static_cast<int>(i);
    for (std::size_t i = 0; i < rows.size(); ++i) rows[i] = salt * 1000 + rank * 10 + static_cast<std::int64_t>(i);
    t = salt + 0.25;
  }
  Status protect(Runtime& rt) {
    const std::uint64_t n = static_cast<std::uint64_t>(size) * 3;
    CKPT_RETURN_IF_ERROR(rt.protect("grid", grid.data(), DType::f64,
                                    Block{{n, kCols}, {static_cast<std::uint64_t>(rank) * 3, 0}, {3, kCols}}));
    CKPT_RETURN_IF_ERROR(rt.protect("local", local.data(), DType::i32, {local.size()}));
    const std::uint64_t first =
        2 * static_cast<std::uint64_t>(rank) + rank * (rank - 1) / 2;  // its rows, also at restart
    CKPT_RETURN_IF_ERROR(rt.protect("rows", rows.data(), DType::i64, Joined{{rows.size()}, first}));
    return rt.protect("t", &t, DType::f64, Dims{});
  }
  bool operator==(const State& o) const { return grid == o.grid && local == o.local && rows == o.rows && t == o.t; }
};

Options v2_options(const std::string& dir, const std::string& transport = "posix") {
  Options o = Options::defaults();
  o.dir = dir;
  o.transport = transport;
  o.index_format = 2;
  return o;
}

/// Writes steps `steps` (state filled with the step) with `o`.
void write_steps(const Options& o, const std::vector<std::int64_t>& steps) {
  State s;
  Runtime rt(MPI_COMM_WORLD, o);
  ASSERT_TRUE(rt.status().ok()) << rt.status().to_string();
  ASSERT_TRUE(s.protect(rt).ok());
  for (std::int64_t step : steps) {
    s.fill(static_cast<int>(step));
    const Status st = rt.checkpoint(step).wait();
    ASSERT_TRUE(st.ok()) << st.to_string();
  }
}

/// A fresh Runtime with `o` restarts step `step` (written by write_steps) exactly; returns the index bytes
/// this rank read (Runtime::restart_index_bytes).
std::uint64_t restarts_exactly(const Options& o, std::int64_t step) {
  State want, got;
  want.fill(static_cast<int>(step));
  Runtime rt(MPI_COMM_WORLD, o);
  EXPECT_TRUE(got.protect(rt).ok());
  const Status st = rt.restart(step);
  EXPECT_TRUE(st.ok()) << st.to_string();
  EXPECT_TRUE(all_true(got == want));
  return rt.restart_index_bytes();
}

std::vector<unsigned char> file_bytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

/// The version in an index object's header (bytes 8..11, little-endian), 0 when unreadable.
std::uint32_t header_version(const std::string& path) {
  const auto b = file_bytes(path);
  if (b.size() < 16) return 0;
  return static_cast<std::uint32_t>(b[8]) | static_cast<std::uint32_t>(b[9]) << 8 |
         static_cast<std::uint32_t>(b[10]) << 16 | static_cast<std::uint32_t>(b[11]) << 24;
}

bool exists(const std::string& path) { return ::access(path.c_str(), F_OK) == 0; }

/// Rank 0: a serial Reader opens step `step` of `dir` (State's checkpoint filled with the step), verifies it
/// and reads the joined array's rows of every rank, in rank order.
void expect_reader_verifies(const std::string& dir, std::int64_t step) {
  if (world_rank() != 0) return;
  auto r = Reader::open(dir);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  auto opened = r->open_step(step);
  ASSERT_TRUE(opened.ok()) << opened.status().to_string();
  CheckpointReader c = std::move(opened).value();
  const Status vs = c.verify();
  EXPECT_TRUE(vs.ok()) << vs.to_string();
  std::vector<std::int64_t> all;
  for (int k = 0; k < world_size(); ++k)
    for (int i = 0; i < 2 + k; ++i) all.push_back(step * 1000 + k * 10 + i);
  std::vector<std::int64_t> read(all.size());
  const Status rs = c.read("rows", read.data(), read.size() * sizeof(std::int64_t));
  ASSERT_TRUE(rs.ok()) << rs.to_string();
  EXPECT_EQ(read, all);
}

}  // namespace

TEST(IndexV2, EveryTransportWritesTheTwoLevelsAndRestartsExactly) {
  std::vector<std::string> transports = {"posix", "mpiio", "rbio"};
#if CKPTTEST_HAVE_HDF5
  transports.push_back("hdf5");
#endif
  for (const std::string& t : transports) {
    SCOPED_TRACE(t);
    const std::string dir = scratch_dir("-" + t);
    write_steps(v2_options(dir, t), {4});
    if (world_rank() == 0) {
      const std::string c = dir + "/ckpt.4";
      EXPECT_EQ(header_version(c + "/index"), 2u) << "the root is the commit point";
      EXPECT_TRUE(exists(c + "/catalog"));
      // rbio (one writer per node): each writer writes its node's sub-index (GroupWriters... below).
      const auto bytes = file_bytes(c + "/index");
      auto root = detail::decode_root_index(bytes.data(), bytes.size());
      ASSERT_TRUE(root.ok()) << root.status().to_string();
      const int writers = static_cast<int>(root->writers);
      if (t != "rbio") EXPECT_EQ(writers, world_size());
      EXPECT_GE(writers, 1);
      for (int w = 0; w < writers; ++w) EXPECT_TRUE(exists(c + "/index." + std::to_string(w))) << w;
      EXPECT_FALSE(exists(c + "/index." + std::to_string(writers)));
    }
    State want, got;
    want.fill(4);
    Runtime rt(MPI_COMM_WORLD, v2_options(dir, t));
    ASSERT_TRUE(got.protect(rt).ok());
    const Result<std::int64_t> s = rt.restart();
    ASSERT_TRUE(s.ok()) << s.status().to_string();
    EXPECT_EQ(s.value(), 4);
    EXPECT_TRUE(got == want);
    // The Reader assembles it too: the joined array's rows of every rank, in rank order.
    expect_reader_verifies(dir, 4);
    MPI_Barrier(MPI_COMM_WORLD);
  }
}

/// Rank 0: the indexes of step `step` in `spread` (version 2, the ranks' own sub-indices) and `gathered`
/// (version 1) are the same, the checkpoint id, creation time and version 1's writer map aside.
void expect_same_index(const std::string& spread, const std::string& gathered, std::int64_t step) {
  if (world_rank() != 0) return;
  const std::string name = "/ckpt." + std::to_string(step);
  ASSERT_EQ(header_version(spread + name + "/index"), 2u);
  auto b2 = detail::read_index_file(spread + name);
  auto b1 = detail::read_index_file(gathered + name);
  ASSERT_TRUE(b2.ok()) << b2.status().to_string();
  ASSERT_TRUE(b1.ok()) << b1.status().to_string();
  auto d2 = detail::decode_index(b2->data(), b2->size());
  auto d1 = detail::decode_index(b1->data(), b1->size());
  ASSERT_TRUE(d2.ok() && d1.ok());
  detail::Index i2 = std::move(d2).value(), i1 = std::move(d1).value();
  // Shared files are named after the checkpoint id (mpiio's coio.<id>.<k>): the same name without it.
  for (detail::Index* i : {&i1, &i2}) {
    char hex[17];
    std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(i->ckpt_id));
    for (detail::FileRecord& f : i->files)
      if (const auto at = f.name.find(hex); at != std::string::npos) f.name.replace(at, 16, "<id>");
  }
  i1.ckpt_id = i2.ckpt_id = 0;
  i1.created_unix = i2.created_unix = 0;
  i1.rank_file = detail::derive_rank_file(i1);
  EXPECT_EQ(detail::encode_index(i1), detail::encode_index(i2));
}

/// Writes step `step` with `o` (index_format 2) and with `o` in `gathered` with the one-level index, and
/// expects the same index from both (expect_same_index).
void write_both_and_compare(const Options& o, const std::string& gathered, std::int64_t step) {
  write_steps(o, {step});
  Options o1 = o;
  o1.dir = gathered;
  o1.index_format = 1;
  write_steps(o1, {step});
  expect_same_index(o.dir, gathered, step);
}

/// Rank 0: the directories in the catalog of `dir`/ckpt.`step` (a commit's, from the writers' boxes) are those
/// split_index() makes from the assembled index's blocks (catalog_directories_offset() on; the entries, whose
/// sub-index checksums depend on how the sub-indices were encoded, aside).
void expect_split_directories(const std::string& dir, std::int64_t step) {
  if (world_rank() != 0) return;
  const std::string c = dir + "/ckpt." + std::to_string(step);
  const auto root_bytes = file_bytes(c + "/index"), cat_bytes = file_bytes(c + "/catalog");
  auto root = detail::decode_root_index(root_bytes.data(), root_bytes.size());
  ASSERT_TRUE(root.ok()) << root.status().to_string();
  auto written = detail::decode_catalog(cat_bytes.data(), cat_bytes.size(), root->rule);
  ASSERT_TRUE(written.ok()) << written.status().to_string();
  auto whole = detail::read_index_file(c);
  ASSERT_TRUE(whole.ok()) << whole.status().to_string();
  auto idx = detail::decode_index(whole->data(), whole->size());
  ASSERT_TRUE(idx.ok()) << idx.status().to_string();
  auto split = detail::split_index(idx.value(), root->rule, root->g, root->token, written->rank_map);
  ASSERT_TRUE(split.ok()) << split.status().to_string();
  auto made = detail::decode_catalog(split->catalog.data(), split->catalog.size(), root->rule);
  ASSERT_TRUE(made.ok()) << made.status().to_string();
  EXPECT_EQ(written->directories, made->directories);
  ASSERT_EQ(split->root.vars.size(), root->vars.size());
  for (std::size_t v = 0; v < root->vars.size(); ++v) {
    EXPECT_EQ(root->vars[v].dir.entries, split->root.vars[v].dir.entries) << root->vars[v].var.name;
    EXPECT_EQ(root->vars[v].dir.checksum, split->root.vars[v].dir.checksum) << root->vars[v].var.name;
  }
}

/// The root index of `dir`/ckpt.`step` (rank 0).
detail::RootIndex root_of(const std::string& dir, std::int64_t step) {
  const auto bytes = file_bytes(dir + "/ckpt." + std::to_string(step) + "/index");
  auto root = detail::decode_root_index(bytes.data(), bytes.size());
  EXPECT_TRUE(root.ok()) << root.status().to_string();
  return root.ok() ? std::move(root).value() : detail::RootIndex{};
}

// With posix, mpiio, hdf5 and rbio with one shared file each rank writes its own sub-index (the commit
// reduces the ranks' reports; rank 0 gets no block record; a shared file - mpiio's one or one per group of
// ranks, hdf5's, rbio's - is the same record in the sub-index of every rank with blocks in it): what is read
// back is the index the one-level commit gathers, field for field - the variables with their statistics,
// uniform flags and joined row counts, the files, every block - the checkpoint id and the creation time
// aside (two runs).
TEST(IndexV2, RanksWriteTheirOwnSubIndicesTheIndexTheGatherWould) {
  struct Case {
    std::string transport;
    int files;  // the files the checkpoint has (0: one per rank)
  };
  std::vector<Case> cases = {{"posix", 0}, {"mpiio", 1}, {"mpiio", 2}, {"rbio", 1}};
#if CKPTTEST_HAVE_HDF5
  cases.push_back({"hdf5", 1});
  cases.push_back({"hdf5-sync", 1});
#endif
  for (const Case& k : cases) {
    SCOPED_TRACE(k.transport + ", files " + std::to_string(k.files));
    const std::string spread = scratch_dir("index2-spread"), gathered = scratch_dir("index2-gathered");
    Options o = v2_options(spread, k.transport);
    o.mpiio_files = std::max(k.files, 1);
    o.rbio_writers = 2;
    o.rbio_files = 1;  // rbio: one shared file
    write_both_and_compare(o, gathered, 3);
    if (world_rank() == 0) {  // no ASSERT here: the other ranks go on into the collective restart below
      for (int r = 0; r < world_size(); ++r) EXPECT_TRUE(exists(spread + "/ckpt.3/index." + std::to_string(r)));
      EXPECT_EQ(root_of(spread, 3).writers, static_cast<std::uint32_t>(world_size()));
      auto idx = detail::load_checkpoint_dir(spread + "/ckpt.3");
      EXPECT_TRUE(idx.ok()) << idx.status().to_string();
      const long t = idx.ok() ? idx->find_var("t") : -1;
      EXPECT_GE(t, 0);
      if (t >= 0) EXPECT_TRUE(idx->vars[static_cast<std::size_t>(t)].uniform);  // the same scalar on every rank
      if (idx.ok()) EXPECT_EQ(idx->files.size(), static_cast<std::size_t>(k.files == 0 ? world_size() : k.files));
    }
    restarts_exactly(o, 3);
    MPI_Barrier(MPI_COMM_WORLD);
  }
}

// rbio with a file per writer: each writer writes the sub-index of its group (the ranks whose streams go to
// its file), gathered from its ranks; rank 0 receives the writers' entries and boxes. The root names them
// by rule: 2 writers at 4 ranks are groups of 2 (rule 1), 3 writers groups of 2, 1 and 1 (rule 2, the rank
// map), 4 writers one rank each (rule 0). What is read back is the index rank 0 gathers and splits with the
// one-level commit of the same transport, field for field; each rank restarts exactly reading the root,
// its writer's entry and sub-index; the Reader verifies and reads the joined rows; ckpt verify passes.
TEST(IndexV2, GroupWritersWriteTheirGroupsSubIndices) {
  if (world_size() != 4) GTEST_SKIP() << "the groups below are those of 4 ranks";
  struct Case {
    int rbio_writers;
    detail::WriterRule rule;
    std::uint32_t g;
  };
  for (const Case& k : {Case{2, detail::WriterRule::groups, 2}, Case{3, detail::WriterRule::mapped, 0},
                        Case{4, detail::WriterRule::per_rank, 0}, Case{1, detail::WriterRule::groups, 4}}) {
    SCOPED_TRACE("rbio_writers " + std::to_string(k.rbio_writers));
    const std::string grouped = scratch_dir("index2-groups"), gathered = scratch_dir("index2-groups-1");
    Options o = v2_options(grouped, "rbio");
    o.rbio_writers = k.rbio_writers;
    write_both_and_compare(o, gathered, 6);
    expect_split_directories(grouped, 6);
    if (world_rank() == 0) {
      const detail::RootIndex root = root_of(grouped, 6);
      EXPECT_EQ(root.writers, static_cast<std::uint32_t>(k.rbio_writers));
      EXPECT_EQ(root.rule, k.rule);
      EXPECT_EQ(root.g, k.g);
      const std::string c = grouped + "/ckpt.6";
      for (int w = 0; w < k.rbio_writers; ++w) EXPECT_TRUE(exists(c + "/index." + std::to_string(w))) << w;
      EXPECT_FALSE(exists(c + "/index." + std::to_string(k.rbio_writers)));
    }
    expect_reader_verifies(grouped, 6);
    // Restart N->N: the root, its writer's catalog entry (rule 2: and its rank map entry) and sub-index
    // (rbio's writer of this rank's group: group r * k / P), nothing of the other writers'.
    const std::uint64_t read = restarts_exactly(o, 6);
    const std::string c = grouped + "/ckpt.6";
    const int w = world_rank() * k.rbio_writers / world_size();
    const std::uint64_t root = file_bytes(c + "/index").size(),
                        own = file_bytes(c + "/index." + std::to_string(w)).size();
    EXPECT_GE(read, root + own);
    EXPECT_LE(read, root + own + 40 + (k.rule == detail::WriterRule::mapped ? 4 : 0));  // + its entry (and map entry)
    MPI_Barrier(MPI_COMM_WORLD);
  }
}

// A group writer checks its group's global blocks for overlap and sends rank 0 their union as merged boxes
// (one per variable where the group's blocks form a grid of a box), which rank 0 checks across groups: at 4
// ranks with 2 rbio writers (groups {0, 1} and {2, 3}) of a 1-D global array of 4 rows a rank, an overlap
// inside a group (named by its blocks' ranks, by the writer) and one across groups (named by the merged
// boxes, by rank 0) are refused on every rank, naming the array; contiguous groups (each sends one box) and
// groups whose rows interleave (rank r holds rows at r's place in 0, 2, 1, 3: nothing merges) commit the same
// index as the one-level gather, with the catalog's directories of split_index(), and restart exactly,
// N->N and on 2 ranks.
TEST(IndexV2, GroupWritersCheckOverlapsAndSendMergedBoxes) {
  if (world_size() != 4) GTEST_SKIP() << "the groups below are those of 4 ranks";
  const int rank = world_rank();
  struct Case {
    std::string name;
    std::vector<std::uint64_t> first;  // rank r's first row
  };
  for (const Case& k : {Case{"inside a group", {0, 2, 8, 12}}, Case{"across groups", {0, 4, 6, 12}},
                        Case{"contiguous", {0, 4, 8, 12}}, Case{"interleaved", {0, 8, 4, 12}}}) {
    SCOPED_TRACE(k.name);
    const bool overlaps = k.name == "inside a group" || k.name == "across groups";
    const std::string two = scratch_dir("index2-boxes"), one = scratch_dir("index2-boxes-1");
    std::vector<double> mine(4);
    for (std::size_t i = 0; i < mine.size(); ++i) mine[i] = 100.0 * rank + static_cast<double>(i);
    const Block block{{16}, {k.first[static_cast<std::size_t>(rank)]}, {4}};
    for (const int format : {2, 1}) {
      Options o = v2_options(format == 2 ? two : one, "rbio");
      o.rbio_writers = 2;
      o.index_format = format;
      Runtime rt(MPI_COMM_WORLD, o);
      ASSERT_TRUE(rt.status().ok()) << rt.status().to_string();
      ASSERT_TRUE(rt.protect("x", mine.data(), DType::f64, block).ok());
      const Status st = rt.checkpoint(3).wait();
      if (overlaps) {
        EXPECT_EQ(st.code(), Code::invalid_argument) << st.to_string();
        EXPECT_NE(st.message().find("global array 'x'"), std::string::npos) << st.to_string();
        EXPECT_NE(st.message().find("overlap"), std::string::npos) << st.to_string();
        const bool merged_note = st.message().find("(a box is the union") != std::string::npos;
        if (k.name == "inside a group") {  // the group's writer names the blocks, as rank 0's one-level check does
          EXPECT_NE(st.message().find("rank 0 [0:4) and rank 1 [2:6)"), std::string::npos) << st.to_string();
          EXPECT_FALSE(merged_note) << st.to_string();
        } else {  // rank 0: group 0's merged box [0:8) against rank 2's
          EXPECT_EQ(merged_note, format == 2) << st.to_string();
          if (format == 2)
            EXPECT_NE(st.message().find("rank 0 [0:8) and rank 2 [6:10)"), std::string::npos) << st.to_string();
        }
      } else {
        EXPECT_TRUE(st.ok()) << st.to_string();
      }
    }
    if (overlaps) continue;
    expect_same_index(two, one, 3);
    expect_split_directories(two, 3);
    {
      Options o = v2_options(two, "rbio");
      o.rbio_writers = 2;
      std::vector<double> got(4, -1);
      Runtime rt(MPI_COMM_WORLD, o);
      ASSERT_TRUE(rt.protect("x", got.data(), DType::f64, block).ok());
      const Status st = rt.restart(3);
      EXPECT_TRUE(st.ok()) << st.to_string();
      EXPECT_EQ(got, mine);
    }
    // On 2 ranks (N->M through the directories): rank c holds rows [8c, 8c + 8), written by the ranks whose
    // first rows are 8c and 8c + 4.
    MPI_Comm two_ranks;
    MPI_Comm_split(MPI_COMM_WORLD, rank < 2 ? 0 : MPI_UNDEFINED, rank, &two_ranks);
    if (two_ranks != MPI_COMM_NULL) {
      Options o = v2_options(two, "rbio");
      std::vector<double> got(8, -1), want(8);
      std::vector<int> writer_of(4);  // rows [4i, 4i + 4) were rank writer_of[i]'s
      for (int r = 0; r < 4; ++r) writer_of[k.first[static_cast<std::size_t>(r)] / 4] = r;
      for (int i = 0; i < 8; ++i) want[static_cast<std::size_t>(i)] = 100.0 * writer_of[2 * rank + i / 4] + i % 4;
      Runtime rt(two_ranks, o);
      ASSERT_TRUE(
          rt.protect("x", got.data(), DType::f64, Block{{16}, {8 * static_cast<std::uint64_t>(rank)}, {8}}).ok());
      const Status st = rt.restart(3);
      EXPECT_TRUE(st.ok()) << st.to_string();
      EXPECT_EQ(got, want);
      MPI_Comm_free(&two_ranks);
    }
    MPI_Barrier(MPI_COMM_WORLD);
  }
}

// Transport groups (option groups) with the two-level index: rbio's writers with a posix or an mpiio group (a
// rank's posix file and its group's rbio file in its writer's sub-index; the shared mpiio file in both
// writers' sub-indices, counted once), posix with mpiio, and a null group beside posix or rbio
// (its placeholder record is rank 0's, merged on rank 0). Each is the index the one-level gather writes,
// the Reader verifies it, and the state restarts exactly (the null group's variable is not stored).
TEST(IndexV2, TransportGroupsWriteTheTwoLevels) {
  struct Case {
    std::string transport, group_transport, match;
  };
  for (const Case& k : {Case{"rbio", "posix", "local"}, Case{"rbio", "mpiio", "local"}, Case{"posix", "mpiio", "local"},
                        Case{"posix", "null", "scratch"}, Case{"rbio", "null", "scratch"}}) {
    SCOPED_TRACE(k.transport + " + " + k.group_transport);
    const std::string two = scratch_dir("index2-tgroups"), one = scratch_dir("index2-tgroups-1");
    Options o = v2_options(two, k.transport);
    o.rbio_writers = 2;
    o.groups.push_back(Options::Group{"g", {k.match}, k.group_transport});
    for (const int format : {2, 1}) {
      Options of = o;
      of.dir = format == 2 ? two : one;
      of.index_format = format;
      State s;
      std::vector<float> scratch(4, 1.5f);
      Runtime rt(MPI_COMM_WORLD, of);
      ASSERT_TRUE(rt.status().ok()) << rt.status().to_string();
      ASSERT_TRUE(s.protect(rt).ok());
      ASSERT_TRUE(rt.protect("scratch", scratch.data(), DType::f32, {scratch.size()}).ok());
      s.fill(7);
      const Status st = rt.checkpoint(7).wait();
      ASSERT_TRUE(st.ok()) << st.to_string();
    }
    expect_same_index(two, one, 7);
    expect_reader_verifies(two, 7);
    restarts_exactly(o, 7);
    MPI_Barrier(MPI_COMM_WORLD);
  }
}

// The ordered reduction (when the one allreduce cannot decide) gives the same index: ranks that register
// different variables (each even rank one of its own, a global array with blocks on some ranks only),
// and with the same variables, minima that compare equal with other bits (-0.0 on rank 0, 0.0 elsewhere),
// whose rank-order merge an unordered one could not reproduce.
TEST(IndexV2, TheOrderedReductionGivesTheSameIndex) {
  for (const bool same_vars : {false, true}) {
    const std::string spread = scratch_dir("index2-ordered-2"), gathered = scratch_dir("index2-ordered-1");
    for (const int format : {2, 1}) {
      Options o = v2_options(format == 2 ? spread : gathered);
      o.index_format = format;
      Runtime rt(MPI_COMM_WORLD, o);
      ASSERT_TRUE(rt.status().ok()) << rt.status().to_string();
      const int r = world_rank();
      std::vector<double> z = {r == 0 ? -0.0 : 0.0, 1.0 + r};
      std::vector<std::int32_t> own(3 + static_cast<std::size_t>(r), r);
      std::vector<double> part(4, 0.5 * r);
      ASSERT_TRUE(rt.protect("z", z.data(), DType::f64, {z.size()}).ok());
      if (!same_vars && r % 2 == 0)
        ASSERT_TRUE(rt.protect("own_" + std::to_string(r), own.data(), DType::i32, {own.size()}).ok());
      if (!same_vars && r >= 1) {
        const std::uint64_t n = 4 * static_cast<std::uint64_t>(world_size() - 1);
        ASSERT_TRUE(
            rt.protect("part", part.data(), DType::f64, Block{{n}, {4 * static_cast<std::uint64_t>(r - 1)}, {4}}).ok());
      }
      const Status st = rt.checkpoint(5).wait();
      ASSERT_TRUE(st.ok()) << st.to_string();
    }
    expect_same_index(spread, gathered, 5);
  }
}

// The allreduce of a commit takes the variables' count of the last agreement that held instead of
// agreeing on it again (one collective less per commit): registrations that change between commits of one
// Runtime - one rank adds a variable, then drops it, every rank adds one, one rank renames one at the same
// count - commit the same index as the one-level gather of the same sequence, step by step, and restart.
TEST(IndexV2, RegistrationsThatChangeBetweenCommitsAgreeAlike) {
  const std::string spread = scratch_dir("index2-changing-2"), gathered = scratch_dir("index2-changing-1");
  const int r = world_rank();
  for (const int format : {2, 1}) {
    Options o = v2_options(format == 2 ? spread : gathered);
    o.index_format = format;
    o.keep = 20;  // every step compared below
    Runtime rt(MPI_COMM_WORLD, o);
    ASSERT_TRUE(rt.status().ok()) << rt.status().to_string();
    std::vector<double> a(4, 1.0 + r), extra(2 + static_cast<std::size_t>(r), -1.0 * r), w(3, 0.5 * r);
    ASSERT_TRUE(rt.protect("a", a.data(), DType::f64, {a.size()}).ok());
    auto commit = [&](std::int64_t step) {
      a[0] = static_cast<double>(step);
      const Status st = rt.checkpoint(step).wait();
      EXPECT_TRUE(st.ok()) << "step " << step << ": " << st.to_string();
    };
    commit(1);  // the count agreed first, the same everywhere: kept
    commit(2);  // the kept count, the one allreduce decides
    if (r == 1) EXPECT_TRUE(rt.protect("extra", extra.data(), DType::f64, {extra.size()}).ok());
    commit(3);  // rank 1 sends another count than the kept one: the ordered reduction decides, none kept
    commit(4);  // the count agreed first: they differ, the ordered reduction again
    if (r == 1) EXPECT_TRUE(rt.unprotect("extra").ok());
    commit(5);  // agreed first, the same again: kept
    commit(6);  // the kept count, the one allreduce
    EXPECT_TRUE(rt.protect("w", w.data(), DType::f64, {w.size()}).ok());
    commit(7);  // every rank one more than the kept count: the ordered reduction, none kept
    commit(8);  // agreed first: kept
    commit(9);  // the kept count, the one allreduce
    if (r == world_size() - 1) {  // the same count, another name
      EXPECT_TRUE(rt.unprotect("w").ok());
      EXPECT_TRUE(rt.protect("w_renamed", w.data(), DType::f64, {w.size()}).ok());
    }
    commit(10);  // the kept count, registrations that differ: the ordered reduction, the count kept
    commit(11);
  }
  for (std::int64_t step = 1; step <= 11; ++step) expect_same_index(spread, gathered, step);
  Runtime rt(MPI_COMM_WORLD, v2_options(spread));
  std::vector<double> a(4, 0.0), w(3, 0.0);
  ASSERT_TRUE(rt.protect("a", a.data(), DType::f64, {a.size()}).ok());
  ASSERT_TRUE(rt.protect(r == world_size() - 1 ? "w_renamed" : "w", w.data(), DType::f64, {w.size()}).ok());
  const Status st = rt.restart(11);
  EXPECT_TRUE(st.ok()) << st.to_string();
  EXPECT_TRUE(all_true(a[0] == 11.0 && a[1] == 1.0 + r && w[2] == 0.5 * r));
}

// The agreement of that commit is the reduction's: a variable one rank registers with another dtype
// fails the checkpoint on every rank with the same message, naming the first such rank, and nothing is
// committed.
TEST(IndexV2, TheReducedAgreementFailsEveryRankAlike) {
  if (world_size() < 3) GTEST_SKIP() << "needs 3 ranks: ranks 2 and up disagree with ranks 0 and 1";
  const std::string dir = scratch_dir("index2-agree");
  {
    Runtime rt(MPI_COMM_WORLD, v2_options(dir));
    std::vector<double> a(8, 1.0);
    std::vector<float> b(8, 2.0f);
    const bool odd = world_rank() >= 2;  // ranks 2, 3 disagree
    ASSERT_TRUE(
        (odd ? rt.protect("g", b.data(), DType::f32, {b.size()}) : rt.protect("g", a.data(), DType::f64, {a.size()}))
            .ok());
    const Status s = rt.checkpoint(1).wait();
    ASSERT_FALSE(s.ok());
    EXPECT_NE(s.message().find("'g' is registered differently on rank 2"), std::string::npos) << s.to_string();
    std::vector<char> msg(s.message().begin(), s.message().end());
    msg.resize(512, 0);
    std::vector<char> first(msg);
    MPI_Bcast(first.data(), 512, MPI_CHAR, 0, MPI_COMM_WORLD);
    EXPECT_TRUE(all_true(first == msg));
  }
  if (world_rank() == 0) EXPECT_FALSE(exists(dir + "/ckpt.1"));
}

TEST(IndexV2, ADamagedOrMissingSubIndexMakesItsStepDamaged) {
  for (const bool remove : {false, true}) {
    SCOPED_TRACE(remove ? "index.2 removed" : "a byte of index.2 flipped");
    const std::string dir = scratch_dir(remove ? "-removed" : "-flipped");
    write_steps(v2_options(dir), {1, 2});
    if (world_rank() == 0) {
      // No ASSERT here: the other ranks wait in the barrier below.
      const std::string sub = dir + "/ckpt.2/index." + std::to_string(world_size() > 2 ? 2 : 0);
      if (remove) {
        EXPECT_EQ(std::remove(sub.c_str()), 0);
      } else {
        auto b = file_bytes(sub);
        EXPECT_GT(b.size(), 60u);
        if (!b.empty()) b[b.size() / 2] ^= 0x40;
        std::ofstream(sub, std::ios::binary | std::ios::trunc)
            .write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
      }
      auto r = Reader::open(dir);
      EXPECT_TRUE(r.ok());
      if (r.ok()) {
        EXPECT_EQ(r->steps(), (std::vector<std::int64_t>{1})) << "step 2 is damaged";
        EXPECT_FALSE(r->skipped().empty());
        if (!r->skipped().empty())
          EXPECT_NE(r->skipped().front().find("corrupt"), std::string::npos) << r->skipped().front();
      }
    }
    MPI_Barrier(MPI_COMM_WORLD);
    // A Reader opened on the communicator: rank 0 checks roots and catalogs, each rank its writers'
    // sub-indices (the damaged one is another rank's), and every rank lists the same.
    auto rc = Reader::open(MPI_COMM_WORLD, dir);
    ASSERT_TRUE(rc.ok()) << rc.status().to_string();
    EXPECT_EQ(rc->steps(), (std::vector<std::int64_t>{1})) << "step 2 is damaged";
    ASSERT_FALSE(rc->skipped().empty());
    EXPECT_EQ(rc->skipped().front().rfind("ckpt.2: ", 0), 0u) << rc->skipped().front();
    EXPECT_NE(rc->skipped().front().find("index."), std::string::npos) << rc->skipped().front();
    State want, got;
    want.fill(1);
    Runtime rt(MPI_COMM_WORLD, v2_options(dir));
    ASSERT_TRUE(got.protect(rt).ok());
    // latest() and steps() validate every sub-index (each rank its writers'): the step they name restores.
    const auto newest = rt.latest();
    ASSERT_TRUE(newest.ok()) << newest.status().to_string();
    EXPECT_EQ(newest.value(), std::optional<std::int64_t>(1));
    const auto steps = rt.steps();
    ASSERT_TRUE(steps.ok()) << steps.status().to_string();
    EXPECT_EQ(steps.value(), (std::vector<std::int64_t>{1})) << "step 2 is damaged";
    const Result<std::int64_t> s = rt.restart();
    ASSERT_TRUE(s.ok()) << s.status().to_string();
    EXPECT_EQ(s.value(), 1) << "the step before the damaged one";
    EXPECT_TRUE(all_true(got == want));
    const Status s2 = rt.restart(2);
    EXPECT_TRUE(s2.failed());
    EXPECT_NE(s2.message().find("corrupt"), std::string::npos) << s2.to_string();
  }
}

// Restart reads the root (rank 0, broadcast), then each rank only what its regions need (PartialIndex):
// N->N its own catalog entry and sub-index, whatever the rank count; N->M the sub-indices of the writers
// whose directory entries meet its boxes - so damage elsewhere does not stop it, and damage where it
// reads does.
TEST(IndexV2, RestartReadsTheRootAndOnlyTheSubIndicesItsRegionsMeet) {
  const std::string dir = scratch_dir("index2-lazy");
  write_steps(v2_options(dir), {5});
  const std::string ck = dir + "/ckpt.5/";
  const std::uint64_t root = file_bytes(ck + "index").size();
  {
    const std::uint64_t own = file_bytes(ck + "index." + std::to_string(world_rank())).size();
    const std::uint64_t lazy = restarts_exactly(v2_options(dir), 5);
    EXPECT_EQ(lazy, root + 40 + own) << "the root, its catalog entry, its sub-index";
    // The one-level index of the same checkpoint, for comparison: every rank decoded all of it before.
    Options o1 = v2_options(scratch_dir("index2-lazy-v1"));
    o1.index_format = 1;
    write_steps(o1, {5});
    const std::uint64_t whole = restarts_exactly(o1, 5);
    EXPECT_EQ(whole, file_bytes(o1.dir + "/ckpt.5/index").size());
    if (world_size() > 2) EXPECT_LT(lazy, whole);
  }
  // N->1 on rank 0: writer W-1's sub-index damaged. The grid rows of rank 0 need rank 0's sub-index only
  // (read first: the scalar t is uniform, stored the same by every rank); all the rows need every writer's.
  MPI_Barrier(MPI_COMM_WORLD);
  if (world_rank() == 0 && world_size() > 1) {
    const std::string last = ck + "index." + std::to_string(world_size() - 1);
    auto b = file_bytes(last);
    EXPECT_GT(b.size(), 60u);
    if (!b.empty()) b[b.size() / 2] ^= 0x08;
    std::ofstream(last, std::ios::binary | std::ios::trunc)
        .write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
    const std::uint64_t n = static_cast<std::uint64_t>(world_size()) * 3;
    for (const std::uint64_t rows : {std::uint64_t{3}, n}) {
      SCOPED_TRACE("restoring grid rows [0, " + std::to_string(rows) + ")");
      Runtime one(MPI_COMM_SELF, v2_options(dir));
      std::vector<double> grid(rows * kCols, -1);
      double t = 0;
      EXPECT_TRUE(one.protect("grid", grid.data(), DType::f64, Block{{n, kCols}, {0, 0}, {rows, kCols}}).ok());
      EXPECT_TRUE(one.protect("t", &t, DType::f64, Dims{}).ok());
      const Status st = one.restart(5);
      if (rows == 3) {
        EXPECT_TRUE(st.ok()) << st.to_string();
        EXPECT_EQ(one.restart_index_bytes(), root + 40 + file_bytes(ck + "index.0").size());
        State want;
        want.fill(5);
        EXPECT_EQ(grid, want.grid);
        EXPECT_EQ(t, want.t);
      } else {
        EXPECT_EQ(st.code(), Code::corrupt) << st.to_string();
        EXPECT_NE(st.message().find("index." + std::to_string(world_size() - 1)), std::string::npos) << st.to_string();
      }
    }
  }
  MPI_Barrier(MPI_COMM_WORLD);
}

// inspect() of a two-level index reads the root (rank 0, broadcast) and, for the extents of the local
// array, writer 0's sub-index on rank 0 alone: a missing sub-index of another writer does not stop it.
// The blocks come when a call needs them: read() those its box meets, read_rank() the rank's writer's,
// load_blocks() and verify() every one. Complete, it describes what a whole index does.
TEST(IndexV2, InspectReadsTheRootAndLoadsBlocksWhenACallNeedsThem) {
  const std::string dir = scratch_dir("index2-inspect");
  write_steps(v2_options(dir), {3, 4});
  const int P = world_size(), last = P - 1;
  if (world_rank() == 0 && P > 1) EXPECT_EQ(std::remove((dir + "/ckpt.3/index." + std::to_string(last)).c_str()), 0);
  MPI_Barrier(MPI_COMM_WORLD);
  State want;
  want.fill(3);
  const std::uint64_t n = static_cast<std::uint64_t>(P) * 3;
  std::uint64_t total = 0;
  for (int r = 0; r < P; ++r) total += 2 + static_cast<std::uint64_t>(r);
  Runtime rt(MPI_COMM_WORLD, v2_options(dir));
  ASSERT_TRUE(rt.status().ok()) << rt.status().to_string();
  auto c3 = rt.inspect(3);
  ASSERT_TRUE(c3.ok()) << c3.status().to_string();
  CheckpointReader* c = &c3.value();
  EXPECT_FALSE(c->blocks_loaded());
  const auto grid = c->variable("grid");
  ASSERT_TRUE(grid.ok());
  EXPECT_EQ(grid->shape, (Shape{n, kCols}));
  EXPECT_TRUE(grid->blocks.empty() && grid->ranks.empty());
  ASSERT_TRUE(grid->has_minmax);  // merged in the root: the smallest of rank 0's, the largest of the last's
  EXPECT_EQ(grid->min, 3e6);
  EXPECT_EQ(grid->max, 3e6 + last * 1e3 + static_cast<double>(3 * kCols - 1));
  EXPECT_EQ(c->variable("rows")->shape, Shape{total});
  EXPECT_EQ(c->variable("local")->shape, Shape{10}) << "the lowest writer rank's extents (rank 0's), on every rank";
  EXPECT_EQ(c->variable("t")->shape, Shape{});
  // What this rank read: the root; rank 0 alone also writer 0's catalog entry and sub-index (the extents).
  const std::string ck3 = dir + "/ckpt.3/";
  const std::uint64_t root3 = file_bytes(ck3 + "index").size();
  EXPECT_EQ(c->index_bytes(), world_rank() == 0 ? root3 + 40 + file_bytes(ck3 + "index.0").size() : root3);
  // A read loads what it needs: rank r's own local array and grid rows; the last rank's are gone.
  const std::uint32_t me = static_cast<std::uint32_t>(world_rank());
  std::vector<std::int32_t> local(want.local.size());  // this rank's length (State)
  std::vector<double> rows(3 * kCols);
  const Status lr = c->read_rank("local", me, local.data(), local.size() * sizeof(std::int32_t));
  const Status gr = c->read("grid", {3 * me, 0}, {3, kCols}, rows.data(), rows.size() * sizeof(double));
  if (P > 1 && world_rank() == last) {
    EXPECT_EQ(lr.code(), Code::corrupt) << lr.to_string();
    EXPECT_NE(lr.message().find("index." + std::to_string(last)), std::string::npos) << lr.to_string();
  } else {
    EXPECT_TRUE(lr.ok()) << lr.to_string();
    EXPECT_TRUE(gr.ok()) << gr.to_string();
    State mine;
    mine.fill(3);
    EXPECT_EQ(local, mine.local);
    EXPECT_EQ(rows, mine.grid);
  }
  const Status all = c->load_blocks();
  if (P > 1) {
    EXPECT_EQ(all.code(), Code::corrupt) << all.to_string();
    EXPECT_EQ(c->verify().code(), Code::corrupt);
  }
  // The reads that need only what is loaded still work after that failure: this rank's own local array.
  if (P > 1 && world_rank() != last) {
    const Status again = c->read_rank("local", me, local.data(), local.size() * sizeof(std::int32_t));
    EXPECT_TRUE(again.ok()) << again.to_string();
  }
  // Step 4 is whole. Reads that load every sub-index do not list the blocks (variables() stays as it was,
  // the same on every rank); load_blocks() does, in rank order whatever order the reads loaded them in,
  // and lists what the serial Reader's whole index lists; the references into variables() stay valid.
  auto d4 = rt.inspect(4);
  ASSERT_TRUE(d4.ok()) << d4.status().to_string();
  CheckpointReader* d = &d4.value();
  EXPECT_FALSE(d->blocks_loaded());
  const VariableInfo& local_info = d->variables()[1];
  for (int q = P - 1; q >= 0; --q) {
    std::vector<std::int32_t> theirs(10 + 7 * static_cast<std::size_t>(q));
    const Status st = d->read_rank("local", static_cast<std::uint32_t>(q), theirs.data(), theirs.size() * 4);
    EXPECT_TRUE(st.ok()) << st.to_string();
  }
  EXPECT_FALSE(d->blocks_loaded());
  EXPECT_TRUE(local_info.blocks.empty());
  const Status loaded = d->load_blocks();
  ASSERT_TRUE(loaded.ok()) << loaded.to_string();
  EXPECT_TRUE(d->blocks_loaded());
  EXPECT_EQ(local_info.name, "local");
  EXPECT_EQ(local_info.blocks.size(), static_cast<std::size_t>(P));
  EXPECT_TRUE(d->verify().ok());
  auto r = Reader::open(dir);
  ASSERT_TRUE(r.ok());
  auto whole = r->open_step(4);
  ASSERT_TRUE(whole.ok()) << whole.status().to_string();
  EXPECT_TRUE(whole->blocks_loaded()) << "a serial open reads the whole index";
  // A Reader opened on the communicator opens the step as inspect() does.
  auto rc = Reader::open(MPI_COMM_WORLD, dir);
  ASSERT_TRUE(rc.ok()) << rc.status().to_string();
  auto coll = rc->open_step(4);
  ASSERT_TRUE(coll.ok()) << coll.status().to_string();
  EXPECT_FALSE(coll->blocks_loaded());
  EXPECT_EQ(coll->variable("local")->shape, Shape{10});
  std::vector<double> box(3 * kCols);
  const Status cb = coll.value().read("grid", {3 * me, 0}, {3, kCols}, box.data(), box.size() * sizeof(double));
  EXPECT_TRUE(cb.ok()) << cb.to_string();
  State four;
  four.fill(4);
  EXPECT_EQ(box, four.grid);
  ASSERT_EQ(d->variables().size(), whole->variables().size());
  for (std::size_t v = 0; v < whole->variables().size(); ++v) {
    const VariableInfo& a = d->variables()[v];
    const VariableInfo& b = whole->variables()[v];
    SCOPED_TRACE(b.name);
    EXPECT_EQ(a.name, b.name);
    EXPECT_EQ(a.shape, b.shape);
    EXPECT_EQ(a.has_minmax, b.has_minmax);
    EXPECT_EQ(a.min, b.min);
    EXPECT_EQ(a.max, b.max);
    EXPECT_EQ(a.ranks, b.ranks);
    ASSERT_EQ(a.blocks.size(), b.blocks.size());
    for (std::size_t k = 0; k < a.blocks.size(); ++k) {
      EXPECT_EQ(a.blocks[k].rank, b.blocks[k].rank);
      EXPECT_EQ(a.blocks[k].count, b.blocks[k].count);
      EXPECT_EQ(a.blocks[k].file, b.blocks[k].file);
    }
  }
  MPI_Barrier(MPI_COMM_WORLD);
}

// A damaged or missing catalog or root, or the catalog of another commit (a valid object the root's hash
// does not name), makes latest() pass the step over, as a damaged one-level index does.
TEST(IndexV2, LatestPassesOverADamagedRootOrCatalog) {
  for (const char* victim : {"catalog", "index", "other catalog"}) {
    for (const bool remove : {false, true}) {
      if (std::string(victim) == "other catalog" && remove) continue;
      SCOPED_TRACE(std::string(victim) + (remove ? " removed" : " flipped"));
      const std::string dir =
          scratch_dir(std::string("-") + (victim[0] == 'o' ? "other" : victim) + (remove ? "-removed" : "-flipped"));
      write_steps(v2_options(dir), {1, 2});
      if (world_rank() == 0) {
        const std::string f = dir + "/ckpt.2/" + (victim[0] == 'o' ? "catalog" : victim);
        if (std::string(victim) == "other catalog") {
          const auto b = file_bytes(dir + "/ckpt.1/catalog");
          std::ofstream(f, std::ios::binary | std::ios::trunc)
              .write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
        } else if (remove) {
          EXPECT_EQ(std::remove(f.c_str()), 0);
        } else {
          auto b = file_bytes(f);
          if (b.size() > 60) b[b.size() / 2] ^= 0x40;
          std::ofstream(f, std::ios::binary | std::ios::trunc)
              .write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
        }
      }
      MPI_Barrier(MPI_COMM_WORLD);
      Runtime rt(MPI_COMM_WORLD, v2_options(dir));
      const auto newest = rt.latest();
      ASSERT_TRUE(newest.ok()) << newest.status().to_string();
      EXPECT_EQ(newest.value(), std::optional<std::int64_t>(1));
    }
  }
}

TEST(IndexV2, BothVersionsInOneRoot) {
  // A run that switches index_format: each checkpoint is read in the version it was written in.
  const std::string dir = scratch_dir();
  Options v1 = v2_options(dir);
  v1.index_format = 1;
  v1.keep = 10;
  Options v2 = v2_options(dir);
  v2.keep = 10;
  write_steps(v1, {1});
  write_steps(v2, {2});
  write_steps(v1, {3});
  if (world_rank() == 0) {
    EXPECT_EQ(header_version(dir + "/ckpt.1/index"), 1u);
    EXPECT_EQ(header_version(dir + "/ckpt.2/index"), 2u);
    EXPECT_FALSE(exists(dir + "/ckpt.3/catalog"));
  }
  for (std::int64_t step : {1, 2, 3}) {
    SCOPED_TRACE(step);
    State want, got;
    want.fill(static_cast<int>(step));
    Runtime rt(MPI_COMM_WORLD, v1);
    ASSERT_TRUE(got.protect(rt).ok());
    const Status s = rt.restart(step);
    ASSERT_TRUE(s.ok()) << s.to_string();
    EXPECT_TRUE(all_true(got == want));
  }
}

TEST(IndexV2, RefusedWhereThisBuildDoesNotWriteIt) {
  const std::string dir = scratch_dir();
  Options series = v2_options(dir);
  series.layout = Options::Layout::series;
  Runtime a(MPI_COMM_WORLD, series);
  EXPECT_EQ(a.status().code(), Code::invalid_argument);
  EXPECT_NE(a.status().message().find("option 'index_format'"), std::string::npos) << a.status().to_string();
  EXPECT_NE(a.status().message().find("layout is 'series'"), std::string::npos) << a.status().to_string();
  Options levels = v2_options(dir);
  levels.local_dir = dir + "-local";
  Runtime b(MPI_COMM_WORLD, levels);
  EXPECT_EQ(b.status().code(), Code::invalid_argument);
  EXPECT_NE(b.status().message().find("local_dir is set"), std::string::npos) << b.status().to_string();
  Options bad = v2_options(dir);
  bad.index_format = 3;
  Runtime c(MPI_COMM_WORLD, bad);
  EXPECT_EQ(c.status().code(), Code::invalid_argument) << c.status().to_string();
}
