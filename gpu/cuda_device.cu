// The CUDA device: stream-ordered capture of device memory into pinned staging chunks, restart into
// device memory, optional device-side double buffering. The only file of ckpt that includes
// cuda_runtime.h. How the streams and events fit together is in docs/gpu.md.
//
// Streams and events owned by one CudaDevice (all on device m_dev):
//   m_copy     non-blocking stream for every D2H (capture) and H2D (restart) copy
//   m_d2d      non-blocking stream for the D2D copies into the spare buffer (double buffering only)
//   m_start    recorded on the application's stream at capture_begin; m_copy (and m_d2d) wait on it
//   fences     one pooled event per staged chunk, recorded on m_copy; the flush thread waits on them
//   m_captured recorded at capture_end after the copies that read application memory; the
//              application's stream waits on it, so later kernels cannot overwrite data being copied
//   m_spare_free  recorded on m_copy after the D2H copies out of the spare; the next capture's D2D
//              copies wait on it before reusing the spare
#include <cuda_runtime.h>
#include <nvtx3/nvToolsExtCudaRt.h>
#include <sys/mman.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <deque>
#include <mutex>
#include <unordered_map>
#include <utility>
#include <vector>

#include "gpu/cuda_check.hpp"
#include "gpu/device.hpp"
#include "gpu/nvtx.hpp"

namespace ckpt::detail {
namespace {

constexpr std::size_t kSpareAlign = 256;  // cudaMalloc alignment: keeps D2D copies on fast paths

std::size_t align_up(std::size_t v, std::size_t a) { return (v + a - 1) / a * a; }

bool is_host_kind(MemoryKind k) { return k == MemoryKind::host || k == MemoryKind::host_pinned; }

/// Makes `dev` the calling thread's current device for a scope and restores the caller's afterwards,
/// so ckpt never changes the application's current device (and a flush thread that never touched CUDA
/// gets the right one).
class CurrentDevice {
 public:
  explicit CurrentDevice(int dev) : m_dev(dev) {
    m_status = CKPT_IMPL_CUDA_CHECK(cudaGetDevice(&m_prev));
    if (m_status.ok() && m_prev != m_dev) m_status = CKPT_IMPL_CUDA_CHECK(cudaSetDevice(m_dev));
  }
  ~CurrentDevice() {
    // Restoring can only fail if the application's device vanished; nobody to tell, the next CUDA
    // call of the application reports it.
    if (m_status.ok() && m_prev != m_dev) (void)CKPT_IMPL_CUDA_CHECK(cudaSetDevice(m_prev));
  }
  CurrentDevice(const CurrentDevice&) = delete;
  CurrentDevice& operator=(const CurrentDevice&) = delete;
  const Status& status() const { return m_status; }

 private:
  int m_dev;
  int m_prev = -1;
  Status m_status;
};

class CudaDevice final : public Device {
 public:
  CudaDevice(int dev, const CudaDeviceConfig& config) : m_dev(dev), m_config(config) {}

  Status init() {
    CurrentDevice cur(m_dev);
    CKPT_RETURN_IF_ERROR(cur.status());
    CKPT_RETURN_IF_ERROR(CKPT_IMPL_CUDA_CHECK(cudaStreamCreateWithFlags(&m_copy, cudaStreamNonBlocking)));
    nvtxNameCudaStreamA(m_copy, "ckpt copy (D2H/H2D)");
    for (cudaEvent_t* e : {&m_start, &m_captured, &m_captured_direct, &m_spare_free, &m_d2d_done, &m_restore_after})
      CKPT_RETURN_IF_ERROR(CKPT_IMPL_CUDA_CHECK(cudaEventCreateWithFlags(e, cudaEventDisableTiming)));
    using DB = CudaDeviceConfig::DoubleBuffer;
    if (m_config.double_buffer == DB::automatic) {
      int pools = 0;
      CKPT_RETURN_IF_ERROR(
          CKPT_IMPL_CUDA_CHECK(cudaDeviceGetAttribute(&pools, cudaDevAttrMemoryPoolsSupported, m_dev)));
      if (pools == 0) m_config.double_buffer = DB::off;  // growing needs cudaMallocAsync; stay direct
    }
    if (m_config.double_buffer != DB::off) {
      CKPT_RETURN_IF_ERROR(CKPT_IMPL_CUDA_CHECK(cudaStreamCreateWithFlags(&m_d2d, cudaStreamNonBlocking)));
      nvtxNameCudaStreamA(m_d2d, "ckpt D2D (double buffer)");
    }
    if (m_config.double_buffer == DB::on && m_config.spare_bytes > 0) {
      CKPT_RETURN_IF_ERROR(CKPT_IMPL_CUDA_CHECK(cudaMalloc(&m_spare, m_config.spare_bytes))
                               .with_context("spare device buffer for double buffering"));
      m_spare_bytes = m_config.spare_bytes;
    }
    return Status::OK();
  }

