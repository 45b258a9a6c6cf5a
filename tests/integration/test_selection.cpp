// Memory selections (issue 35): a region that is a box of a larger allocation (ghost cells) is stored
// without application packing, bit for bit as the same box stored packed, and restart writes the box
// only, leaving the ghost cells as they are. At 4 ranks: local arrays, Blocks (restarted on 3 ranks of
// the same job, a sub-communicator), joined rows with padding, optional regions (restored through a
// packed shadow), Sources whose Place carries the selection, and every refusal.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "ckpt/ckpt.hpp"
#include "ckpt/config.hpp"
#include "test_util.hpp"

using namespace ckpt;
using ckpt::test::world_rank;
using ckpt::test::options_in;
using ckpt::test::world_size;

namespace {
constexpr double kGhost = -7.0;

/// A 3D allocation `alloc` with its box [start, start + count) holding value(i, j, k) of the box's
/// own indices and every other element kGhost.
struct Ghosted {
  std::uint64_t a0, a1, a2;  // allocation
  std::uint64_t s0, s1, s2;  // box start
  std::uint64_t c0, c1, c2;  // box extents
  std::vector<double> v;
  std::uint64_t at(std::uint64_t i, std::uint64_t j, std::uint64_t k) const {
    return ((s0 + i) * a1 + (s1 + j)) * a2 + (s2 + k);
  }
  void fill(double salt) {
    v.assign(a0 * a1 * a2, kGhost);
    for (std::uint64_t i = 0; i < c0; ++i)
      for (std::uint64_t j = 0; j < c1; ++j)
        for (std::uint64_t k = 0; k < c2; ++k) v[at(i, j, k)] = salt + 10000.0 * i + 100.0 * j + k;
  }
  /// The box, packed (what a code without selections would have copied out).
  std::vector<double> packed() const {
    std::vector<double> p;
    for (std::uint64_t i = 0; i < c0; ++i)
      for (std::uint64_t j = 0; j < c1; ++j)
        for (std::uint64_t k = 0; k < c2; ++k) p.push_back(v[at(i, j, k)]);
    return p;
  }
  MemorySelection selection() const { return MemorySelection{Dims{s0, s1, s2}, Dims{a0, a1, a2}}; }
  Dims count() const { return Dims{c0, c1, c2}; }
};

/// Rank-dependent geometry: every rank has other ghost widths (0 included) and box extents.
Ghosted geometry(int rank) {
  const std::uint64_t r = static_cast<std::uint64_t>(rank);
  Ghosted g{};
  g.c0 = 3 + r;
  g.c1 = 4;
  g.c2 = 5 + 2 * r;
  g.s0 = r % 2;
  g.s1 = 2;
  g.s2 = 1 + r;
  g.a0 = g.s0 + g.c0 + 1;
  g.a1 = g.s1 + g.c1 + 2;
  g.a2 = g.s2 + g.c2 + (r == 0 ? 0 : 3);
  return g;
}
}  // namespace

