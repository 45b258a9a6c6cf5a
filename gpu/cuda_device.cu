// The GPU device of both vendors: stream-ordered capture of device memory into pinned staging chunks,
// restart into device memory, optional device-side double buffering. Written against the CUDA runtime
// API; gpu_runtime.hpp (the only header that includes cuda_runtime.h or hip_runtime_api.h) maps every
// name to HIP in a HIP build, so this one file is the CUDA device (nvcc, CKPT_HAVE_CUDA) and the HIP
// device (the host compiler against HIP's headers, CKPT_HAVE_HIP); in the tests' simulated build
// (CKPT_HAVE_SIMGPU) the host compiler builds it, as it is, against gpu/sim's CPU runtime, and every
// wait below is one that tests/gpu/mutants.sh removes in turn. How the streams and events fit
// together is in docs/gpu.md; the decisions that need no GPU (stream checks, spare placement and
// sizing, row batching) are in plan.hpp.
//
// Streams and events owned by one CudaDevice (all on device m_dev):
//   m_copy     non-blocking stream for every D2H (capture) and H2D (restart) copy
//   m_d2d      non-blocking stream for the D2D copies into the spare buffer and the D2H copies of what
//              did not fit it (double buffering only): the application waits for this stream only
//   m_start    recorded on the application's stream at the first device copy of a capture; m_copy
//              (and m_d2d) wait on it
//   fences     one pooled event per staged chunk (blocking sync: the waiting thread sleeps), recorded
//              on m_copy; the flush thread waits on them
//   m_captured recorded at capture_end after the copies that read application memory; the
//              application's stream waits on it, so later kernels cannot overwrite data being copied
//   m_spare_free  recorded on m_copy after the D2H copies out of the spare; the next capture's first
//              D2D copy into the spare waits on it
//   m_restore_after  restart: recorded on the application's stream; m_copy waits on it before the H2D
//              copies (restore_end then waits for m_copy on the host)
//
// Threads: the application thread makes the device (its current device is m_dev) and calls everything
// but wait(); capture_begin/restore_begin check that its current device is still m_dev. ckpt's own
// threads call bind_thread() once (cudaSetDevice(m_dev), never undone) before wait(), and a thread whose
// binding failed never calls wait(): nothing here ever "restores" a device on a thread that had none,
// which would create a context on GPU 0 (AppThreadDevice).
#include <sys/mman.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <deque>
#include <mutex>
#include <unordered_map>
#include <utility>
#include <vector>

#include "base/posix_io.hpp"
#include "gpu/cuda_check.hpp"
#include "gpu/device.hpp"
#include "gpu/gpu_runtime.hpp"
#include "gpu/nvtx.hpp"

namespace ckpt::detail {
namespace {

/// Fence events: no timing (cheaper), blocking sync (cudaEventSynchronize sleeps instead of spinning a
/// core per rank for the whole D2H).
constexpr unsigned kFenceEventFlags = cudaEventDisableTiming | cudaEventBlockingSync;

bool is_host_kind(MemoryKind k) { return k == MemoryKind::host || k == MemoryKind::host_pinned; }

/// The calling thread's current device switched to `dev` for a scope, and switched back only if the
/// thread had one. For calls that may come at any time on a thread of the application (allocation,
/// teardown), which need not be the one that made the device: on a thread that never chose a device,
/// cudaGetDevice answers 0, and switching "back" to it would create a context on GPU 0 (issue 32); such
/// a thread stays on `dev`, whose context exists.
class AppThreadDevice {
 public:
  explicit AppThreadDevice(int dev) : m_dev(dev) {
    m_status = CKPT_IMPL_CUDA_CHECK(gpu_thread_device(&m_prev));
    if (m_status.ok() && m_prev != m_dev) m_status = CKPT_IMPL_CUDA_CHECK(cudaSetDevice(m_dev));
  }
  ~AppThreadDevice() {
    if (m_status.ok() && m_prev >= 0 && m_prev != m_dev) (void)CKPT_IMPL_CUDA_CHECK(cudaSetDevice(m_prev));
  }
  AppThreadDevice(const AppThreadDevice&) = delete;
  AppThreadDevice& operator=(const AppThreadDevice&) = delete;
  const Status& status() const { return m_status; }

