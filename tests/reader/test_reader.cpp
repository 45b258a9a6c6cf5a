// ckpt::Reader on checkpoints of every compiled transport, written at the test's rank count: listing,
// descriptions, boxes of global arrays (read by every rank at once, serially, with no communicator),
// per-rank locals and scalars, and damage: a flipped byte in one block fails exactly the reads that
// touch that block, naming the variable and the rank. A Reader opened on MPI_COMM_WORLD shares rank 0's
// listing and index (and its errors) and every rank reads its own part.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include "base/store.hpp"
#include "ckpt/ckpt.hpp"
#include "ckpt/config.hpp"
#include "ckpt/reader.hpp"
#include "test_util.hpp"

using namespace ckpt;
using ckpt::test::all_true;
using ckpt::test::scratch_dir;
using ckpt::test::world_rank;
using ckpt::test::world_size;

namespace {

constexpr std::uint64_t kCols = 37;
constexpr std::uint64_t kNz = 5;

/// What rank `r` of `size` stores at step `step`: rows [row0, row0 + rows) of "grid" (f64,
/// [rows_global, 37]), columns [c0, c0 + cn) of "cube" (i32, [3, 4 * size + 1, 5]), a local array
/// "ids" of 10 + 3 r values, a scalar "time" equal everywhere and a scalar "seed" that is not.
struct Part {
  std::uint64_t rows_global, row0, rows, cols_global, c0, cn;
  Part(int r, int size) {
    rows_global = 7 * static_cast<std::uint64_t>(size) + 3;
    const std::uint64_t base = rows_global / size, extra = rows_global % size;
    rows = base + (static_cast<std::uint64_t>(r) < extra ? 1 : 0);
    row0 = r * base + std::min<std::uint64_t>(r, extra);
    cols_global = 4 * static_cast<std::uint64_t>(size) + 1;
    cn = 4 + (r == size - 1 ? 1 : 0);
    c0 = 4 * static_cast<std::uint64_t>(r);
  }
};

double grid_value(std::int64_t step, std::uint64_t i, std::uint64_t j) { return step + 1000.0 * i + j; }
std::int32_t cube_value(std::int64_t step, std::uint64_t a, std::uint64_t b, std::uint64_t c) {
  return static_cast<std::int32_t>(step * 100000 + a * 10000 + b * 10 + c) * (b % 2 ? -1 : 1);
}
std::int64_t id_value(std::int64_t step, int r, std::size_t i) {
  return step * 1000000 + r * 1000 + static_cast<std::int64_t>(i);
}

struct Config {
  const char* label;
  const char* transport;
};
std::ostream& operator<<(std::ostream& os, const Config& c) { return os << c.label; }

/// Writes steps 3 and 7 with transport `t` into `dir` (collective); with `series`, layout series with
/// one segment per step (step 3 in series.0, 7 in series.1).
void write_steps(const std::string& dir, const char* transport, bool series = false) {
  const int rank = world_rank(), size = world_size();
  Options o = Options::defaults();
  o.dir = dir;
  o.transport = transport;
  if (series) {
    o.layout = Options::Layout::series;
    o.segment_steps = 1;
  }
  o.keep = 5;
  o.chunk_bytes = 64 << 10;
  Runtime rt(MPI_COMM_WORLD, o);
  ASSERT_TRUE(rt.status().ok()) << rt.status().to_string();
  Part p(rank, size);
  if (std::string(transport) == "hdf5") {
    // hdf5 keeps every block contiguous in its dataset: rank 0 holds the whole cube, the others none.
    p.c0 = 0;
    p.cn = rank == 0 ? p.cols_global : 0;
  }
  std::vector<double> grid(p.rows * kCols);
  std::vector<std::int32_t> cube(3 * p.cn * kNz);
  std::vector<std::int64_t> ids(10 + 3 * static_cast<std::size_t>(rank));
  double time = 0;
  std::uint64_t seed = 0;
  ASSERT_TRUE(
      rt.protect("grid", grid.data(), DType::f64, Block{{p.rows_global, kCols}, {p.row0, 0}, {p.rows, kCols}}).ok());
  ASSERT_TRUE(
      rt.protect("cube", cube.data(), DType::i32, Block{{3, p.cols_global, kNz}, {0, p.c0, 0}, {3, p.cn, kNz}}).ok());
  ASSERT_TRUE(rt.protect("ids", ids.data(), DType::i64, {ids.size()}).ok());
  ASSERT_TRUE(rt.protect_scalar("time", &time).ok());
  ASSERT_TRUE(rt.protect_scalar("seed", &seed).ok());
  ASSERT_TRUE(rt.annotate("grid", "units", "g/cm^3").ok());
  for (std::int64_t step : {3, 7}) {
    for (std::uint64_t i = 0; i < p.rows; ++i)
      for (std::uint64_t j = 0; j < kCols; ++j) grid[i * kCols + j] = grid_value(step, p.row0 + i, j);
    for (std::uint64_t a = 0; a < 3; ++a)
      for (std::uint64_t b = 0; b < p.cn; ++b)
        for (std::uint64_t c = 0; c < kNz; ++c) cube[(a * p.cn + b) * kNz + c] = cube_value(step, a, p.c0 + b, c);
    for (std::size_t i = 0; i < ids.size(); ++i) ids[i] = id_value(step, rank, i);
    time = 0.25 * static_cast<double>(step);
    seed = 1000 + static_cast<std::uint64_t>(rank) + static_cast<std::uint64_t>(step);
    const Status st = rt.checkpoint(step).wait();
    ASSERT_TRUE(st.ok()) << st.to_string();
  }
  ASSERT_TRUE(rt.close().ok());
}

/// Reads the box and compares it with grid_value().
::testing::AssertionResult grid_box_ok(CheckpointReader& c, const Shape& start, const Shape& count) {
  std::vector<double> box(count[0] * count[1], -1);
  Status s = c.read("grid", start, count, box.data(), box.size() * sizeof(double));
  if (!s.ok()) return ::testing::AssertionFailure() << s.to_string();
  for (std::uint64_t i = 0; i < count[0]; ++i)
    for (std::uint64_t j = 0; j < count[1]; ++j)
      if (box[i * count[1] + j] != grid_value(c.step(), start[0] + i, start[1] + j))
        return ::testing::AssertionFailure()
               << "grid[" << start[0] + i << "][" << start[1] + j << "] = " << box[i * count[1] + j];
  return ::testing::AssertionSuccess();
}

/// Rank 0 flips the bits of a byte of the index of checkpoint directory `ckpt` (collective: barriers
/// around). Flipped, not overwritten: byte 40 lies in the index's creation time, which holds any given
/// value for 17 minutes every 3 days, and writing that value would change nothing.
void damage_index(const std::string& ckpt) {
  MPI_Barrier(MPI_COMM_WORLD);
  if (world_rank() == 0) {
    std::fstream f(ckpt + "/index", std::ios::in | std::ios::out | std::ios::binary);
    char x = 0;
    f.seekg(40);
    f.read(&x, 1);
    x = static_cast<char>(x ^ 0x7f);
    f.seekp(40);
    f.write(&x, 1);
  }
  MPI_Barrier(MPI_COMM_WORLD);
}

class ReaderTest : public ::testing::TestWithParam<Config> {};

TEST_P(ReaderTest, DescribesAndReadsEveryKind) {
  const auto dir = scratch_dir();
  write_steps(dir, GetParam().transport);
  const int size = world_size();
  // Every rank reads on its own, at the same time: no communicator is involved.
  auto r = Reader::open(dir);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->steps(), (std::vector<std::int64_t>{3, 7}));
  auto cr = r->latest();
  ASSERT_TRUE(cr.ok()) << cr.status().to_string();
  CheckpointReader& c = cr.value();
  EXPECT_EQ(c.step(), 7);
  EXPECT_EQ(c.nranks(), size);
  EXPECT_EQ(c.transport(), GetParam().transport);

