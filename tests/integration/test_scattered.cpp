// Scattered regions (issue 35): one joined array whose rows lie in separately allocated pieces - AMR
// blocks with ghost cells, each its own allocation - registered as a list of pieces, captured from each
// piece with no packing by the application, stored as any joined array, and restored into the pieces
// registered at restart: on another rank count, by block id, the blocks landing in other allocations.
// At 4 ranks: blocks refined between checkpoints (update), pieces crossing staging chunks, an optional
// scattered region (restored through its shadow), the refusals.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "ckpt/ckpt.hpp"
#include "test_util.hpp"

using namespace ckpt;
using ckpt::test::options_in;
using ckpt::test::world_rank;
using ckpt::test::world_size;

namespace {
// A block: 2 variables x 3 x 4 interior cells, allocated with one ghost cell around each 3 x 4 plane.
const Dims kRow = {2, 3, 4};
const Dims kAlloc = {2, 5, 6};
const Dims kStart = {0, 1, 1};
constexpr std::uint64_t kInterior = 2 * 3 * 4, kAllocated = 2 * 5 * 6;
constexpr double kGhost = -7.0;

std::int64_t block_id(std::uint64_t g) { return 500 + static_cast<std::int64_t>((29 * g) % 101) * 2; }
double cell(std::int64_t id, std::uint64_t c) { return static_cast<double>(id) * 1000.0 + static_cast<double>(c); }

/// One ghosted block, its own allocation; `id` fills the interior, kGhost the rest (or kGhost everywhere).
std::unique_ptr<double[]> make_block(std::int64_t id, bool fill) {
  std::unique_ptr<double[]> b(new double[kAllocated]);
  std::fill(b.get(), b.get() + kAllocated, kGhost);
  if (fill)
    for (std::uint64_t v = 0; v < 2; ++v)
      for (std::uint64_t i = 0; i < 3; ++i)
        for (std::uint64_t j = 0; j < 4; ++j) b[(v * 5 + i + 1) * 6 + j + 1] = cell(id, (v * 3 + i) * 4 + j);
  return b;
}

/// Checks a restored block: its interior holds block `id`'s cells, its ghosts are untouched.
void expect_block(const double* b, std::int64_t id, const std::string& where) {
  for (std::uint64_t v = 0; v < 2; ++v)
    for (std::uint64_t i = 0; i < 5; ++i)
      for (std::uint64_t j = 0; j < 6; ++j) {
        const bool inside = i >= 1 && i <= 3 && j >= 1 && j <= 4;
        const double want = inside ? cell(id, (v * 3 + i - 1) * 4 + j - 1) : kGhost;
        ASSERT_EQ(b[(v * 5 + i) * 6 + j], want) << where << ": block " << id << " at " << v << "," << i << "," << j;
      }
}

/// The blocks of rank r of a writing job: r + 2 of them, global blocks [first(r), first(r) + r + 2).
std::uint64_t first_block(int r) { return static_cast<std::uint64_t>(r * (r + 3) / 2); }

struct Blocks {
  std::vector<std::unique_ptr<double[]>> mem;
  std::vector<std::int64_t> ids;
  Scattered scattered() const {
    Scattered s{kRow, {}, MemorySelection{kStart, kAlloc}};
    for (const auto& b : mem) s.pieces.push_back(Piece{b.get(), 1});
    return s;
  }
};

Blocks own_blocks(int rank) {
  Blocks b;
  for (std::uint64_t g = first_block(rank); g < first_block(rank + 1); ++g) {
    b.ids.push_back(block_id(g));
    b.mem.push_back(make_block(block_id(g), true));
  }
  return b;
}

void write_blocks(const std::string& dir, std::int64_t step) {
  Blocks b = own_blocks(world_rank());
  Runtime rt(MPI_COMM_WORLD, options_in(dir));
  ASSERT_TRUE(rt.protect("blocks", DType::f64, b.scattered()).ok());
  ASSERT_TRUE(rt.protect("block_id", b.ids.data(), DType::i64, Joined{{b.ids.size()}}).ok());
  Ticket t = rt.checkpoint(step);
  for (auto& m : b.mem) std::fill(m.get(), m.get() + kAllocated, 0.0);  // copied when checkpoint() returned
  Status s = t.wait();
  ASSERT_TRUE(s.ok()) << s.to_string();
}
}  // namespace

