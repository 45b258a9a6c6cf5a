// The runtime's own trace (option `trace`): spans per rank and thread, written at close() as Chrome
// trace JSON (Perfetto, chrome://tracing) plus a per-run I/O summary. Every span is also an NVTX range
// when the nvtx3 headers were found (gpu/nvtx.hpp), pushed before the event starts and popped after it
// ends. Internal.
#ifndef CKPT_RUNTIME_TRACE_HPP
#define CKPT_RUNTIME_TRACE_HPP

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "gpu/nvtx.hpp"

namespace ckpt::detail {

/// Threads of a Runtime, as trace "tid"s.
enum class TraceThread : int { app = 0, digest = 1, write = 2, commit = 3 };
const char* trace_thread_name(TraceThread t) noexcept;

struct TraceEvent {
  const char* name = "";  ///< static string
  TraceThread thread = TraceThread::app;
  double ts_us = 0, dur_us = 0;
  std::int64_t step = -1;
  std::uint64_t bytes = 0;
};

/// Thread-safe collector. Disabled tracers record nothing (one branch per span).
class Tracer {
 public:
  explicit Tracer(bool enabled) : m_enabled(enabled), m_t0(std::chrono::steady_clock::now()) {}
  bool enabled() const { return m_enabled; }
  /// The origin, in nanoseconds of std::chrono::steady_clock (CLOCK_MONOTONIC on Linux: the clock an
  /// NVTX tool's timestamps can be compared with).
  std::int64_t origin_steady_ns() const {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(m_t0.time_since_epoch()).count();
  }
  /// Microseconds since the tracer's origin.
  double now_us() const {
    return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - m_t0).count();
  }
  void record(const TraceEvent& e) {
    if (!m_enabled) return;
    std::lock_guard<std::mutex> lk(m_mu);
    m_events.push_back(e);
  }
  std::vector<TraceEvent> take() {
    std::lock_guard<std::mutex> lk(m_mu);
    return std::move(m_events);
  }

 private:
  bool m_enabled;
  std::chrono::steady_clock::time_point m_t0;
  std::mutex m_mu;
  std::vector<TraceEvent> m_events;
};

/// A span from construction to destruction (or end()): a trace event and an NVTX range.
class Span {
 public:
  Span(Tracer* t, const char* name, TraceThread thread, std::int64_t step = -1, std::uint64_t bytes = 0)
      : m_t(t != nullptr && t->enabled() ? t : nullptr), m_nvtx(name, step) {
    m_e.name = name;
    m_e.thread = thread;
    m_e.step = step;
    m_e.bytes = bytes;
    if (m_t) m_e.ts_us = m_t->now_us();
  }
  ~Span() { end(); }
  Span(const Span&) = delete;
  Span& operator=(const Span&) = delete;
  /// Ends the trace event, then the NVTX range (so the range encloses the event). On the thread that
  /// made the Span, with every Span made after it on this thread ended already.
  void end() {
    if (m_t) {
      m_e.dur_us = m_t->now_us() - m_e.ts_us;
      m_t->record(m_e);
      m_t = nullptr;
    }
    m_nvtx.end();
  }

 private:
  Tracer* m_t;
  TraceEvent m_e;
  NvtxRange m_nvtx;
};

}  // namespace ckpt::detail

#endif  // CKPT_RUNTIME_TRACE_HPP
