// ckpt/kokkos.hpp: Views of rank 0..3, LayoutRight / LayoutLeft / contiguous LayoutStride, Blocks,
// update(), element types; subviews that are boxes of a larger allocation (ghost cells) stored through
// a memory selection; other strided Views rejected with a clear error; checkpoint + restart
// round trips bit for bit. HostSpace only (Debian's Kokkos is Serial); the CUDA spaces go through the
// same code and the CUDA device (tests/gpu/test_cuda_device.cu covers that device).
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "ckpt/kokkos.hpp"
#include "test_util.hpp"

using namespace ckpt;

namespace {

class KokkosEnvironment : public ::testing::Environment {
 public:
  void SetUp() override { Kokkos::initialize(); }
  void TearDown() override { Kokkos::finalize(); }
};
// Registered before main() runs InitGoogleTest; set up once before the first test.
::testing::Environment* const kokkos_env = ::testing::AddGlobalTestEnvironment(new KokkosEnvironment);

Options options_for(const std::string& dir) {
  Options o = Options::defaults();  // ignore CKPT_* variables of the calling environment
  o.dir = dir;
  o.fsync = false;
  o.chunk_bytes = 1 << 16;  // several chunks per checkpoint
  return o;
}

/// Raw bytes of a contiguous View.
template <class V>
std::vector<unsigned char> bytes_of(const V& v) {
  std::vector<unsigned char> b(v.span() * sizeof(typename V::value_type));
  if (!b.empty()) std::memcpy(b.data(), v.data(), b.size());
  return b;
}

template <class V>
void scribble(const V& v) {
  if (v.span() != 0) std::memset(static_cast<void*>(v.data()), 0xA5, v.span() * sizeof(typename V::value_type));
}

struct Particle {
  double x, y;
  std::int32_t id;
  std::int32_t pad;
};

}  // namespace

TEST(KokkosAdapter, RoundTripRanks0To3BothLayouts) {
  const std::string dir = ckpt::test::scratch_dir();
  Kokkos::View<double> t("t");
  Kokkos::View<double*> a("a", 1000);
  Kokkos::View<std::int32_t**, Kokkos::LayoutRight> b("b", 37, 11);
  Kokkos::View<std::int64_t**, Kokkos::LayoutLeft> c("c", 13, 29);
  Kokkos::View<float***, Kokkos::LayoutLeft> d("d", 5, 7, 9);
  Kokkos::View<float***, Kokkos::LayoutRight> e("e", 9, 3, 4);
  Kokkos::View<Kokkos::complex<double>*> z("z", 17);
  Kokkos::View<Particle*> p("p", 23);
  t() = 2.5;
  for (int i = 0; i < 1000; ++i) a(i) = 1.0 / (i + 1);
  for (int i = 0; i < 37; ++i)
    for (int j = 0; j < 11; ++j) b(i, j) = 100 * i + j;
  for (int i = 0; i < 13; ++i)
    for (int j = 0; j < 29; ++j) c(i, j) = -1000 * i + j;
  for (int i = 0; i < 5; ++i)
    for (int j = 0; j < 7; ++j)
      for (int k = 0; k < 9; ++k) d(i, j, k) = 0.5f * i + 10.f * j + 100.f * k;
  for (int i = 0; i < 9; ++i)
    for (int j = 0; j < 3; ++j)
      for (int k = 0; k < 4; ++k) e(i, j, k) = -1.f * i * j * k;
  for (int i = 0; i < 17; ++i) z(i) = Kokkos::complex<double>(i, -i);
  for (int i = 0; i < 23; ++i) p(i) = Particle{0.25 * i, -0.5 * i, i, 0};

  const auto want = std::vector<std::vector<unsigned char>>{bytes_of(t), bytes_of(a), bytes_of(b), bytes_of(c),
                                                            bytes_of(d), bytes_of(e), bytes_of(z), bytes_of(p)};
  {
    Runtime rt(MPI_COMM_WORLD, options_for(dir));
    ASSERT_TRUE(rt.status().ok()) << rt.status().to_string();
    ASSERT_TRUE(protect(rt, "t", t).ok());
    ASSERT_TRUE(protect(rt, "a", a).ok());
    ASSERT_TRUE(protect(rt, "b", b).ok());
    ASSERT_TRUE(protect(rt, "c", c).ok());
    ASSERT_TRUE(protect(rt, "d", d).ok());
    ASSERT_TRUE(protect(rt, "e", e).ok());
    Status sz = protect(rt, "z", z);
    ASSERT_TRUE(sz.ok()) << sz.to_string();
    ASSERT_TRUE(protect(rt, "p", p).ok());
    Status s = rt.checkpoint(1).wait();
    ASSERT_TRUE(s.ok()) << s.to_string();
    scribble(t), scribble(a), scribble(b), scribble(c), scribble(d), scribble(e), scribble(z), scribble(p);
    s = rt.restart(1);
    ASSERT_TRUE(s.ok()) << s.to_string();
  }
  const auto got = std::vector<std::vector<unsigned char>>{bytes_of(t), bytes_of(a), bytes_of(b), bytes_of(c),
                                                           bytes_of(d), bytes_of(e), bytes_of(z), bytes_of(p)};
  for (std::size_t i = 0; i < want.size(); ++i) EXPECT_EQ(got[i], want[i]) << "view #" << i;
  EXPECT_EQ(d(4, 6, 8), 0.5f * 4 + 10.f * 6 + 100.f * 8);
}