  const auto& vars = c.variables();
  ASSERT_EQ(vars.size(), 5u);
  const char* names[] = {"grid", "cube", "ids", "time", "seed"};
  for (std::size_t i = 0; i < 5; ++i) EXPECT_EQ(vars[i].name, names[i]) << "registration order";
  const Part p0(0, size);
  const VariableInfo& g = vars[0];
  EXPECT_EQ(g.kind, VarKind::global);
  EXPECT_EQ(g.dtype, DType::f64);
  EXPECT_EQ(g.shape, (Shape{p0.rows_global, kCols}));
  EXPECT_EQ(g.attrs, (std::vector<std::pair<std::string, std::string>>{{"units", "g/cm^3"}}));
  ASSERT_TRUE(g.has_minmax);
  EXPECT_EQ(g.min, grid_value(7, 0, 0));
  EXPECT_EQ(g.max, grid_value(7, p0.rows_global - 1, kCols - 1));
  EXPECT_EQ(g.blocks.size(), static_cast<std::size_t>(size));
  ASSERT_EQ(g.ranks.size(), static_cast<std::size_t>(size));
  for (int q = 0; q < size; ++q) EXPECT_EQ(g.ranks[static_cast<std::size_t>(q)], static_cast<std::uint32_t>(q));
  EXPECT_EQ(vars[1].shape, (Shape{3, p0.cols_global, kNz}));
  EXPECT_EQ(vars[2].kind, VarKind::local);
  EXPECT_EQ(vars[2].shape, (Shape{10}));
  EXPECT_EQ(vars[3].kind, VarKind::scalar);
  EXPECT_TRUE(vars[3].uniform);
  if (size > 1) EXPECT_FALSE(vars[4].uniform) << "seeds differ per rank";
  EXPECT_EQ(std::string(var_kind_name(VarKind::scalar)), "scalar");