TEST(Selection, GhostedLocalArraysRestartIntoTheBoxOnly) {
  const std::string dir = ckpt::test::scratch_dir();
  const int rank = world_rank();
  Ghosted g = geometry(rank);
  g.fill(rank * 1e6);
  const std::vector<double> want = g.packed();
  {
    Runtime rt(MPI_COMM_WORLD, options_in(dir));
    ASSERT_TRUE(rt.protect("u", g.v.data(), DType::f64, g.count()).ok());
    ASSERT_TRUE(rt.set_memory_selection("u", g.selection()).ok());
    Ticket t = rt.checkpoint(1);
    // The host may overwrite its memory once checkpoint() returns: the box was copied.
    std::fill(g.v.begin(), g.v.end(), 0.0);
    Status s = t.wait();
    ASSERT_TRUE(s.ok()) << s.to_string();
  }
  // Stored as the packed box: the reader reads this rank's block as `want`.
  {
    auto reader = Reader::open(dir);
    ASSERT_TRUE(reader.ok()) << reader.status().to_string();
    auto step = reader->open_step(1);
    ASSERT_TRUE(step.ok()) << step.status().to_string();
    std::vector<double> stored(want.size());
    Status s =
        step.value().read_rank("u", static_cast<std::uint32_t>(rank), stored.data(), stored.size() * sizeof(double));
    ASSERT_TRUE(s.ok()) << s.to_string();
    EXPECT_EQ(stored, want);
  }
  // Restart into an allocation whose ghosts hold 5.0: the box is written, the ghosts stay 5.0.
  std::fill(g.v.begin(), g.v.end(), 5.0);
  Runtime rt(MPI_COMM_WORLD, options_in(dir));
  ASSERT_TRUE(rt.protect("u", g.v.data(), DType::f64, g.count()).ok());
  ASSERT_TRUE(rt.set_memory_selection("u", g.selection()).ok());
  Status s = rt.restart(1);
  ASSERT_TRUE(s.ok()) << s.to_string();
  EXPECT_EQ(g.packed(), want);
  std::uint64_t ghosts = 0;
  for (double x : g.v) ghosts += x == 5.0;
  EXPECT_EQ(ghosts, g.v.size() - want.size());
  // The same checkpoint restarts into packed memory, and a selection can be dropped again.
  std::vector<double> packed(want.size(), 0.0);
  ASSERT_TRUE(rt.update("u", packed.data(), g.count()).ok());
  ASSERT_TRUE(rt.set_memory_selection("u", MemorySelection{}).ok());
  s = rt.restart(1);
  ASSERT_TRUE(s.ok()) << s.to_string();
  EXPECT_EQ(packed, want);
}

TEST(Selection, GhostedBlocksOfAGlobalArrayRestartOnThreeRanks) {
  // A global array [4 * 6, 10] split in rows over the ranks, each rank's rows held with 2 ghost rows
  // and 1 ghost column on each side. Stored as the same global array as packed blocks would be; three
  // ranks of the job (a sub-communicator) restart it into ghosted boxes of their own split.
  const std::string dir = ckpt::test::scratch_dir();
  const int rank = world_rank(), size = world_size();
  const std::uint64_t rows = 6, cols = 10, grows = rows * static_cast<std::uint64_t>(size);
  auto value = [](std::uint64_t i, std::uint64_t j) { return static_cast<float>(i * 1000 + j); };
  {
    std::vector<float> mem((rows + 4) * (cols + 2), -1.0f);
    for (std::uint64_t i = 0; i < rows; ++i)
      for (std::uint64_t j = 0; j < cols; ++j) mem[(i + 2) * (cols + 2) + j + 1] = value(rank * rows + i, j);
    Runtime rt(MPI_COMM_WORLD, options_in(dir));
    Block b{{grows, cols}, {rank * rows, 0}, {rows, cols}};
    ASSERT_TRUE(rt.protect("field", mem.data(), DType::f32, b).ok());
    ASSERT_TRUE(rt.set_memory_selection("field", MemorySelection{{2, 1}, {rows + 4, cols + 2}}).ok());
    Status s = rt.checkpoint(7).wait();
    ASSERT_TRUE(s.ok()) << s.to_string();
  }
  {
    auto reader = Reader::open(dir);
    ASSERT_TRUE(reader.ok());
    auto step = reader->open_step(7);
    ASSERT_TRUE(step.ok());
    std::vector<float> all(grows * cols);
    ASSERT_TRUE(step.value().read("field", all.data(), all.size() * sizeof(float)).ok());
    for (std::uint64_t i = 0; i < grows; ++i)
      for (std::uint64_t j = 0; j < cols; ++j) ASSERT_EQ(all[i * cols + j], value(i, j)) << i << "," << j;
  }
  MPI_Comm three;
  MPI_Comm_split(MPI_COMM_WORLD, rank < 3 ? 0 : MPI_UNDEFINED, rank, &three);
  if (three != MPI_COMM_NULL) {
    const JoinedRows share = balanced_rows(grows, rank, 3);  // rows [begin, end) of the global array
    const std::uint64_t mine = share.count();
    std::vector<float> mem((mine + 4) * (cols + 2), 3.5f);
    Runtime rt(three, options_in(dir));
    Block b{{grows, cols}, {share.begin, 0}, {mine, cols}};
    ASSERT_TRUE(rt.protect("field", mem.data(), DType::f32, b).ok());
    ASSERT_TRUE(rt.set_memory_selection("field", MemorySelection{{2, 1}, {mine + 4, cols + 2}}).ok());
    Status s = rt.restart(7);
    ASSERT_TRUE(s.ok()) << s.to_string();
    for (std::uint64_t i = 0; i < mine + 4; ++i)
      for (std::uint64_t j = 0; j < cols + 2; ++j) {
        const bool box = i >= 2 && i < mine + 2 && j >= 1 && j <= cols;
        ASSERT_EQ(mem[i * (cols + 2) + j], box ? value(share.begin + i - 2, j - 1) : 3.5f) << i << "," << j;
      }
    ASSERT_TRUE(rt.close().ok());
    MPI_Comm_free(&three);
  }
  MPI_Barrier(MPI_COMM_WORLD);
}