TEST(Scattered, StoredAsOneJoinedArrayWithoutTheGhosts) {
  const std::string dir = ckpt::test::scratch_dir();
  write_blocks(dir, 1);
  if (world_rank() != 0) return;
  auto reader = Reader::open(dir);
  ASSERT_TRUE(reader.ok()) << reader.status().to_string();
  auto step = reader->open_step(1);
  ASSERT_TRUE(step.ok()) << step.status().to_string();
  const std::uint64_t total = first_block(world_size());
  std::vector<double> all(total * kInterior);
  Status s = step.value().read("blocks", all.data(), all.size() * sizeof(double));
  ASSERT_TRUE(s.ok()) << s.to_string();
  for (std::uint64_t g = 0; g < total; ++g)
    for (std::uint64_t c = 0; c < kInterior; ++c) ASSERT_EQ(all[g * kInterior + c], cell(block_id(g), c)) << g;
}

TEST(Scattered, BlocksMoveToThreeRanksByKeyIntoNewAllocations) {
  const std::string dir = ckpt::test::scratch_dir();
  write_blocks(dir, 2);
  const int rank = world_rank();
  MPI_Comm three = MPI_COMM_NULL;
  MPI_Comm_split(MPI_COMM_WORLD, rank < 3 ? 0 : MPI_UNDEFINED, rank, &three);
  if (three != MPI_COMM_NULL) {
    // The new partition: rank q owns the blocks whose id % 3 == q, in descending id order, each block
    // allocated anew (the restart knows nothing of where the blocks were).
    Blocks b;
    for (std::uint64_t g = 0; g < first_block(world_size()); ++g)
      if (block_id(g) % 3 == rank) b.ids.push_back(block_id(g));
    std::sort(b.ids.rbegin(), b.ids.rend());
    for (std::size_t i = 0; i < b.ids.size(); ++i) b.mem.push_back(make_block(0, false));
    std::vector<std::int64_t> ids(b.ids.size(), -1);
    Runtime rt(three, options_in(dir));
    ASSERT_TRUE(rt.protect("blocks", DType::f64, b.scattered()).ok());
    ASSERT_TRUE(rt.protect("block_id", ids.data(), DType::i64, Joined{{ids.size()}}).ok());
    ASSERT_TRUE(rt.set_restart_keys("blocks", "block_id", b.ids).ok());
    ASSERT_TRUE(rt.set_restart_keys("block_id", "block_id", b.ids).ok());
    Status s = rt.restart(2);
    ASSERT_TRUE(s.ok()) << s.to_string();
    EXPECT_EQ(ids, b.ids);
    for (std::size_t i = 0; i < b.ids.size(); ++i)
      expect_block(b.mem[i].get(), b.ids[i], "rank " + std::to_string(rank));
    MPI_Comm_free(&three);
  }
  MPI_Barrier(MPI_COMM_WORLD);
}

TEST(Scattered, BalancedRestartIntoPiecesOfSeveralRows) {
  // The same rank count, no keys: this rank's balanced share of rows, in pieces of 0, 1 and 2 rows (a
  // piece of k rows is k ghosted allocations back to back).
  const std::string dir = ckpt::test::scratch_dir();
  write_blocks(dir, 3);
  const int rank = world_rank();
  const JoinedRows share = balanced_rows(first_block(world_size()), rank, world_size());
  std::vector<std::unique_ptr<double[]>> mem;
  Scattered s{kRow, {}, MemorySelection{kStart, kAlloc}};
  s.pieces.push_back(Piece{nullptr, 0});
  for (std::uint64_t left = share.count(); left > 0;) {
    const std::uint64_t rows = std::min<std::uint64_t>(left, 2);
    mem.emplace_back(new double[rows * kAllocated]);
    std::fill(mem.back().get(), mem.back().get() + rows * kAllocated, kGhost);
    s.pieces.push_back(Piece{mem.back().get(), rows});
    left -= rows;
  }
  Runtime rt(MPI_COMM_WORLD, options_in(dir));
  ASSERT_TRUE(rt.protect("blocks", DType::f64, s).ok());
  Status st = rt.restart(3);
  ASSERT_TRUE(st.ok()) << st.to_string();
  std::uint64_t row = share.begin;
  for (std::size_t p = 1; p < s.pieces.size(); ++p)
    for (std::uint64_t k = 0; k < s.pieces[p].rows; ++k, ++row)
      expect_block(static_cast<const double*>(s.pieces[p].ptr) + k * kAllocated, block_id(row), "balanced");
  EXPECT_EQ(row, share.end);
}