 private:
  int m_dev;
  int m_prev = -1;  ///< -1: the thread had no current device
  Status m_status;
};

/// check_app_stream's questions, answered by the CUDA runtime.
class CudaStreamProbe final : public StreamProbe {
 public:
  Result<int> current_device() override {
    int d = -1;
    CKPT_RETURN_IF_ERROR(CKPT_IMPL_CUDA_CHECK(cudaGetDevice(&d)));
    return d;
  }
  bool is_default_stream(void* stream) const override {
    return gpu_is_default_stream(static_cast<cudaStream_t>(stream));
  }
  Result<int> stream_device(void* stream) override {
    int d = -1;
    CKPT_RETURN_IF_ERROR(CKPT_IMPL_CUDA_CHECK(gpu_stream_device(static_cast<cudaStream_t>(stream), &d)));
    return d;
  }
  Result<bool> is_capturing(void* stream) override {
    cudaStreamCaptureStatus st = cudaStreamCaptureStatusNone;
    const cudaError_t pending = cudaPeekAtLastError();
    const cudaError_t e = cudaStreamIsCapturing(static_cast<cudaStream_t>(stream), &st);
    // The legacy stream while a blocking stream captures: using it would join that capture.
    if (e == cudaErrorStreamCaptureImplicit) {
      if (pending == cudaSuccess) (void)cudaGetLastError();
      return true;
    }
    CKPT_RETURN_IF_ERROR(cuda_check(e, pending, "cudaStreamIsCapturing", __FILE__, __LINE__));
    return st != cudaStreamCaptureStatusNone;
  }
};

class CudaDevice final : public Device {
 public:
  CudaDevice(int dev, const DeviceConfig& config) : m_dev(dev), m_config(config), m_sizer(config.spare_bytes) {}

  /// On the thread that makes the device, whose current device is m_dev.
  Status init() {
    CKPT_RETURN_IF_ERROR(CKPT_IMPL_CUDA_CHECK(cudaStreamCreateWithFlags(&m_copy, cudaStreamNonBlocking)));
    gpu_name_stream(m_copy, "ckpt copy (D2H/H2D)");
    for (cudaEvent_t* e : {&m_start, &m_captured, &m_spare_free, &m_d2d_done, &m_restore_after})
      CKPT_RETURN_IF_ERROR(CKPT_IMPL_CUDA_CHECK(cudaEventCreateWithFlags(e, cudaEventDisableTiming)));
    int pitch = 0;  // cudaMemcpy2DAsync refuses larger pitches (RowBatcher splits by it)
    CKPT_RETURN_IF_ERROR(CKPT_IMPL_CUDA_CHECK(cudaDeviceGetAttribute(&pitch, cudaDevAttrMaxPitch, m_dev)));
    m_max_pitch = static_cast<std::uint64_t>(pitch);
    using DB = DeviceConfig::DoubleBuffer;
    if (m_config.double_buffer == DB::on && m_config.spare_bytes == 0)
      return Status(Code::invalid_argument, "double buffering 'on' needs a spare buffer size (gpu_spare_bytes > 0)");
    if (m_config.double_buffer == DB::automatic) {
      int pools = 0;
      CKPT_RETURN_IF_ERROR(
          CKPT_IMPL_CUDA_CHECK(cudaDeviceGetAttribute(&pools, cudaDevAttrMemoryPoolsSupported, m_dev)));
      if (pools == 0) {
        m_config.double_buffer = DB::off;  // resizing needs cudaMallocAsync; stay direct (docs/gpu.md)
      } else if (m_config.spare_bytes == 0) {
        std::size_t free_b = 0, total_b = 0;  // only the total is used: it does not change
        CKPT_RETURN_IF_ERROR(CKPT_IMPL_CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b)));
        m_sizer = SpareSizer(total_b / 16);
      }
    }
    if (m_config.double_buffer != DB::off) {
      CKPT_RETURN_IF_ERROR(CKPT_IMPL_CUDA_CHECK(cudaStreamCreateWithFlags(&m_d2d, cudaStreamNonBlocking)));
      gpu_name_stream(m_d2d, "ckpt D2D (double buffer)");
    }
    if (m_config.double_buffer == DB::on) {
      CKPT_RETURN_IF_ERROR(CKPT_IMPL_CUDA_CHECK(cudaMalloc(&m_spare, m_config.spare_bytes))
                               .with_context("spare device buffer for double buffering"));
      m_spare_bytes = m_config.spare_bytes;
    }
    return Status::OK();
  }