  ~CudaDevice() override {
    CurrentDevice cur(m_dev);
    if (!cur.status().ok()) return;
    // Copies may still be in flight after an abandoned capture: let them land before freeing.
    free_spare(m_copy);
    if (m_copy != nullptr) (void)CKPT_IMPL_CUDA_CHECK(cudaStreamSynchronize(m_copy));
    if (m_d2d != nullptr) (void)CKPT_IMPL_CUDA_CHECK(cudaStreamSynchronize(m_d2d));
    for (auto& p : m_pending) (void)CKPT_IMPL_CUDA_CHECK(cudaEventDestroy(p.second));
    for (cudaEvent_t e : m_free_events) (void)CKPT_IMPL_CUDA_CHECK(cudaEventDestroy(e));
    for (cudaEvent_t e : {m_start, m_captured, m_captured_direct, m_spare_free, m_d2d_done, m_restore_after})
      if (e != nullptr) (void)CKPT_IMPL_CUDA_CHECK(cudaEventDestroy(e));
    if (m_d2d != nullptr) (void)CKPT_IMPL_CUDA_CHECK(cudaStreamDestroy(m_d2d));
    if (m_copy != nullptr) (void)CKPT_IMPL_CUDA_CHECK(cudaStreamDestroy(m_copy));
  }

  const char* name() const override { return "cuda"; }

  MemoryKind classify(const void* ptr) const override {
    CurrentDevice cur(m_dev);
    cudaPointerAttributes a{};
    // CUDA >= 11 answers cudaMemoryTypeUnregistered for plain host memory; an error (e.g. a pointer
    // CUDA has never seen on an old driver) also means pageable host memory.
    if (!cur.status().ok() || !CKPT_IMPL_CUDA_CHECK(cudaPointerGetAttributes(&a, ptr)).ok()) return MemoryKind::host;
    switch (a.type) {
      case cudaMemoryTypeDevice: return MemoryKind::device;
      case cudaMemoryTypeManaged: return MemoryKind::managed;
      case cudaMemoryTypeHost: return MemoryKind::host_pinned;
      default: return MemoryKind::host;
    }
  }

  Result<StagingBlock> alloc_staging(std::size_t bytes) override {
    CurrentDevice cur(m_dev);
    CKPT_RETURN_IF_ERROR(cur.status());
    void* p = nullptr;
    Status s = CKPT_IMPL_CUDA_CHECK(cudaHostAlloc(&p, bytes, cudaHostAllocPortable));
    bool pinned = s.ok();
    if (!pinned) {
      // Pinned memory is limited (and cudaHostAlloc of many GiB can fail where mmap succeeds): fall
      // back to the host device's page-locked-if-possible memory. Copies stay correct, only D2H from
      // pageable memory is staged by the driver and slower; docs/gpu.md says how to spot it.
      p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      if (p == MAP_FAILED)
        return Status(Code::io_error, "pinned staging (" + s.message() + ") and mmap of " + std::to_string(bytes) +
                                          " bytes both failed: " + std::strerror(errno));
    }
    std::memset(p, 0, bytes);  // touch every page now, not during a capture
    StagingBlock b{p, bytes, pinned || ::mlock(p, bytes) == 0};
    std::lock_guard<std::mutex> lk(m_staging_mu);
    m_staging_pinned[p] = pinned;
    return b;
  }