TEST(Selection, JoinedRowsWithPaddingAndOptionalRegions) {
  // Rows of 3 stored from rows of 4 (one padding column), rank r contributing r + 1 rows; and an
  // optional ghosted region, which restart fills through a packed shadow once the step verified.
  const std::string dir = ckpt::test::scratch_dir();
  const int rank = world_rank(), size = world_size();
  const std::uint64_t n = static_cast<std::uint64_t>(rank) + 1;
  std::uint64_t before = 0, total = 0;
  for (int q = 0; q < size; ++q) {
    if (q < rank) before += q + 1;
    total += q + 1;
  }
  std::vector<std::int64_t> rows(4 * n, -1);
  for (std::uint64_t i = 0; i < n; ++i)
    for (std::uint64_t j = 0; j < 3; ++j) rows[4 * i + j] = static_cast<std::int64_t>((before + i) * 10 + j);
  Ghosted g = geometry(rank);
  g.fill(0.25);
  const std::vector<double> want = g.packed();
  {
    Runtime rt(MPI_COMM_WORLD, options_in(dir));
    ASSERT_TRUE(rt.protect("atoms", rows.data(), DType::i64, Joined{{n, 3}, std::nullopt}).ok());
    ASSERT_TRUE(rt.set_memory_selection("atoms", MemorySelection{{0, 0}, {n, 4}}).ok());
    ASSERT_TRUE(rt.protect("extra", g.v.data(), DType::f64, g.count()).ok());
    ASSERT_TRUE(rt.set_memory_selection("extra", g.selection()).ok());
    Status s = rt.checkpoint(2).wait();
    ASSERT_TRUE(s.ok()) << s.to_string();
  }
  const JoinedRows share = balanced_rows(total, rank, size);
  std::vector<std::int64_t> back(4 * share.count(), 99);
  std::fill(g.v.begin(), g.v.end(), 1.5);
  Runtime rt(MPI_COMM_WORLD, options_in(dir));
  ASSERT_TRUE(rt.protect("atoms", back.data(), DType::i64, Joined{{share.count(), 3}, std::nullopt}).ok());
  ASSERT_TRUE(rt.set_memory_selection("atoms", MemorySelection{{0, 0}, {share.count(), 4}}).ok());
  ASSERT_TRUE(rt.protect("extra", g.v.data(), DType::f64, g.count()).ok());
  ASSERT_TRUE(rt.set_memory_selection("extra", g.selection()).ok());
  ASSERT_TRUE(rt.set_optional("extra").ok());
  Status s = rt.restart(2);
  ASSERT_TRUE(s.ok()) << s.to_string();
  for (std::uint64_t i = 0; i < share.count(); ++i) {
    for (std::uint64_t j = 0; j < 3; ++j)
      EXPECT_EQ(back[4 * i + j], static_cast<std::int64_t>((share.begin + i) * 10 + j));
    EXPECT_EQ(back[4 * i + 3], 99) << "the padding column was written";
  }
  EXPECT_EQ(g.packed(), want);
  std::uint64_t ghosts = 0;
  for (double x : g.v) ghosts += x == 1.5;
  EXPECT_EQ(ghosts, g.v.size() - want.size());
}