TEST(Scattered, RefinedBlocksAreUpdatedBetweenCheckpoints) {
  // Step 4 with the blocks of the writing partition; then rank 1 refines its first block into two
  // (new ids, new allocations) and rank 2 loses its last: update() with the new pieces, step 5.
  const std::string dir = ckpt::test::scratch_dir();
  const int rank = world_rank();
  Blocks b = own_blocks(rank);
  std::vector<std::int64_t> ids = b.ids;
  Runtime rt(MPI_COMM_WORLD, options_in(dir));
  ASSERT_TRUE(rt.protect_or_update("blocks", DType::f64, b.scattered()).ok());
  ASSERT_TRUE(rt.protect("block_id", ids.data(), DType::i64, Joined{{ids.size()}}).ok());
  Status s = rt.checkpoint(4).wait();
  ASSERT_TRUE(s.ok()) << s.to_string();
  if (rank == 1) {
    b.mem.erase(b.mem.begin());
    b.ids.erase(b.ids.begin());
    for (std::int64_t child : {9001, 9002}) {
      b.ids.insert(b.ids.begin(), child);
      b.mem.insert(b.mem.begin(), make_block(child, true));
    }
  }
  if (rank == 2) {
    b.mem.pop_back();
    b.ids.pop_back();
  }
  ids = b.ids;
  ASSERT_TRUE(rt.protect_or_update("blocks", DType::f64, b.scattered()).ok());
  ASSERT_TRUE(rt.update("block_id", ids.data(), Joined{{ids.size()}}).ok());
  s = rt.checkpoint(5).wait();
  ASSERT_TRUE(s.ok()) << s.to_string();
  // Restart step 5 on the same ranks into fresh allocations, by key.
  Blocks back;
  back.ids = b.ids;
  for (std::size_t i = 0; i < back.ids.size(); ++i) back.mem.push_back(make_block(0, false));
  ASSERT_TRUE(rt.update("blocks", back.scattered()).ok());
  ASSERT_TRUE(rt.set_restart_keys("blocks", "block_id", back.ids).ok());
  ASSERT_TRUE(rt.set_restart_keys("block_id", "block_id", back.ids).ok());
  s = rt.restart(5);
  ASSERT_TRUE(s.ok()) << s.to_string();
  for (std::size_t i = 0; i < back.ids.size(); ++i) expect_block(back.mem[i].get(), back.ids[i], "refined");
}

TEST(Scattered, PackedPiecesAcrossStagingChunksAndAnOptionalRegion) {
  // Pieces of 1 to 40000 rows of 3 f32 (the largest > 64 KiB: streaming stores), chunks of 64 KiB: a
  // chunk ends inside pieces and holds several. "extra" is optional: restored through a shadow.
  const std::string dir = ckpt::test::scratch_dir();
  const int rank = world_rank();
  const std::vector<std::uint64_t> sizes = {1, 40000, 3, 0, 7000 + static_cast<std::uint64_t>(rank), 2};
  auto value = [&](std::uint64_t row, std::uint64_t c) { return static_cast<float>(rank * 1000000 + row * 3 + c); };
  std::vector<std::vector<float>> mem;
  auto pieces = [&](bool fill) {
    mem.clear();
    Scattered s{{3}, {}, {}};
    std::uint64_t row = 0;
    for (std::uint64_t n : sizes) {
      mem.emplace_back(n * 3, -1.0f);
      if (fill)
        for (std::uint64_t k = 0; k < n * 3; ++k) mem.back()[k] = value(row + k / 3, k % 3);
      s.pieces.push_back(Piece{mem.back().data(), n});
      row += n;
    }
    return s;
  };
  Options o = options_in(dir);
  o.chunk_bytes = 64 << 10;
  std::unique_ptr<double[]> extra_block = make_block(rank, true);
  {
    Runtime rt(MPI_COMM_WORLD, o);
    ASSERT_TRUE(rt.protect("rows", DType::f32, pieces(true)).ok());
    ASSERT_TRUE(rt.protect("extra", DType::f64, Scattered{kRow, {Piece{extra_block.get(), 1}}, {kStart, kAlloc}}).ok());
    Status s = rt.checkpoint(6).wait();
    ASSERT_TRUE(s.ok()) << s.to_string();
  }
  Runtime rt(MPI_COMM_WORLD, o);
  ASSERT_TRUE(rt.protect("rows", DType::f32, pieces(false)).ok());
  std::unique_ptr<double[]> into = make_block(0, false);
  ASSERT_TRUE(rt.protect("extra", DType::f64, Scattered{kRow, {Piece{into.get(), 1}}, {kStart, kAlloc}}).ok());
  ASSERT_TRUE(rt.set_optional("extra").ok());
  // This rank's own rows by index (the ranks hold different counts: no balanced split).
  std::uint64_t mine = 0, first = 0;
  for (std::uint64_t n : sizes) mine += n;
  for (int q = 0; q < rank; ++q) first += mine - static_cast<std::uint64_t>(rank - q);
  std::vector<std::uint64_t> rows(mine);
  for (std::uint64_t i = 0; i < mine; ++i) rows[i] = first + i;
  ASSERT_TRUE(rt.set_restart_rows("rows", rows).ok());
  Status s = rt.restart(6);
  ASSERT_TRUE(s.ok()) << s.to_string();
  std::uint64_t row = 0;
  for (std::size_t p = 0; p < sizes.size(); row += sizes[p++])
    for (std::uint64_t k = 0; k < sizes[p] * 3; ++k)
      ASSERT_EQ(mem[p][k], value(row + k / 3, k % 3)) << "piece " << p << " element " << k << " rank " << rank;
  expect_block(into.get(), rank, "optional");
}

