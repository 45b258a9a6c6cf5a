/// \file device.hpp
/// The seam between the pipeline and memory (internal). One implementation per memory system: the host
/// device (always built, a full peer) and the GPU device (cuda_device.cu: the CUDA device when
/// CKPT_HAVE_CUDA, the HIP device, from the same source, when CKPT_HAVE_HIP, and the simulated device
/// of the tests when CKPT_HAVE_SIMGPU).
#ifndef CKPT_GPU_DEVICE_HPP
#define CKPT_GPU_DEVICE_HPP

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "ckpt/status.hpp"
#include "ckpt/types.hpp"
#include "ckpt/export.h"
#include "gpu/plan.hpp"

namespace ckpt::detail {

/// A point in the device's copy order; wait(fence) returns once every copy enqueued before it is done.
using Fence = std::uint64_t;

/// Staging memory handed out by a device.
struct StagingBlock {
  void* ptr = nullptr;
  std::size_t bytes = 0;
  bool locked = false;  ///< page-locked: the pages stay resident (pinned, registered or mlock'ed)
  bool pinned = false;  ///< the GPU can DMA to it (cudaHostAlloc or cudaHostRegister): asynchronous copies
};

/// Copies between application memory and host staging chunks.
/// Thread-safety: capture_* / copy_to_host / fence / restore_* / copy_to_device are called by the
/// application thread; wait() by the flush thread, and by the application thread during restart;
/// bind_thread() once by each of ckpt's own threads before anything else.
class Device {
 public:
  virtual ~Device() = default;
  virtual const char* name() const = 0;
  /// Where `ptr` lives. Device memory of another GPU is an error (the copies would run on the wrong
  /// device); host memory is never an error.
  virtual Result<MemoryKind> classify(const void* ptr) const = 0;
  /// Allocates `bytes` of host staging memory (pinned when the device can; see StagingBlock), with
  /// every page resident. Called outside checkpoint() (see the staging pool).
  virtual Result<StagingBlock> alloc_staging(std::size_t bytes) = 0;
  virtual void free_staging(const StagingBlock& block) = 0;

  /// Binds the calling thread, one of ckpt's own (flush, write, commit), to this device, once, before
  /// its first device call. Never undone: the thread is ckpt's. Application threads are never bound;
  /// calls on them check that the application's current device is this one instead.
  virtual Status bind_thread() = 0;

  /// Starts a capture ordered after the work enqueued so far on `stream` (nullptr = default stream).
  /// Fails with failed_precondition when the calling thread's current device or the stream's device is
  /// not this device, or the stream is being captured into a graph (see check_app_stream).
  virtual Status capture_begin(void* stream) = 0;
  /// Enqueues `c` (offsets relative to dst_base / src_base) from application memory of kind `src_kind`
  /// into host staging memory: the rows of a memory selection, packed (c.dpitch == c.width).
  virtual Status copy_to_host(void* dst_base, const void* src_base, const Copy2D& c, MemoryKind src_kind) = 0;
  /// A plain copy of `n` bytes of application memory into staging (copy_to_host of one row).
  Status copy_to_host(void* dst, const void* src, std::size_t n, MemoryKind src_kind) {
    return copy_to_host(dst, src, Copy2D{0, 0, n, 1, n, n}, src_kind);
  }
  /// A fence after the copies enqueued so far (capture and restart).
  virtual Result<Fence> fence() = 0;
  /// Blocks until `f` is reached.
  virtual Status wait(Fence f) = 0;
  /// Ends the capture: work enqueued on `stream` afterwards runs after the copies that read device
  /// memory (a capture without device data does not touch the stream).
  virtual Status capture_end(void* stream) = 0;
  /// Blocks until every copy enqueued so far has landed (capture or restart). For error paths whose
  /// fence could not be taken: a staging chunk is never released while a copy into it is in flight.
  virtual Status synchronize() = 0;