  ~CudaDevice() override {
    AppThreadDevice cur(m_dev);
    if (!cur.status().ok()) return;
    // Copies may still be in flight after an abandoned capture: both streams drain before anything
    // they use is freed.
    if (m_d2d != nullptr) (void)CKPT_IMPL_CUDA_CHECK(cudaStreamSynchronize(m_d2d));
    if (m_copy != nullptr) (void)CKPT_IMPL_CUDA_CHECK(cudaStreamSynchronize(m_copy));
    free_spare(m_copy);
    if (m_copy != nullptr) (void)CKPT_IMPL_CUDA_CHECK(cudaStreamSynchronize(m_copy));
    for (auto& p : m_pending) (void)CKPT_IMPL_CUDA_CHECK(cudaEventDestroy(p.second));
    for (cudaEvent_t e : m_free_events) (void)CKPT_IMPL_CUDA_CHECK(cudaEventDestroy(e));
    for (cudaEvent_t e : {m_start, m_captured, m_spare_free, m_d2d_done, m_restore_after})
      if (e != nullptr) (void)CKPT_IMPL_CUDA_CHECK(cudaEventDestroy(e));
    if (m_d2d != nullptr) (void)CKPT_IMPL_CUDA_CHECK(cudaStreamDestroy(m_d2d));
    if (m_copy != nullptr) (void)CKPT_IMPL_CUDA_CHECK(cudaStreamDestroy(m_copy));
  }

  const char* name() const override { return kGpuDeviceName; }

  Result<MemoryKind> classify(const void* ptr) const override {
    cudaPointerAttributes a{};
    const cudaError_t pending = cudaPeekAtLastError();
    const cudaError_t e = cudaPointerGetAttributes(&a, ptr);
    if (e == cudaErrorInvalidValue) {  // a pointer CUDA has never seen (older drivers): pageable host
      if (pending == cudaSuccess) (void)cudaGetLastError();
      return MemoryKind::host;
    }
    CKPT_RETURN_IF_ERROR(cuda_check(e, pending, "cudaPointerGetAttributes", __FILE__, __LINE__));
    switch (gpu_memory_type(a)) {
      case GpuMemoryType::device:
        if (a.device != m_dev)
          return Status(Code::failed_precondition, std::string("memory of ") + kGpuVendor + " device " +
                                                       std::to_string(a.device) + "; the Runtime copies on device " +
                                                       std::to_string(m_dev) +
                                                       " (make one Runtime per device, on that device)");
        return MemoryKind::device;
      case GpuMemoryType::managed: return MemoryKind::managed;  // migrates to whichever device reads it
      case GpuMemoryType::host_pinned: return MemoryKind::host_pinned;
      default: return MemoryKind::host;
    }
  }