TEST(Scattered, Refusals) {
  const std::string dir = ckpt::test::scratch_dir();
  Blocks b = own_blocks(world_rank());
  std::vector<double> plain(8);
  Runtime rt(MPI_COMM_WORLD, options_in(dir));
  auto expect_refused = [](const Status& s, const std::string& words) {
    EXPECT_EQ(s.code(), Code::invalid_argument) << s.to_string();
    EXPECT_NE(s.message().find(words), std::string::npos) << s.to_string();
  };
  // A piece with rows and no memory.
  expect_refused(rt.protect("a", DType::f64, Scattered{{4}, {Piece{plain.data(), 1}, Piece{nullptr, 2}}, {}}),
                 "piece 1 has 2 rows and a null pointer");
  // A selection that is not one row's.
  expect_refused(rt.protect("a", DType::f64, Scattered{kRow, {Piece{b.mem[0].get(), 1}}, {{0, 1}, {2, 5}}}),
                 "memory selection");
  expect_refused(rt.protect("a", DType::f64, Scattered{{}, {Piece{plain.data(), 8}}, {{1}, {3}}}),
                 "a memory selection needs row extents");
  expect_refused(rt.protect("a", DType::f64, Scattered{{4, 0}, {Piece{plain.data(), 1}}, {}}), "row extent 1 is 0");
  expect_refused(rt.protect("a", DType::f64, Scattered{Dims(Shape(16, 1)), {}, {}}), "(at most 15)");
  ASSERT_TRUE(rt.protect("blocks", DType::f64, b.scattered()).ok());
  expect_refused(rt.protect("blocks", DType::f64, b.scattered()), "already protected");
  // Rows of other extents, another dtype, a plain update, a memory selection of its own.
  Scattered other = b.scattered();
  other.row = {2, 3, 5};
  expect_refused(rt.update("blocks", other), "cannot change");
  expect_refused(rt.protect_or_update("blocks", DType::f32, b.scattered()), "dtype cannot change");
  expect_refused(rt.update("blocks", plain.data(), Joined{{1, 2, 3, 4}}), "update it with Scattered");
  expect_refused(rt.set_memory_selection("blocks", MemorySelection{{0, 0, 1, 1}, {1, 2, 5, 6}}), "Scattered::memory");
  // A region of another kind takes no Scattered.
  ASSERT_TRUE(rt.protect("plain", plain.data(), DType::f64, Joined{{2, 4}}).ok());
  expect_refused(rt.update("plain", Scattered{{4}, {Piece{plain.data(), 2}}, {}}), "not as Scattered pieces");
  EXPECT_EQ(rt.update("nothing", Scattered{{4}, {}, {}}).code(), Code::not_found);
  // Negative extents.
  expect_refused(rt.protect("neg", DType::f64, Scattered{Dims{-1}, {}, {}}), "negative");
  // Zero rows are a valid contribution: checkpoint and restart work with every piece empty.
  ASSERT_TRUE(rt.protect("empty", DType::f64, Scattered{{4}, {Piece{nullptr, 0}}, {}}).ok());
  Status s = rt.checkpoint(7).wait();
  ASSERT_TRUE(s.ok()) << s.to_string();
}

