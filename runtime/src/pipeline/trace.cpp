// Writes the trace (Chrome trace JSON) and the per-run I/O summary at close(). Collective.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <iomanip>
#include <sstream>

#include "base/mpi.hpp"
#include "base/posix_io.hpp"
#include "runtime/src/api/runtime_impl.hpp"

namespace ckpt::detail {

const char* trace_thread_name(TraceThread t) noexcept {
  switch (t) {
    case TraceThread::app: return "application";
    case TraceThread::digest: return "flush: digest";
    case TraceThread::write: return "flush: write";
    case TraceThread::commit: return "commit";
  }
  return "?";
}

namespace {

std::string json_string(const std::string& s) {
  std::string o = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\')
      o += '\\', o += c;
    else if (static_cast<unsigned char>(c) < 0x20) {
      char b[8];
      std::snprintf(b, sizeof b, "\\u%04x", c);
      o += b;
    } else
      o += c;
  }
  return o + "\"";
}

/// Gathers variable-length strings on rank 0 (in rank order).
std::vector<std::string> gather_strings(MPI_Comm comm, const std::string& mine) {
  std::vector<std::string> out;
  for (auto& part : gatherv_bytes(comm, std::vector<std::uint8_t>(mine.begin(), mine.end()), 0))
    out.emplace_back(part.begin(), part.end());
  return out;
}

}  // namespace