  Result<StagingBlock> alloc_staging(std::size_t bytes) override {
    AppThreadDevice cur(m_dev);
    CKPT_RETURN_IF_ERROR(cur.status());
    NvtxRange r("ckpt:pool_grow");
    void* p = nullptr;
    // cudaHostAlloc'ed pages are pinned and resident already: no memset (it would only re-touch them).
    Status s = m_config.pin_staging ? CKPT_IMPL_CUDA_CHECK(cudaHostAlloc(&p, bytes, cudaHostAllocPortable))
                                    : Status(Code::unavailable, "pinned staging disabled");
    if (s.ok()) return remember(StagingBlock{p, bytes, true, true}, Staging::host_alloc);
    // Pinned allocations of this size failed (limits, fragmentation): pin ordinary pages instead, and
    // if even that fails, keep them pageable -- correct, but the driver then stages every D2H
    // synchronously; the pool's pinned_bytes() and CheckpointStats::staging_pinned_bytes tell.
    p = map_direct_buffer(bytes);
    if (p == nullptr)
      return Status(Code::io_error, "pinned staging (" + s.message() + ") and mmap of " + std::to_string(bytes) +
                                        " bytes both failed: " + std::strerror(errno));
    std::memset(p, 0, bytes);  // touch every page now, not during a capture
    Status reg = m_config.pin_staging ? CKPT_IMPL_CUDA_CHECK(cudaHostRegister(p, bytes, cudaHostRegisterPortable))
                                      : Status(Code::unavailable, "pinned staging disabled");
    if (reg.ok()) return remember(StagingBlock{p, bytes, true, true}, Staging::registered);
    if (m_config.say_fallbacks && !m_said_pageable) {  // once per device: every later piece is the same story
      m_said_pageable = true;
      std::fprintf(stderr,
                   "ckpt: %s device %d: staging memory could not be pinned (%s; %s): %zu bytes of the staging pool "
                   "are pageable, and device copies into them are synchronous and slower "
                   "(CheckpointStats::staging_pinned_bytes < staging_bytes tells)\n",
                   kGpuVendor, m_dev, s.message().c_str(), reg.message().c_str(), bytes);
    }
    return remember(StagingBlock{p, bytes, ::mlock(p, bytes) == 0, false}, Staging::pageable);
  }

  void free_staging(const StagingBlock& b) override {
    if (b.ptr == nullptr) return;
    Staging how;
    {
      std::lock_guard<std::mutex> lk(m_staging_mu);
      auto it = m_staging.find(b.ptr);
      if (it == m_staging.end()) return;  // not ours
      how = it->second.how;
      m_staging.erase(it);
    }
    // At pool teardown or re-chunking, when no chunk is lent. A retired chunk (its fence was never
    // waited on: the waiting thread could not be bound, or the fence failed) may still be the target of
    // a copy: the streams drain first. Failures have nobody left to tell.
    AppThreadDevice cur(m_dev);
    if (m_d2d != nullptr) (void)CKPT_IMPL_CUDA_CHECK(cudaStreamSynchronize(m_d2d));
    (void)CKPT_IMPL_CUDA_CHECK(cudaStreamSynchronize(m_copy));
    if (how == Staging::host_alloc) {
      (void)CKPT_IMPL_CUDA_CHECK(cudaFreeHost(b.ptr));
      return;
    }
    if (how == Staging::registered) (void)CKPT_IMPL_CUDA_CHECK(cudaHostUnregister(b.ptr));
    if (how == Staging::pageable && b.locked) ::munlock(b.ptr, b.bytes);
    ::munmap(b.ptr, b.bytes);
  }

  Status bind_thread() override { return CKPT_IMPL_CUDA_CHECK(cudaSetDevice(m_dev)); }

  Status capture_begin(void* stream) override {
    CudaStreamProbe probe;
    CKPT_RETURN_IF_ERROR(check_app_stream(m_dev, stream, probe, "checkpoint"));
    m_app = static_cast<cudaStream_t>(stream);  // nullptr: the legacy default stream
    m_plan.begin(m_spare != nullptr ? m_spare_bytes : 0);
    m_started = false;
    m_d2d_waits_spare = false;
    m_d2h.clear();
    m_capturing = true;
    return Status::OK();
  }