TEST(Selection, EveryTransportStoresTheBox) {
  // hdf5-sync writes from the application's memory itself (no staging): its memory dataspace is the
  // selection, and its checksums and min/max are the box's. The others write the staged stream.
  const int rank = world_rank();
  std::vector<std::string> transports = {"posix", "mpiio", "rbio"};
#if CKPT_HAVE_HDF5
  transports.insert(transports.end(), {"hdf5", "hdf5-sync"});
#endif
  for (const std::string& transport : transports) {
    SCOPED_TRACE(transport);
    const std::string dir = ckpt::test::scratch_dir(transport);
    Ghosted g = geometry(rank);
    g.fill(0.5 + rank);
    const std::vector<double> want = g.packed();
    const std::uint64_t rows = 2 + static_cast<std::uint64_t>(rank);  // joined rows of 3 in rows of 5
    std::vector<std::int32_t> joined(rows * 5, -1);
    for (std::uint64_t i = 0; i < rows; ++i)
      for (std::uint64_t j = 0; j < 3; ++j) joined[i * 5 + 1 + j] = static_cast<std::int32_t>(100 * rank + 10 * i + j);
    Options o = options_in(dir);
    o.transport = transport;
    {
      Runtime rt(MPI_COMM_WORLD, o);
      ASSERT_TRUE(rt.status().ok()) << rt.status().to_string();
      ASSERT_TRUE(rt.protect("u", g.v.data(), DType::f64, g.count()).ok());
      ASSERT_TRUE(rt.set_memory_selection("u", g.selection()).ok());
      ASSERT_TRUE(rt.protect("rows", joined.data(), DType::i32, Joined{{rows, 3}, std::nullopt}).ok());
      ASSERT_TRUE(rt.set_memory_selection("rows", MemorySelection{{0, 1}, {rows, 5}}).ok());
      Status s = rt.checkpoint(3).wait();
      ASSERT_TRUE(s.ok()) << s.to_string();
    }
    auto reader = Reader::open(dir);
    ASSERT_TRUE(reader.ok()) << reader.status().to_string();
    auto step = reader->open_step(3);
    ASSERT_TRUE(step.ok()) << step.status().to_string();
    EXPECT_TRUE(step.value().verify().ok()) << step.value().verify().to_string();  // checksums of the box
    std::vector<double> stored(want.size());
    Status s = step.value().read_rank("u", static_cast<std::uint32_t>(rank), stored.data(), stored.size() * 8);
    ASSERT_TRUE(s.ok()) << s.to_string();
    EXPECT_EQ(stored, want);
    std::fill(g.v.begin(), g.v.end(), 2.0);
    std::vector<std::int32_t> back(rows * 5, -2);
    std::uint64_t before = 0;  // this rank's own rows are read back
    for (int q = 0; q < rank; ++q) before += 2 + static_cast<std::uint64_t>(q);
    Runtime rt(MPI_COMM_WORLD, o);
    ASSERT_TRUE(rt.protect("u", g.v.data(), DType::f64, g.count()).ok());
    ASSERT_TRUE(rt.set_memory_selection("u", g.selection()).ok());
    ASSERT_TRUE(rt.protect("rows", back.data(), DType::i32, Joined{{rows, 3}, before}).ok());
    ASSERT_TRUE(rt.set_memory_selection("rows", MemorySelection{{0, 1}, {rows, 5}}).ok());
    s = rt.restart(3);
    ASSERT_TRUE(s.ok()) << s.to_string();
    EXPECT_EQ(g.packed(), want);
    for (std::uint64_t i = 0; i < rows * 5; ++i) EXPECT_EQ(back[i], i % 5 == 0 || i % 5 == 4 ? -2 : joined[i]) << i;
  }
}