  // Boxes: whole, one element, across every block boundary, single rows and columns, empty.
  const std::uint64_t R = p0.rows_global;
  EXPECT_TRUE(grid_box_ok(c, {0, 0}, {R, kCols}));
  EXPECT_TRUE(grid_box_ok(c, {R - 1, kCols - 1}, {1, 1}));
  EXPECT_TRUE(grid_box_ok(c, {1, 3}, {R - 2, 5}));
  EXPECT_TRUE(grid_box_ok(c, {2, 0}, {1, kCols}));
  EXPECT_TRUE(grid_box_ok(c, {0, 36}, {R, 1}));
  EXPECT_TRUE(c.read("grid", {4, 4}, {0, 3}, nullptr, 0).ok()) << "an empty box reads nothing";
  // The 3D array is split along its middle dimension: a box crossing those blocks.
  const Shape cs{1, 2, 1}, cc{2, p0.cols_global - 3, 3};
  std::vector<std::int32_t> cube(cc[0] * cc[1] * cc[2]);
  ASSERT_TRUE(c.read("cube", cs, cc, cube.data(), cube.size() * 4).ok());
  bool cube_ok = true;
  for (std::uint64_t a = 0; a < cc[0]; ++a)
    for (std::uint64_t b = 0; b < cc[1]; ++b)
      for (std::uint64_t k = 0; k < cc[2]; ++k)
        cube_ok = cube_ok && cube[(a * cc[1] + b) * cc[2] + k] == cube_value(7, cs[0] + a, cs[1] + b, cs[2] + k);
  EXPECT_TRUE(cube_ok);
  std::vector<double> whole(R * kCols);
  ASSERT_TRUE(c.read("grid", whole.data(), whole.size() * 8).ok());
  EXPECT_EQ(whole[kCols + 2], grid_value(7, 1, 2));