TEST(Scattered, EveryTransportStoresThePiecesAndHdf5SyncRefusesThem) {
  // Transports that write from staging store a Scattered region like any joined array; hdf5-sync writes
  // from the application's memory at one pointer per region, so it refuses one (naming it) at protect.
  std::vector<std::string> transports = {"posix", "mpiio", "rbio"};
#if CKPTTEST_HAVE_HDF5
  transports.push_back("hdf5");
#endif
  const int rank = world_rank();
  for (const std::string& t : transports) {
    SCOPED_TRACE(t);
    const std::string dir = ckpt::test::scratch_dir("-" + t);
    Options o = options_in(dir);
    o.transport = t;
    {
      Blocks b = own_blocks(rank);
      Runtime rt(MPI_COMM_WORLD, o);
      ASSERT_TRUE(rt.protect("blocks", DType::f64, b.scattered()).ok());
      ASSERT_TRUE(rt.protect("block_id", b.ids.data(), DType::i64, Joined{{b.ids.size()}}).ok());
      Status s = rt.checkpoint(1).wait();
      ASSERT_TRUE(s.ok()) << s.to_string();
    }
    Blocks back;
    back.ids = own_blocks(rank).ids;
    std::reverse(back.ids.begin(), back.ids.end());
    for (std::size_t i = 0; i < back.ids.size(); ++i) back.mem.push_back(make_block(0, false));
    Runtime rt(MPI_COMM_WORLD, o);
    ASSERT_TRUE(rt.protect("blocks", DType::f64, back.scattered()).ok());
    ASSERT_TRUE(rt.set_restart_keys("blocks", "block_id", back.ids).ok());
    Status s = rt.restart(1);
    ASSERT_TRUE(s.ok()) << s.to_string();
    for (std::size_t i = 0; i < back.ids.size(); ++i) expect_block(back.mem[i].get(), back.ids[i], t);
  }
#if CKPTTEST_HAVE_HDF5
  Options o = options_in(ckpt::test::scratch_dir("-hdf5-sync"));
  o.transport = "hdf5-sync";
  Blocks b = own_blocks(rank);
  Runtime rt(MPI_COMM_WORLD, o);
  Status s = rt.protect("blocks", DType::f64, b.scattered());
  EXPECT_EQ(s.code(), Code::invalid_argument) << s.to_string();
  EXPECT_NE(s.message().find("'blocks' is Scattered"), std::string::npos) << s.to_string();
#endif
}

// Combinations with the rest of the library: ranks that register one variable differently, the
// node-local levels with partner and xor redundancy, on_busy = coalesce.

namespace {
/// Block `g`'s rows packed one after the other (what a plain Joined region holds): no ghost cells.
std::vector<double> packed_blocks(std::uint64_t first, std::uint64_t last) {
  std::vector<double> v;
  for (std::uint64_t g = first; g < last; ++g)
    for (std::uint64_t c = 0; c < kInterior; ++c) v.push_back(cell(block_id(g), c));
  return v;
}
}  // namespace

TEST(Scattered, RanksMayMixScatteredAndPlainRowsOfOneArray) {
  // A Scattered region is stored as a joined array: a rank that holds its rows packed at one pointer
  // (Joined of the same row extents) contributes to the same array. Ranks 0 and 2 write pieces, 1 and
  // 3 packed rows; each restarts its own rows the other way round.
  const std::string dir = ckpt::test::scratch_dir();
  const int rank = world_rank();
  const bool pieces = rank % 2 == 0;
  const std::uint64_t first = first_block(rank), n = first_block(rank + 1) - first;
  {
    Blocks b = own_blocks(rank);
    std::vector<double> packed = packed_blocks(first, first + n);
    Runtime rt(MPI_COMM_WORLD, options_in(dir));
    Status p = pieces ? rt.protect("blocks", DType::f64, b.scattered())
                      : rt.protect("blocks", packed.data(), DType::f64, Joined{{n, 2, 3, 4}});
    ASSERT_TRUE(p.ok()) << p.to_string();
    Status s = rt.checkpoint(1).wait();
    ASSERT_TRUE(s.ok()) << s.to_string();
  }
  if (rank == 0) {
    auto reader = Reader::open(dir);
    ASSERT_TRUE(reader.ok()) << reader.status().to_string();
    auto step = reader->open_step(1);
    ASSERT_TRUE(step.ok()) << step.status().to_string();
    const std::vector<double> want = packed_blocks(0, first_block(world_size()));
    std::vector<double> all(want.size());
    Status s = step.value().read("blocks", all.data(), all.size() * sizeof(double));
    ASSERT_TRUE(s.ok()) << s.to_string();
    EXPECT_EQ(all, want);
  }
  Blocks back;
  for (std::uint64_t i = 0; i < n; ++i) back.mem.push_back(make_block(0, false));
  std::vector<double> packed(n * kInterior, -1.0);
  Runtime rt(MPI_COMM_WORLD, options_in(dir));
  Status p = !pieces ? rt.protect("blocks", DType::f64, back.scattered())
                     : rt.protect("blocks", packed.data(), DType::f64, Joined{{n, 2, 3, 4}, first});
  ASSERT_TRUE(p.ok()) << p.to_string();
  if (!pieces) {
    std::vector<std::uint64_t> rows(n);
    for (std::uint64_t i = 0; i < n; ++i) rows[i] = first + i;
    ASSERT_TRUE(rt.set_restart_rows("blocks", rows).ok());
  }
  Status s = rt.restart(1);
  ASSERT_TRUE(s.ok()) << s.to_string();
  if (pieces) EXPECT_EQ(packed, packed_blocks(first, first + n));
  for (std::uint64_t i = 0; i < n && !pieces; ++i) expect_block(back.mem[i].get(), block_id(first + i), "mixed");
}

