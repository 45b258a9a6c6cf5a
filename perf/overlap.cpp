// perf/overlap: does an asynchronous checkpoint hide behind the application's computation?
// The same compute loop runs in every mode: a 2-D 5-point Jacobi sweep over --fields fields (each a
// ping-pong pair of arrays; all arrays together hold --bytes per rank, rows of a global 2-D array
// split over the ranks), repeated to take about --step-ms per step (calibrated at start), with an
// MPI_Allreduce of the residual at the end of every step (a convergence check; keeps ranks in step).
// After steps every, 2*every, ... < --steps it checkpoints every array, so each checkpoint has
// `every` steps to hide behind. Modes:
//   none       no checkpoint at all
//   null       ckpt, null transport (capture + checksums, nothing written); wait() before the next one
//   async      ckpt, posix: checkpoint(), keep computing, wait() only before the next checkpoint
//   sync       ckpt, posix: wait() right after checkpoint() (a synchronous checkpoint)
//   hdf5-sync  ckpt, hdf5-sync transport (collective H5Dwrite inside checkpoint()); wait() right after
// Loop time includes the final wait(); the Runtime, protect() and one warm-up checkpoint (allocating
// the staging pool) are outside it. blocked = time the compute thread spent inside checkpoint() and
// wait(). The flush threads run on the same cores as the compute (2 cores here), so asynchronous
// checkpoints also slow the steps they overlap: the table shows the median step time while a flush is
// in flight against the quiet steps. Each repetition runs every mode in turn; medians over --reps.
// The kernel is a plain loop: the Kokkos found here has only its Serial backend, which is the same.
//
//   mpiexec -n 4 build/perf/overlap --bytes 64M --step-ms 50 --every 5 --steps 40 --reps 3 --csv results/overlap.csv
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "bench_util.hpp"
#include "ckpt/ckpt.hpp"

using namespace ckpt::bench;  // since, median, max_over_ranks, ...

