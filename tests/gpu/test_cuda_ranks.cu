// Several ranks on one GPU (run with 4 ranks): every rank checkpoints its box of a global array from
// device memory on its own stream, with a slow producer before and an overwriting kernel after; then
// the first two ranks alone restart the whole array (N -> M, Block regions) into device memory and
// compare. Then every rank reads its part of a checkpoint into device memory through a Reader opened on
// the communicator. Skips (every rank) without a GPU.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "ckpt/ckpt.hpp"
#include "gpu_test_util.hpp"
#include "test_util.hpp"

using namespace ckpt;
using ckpt::test::world_rank;
using ckpt::test::world_size;

namespace {

__global__ void fill_rows(double* a, std::uint64_t r0, std::uint64_t nr, std::uint64_t cols, double base,
                          long long cycles) {
  const long long t0 = clock64();
  while (clock64() - t0 < cycles) {
  }
  const std::uint64_t n = nr * cols;
  for (std::uint64_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
    a[i] = base + static_cast<double>((r0 + i / cols) * cols + i % cols);
}

void split(std::uint64_t n, int rank, int size, std::uint64_t& start, std::uint64_t& count) {
  const std::uint64_t base = n / size, extra = n % size;
  count = base + (static_cast<std::uint64_t>(rank) < extra ? 1 : 0);
  start = rank * base + std::min<std::uint64_t>(rank, extra);
}

constexpr std::uint64_t kRows = 1001, kCols = 4096;  // ~32 MiB of doubles in all

}  // namespace

TEST(CudaRanks, SharedGpuCheckpointAndNToMRestart) {
  const std::string why = ckpt::test::no_gpu_reason();
  if (!ckpt::test::all_true(why.empty())) GTEST_SKIP() << (why.empty() ? "another rank has no GPU" : why);
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);  // every rank on the one GPU
  const std::string dir = ckpt::test::scratch_dir();
  const int rank = world_rank(), size = world_size();
  cudaStream_t s;
  ASSERT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
  Options o = Options::defaults();
  o.dir = dir;
  o.fsync = false;
  o.chunk_bytes = 1 << 20;
  {
    std::uint64_t r0 = 0, nr = 0;
    split(kRows, rank, size, r0, nr);
    double* dev = nullptr;
    ASSERT_EQ(cudaMalloc(&dev, nr * kCols * sizeof(double) + 8), cudaSuccess);
    Runtime rt(MPI_COMM_WORLD, o);
    ASSERT_TRUE(rt.status().ok()) << rt.status().to_string();
    ASSERT_TRUE(rt.protect("field", dev, DType::f64, Block{{kRows, kCols}, {r0, 0}, {nr, kCols}}).ok());
    CKPT_LAUNCH(fill_rows, 64, 256, s)(dev, r0, nr, kCols, 0.5, 100'000'000);
    Ticket t = rt.checkpoint(1, s);
    EXPECT_EQ(cudaStreamQuery(s), cudaErrorNotReady);
    CKPT_LAUNCH(fill_rows, 64, 256, s)(dev, r0, nr, kCols, -1e9, 0);
    Status st = t.wait();
    ASSERT_TRUE(st.ok()) << st.to_string();
    ASSERT_TRUE(rt.close().ok());
    ASSERT_EQ(cudaFree(dev), cudaSuccess);
  }
  // N -> M: ranks 0 and 1 restart the whole array, split in two.
  MPI_Comm two;
  MPI_Comm_split(MPI_COMM_WORLD, rank < 2 ? 0 : MPI_UNDEFINED, rank, &two);
  if (two != MPI_COMM_NULL) {
    std::uint64_t r0 = 0, nr = 0;
    split(kRows, rank, 2, r0, nr);
    double* dev = nullptr;
    ASSERT_EQ(cudaMalloc(&dev, nr * kCols * sizeof(double)), cudaSuccess);
    ASSERT_EQ(cudaMemsetAsync(dev, 0xff, nr * kCols * sizeof(double), s), cudaSuccess);
    {
      Runtime rt(two, o);
      ASSERT_TRUE(rt.protect("field", dev, DType::f64, Block{{kRows, kCols}, {r0, 0}, {nr, kCols}}).ok());
      Status st = rt.restart(1, s);
      ASSERT_TRUE(st.ok()) << st.to_string();
    }
    std::vector<double> got(nr * kCols);
    ASSERT_EQ(cudaMemcpy(got.data(), dev, got.size() * sizeof(double), cudaMemcpyDeviceToHost), cudaSuccess);
    std::size_t bad = 0;
    for (std::uint64_t i = 0; i < got.size(); ++i) bad += got[i] != 0.5 + static_cast<double>(r0 * kCols + i);
    EXPECT_EQ(bad, 0u);
    ASSERT_EQ(cudaFree(dev), cudaSuccess);
    MPI_Comm_free(&two);
  }
  ASSERT_EQ(cudaStreamDestroy(s), cudaSuccess);
  MPI_Barrier(MPI_COMM_WORLD);
}

