// Scattered regions (issue 35): one joined array whose rows lie in separately allocated pieces - AMR
// blocks with ghost cells, each its own allocation - registered as a list of pieces, captured from each
// piece with no packing by the application, stored as any joined array, and restored into the pieces
// registered at restart: on another rank count, by block id, the blocks landing in other allocations.
// At 4 ranks: blocks refined between checkpoints (update), pieces crossing staging chunks, an optional
// scattered region (restored through its shadow), the refusals.
#include <gtest/gtest.h>

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
