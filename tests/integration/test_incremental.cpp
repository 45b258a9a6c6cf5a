// Incremental checkpoints (option incremental; docs/format.md, "Version 2 index: incremental references"):
// at 4 ranks, a chain of checkpoints each changing a tenth of the pieces writes about a tenth of the
// bytes, and every step of the chain restarts exactly - on 4 ranks, on 3 (a sub-communicator; the global
// array) and through the serial Reader; the chain restarts with a full checkpoint every
// incremental_full_every and after a restart; retention keeps what kept steps refer to; a damaged or
// replaced referenced checkpoint makes the steps that refer to it fail, and restart falls back; the
// combinations this build does not write are refused at construction.
#include <gtest/gtest.h>
#include <mpi.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "base/index_v2.hpp"
#include "ckpt/ckpt.hpp"
#include "ckpt/reader.hpp"
#include "runtime/src/pipeline/incremental.hpp"
#include "test_util.hpp"

using namespace ckpt;
using ckpt::test::all_true;
using ckpt::test::scratch_dir;
using ckpt::test::world_rank;
using ckpt::test::world_size;

namespace {

constexpr std::uint64_t kPiece = 64 * 1024;           // incremental_piece_bytes
constexpr std::uint64_t kPieces = 32;                 // of the global array, per rank
constexpr std::uint64_t kPerPiece = kPiece / 8;       // doubles
constexpr std::uint64_t kRows = kPieces * kPerPiece;  // doubles per rank

/// Whether piece k changes at step s (about one in ten per step; every piece at step 1).
bool changes(std::uint64_t k, std::int64_t s) { return s == 1 || (k * 7 + static_cast<std::uint64_t>(s)) % 10 == 0; }

using ChangeFn = bool (*)(std::uint64_t k, std::int64_t s);

/// The last step <= s at which piece k changed.
std::int64_t last_change(std::uint64_t k, std::int64_t s, ChangeFn changed = changes) {
  while (s > 1 && !changed(k, s)) --s;
  return s;
}

/// Rank r's rows of the global array "field" at step s: piece k holds the values of its last change.
std::vector<double> field_of(int r, std::int64_t s, ChangeFn changed = changes) {
  std::vector<double> f(kRows);
  for (std::uint64_t k = 0; k < kPieces; ++k) {
    const double v = static_cast<double>(last_change(k, s, changed)) * 1e7 + r * 1e5;
    for (std::uint64_t i = 0; i < kPerPiece; ++i) f[k * kPerPiece + i] = v + static_cast<double>(i);
  }
  return f;
}

struct State {
  int rank = world_rank(), size = world_size();
  std::vector<double> field = std::vector<double>(kRows);
  std::vector<std::int32_t> small = std::vector<std::int32_t>(100);  // below a piece: stored whole
  double t = 0;