  // Locals and scalars of every writer rank, from the older step too.
  auto c3r = r->open_step(3);
  ASSERT_TRUE(c3r.ok()) << c3r.status().to_string();
  CheckpointReader& c3 = c3r.value();
  const auto ids_info = c3.variable("ids");
  ASSERT_TRUE(ids_info.ok());
  for (int q = 0; q < size; ++q) {
    const auto& b = ids_info->blocks;
    const auto it = std::find_if(b.begin(), b.end(), [&](const BlockInfo& x) { return x.rank == std::uint32_t(q); });
    ASSERT_NE(it, b.end());
    ASSERT_EQ(it->count, (Shape{10 + 3 * static_cast<std::uint64_t>(q)}));
    std::vector<std::int64_t> ids(it->count[0]);
    ASSERT_TRUE(c3.read_rank("ids", q, ids.data(), ids.size() * 8).ok());
    for (std::size_t i = 0; i < ids.size(); ++i) EXPECT_EQ(ids[i], id_value(3, q, i));
    std::uint64_t seed = 0;
    double time = 0;
    ASSERT_TRUE(c3.read_rank("seed", q, &seed, sizeof seed).ok());
    ASSERT_TRUE(c3.read_rank("time", q, &time, sizeof time).ok());
    EXPECT_EQ(seed, 1000u + q + 3);
    EXPECT_EQ(time, 0.75);
  }
  EXPECT_TRUE(c3.verify().ok());
  EXPECT_TRUE(all_true(!HasFailure()));
}

TEST_P(ReaderTest, RefusesBadRequestsNamingTheVariable) {
  const auto dir = scratch_dir();
  write_steps(dir, GetParam().transport);
  auto r = Reader::open(dir);
  ASSERT_TRUE(r.ok());
  auto cr = r->open_step(7);
  ASSERT_TRUE(cr.ok());
  CheckpointReader& c = cr.value();
  const std::uint64_t R = Part(0, world_size()).rows_global;
  std::vector<double> buf(R * kCols);
  auto expect = [](const Status& s, Code code, const std::string& part) {
    EXPECT_EQ(s.code(), code) << s.to_string();
    EXPECT_NE(s.message().find(part), std::string::npos) << s.message();
  };
  expect(c.read("nope", buf.data(), buf.size() * 8), Code::not_found, "'nope'");
  expect(c.read("grid", {0, 0}, {R + 1, 1}, buf.data(), buf.size() * 8), Code::invalid_argument, "outside");
  expect(c.read("grid", {R, 0}, {1, 1}, buf.data(), buf.size() * 8), Code::invalid_argument, "outside");
  expect(c.read("grid", {0, 1}, {1, UINT64_MAX}, buf.data(), buf.size() * 8), Code::invalid_argument, "outside");
  expect(c.read("grid", {0}, {1}, buf.data(), buf.size() * 8), Code::invalid_argument, "2 dimensions");
  expect(c.read("grid", {0, 0}, {2, kCols}, buf.data(), 2 * kCols * 8 - 1), Code::invalid_argument, "bytes");
  expect(c.read("ids", {0}, {1}, buf.data(), 8), Code::invalid_argument, "'ids'");
  expect(c.read_rank("grid", 0, buf.data(), buf.size() * 8), Code::invalid_argument, "global");
  expect(c.read_rank("ids", 999, buf.data(), buf.size() * 8), Code::not_found, "rank 999");
  expect(c.read_rank("ids", 0, buf.data(), 8), Code::invalid_argument, "buffer");
  expect(r->open_step(5).status(), Code::not_found, "step 5");
  expect(Reader::open(dir + "/missing").status(), Code::not_found, "missing");
  EXPECT_TRUE(all_true(!HasFailure()));
}