  Status copy_to_host(void* dst_base, const void* src_base, const Copy2D& c, MemoryKind src_kind) override {
    if (c.width == 0 || c.height == 0) return Status::OK();
    if (is_host_kind(src_kind)) {
      // checkpoint() promises that the host may overwrite host memory once it returns, so host
      // memory (pinned included) is copied now, on this thread. Pinned memory written by kernels
      // (zero-copy) must be synchronised by the application first, like any host memory.
      copy_rows_to_staging(dst_base, src_base, c);  // streaming stores, as the host device
      return Status::OK();
    }
    if (!m_capturing)
      return Status(Code::internal, std::string(kGpuVendor) + " device: copy_to_host outside a capture");
    CKPT_RETURN_IF_ERROR(start_device_copies());
    auto* dst = static_cast<std::uint8_t*>(dst_base) + c.dst;
    const auto* src = static_cast<const std::uint8_t*>(src_base) + c.src;
    const std::size_t n = c.width * c.height;
    // One copy of `c` from src to `to` (pitch `to_pitch`) on `stream`: plain for one row, 2D for rows
    // of a memory selection.
    auto copy = [&](void* to, std::size_t to_pitch, cudaMemcpyKind kind, cudaStream_t stream) {
      if (c.height == 1) return CKPT_IMPL_CUDA_CHECK(cudaMemcpyAsync(to, src, c.width, kind, stream));
      return CKPT_IMPL_CUDA_CHECK(cudaMemcpy2DAsync(to, to_pitch, src, c.spitch, c.width, c.height, kind, stream));
    };
    const SparePlace at = m_plan.place(n);
    if (m_d2d == nullptr) {
      NvtxRange r("ckpt:d2h");  // host side: enqueueing; the copy itself shows on the named copy stream
      CKPT_RETURN_IF_ERROR(copy(dst, c.dpitch, cudaMemcpyDeviceToHost, m_copy));
      m_unfenced = true;
      return Status::OK();
    }
    if (at.spare) {
      // Double buffering: D2D now (the application waits only for this), D2H from the spare at fence().
      if (!m_d2d_waits_spare) {  // the previous capture's D2H copies may still read the spare
        CKPT_RETURN_IF_ERROR(CKPT_IMPL_CUDA_CHECK(cudaStreamWaitEvent(m_d2d, m_spare_free, 0)));
        m_d2d_waits_spare = true;
      }
      auto* spare = static_cast<std::uint8_t*>(m_spare) + at.offset;
      NvtxRange r("ckpt:d2d");  // host side: enqueueing; the copy itself shows on the named D2D stream
      CKPT_RETURN_IF_ERROR(copy(spare, c.width, cudaMemcpyDeviceToDevice, m_d2d));  // packed in the spare
      if (c.height == 1 || c.dpitch == c.width) {
        m_d2h.push_back({dst, spare, n});
      } else {
        for (std::uint64_t row = 0; row < c.height; ++row)
          m_d2h.push_back({dst + row * c.dpitch, spare + row * c.width, c.width});
      }
    } else {
      // Did not fit: straight D2H, on the D2D stream, so the application waits for these bytes only.
      NvtxRange r("ckpt:d2h");
      CKPT_RETURN_IF_ERROR(copy(dst, c.dpitch, cudaMemcpyDeviceToHost, m_d2d));
    }
    m_d2d_unfenced = true;
    return Status::OK();
  }

  Result<Fence> fence() override {
    if (!m_unfenced && !m_d2d_unfenced) {  // nothing enqueued since the last fence: it still marks this point
      std::lock_guard<std::mutex> lk(m_mu);
      return Fence{m_next};
    }
    CKPT_RETURN_IF_ERROR(join_d2d());
    cudaEvent_t e = nullptr;
    {
      std::lock_guard<std::mutex> lk(m_mu);
      recycle_locked();
      if (!m_free_events.empty()) {
        e = m_free_events.back();
        m_free_events.pop_back();
      }
    }
    if (e == nullptr) CKPT_RETURN_IF_ERROR(CKPT_IMPL_CUDA_CHECK(cudaEventCreateWithFlags(&e, kFenceEventFlags)));
    Status s = CKPT_IMPL_CUDA_CHECK(cudaEventRecord(e, m_copy));
    std::lock_guard<std::mutex> lk(m_mu);
    if (!s.ok()) {
      m_free_events.push_back(e);
      return s;
    }
    m_pending.emplace_back(++m_next, e);
    m_unfenced = false;
    return Fence{m_next};
  }

