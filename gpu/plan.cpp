// GPU-path decisions that need no GPU; see plan.hpp.
#include "gpu/plan.hpp"

#include <algorithm>
#include <string>

namespace ckpt::detail {

Status check_app_stream(int device, void* stream, StreamProbe& probe, const char* what) {
  auto cur = probe.current_device();
  if (!cur.ok()) return cur.status();
  if (cur.value() != device)
    return Status(Code::failed_precondition, std::string(what) + ": the calling thread's current CUDA device is " +
                                                 std::to_string(cur.value()) + " but the Runtime was made on device " +
                                                 std::to_string(device) + "; call cudaSetDevice(" +
                                                 std::to_string(device) + ") before " + what + "()");
  // Whether the stream is being captured first: any other question about a stream in a capture may be
  // refused (and spoil the capture) where this one is always allowed.
  auto cap = probe.is_capturing(stream);
  if (!cap.ok()) return cap.status();
  if (cap.value())
    return Status(Code::failed_precondition,
                  std::string(what) +
                      ": the stream is being captured into a CUDA graph; ckpt's copies would become graph nodes "
                      "that run only when the graph is launched. Call it outside the capture");
  if (!probe.is_default_stream(stream)) {
    auto sd = probe.stream_device(stream);
    if (!sd.ok()) return sd.status();
    if (sd.value() != device)
      return Status(Code::failed_precondition, std::string(what) + ": the stream belongs to CUDA device " +
                                                   std::to_string(sd.value()) + ", the Runtime to device " +
                                                   std::to_string(device));
  }
  return Status::OK();
}

void DoubleBufferPlan::begin(std::size_t spare_bytes) {
  m_spare = spare_bytes;
  m_used = m_device_bytes = m_overflow = 0;
}

SparePlace DoubleBufferPlan::place(std::size_t n) {
  const std::size_t aligned = (n + kAlign - 1) / kAlign * kAlign;
  m_device_bytes += aligned;
  const std::size_t off = (m_used + kAlign - 1) / kAlign * kAlign;
  if (m_spare != 0 && off <= m_spare && n <= m_spare - off) {
    m_used = off + n;
    return SparePlace{true, off};
  }
  m_overflow += n;
  return SparePlace{};
}

std::size_t SpareSizer::observe(std::size_t need, std::size_t current) {
  m_recent.push_back(need);
  if (m_recent.size() > m_window) m_recent.erase(m_recent.begin());
  const std::size_t want = std::min(*std::max_element(m_recent.begin(), m_recent.end()), m_cap);
  if (want > current) return want;
  if (want < current / 2) return want;  // captures shrank: give memory back to the application
  return current;
}

void SpareSizer::failed(std::size_t bytes) {
  // The device is short of memory: back off by half, not just below the failure.
  m_cap = std::min(m_cap, bytes / 2);
}

Status RowBatcher::add(std::uint64_t dst, std::uint64_t src, std::uint64_t n) {
  if (n == 0) return Status::OK();
  Copy2D& c = m_cur;
  if (m_open) {
    if (c.height == 1 && dst == c.dst + c.width && src == c.src + c.width) {
      c.width += n;  // contiguous on both sides: one longer copy
      return Status::OK();
    }
    if (n == c.width && c.height == 1 && dst > c.dst && src > c.src && dst - c.dst >= n && src - c.src >= n &&
        dst - c.dst <= m_max_pitch && src - c.src <= m_max_pitch) {
      c.dpitch = dst - c.dst;
      c.spitch = src - c.src;
      c.height = 2;
      return Status::OK();
    }
    if (n == c.width && c.height > 1 && dst == c.dst + c.height * c.dpitch && src == c.src + c.height * c.spitch) {
      ++c.height;
      return Status::OK();
    }
    CKPT_RETURN_IF_ERROR(flush());
  }
  m_cur = Copy2D{dst, src, n, 1, n, n};
  m_open = true;
  return Status::OK();
}

Status RowBatcher::flush() {
  if (!m_open) return Status::OK();
  m_open = false;
  ++m_emitted;
  return m_emit(m_cur);
}

}  // namespace ckpt::detail
