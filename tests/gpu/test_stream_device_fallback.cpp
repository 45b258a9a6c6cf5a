// The device as CUDA toolkits before 12.8 build it (issue 32, defect 2): gpu/cuda_device.cu compiled
// with CKPT_IMPL_NO_STREAM_GET_DEVICE (the branch of gpu_runtime.hpp's gpu_stream_device() that never
// asks cudaStreamGetDevice), installed as the Runtime's device, on the simulated device. It must build,
// never call cudaStreamGetDevice, and checkpoint and restart exactly on explicit streams - a stream of
// another device included, which that branch cannot detect (the copies are still ordered: events
// order streams of different devices). The build with cudaStreamGetDevice rejects that stream
// (gpu_cuda_device, CudaDevice.AStreamOfAnotherDeviceIsRejected).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "ckpt/ckpt.hpp"
#include "gpu/device.hpp"
#include "gpu_test_util.hpp"
#include "test_util.hpp"

using namespace ckpt;

namespace {

__global__ void fill(double* a, std::size_t n, double v, long long cycles) {
  const long long t0 = clock64();
  while (clock64() - t0 < cycles) {
  }
  for (std::size_t i = 0; i < n; ++i) a[i] = v + static_cast<double>(i);
}

}  // namespace

TEST(StreamDeviceFallback, ExplicitStreamsWorkAndTheStreamsDeviceIsNeverAsked) {
  detail::set_device_factory([](const detail::DeviceConfig& c) { return detail::make_gpu_device(c); });
  ASSERT_EQ(cudaSetDevice(1), cudaSuccess);
  cudaStream_t other = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&other, cudaStreamNonBlocking), cudaSuccess);  // on device 1
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  cudaStream_t mine = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&mine, cudaStreamNonBlocking), cudaSuccess);
  constexpr std::size_t n = 1 << 20;
  double* dev = nullptr;
  ASSERT_EQ(cudaMalloc(&dev, n * sizeof(double)), cudaSuccess);
  const long asked = ckpt::simgpu::calls("cudaStreamGetDevice");
  {
    Options o = Options::defaults();
    o.dir = ckpt::test::scratch_dir();
    o.fsync = false;
    o.chunk_bytes = 1 << 20;
    Runtime rt(MPI_COMM_WORLD, o);
    ASSERT_TRUE(rt.status().ok()) << rt.status().to_string();
    ASSERT_TRUE(rt.protect("dev", dev, DType::f64, {n}).ok());
    int step = 0;
    for (cudaStream_t s : {mine, other}) {
      ++step;
      CKPT_LAUNCH(fill, 1, 1, s)(dev, n, 100.0 * step, 100'000'000);  // slow: still running at checkpoint()
      Ticket t = rt.checkpoint(step, s);
      CKPT_LAUNCH(fill, 1, 1, s)(dev, n, -1.0, 0);  // ordered after the copies by capture_end
      Status st = t.wait();
      ASSERT_TRUE(st.ok()) << "step " << step << ": " << st.to_string();
    }
    for (step = 1; step <= 2; ++step) {
      ASSERT_EQ(cudaMemset(dev, 0xff, n * sizeof(double)), cudaSuccess);
      Status st = rt.restart(step, step == 1 ? mine : other);
      ASSERT_TRUE(st.ok()) << st.to_string();
      std::vector<double> got(n);
      ASSERT_EQ(cudaMemcpy(got.data(), dev, n * sizeof(double), cudaMemcpyDeviceToHost), cudaSuccess);
      std::size_t bad = 0;
      for (std::size_t i = 0; i < n; ++i) bad += got[i] != 100.0 * step + static_cast<double>(i);
      EXPECT_EQ(bad, 0u) << "step " << step;
    }
  }
  EXPECT_EQ(ckpt::simgpu::calls("cudaStreamGetDevice"), asked) << "the fallback branch asked the stream's device";
  detail::set_device_factory(nullptr);
  ASSERT_EQ(cudaFree(dev), cudaSuccess);
  ASSERT_EQ(cudaStreamDestroy(mine), cudaSuccess);
  ASSERT_EQ(cudaStreamDestroy(other), cudaSuccess);
}