  Status wait(Fence f) override {
    cudaEvent_t e = nullptr;
    {
      std::lock_guard<std::mutex> lk(m_mu);
      if (f <= m_done) return Status::OK();
      // Fences are increasing and m_copy is in order: the first pending fence >= f covers f.
      auto it = std::find_if(m_pending.begin(), m_pending.end(), [&](const auto& p) { return p.first >= f; });
      if (it == m_pending.end())
        return Status(Code::internal, std::string(kGpuVendor) + " device: wait on fence " + std::to_string(f) +
                                          " that was never issued");
      e = it->second;
      ++m_waiters;  // no event is recycled while someone may be synchronising on it
    }
    NvtxRange r("ckpt:wait_d2h");
    // No device switch: the caller is a bound ckpt thread or the application thread (checked current).
    Status s = CKPT_IMPL_CUDA_CHECK(cudaEventSynchronize(e));
    std::lock_guard<std::mutex> lk(m_mu);
    --m_waiters;
    if (s.ok()) m_done = std::max(m_done, f);
    recycle_locked();
    return s;
  }

  Status capture_end(void* stream) override {
    if (!m_capturing)
      return Status(Code::internal, std::string(kGpuVendor) + " device: capture_end without capture_begin");
    m_capturing = false;
    if (!m_started) return Status::OK();  // no device data: the application's stream is not touched
    auto app = static_cast<cudaStream_t>(stream);
    CKPT_RETURN_IF_ERROR(join_d2d());  // normally done by the last fence()
    if (m_d2d != nullptr) {
      // The application waits for the D2D copies and the D2H copies of what did not fit, only.
      CKPT_RETURN_IF_ERROR(CKPT_IMPL_CUDA_CHECK(cudaEventRecord(m_captured, m_d2d)));
      CKPT_RETURN_IF_ERROR(CKPT_IMPL_CUDA_CHECK(cudaStreamWaitEvent(app, m_captured, 0)));
      if (m_plan.used_spare()) CKPT_RETURN_IF_ERROR(CKPT_IMPL_CUDA_CHECK(cudaEventRecord(m_spare_free, m_copy)));
      if (m_config.double_buffer == DeviceConfig::DoubleBuffer::automatic) CKPT_RETURN_IF_ERROR(resize_spare());
    } else {
      CKPT_RETURN_IF_ERROR(CKPT_IMPL_CUDA_CHECK(cudaEventRecord(m_captured, m_copy)));
      CKPT_RETURN_IF_ERROR(CKPT_IMPL_CUDA_CHECK(cudaStreamWaitEvent(app, m_captured, 0)));
    }
    return Status::OK();
  }

  Status synchronize() override {
    NvtxRange r("ckpt:drain");
    if (m_d2d != nullptr) CKPT_RETURN_IF_ERROR(CKPT_IMPL_CUDA_CHECK(cudaStreamSynchronize(m_d2d)));
    return CKPT_IMPL_CUDA_CHECK(cudaStreamSynchronize(m_copy));
  }

  Status restore_begin(void* stream) override {
    CudaStreamProbe probe;
    CKPT_RETURN_IF_ERROR(check_app_stream(m_dev, stream, probe, "restart"));
    auto app = static_cast<cudaStream_t>(stream);
    CKPT_RETURN_IF_ERROR(CKPT_IMPL_CUDA_CHECK(cudaEventRecord(m_restore_after, app)));
    CKPT_RETURN_IF_ERROR(CKPT_IMPL_CUDA_CHECK(cudaStreamWaitEvent(m_copy, m_restore_after, 0)));
    return Status::OK();
  }

  Status copy_to_device(void* dst_base, const void* src_base, const Copy2D& c, MemoryKind dst_kind) override {
    if (c.width == 0 || c.height == 0) return Status::OK();
    if (is_host_kind(dst_kind)) {
      copy_rows(dst_base, src_base, c);
      return Status::OK();
    }
    auto* dst = static_cast<std::uint8_t*>(dst_base) + c.dst;
    const auto* src = static_cast<const std::uint8_t*>(src_base) + c.src;
    if (c.height == 1)
      CKPT_RETURN_IF_ERROR(CKPT_IMPL_CUDA_CHECK(cudaMemcpyAsync(dst, src, c.width, cudaMemcpyHostToDevice, m_copy)));
    else
      CKPT_RETURN_IF_ERROR(CKPT_IMPL_CUDA_CHECK(
          cudaMemcpy2DAsync(dst, c.dpitch, src, c.spitch, c.width, c.height, cudaMemcpyHostToDevice, m_copy)));
    m_unfenced = true;  // the next fence() covers these copies (the restart's bounce chunks)
    return Status::OK();
  }