TEST(Selection, SourcesGiveTheSelectionInTheirPlace) {
  const std::string dir = ckpt::test::scratch_dir();
  const int rank = world_rank();
  Ghosted g = geometry(rank);
  g.fill(0.5 + rank);  // no box value is 8.0, the ghosts' value below
  const std::vector<double> want = g.packed();
  auto source = [&g] {
    Source src;
    src.locate = [&g] { return Place{g.v.data(), g.count(), g.selection()}; };
    return src;
  };
  {
    Runtime rt(MPI_COMM_WORLD, options_in(dir));
    ASSERT_TRUE(rt.protect("u", DType::f64, source()).ok());
    EXPECT_EQ(rt.set_memory_selection("u", g.selection()).code(), Code::invalid_argument);  // the Place says it
    Status s = rt.checkpoint(4).wait();
    ASSERT_TRUE(s.ok()) << s.to_string();
  }
  std::fill(g.v.begin(), g.v.end(), 8.0);
  Runtime rt(MPI_COMM_WORLD, options_in(dir));
  ASSERT_TRUE(rt.protect("u", DType::f64, source()).ok());
  Status s = rt.restart(4);
  ASSERT_TRUE(s.ok()) << s.to_string();
  EXPECT_EQ(g.packed(), want);
  std::uint64_t ghosts = 0;
  for (double x : g.v) ghosts += x == 8.0;
  EXPECT_EQ(ghosts, g.v.size() - want.size());
}

TEST(Selection, RefusalsNameTheRegionAndChangeNothing) {
  const std::string dir = ckpt::test::scratch_dir();
  std::vector<double> v(6 * 8, 0.0);
  double step = 0;
  Runtime rt(MPI_COMM_WORLD, options_in(dir));
  ASSERT_TRUE(rt.protect("v", v.data(), DType::f64, Dims{4, 6}).ok());
  ASSERT_TRUE(rt.protect_scalar("t", &step).ok());
  auto refused = [&](const std::string& name, const MemorySelection& sel, const std::string& says) {
    Status s = rt.set_memory_selection(name, sel);
    EXPECT_EQ(s.code(), Code::invalid_argument) << s.to_string();
    EXPECT_NE(s.message().find(says), std::string::npos) << s.message();
  };
  refused("v", MemorySelection{{1, 1}, {6, 8, 1}}, "differ in dimensions");
  refused("v", MemorySelection{{1, 1, 0}, {6, 8, 1}}, "has 3 dimensions");
  refused("v", MemorySelection{{3, 1}, {6, 8}}, "exceed the allocation");
  refused("v", MemorySelection{{1, 3}, {6, 8}}, "in dimension 1");
  refused("v", MemorySelection{{-1, 0}, {6, 8}}, "negative");
  refused("v", MemorySelection{{0, 0}, {std::uint64_t{1} << 60, 8}}, "exceeds 2^64 bytes");  // offsets would wrap
  refused("v", MemorySelection{{0, 0}, {std::uint64_t{1} << 62, std::uint64_t{1} << 3}}, "overflows");
  refused("t", MemorySelection{{0}, {1}}, "scalar");
  EXPECT_EQ(rt.set_memory_selection("nope", MemorySelection{{0}, {1}}).code(), Code::not_found);
  ASSERT_TRUE(rt.set_memory_selection("v", MemorySelection{{2, 2}, {6, 8}}).ok());
  // An update whose extents no longer fit the selection is refused; the region keeps its old extents.
  Status s = rt.update("v", v.data(), Dims{5, 6});
  EXPECT_EQ(s.code(), Code::invalid_argument) << s.to_string();
  EXPECT_NE(s.message().find("memory selection"), std::string::npos) << s.message();
  ASSERT_TRUE(rt.update("v", v.data(), Dims{4, 5}).ok());
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<double>(i);
  s = rt.checkpoint(1).wait();
  ASSERT_TRUE(s.ok()) << s.to_string();
  auto reader = Reader::open(dir);
  ASSERT_TRUE(reader.ok());
  auto c = reader->open_step(1);
  ASSERT_TRUE(c.ok());
  std::vector<double> stored(4 * 5);
  ASSERT_TRUE(
      c.value().read_rank("v", static_cast<std::uint32_t>(world_rank()), stored.data(), stored.size() * 8).ok());
  for (std::uint64_t i = 0; i < 4; ++i)
    for (std::uint64_t j = 0; j < 5; ++j) EXPECT_EQ(stored[i * 5 + j], static_cast<double>((i + 2) * 8 + j + 2));
}