  void free_staging(const StagingBlock& b) override {
    if (b.ptr == nullptr) return;
    bool pinned = false;
    {
      std::lock_guard<std::mutex> lk(m_staging_mu);
      auto it = m_staging_pinned.find(b.ptr);
      if (it == m_staging_pinned.end()) return;  // not ours
      pinned = it->second;
      m_staging_pinned.erase(it);
    }
    if (pinned) {
      CurrentDevice cur(m_dev);
      (void)CKPT_IMPL_CUDA_CHECK(cudaFreeHost(b.ptr));  // only at pool teardown; nobody left to tell
      return;
    }
    if (b.locked) ::munlock(b.ptr, b.bytes);
    ::munmap(b.ptr, b.bytes);
  }

  Status capture_begin(void* stream) override {
    CurrentDevice cur(m_dev);
    CKPT_RETURN_IF_ERROR(cur.status());
    m_app = static_cast<cudaStream_t>(stream);  // nullptr: the legacy default stream
    m_spare_used = 0;
    m_capture_device_bytes = 0;
    m_direct = false;
    m_d2h.clear();
    CKPT_RETURN_IF_ERROR(CKPT_IMPL_CUDA_CHECK(cudaEventRecord(m_start, m_app)));
    CKPT_RETURN_IF_ERROR(CKPT_IMPL_CUDA_CHECK(cudaStreamWaitEvent(m_copy, m_start, 0)));
    if (m_d2d != nullptr) {
      CKPT_RETURN_IF_ERROR(CKPT_IMPL_CUDA_CHECK(cudaStreamWaitEvent(m_d2d, m_start, 0)));
      // The spare may still be read by the previous capture's D2H copies (a no-op before the first).
      CKPT_RETURN_IF_ERROR(CKPT_IMPL_CUDA_CHECK(cudaStreamWaitEvent(m_d2d, m_spare_free, 0)));
    }
    m_capturing = true;
    return Status::OK();
  }

  Status copy_to_host(void* dst, const void* src, std::size_t n, MemoryKind src_kind) override {
    if (n == 0) return Status::OK();
    if (is_host_kind(src_kind)) {
      // checkpoint() promises that the host may overwrite host memory once it returns, so host
      // memory (pinned included) is copied now, on this thread. Pinned memory written by kernels
      // (zero-copy) must be synchronised by the application first, like any host memory.
      std::memcpy(dst, src, n);
      return Status::OK();
    }
    CurrentDevice cur(m_dev);
    CKPT_RETURN_IF_ERROR(cur.status());
    m_capture_device_bytes += align_up(n, kSpareAlign);
    const std::size_t off = align_up(m_spare_used, kSpareAlign);
    if (m_spare != nullptr && off + n <= m_spare_bytes) {
      // Double buffering: D2D now (the application waits only for this), D2H from the spare at fence().
      auto* spare = static_cast<std::uint8_t*>(m_spare) + off;
      NvtxRange r("ckpt:d2d");  // host side: enqueueing; the copy itself shows on the named D2D stream
      CKPT_RETURN_IF_ERROR(CKPT_IMPL_CUDA_CHECK(cudaMemcpyAsync(spare, src, n, cudaMemcpyDefault, m_d2d)));
      m_d2h.push_back({dst, spare, n});
      m_spare_used = off + n;
    } else {
      NvtxRange r("ckpt:d2h");  // host side: enqueueing; the copy itself shows on the named copy stream
      CKPT_RETURN_IF_ERROR(CKPT_IMPL_CUDA_CHECK(cudaMemcpyAsync(dst, src, n, cudaMemcpyDefault, m_copy)));
      m_direct = true;
    }
    m_unfenced = true;
    return Status::OK();
  }

