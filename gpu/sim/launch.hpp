/// \file launch.hpp
/// Kernels of the GPU tests and benchmarks, written once for a GPU and for the simulated device (not
/// part of the library): `CKPT_LAUNCH(kernel, grid, block, stream)(args...)` is
/// `kernel<<<grid, block, 0, stream>>>(args...)` with CUDA or HIP. In the simulated build
/// (CKPT_HAVE_SIMGPU) a kernel is a host function that runs on the stream's worker as one block of one
/// thread, so a grid-stride loop covers every element, and clock64() counts kSimCyclesPerNs cycles per
/// nanosecond (a kernel that spins for 200M cycles, ~0.1 s on a current GPU, spins for 40 ms).
#ifndef CKPT_GPU_SIM_LAUNCH_HPP
#define CKPT_GPU_SIM_LAUNCH_HPP

#include "ckpt/config.hpp"

#if CKPT_HAVE_SIMGPU
#include <tuple>
#include <utility>

#include "gpu/sim/sim_runtime.hpp"

#define __global__
#define __device__
#define __host__

struct SimDim3 {
  unsigned x, y, z;
};
inline constexpr SimDim3 threadIdx{0, 0, 0}, blockIdx{0, 0, 0};
inline constexpr SimDim3 blockDim{1, 1, 1}, gridDim{1, 1, 1};

namespace ckpt::simgpu {
inline constexpr long long kSimCyclesPerNs = 5;

/// A kernel launch on the simulated device: the arguments are copied, as a launch copies them.
template <class... P>
class KernelLaunch {
 public:
  KernelLaunch(cudaStream_t s, void (*k)(P...)) : m_s(s), m_k(k) {}
  template <class... A>
  void operator()(A&&... a) const {
    (void)launch(m_s, [k = m_k, args = std::tuple<P...>(std::forward<A>(a)...)] { std::apply(k, args); });
  }

 private:
  cudaStream_t m_s;
  void (*m_k)(P...);
};
}  // namespace ckpt::simgpu

inline long long clock64() { return ckpt::simgpu::now_ns() * ckpt::simgpu::kSimCyclesPerNs; }

#define CKPT_LAUNCH(kernel, grid, block, stream) ::ckpt::simgpu::KernelLaunch((stream), (kernel))
#else
#define CKPT_LAUNCH(kernel, grid, block, stream) kernel<<<(grid), (block), 0, (stream)>>>
#endif

#endif  // CKPT_GPU_SIM_LAUNCH_HPP
