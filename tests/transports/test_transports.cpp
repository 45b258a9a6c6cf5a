// Every compiled transport, one test: round trip with uneven data, odd rank counts and writer
// counts that do not divide the rank count; groups that send variables through different transports.
#include <glob.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <numeric>
#include <string>
#include <vector>

#include "ckpt/ckpt.hpp"
#include "ckpt/config.hpp"
#include "test_util.hpp"

using namespace ckpt;
using ckpt::test::scratch_dir;
using ckpt::test::world_rank;
using ckpt::test::world_size;

namespace {

struct Config {
  const char* label;
  const char* transport;
  int rbio_writers = 0;
  int rbio_files = 0;
  int mpiio_files = 1;
  int open_token = 0;
};

std::ostream& operator<<(std::ostream& os, const Config& c) { return os << c.label; }

Options make_options(const Config& c, const std::string& dir) {
  Options o = Options::defaults();
  o.dir = dir;
  o.transport = c.transport;
  o.rbio_writers = c.rbio_writers > 0 ? AutoInt(c.rbio_writers) : AutoInt();  // 0: one per node
  o.rbio_files = c.rbio_files;
  o.mpiio_files = c.mpiio_files;
  o.open_token = c.open_token;
  o.chunk_bytes = 64 << 10;  // several chunks per rank, different counts per rank
  return o;
}

class Transports : public ::testing::TestWithParam<Config> {};

TEST_P(Transports, RoundTripUnevenData) {
  const Config c = GetParam();
  const auto dir = scratch_dir();
  const int rank = world_rank(), size = world_size();
  Runtime rt(MPI_COMM_WORLD, make_options(c, dir));
  ASSERT_TRUE(rt.status().ok()) << rt.status().to_string();
  // Rank r holds 20000 * (r + 1) + 7 elements of a global array: different chunk counts per rank.
  std::vector<std::uint64_t> counts(static_cast<std::size_t>(size));
  for (int r = 0; r < size; ++r) counts[static_cast<std::size_t>(r)] = 20000ull * static_cast<std::uint64_t>(r + 1) + 7;
  const std::uint64_t global = std::accumulate(counts.begin(), counts.end(), 0ull);
  const std::uint64_t start = std::accumulate(counts.begin(), counts.begin() + rank, 0ull);
  std::vector<double> x(counts[static_cast<std::size_t>(rank)]);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = static_cast<double>(start + i) * 0.5;
  std::vector<std::int32_t> local(100 + rank);
  std::iota(local.begin(), local.end(), rank * 1000);
  double t = 3.25;
  ASSERT_TRUE(rt.protect("x", x.data(), DType::f64, Block{{global}, {start}, {x.size()}}).ok());
  ASSERT_TRUE(rt.protect("local", local.data(), DType::i32, {local.size()}).ok());
  ASSERT_TRUE(rt.protect_scalar("t", &t).ok());
  const auto x0 = x;
  const auto l0 = local;
  for (int step = 1; step <= 2; ++step) {
    Status s = rt.checkpoint(step).wait();
    ASSERT_TRUE(s.ok()) << c << ": " << s.to_string();
  }
  std::fill(x.begin(), x.end(), -1.0);
  std::fill(local.begin(), local.end(), -1);
  t = 0;
  auto r = rt.restart();
  ASSERT_TRUE(r.ok()) << c << ": " << r.status().to_string();
  EXPECT_EQ(r.value(), 2);
  EXPECT_EQ(x, x0);
  EXPECT_EQ(local, l0);
  EXPECT_EQ(t, 3.25);
}

/// Rank r's share of the "unequal" test: rank 0 a few elements, the others ever more (one write of the
/// automatic chunk against several: different numbers of writes per rank).
std::uint64_t unequal_count(int rank) { return rank == 0 ? 37 : 30000ull * rank * rank + 11; }

// Issue 31 part 4: with the automatic chunk size each rank's staging chunk follows its own state, so
// ranks holding very different amounts make different numbers of writes - mpiio made one collective
// write_at_all per write and deadlocked (one rank in MPI_File_sync, the others in write_at_all) in the
// first checkpoint of a real AMR code after a restart. Every transport, both layouts (series: posix),
// defaults for the chunk and the pool: checkpoint, restart, then restart on one rank fewer (a new
// decomposition and a new pool), checkpoint again and restart that.
TEST_P(Transports, AutoChunksWithStronglyUnequalSizesAndAnotherRankCount) {
  const Config c = GetParam();
  const auto dir = scratch_dir();
  const int rank = world_rank(), size = world_size();
  std::uint64_t global = 0;
  for (int r = 0; r < size; ++r) global += unequal_count(r);
  auto value = [](std::uint64_t i) { return static_cast<double>(i) * 0.25 + 1.0; };
  for (const bool series : {false, true}) {
    if (series && std::string(c.transport) != "posix") continue;  // series is posix's
    SCOPED_TRACE(series ? "layout series" : "layout directory");
    Options o = make_options(c, dir + (series ? "/series" : "/directory"));
    o.chunk_bytes = std::nullopt;  // auto: per rank
    o.layout = series ? Layout::series : Layout::directory;
    {
      Runtime rt(MPI_COMM_WORLD, o);
      ASSERT_TRUE(rt.status().ok()) << rt.status().to_string();
      std::uint64_t start = 0;
      for (int r = 0; r < rank; ++r) start += unequal_count(r);
      std::vector<double> x(unequal_count(rank));
      for (std::size_t i = 0; i < x.size(); ++i) x[i] = value(start + i);
      ASSERT_TRUE(rt.protect("x", x.data(), DType::f64, Block{{global}, {start}, {x.size()}}).ok());
      for (int step = 1; step <= 2; ++step) {
        Status s = rt.checkpoint(step).wait();
        ASSERT_TRUE(s.ok()) << c << ": " << s.to_string();
      }
      std::fill(x.begin(), x.end(), -1.0);
      auto r = rt.restart();
      ASSERT_TRUE(r.ok()) << c << ": " << r.status().to_string();
      for (std::size_t i = 0; i < x.size(); ++i) ASSERT_EQ(x[i], value(start + i)) << i;
    }
    // One rank fewer (the last one sits out), an even split of the same global array.
    MPI_Comm fewer = MPI_COMM_NULL;
    MPI_Comm_split(MPI_COMM_WORLD, size > 1 && rank == size - 1 ? MPI_UNDEFINED : 0, rank, &fewer);
    if (fewer != MPI_COMM_NULL) {
      int m = 1, me = 0;
      MPI_Comm_size(fewer, &m);
      MPI_Comm_rank(fewer, &me);
      const JoinedRows share = balanced_rows(global, me, m);
      std::vector<double> y(share.end - share.begin, -1.0);
      Runtime rt(fewer, o);
      ASSERT_TRUE(rt.status().ok()) << rt.status().to_string();
      ASSERT_TRUE(rt.protect("x", y.data(), DType::f64, Block{{global}, {share.begin}, {y.size()}}).ok());
      auto r = rt.restart();
      ASSERT_TRUE(r.ok()) << c << ": " << r.status().to_string();
      EXPECT_EQ(r.value(), 2);
      for (std::size_t i = 0; i < y.size(); ++i) ASSERT_EQ(y[i], value(share.begin + i)) << i;
      // The first checkpoint after the restart (the deadlock's place), then its restart.
      for (auto& v : y) v += 1.0;
      Status s = rt.checkpoint(3).wait();
      ASSERT_TRUE(s.ok()) << c << ": " << s.to_string();
      std::fill(y.begin(), y.end(), 0.0);
      ASSERT_TRUE(rt.restart(3).ok());
      for (std::size_t i = 0; i < y.size(); ++i) ASSERT_EQ(y[i], value(share.begin + i) + 1.0) << i;
      ASSERT_TRUE(rt.close().ok());
      MPI_Comm_free(&fewer);
    }
    MPI_Barrier(MPI_COMM_WORLD);
  }
}

// The cases: every transport of the registry with its variants (Registry.EveryTransportHasACase).
const std::vector<Config> kCases = {
    Config{"posix", "posix"},
    Config{"posix_token1", "posix", 0, 0, 1, 1},
    Config{"mpiio_nf1", "mpiio", 0, 0, 1},
    Config{"mpiio_nf2", "mpiio", 0, 0, 2},
    Config{"rbio_per_node", "rbio"},
    Config{"rbio_ng2", "rbio", 2, 0},
    Config{"rbio_ng2_shared", "rbio", 2, 1},
    Config{"rbio_ng3", "rbio", 3, 0},
#if CKPT_HAVE_HDF5
    Config{"hdf5", "hdf5"},
    Config{"hdf5_sync", "hdf5-sync"},
#endif
};

INSTANTIATE_TEST_SUITE_P(All, Transports, ::testing::ValuesIn(kCases),
                         [](const ::testing::TestParamInfo<Config>& i) { return std::string(i.param.label); });

// One list of transports, the registry's (transports/registry.cpp), read where a user reads it: the
// error for an unknown name lists every known one. A transport added there without a case here fails
// this test instead of going untested. `null` writes nothing to read back (its round trip is
// tests/integration/test_roundtrip.cpp's); names built without their library are skipped.
TEST(Registry, EveryTransportHasACase) {
  Options o = Options::defaults();
  o.dir = ckpt::test::scratch_dir();
  o.transport = "no-such-transport";
  Runtime rt(MPI_COMM_WORLD, o);
  ASSERT_EQ(rt.status().code(), Code::invalid_argument);
  const std::string msg = rt.status().message();
  const std::size_t at = msg.find("(known: ");
  ASSERT_NE(at, std::string::npos) << msg;
  std::vector<std::string> names;
  std::string list = msg.substr(at + 8, msg.find(')', at) - at - 8);
  for (std::size_t p = 0; p <= list.size();) {
    const std::size_t comma = std::min(list.find(", ", p), list.size());
    names.push_back(list.substr(p, comma - p));
    p = comma + 2;
  }
  EXPECT_GE(names.size(), 4u) << msg;
  for (const std::string& name : names) {
    if (name == "null") continue;
#if !CKPT_HAVE_HDF5
    if (name.rfind("hdf5", 0) == 0) continue;
#endif
    bool found = false;
    for (const Config& c : kCases) found = found || name == c.transport;
    EXPECT_TRUE(found) << "transport '" << name << "' is registered but has no case in test_transports.cpp";
  }
}

TEST(TransportGroups, VariablesGoThroughTheirGroupsTransport) {
  const auto dir = scratch_dir();
  const int rank = world_rank(), size = world_size();
  std::ofstream cfg;
  const std::string path = dir + "/groups-" + std::to_string(rank) + ".yaml";
  std::ofstream(path) << "dir: " << dir << "/ckpt\nchunk_bytes: 64K\ntransport: posix\nrbio_writers: 2\n"
                      << "groups:\n  - name: walkers\n    match: [\"walkers/*\"]\n    transport: rbio\n"
                      << "  - name: diagnostics\n    match: diag\n    transport: mpiio\n";
  auto o = Options::try_load(path);
  ASSERT_TRUE(o.ok()) << o.status().to_string();
  Runtime rt(MPI_COMM_WORLD, o.value());
  ASSERT_TRUE(rt.status().ok()) << rt.status().to_string();
  std::vector<double> pos(30000 + 1000 * rank, rank + 0.25), diag(50, 1.5 * rank);
  std::int64_t step = 7;
  const std::uint64_t before = 30000ull * rank + 1000ull * rank * (rank - 1) / 2;
  std::uint64_t total = 0;
  for (int r = 0; r < size; ++r) total += 30000 + 1000 * r;
  ASSERT_TRUE(rt.protect("walkers/pos", pos.data(), DType::f64, Block{{total}, {before}, {pos.size()}}).ok());
  ASSERT_TRUE(rt.protect("diag", diag.data(), DType::f64, {diag.size()}).ok());
  ASSERT_TRUE(rt.protect_scalar("step", &step).ok());
  Status st = rt.checkpoint(1).wait();
  ASSERT_TRUE(st.ok()) << st.to_string();
  MPI_Barrier(MPI_COMM_WORLD);
  if (rank == 0) {
    // posix file for the default group, rbio files for walkers, one coIO file for diagnostics.
    EXPECT_EQ(::access((dir + "/ckpt/ckpt.1/data.0").c_str(), F_OK), 0);
    EXPECT_EQ(::access((dir + "/ckpt/ckpt.1/g1.rbio.0").c_str(), F_OK), 0);
    // MPI-IO files carry the checkpoint id: g2.coio.<16 hex digits>.0
    glob_t g{};
    EXPECT_EQ(::glob((dir + "/ckpt/ckpt.1/g2.coio.*.0").c_str(), 0, nullptr, &g), 0);
    EXPECT_EQ(g.gl_pathc, 1u);
    ::globfree(&g);
  }
  const auto p0 = pos, d0 = diag;
  std::fill(pos.begin(), pos.end(), 0.0);
  std::fill(diag.begin(), diag.end(), 0.0);
  step = 0;
  ASSERT_TRUE(rt.restart(1).ok());
  EXPECT_EQ(pos, p0);
  EXPECT_EQ(diag, d0);
  EXPECT_EQ(step, 7);
}

TEST(TransportConfig, BadValuesNameTheKey) {
  const auto dir = scratch_dir();
  const std::string path = dir + "/bad-" + std::to_string(world_rank()) + ".yaml";
  std::ofstream(path) << "rbio_files: 3\n";
  auto r = Options::try_load(path);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("rbio_files"), std::string::npos) << r.status().message();
  std::ofstream(path) << "mpiio_hints: {cb_buffer_size: 16M, no_such_hint: 1}\n";
  r = Options::try_load(path);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("mpiio_hints"), std::string::npos) << r.status().message();
  std::ofstream(path) << "groups:\n  - name: a\n    match: x\n    transport: posix\n    colour: blue\n";
  r = Options::try_load(path);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("colour"), std::string::npos) << r.status().message();
  std::ofstream(path) << "groups:\n  - name: a\n    match: x\n    transport: pigeon\n";
  r = Options::try_load(path);
  ASSERT_TRUE(r.ok()) << "the transport name is checked by the Runtime";
  Options o = r.value();
  o.dir = dir + "/c";
  Runtime rt(MPI_COMM_WORLD, o);
  EXPECT_EQ(rt.status().code(), Code::invalid_argument);
  EXPECT_NE(rt.status().message().find("group 'a'"), std::string::npos) << rt.status().message();
}

TEST(TransportConfig, HintsInEffectAreRecorded) {
  const auto dir = scratch_dir();
  Options o = Options::defaults();
  o.dir = dir;
  o.transport = "mpiio";
  o.mpiio_hints = "cb_buffer_size=8388608,romio_cb_write=enable";
  Runtime rt(MPI_COMM_WORLD, o);
  ASSERT_TRUE(rt.status().ok()) << rt.status().to_string();
  std::vector<float> v(1000, 1.0f);
  ASSERT_TRUE(rt.protect("v", v.data(), DType::f32, {v.size()}).ok());
  ASSERT_TRUE(rt.checkpoint(1).wait().ok());
  if (world_rank() == 0) {
    std::ifstream in(dir + "/ckpt.1/index", std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    EXPECT_NE(bytes.find("mpiio.hint.cb_buffer_size"), std::string::npos) << "hints in effect are in the index";
    EXPECT_NE(bytes.find("8388608"), std::string::npos);
  }
}

}  // namespace
