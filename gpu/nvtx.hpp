/// \file nvtx.hpp
/// NVTX ranges for Nsight Systems and other NVTX tools (internal). Built in whenever the nvtx3 headers
/// were found at configure time (CKPT_HAVE_NVTX; header only, they ship with the CUDA toolkit): no GPU
/// and no CUDA runtime call needed. A HIP build with roctx (CKPT_HAVE_ROCTX: roctracer's libroctx64,
/// for rocprof) emits the same ranges through roctx instead: same names, the step in the message
/// ("ckpt:capture step=12": roctx has no payload), no domain, colours or thread names. With neither the
/// types are empty and compile away.
///
/// Every range lives in the NVTX domain "ckpt", is named "ckpt:<phase>" with a registered string (see
/// docs/gpu.md for the list) and carries the step as its int64 payload when known. With no tool
/// attached NVTX hands out a null domain, and every call below is then one load and one branch.
///
///     { ckpt::detail::NvtxRange r("ckpt:capture", step); ...; }   // push/pop on this thread
///     ckpt::detail::NvtxSpan s("ckpt:checkpoint", step); ... s.end();  // may end on another thread
#ifndef CKPT_GPU_NVTX_HPP
#define CKPT_GPU_NVTX_HPP

#include <cstdint>
#include <string>

#include "ckpt/config.hpp"

#if CKPT_HAVE_NVTX
#include <nvtx3/nvToolsExt.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <unordered_map>
#elif CKPT_HAVE_ROCTX
#include <roctracer/roctx.h>

#include <cstdio>
#endif

namespace ckpt::detail {

#if CKPT_HAVE_NVTX || CKPT_HAVE_ROCTX
#if CKPT_HAVE_NVTX

/// The "ckpt" NVTX domain, created once (thread-safe). Null when no tool is attached: NVTX then
/// returns null from every call, so a null domain means "nothing to do".
inline nvtxDomainHandle_t nvtx_domain() noexcept {
  static const nvtxDomainHandle_t domain = nvtxDomainCreateA("ckpt");
  return domain;
}

/// `name` registered in the "ckpt" domain (a tool then sees a handle, not a string to copy, per
/// range). Cached per thread, so no lock on the path of a range; only called with a tool attached.
inline nvtxStringHandle_t nvtx_string(const char* name) {
  thread_local std::unordered_map<std::string, nvtxStringHandle_t> cache;
  auto it = cache.find(name);
  if (it == cache.end()) it = cache.emplace(name, nvtxDomainRegisterStringA(nvtx_domain(), name)).first;
  return it->second;
}

/// Attributes of a range: the registered name, a colour derived from it (stable across runs, so a
/// phase has the same colour everywhere) and, when >= 0, the step as an int64 payload.
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
  try {
    a.messageType = NVTX_MESSAGE_TYPE_REGISTERED;
    a.message.registered = nvtx_string(name);
  } catch (...) {  // out of memory in the cache: the plain string will do
    a.messageType = NVTX_MESSAGE_TYPE_ASCII;
    a.message.ascii = name;
  }
  if (step >= 0) {
    a.payloadType = NVTX_PAYLOAD_TYPE_INT64;
    a.payload.llValue = step;
  }
  return a;
}

/// Names the calling OS thread in the tool's timeline (e.g. "ckpt flush: write").
inline void nvtx_name_thread(const char* name) noexcept {
  if (nvtx_domain() == nullptr) return;
  nvtxNameOsThreadA(static_cast<std::uint32_t>(::syscall(SYS_gettid)), name);
}