TEST(Scattered, RanksThatRegisterItDifferentlyFailTheCheckpointEverywhere) {
  // Rank 1 registers "blocks" unlike the others: rows of other extents, another dtype, as a local
  // array, as a Block of a global array. The checkpoint fails on every rank with the same error naming
  // the variable, nothing is committed (no hang, no checkpoint to restart from), and the Runtime goes
  // on: the next checkpoint, with the variable registered alike, commits and restores exactly.
  const int rank = world_rank();
  struct Case {
    std::string what, transport;
  };
  std::vector<Case> cases;
  for (const char* t : {"posix", "mpiio"})
    for (const char* w : {"row extents", "dtype", "local kind", "global kind"}) cases.push_back({w, t});
#if CKPTTEST_HAVE_HDF5
  cases.push_back({"dtype", "hdf5"});
#endif
  cases.push_back({"row extents", "levels"});
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what + " with " + c.transport);
    const std::string dir = ckpt::test::scratch_dir("-" + c.transport + "-" + std::to_string(&c - cases.data()));
    Options o = options_in(c.transport == "levels" ? dir + "/global" : dir);
    if (c.transport == "levels") {
      o.local_dir = dir + "/local";
      o.ranks_per_node = 2;
      o.redundancy = Redundancy::partner;
    } else {
      o.transport = c.transport;
    }
    Blocks b = own_blocks(rank);
    Runtime rt(MPI_COMM_WORLD, o);
    ASSERT_TRUE(rt.status().ok()) << rt.status().to_string();
    Status p;
    Scattered other = b.scattered();
    if (rank != 1) {
      p = rt.protect("blocks", DType::f64, b.scattered());
    } else if (c.what == "row extents") {
      other.row = {2, 3, 3};
      p = rt.protect("blocks", DType::f64, other);
    } else if (c.what == "dtype") {
      p = rt.protect("blocks", DType::f32, other);
    } else if (c.what == "local kind") {
      p = rt.protect("blocks", b.mem[0].get(), DType::f64, {2, 3, 4});
    } else {
      const std::uint64_t nb = first_block(world_size());
      p = rt.protect("blocks", b.mem[0].get(), DType::f64,
                     Block{{nb, 2, 3, 4}, {first_block(1), 0, 0, 0}, {1, 2, 3, 4}});
    }
    ASSERT_TRUE(p.ok()) << p.to_string();
    ASSERT_TRUE(rt.protect("block_id", b.ids.data(), DType::i64, Joined{{b.ids.size()}}).ok());
    Status s = rt.checkpoint(1).wait();
    EXPECT_EQ(s.code(), Code::invalid_argument) << s.to_string();
    // "variable 'blocks' is registered differently on rank 1" (hdf5: "has another dtype or kind on rank 1").
    EXPECT_NE(s.message().find("variable 'blocks'"), std::string::npos) << s.to_string();
    EXPECT_NE(s.message().find("on rank 1"), std::string::npos) << s.to_string();
    int code = static_cast<int>(s.code()), low = 0, high = 0;
    MPI_Allreduce(&code, &low, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    MPI_Allreduce(&code, &high, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    EXPECT_EQ(low, high) << "every rank fails alike";
    EXPECT_EQ(ckpt::test::newest_step(rt), -1) << "nothing committed";
    EXPECT_FALSE(rt.restart(1).ok());
    // Registered alike again: the next step commits and restores every block.
    ASSERT_TRUE(rt.unprotect("blocks").ok());
    ASSERT_TRUE(rt.protect("blocks", DType::f64, b.scattered()).ok());
    s = rt.checkpoint(2).wait();
    ASSERT_TRUE(s.ok()) << s.to_string();
    EXPECT_EQ(ckpt::test::newest_step(rt), 2);
    for (auto& m : b.mem) std::fill(m.get(), m.get() + kAllocated, kGhost);
    ASSERT_TRUE(rt.set_restart_keys("blocks", "block_id", b.ids).ok());
    ASSERT_TRUE(rt.set_restart_keys("block_id", "block_id", b.ids).ok());
    s = rt.restart(2);
    ASSERT_TRUE(s.ok()) << s.to_string();
    for (std::size_t i = 0; i < b.ids.size(); ++i) expect_block(b.mem[i].get(), b.ids[i], c.what);
    ASSERT_TRUE(rt.close().ok());
  }
}