TEST(KokkosAdapter, LayoutLeftIsStoredWithReversedExtents) {
  const std::string dir = ckpt::test::scratch_dir();
  Kokkos::View<double**, Kokkos::LayoutLeft> left("left", 3, 4);
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 4; ++j) left(i, j) = 10 * i + j;
  {
    Runtime rt(MPI_COMM_WORLD, options_for(dir));
    ASSERT_TRUE(protect(rt, "m", left).ok());
    ASSERT_TRUE(rt.checkpoint(3).wait().ok());
  }
  // The same bytes are a row-major 4 x 3 array: a plain region of that shape restarts from it.
  std::vector<double> raw(12, -1.0);
  {
    Runtime rt(MPI_COMM_WORLD, options_for(dir));
    ASSERT_TRUE(rt.protect("m", raw.data(), DType::f64, {4, 3}).ok());
    Status s = rt.restart(3);
    ASSERT_TRUE(s.ok()) << s.to_string();
  }
  EXPECT_EQ(0, std::memcmp(raw.data(), left.data(), sizeof(double) * 12));
  EXPECT_EQ(raw[1 * 3 + 2], 10 * 2 + 1);  // raw[j][i] == left(i, j)
  // A LayoutRight 3 x 4 View is a different row-major shape: a clear mismatch, not silent transposition.
  Kokkos::View<double**, Kokkos::LayoutRight> right("right", 3, 4);
  {
    Runtime rt(MPI_COMM_WORLD, options_for(dir));
    ASSERT_TRUE(protect(rt, "m", right).ok());
    Status s = rt.restart(3);
    EXPECT_FALSE(s.ok());
    EXPECT_NE(s.message().find("'m'"), std::string::npos) << s.to_string();
  }
}

TEST(KokkosAdapter, StridedViewsThatAreNoBoxAreRejected) {
  const std::string dir = ckpt::test::scratch_dir();
  Runtime rt(MPI_COMM_WORLD, options_for(dir));
  ASSERT_TRUE(rt.status().ok());
  Kokkos::View<double**, Kokkos::LayoutRight> m("field", 6, 8);
  // One column of a LayoutRight matrix: rank 1 with stride 8 - no row of it is contiguous.
  auto col = Kokkos::subview(m, Kokkos::ALL, 2);
  Status s = protect(rt, "col", col);
  EXPECT_EQ(s.code(), Code::invalid_argument) << s.to_string();
  EXPECT_NE(s.message().find("not a box of a row- or column-major allocation"), std::string::npos) << s.to_string();
  EXPECT_NE(s.message().find("'col'"), std::string::npos) << s.to_string();
  // Every other element; strides that are not multiples of each other (7, 3, 1).
  Kokkos::View<double*, Kokkos::LayoutStride> every2(m.data(), Kokkos::LayoutStride(24, 2));
  EXPECT_EQ(protect(rt, "every2", every2).code(), Code::invalid_argument);
  Kokkos::View<double***, Kokkos::LayoutStride> odd(m.data(), Kokkos::LayoutStride(2, 7, 2, 3, 2, 1));
  EXPECT_EQ(protect(rt, "odd", odd).code(), Code::invalid_argument);
  // Nothing was registered by the failures: a checkpoint of the parent alone works.
  ASSERT_TRUE(protect(rt, "field", m).ok());
  EXPECT_TRUE(rt.checkpoint(1).wait().ok());
  // update() checks too.
  s = update(rt, "field", col);
  EXPECT_EQ(s.code(), Code::invalid_argument) << s.to_string();
}

