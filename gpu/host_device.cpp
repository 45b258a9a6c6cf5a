// The host device: a full peer of the CUDA device for host memory. Staging memory is mmap'ed (huge
// pages from 2 MiB on, map_direct_buffer), touched once (first-touch faults are slow) and mlock'ed when
// RLIMIT_MEMLOCK allows.
#include <sys/mman.h>

#if defined(__x86_64__)
#include <emmintrin.h>
#endif

#include <cerrno>
#include <cstdint>
#include <cstring>

#include "base/posix_io.hpp"
#include "gpu/device.hpp"

namespace ckpt::detail {
namespace {

class HostDevice final : public Device {
 public:
  const char* name() const override { return "host"; }
  Result<MemoryKind> classify(const void*) const override { return MemoryKind::host; }

  Result<StagingBlock> alloc_staging(std::size_t bytes) override {
    void* p = map_direct_buffer(bytes);
    if (p == nullptr) {
      return Status(Code::io_error,
                    "mmap of " + std::to_string(bytes) + " staging bytes failed: " + std::strerror(errno));
    }
    std::memset(p, 0, bytes);  // touch every page now, not during a capture
    StagingBlock b{p, bytes, ::mlock(p, bytes) == 0, false};
    return b;
  }
  void free_staging(const StagingBlock& b) override {
    if (b.ptr == nullptr) return;
    if (b.locked) ::munlock(b.ptr, b.bytes);
    ::munmap(b.ptr, b.bytes);
  }

  Status bind_thread() override { return Status::OK(); }
  Status capture_begin(void*) override { return Status::OK(); }
  Status copy_to_host(void* dst_base, const void* src_base, const Copy2D& c, MemoryKind) override {
    copy_rows_to_staging(dst_base, src_base, c);
    return Status::OK();
  }
  Result<Fence> fence() override { return Fence{++m_fence}; }
  Status wait(Fence) override { return Status::OK(); }  // copies are synchronous
  Status capture_end(void*) override { return Status::OK(); }
  Status synchronize() override { return Status::OK(); }
  Status restore_begin(void*) override { return Status::OK(); }
  Status copy_to_device(void* dst_base, const void* src_base, const Copy2D& c, MemoryKind) override {
    copy_rows(dst_base, src_base, c);
    return Status::OK();
  }
  Status restore_end(void*) override { return Status::OK(); }
  std::uint64_t max_copy_pitch() const override { return UINT64_MAX; }  // memcpy per row

 private:
  Fence m_fence = 0;
};

}  // namespace

void stream_to_staging(void* dst, const void* src, std::size_t n) {
#if defined(__x86_64__)
  auto* d = static_cast<std::uint8_t*>(dst);
  const auto* s = static_cast<const std::uint8_t*>(src);
  const std::size_t head = (16 - (reinterpret_cast<std::uintptr_t>(d) & 15)) & 15;
  if (n >= head + 64) {
    // Streaming stores: the staging copy is not read again by this core soon (the digest and write
    // threads read it later), so it need not displace the application's data from the caches, and the
    // stores skip the read-for-ownership of the destination lines.
    std::memcpy(d, s, head);
    d += head;
    s += head;
    n -= head;
    const std::size_t blocks = n / 64;
    for (std::size_t i = 0; i < blocks; ++i, d += 64, s += 64) {
      const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s));
      const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + 16));
      const __m128i c = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + 32));
      const __m128i e = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + 48));
      _mm_stream_si128(reinterpret_cast<__m128i*>(d), a);
      _mm_stream_si128(reinterpret_cast<__m128i*>(d + 16), b);
      _mm_stream_si128(reinterpret_cast<__m128i*>(d + 32), c);
      _mm_stream_si128(reinterpret_cast<__m128i*>(d + 48), e);
    }
    std::memcpy(d, s, n % 64);
    return;
  }
#endif
  std::memcpy(dst, src, n);
}

void staging_fence() {
#if defined(__x86_64__)
  _mm_sfence();  // the streaming stores are visible before the chunk is handed to another thread
#endif
}

void copy_to_staging(void* dst, const void* src, std::size_t n) {
  if (n >= (64u << 10)) {
    stream_to_staging(dst, src, n);
    staging_fence();
    return;
  }
  std::memcpy(dst, src, n);
}

std::unique_ptr<Device> make_host_device() { return std::make_unique<HostDevice>(); }

void copy_rows(void* dst_base, const void* src_base, const Copy2D& c) {
  auto* d = static_cast<std::uint8_t*>(dst_base) + c.dst;
  const auto* s = static_cast<const std::uint8_t*>(src_base) + c.src;
  for (std::uint64_t r = 0; r < c.height; ++r) std::memcpy(d + r * c.dpitch, s + r * c.spitch, c.width);
}

void copy_rows_to_staging(void* dst_base, const void* src_base, const Copy2D& c) {
  auto* d = static_cast<std::uint8_t*>(dst_base) + c.dst;
  const auto* s = static_cast<const std::uint8_t*>(src_base) + c.src;
  if (c.height == 1 || (c.dpitch == c.width && c.spitch == c.width)) {  // one contiguous run
    copy_to_staging(d, s, c.width * c.height);
    return;
  }
  // As copy_to_staging decides for one copy, and the capture for a memory-selected block: streaming
  // stores when the rows total 64 KiB or more, and one fence after the last row (not one per row).
  const bool stream = c.width * c.height >= (64u << 10);
  for (std::uint64_t r = 0; r < c.height; ++r) {
    if (stream)
      stream_to_staging(d + r * c.dpitch, s + r * c.spitch, c.width);
    else
      std::memcpy(d + r * c.dpitch, s + r * c.spitch, c.width);
  }
  if (stream) staging_fence();
}

Result<std::unique_ptr<Device>> make_default_device(const DeviceConfig& config) {
  auto cuda = make_gpu_device(config);
  if (cuda.ok()) return cuda;
  if (cuda.status().code() == Code::unavailable) return make_host_device();  // no GPU here
  return cuda.status().with_context("the CUDA device failed to start");
}

}  // namespace ckpt::detail