TEST_P(ReaderTest, DamageFailsOnlyTheReadsThatTouchIt) {
  const auto dir = scratch_dir();
  write_steps(dir, GetParam().transport);
  const int rank = world_rank(), size = world_size();
  const Part last(size - 1, size);
  if (rank == 0) {
    // Flip one byte in the last rank's block of "grid" at step 7; leave ckpt.3 without its index;
    // plant a never-committed ckpt.9.tmp.
    auto idx = detail::load_checkpoint_index(dir + "/ckpt.7", 7);
    ASSERT_TRUE(idx.ok());
    const long v = idx->find_var("grid");
    for (auto& b : idx->blocks) {
      if (b.var != static_cast<std::uint32_t>(v) || b.rank != static_cast<std::uint32_t>(size - 1)) continue;
      std::fstream f(dir + "/ckpt.7/" + idx->files[b.file].name, std::ios::in | std::ios::out | std::ios::binary);
      f.seekg(static_cast<std::streamoff>(b.offset + b.length / 2));
      char x = 0;
      f.read(&x, 1);
      x ^= 0x10;
      f.seekp(static_cast<std::streamoff>(b.offset + b.length / 2));
      f.write(&x, 1);
    }
    ASSERT_EQ(std::remove((dir + "/ckpt.3/index").c_str()), 0);
    detail::make_dirs(dir + "/ckpt.9.tmp");
  }
  MPI_Barrier(MPI_COMM_WORLD);
  auto r = Reader::open(dir);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->steps(), (std::vector<std::int64_t>{7})) << "ckpt.3 has no index, ckpt.9.tmp was never committed";
  ASSERT_EQ(r->skipped().size(), 2u);
  EXPECT_NE(r->skipped()[0].find("ckpt.9.tmp"), std::string::npos);
  EXPECT_NE(r->skipped()[1].find("ckpt.3"), std::string::npos);
  EXPECT_EQ(r->open_step(3).status().code(), Code::not_found);
  auto cr = r->latest();
  ASSERT_TRUE(cr.ok());
  CheckpointReader& c = cr.value();
  const std::string who = "rank " + std::to_string(size - 1);
  if (size > 1)  // rows of the other ranks only: the damaged block is never read
    EXPECT_TRUE(grid_box_ok(c, {0, 0}, {last.row0, kCols}));
  std::vector<double> buf(last.rows_global * kCols);
  Status s = c.read("grid", {last.row0, 2}, {1, 3}, buf.data(), buf.size() * 8);
  EXPECT_EQ(s.code(), Code::corrupt);
  EXPECT_NE(s.message().find("'grid'"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find(who), std::string::npos) << s.message();
  // verify(on_block) hands every block's outcome over, in index order: one bad, where it is stored.
  std::size_t blocks = 0, bad_blocks = 0;
  for (const VariableInfo& vi : c.variables()) blocks += vi.blocks.size();
  const BlockInfo* damaged = nullptr;
  std::size_t seen = 0;
  auto grid_info = c.variable("grid");
  ASSERT_TRUE(grid_info.ok());
  for (const BlockInfo& b : grid_info->blocks)
    if (b.rank == static_cast<std::uint32_t>(size - 1)) damaged = &b;
  ASSERT_NE(damaged, nullptr);
  Status vb = c.verify([&](const VariableInfo& vi, const BlockInfo& b, const Status& st) {
    ++seen;
    if (st.ok()) return;
    ++bad_blocks;
    EXPECT_EQ(vi.name, "grid");
    EXPECT_EQ(b.rank, damaged->rank);
    EXPECT_EQ(b.file, damaged->file);
    EXPECT_EQ(b.offset, damaged->offset);
    EXPECT_NE(st.message().find(b.file), std::string::npos) << st.message();
  });
  EXPECT_EQ(vb.code(), Code::corrupt);
  EXPECT_EQ(seen, blocks);
  EXPECT_EQ(bad_blocks, 1u);
  Status v = c.verify();
  EXPECT_EQ(v.code(), Code::corrupt);
  EXPECT_NE(v.message().find("1 bad block(s)"), std::string::npos) << v.message();
  EXPECT_NE(v.message().find("'grid', block of " + who), std::string::npos) << v.message();
  // The other variables still read.
  std::vector<std::int64_t> ids(10);
  EXPECT_TRUE(c.read_rank("ids", 0, ids.data(), ids.size() * 8).ok());
  // A single checkpoint directory opens on its own, and an index that lies is refused.
  auto one = Reader::open(dir + "/ckpt.7");
  ASSERT_TRUE(one.ok()) << one.status().to_string();
  EXPECT_EQ(one->steps(), (std::vector<std::int64_t>{7}));
  damage_index(dir + "/ckpt.7");
  auto bad = Reader::open(dir + "/ckpt.7");
  EXPECT_EQ(bad.status().code(), Code::corrupt) << bad.status().to_string();
  EXPECT_EQ(r->open_step(7).status().code(), Code::corrupt) << "the index is loaded again when a step is opened";
  EXPECT_TRUE(all_true(!HasFailure()));
}