  std::uint64_t max_copy_pitch() const override { return m_max_pitch; }

  Status restore_end(void*) override {
    // The host waits for every H2D copy: restart() returns with the data in place and its bounce chunks
    // free, and whatever the application enqueues afterwards runs after the copies. (The application's
    // stream used to wait on an event after them too: with the host waiting, that wait could not
    // matter, and no test could tell it was there.)
    NvtxRange r("ckpt:h2d_sync");
    return CKPT_IMPL_CUDA_CHECK(cudaStreamSynchronize(m_copy));
  }

 private:
  enum class Staging : std::uint8_t { host_alloc, registered, pageable };
  /// The map's value: a class, not the enum. nvcc's front end turns this file's anonymous namespace into
  /// a named one, and GCC gives a std template instantiated on an enum default visibility (a class type
  /// argument makes it hidden under -fvisibility=hidden): std::unordered_map<void*, Staging> was exported
  /// from libckpt (tests/install checks that nothing of ckpt::detail is).
  struct StagingOf {
    Staging how;
  };
  struct SpareCopy {
    void* dst;
    const void* src;
    std::size_t n;
  };

  Result<StagingBlock> remember(const StagingBlock& b, Staging how) {
    std::lock_guard<std::mutex> lk(m_staging_mu);
    m_staging[b.ptr] = StagingOf{how};
    return b;
  }

  /// At the first device copy of a capture: the copies wait for the work enqueued on the application's
  /// stream so far.
  Status start_device_copies() {
    if (m_started) return Status::OK();
    CKPT_RETURN_IF_ERROR(CKPT_IMPL_CUDA_CHECK(cudaEventRecord(m_start, m_app)));
    CKPT_RETURN_IF_ERROR(CKPT_IMPL_CUDA_CHECK(cudaStreamWaitEvent(m_copy, m_start, 0)));
    if (m_d2d != nullptr) CKPT_RETURN_IF_ERROR(CKPT_IMPL_CUDA_CHECK(cudaStreamWaitEvent(m_d2d, m_start, 0)));
    m_started = true;
    return Status::OK();
  }

  /// Orders m_copy after the work on m_d2d so far and enqueues the D2H copies out of the spare staged
  /// since the last call.
  Status join_d2d() {
    if (!m_d2d_unfenced) return Status::OK();
    NvtxRange r("ckpt:d2h");  // the D2H copies from the spare, enqueued after the D2D copies
    CKPT_RETURN_IF_ERROR(CKPT_IMPL_CUDA_CHECK(cudaEventRecord(m_d2d_done, m_d2d)));
    CKPT_RETURN_IF_ERROR(CKPT_IMPL_CUDA_CHECK(cudaStreamWaitEvent(m_copy, m_d2d_done, 0)));
    for (const SpareCopy& c : m_d2h)
      CKPT_RETURN_IF_ERROR(CKPT_IMPL_CUDA_CHECK(cudaMemcpyAsync(c.dst, c.src, c.n, cudaMemcpyDeviceToHost, m_copy)));
    m_d2h.clear();
    m_d2d_unfenced = false;
    m_unfenced = true;
    return Status::OK();
  }

  /// Automatic double buffering: after a capture, resize the spare to what SpareSizer wants
  /// (stream-ordered, no host synchronisation). A failed allocation leaves no spare (direct D2H).
  Status resize_spare() {
    const std::size_t want = m_sizer.observe(m_plan.device_bytes(), m_spare_bytes);
    if (want == m_spare_bytes) return Status::OK();
    free_spare(m_copy);  // after the D2H copies that read it
    if (want == 0) return Status::OK();
    void* p = nullptr;
    // On m_d2d: the next capture's D2D copies are ordered after the allocation.
    if (!CKPT_IMPL_CUDA_CHECK(cudaMallocAsync(&p, want, m_d2d)).ok()) {
      m_sizer.failed(want);
      return Status::OK();  // stay direct until captures fit the lowered cap
    }
    m_spare = p;
    m_spare_bytes = want;
    m_spare_async = true;
    return Status::OK();
  }