void RuntimeImpl::write_trace_and_summary() {
  // ---- trace: every rank's events, one process per rank, one thread per pipeline thread ----
  // First the rank's clock origin (steady_clock ns, metadata that viewers ignore), so that `ts` can be
  // put on one time axis with an NVTX capture of the same run (tools/ckpt_report.py --nvtx).
  std::ostringstream ev;
  ev << std::fixed << std::setprecision(3);  // ns resolution (the default 6 digits lose 10 us after 1 s)
  ev << "{\"name\":\"ckpt_clock\",\"ph\":\"M\",\"pid\":" << m_rank
     << ",\"args\":{\"steady_origin_ns\":" << m_tracer->origin_steady_ns() << "}}";
  for (const TraceEvent& e : m_tracer->take()) {
    ev << ",\n{\"name\":" << json_string(e.name) << ",\"cat\":\"ckpt\",\"ph\":\"X\",\"pid\":" << m_rank
       << ",\"tid\":" << static_cast<int>(e.thread) << ",\"ts\":" << e.ts_us << ",\"dur\":" << e.dur_us
       << ",\"args\":{\"step\":" << e.step << ",\"bytes\":" << e.bytes << "}}";
  }
  auto parts = gather_strings(m_app_comm, ev.str());

  // ---- summary: per checkpoint, figures over ranks ----
  const std::vector<CheckpointRecord> hist = m_committer->history();
  const std::size_t n = hist.size();
  std::vector<double> mine(n * 4);
  for (std::size_t i = 0; i < n; ++i) {
    mine[i * 4 + 0] = static_cast<double>(hist[i].stats.bytes);
    mine[i * 4 + 1] = hist[i].stats.blocked_s;
    mine[i * 4 + 2] = hist[i].stats.durable_s;
    mine[i * 4 + 3] = hist[i].stats.committed_s;
  }
  // Variable lengths: a rank whose history is shorter (a job that failed before its commit) must not
  // make the gather's counts differ (MPI_Gather with unequal counts truncates on rank 0).
  const auto* mb = reinterpret_cast<const std::uint8_t*>(mine.data());
  const auto got = gatherv_bytes(m_app_comm, std::vector<std::uint8_t>(mb, mb + mine.size() * sizeof(double)), 0);
  if (m_rank != 0) return;
  std::vector<double> all(n * 4 * static_cast<std::size_t>(m_size), 0.0);  // rank-major, rank 0's history
  for (int r = 0; r < m_size; ++r) {
    const auto& g = got[static_cast<std::size_t>(r)];
    std::memcpy(&all[static_cast<std::size_t>(r) * n * 4], g.data(), std::min(g.size(), n * 4 * sizeof(double)));
  }

  Status s = make_dirs(m_opts.trace);
  std::string trace = "{\"displayTimeUnit\":\"ms\",\"traceEvents\":[\n";
  bool any = false;
  for (int r = 0; r < m_size; ++r) {
    trace += std::string(any ? ",\n" : "") + "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":" + std::to_string(r) +
             ",\"args\":{\"name\":\"rank " + std::to_string(r) + "\"}}";
    any = true;
    for (int t = 0; t < 4; ++t)
      trace += ",\n{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":" + std::to_string(r) +
               ",\"tid\":" + std::to_string(t) +
               ",\"args\":{\"name\":" + json_string(trace_thread_name(static_cast<TraceThread>(t))) + "}}";
    if (!parts[static_cast<std::size_t>(r)].empty()) trace += ",\n" + parts[static_cast<std::size_t>(r)];
  }
  trace += "\n]}\n";
  if (s.ok()) s = write_file(m_opts.trace + "/trace.json", trace.data(), trace.size(), false);

  std::ostringstream js, table;
  js << "{\n  \"ranks\": " << m_size << ",\n  \"transport\": " << json_string(m_committer->transport_names())
     << ",\n  \"options\": " << json_string(m_cfg.describe())  // rank 0's resolved options (YAML)
     << ",\n  \"checkpoints\": [";
  char line[512];
  std::snprintf(line, sizeof line, "%8s %10s %12s %12s %11s %11s %12s %10s %6s %5s\n", "step", "MiB", "blocked max",
                "blocked mean", "durable", "committed", "perceived", "raw", "slow", "files");
  table << "ckpt I/O summary (" << m_size << " ranks, " << m_committer->transport_names() << "; seconds, GB/s)\n"
        << line;
  double sum_blocked = 0, sum_bytes = 0;
  for (std::size_t i = 0; i < n; ++i) {
    double bytes = 0, bmax = 0, bsum = 0, dmax = 0, cmax = 0;
    int slow = 0;
    for (int r = 0; r < m_size; ++r) {
      const double* v = &all[(static_cast<std::size_t>(r) * n + i) * 4];
      bytes += v[0];
      bsum += v[1];
      bmax = std::max(bmax, v[1]);
      if (v[2] > dmax) dmax = v[2], slow = r;
      cmax = std::max(cmax, v[3]);
    }
    const double perceived = bmax > 0 ? bytes / bmax / 1e9 : 0, raw = cmax > 0 ? bytes / cmax / 1e9 : 0;
    sum_blocked += bmax;
    sum_bytes += bytes;
    js << (i ? "," : "") << "\n    {\"step\": " << hist[i].stats.step << ", \"ok\": " << (hist[i].ok ? "true" : "false")
       << ", \"bytes\": " << static_cast<std::uint64_t>(bytes) << ", \"blocked_max_s\": " << bmax
       << ", \"blocked_mean_s\": " << bsum / m_size << ", \"durable_max_s\": " << dmax << ", \"committed_s\": " << cmax
       << ", \"perceived_GBps\": " << perceived << ", \"raw_GBps\": " << raw << ", \"slowest_rank\": " << slow
       << ", \"files\": " << hist[i].files << ", \"attributes\": {";
    for (std::size_t a = 0; a < hist[i].attrs.size(); ++a)
      js << (a ? ", " : "") << json_string(hist[i].attrs[a].first) << ": " << json_string(hist[i].attrs[a].second);
    js << "}}";
    std::snprintf(line, sizeof line, "%8lld %10.1f %12.4f %12.4f %11.4f %11.4f %12.3f %10.3f %6d %5d\n",
                  static_cast<long long>(hist[i].stats.step), bytes / (1 << 20), bmax, bsum / m_size, dmax, cmax,
                  perceived, raw, slow, hist[i].files);
    if (i < 20 || i + 5 >= n)
      table << line;
    else if (i == 20)
      table << "     ...\n";
  }
  js << "\n  ],\n  \"total_bytes\": " << static_cast<std::uint64_t>(sum_bytes)
     << ",\n  \"total_blocked_s\": " << sum_blocked << "\n}\n";
  table << "checkpoints: " << n << ", bytes: " << static_cast<std::uint64_t>(sum_bytes)
        << ", blocked (sum of max): " << sum_blocked << " s; trace: " << m_opts.trace << "/trace.json\n";
  const std::string summary = js.str();
  if (s.ok()) s = write_file(m_opts.trace + "/summary.json", summary.data(), summary.size(), false);
  if (!s.ok()) std::fprintf(stderr, "ckpt: trace: %s\n", s.to_string().c_str());
  std::fprintf(stderr, "%s", table.str().c_str());
}

}  // namespace ckpt::detail