TEST_P(ReaderTest, CollectiveOpenSharesTheIndexAndEachRankReadsItsPart) {
  const auto dir = scratch_dir();
  write_steps(dir, GetParam().transport);
  const int rank = world_rank(), size = world_size();
  auto r = Reader::open(MPI_COMM_WORLD, dir);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_TRUE(r->collective());
  EXPECT_EQ(r->steps(), (std::vector<std::int64_t>{3, 7}));
  auto cr = r->latest();
  ASSERT_TRUE(cr.ok()) << cr.status().to_string();
  CheckpointReader& c = cr.value();
  EXPECT_EQ(c.step(), 7);
  EXPECT_EQ(c.nranks(), size);
  // Every rank reads its own columns of "grid" (the writers split it by rows), all at once.
  const Shape shape = c.variable("grid")->shape;
  const std::uint64_t c0 = kCols * rank / size, c1 = kCols * (rank + 1) / size;
  EXPECT_TRUE(grid_box_ok(c, {0, c0}, {shape[0], c1 - c0}));
  // Same description as a serial reader of the same step.
  auto serial = Reader::open(dir);
  ASSERT_TRUE(serial.ok());
  auto sc = serial->open_step(7);
  ASSERT_TRUE(sc.ok());
  ASSERT_EQ(sc->variables().size(), c.variables().size());
  for (std::size_t i = 0; i < c.variables().size(); ++i) {
    EXPECT_EQ(sc->variables()[i].name, c.variables()[i].name);
    EXPECT_EQ(sc->variables()[i].blocks.size(), c.variables()[i].blocks.size());
  }
  std::vector<std::int64_t> ids(10 + 3 * static_cast<std::size_t>(rank));
  ASSERT_TRUE(c.read_rank("ids", static_cast<std::uint32_t>(rank), ids.data(), ids.size() * 8).ok());
  EXPECT_EQ(ids.back(), id_value(7, rank, ids.size() - 1));
  // Errors are every rank's: a step that is not there, a root that is not there, no communicator.
  EXPECT_EQ(r->open_step(5).status().code(), Code::not_found);
  auto missing = Reader::open(MPI_COMM_WORLD, dir + "/nope");
  EXPECT_EQ(missing.status().code(), Code::not_found) << missing.status().to_string();
  EXPECT_EQ(Reader::open(MPI_COMM_NULL, dir).status().code(), Code::invalid_argument);
  // One checkpoint directory, collectively.
  auto one = Reader::open(MPI_COMM_WORLD, dir + "/ckpt.3");
  ASSERT_TRUE(one.ok()) << one.status().to_string();
  EXPECT_EQ(one->steps(), (std::vector<std::int64_t>{3}));
  auto oc = one->latest();
  ASSERT_TRUE(oc.ok()) << oc.status().to_string();
  EXPECT_TRUE(grid_box_ok(oc.value(), {shape[0] - 1, 0}, {1, kCols}));
  // Only rank 0 reads the index: damage it after the listing and every rank gets rank 0's error,
  // not a mix of results (which would leave the ranks in different collectives).
  damage_index(dir + "/ckpt.3");
  auto d = r->open_step(3);
  EXPECT_EQ(d.status().code(), Code::corrupt) << d.status().to_string();
  auto d1 = one->open_step(3);
  EXPECT_EQ(d1.status().code(), Code::corrupt) << d1.status().to_string();
  EXPECT_TRUE(all_true(!HasFailure()));
}

