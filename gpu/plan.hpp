/// \file plan.hpp
/// Decisions of the GPU path that need no GPU (internal): which checks a stream passes and in which
/// order, where each device copy of a capture goes when double buffering, how big the automatic spare
/// buffer is, and how restart rows are batched into 2D copies. The CUDA device (cuda_device.cu) calls
/// these; tests/unit/test_gpu_plan.cpp tests them on any machine.
#ifndef CKPT_GPU_PLAN_HPP
#define CKPT_GPU_PLAN_HPP

#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

#include "ckpt/status.hpp"

namespace ckpt::detail {

/// What the device can find out about the calling thread and an application stream. The CUDA device
/// answers with cudaGetDevice, cudaStreamGetDevice and cudaStreamIsCapturing.
class StreamProbe {
 public:
  virtual ~StreamProbe() = default;
  /// The calling thread's current device.
  virtual Result<int> current_device() = 0;
  /// True for the handles that name "the current device's default stream" (nullptr, the legacy and the
  /// per-thread default stream): they have no device of their own.
  virtual bool is_default_stream(void* stream) const = 0;
  /// The device `stream` was created on.
  virtual Result<int> stream_device(void* stream) = 0;
  /// Whether `stream` is being captured into a CUDA graph.
  virtual Result<bool> is_capturing(void* stream) = 0;
};

/// Checks that `stream` can order work of the Runtime's device `device` (capture and restart), in this
/// order, stopping at the first failure: (1) the calling thread's current device is `device` (nullptr
/// means that device's default stream, and the default stream of another device would never be
/// ordered); (2) the stream is not being captured into a graph (copies would become graph nodes that
/// never run; asked before anything else about the stream, which a capture may refuse); (3) an
/// explicit stream belongs to `device`. Failures are failed_precondition with what to do; probe errors
/// are returned as they are. `what` names the call ("checkpoint", "restart").
Status check_app_stream(int device, void* stream, StreamProbe& probe, const char* what);

/// Where one device copy of a double-buffered capture goes.
struct SparePlace {
  bool spare = false;      ///< true: D2D into the spare at `offset`, D2H later; false: straight D2H
  std::size_t offset = 0;  ///< byte offset in the spare (spare only)
};

/// Per-capture bookkeeping of device-side double buffering (application thread). Copies that fit the
/// spare go D2D; a copy that does not fit goes straight D2H *on the same stream as the D2D copies*, so
/// the application waits for the D2D copies plus only the D2H of what did not fit (the old fall-back
/// made it wait for every D2H of the capture).
class DoubleBufferPlan {
 public:
  static constexpr std::size_t kAlign = 256;  ///< cudaMalloc alignment: keeps D2D copies on fast paths
  /// A new capture with a spare of `spare_bytes` (0: none, every copy goes straight D2H).
  void begin(std::size_t spare_bytes);
  /// Places a device copy of `n` bytes (n > 0).
  SparePlace place(std::size_t n);
  /// Device bytes of this capture, each copy rounded up to kAlign (what a spare would need).
  std::size_t device_bytes() const { return m_device_bytes; }
  bool any_device() const { return m_device_bytes != 0; }
  bool used_spare() const { return m_used != 0; }
  /// Bytes of this capture that went straight D2H.
  std::size_t overflow_bytes() const { return m_overflow; }

 private:
  std::size_t m_spare = 0, m_used = 0, m_device_bytes = 0, m_overflow = 0;
};

/// Size of the spare buffer of automatic double buffering: the largest need of the last `window`
/// captures, at most `cap` bytes. It grows when a capture needs more, shrinks to the need when the
/// need fell below half of the spare, and never asks the device how much memory is free (racy when
/// several ranks share a GPU): the cap is fixed.
class SpareSizer {
 public:
  SpareSizer(std::size_t cap, std::size_t window = 4) : m_cap(cap), m_window(window == 0 ? 1 : window) {}
  /// After a capture that needed `need` bytes with a spare of `current` bytes: the spare size wanted
  /// from now on (== current: keep it).
  std::size_t observe(std::size_t need, std::size_t current);
  /// An allocation of `bytes` failed: never ask for that much again.
  void failed(std::size_t bytes);
  std::size_t cap() const { return m_cap; }

 private:
  std::size_t m_cap, m_window;
  std::vector<std::size_t> m_recent;
};

/// One strided copy: `height` rows of `width` bytes, row r from src + r * spitch to dst + r * dpitch
/// (offsets relative to the caller's bases). height == 1 is a plain copy.
struct Copy2D {
  std::uint64_t dst = 0, src = 0;
  std::uint64_t width = 0, height = 0;
  std::uint64_t dpitch = 0, spitch = 0;
};

/// Batches restart rows into as few copies as possible (application thread): consecutive rows of equal
/// width at constant source and destination strides become one Copy2D (cudaMemcpy2DAsync), rows that
/// are contiguous on both sides one plain copy. A 2D copy's pitches stay within `max_pitch` (the
/// device's limit, Device::max_copy_pitch(): cudaMemcpy2DAsync refuses larger ones): rows further apart
/// are copies of their own. `emit` receives each batch; flush() emits the last.
class RowBatcher {
 public:
  explicit RowBatcher(std::function<Status(const Copy2D&)> emit, std::uint64_t max_pitch = UINT64_MAX)
      : m_emit(std::move(emit)), m_max_pitch(max_pitch) {}
  /// Adds a row of `n` > 0 bytes from src to dst.
  Status add(std::uint64_t dst, std::uint64_t src, std::uint64_t n);
  Status flush();
  /// Batches emitted so far.
  std::size_t emitted() const { return m_emitted; }

 private:
  std::function<Status(const Copy2D&)> m_emit;
  std::uint64_t m_max_pitch;
  Copy2D m_cur;
  bool m_open = false;
  std::size_t m_emitted = 0;
};

}  // namespace ckpt::detail

#endif  // CKPT_GPU_PLAN_HPP