  /// Frees the spare buffer (stream-ordered on `stream` when it came from cudaMallocAsync).
  void free_spare(cudaStream_t stream) {
    if (m_spare == nullptr) return;
    // Failures here leave at worst a leaked device buffer; there is no caller to hand them to.
    if (m_spare_async)
      (void)CKPT_IMPL_CUDA_CHECK(cudaFreeAsync(m_spare, stream));
    else
      (void)CKPT_IMPL_CUDA_CHECK(cudaFree(m_spare));  // synchronises the device itself
    m_spare = nullptr;
    m_spare_bytes = 0;
  }

  /// Returns the events of fences already reached to the free list (m_mu held).
  void recycle_locked() {
    if (m_waiters != 0) return;
    while (!m_pending.empty() && m_pending.front().first <= m_done) {
      m_free_events.push_back(m_pending.front().second);
      m_pending.pop_front();
    }
  }

  const int m_dev;
  DeviceConfig m_config;
  std::uint64_t m_max_pitch = 0;  ///< cudaDevAttrMaxPitch
  cudaStream_t m_copy = nullptr;
  cudaStream_t m_d2d = nullptr;
  cudaStream_t m_app = nullptr;
  cudaEvent_t m_start = nullptr, m_captured = nullptr, m_spare_free = nullptr, m_d2d_done = nullptr,
              m_restore_after = nullptr;

  // Application thread only (capture and restart).
  bool m_capturing = false;
  bool m_started = false;          ///< this capture enqueued device copies (m_start recorded)
  bool m_unfenced = false;         ///< copies on m_copy since the last fence
  bool m_d2d_unfenced = false;     ///< copies on m_d2d not yet joined into m_copy
  bool m_d2d_waits_spare = false;  ///< this capture's m_d2d waits on the previous spare_free
  void* m_spare = nullptr;
  std::size_t m_spare_bytes = 0;
  bool m_spare_async = false;
  bool m_said_pageable = false;  ///< the pageable fall-back was said (alloc_staging: application thread)
  DoubleBufferPlan m_plan;
  SpareSizer m_sizer;
  std::vector<SpareCopy> m_d2h;

  // Fences: shared by the application thread (fence) and the flush thread (wait).
  std::mutex m_mu;
  std::deque<std::pair<Fence, cudaEvent_t>> m_pending;  // issued, not known to be reached; increasing
  std::vector<cudaEvent_t> m_free_events;
  Fence m_next = 0;  // last fence issued
  Fence m_done = 0;  // every fence <= m_done is reached
  int m_waiters = 0;

  std::mutex m_staging_mu;
  std::unordered_map<void*, StagingOf> m_staging;  // staging block -> how it was allocated
};

}  // namespace

Result<std::unique_ptr<Device>> make_gpu_device(const DeviceConfig& config) {
  int count = 0;
  Status s = CKPT_IMPL_CUDA_CHECK(cudaGetDeviceCount(&count));
  if (!s.ok()) {
    if (s.code() == Code::unavailable)
      return Status(Code::unavailable, std::string("no usable ") + kGpuVendor + " device: " + s.message());
    return s.with_context(std::string(kGpuVendor) + " is installed but failed to start");
  }
  if (count == 0) return Status(Code::unavailable, std::string("no ") + kGpuVendor + " device is present");
  int dev = 0;
  CKPT_RETURN_IF_ERROR(CKPT_IMPL_CUDA_CHECK(cudaGetDevice(&dev)));
  auto d = std::make_unique<CudaDevice>(dev, config);
  s = d->init();
  // A GPU is there: whatever failed is an error, never "no GPU" (the host device must not get it).
  if (!s.ok() && s.code() == Code::unavailable) s = Status(Code::io_error, s.message());
  CKPT_RETURN_IF_ERROR(s.with_context(std::string(kGpuVendor) + " device " + std::to_string(dev)));
  return std::unique_ptr<Device>(std::move(d));
}

Result<std::unique_ptr<Device>> make_gpu_device() { return make_gpu_device(DeviceConfig{}); }

}  // namespace ckpt::detail