TEST(Inspect, DescribesTheRuntimesOwnCheckpointForAOnePhaseRestart) {
  const auto dir = scratch_dir();
  write_steps(dir, "posix");
  const int rank = world_rank(), size = world_size();
  Options o = Options::defaults();
  o.dir = dir;
  Runtime rt(MPI_COMM_WORLD, o);
  ASSERT_TRUE(rt.status().ok());
  const std::int64_t newest = ckpt::test::newest_step(rt);
  ASSERT_EQ(newest, 7);
  auto steps = rt.steps();  // collective: the complete steps, oldest first, the same on every rank
  ASSERT_TRUE(steps.ok()) << steps.status().to_string();
  EXPECT_EQ(steps.value(), (std::vector<std::int64_t>{3, 7}));
  auto stored = rt.inspect(newest);
  ASSERT_TRUE(stored.ok()) << stored.status().to_string();
  EXPECT_EQ(stored->step(), 7);
  ASSERT_EQ(stored->variables().size(), 5u);
  auto g = stored->variable("grid");
  ASSERT_TRUE(g.ok());
  EXPECT_EQ(g->shape, (Shape{Part(0, size).rows_global, kCols}));
  EXPECT_EQ(rt.inspect(5).status().code(), Code::not_found);
  // Register with the stored extents, restart once.
  const std::uint64_t R = g->shape[0], mine = R / size + (rank < static_cast<int>(R % size) ? 1 : 0);
  std::uint64_t row0 = 0;
  for (int q = 0; q < rank; ++q) row0 += R / size + (q < static_cast<int>(R % size) ? 1 : 0);
  std::vector<double> grid(mine * kCols, -1);
  ASSERT_TRUE(rt.protect("grid", grid.data(), DType::f64, Block{g->shape, {row0, 0}, {mine, kCols}}).ok());
  ASSERT_TRUE(rt.restart(newest).ok());
  bool same = true;
  for (std::uint64_t i = 0; i < mine; ++i)
    for (std::uint64_t j = 0; j < kCols; ++j) same = same && grid[i * kCols + j] == grid_value(7, row0 + i, j);
  EXPECT_TRUE(same);
  // The reader inspect() returns reads data too, on any rank, serially.
  std::vector<double> row(kCols);
  EXPECT_TRUE(stored.value().read("grid", {R - 1, 0}, {1, kCols}, row.data(), row.size() * 8).ok());
  EXPECT_EQ(row[3], grid_value(7, R - 1, 3));
  EXPECT_TRUE(all_true(!HasFailure()));
}

