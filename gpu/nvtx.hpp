/// \file nvtx.hpp
/// NVTX ranges for Nsight Systems (internal). With CUDA (CKPT_HAVE_CUDA) they use nvtx3 from the CUDA
/// toolkit (header only, nothing to link; a few nanoseconds when no tool is attached); without CUDA they
/// are empty and compile away. Every range lives in the NVTX domain "ckpt" and is named "ckpt:<phase>"
/// (see docs/gpu.md for the list), so a timeline shows capture, copies, flush and commit side by side.
///
///     { ckpt::detail::NvtxRange r("ckpt:capture", step); ...; }   // push/pop on this thread
///     ckpt::detail::NvtxSpan s("ckpt:checkpoint", step); ... s.end();  // may end on another thread
#ifndef CKPT_GPU_NVTX_HPP
#define CKPT_GPU_NVTX_HPP

#include <cstdint>
#include <string>

#include "ckpt/config.hpp"

#if CKPT_HAVE_CUDA
#include <nvtx3/nvToolsExt.h>
#endif

namespace ckpt::detail {

#if CKPT_HAVE_CUDA

/// The "ckpt" NVTX domain (created once, thread-safe).
inline nvtxDomainHandle_t nvtx_domain() noexcept {
  static const nvtxDomainHandle_t domain = nvtxDomainCreateA("ckpt");
  return domain;
}

/// Attributes of a range: the name, a colour derived from it (stable across runs, so a phase has
/// the same colour everywhere) and, when >= 0, the step as an int64 payload.
inline nvtxEventAttributes_t nvtx_attributes(const char* name, std::int64_t step) noexcept {
  static constexpr std::uint32_t kPalette[] = {0xff1f77b4, 0xffff7f0e, 0xff2ca02c, 0xffd62728,
                                               0xff9467bd, 0xff8c564b, 0xffe377c2, 0xff17becf};
  std::uint32_t h = 2166136261u;  // FNV-1a of the name
  for (const char* p = name; *p != '\0'; ++p) h = (h ^ static_cast<unsigned char>(*p)) * 16777619u;
  nvtxEventAttributes_t a{};
  a.version = NVTX_VERSION;
  a.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
  a.colorType = NVTX_COLOR_ARGB;
  a.color = kPalette[h % (sizeof kPalette / sizeof kPalette[0])];
  a.messageType = NVTX_MESSAGE_TYPE_ASCII;
  a.message.ascii = name;
  if (step >= 0) {
    a.payloadType = NVTX_PAYLOAD_TYPE_INT64;
    a.payload.llValue = step;
  }
  return a;
}

/// A range on the calling thread, from construction to destruction. `name` is copied by NVTX.
class NvtxRange {
 public:
  explicit NvtxRange(const char* name, std::int64_t step = -1) noexcept {
    const nvtxEventAttributes_t a = nvtx_attributes(name, step);
    nvtxDomainRangePushEx(nvtx_domain(), &a);
  }
  explicit NvtxRange(const std::string& name, std::int64_t step = -1) noexcept : NvtxRange(name.c_str(), step) {}
  ~NvtxRange() { nvtxDomainRangePop(nvtx_domain()); }
  NvtxRange(const NvtxRange&) = delete;
  NvtxRange& operator=(const NvtxRange&) = delete;
};

/// A range that may start on one thread and end on another (a checkpoint from capture to commit).
/// Ends at end() or at destruction, whichever comes first. Movable, so it can travel with a job.
class NvtxSpan {
 public:
  NvtxSpan() = default;
  explicit NvtxSpan(const char* name, std::int64_t step = -1) noexcept {
    const nvtxEventAttributes_t a = nvtx_attributes(name, step);
    m_id = nvtxDomainRangeStartEx(nvtx_domain(), &a);
    m_open = true;
  }
  NvtxSpan(NvtxSpan&& o) noexcept : m_id(o.m_id), m_open(o.m_open) { o.m_open = false; }
  NvtxSpan& operator=(NvtxSpan&& o) noexcept {
    if (this != &o) {
      end();
      m_id = o.m_id;
      m_open = o.m_open;
      o.m_open = false;
    }
    return *this;
  }
  ~NvtxSpan() { end(); }
  void end() noexcept {
    if (m_open) nvtxDomainRangeEnd(nvtx_domain(), m_id);
    m_open = false;
  }

 private:
  nvtxRangeId_t m_id = 0;
  bool m_open = false;
};

#else  // no CUDA: the same types, doing nothing

class NvtxRange {
 public:
  explicit NvtxRange(const char*, std::int64_t = -1) noexcept {}
  explicit NvtxRange(const std::string&, std::int64_t = -1) noexcept {}
  NvtxRange(const NvtxRange&) = delete;
  NvtxRange& operator=(const NvtxRange&) = delete;
};

class NvtxSpan {
 public:
  NvtxSpan() = default;
  explicit NvtxSpan(const char*, std::int64_t = -1) noexcept {}
  void end() noexcept {}
};

#endif  // CKPT_HAVE_CUDA

}  // namespace ckpt::detail

#endif  // CKPT_GPU_NVTX_HPP
