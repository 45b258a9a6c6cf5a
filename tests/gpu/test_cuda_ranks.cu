// Several ranks on one GPU (run with 4 ranks): every rank checkpoints its box of a global array from
// device memory on its own stream, with a slow producer before and an overwriting kernel after; then
// the first two ranks alone restart the whole array (N -> M, Block regions) into device memory and
// compare. Skips (every rank) without a GPU.
#include <gtest/gtest.h>

#include <cstdint>
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
    fill_rows<<<64, 256, 0, s>>>(dev, r0, nr, kCols, 0.5, 100'000'000);
    Ticket t = rt.checkpoint(1, s);
    EXPECT_EQ(cudaStreamQuery(s), cudaErrorNotReady);
    fill_rows<<<64, 256, 0, s>>>(dev, r0, nr, kCols, -1e9, 0);
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