/// The calls of the range tool in use: NVTX here, roctx below; NvtxRange / NvtxSpan use either.
struct RangeTool {
  using Id = nvtxRangeId_t;
  /// Pushes a range on the calling thread; false when no tool listens (nothing to pop).
  static bool push(const char* name, std::int64_t step) noexcept {
    if (nvtx_domain() == nullptr) return false;
    const nvtxEventAttributes_t a = nvtx_attributes(name, step);
    nvtxDomainRangePushEx(nvtx_domain(), &a);
    return true;
  }
  static void pop() noexcept { nvtxDomainRangePop(nvtx_domain()); }
  /// Starts a range that any thread may end; false when no tool listens (nothing to stop).
  static bool start(const char* name, std::int64_t step, Id& id) noexcept {
    if (nvtx_domain() == nullptr) return false;
    const nvtxEventAttributes_t a = nvtx_attributes(name, step);
    id = nvtxDomainRangeStartEx(nvtx_domain(), &a);
    return true;
  }
  static void stop(Id id) noexcept { nvtxDomainRangeEnd(nvtx_domain(), id); }
};

#else  // CKPT_HAVE_ROCTX: a HIP build with roctx

inline void nvtx_name_thread(const char*) noexcept {}  // roctx cannot name threads

/// The message of a roctx range: the name, and the step when >= 0.
inline void roctx_message(char (&buf)[128], const char* name, std::int64_t step) noexcept {
  if (step >= 0)
    std::snprintf(buf, sizeof buf, "%s step=%lld", name, static_cast<long long>(step));
  else
    std::snprintf(buf, sizeof buf, "%s", name);
}

struct RangeTool {
  using Id = roctx_range_id_t;
  static bool push(const char* name, std::int64_t step) noexcept {
    char buf[128];
    roctx_message(buf, name, step);
    return roctxRangePushA(buf) >= 0;
  }
  static void pop() noexcept { (void)roctxRangePop(); }
  static bool start(const char* name, std::int64_t step, Id& id) noexcept {
    char buf[128];
    roctx_message(buf, name, step);
    id = roctxRangeStartA(buf);
    return true;
  }
  static void stop(Id id) noexcept { roctxRangeStop(id); }
};

#endif

/// A range on the calling thread (push/pop, so ranges nest per thread), from construction to end() or
/// destruction, whichever comes first; end() must run on the constructing thread.
class NvtxRange {
 public:
  explicit NvtxRange(const char* name, std::int64_t step = -1) noexcept : m_open(RangeTool::push(name, step)) {}
  explicit NvtxRange(const std::string& name, std::int64_t step = -1) noexcept : NvtxRange(name.c_str(), step) {}
  ~NvtxRange() { end(); }
  NvtxRange(const NvtxRange&) = delete;
  NvtxRange& operator=(const NvtxRange&) = delete;
  void end() noexcept {
    if (m_open) RangeTool::pop();
    m_open = false;
  }

 private:
  bool m_open = false;
};

/// A range that may start on one thread and end on another (a checkpoint from capture to commit).
/// Ends at end() or at destruction, whichever comes first. Movable, so it can travel with a job.
class NvtxSpan {
 public:
  NvtxSpan() = default;
  explicit NvtxSpan(const char* name, std::int64_t step = -1) noexcept : m_open(RangeTool::start(name, step, m_id)) {}
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
    if (m_open) RangeTool::stop(m_id);
    m_open = false;
  }

 private:
  RangeTool::Id m_id = 0;
  bool m_open = false;
};

#else  // neither nvtx3 nor roctx: the same types, doing nothing

inline void nvtx_name_thread(const char*) noexcept {}

class NvtxRange {
 public:
  explicit NvtxRange(const char*, std::int64_t = -1) noexcept {}
  explicit NvtxRange(const std::string&, std::int64_t = -1) noexcept {}
  NvtxRange(const NvtxRange&) = delete;
  NvtxRange& operator=(const NvtxRange&) = delete;
  void end() noexcept {}
};

class NvtxSpan {
 public:
  NvtxSpan() = default;
  explicit NvtxSpan(const char*, std::int64_t = -1) noexcept {}
  void end() noexcept {}
};

#endif  // CKPT_HAVE_NVTX / CKPT_HAVE_ROCTX

}  // namespace ckpt::detail

#endif  // CKPT_GPU_NVTX_HPP