  /// Starts a restart whose copies are ordered after the work enqueued so far on `stream`; checks the
  /// stream like capture_begin.
  virtual Status restore_begin(void* stream) = 0;
  /// Enqueues `c` (offsets relative to dst_base / src_base) from host memory into application memory of
  /// kind `dst_kind`. Host memory is written at once; device memory when a later fence() is reached.
  virtual Status copy_to_device(void* dst_base, const void* src_base, const Copy2D& c, MemoryKind dst_kind) = 0;
  /// The largest pitch (distance between rows) of one strided copy from or into device memory
  /// (copy_to_host or copy_to_device with height > 1); rows further apart must be copied one by one
  /// (RowBatcher's cap).
  virtual std::uint64_t max_copy_pitch() const = 0;
  /// A plain copy of `n` bytes (copy_to_device of one row).
  Status copy_to_device(void* dst, const void* src, std::size_t n, MemoryKind dst_kind) {
    return copy_to_device(dst, src, Copy2D{0, 0, n, 1, n, n}, dst_kind);
  }
  /// Ends the restart: blocks until every restart copy has landed and orders later work on `stream`
  /// after them.
  virtual Status restore_end(void* stream) = 0;
};

/// Settings of the GPU device (CUDA or HIP); the Runtime fills them from Options.
struct DeviceConfig {
  /// Device-side double buffering: device regions are first copied device-to-device into a spare
  /// device buffer, the application's stream is released after that copy, and the D2H copies into the
  /// staging chunks run from the spare buffer. See docs/gpu.md.
  enum class DoubleBuffer : std::uint8_t {
    off,        ///< D2H straight from the application's memory (default)
    on,         ///< a spare of `spare_bytes` (> 0), allocated when the device is made
    automatic,  ///< the spare follows the captures' device bytes (SpareSizer), at most `spare_bytes`
                ///< (0: 1/16 of the device's memory); what does not fit goes straight D2H
  };
  DoubleBuffer double_buffer = DoubleBuffer::off;
  std::size_t spare_bytes = 0;  ///< `on`: size of the spare; `automatic`: its cap (0: device memory / 16)
  bool pin_staging = true;      ///< false: pageable staging memory (tests the fall-back; copies synchronous)
  /// Say on stderr, once, when staging memory could not be pinned (the Runtime: on rank 0, and on every
  /// rank with verbose); it also shows in CheckpointStats::staging_pinned_bytes.
  bool say_fallbacks = false;
};

/// Performs `c` with memcpy (host memory on both sides).
void copy_rows(void* dst_base, const void* src_base, const Copy2D& c);
/// Performs `c` with copy_to_staging, row by row (host memory into a staging chunk).
void copy_rows_to_staging(void* dst_base, const void* src_base, const Copy2D& c);
/// The host device's copy into a staging chunk: memcpy, with streaming (non-temporal) stores for
/// copies of 64 KiB and more on x86-64.
void copy_to_staging(void* dst, const void* src, std::size_t n);
/// Copies with streaming stores (x86-64; memcpy elsewhere and below 64 + 15 bytes) and no fence: for
/// many rows into one chunk, followed by one staging_fence() before the chunk changes hands.
void stream_to_staging(void* dst, const void* src, std::size_t n);
void staging_fence();

/// The host device: copies on the calling thread, staging memory mmap'ed, touched and mlock'ed.
std::unique_ptr<Device> make_host_device();
/// The GPU device (CUDA, HIP or the simulated device, whichever this build has) on the calling
/// thread's current device. `unavailable` only when there is no GPU to use (built without a GPU vendor,
/// no driver, no device); any other failure to start it has another code.
Result<std::unique_ptr<Device>> make_gpu_device();
Result<std::unique_ptr<Device>> make_gpu_device(const DeviceConfig& config);
/// The GPU device when a GPU runtime is built in and a GPU is present, the host device when there is
/// no GPU (make_gpu_device said `unavailable`), and the error when a GPU is there but its device failed to
/// start: device pointers must never reach the host device's memcpy.
Result<std::unique_ptr<Device>> make_default_device(const DeviceConfig& config = DeviceConfig{});

/// How the Runtime makes its device: make_default_device unless a test installed a factory.
using DeviceFactory = std::function<Result<std::unique_ptr<Device>>(const DeviceConfig&)>;
/// Test seam (not thread-safe; set before making a Runtime): an empty factory restores the default.
/// It and make_runtime_device are the only internals libckpt exports (gpu/device_factory.cpp), so
/// that a test holding objects of the device layer installs its device where the Runtime looks.
CKPT_API void set_device_factory(DeviceFactory factory);
CKPT_API Result<std::unique_ptr<Device>> make_runtime_device(const DeviceConfig& config);

}  // namespace ckpt::detail

#endif  // CKPT_GPU_DEVICE_HPP
