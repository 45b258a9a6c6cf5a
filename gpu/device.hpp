/// \file device.hpp
/// The seam between the pipeline and memory (internal). One implementation per memory system: the host
/// device (always built, a full peer) and the CUDA device (cuda_device.cu, when CKPT_HAVE_CUDA).
#ifndef CKPT_GPU_DEVICE_HPP
#define CKPT_GPU_DEVICE_HPP

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "ckpt/ckpt.hpp"

namespace ckpt::detail {

/// A point in the device's copy order; wait(fence) returns once every copy enqueued before it is done.
using Fence = std::uint64_t;

/// Staging memory handed out by a device.
struct StagingBlock {
  void* ptr = nullptr;
  std::size_t bytes = 0;
  bool locked = false;  ///< page-locked (pinned or mlock'ed)
};

/// Copies between application memory and host staging chunks.
/// Thread-safety: capture_* / copy_to_host / fence are called by the application thread; wait() by the
/// flush thread; copy_to_device / synchronize by the application thread during restart.
class Device {
 public:
  virtual ~Device() = default;
  virtual const char* name() const = 0;
  /// Where `ptr` lives.
  virtual MemoryKind classify(const void* ptr) const = 0;
  /// Allocates and touches `bytes` of host staging memory (pinned when the device can).
  virtual Result<StagingBlock> alloc_staging(std::size_t bytes) = 0;
  virtual void free_staging(const StagingBlock& block) = 0;

  /// Starts a capture ordered after the work enqueued so far on `stream` (nullptr = default stream).
  virtual Status capture_begin(void* stream) = 0;
  /// Enqueues a copy of `n` bytes of application memory into host staging memory.
  virtual Status copy_to_host(void* dst, const void* src, std::size_t n, MemoryKind src_kind) = 0;
  /// A fence after the copies enqueued so far.
  virtual Result<Fence> fence() = 0;
  /// Blocks until `f` is reached (flush thread).
  virtual Status wait(Fence f) = 0;
  /// Ends the capture: work enqueued on `stream` afterwards runs after the copies.
  virtual Status capture_end(void* stream) = 0;

  /// Copies `n` bytes of host memory into application memory (restart); complete at synchronize().
  virtual Status copy_to_device(void* dst, const void* src, std::size_t n, MemoryKind dst_kind) = 0;
  virtual Status synchronize() = 0;
};

/// Settings of the CUDA device that are not Options (yet); the defaults are what the runtime uses.
struct CudaDeviceConfig {
  /// Device-side double buffering: device regions are first copied device-to-device into a spare
  /// device buffer, the application's stream is released after that copy, and the D2H copies into the
  /// staging chunks run from the spare buffer. See docs/gpu.md.
  enum class DoubleBuffer : std::uint8_t {
    off,        ///< D2H straight from the application's memory (default)
    on,         ///< a spare of `spare_bytes`, allocated when the device is made
    automatic,  ///< the spare grows (stream-ordered) to the largest capture seen while the device keeps
                ///< `headroom_bytes` free; a capture that does not fit goes straight D2H
  };
  DoubleBuffer double_buffer = DoubleBuffer::off;
  std::size_t spare_bytes = 0;              ///< `on`: size of the spare buffer in bytes
  std::size_t headroom_bytes = 1ull << 30;  ///< `automatic`: device memory the spare must leave free
};

/// The host device: copies on the calling thread, staging memory mmap'ed, touched and mlock'ed.
std::unique_ptr<Device> make_host_device();
/// The CUDA device on the calling thread's current CUDA device, or an `unavailable` Status when built
/// without CUDA or no GPU is present.
Result<std::unique_ptr<Device>> make_cuda_device();
Result<std::unique_ptr<Device>> make_cuda_device(const CudaDeviceConfig& config);
/// The CUDA device when CUDA is built in and a GPU is present, otherwise the host device.
std::unique_ptr<Device> make_default_device();
std::unique_ptr<Device> make_default_device(const CudaDeviceConfig& config);

}  // namespace ckpt::detail

#endif  // CKPT_GPU_DEVICE_HPP