TEST(KokkosAdapter, GhostedSubviewsStoreTheInteriorOnly) {
  // The interior of Views with 2 ghost layers (LayoutRight and LayoutLeft), a padded-like LayoutStride
  // View, a Block of a global array and a tracked interior: each stored exactly as its packed interior,
  // restored into the interior only (the ghosts keep what they hold).
  const std::string dir = ckpt::test::scratch_dir();
  const int g = 2, nx = 5, ny = 7;
  Kokkos::View<double**, Kokkos::LayoutRight> u("u", nx + 2 * g, ny + 2 * g);
  Kokkos::View<float**, Kokkos::LayoutLeft> w("w", nx + 2 * g, ny + 2 * g);
  Kokkos::View<std::int32_t**, Kokkos::LayoutRight> b("b", 4 + 2, 6 + 2);
  Kokkos::View<double**, Kokkos::LayoutRight> t("t", nx + 2 * g, ny + 2 * g);
  auto value = [](int i, int j) { return 100.0 * i + j; };
  for (int i = 0; i < nx + 2 * g; ++i)
    for (int j = 0; j < ny + 2 * g; ++j) {
      const bool inside = i >= g && i < nx + g && j >= g && j < ny + g;
      u(i, j) = inside ? value(i - g, j - g) : -1.0;
      w(i, j) = inside ? static_cast<float>(value(i - g, j - g)) + 0.5f : -1.0f;
      t(i, j) = inside ? -value(i - g, j - g) : -1.0;
    }
  for (int i = 0; i < 6; ++i)
    for (int j = 0; j < 8; ++j) b(i, j) = (i >= 1 && i < 5 && j >= 1 && j < 7) ? 10 * i + j : -1;
  const auto I = std::make_pair(g, nx + g), J = std::make_pair(g, ny + g);
  auto ui = Kokkos::subview(u, I, J);
  auto wi = Kokkos::subview(w, I, J);
  auto bi = Kokkos::subview(b, std::make_pair(1, 5), std::make_pair(1, 7));
  Kokkos::View<double**, Kokkos::LayoutStride> ti = Kokkos::subview(t, I, J);
  const int rank = ckpt::test::world_rank(), size = ckpt::test::world_size();
  const Block box{{4 * static_cast<std::uint64_t>(size), 6}, {4 * static_cast<std::uint64_t>(rank), 0}, {4, 6}};
  {
    Runtime rt(MPI_COMM_WORLD, options_for(dir));
    Status s = protect(rt, "u", ui);
    ASSERT_TRUE(s.ok()) << s.to_string();
    s = protect(rt, "w", wi);
    ASSERT_TRUE(s.ok()) << s.to_string();
    s = protect(rt, "b", bi, box);
    ASSERT_TRUE(s.ok()) << s.to_string();
    s = track(rt, "t", ti);
    ASSERT_TRUE(s.ok()) << s.to_string();
    ASSERT_TRUE(rt.checkpoint(2).wait().ok());
    // What is stored is the packed interior.
    auto c = rt.inspect(2);
    ASSERT_TRUE(c.ok()) << c.status().to_string();
    std::vector<double> su(nx * ny), st(nx * ny);
    std::vector<float> sw(nx * ny);
    ASSERT_TRUE(c.value().read_rank("u", static_cast<std::uint32_t>(rank), su.data(), su.size() * 8).ok());
    ASSERT_TRUE(c.value().read_rank("t", static_cast<std::uint32_t>(rank), st.data(), st.size() * 8).ok());
    ASSERT_TRUE(c.value().read_rank("w", static_cast<std::uint32_t>(rank), sw.data(), sw.size() * 4).ok());
    for (int i = 0; i < nx; ++i)
      for (int j = 0; j < ny; ++j) {
        EXPECT_EQ(su[static_cast<std::size_t>(i * ny + j)], value(i, j));
        EXPECT_EQ(st[static_cast<std::size_t>(i * ny + j)], -value(i, j));
        // A LayoutLeft View is stored reversed: element (i, j) at row j, column i.
        EXPECT_EQ(sw[static_cast<std::size_t>(j * nx + i)], static_cast<float>(value(i, j)) + 0.5f);
      }
    // Every element scribbled: restart writes the interiors back and nothing else.
    Kokkos::deep_copy(u, 3.0);
    Kokkos::deep_copy(w, 3.0f);
    Kokkos::deep_copy(b, 3);
    Kokkos::deep_copy(t, 3.0);
    s = rt.restart(2);
    ASSERT_TRUE(s.ok()) << s.to_string();
  }
  for (int i = 0; i < nx + 2 * g; ++i)
    for (int j = 0; j < ny + 2 * g; ++j) {
      const bool inside = i >= g && i < nx + g && j >= g && j < ny + g;
      ASSERT_EQ(u(i, j), inside ? value(i - g, j - g) : 3.0) << i << "," << j;
      ASSERT_EQ(w(i, j), inside ? static_cast<float>(value(i - g, j - g)) + 0.5f : 3.0f) << i << "," << j;
      ASSERT_EQ(t(i, j), inside ? -value(i - g, j - g) : 3.0) << i << "," << j;
    }
  for (int i = 0; i < 6; ++i)
    for (int j = 0; j < 8; ++j) ASSERT_EQ(b(i, j), (i >= 1 && i < 5 && j >= 1 && j < 7) ? 10 * i + j : 3);
}

