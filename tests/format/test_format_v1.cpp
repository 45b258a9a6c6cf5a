// Version 1 stays readable (docs/format.md, "Versions"): the checkpoints of tests/data/format-v1,
// written by the last build that wrote version 1 step logs, are restarted by this build on the rank
// count that wrote them (2) and on another (3), read through the Reader, and a run of this build
// appends its own checkpoints (version 2 step logs) to a root that holds version 1 segments.
// Content: tests/tools/gen_checkpoints.cpp, variant 0 (every value a function of the step and the
// global index only).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "ckpt/ckpt.hpp"
#include "ckpt/reader.hpp"
#include "test_util.hpp"

using namespace ckpt;
using namespace ckpt::test;

namespace {

namespace fs = std::filesystem;

constexpr std::uint64_t kNy = 16, kNx = 12, kNz = 10, kN1 = 4, kN2 = 6, kIds = 101;

void split(std::uint64_t n, int rank, int np, std::uint64_t& start, std::uint64_t& count) {
  const std::uint64_t base = n / np, extra = n % np, r = static_cast<std::uint64_t>(rank);
  start = r * base + std::min<std::uint64_t>(r, extra);
  count = base + (r < extra ? 1 : 0);
}

double temp_at(std::uint64_t gy, std::uint64_t gx, std::int64_t s) {
  return std::sin(0.1 * static_cast<double>(gy) + 0.01 * static_cast<double>(s)) + 0.5 * static_cast<double>(gx);
}
float dens_at(std::uint64_t z, std::uint64_t a, std::uint64_t b, std::int64_t s) {
  return static_cast<float>(1.0 + 0.25 * static_cast<double>(z) + 0.125 * static_cast<double>(a) +
                            0.0625 * static_cast<double>(b) + 0.001 * static_cast<double>(s));
}
std::int64_t id_at(std::uint64_t i, std::int64_t s) { return 1000 * s + static_cast<std::int64_t>(i) - 50; }

/// A copy of tests/data/format-v1/<name> in this test's scratch directory (a Runtime writes into its root).
std::string copy_of(const std::string& name) {
  const std::string dir = scratch_dir("." + name) + "/" + name;
  if (world_rank() == 0)
    fs::copy(fs::path(CKPT_FORMAT_V1_DIR) / name, dir, fs::copy_options::recursive | fs::copy_options::copy_symlinks);
  MPI_Barrier(MPI_COMM_WORLD);
  return dir;
}

/// The gen_checkpoints state of this rank (columns of grid/temp split, as it wrote them), registered.
struct State {
  int rank = world_rank(), np = world_size();
  std::uint64_t x0 = 0, xn = 0, z0 = 0, zn = 0, p0 = 0, pn = 0;
  std::vector<double> temp;
  std::vector<float> dens;
  std::vector<std::int64_t> ids;
  std::int64_t step = -1;
  double time = -1;
  std::int32_t rank_info[3] = {-1, -1, -1};

  State() {
    split(kNx, rank, np, x0, xn);
    split(kNz, rank, np, z0, zn);
    split(kIds, rank, np, p0, pn);
    temp.assign(kNy * xn, 0);
    dens.assign(zn * kN1 * kN2, 0);
    ids.assign(pn, 0);
  }
  Status protect(Runtime& rt, bool locals) {
    CKPT_RETURN_IF_ERROR(rt.protect("grid/temp", temp.data(), DType::f64, Block{{kNy, kNx}, {0, x0}, {kNy, xn}}));
    CKPT_RETURN_IF_ERROR(
        rt.protect("grid/dens", dens.data(), DType::f32, Block{{kNz, kN1, kN2}, {z0, 0, 0}, {zn, kN1, kN2}}));
    CKPT_RETURN_IF_ERROR(rt.protect("particles/id", ids.data(), DType::i64, Block{{kIds}, {p0}, {pn}}));
    CKPT_RETURN_IF_ERROR(rt.protect_scalar("step", &step));
    CKPT_RETURN_IF_ERROR(rt.protect_scalar("time", &time));
    if (locals) CKPT_RETURN_IF_ERROR(rt.protect("rank_info", rank_info, DType::i32, Shape{3}));
    return Status::OK();
  }
  void fill(std::int64_t s) {
    for (std::uint64_t j = 0; j < kNy; ++j)
      for (std::uint64_t i = 0; i < xn; ++i) temp[j * xn + i] = temp_at(j, x0 + i, s);
    for (std::uint64_t k = 0; k < zn; ++k)
      for (std::uint64_t a = 0; a < kN1; ++a)
        for (std::uint64_t b = 0; b < kN2; ++b) dens[(k * kN1 + a) * kN2 + b] = dens_at(z0 + k, a, b, s);
    for (std::uint64_t i = 0; i < pn; ++i) ids[i] = id_at(p0 + i, s);
    step = s;
    time = 0.5 * static_cast<double>(s);
  }
  void clobber() {
    std::fill(temp.begin(), temp.end(), -1.0);
    std::fill(dens.begin(), dens.end(), -1.0f);
    std::fill(ids.begin(), ids.end(), -1);
    step = -1;
    time = -1;
  }
  /// Whether the registered state is gen_checkpoints' state of step `s`, bit for bit.
  bool is(std::int64_t s, bool locals) const {
    bool ok = step == s && time == 0.5 * static_cast<double>(s);
    for (std::uint64_t j = 0; j < kNy; ++j)
      for (std::uint64_t i = 0; i < xn; ++i) ok = ok && temp[j * xn + i] == temp_at(j, x0 + i, s);
    for (std::uint64_t k = 0; k < zn; ++k)
      for (std::uint64_t a = 0; a < kN1; ++a)
        for (std::uint64_t b = 0; b < kN2; ++b) ok = ok && dens[(k * kN1 + a) * kN2 + b] == dens_at(z0 + k, a, b, s);
    for (std::uint64_t i = 0; i < pn; ++i) ok = ok && ids[i] == id_at(p0 + i, s);
    if (locals) ok = ok && rank_info[0] == rank && rank_info[1] == 2 && rank_info[2] == 7;
    return ok;
  }
};

Options options_for(const std::string& dir, bool series, const std::string& transport) {
  Options o = Options::defaults();
  o.dir = dir;
  o.fsync = false;
  o.keep = 10;
  o.transport = transport;
  if (series) o.layout = Options::Layout::series;
  return o;
}

struct Root {
  const char* name;
  bool series;
  const char* transport;
  std::int64_t latest;              ///< the newest step in force
  std::vector<std::int64_t> steps;  ///< every step in force, newest first
};

class FormatV1 : public ::testing::TestWithParam<Root> {};

}  // namespace