  Result<Fence> fence() override {
    if (!m_unfenced) {  // nothing enqueued since the last fence: that one still marks this point
      std::lock_guard<std::mutex> lk(m_mu);
      return Fence{m_next};
    }
    CurrentDevice cur(m_dev);
    CKPT_RETURN_IF_ERROR(cur.status());
    CKPT_RETURN_IF_ERROR(enqueue_spare_d2h());
    cudaEvent_t e = nullptr;
    {
      std::lock_guard<std::mutex> lk(m_mu);
      recycle_locked();
      if (!m_free_events.empty()) {
        e = m_free_events.back();
        m_free_events.pop_back();
      }
    }
    if (e == nullptr) CKPT_RETURN_IF_ERROR(CKPT_IMPL_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming)));
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
        return Status(Code::internal, "CUDA device: wait on fence " + std::to_string(f) + " that was never issued");
      e = it->second;
      ++m_waiters;  // no event is recycled while someone may be synchronising on it
    }
    NvtxRange r("ckpt:wait_d2h");
    CurrentDevice cur(m_dev);  // the flush thread: set the device before any CUDA call
    Status s = cur.status();
    if (s.ok()) s = CKPT_IMPL_CUDA_CHECK(cudaEventSynchronize(e));
    std::lock_guard<std::mutex> lk(m_mu);
    --m_waiters;
    if (s.ok()) m_done = std::max(m_done, f);
    recycle_locked();
    return s;
  }

  Status capture_end(void* stream) override {
    CurrentDevice cur(m_dev);
    CKPT_RETURN_IF_ERROR(cur.status());
    if (!m_capturing) return Status(Code::internal, "CUDA device: capture_end without capture_begin");
    m_capturing = false;
    auto app = static_cast<cudaStream_t>(stream);
    CKPT_RETURN_IF_ERROR(enqueue_spare_d2h());  // normally done by the last fence()
    if (m_d2d != nullptr) {
      // The application waits for the D2D copies only (and for direct D2H copies of what did not fit).
      CKPT_RETURN_IF_ERROR(CKPT_IMPL_CUDA_CHECK(cudaEventRecord(m_captured, m_d2d)));
      CKPT_RETURN_IF_ERROR(CKPT_IMPL_CUDA_CHECK(cudaStreamWaitEvent(app, m_captured, 0)));
      if (m_direct) {
        CKPT_RETURN_IF_ERROR(CKPT_IMPL_CUDA_CHECK(cudaEventRecord(m_captured_direct, m_copy)));
        CKPT_RETURN_IF_ERROR(CKPT_IMPL_CUDA_CHECK(cudaStreamWaitEvent(app, m_captured_direct, 0)));
      }
      CKPT_RETURN_IF_ERROR(CKPT_IMPL_CUDA_CHECK(cudaEventRecord(m_spare_free, m_copy)));
      if (m_config.double_buffer == CudaDeviceConfig::DoubleBuffer::automatic) CKPT_RETURN_IF_ERROR(grow_spare());
    } else {
      CKPT_RETURN_IF_ERROR(CKPT_IMPL_CUDA_CHECK(cudaEventRecord(m_captured, m_copy)));
      CKPT_RETURN_IF_ERROR(CKPT_IMPL_CUDA_CHECK(cudaStreamWaitEvent(app, m_captured, 0)));
    }
    return Status::OK();
  }

  Status copy_to_device(void* dst, const void* src, std::size_t n, MemoryKind dst_kind) override {
    if (n == 0) return Status::OK();
    if (is_host_kind(dst_kind)) {
      std::memcpy(dst, src, n);
      return Status::OK();
    }
    CurrentDevice cur(m_dev);
    CKPT_RETURN_IF_ERROR(cur.status());
    if (!m_restoring) {
      // Order the restart after work already queued on the legacy default stream (and so on every
      // blocking stream), e.g. an initialisation kernel that writes the same buffer. Work on the
      // application's non-blocking streams is not covered: restart() has no stream argument (yet).
      CKPT_RETURN_IF_ERROR(CKPT_IMPL_CUDA_CHECK(cudaEventRecord(m_restore_after, cudaStreamLegacy)));
      CKPT_RETURN_IF_ERROR(CKPT_IMPL_CUDA_CHECK(cudaStreamWaitEvent(m_copy, m_restore_after, 0)));
      m_restoring = true;
    }
    CKPT_RETURN_IF_ERROR(CKPT_IMPL_CUDA_CHECK(cudaMemcpyAsync(dst, src, n, cudaMemcpyDefault, m_copy)));
    m_unfenced = true;  // a fence() now also covers these copies (for a pipelined restart)
    return Status::OK();
  }

  Status synchronize() override {
    if (!m_restoring) return Status::OK();
    CurrentDevice cur(m_dev);
    CKPT_RETURN_IF_ERROR(cur.status());
    NvtxRange r("ckpt:h2d_sync");
    m_restoring = false;
    return CKPT_IMPL_CUDA_CHECK(cudaStreamSynchronize(m_copy));
  }

 private:
  struct SpareCopy {
    void* dst;
    const void* src;
    std::size_t n;
  };

  /// Enqueues the D2H copies out of the spare buffer staged since the last call, after their D2D copies.
  Status enqueue_spare_d2h() {
    if (m_d2h.empty()) return Status::OK();
    NvtxRange r("ckpt:d2h");  // the D2H copies from the spare, enqueued after the D2D copies
    CKPT_RETURN_IF_ERROR(CKPT_IMPL_CUDA_CHECK(cudaEventRecord(m_d2d_done, m_d2d)));
    CKPT_RETURN_IF_ERROR(CKPT_IMPL_CUDA_CHECK(cudaStreamWaitEvent(m_copy, m_d2d_done, 0)));
    for (const SpareCopy& c : m_d2h)
      CKPT_RETURN_IF_ERROR(CKPT_IMPL_CUDA_CHECK(cudaMemcpyAsync(c.dst, c.src, c.n, cudaMemcpyDefault, m_copy)));
    m_d2h.clear();
    return Status::OK();
  }

  /// Automatic double buffering: after a capture whose device data did not fit the spare, grow the
  /// spare (stream-ordered, no host synchronisation) if the device keeps `headroom_bytes` free.
  Status grow_spare() {
    const std::size_t want = m_capture_device_bytes;
    if (want <= m_spare_bytes) return Status::OK();
    std::size_t free_b = 0, total_b = 0;
    CKPT_RETURN_IF_ERROR(CKPT_IMPL_CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b)));
    if (free_b + m_spare_bytes < want + m_config.headroom_bytes) return Status::OK();  // stay direct
    free_spare(m_copy);  // after the D2H copies that read it
    void* p = nullptr;
    // On m_d2d: the next capture's D2D copies are ordered after the allocation.
    if (!CKPT_IMPL_CUDA_CHECK(cudaMallocAsync(&p, want, m_d2d)).ok()) return Status::OK();  // stay direct
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
  CudaDeviceConfig m_config;
  cudaStream_t m_copy = nullptr;
  cudaStream_t m_d2d = nullptr;
  cudaStream_t m_app = nullptr;
  cudaEvent_t m_start = nullptr, m_captured = nullptr, m_captured_direct = nullptr, m_spare_free = nullptr,
              m_d2d_done = nullptr, m_restore_after = nullptr;

  // Application thread only (capture and restart).
  bool m_capturing = false;
  bool m_unfenced = false;
  bool m_direct = false;
  bool m_restoring = false;
  void* m_spare = nullptr;
  std::size_t m_spare_bytes = 0;
  bool m_spare_async = false;
  std::size_t m_spare_used = 0;
  std::size_t m_capture_device_bytes = 0;
  std::vector<SpareCopy> m_d2h;

  // Fences: shared by the application thread (fence) and the flush thread (wait).
  std::mutex m_mu;
  std::deque<std::pair<Fence, cudaEvent_t>> m_pending;  // issued, not known to be reached; increasing
  std::vector<cudaEvent_t> m_free_events;
  Fence m_next = 0;  // last fence issued
  Fence m_done = 0;  // every fence <= m_done is reached
  int m_waiters = 0;

  std::mutex m_staging_mu;
  std::unordered_map<void*, bool> m_staging_pinned;  // staging block -> came from cudaHostAlloc
};

}  // namespace

Result<std::unique_ptr<Device>> make_cuda_device(const CudaDeviceConfig& config) {
  int count = 0;
  Status s = CKPT_IMPL_CUDA_CHECK(cudaGetDeviceCount(&count));
  if (!s.ok()) return Status(Code::unavailable, "no usable CUDA device: " + s.message());
  if (count == 0) return Status(Code::unavailable, "no CUDA device is present");
  int dev = 0;
  CKPT_RETURN_IF_ERROR(CKPT_IMPL_CUDA_CHECK(cudaGetDevice(&dev)));
  auto d = std::make_unique<CudaDevice>(dev, config);
  CKPT_RETURN_IF_ERROR(d->init().with_context("CUDA device " + std::to_string(dev)));
  return std::unique_ptr<Device>(std::move(d));
}

Result<std::unique_ptr<Device>> make_cuda_device() { return make_cuda_device(CudaDeviceConfig{}); }

}  // namespace ckpt::detail