TEST(KokkosAdapter, UpdateMovesBetweenBoxesAndContiguousViews) {
  const std::string dir = ckpt::test::scratch_dir();
  Kokkos::View<double**, Kokkos::LayoutRight> big("big", 8, 10), small("small", 3, 4), flat("flat", 3, 4);
  for (int i = 0; i < 8; ++i)
    for (int j = 0; j < 10; ++j) big(i, j) = i * 10 + j;
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 4; ++j) small(i, j) = -(i * 4 + j), flat(i, j) = 1000 + i * 4 + j;
  auto inner = Kokkos::subview(big, std::make_pair(2, 5), std::make_pair(3, 7));  // 3 x 4 of a 8 x 10
  Runtime rt(MPI_COMM_WORLD, options_for(dir));
  ASSERT_TRUE(protect(rt, "v", small).ok());
  Status s = update(rt, "v", inner);  // contiguous -> a box of another allocation
  ASSERT_TRUE(s.ok()) << s.to_string();
  ASSERT_TRUE(rt.checkpoint(1).wait().ok());
  s = update(rt, "v", flat);  // a box -> contiguous: the box goes with the View that had it
  ASSERT_TRUE(s.ok()) << s.to_string();
  ASSERT_TRUE(rt.checkpoint(2).wait().ok());
  Kokkos::deep_copy(big, 0.0);
  ASSERT_TRUE(update(rt, "v", inner).ok());
  s = rt.restart(1);
  ASSERT_TRUE(s.ok()) << s.to_string();
  for (int i = 0; i < 8; ++i)
    for (int j = 0; j < 10; ++j)
      ASSERT_EQ(big(i, j), (i >= 2 && i < 5 && j >= 3 && j < 7) ? i * 10.0 + j : 0.0) << i << "," << j;
  ASSERT_TRUE(update(rt, "v", small).ok());
  s = rt.restart(2);
  ASSERT_TRUE(s.ok()) << s.to_string();
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 4; ++j) ASSERT_EQ(small(i, j), 1000 + i * 4 + j);
}

TEST(KokkosAdapter, ContiguousStridedSubviewsAreAccepted) {
  const std::string dir = ckpt::test::scratch_dir();
  Kokkos::View<double**, Kokkos::LayoutRight> m("m", 6, 8);
  Kokkos::View<double**, Kokkos::LayoutLeft> l("l", 8, 6);
  for (int i = 0; i < 6; ++i)
    for (int j = 0; j < 8; ++j) m(i, j) = l(j, i) = i * 8 + j;
  // Rows 1..3 of a LayoutRight matrix, columns 2..4 of a LayoutLeft one: contiguous.
  Kokkos::View<double**, Kokkos::LayoutStride> rows = Kokkos::subview(m, std::make_pair(1, 4), Kokkos::ALL);
  Kokkos::View<double**, Kokkos::LayoutStride> lcols = Kokkos::subview(l, Kokkos::ALL, std::make_pair(2, 5));
  const auto want_rows = std::vector<double>(&m(1, 0), &m(1, 0) + 24);
  const auto want_lcols = std::vector<double>(&l(0, 2), &l(0, 2) + 24);
  {
    Runtime rt(MPI_COMM_WORLD, options_for(dir));
    Status s = protect(rt, "rows", rows);
    ASSERT_TRUE(s.ok()) << s.to_string();
    s = protect(rt, "lcols", lcols);
    ASSERT_TRUE(s.ok()) << s.to_string();
    ASSERT_TRUE(rt.checkpoint(5).wait().ok());
    scribble(m);
    scribble(l);
    s = rt.restart(5);
    ASSERT_TRUE(s.ok()) << s.to_string();
  }
  EXPECT_EQ(0, std::memcmp(&m(1, 0), want_rows.data(), 24 * sizeof(double)));
  EXPECT_EQ(0, std::memcmp(&l(0, 2), want_lcols.data(), 24 * sizeof(double)));
}