namespace {

[[noreturn]] void die(const std::string& what, const ckpt::Status& s) {
  std::fprintf(stderr, "overlap: %s: %s\n", what.c_str(), s.to_string().c_str());
  MPI_Abort(MPI_COMM_WORLD, 1);
  std::abort();
}

struct Config {
  std::uint64_t bytes = 64ull << 20;
  int fields = 2, every = 5, steps = 40, reps = 3;
  double step_ms = 50;
  std::string dir = "/tmp/ckpt-overlap", csv;
  std::vector<std::string> modes = {"none", "null", "async", "sync", "hdf5-sync"};
};

/// The application: `fields` ping-pong pairs of ny x nx doubles, swept with a 5-point stencil.
class Stencil {
 public:
  Stencil(const Config& c, int rank) {
    const std::uint64_t per_array = c.bytes / sizeof(double) / (2 * static_cast<std::uint64_t>(c.fields));
    m_nx = std::max<std::uint64_t>(3, static_cast<std::uint64_t>(std::sqrt(static_cast<double>(per_array))));
    m_ny = std::max<std::uint64_t>(3, per_array / m_nx);
    m_fields.resize(static_cast<std::size_t>(c.fields));
    for (auto& f : m_fields) {
      for (auto& a : f.buf) a.resize(m_nx * m_ny);
      for (std::uint64_t i = 0; i < m_nx * m_ny; ++i)  // fixed boundary 1 on the first row, noise inside
        f.buf[0][i] = f.buf[1][i] = i < m_nx ? 1.0 : static_cast<double>((i * 2654435761u + rank) % 1000) * 1e-3;
    }
  }
  /// One sweep of every field; returns the sum of squared updates.
  double sweep() {
    double r = 0;
    for (auto& f : m_fields) {
      const double* in = f.buf[f.cur].data();
      double* out = f.buf[1 - f.cur].data();
      for (std::uint64_t i = 1; i + 1 < m_ny; ++i)
        for (std::uint64_t j = 1; j + 1 < m_nx; ++j) {
          const std::uint64_t k = i * m_nx + j;
          const double v = 0.25 * (in[k - m_nx] + in[k + m_nx] + in[k - 1] + in[k + 1]);
          r += (v - in[k]) * (v - in[k]);
          out[k] = v;
        }
      f.cur = 1 - f.cur;
    }
    return r;
  }
  /// `sweeps` sweeps and the global residual (the step's only communication).
  double step(int sweeps) {
    double r = 0, global = 0;
    for (int s = 0; s < sweeps; ++s) r = sweep();
    MPI_Allreduce(&r, &global, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    return global;
  }
  /// Registers both arrays of every field as this rank's rows of a global 2-D array.
  void protect(ckpt::Runtime& rt) {
    const std::uint64_t p = static_cast<std::uint64_t>(rt.size()), r = static_cast<std::uint64_t>(rt.rank());
    for (std::size_t k = 0; k < m_fields.size(); ++k)
      for (int b = 0; b < 2; ++b) {
        ckpt::Status s = rt.protect("f" + std::to_string(k) + "/" + std::to_string(b), m_fields[k].buf[b].data(),
                                    ckpt::DType::f64, ckpt::Block{{m_ny * p, m_nx}, {m_ny * r, 0}, {m_ny, m_nx}});
        if (!s.ok()) die("protect", s);
      }
  }
  std::uint64_t bytes() const { return m_fields.size() * 2 * m_nx * m_ny * sizeof(double); }

 private:
  struct Field {
    std::vector<double> buf[2];
    int cur = 0;
  };
  std::uint64_t m_nx = 0, m_ny = 0;
  std::vector<Field> m_fields;
};

/// Seconds per sweep on the slowest rank; a step is round(step_ms / sweep) sweeps, at least one.
double calibrate(Stencil& st) {
  st.sweep();  // first touch
  MPI_Barrier(MPI_COMM_WORLD);
  auto t = Clock::now();
  int probe = 0;
  while (probe < 3 || since(t) < 0.5) {  // long enough to average out a scheduler hiccup
    st.sweep();
    ++probe;
  }
  return max_over_ranks(since(t) / probe);
}

/// What one run of the loop in one mode measured on this rank.
struct Run {
  double loop_s = 0, call_s = 0, wait_s = 0;
  int checkpoints = 0;
  std::vector<double> quiet_steps, flush_steps;  // seconds per step
  double blocked_s() const { return call_s + wait_s; }
};

std::unique_ptr<ckpt::Runtime> make_runtime(const std::string& mode, const Config& c, Stencil& st) {
  ckpt::Options o;  // defaults + CKPT_* variables; the transport is the mode's
  if (!o.error.ok()) die("options", o.error);
  o.transport = mode == "null" ? "null" : mode == "hdf5-sync" ? "hdf5-sync" : "posix";
  o.dir = c.dir + "/" + mode;
  o.keep = 1;
  auto rt = std::make_unique<ckpt::Runtime>(MPI_COMM_WORLD, o);
  if (!rt->status().ok()) return rt;
  st.protect(*rt);
  if (ckpt::Status s = rt->checkpoint(0).wait(); !s.ok()) die("warm-up checkpoint (" + mode + ")", s);
  return rt;
}

/// Waits for `t` (an empty ticket returns at once) and adds the time to `r.wait_s`.
void wait_for(ckpt::Ticket& t, Run& r) {
  if (t.step() < 0) return;
  auto w = Clock::now();
  if (ckpt::Status s = t.wait(); !s.ok()) die("checkpoint " + std::to_string(t.step()), s);
  r.wait_s += since(w);
  t = ckpt::Ticket();
}

Run run_loop(const std::string& mode, const Config& c, Stencil& st, int sweeps, ckpt::Runtime* rt) {
  const bool synchronous = mode == "sync" || mode == "hdf5-sync";
  Run r;
  ckpt::Ticket pending;
  MPI_Barrier(MPI_COMM_WORLD);
  const auto t0 = Clock::now();
  for (int step = 1; step <= c.steps; ++step) {
    const bool flushing = !pending.done();
    const auto ts = Clock::now();
    st.step(sweeps);
    (flushing ? r.flush_steps : r.quiet_steps).push_back(since(ts));
    if (rt == nullptr || step % c.every != 0 || step >= c.steps) continue;
    wait_for(pending, r);  // max_in_flight = 1: the previous one must be done first
    const auto tc = Clock::now();
    pending = rt->checkpoint(step);
    r.call_s += since(tc);
    ++r.checkpoints;
    if (synchronous) wait_for(pending, r);
  }
  wait_for(pending, r);
  r.loop_s = since(t0);
  return r;
}

/// Per repetition of one mode: loop, blocked, call, wait (max over ranks); steps (rank 0, pooled).
struct Summary {
  std::vector<double> loop, blocked, call, wait, quiet, flush;
  int checkpoints = 0;
};

void write_csv_row(std::FILE* csv, const std::string& mode, int ranks, const Config& c, std::uint64_t bytes, int rep,
                   const Summary& s, const Run& r) {
  if (!csv) return;
  std::fprintf(csv, "%s,%d,%llu,%d,%d,%d,%.6f,%.6f,%.6f,%.6f,%d,%.6f,%.6f,%zu\n", mode.c_str(), ranks,
               static_cast<unsigned long long>(bytes), c.every, c.steps, rep, s.loop.back(), s.blocked.back(),
               s.call.back(), s.wait.back(), r.checkpoints, median(r.quiet_steps) * 1e3, median(r.flush_steps) * 1e3,
               r.flush_steps.size());
  std::fflush(csv);
}

void print_table(const Config& c, const std::vector<Summary>& sums, int ranks, std::uint64_t bytes) {
  const std::vector<std::string>& modes = c.modes;
  auto loop_of = [&](const std::string& m) {
    for (std::size_t i = 0; i < modes.size(); ++i)
      if (modes[i] == m && !sums[i].loop.empty()) return median(sums[i].loop);
    return 0.0;
  };
  const double none = loop_of("none"), null = loop_of("null");
  auto pct = [](double x, double base) {  // "-" when the base mode was not run
    char buf[16] = "       -";
    if (base > 0) std::snprintf(buf, sizeof buf, "%7.1f%%", 100.0 * (x - base) / base);
    return std::string(buf);
  };
  std::printf("%-9s %5s %8s %5s %5s %5s | %8s %8s %8s | %12s %10s %10s | %9s %9s %5s\n", "mode", "ranks", "MiB/rank",
              "every", "steps", "ckpts", "loop s", "vs none", "vs null", "blocked/ckpt", "ckpt() ms", "wait() ms",
              "quiet ms", "flush ms", "n");
  for (std::size_t i = 0; i < modes.size(); ++i) {
    const Summary& s = sums[i];
    if (s.loop.empty()) continue;
    const double loop = median(s.loop), per_ckpt = s.checkpoints > 0 ? 1e3 / s.checkpoints : 0.0;
    std::printf("%-9s %5d %8.1f %5d %5d %5d | %8.3f %8s %8s | %9.2f ms %10.2f %10.2f | %9.2f %9.2f %5zu\n",
                modes[i].c_str(), ranks, static_cast<double>(bytes) / (1 << 20), c.every, c.steps, s.checkpoints, loop,
                pct(loop, none).c_str(), pct(loop, null).c_str(), median(s.blocked) * per_ckpt,
                median(s.call) * per_ckpt, median(s.wait) * per_ckpt, median(s.quiet) * 1e3, median(s.flush) * 1e3,
                s.flush.size());
  }
}

Config parse(int argc, char** argv) {
  Config c;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i], v = argv[i + 1];
    if (k == "--bytes")
      c.bytes = ckpt::parse_bytes(v).value();
    else if (k == "--fields")
      c.fields = std::stoi(v);
    else if (k == "--step-ms")
      c.step_ms = std::stod(v);
    else if (k == "--every")
      c.every = std::stoi(v);
    else if (k == "--steps")
      c.steps = std::stoi(v);
    else if (k == "--reps")
      c.reps = std::stoi(v);
    else if (k == "--dir")
      c.dir = v;
    else if (k == "--csv")
      c.csv = v;
    else if (k == "--modes") {
      c.modes.clear();
      for (std::size_t p = 0; p <= v.size();) {
        std::size_t e = std::min(v.find(',', p), v.size());
        c.modes.push_back(v.substr(p, e - p));
        p = e + 1;
      }
      for (const std::string& m : c.modes)
        if (m != "none" && m != "null" && m != "async" && m != "sync" && m != "hdf5-sync") {
          std::fprintf(stderr, "overlap: unknown mode %s (none, null, async, sync, hdf5-sync)\n", m.c_str());
          MPI_Abort(MPI_COMM_WORLD, 2);
        }
    } else {
      std::fprintf(stderr, "overlap: unknown option %s\n", k.c_str());
      MPI_Abort(MPI_COMM_WORLD, 2);
    }
  }
  return c;
}

}  // namespace

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const Config c = parse(argc, argv);
  Stencil st(c, rank);
  const double sweep_s = calibrate(st);
  const int sweeps = std::max(1, static_cast<int>(std::lround(c.step_ms * 1e-3 / sweep_s)));
  std::FILE* csv = rank == 0 && !c.csv.empty() ? std::fopen(c.csv.c_str(), "w") : nullptr;
  if (csv)
    std::fprintf(csv,
                 "mode,ranks,bytes_per_rank,every,steps,rep,loop_s,blocked_total_s,checkpoint_call_s,wait_s,"
                 "checkpoints,step_quiet_ms,step_flush_ms,flush_steps\n");
  if (rank == 0)
    std::printf(
        "# %d ranks, %.1f MiB per rank in %d fields x 2 arrays; a sweep takes %.1f ms, a step is %d sweeps "
        "(--step-ms %.0f)\n",
        size, static_cast<double>(st.bytes()) / (1 << 20), c.fields, sweep_s * 1e3, sweeps, c.step_ms);
  std::vector<Summary> sums(c.modes.size());
  for (int rep = 0; rep < c.reps; ++rep)
    for (std::size_t m = 0; m < c.modes.size(); ++m) {
      const std::string& mode = c.modes[m];
      std::unique_ptr<ckpt::Runtime> rt;
      if (mode != "none") {
        rt = make_runtime(mode, c, st);
        if (!rt->status().ok()) {  // e.g. hdf5-sync in a build without HDF5: the same on every rank
          if (rank == 0 && rep == 0)
            std::fprintf(stderr, "overlap: skipping %s: %s\n", mode.c_str(), rt->status().to_string().c_str());
          continue;
        }
      }
      const Run r = run_loop(mode, c, st, sweeps, rt.get());
      Summary& s = sums[m];
      s.loop.push_back(max_over_ranks(r.loop_s));
      s.blocked.push_back(max_over_ranks(r.blocked_s()));
      s.call.push_back(max_over_ranks(r.call_s));
      s.wait.push_back(max_over_ranks(r.wait_s));
      s.checkpoints = r.checkpoints;
      s.quiet.insert(s.quiet.end(), r.quiet_steps.begin(), r.quiet_steps.end());
      s.flush.insert(s.flush.end(), r.flush_steps.begin(), r.flush_steps.end());
      write_csv_row(csv, mode, size, c, st.bytes(), rep, s, r);
      if (rank == 0)
        std::fprintf(stderr, "[overlap] rep %d %-9s loop %.3f s, blocked %.3f s\n", rep, mode.c_str(), s.loop.back(),
                     s.blocked.back());
    }
  if (rank == 0) print_table(c, sums, size, st.bytes());
  if (csv) std::fclose(csv);
  MPI_Barrier(MPI_COMM_WORLD);
  if (rank == 0)
    for (const std::string& mode : c.modes) std::filesystem::remove_all(c.dir + "/" + mode);
  MPI_Finalize();
  return 0;
}