  void fill(std::int64_t s) {
    const std::vector<double> f = field_of(rank, s);
    std::copy(f.begin(), f.end(), field.begin());  // in place: the protected pointer stays
    for (std::size_t i = 0; i < small.size(); ++i) small[i] = static_cast<std::int32_t>(s * 1000 + rank * 100 + i);
    t = static_cast<double>(s) + 0.5;
  }
  Status protect(Runtime& rt) {
    const std::uint64_t n = static_cast<std::uint64_t>(size) * kRows;
    CKPT_RETURN_IF_ERROR(
        rt.protect("field", field.data(), DType::f64, Block{{n}, {static_cast<std::uint64_t>(rank) * kRows}, {kRows}}));
    CKPT_RETURN_IF_ERROR(rt.protect("small", small.data(), DType::i32, {small.size()}));
    return rt.protect("t", &t, DType::f64, Dims{});
  }
  bool operator==(const State& o) const { return field == o.field && small == o.small && t == o.t; }
};

Options incremental_options(const std::string& dir) {
  Options o = Options::defaults();
  o.dir = dir;
  o.index_format = 2;
  o.incremental = true;
  o.incremental_piece_bytes = kPiece;
  o.incremental_full_every = 10;
  o.keep = 100;
  return o;
}

/// Writes steps 1..last; returns the bytes each wrote on this rank ([s] for step s).
std::vector<std::uint64_t> write_chain(const Options& o, std::int64_t last) {
  std::vector<std::uint64_t> written(static_cast<std::size_t>(last) + 1, 0);
  State s;
  Runtime rt(MPI_COMM_WORLD, o);
  EXPECT_TRUE(rt.status().ok()) << rt.status().to_string();
  EXPECT_TRUE(s.protect(rt).ok());
  for (std::int64_t step = 1; step <= last; ++step) {
    s.fill(step);
    Ticket t = rt.checkpoint(step);
    const Status st = t.wait();
    EXPECT_TRUE(st.ok()) << st.to_string();
    written[static_cast<std::size_t>(step)] = t.stats().bytes_written;
  }
  return written;
}

/// The root index of `dir`/ckpt.<step> (its refs, base step).
detail::RootIndex root_of(const std::string& dir, std::int64_t step) {
  std::ifstream f(dir + "/ckpt." + std::to_string(step) + "/index", std::ios::binary);
  const std::vector<std::uint8_t> b{std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
  auto r = detail::decode_root_index(b.data(), b.size());
  EXPECT_TRUE(r.ok()) << r.status().to_string();
  return r.ok() ? r.value() : detail::RootIndex();
}

bool restarts_exactly(const Options& o, std::int64_t step) {
  State want, got;
  want.fill(step);
  Runtime rt(MPI_COMM_WORLD, o);
  EXPECT_TRUE(got.protect(rt).ok());
  const Status st = rt.restart(step);
  EXPECT_TRUE(st.ok()) << "step " << step << ": " << st.to_string();
  return all_true(st.ok() && got == want);
}

bool exists(const std::string& path) { return ::access(path.c_str(), F_OK) == 0; }

}  // namespace

TEST(Incremental, AChainWritesWhatChangedAndEveryStepRestartsExactly) {
  const std::string dir = scratch_dir();
  const Options o = incremental_options(dir);
  const auto written = write_chain(o, 12);
  // Steps 1 and 11 are full (a chain of 10), the others write the changed tenth of the field's pieces.
  for (std::int64_t s = 1; s <= 12; ++s) {
    SCOPED_TRACE("step " + std::to_string(s));
    const detail::RootIndex root = root_of(dir, s);
    const bool full = s == 1 || s == 11;
    EXPECT_EQ(root.refs.empty(), full);
    EXPECT_EQ(root.base_step, s <= 10 ? 1 : 11);
    std::uint64_t changed = 0;
    for (std::uint64_t k = 0; k < kPieces; ++k) changed += changes(k, s) || full ? 1 : 0;
    const std::uint64_t field_bytes = changed * kPiece;
    EXPECT_GE(written[static_cast<std::size_t>(s)], field_bytes);
    EXPECT_LE(written[static_cast<std::size_t>(s)], field_bytes + 64 * 1024);  // header, small, t, alignment
  }
  for (std::int64_t s = 1; s <= 12; ++s) EXPECT_TRUE(restarts_exactly(o, s)) << "step " << s;

  // 4 -> 3: the global array through the assembled index (every sub-index read, references resolved).
  const int rank = world_rank();
  MPI_Comm three = MPI_COMM_NULL;
  MPI_Comm_split(MPI_COMM_WORLD, rank < 3 ? 0 : MPI_UNDEFINED, rank, &three);
  if (three != MPI_COMM_NULL) {
    for (std::int64_t s = 1; s <= 12; ++s) {
      const std::uint64_t total = static_cast<std::uint64_t>(world_size()) * kRows;
      const std::uint64_t mine = total / 3 + (rank < static_cast<int>(total % 3) ? 1 : 0);
      const std::uint64_t first = static_cast<std::uint64_t>(rank) * (total / 3) +
                                  std::min<std::uint64_t>(static_cast<std::uint64_t>(rank), total % 3);
      std::vector<double> got(mine);
      Runtime rt(three, o);
      ASSERT_TRUE(rt.protect("field", got.data(), DType::f64, Block{{total}, {first}, {mine}}).ok());
      const Status st = rt.restart(s);
      ASSERT_TRUE(st.ok()) << st.to_string();
      std::vector<double> whole;  // every rank's rows at step s
      for (int r = 0; r < world_size(); ++r) {
        const auto f = field_of(r, s);
        whole.insert(whole.end(), f.begin(), f.end());
      }
      for (std::uint64_t i = 0; i < mine; ++i) {
        const std::uint64_t g = first + i;
        const double want = whole[g];
        if (got[i] != want) {
          ADD_FAILURE() << "step " << s << ": element " << g << " is " << got[i] << ", not " << want;
          break;
        }
      }
    }
    MPI_Comm_free(&three);
  }
  MPI_Barrier(MPI_COMM_WORLD);

  // The serial Reader resolves the references too (and verifies every piece).
  if (rank == 0) {
    auto r = Reader::open(dir);
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    auto c = r.value().open_step(7);
    ASSERT_TRUE(c.ok()) << c.status().to_string();
    const std::uint64_t total = static_cast<std::uint64_t>(world_size()) * kRows;
    std::vector<double> all(total);
    const Status st = c.value().read("field", {0}, {total}, all.data(), all.size() * sizeof(double));
    ASSERT_TRUE(st.ok()) << st.to_string();
    for (int r2 = 0; r2 < world_size(); ++r2)
      EXPECT_TRUE(std::equal(all.begin() + r2 * static_cast<long>(kRows),
                             all.begin() + (r2 + 1) * static_cast<long>(kRows), field_of(r2, 7).begin()));
    EXPECT_TRUE(c.value().verify().ok());
    // Named as `.`-suffixed path and through a link, a step finds the steps it refers to all the same.
    const std::string link = dir + "-link12";
    ::unlink(link.c_str());
    ASSERT_EQ(::symlink((dir + "/ckpt.12").c_str(), link.c_str()), 0);
    for (const std::string& path : {dir + "/ckpt.12/.", link}) {
      auto one = Reader::open(path);
      ASSERT_TRUE(one.ok()) << path << ": " << one.status().to_string();
      auto c12 = one.value().latest();
      ASSERT_TRUE(c12.ok()) << path << ": " << c12.status().to_string();
      EXPECT_TRUE(c12.value().verify().ok()) << path;
    }
    ::unlink(link.c_str());
  }
  MPI_Barrier(MPI_COMM_WORLD);
}

/// Writes steps 1..last of "field" as field_of(rank, s, changed) gives it; returns the bytes each step
/// wrote on this rank, and checks that every step restores exactly.
std::vector<std::uint64_t> write_pattern(const std::string& dir, std::int64_t last, ChangeFn changed) {
  const Options o = incremental_options(dir);
  const int rank = world_rank();
  auto field_at = [&](std::int64_t s) { return field_of(rank, s, changed); };
  const std::uint64_t n = static_cast<std::uint64_t>(world_size()) * kRows;
  const Block mine{{n}, {static_cast<std::uint64_t>(rank) * kRows}, {kRows}};
  std::vector<std::uint64_t> written(static_cast<std::size_t>(last) + 1, 0);
  {
    std::vector<double> field(kRows);
    Runtime rt(MPI_COMM_WORLD, o);
    EXPECT_TRUE(rt.protect("field", field.data(), DType::f64, mine).ok());
    for (std::int64_t s = 1; s <= last; ++s) {
      const std::vector<double> f = field_at(s);
      std::copy(f.begin(), f.end(), field.begin());  // in place: the protected pointer stays
      Ticket t = rt.checkpoint(s);
      EXPECT_TRUE(t.wait().ok()) << t.wait().to_string();
      written[static_cast<std::size_t>(s)] = t.stats().bytes_written;
    }
  }
  for (std::int64_t s = 1; s <= last; ++s) {
    std::vector<double> got(kRows, -1.0);
    Runtime rt(MPI_COMM_WORLD, o);
    EXPECT_TRUE(rt.protect("field", got.data(), DType::f64, mine).ok());
    const Status st = rt.restart(s);
    EXPECT_TRUE(all_true(st.ok() && got == field_at(s))) << "step " << s << ": " << st.to_string();
  }
  return written;
}

/// Whether `written` is the field's bytes less `skipped` pieces (plus the header and alignment).
bool wrote_all_but(std::uint64_t written, std::uint64_t skipped) {
  const std::uint64_t want = (kPieces - skipped) * kPiece;
  return written >= want && written <= want + 2 * 64 * 1024;
}

// A checkpoint after one that found fewer than one in 16 of its pieces unchanged probes: it writes
// everything and hashes one piece in 16 only (the sample: piece g with (g + probes in a row) % 16 == 0,
// so 15 and 31 of the 32 first); when the sample is unchanged the next checkpoint hashes every piece
// again and can refer to the sampled ones, the one after refers to all that did not change.
TEST(Incremental, ACheckpointAfterOneThatSavedNothingProbes) {
  const std::string dir = scratch_dir();
  // Every piece changes at steps 1 and 2; from step 3 on the field stays as at step 2.
  const auto written = write_pattern(dir, 5, [](std::uint64_t, std::int64_t s) { return s <= 2; });
  for (std::int64_t s : {1, 2, 3}) {
    EXPECT_TRUE(wrote_all_but(written[static_cast<std::size_t>(s)], 0)) << "step " << s;
    EXPECT_TRUE(root_of(dir, s).refs.empty()) << "step " << s;
  }
  EXPECT_EQ(root_of(dir, 3).base_step, 3);
  EXPECT_TRUE(wrote_all_but(written[4], kPieces / detail::kProbeStride)) << written[4];
  EXPECT_EQ(root_of(dir, 4).base_step, 3);
  EXPECT_TRUE(wrote_all_but(written[5], kPieces)) << written[5];
  EXPECT_EQ(root_of(dir, 5).base_step, 3);
  EXPECT_EQ(root_of(dir, 5).refs.size(), 2u);  // 3's sampled pieces, 4's others
}

// The sample moves on at each probe in a row: updates that keep hitting the first probe's sample (pieces
// 15 and 31) do not keep the chain probing - the second probe samples 14 and 30, finds them unchanged,
// and from the fourth checkpoint after the dense ones only the two changing pieces are written.
TEST(Incremental, TheProbeSampleMovesOn) {
  const std::string dir = scratch_dir();
  const auto written = write_pattern(dir, 7, [](std::uint64_t k, std::int64_t s) { return s <= 2 || k % 16 == 15; });
  for (std::int64_t s : {1, 2, 3, 4}) EXPECT_TRUE(wrote_all_but(written[static_cast<std::size_t>(s)], 0)) << s;
  EXPECT_TRUE(wrote_all_but(written[5], 2)) << written[5];  // refers to 4's sample
  for (std::int64_t s : {6, 7}) EXPECT_TRUE(wrote_all_but(written[static_cast<std::size_t>(s)], kPieces - 2)) << s;
  EXPECT_EQ(root_of(dir, 7).base_step, 4);
}

TEST(Incremental, ARestartStartsANewChain) {
  const std::string dir = scratch_dir();
  const Options o = incremental_options(dir);
  write_chain(o, 3);
  {
    State s;
    Runtime rt(MPI_COMM_WORLD, o);
    ASSERT_TRUE(s.protect(rt).ok());
    ASSERT_TRUE(rt.restart(3).ok());
    s.fill(4);
    ASSERT_TRUE(rt.checkpoint(4).wait().ok());
    s.fill(5);
    ASSERT_TRUE(rt.checkpoint(5).wait().ok());
  }
  EXPECT_TRUE(root_of(dir, 4).refs.empty());  // full: the first of the new run
  EXPECT_EQ(root_of(dir, 5).base_step, 4);
  ASSERT_FALSE(root_of(dir, 5).refs.empty());
  EXPECT_TRUE(restarts_exactly(o, 5));
}

TEST(Incremental, RetentionKeepsWhatKeptStepsReferTo) {
  // Two pieces a and b: step 1 writes both, step 2 changes b (refers to 1 for a), step 3 changes a (refers to
  // 2 for b). With keep 1, step 3 keeps step 2, which keeps step 1: a step kept
  // for its pieces still reads as a checkpoint and must stay whole. Step 4 (a new run) refers to nothing:
  // the rest goes.
  const std::string dir = scratch_dir();
  Options o = incremental_options(dir);
  o.keep = 1;
  std::vector<double> v(2 * kPerPiece, world_rank());
  std::vector<std::vector<double>> want(5);
  const std::size_t change[5] = {0, 0, kPerPiece, 0, 0};  // the element each step changes
  auto write = [&](std::int64_t first, std::int64_t last) {
    Runtime rt(MPI_COMM_WORLD, o);
    ASSERT_TRUE(rt.protect("v", v.data(), DType::f64, {v.size()}).ok());
    for (std::int64_t s = first; s <= last; ++s) {
      v[change[s]] = 1000.0 * (world_rank() + 1) + static_cast<double>(s);  // differs from every earlier value
      want[static_cast<std::size_t>(s)] = v;
      ASSERT_TRUE(rt.checkpoint(s).wait().ok());
    }
  };
  write(1, 3);
  MPI_Barrier(MPI_COMM_WORLD);
  EXPECT_EQ(root_of(dir, 3).refs.size(), 1u);
  EXPECT_EQ(root_of(dir, 3).refs.at(0).step, 2);
  EXPECT_EQ(root_of(dir, 2).refs.at(0).step, 1);
  for (std::int64_t k = 1; k <= 3; ++k) {
    EXPECT_TRUE(exists(dir + "/ckpt." + std::to_string(k))) << "step " << k << " after step 3";
    std::vector<double> got(v.size());
    Runtime back(MPI_COMM_WORLD, o);
    ASSERT_TRUE(back.protect("v", got.data(), DType::f64, {got.size()}).ok());
    ASSERT_TRUE(back.restart(k).ok()) << "step " << k;
    EXPECT_TRUE(all_true(got == want[static_cast<std::size_t>(k)])) << "step " << k;
  }
  write(4, 4);  // a new run: its first checkpoint is full
  MPI_Barrier(MPI_COMM_WORLD);
  EXPECT_TRUE(root_of(dir, 4).refs.empty());
  for (std::int64_t k = 1; k <= 3; ++k) EXPECT_FALSE(exists(dir + "/ckpt." + std::to_string(k))) << "step " << k;
  if (world_rank() == 0) {
    auto r = Reader::open(dir);
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    EXPECT_EQ(r.value().steps(), std::vector<std::int64_t>{4});
  }
  MPI_Barrier(MPI_COMM_WORLD);
}

TEST(Incremental, ADamagedReferencedCheckpointFailsTheStepsReferringToIt) {
  const std::string dir = scratch_dir();
  const Options o = incremental_options(dir);
  write_chain(o, 4);
  // Piece 1 of the field changed at step 3 (stored in ckpt.3, at its place in the stream: the data start
  // at 4096) and not at step 4, which refers to it: damage it on rank 0.
  ASSERT_TRUE(changes(1, 3) && !changes(1, 4) && !changes(1, 2));
  MPI_Barrier(MPI_COMM_WORLD);
  if (world_rank() == 0) {
    const std::string data = dir + "/ckpt.3/data.0";
    std::fstream f(data, std::ios::in | std::ios::out | std::ios::binary);
    ASSERT_TRUE(f.good()) << data;
    f.seekp(static_cast<std::streamoff>(4096 + kPiece + 100));
    f.put('\x5a');
  }
  MPI_Barrier(MPI_COMM_WORLD);
  for (std::int64_t step : {3, 4}) {
    State s;
    Runtime rt(MPI_COMM_WORLD, o);
    ASSERT_TRUE(s.protect(rt).ok());
    const Status st = rt.restart(step);
    EXPECT_EQ(st.code(), Code::corrupt) << st.to_string();
  }
  // restart() falls back to step 2, which refers to step 1's copy of that piece.
  State want, got;
  want.fill(2);
  Runtime rt(MPI_COMM_WORLD, o);
  ASSERT_TRUE(got.protect(rt).ok());
  auto step = rt.restart();
  ASSERT_TRUE(step.ok()) << step.status().to_string();
  EXPECT_EQ(step.value(), 2);
  EXPECT_TRUE(all_true(got == want));
}

TEST(Incremental, WhatThisBuildDoesNotWriteIsRefused) {
  const std::string dir = scratch_dir();
  std::vector<std::pair<std::string, Options>> cases;
  Options o = incremental_options(dir);
  o.index_format = 1;
  cases.emplace_back("index_format 1", o);
  o = incremental_options(dir);
  o.layout = Options::Layout::series;
  cases.emplace_back("series", o);
  o = incremental_options(dir);
  o.transport = "mpiio";
  cases.emplace_back("mpiio", o);
  o = incremental_options(dir);
  o.chunk_bytes = 96 * 1024;
  cases.emplace_back("chunk_bytes", o);
  o = incremental_options(dir);
  o.mpi_threads = MpiThreads::funneled;
  cases.emplace_back("funneled", o);
  o = incremental_options(dir);
  o.pool_bytes = kPiece;  // one piece: two chunks of whole pieces do not fit
  cases.emplace_back("pool_bytes", o);
  for (const auto& [what, opts] : cases) {
    Runtime rt(MPI_COMM_WORLD, opts);
    EXPECT_EQ(rt.status().code(), Code::invalid_argument) << what << ": " << rt.status().to_string();
    EXPECT_NE(rt.status().message().find("incremental"), std::string::npos) << rt.status().to_string();
  }
}