TEST_P(FormatV1, RestartsReadsAndAppends) {
  const Root& root = GetParam();
  const std::string dir = copy_of(root.name);
  // Locals restart on the rank count that wrote them (2) only.
  const bool locals = world_size() == 2;
  {
    Runtime rt(MPI_COMM_WORLD, options_for(dir, root.series, root.transport));
    ASSERT_TRUE(all_true(rt.status().ok())) << rt.status().to_string();
    State st;
    ASSERT_TRUE(all_true(st.protect(rt, locals).ok()));
    EXPECT_EQ(ckpt::test::newest_step(rt), root.latest);
    auto r = rt.restart();
    ASSERT_TRUE(all_true(r.ok())) << r.status().to_string();
    EXPECT_EQ(r.value(), root.latest);
    EXPECT_TRUE(all_true(st.is(root.latest, locals))) << root.name << ": step " << root.latest << " differs";
    for (std::int64_t s : root.steps) {
      st.clobber();
      Status s2 = rt.restart(s);
      ASSERT_TRUE(all_true(s2.ok())) << s2.to_string();
      EXPECT_TRUE(all_true(st.is(s, locals))) << root.name << ": step " << s << " differs";
    }
    // This build appends to the version-1 root: a directory, or a new segment with a version-2 log.
    st.fill(30);
    Status w = rt.checkpoint(30).wait();
    ASSERT_TRUE(all_true(w.ok())) << w.to_string();
    ASSERT_TRUE(all_true(rt.close().ok()));
  }
  {
    Runtime rt(MPI_COMM_WORLD, options_for(dir, root.series, root.transport));
    State st;
    ASSERT_TRUE(all_true(st.protect(rt, false).ok()));
    auto r = rt.restart();
    ASSERT_TRUE(all_true(r.ok())) << r.status().to_string();
    EXPECT_EQ(r.value(), 30);
    EXPECT_TRUE(all_true(st.is(30, false)));
    // The version-1 steps are still there beside the new one.
    st.clobber();
    ASSERT_TRUE(all_true(rt.restart(root.steps.back()).ok()));
    EXPECT_TRUE(all_true(st.is(root.steps.back(), false)));
    ASSERT_TRUE(all_true(rt.close().ok()));
  }
  // The Reader: every step in force, variables read whole and checked, and verified.
  if (world_rank() == 0) {
    auto rd = Reader::open(dir);
    ASSERT_TRUE(rd.ok()) << rd.status().to_string();
    std::vector<std::int64_t> want(root.steps.rbegin(), root.steps.rend());  // steps(): ascending
    want.push_back(30);
    EXPECT_EQ(rd->steps(), want);
    for (std::int64_t s : root.steps) {
      auto opened = rd->open_step(s);
      ASSERT_TRUE(opened.ok()) << opened.status().to_string();
      CheckpointReader c = std::move(opened).value();
      EXPECT_EQ(c.nranks(), 2);
      std::vector<std::int64_t> ids(kIds);
      ASSERT_TRUE(c.read("particles/id", ids.data(), ids.size() * sizeof(std::int64_t)).ok());
      for (std::uint64_t i = 0; i < kIds; ++i) ASSERT_EQ(ids[i], id_at(i, s)) << "step " << s << " id " << i;
      std::vector<double> temp(kNy * kNx);
      ASSERT_TRUE(c.read("grid/temp", temp.data(), temp.size() * sizeof(double)).ok());
      for (std::uint64_t j = 0; j < kNy; ++j)
        for (std::uint64_t i = 0; i < kNx; ++i) ASSERT_EQ(temp[j * kNx + i], temp_at(j, i, s));
      Status v = c.verify();
      EXPECT_TRUE(v.ok()) << v.to_string();
    }
  }
  MPI_Barrier(MPI_COMM_WORLD);
}

INSTANTIATE_TEST_SUITE_P(Corpus, FormatV1,
                         ::testing::Values(Root{"directory", false, "posix", 20, {20, 10}},
                                           Root{"mpiio", false, "mpiio", 20, {20, 10}},
                                           Root{"series", true, "posix", 15, {15, 10}}),
                         [](const ::testing::TestParamInfo<Root>& i) { return std::string(i.param.name); });