// The Reader fills device memory too: every rank opens the checkpoint on the communicator and reads a
// box of columns (the writers split by rows) straight into cudaMalloc'ed and managed memory, and its
// own local array into device memory; the device layer tells the kinds apart.
TEST(CudaRanks, ReaderReadsBoxesIntoDeviceMemory) {
  const std::string why = ckpt::test::no_gpu_reason();
  if (!ckpt::test::all_true(why.empty())) GTEST_SKIP() << (why.empty() ? "another rank has no GPU" : why);
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  const std::string dir = ckpt::test::scratch_dir();
  const int rank = world_rank(), size = world_size();
  constexpr std::uint64_t kR = 203, kC = 97;
  std::uint64_t r0 = 0, nr = 0;
  split(kR, rank, size, r0, nr);
  {
    Options o = Options::defaults();
    o.dir = dir;
    o.fsync = false;
    std::vector<double> host(nr * kC);
    for (std::uint64_t i = 0; i < host.size(); ++i) host[i] = 0.25 + static_cast<double>(r0 * kC + i);
    std::vector<std::int32_t> ids(5 + rank, 7 * rank);
    Runtime rt(MPI_COMM_WORLD, o);
    ASSERT_TRUE(rt.status().ok()) << rt.status().to_string();
    ASSERT_TRUE(rt.protect("field", host.data(), DType::f64, Block{{kR, kC}, {r0, 0}, {nr, kC}}).ok());
    ASSERT_TRUE(rt.protect("ids", ids.data(), DType::i32, {ids.size()}).ok());
    Status st = rt.checkpoint(2).wait();
    ASSERT_TRUE(st.ok()) << st.to_string();
    ASSERT_TRUE(rt.close().ok());
  }
  auto r = Reader::open(MPI_COMM_WORLD, dir);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  auto c = r->latest();
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  std::uint64_t c0 = 0, nc = 0;
  split(kC, rank, size, c0, nc);
  const std::size_t bytes = kR * nc * sizeof(double);
  auto check = [&](const std::vector<double>& got) {
    std::size_t bad = 0;
    for (std::uint64_t i = 0; i < kR; ++i)
      for (std::uint64_t j = 0; j < nc; ++j) bad += got[i * nc + j] != 0.25 + static_cast<double>(i * kC + c0 + j);
    return bad;
  };
  double* dev = nullptr;
  ASSERT_EQ(cudaMalloc(&dev, bytes), cudaSuccess);
  Status s = c.value().read("field", {0, c0}, {kR, nc}, dev, bytes);
  ASSERT_TRUE(s.ok()) << s.to_string();
  std::vector<double> got(kR * nc, -1);
  ASSERT_EQ(cudaMemcpy(got.data(), dev, bytes, cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_EQ(check(got), 0u);
  // A box too big for the buffer is refused before anything is copied.
  EXPECT_EQ(c.value().read("field", {0, c0}, {kR, nc}, dev, bytes - 8).code(), Code::invalid_argument);
  ASSERT_EQ(cudaFree(dev), cudaSuccess);
  double* managed = nullptr;
  ASSERT_EQ(cudaMallocManaged(&managed, bytes), cudaSuccess);
  s = c.value().read("field", {0, c0}, {kR, nc}, managed, bytes);
  ASSERT_TRUE(s.ok()) << s.to_string();
  EXPECT_EQ(check(std::vector<double>(managed, managed + kR * nc)), 0u);
  ASSERT_EQ(cudaFree(managed), cudaSuccess);
  std::int32_t* dids = nullptr;
  ASSERT_EQ(cudaMalloc(&dids, (5 + rank) * sizeof(std::int32_t)), cudaSuccess);
  s = c.value().read_rank("ids", static_cast<std::uint32_t>(rank), dids, (5 + rank) * sizeof(std::int32_t));
  ASSERT_TRUE(s.ok()) << s.to_string();
  std::vector<std::int32_t> hids(5 + rank, -1);
  ASSERT_EQ(cudaMemcpy(hids.data(), dids, hids.size() * sizeof(std::int32_t), cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_EQ(hids, std::vector<std::int32_t>(5 + rank, 7 * rank));
  ASSERT_EQ(cudaFree(dids), cudaSuccess);
  EXPECT_TRUE(ckpt::test::all_true(!HasFailure()));
}

// Restart keys into device memory: 4 ranks write joined rows from the host, ranks 0 and 1 take them by
// key in a scrambled order (runs of one row, a row twice, runs that cross the writers' blocks) into
// ghosted device allocations (a memory selection): each block is read once for every run landing in it,
// the rows at the allocation's pitch become 2D copies. The ghost cells keep their bytes.
TEST(CudaRanks, RestartKeysIntoGhostedDeviceMemory) {
  const std::string why = ckpt::test::no_gpu_reason();
  if (!ckpt::test::all_true(why.empty())) GTEST_SKIP() << (why.empty() ? "another rank has no GPU" : why);
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  constexpr std::uint64_t kY = 3, kX = 5, kG = 1;  // a row: kY x kX cells, in (kY + 2) x (kX + 2)
  const std::string dir = ckpt::test::scratch_dir();
  const int rank = world_rank();
  const auto id_of = [](std::uint64_t g) { return static_cast<std::int64_t>(1000 - 7 * g); };
  const auto value = [&](std::int64_t id, std::uint64_t c) { return static_cast<double>(id) * 100 + c; };
  const std::uint64_t n = 3 + static_cast<std::uint64_t>(rank), g0 = static_cast<std::uint64_t>(rank * (rank + 5) / 2),
                      total = 18;
  Options o = Options::defaults();
  o.dir = dir;
  o.fsync = false;
  o.chunk_bytes = 4096;  // several pieces per block
  {
    std::vector<double> rows(n * kY * kX);
    std::vector<std::int64_t> ids(n);
    for (std::uint64_t i = 0; i < n; ++i) {
      ids[i] = id_of(g0 + i);
      for (std::uint64_t c = 0; c < kY * kX; ++c) rows[i * kY * kX + c] = value(ids[i], c);
    }
    Runtime rt(MPI_COMM_WORLD, o);
    ASSERT_TRUE(rt.protect("rows", rows.data(), DType::f64, Joined{{n, kY, kX}}).ok());
    ASSERT_TRUE(rt.protect("id", ids.data(), DType::i64, Joined{{n}}).ok());
    ASSERT_TRUE(rt.checkpoint(1).wait().ok());
    ASSERT_TRUE(rt.close().ok());
  }
  MPI_Comm two;
  MPI_Comm_split(MPI_COMM_WORLD, rank < 2 ? 0 : MPI_UNDEFINED, rank, &two);
  auto restore = [&] {
    std::vector<std::int64_t> want;  // rank 0: every odd stored row then 2..8; rank 1: the rest, backwards
    if (rank == 0) {
      for (std::uint64_t g = 1; g < total; g += 2) want.push_back(id_of(g));
      for (std::uint64_t g = 2; g <= 8; ++g) want.push_back(id_of(g));
    } else {
      for (std::uint64_t g = total; g-- > 0;)
        if (g % 2 == 0) want.push_back(id_of(g));
    }
    const std::uint64_t m = want.size(), alloc = (m + 2) * (kY + 2 * kG) * (kX + 2 * kG);
    double* dev = nullptr;
    ASSERT_EQ(cudaMalloc(&dev, alloc * sizeof(double)), cudaSuccess);
    ASSERT_EQ(cudaMemset(dev, 0xff, alloc * sizeof(double)), cudaSuccess);
    {
      Runtime rt(two, o);
      ASSERT_TRUE(rt.protect("rows", dev, DType::f64, Joined{{m, kY, kX}}).ok());
      ASSERT_TRUE(
          rt.set_memory_selection("rows", MemorySelection{{1, kG, kG}, {m + 2, kY + 2 * kG, kX + 2 * kG}}).ok());
      ASSERT_TRUE(rt.set_restart_keys("rows", "id", want).ok());
#if CKPT_HAVE_SIMGPU
      const long copies2d = ckpt::simgpu::calls("cudaMemcpy2DAsync");
#endif
      Status st = rt.restart(1);
      ASSERT_TRUE(st.ok()) << st.to_string();
#if CKPT_HAVE_SIMGPU
      EXPECT_GT(ckpt::simgpu::calls("cudaMemcpy2DAsync"), copies2d);  // a row's cells at the allocation's pitch
#endif
    }
    std::vector<double> got(alloc);
    ASSERT_EQ(cudaMemcpy(got.data(), dev, alloc * sizeof(double), cudaMemcpyDeviceToHost), cudaSuccess);
    std::size_t bad = 0;
    for (std::uint64_t b = 0; b < m + 2; ++b)
      for (std::uint64_t y = 0; y < kY + 2 * kG; ++y)
        for (std::uint64_t x = 0; x < kX + 2 * kG; ++x) {
          const double v = got[(b * (kY + 2 * kG) + y) * (kX + 2 * kG) + x];
          const bool inside = b >= 1 && b <= m && y >= kG && y < kY + kG && x >= kG && x < kX + kG;
          std::uint64_t bits = 0;
          std::memcpy(&bits, &v, sizeof bits);
          bad += inside ? v != value(want[b - 1], (y - kG) * kX + (x - kG)) : bits != ~std::uint64_t{0};
        }
    EXPECT_EQ(bad, 0u);
    ASSERT_EQ(cudaFree(dev), cudaSuccess);
  };
  if (two != MPI_COMM_NULL) {
    restore();
    MPI_Comm_free(&two);
  }
  EXPECT_TRUE(ckpt::test::all_true(!HasFailure()));
}

#if CKPT_HAVE_SIMGPU
// Issue 32, defect 3: f64 [4][R][C] written by every rank in blocks split along dimension 1, restored
// whole by rank 0 into device memory. Each block's part of a plane is one row, consecutive rows are a
// plane apart in the destination: a 2D copy with that pitch. With a device whose pitch limit is below
// a plane (the simulated device's is set so; a real GPU's is 2 GiB, reached by [4][32768][8192]) the
// rows must be copied one by one - cudaMemcpy2DAsync refused the pitch and the restart failed.
// Issue 32, defect 6: when no staging memory can be pinned (cudaHostAlloc and cudaHostRegister fail on
// every rank), the checkpoints stay exact and the fall-back is said on stderr by rank 0 only, or by every
// rank with verbose.
// Scattered device memory (issue 35): each block is its own ghosted cudaMalloc allocation, registered as
// a piece; the capture copies each block's interior rows from device memory (2D copies at the
// allocation's pitch), and two ranks restore the blocks by key into blocks allocated anew.
TEST(CudaRanks, ScatteredDeviceBlocksRestartByKeyIntoNewAllocations) {
  const std::string why = ckpt::test::no_gpu_reason();
  if (!ckpt::test::all_true(why.empty())) GTEST_SKIP() << (why.empty() ? "another rank has no GPU" : why);
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  constexpr std::uint64_t kY = 3, kX = 5, kAY = kY + 2, kAX = kX + 2, kCells = kAY * kAX;
  const std::string dir = ckpt::test::scratch_dir();
  const int rank = world_rank();
  const auto id_of = [](std::uint64_t g) { return static_cast<std::int64_t>(70 + 11 * g); };
  const auto value = [](std::int64_t id, std::uint64_t c) { return static_cast<double>(id) * 100 + c; };
  const std::uint64_t n = 2 + static_cast<std::uint64_t>(rank), g0 = static_cast<std::uint64_t>(rank * (rank + 3) / 2);
  std::uint64_t total = 0;
  for (int q = 0; q < world_size(); ++q) total += 2 + static_cast<std::uint64_t>(q);
  Options o = Options::defaults();
  o.dir = dir;
  o.fsync = false;
  o.chunk_bytes = 4096;
  const Scattered shape{{kY, kX}, {}, MemorySelection{{1, 1}, {kAY, kAX}}};
  auto allocate = [&](std::uint64_t count, std::vector<double*>& blocks) {
    Scattered s = shape;
    for (std::uint64_t i = 0; i < count; ++i) {
      double* b = nullptr;
      EXPECT_EQ(cudaMalloc(&b, kCells * sizeof(double)), cudaSuccess);
      EXPECT_EQ(cudaMemset(b, 0xff, kCells * sizeof(double)), cudaSuccess);
      blocks.push_back(b);
      s.pieces.push_back(Piece{b, 1});
    }
    return s;
  };
  {
    std::vector<double*> blocks;
    Scattered s = allocate(n, blocks);
    std::vector<std::int64_t> ids(n);
    for (std::uint64_t i = 0; i < n; ++i) {
      ids[i] = id_of(g0 + i);
      std::vector<double> host(kCells, -1.0);
      for (std::uint64_t c = 0; c < kY * kX; ++c) host[(c / kX + 1) * kAX + c % kX + 1] = value(ids[i], c);
      ASSERT_EQ(cudaMemcpy(blocks[i], host.data(), kCells * sizeof(double), cudaMemcpyHostToDevice), cudaSuccess);
    }
    Runtime rt(MPI_COMM_WORLD, o);
    ASSERT_TRUE(rt.protect("blocks", DType::f64, s).ok());
    ASSERT_TRUE(rt.protect("id", ids.data(), DType::i64, Joined{{n}}).ok());
#if CKPT_HAVE_SIMGPU
    const long copies2d = ckpt::simgpu::calls("cudaMemcpy2DAsync");
#endif
    Status st = rt.checkpoint(1).wait();
    ASSERT_TRUE(st.ok()) << st.to_string();
#if CKPT_HAVE_SIMGPU
    EXPECT_GE(ckpt::simgpu::calls("cudaMemcpy2DAsync") - copies2d, static_cast<long>(n));  // a block's rows at once
#endif
    ASSERT_TRUE(rt.close().ok());
    for (double* b : blocks) ASSERT_EQ(cudaFree(b), cudaSuccess);
  }
  MPI_Comm two;
  MPI_Comm_split(MPI_COMM_WORLD, rank < 2 ? 0 : MPI_UNDEFINED, rank, &two);
  if (two != MPI_COMM_NULL) {
    std::vector<std::int64_t> want;  // rank 0: the even blocks, rank 1: the odd ones, newest first
    for (std::uint64_t g = total; g-- > 0;)
      if (g % 2 == static_cast<std::uint64_t>(rank)) want.push_back(id_of(g));
    std::vector<double*> blocks;
    Scattered s = allocate(want.size(), blocks);
    {
      Runtime rt(two, o);
      ASSERT_TRUE(rt.protect("blocks", DType::f64, s).ok());
      ASSERT_TRUE(rt.set_restart_keys("blocks", "id", want).ok());
      Status st = rt.restart(1);
      ASSERT_TRUE(st.ok()) << st.to_string();
    }
    std::size_t bad = 0;
    for (std::size_t i = 0; i < want.size(); ++i) {
      std::vector<double> got(kCells);
      ASSERT_EQ(cudaMemcpy(got.data(), blocks[i], kCells * sizeof(double), cudaMemcpyDeviceToHost), cudaSuccess);
      for (std::uint64_t y = 0; y < kAY; ++y)
        for (std::uint64_t x = 0; x < kAX; ++x) {
          const double v = got[y * kAX + x];
          const bool inside = y >= 1 && y <= kY && x >= 1 && x <= kX;
          std::uint64_t bits = 0;
          std::memcpy(&bits, &v, sizeof bits);
          bad += inside ? v != value(want[i], (y - 1) * kX + (x - 1)) : bits != ~std::uint64_t{0};
        }
      ASSERT_EQ(cudaFree(blocks[i]), cudaSuccess);
    }
    EXPECT_EQ(bad, 0u);
    MPI_Comm_free(&two);
  }
  EXPECT_TRUE(ckpt::test::all_true(!HasFailure()));
}

TEST(CudaRanks, PageableStagingIsSaidByRank0OrEveryRankWithVerbose) {
  ckpt::test::SimReset reset;
  const int rank = world_rank();
  constexpr std::size_t n = 1 << 18;
  double* dev = nullptr;
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&dev, n * sizeof(double)), cudaSuccess);
  for (int verbose = 0; verbose <= 1; ++verbose) {
    for (int i = 0; i < 16; ++i) {  // more than the pool's pieces
      ckpt::simgpu::inject_error("cudaHostAlloc", 0, cudaErrorMemoryAllocation);
      ckpt::simgpu::inject_error("cudaHostRegister", 0, cudaErrorMemoryAllocation);
    }
    Options o = Options::defaults();
    o.dir = ckpt::test::scratch_dir() + "/v" + std::to_string(verbose);
    o.fsync = false;
    o.verbose = verbose;
    ::testing::internal::CaptureStderr();
    {
      Runtime rt(MPI_COMM_WORLD, o);
      EXPECT_TRUE(rt.protect("dev", dev, DType::f64, {n}).ok());
      CKPT_LAUNCH(fill_rows, 1, 1, nullptr)(dev, 0, 1, n, 3.0 + rank, 0);
      Ticket t = rt.checkpoint(1);
      EXPECT_TRUE(t.wait().ok()) << t.wait().to_string();
      EXPECT_EQ(t.stats().staging_pinned_bytes, 0u);
      EXPECT_TRUE(rt.restart(1).ok());
    }
    const std::string err = ::testing::internal::GetCapturedStderr();
    const bool said = err.find("staging memory could not be pinned") != std::string::npos;
    EXPECT_EQ(said, rank == 0 || verbose == 1) << "rank " << rank << " verbose " << verbose << ": " << err;
    ckpt::simgpu::reset();
  }
  std::vector<double> got(n);
  ASSERT_EQ(cudaMemcpy(got.data(), dev, n * sizeof(double), cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_EQ(got[n - 1], 3.0 + rank + static_cast<double>(n - 1));
  ASSERT_EQ(cudaFree(dev), cudaSuccess);
  EXPECT_TRUE(ckpt::test::all_true(!HasFailure()));
}

TEST(CudaRanks, ARestartSplitsRowsFartherApartThanTheDevicesPitchLimit) {
  ckpt::test::SimReset reset;
  constexpr std::uint64_t kP = 4, kR = 64, kC = 32;  // a plane: 16 KiB
  ckpt::simgpu::set_max_pitch(8 << 10);
  const std::string dir = ckpt::test::scratch_dir();
  const int rank = world_rank(), size = world_size();
  std::uint64_t r0 = 0, nr = 0;
  split(kR, rank, size, r0, nr);
  auto value = [](std::uint64_t p, std::uint64_t r, std::uint64_t c) { return 0.5 + static_cast<double>((p * kR + r) * kC + c); };
  Options o = Options::defaults();
  o.dir = dir;
  o.fsync = false;
  {
    std::vector<double> host(kP * nr * kC);
    for (std::uint64_t p = 0; p < kP; ++p)
      for (std::uint64_t r = 0; r < nr; ++r)
        for (std::uint64_t c = 0; c < kC; ++c) host[(p * nr + r) * kC + c] = value(p, r0 + r, c);
    Runtime rt(MPI_COMM_WORLD, o);
    ASSERT_TRUE(rt.protect("a", host.data(), DType::f64, Block{{kP, kR, kC}, {0, r0, 0}, {kP, nr, kC}}).ok());
    ASSERT_TRUE(rt.checkpoint(1).wait().ok());
    ASSERT_TRUE(rt.close().ok());
  }
  MPI_Comm one;
  MPI_Comm_split(MPI_COMM_WORLD, rank == 0 ? 0 : MPI_UNDEFINED, rank, &one);
  // Rank 0's part in a function of its own: a failed ASSERT returns from it, not from the test (the
  // other ranks wait in all_true below).
  auto restore_on_rank0 = [&] {
    ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
    const std::size_t bytes = kP * kR * kC * sizeof(double);
    double* dev = nullptr;
    ASSERT_EQ(cudaMalloc(&dev, bytes), cudaSuccess);
    ASSERT_EQ(cudaMemset(dev, 0xff, bytes), cudaSuccess);
    {
      Runtime rt(one, o);
      ASSERT_TRUE(rt.protect("a", dev, DType::f64, Block{{kP, kR, kC}, {0, 0, 0}, {kP, kR, kC}}).ok());
      const long copies2d = ckpt::simgpu::calls("cudaMemcpy2DAsync");
      Status st = rt.restart(1);
      ASSERT_TRUE(st.ok()) << st.to_string();
      // A block's row of each plane is a copy of its own: no 2D copy spans planes.
      EXPECT_EQ(ckpt::simgpu::calls("cudaMemcpy2DAsync"), copies2d);
    }
    std::vector<double> got(kP * kR * kC);
    ASSERT_EQ(cudaMemcpy(got.data(), dev, bytes, cudaMemcpyDeviceToHost), cudaSuccess);
    std::size_t bad = 0;
    for (std::uint64_t p = 0; p < kP; ++p)
      for (std::uint64_t r = 0; r < kR; ++r)
        for (std::uint64_t c = 0; c < kC; ++c) bad += got[(p * kR + r) * kC + c] != value(p, r, c);
    EXPECT_EQ(bad, 0u);
    ASSERT_EQ(cudaFree(dev), cudaSuccess);
  };
  if (one != MPI_COMM_NULL) {
    restore_on_rank0();
    MPI_Comm_free(&one);
  }
  EXPECT_TRUE(ckpt::test::all_true(!HasFailure()));
}
#endif