namespace {
/// The blocks of rank `rank` at step `step`: 2 + (rank + step) % 3 blocks, new ids and allocations at
/// every step (the mesh was regridded), the ids also saying which step wrote them.
Blocks step_blocks(int rank, std::int64_t step, std::uint64_t count = 0) {
  Blocks b;
  const std::uint64_t n = count > 0 ? count : 2 + static_cast<std::uint64_t>(rank + step) % 3;
  for (std::uint64_t i = 0; i < n; ++i) {
    b.ids.push_back(step * 100000 + rank * 10000 + static_cast<std::int64_t>(i));
    b.mem.push_back(make_block(b.ids.back(), true));
  }
  return b;
}

/// Into fresh allocations, in reverse order: rank `rank`'s blocks of `step` (the rows it wrote then),
/// by key - or by index (`by_index`: the node level holds a node's own files only, and a key is looked
/// up in every rank's key column); checks them.
void expect_step_restored(Runtime& rt, int rank, std::int64_t step, std::uint64_t count = 0, bool by_index = false) {
  Blocks want = step_blocks(rank, step, count), back;
  back.ids = want.ids;
  std::reverse(back.ids.begin(), back.ids.end());  // another order than written
  for (std::size_t i = 0; i < back.ids.size(); ++i) back.mem.push_back(make_block(0, false));
  std::vector<std::int64_t> ids(back.ids.size(), -1);
  ASSERT_TRUE(rt.protect_or_update("blocks", DType::f64, back.scattered()).ok());
  ASSERT_TRUE(rt.protect_or_update("block_id", ids.data(), DType::i64, Joined{{ids.size()}}).ok());
  if (by_index) {
    std::uint64_t first = 0;  // the rows of the ranks before this one
    for (int q = 0; q < rank; ++q) first += step_blocks(q, step, count).ids.size();
    std::vector<std::uint64_t> rows;
    for (std::size_t i = back.ids.size(); i-- > 0;) rows.push_back(first + i);
    ASSERT_TRUE(rt.set_restart_rows("blocks", rows).ok());
    ASSERT_TRUE(rt.set_restart_rows("block_id", rows).ok());
  } else {
    ASSERT_TRUE(rt.set_restart_keys("blocks", "block_id", back.ids).ok());
    ASSERT_TRUE(rt.set_restart_keys("block_id", "block_id", back.ids).ok());
  }
  auto r = rt.restart();
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r.value(), step);
  EXPECT_EQ(ids, back.ids);
  for (std::size_t i = 0; i < back.ids.size(); ++i)
    expect_block(back.mem[i].get(), back.ids[i], "step " + std::to_string(step));
}

/// Checkpoints steps 1..`last` of step_blocks (regridded at every step: update() with new pieces; the
/// old allocations overwritten once checkpoint() returned, then freed), each waited for.
void write_regridded(Runtime& rt, std::int64_t last) {
  const int rank = world_rank();
  Blocks b;
  for (std::int64_t step = 1; step <= last; ++step) {
    b = step_blocks(rank, step);
    ASSERT_TRUE(rt.protect_or_update("blocks", DType::f64, b.scattered()).ok());
    Status s = step == 1 ? rt.protect("block_id", b.ids.data(), DType::i64, Joined{{b.ids.size()}})
                         : rt.update("block_id", b.ids.data(), Joined{{b.ids.size()}});
    ASSERT_TRUE(s.ok()) << s.to_string();
    Ticket t = rt.checkpoint(step);
    for (auto& m : b.mem) std::fill(m.get(), m.get() + kAllocated, -1.0);
    s = t.wait();
    ASSERT_TRUE(s.ok()) << s.to_string();
    EXPECT_GT(t.stats().redundancy_bytes, 0u);
  }
}
}  // namespace