TEST(Series, StepsAreNamesAndEachReadsFromItsSegment) {
  const auto dir = scratch_dir();
  write_steps(dir, "posix", true);
  const int rank = world_rank(), size = world_size();
  auto r = Reader::open(dir);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->steps(), (std::vector<std::int64_t>{3, 7}));
  EXPECT_TRUE(r->skipped().empty());
  const std::uint64_t R = Part(0, size).rows_global;
  for (std::int64_t step : {7, 3}) {  // latest(), then the older step in the older segment
    auto c = step == 7 ? r->latest() : r->open_step(step);
    ASSERT_TRUE(c.ok()) << c.status().to_string();
    EXPECT_EQ(c->step(), step);
    EXPECT_EQ(c->path(), dir + "/ckpt." + std::to_string(step));  // the step's name, not its segment
    EXPECT_TRUE(grid_box_ok(c.value(), {0, 0}, {R, kCols}));
    std::vector<std::int64_t> ids(10 + 3 * static_cast<std::size_t>(size - 1));
    ASSERT_TRUE(c.value().read_rank("ids", static_cast<std::uint32_t>(size - 1), ids.data(), ids.size() * 8).ok());
    EXPECT_EQ(ids.back(), id_value(step, size - 1, ids.size() - 1));
    EXPECT_TRUE(c.value().verify().ok());
  }
  // One step by its name: <root>/ckpt.<step> and <root>/latest; a step that is not there.
  for (auto [name, step] : {std::pair<const char*, std::int64_t>{"ckpt.3", 3}, {"latest", 7}}) {
    auto one = Reader::open(dir + "/" + name);
    ASSERT_TRUE(one.ok()) << name << ": " << one.status().to_string();
    EXPECT_EQ(one->steps(), (std::vector<std::int64_t>{step}));
    auto c = one->latest();
    ASSERT_TRUE(c.ok()) << c.status().to_string();
    EXPECT_TRUE(grid_box_ok(c.value(), {R - 2, 3}, {2, 5}));
  }
  EXPECT_EQ(Reader::open(dir + "/ckpt.5").status().code(), Code::not_found);
  {  // The Runtime's own reader of a step (inspect) names it the same way.
    Options o = Options::defaults();
    o.dir = dir;
    o.layout = Options::Layout::series;
    Runtime rt(MPI_COMM_WORLD, o);
    ASSERT_TRUE(rt.status().ok()) << rt.status().to_string();
    EXPECT_EQ(ckpt::test::newest_step(rt), 7);
    auto steps = rt.steps();  // the steps in force in the segments' logs
    ASSERT_TRUE(steps.ok()) << steps.status().to_string();
    EXPECT_EQ(steps.value(), (std::vector<std::int64_t>{3, 7}));
    auto in = rt.inspect(3);
    ASSERT_TRUE(in.ok()) << in.status().to_string();
    EXPECT_EQ(in->path(), dir + "/ckpt.3");
    EXPECT_TRUE(grid_box_ok(in.value(), {0, 0}, {R, kCols}));
  }
  // Collectively: rank 0 lists, reads the index and names the step's segment; the other ranks pass a
  // path that does not exist (a misuse, on purpose) and still read their columns from that segment.
  auto cr = Reader::open(MPI_COMM_WORLD, rank == 0 ? dir : dir + "/elsewhere");
  ASSERT_TRUE(cr.ok()) << cr.status().to_string();
  EXPECT_EQ(cr->steps(), (std::vector<std::int64_t>{3, 7}));
  const std::uint64_t c0 = kCols * rank / size, c1 = kCols * (rank + 1) / size;
  for (std::int64_t step : {3, 7}) {
    auto c = cr->open_step(step);
    ASSERT_TRUE(c.ok()) << c.status().to_string();
    EXPECT_TRUE(grid_box_ok(c.value(), {0, c0}, {R, c1 - c0}));
  }
  auto one = Reader::open(MPI_COMM_WORLD, dir + "/ckpt.3");
  ASSERT_TRUE(one.ok()) << one.status().to_string();
  auto oc = one->latest();
  ASSERT_TRUE(oc.ok()) << oc.status().to_string();
  EXPECT_TRUE(grid_box_ok(oc.value(), {0, c0}, {R, c1 - c0}));
  // A torn tail of step 7's log (a commit that did not finish) is skipped; step 7's record cut short
  // leaves step 3 the latest.
  MPI_Barrier(MPI_COMM_WORLD);
  if (rank == 0) {
    std::ofstream(dir + "/series.1/steps", std::ios::binary | std::ios::app).write("CKPTSTEP\0\0\0", 11);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  auto torn = Reader::open(dir);
  ASSERT_TRUE(torn.ok());
  EXPECT_EQ(torn->steps(), (std::vector<std::int64_t>{3, 7}));
  ASSERT_EQ(torn->skipped().size(), 1u);
  EXPECT_NE(torn->skipped()[0].find("did not finish"), std::string::npos) << torn->skipped()[0];
  MPI_Barrier(MPI_COMM_WORLD);
  if (rank == 0) EXPECT_EQ(::truncate((dir + "/series.1/steps").c_str(), 64), 0);
  MPI_Barrier(MPI_COMM_WORLD);
  auto cut = Reader::open(MPI_COMM_WORLD, dir);
  ASSERT_TRUE(cut.ok());
  EXPECT_EQ(cut->steps(), (std::vector<std::int64_t>{3}));
  auto lc = cut->latest();
  ASSERT_TRUE(lc.ok()) << lc.status().to_string();
  EXPECT_EQ(lc->step(), 3);
  EXPECT_TRUE(all_true(!HasFailure()));
}

INSTANTIATE_TEST_SUITE_P(All, ReaderTest,
                         ::testing::Values(Config{"posix", "posix"}, Config{"mpiio", "mpiio"}, Config{"rbio", "rbio"}
#if CKPT_HAVE_HDF5
                                           ,
                                           Config{"hdf5", "hdf5"}
#endif
                                           ),
                         [](const ::testing::TestParamInfo<Config>& i) { return std::string(i.param.label); });

}  // namespace