TEST(KokkosAdapter, BlocksInTheViewsIndexOrder) {
  const std::string dir = ckpt::test::scratch_dir();
  // This rank's box [2, 6) x [0, 5) of a global 10 x 5 array, held column-major.
  Kokkos::View<double**, Kokkos::LayoutLeft> u("u", 4, 5);
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 5; ++j) u(i, j) = (i + 2) * 100 + j;
  const Block box{{10, 5}, {2, 0}, {4, 5}};
  {
    Runtime rt(MPI_COMM_WORLD, options_for(dir));
    Status bad = protect(rt, "u", u, Block{{10, 5}, {2, 0}, {5, 4}});
    EXPECT_EQ(bad.code(), Code::invalid_argument) << bad.to_string();
    Status s = protect(rt, "u", u, box);
    ASSERT_TRUE(s.ok()) << s.to_string();
    ASSERT_TRUE(rt.checkpoint(2).wait().ok());
  }
  // Restart a different box of the same global array: rows [3, 6), still column-major.
  Kokkos::View<double**, Kokkos::LayoutLeft> v("v", 3, 5);
  {
    Runtime rt(MPI_COMM_WORLD, options_for(dir));
    ASSERT_TRUE(protect(rt, "u", v, Block{{10, 5}, {3, 0}, {3, 5}}).ok());
    Status s = rt.restart(2);
    ASSERT_TRUE(s.ok()) << s.to_string();
  }
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 5; ++j) EXPECT_EQ(v(i, j), (i + 3) * 100 + j) << i << "," << j;
}

TEST(KokkosAdapter, UpdateFollowsAResize) {
  const std::string dir = ckpt::test::scratch_dir();
  Kokkos::View<std::int64_t*> w("walkers", 10);
  Runtime rt(MPI_COMM_WORLD, options_for(dir));
  ASSERT_TRUE(protect(rt, "walkers", w).ok());
  Kokkos::resize(w, 33);
  for (int i = 0; i < 33; ++i) w(i) = 7 * i;
  ASSERT_TRUE(update(rt, "walkers", w).ok());
  ASSERT_TRUE(rt.checkpoint(4).wait().ok());
  scribble(w);
  Status s = rt.restart(4);
  ASSERT_TRUE(s.ok()) << s.to_string();
  for (int i = 0; i < 33; ++i) EXPECT_EQ(w(i), 7 * i);
}

TEST(KokkosAdapter, TrackFollowsAResizeWithoutUpdate) {
  // The issue's case: Kokkos::resize frees the memory a registration points at. track() holds the View
  // object, so the checkpoint reads the new allocation (1.0, not freed memory) and restart() resizes
  // the View back to the stored extents.
  const std::string dir = ckpt::test::scratch_dir();
  Kokkos::View<double**, Kokkos::LayoutLeft> u("u", 4, 3);
  Kokkos::deep_copy(u, 0.5);
  Runtime rt(MPI_COMM_WORLD, options_for(dir));
  ASSERT_TRUE(track(rt, "u", u).ok());
  Kokkos::resize(u, 40, 5);
  Kokkos::deep_copy(u, 1.0);
  u(39, 4) = 2.0;
  ASSERT_TRUE(rt.checkpoint(1).wait().ok());
  Kokkos::resize(u, 2, 2);
  scribble(u);
  Status s = rt.restart(1);
  ASSERT_TRUE(s.ok()) << s.to_string();
  ASSERT_EQ(u.extent(0), 40u);
  ASSERT_EQ(u.extent(1), 5u);
  for (int i = 0; i < 40; ++i)
    for (int j = 0; j < 5; ++j) ASSERT_EQ(u(i, j), i == 39 && j == 4 ? 2.0 : 1.0) << i << "," << j;
}

TEST(KokkosAdapter, TrackRowsOfAStructView) {
  const std::string dir = ckpt::test::scratch_dir();
  Kokkos::View<Particle*> p("p", 3);
  Runtime rt(MPI_COMM_WORLD, options_for(dir));
  ASSERT_TRUE(track_rows(rt, "particles", p).ok());
  Kokkos::resize(p, 17);
  for (int i = 0; i < 17; ++i) p(i) = Particle{0.5 * i, -1.0 * i, i, 0};
  ASSERT_TRUE(rt.checkpoint(2).wait().ok());
  auto rows = rt.joined_rows(2, "particles");
  ASSERT_TRUE(rows.ok()) << rows.status().to_string();
  EXPECT_EQ(rows->total, 17u);
  Kokkos::resize(p, 0);
  auto r = rt.restart();
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  ASSERT_EQ(p.extent(0), 17u);
  for (int i = 0; i < 17; ++i) EXPECT_EQ(p(i).id, i);
  EXPECT_EQ(p(16).y, -16.0);
}