namespace {
/// With the node level of `o` (nothing drained, blocks crossing chunks): steps 1..`last` regridded,
/// node `lost`'s directory removed, then the newest step restored from `level`. The node level holds
/// each node's own files only: each rank takes back the blocks it wrote.
void lose_node_and_restore(Options o, std::int64_t last, int lost, const char* level) {
  ASSERT_EQ(world_size(), 4);
  const std::string root = ckpt::test::scratch_dir();
  o.dir = root + "/global";
  o.local_dir = root + "/local";
  o.drain_every = 0;
  o.chunk_bytes = 4 << 10;
  {
    Runtime rt(MPI_COMM_WORLD, o);
    ASSERT_TRUE(rt.status().ok()) << rt.status().to_string();
    write_regridded(rt, last);
    ASSERT_TRUE(rt.close().ok());
  }
  MPI_Barrier(MPI_COMM_WORLD);
  if (world_rank() == 0) ckpt::detail::remove_tree(root + "/local/node" + std::to_string(lost));
  MPI_Barrier(MPI_COMM_WORLD);
  Runtime rt(MPI_COMM_WORLD, o);
  ASSERT_TRUE(rt.status().ok()) << rt.status().to_string();
  expect_step_restored(rt, world_rank(), last, 0, true);
  EXPECT_EQ(rt.restart_level(), level);
}
}  // namespace

TEST(Scattered, NodeLevelWithPartnerCopyRebuildsALostNode) {
  // 4 ranks as 2 nodes: after node 1 is lost only the partner copy holds its blocks.
  Options o = Options::defaults();
  o.ranks_per_node = 2;
  o.redundancy = Redundancy::partner;
  lose_node_and_restore(o, 2, 1, "partner");
}

TEST(Scattered, NodeLevelWithXorParityRebuildsALostNode) {
  // 4 ranks as 4 nodes in one xor group: node 2 comes back from the others' parity.
  Options o = Options::defaults();
  o.ranks_per_node = 1;
  o.redundancy = Redundancy::xor_parity;
  o.xor_group = 4;
  lose_node_and_restore(o, 3, 2, "xor");
}

TEST(Scattered, CoalescedCheckpointsOfRegriddedBlocksRestoreTheNewest) {
  // on_busy = coalesce with slow flushes: checkpoints wait and are superseded while the blocks are
  // regridded between them (new pieces, the old ones overwritten as soon as checkpoint() returned, then
  // freed). Each capture holds the pieces of its own step; the newest commits and restores exactly.
  // Twice: with a pool that holds several captures, and with one smaller than a capture (it streams).
  const int rank = world_rank();
  for (const bool streams : {false, true}) {
    SCOPED_TRACE(streams ? "streaming" : "captured");
    const std::string dir = ckpt::test::scratch_dir(streams ? "-streams" : "");
    Options o = options_in(dir);
    o.on_busy = Options::OnBusy::coalesce;
    o.chunk_bytes = 64 << 10;
    // Streaming: 1500 blocks of 192 bytes per rank (281 KiB) in a pool of 4 chunks (256 KiB).
    const std::uint64_t count = streams ? 1500 : 0;
    if (streams) o.pool_bytes = 4 * *o.chunk_bytes;
    ckpt::test::FlushDelay slow(streams ? 2 : 20);
    Runtime rt(MPI_COMM_WORLD, o);
    ASSERT_TRUE(rt.status().ok()) << rt.status().to_string();
    const std::int64_t n = 8;
    std::vector<Ticket> tickets;
    std::vector<std::int64_t> ids;
    for (std::int64_t step = 1; step <= n; ++step) {
      Blocks b = step_blocks(rank, step, count);
      ids = b.ids;
      ASSERT_TRUE(rt.protect_or_update("blocks", DType::f64, b.scattered()).ok());
      Status s = step == 1 ? rt.protect("block_id", ids.data(), DType::i64, Joined{{ids.size()}})
                           : rt.update("block_id", ids.data(), Joined{{ids.size()}});
      ASSERT_TRUE(s.ok()) << s.to_string();
      ::usleep(static_cast<useconds_t>(((rank * 7 + step * 13) % 5) * 1000));  // ranks out of phase
      tickets.push_back(rt.checkpoint(step));
      for (auto& m : b.mem) std::fill(m.get(), m.get() + kAllocated, -1.0);  // then freed with `b`
    }
    ASSERT_TRUE(rt.wait_all().ok());
    int superseded = 0;
    for (auto& t : tickets) {
      const Status s = t.wait();
      EXPECT_TRUE(s.ok() || s.code() == Code::superseded) << "step " << t.step() << ": " << s.to_string();
      superseded += s.code() == Code::superseded ? 1 : 0;
    }
    EXPECT_TRUE(tickets.back().wait().ok());
    if (!streams) EXPECT_GE(superseded, 1) << "8 back-to-back checkpoints of slow flushes: some must be replaced";
    EXPECT_EQ(ckpt::test::newest_step(rt), n);
    expect_step_restored(rt, rank, n, count);
    ASSERT_TRUE(rt.close().ok());
  }
}
