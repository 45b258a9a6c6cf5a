// perf/finegrain: the seed-000 loop (issue 15) - a checkpoint after every step of a short compute.
// P ranks; each step is a memory-bound computation of about --compute-ms (a triad over a work array,
// calibrated at start) that also changes the state, then a checkpoint of the state (--bytes per rank,
// f64). A run is --steps such steps and ends when the last checkpoint is durable ("durable at the
// end"). Modes, interleaved round by round (all modes, all modes, ...; round 0 is a warm-up), medians
// over --reps rounds of the maxima over ranks:
//
//  none                  the loop without I/O: the baseline every other mode is divided by
//  memcpy                the loop with a plain memcpy of the state into one of two pre-touched buffers
//                        after every step (alternately): the copy a checkpoint cannot avoid, in the same
//                        place (after a step that streamed the work array through the caches). Its
//                        median copy is the bound "blocked <= 1.5 memcpy + 50 us" is judged against;
//                        the memcpy of the header line (21 copies in a row, cache-hot) is shown beside it
//  ckpt-<busy>-<sync>    a ckpt Runtime (posix transport, keep 2) checkpointing every step, with
//                        on_busy = wait | coalesce and fsync on ("fsync") or off ("nofsync"); the run
//                        ends with wait_all() (every checkpoint committed; with fsync on, durable)
//  ckpt-<busy>-null      the same pipeline with the null transport (nothing written): ckpt's own cost
//  series-<busy>-<sync>  layout series (every checkpoint appended to per-rank segment files opened
//                        once, committed by a record in the step log), keep 1000000: every step
//                        written is kept, as ADIOS2 keeps every step. A fresh Runtime per round in an
//                        empty directory (made before the timed loop, like the directory modes'; the
//                        first checkpoint's segment and file creation are timed), removed after the
//                        round (untimed). <sync>: fsync (every commit fsynced before its ticket
//                        completes), nofsync, or end ("durable at the end": fsync on with
//                        durable_every_ms = 1 day, and the timed run ends with close(), which syncs
//                        what is left - ADIOS2's Close + fsync)
//  adios2-bp5            ADIOS2 BP5, one output per rank opened once, BeginStep/Put/EndStep after
//                        every step (every step kept), Close and an fsync of its files at the end
//  adios2-bp5-async      the same with BP5's AsyncWrite=true
//
// The ADIOS2 here is the PyPI wheel (pip install adios2), a serial build without MPI, as in
// perf/peers: each rank writes its slice (global shape, own offset) to <dir>/<mode>/out.bp.<rank>.
// Reported per mode: run time (s) and its ratio to none, and the median time the application was
// blocked per checkpoint (ckpt: Ticket stats blocked_s; ADIOS2: BeginStep..EndStep) next to a memcpy
// of the same bytes measured in the same run, and how many checkpoints were written (coalesce
// supersedes some; the last one is always written); "x none" is the median over rounds of the round's
// run time over the same round's none; per ckpt mode also the time blocked in the
// Runtime's first checkpoint (in the warm-up round, the maximum over ranks) and the size of the staging
// pool (rank 0). "bg cpu us/ckpt": the CPU time of the process's threads other than the application's
// (ckpt's, ADIOS2's, MPI's) beyond none's, per checkpoint and rank (median over rounds) - what ckpt
// takes from the compute when the ranks fill the cores (the kernel's own flusher threads not counted). Other ckpt
// options come from CKPT_* variables (transport, fsync, on_busy and dir are set here).
//
//   mpiexec -n 2 build/perf/finegrain --bytes 1M --steps 100 --compute-ms 4 --reps 3
//       --dir /tmp/ckpt-finegrain --csv results/finegrain_1M.csv  (one line)
#include <dirent.h>
#include <fcntl.h>
#include <mpi.h>
#include <sys/resource.h>
#include <unistd.h>

#ifdef CKPT_HAVE_ADIOS2
#include <adios2.h>
#endif

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "bench_util.hpp"
#include "ckpt/ckpt.hpp"

using namespace ckpt::bench;

namespace {

[[noreturn]] void fail(const std::string& what) { abort_job("finegrain", what); }

struct Args {
  std::uint64_t bytes = 1ull << 20;
  int steps = 100, reps = 3;
  double compute_ms = 4;
  std::string dir = "/tmp/ckpt-finegrain", csv, only;
};

Args parse_args(int argc, char** argv) {
  Args a;
  parse_options(
      argc, argv, "--bytes, --steps, --reps, --compute-ms, --dir, --csv, --modes",
      [&](const std::string& k, const std::string& v) {
        if (k == "--bytes")
          a.bytes = f64_bytes_option(k, v, fail);
        else if (k == "--steps")
          a.steps = positive_option(k, v, fail);
        else if (k == "--reps")
          a.reps = positive_option(k, v, fail);
        else if (k == "--compute-ms") {
          a.compute_ms = std::atof(v.c_str());
          if (!(a.compute_ms > 0)) fail("--compute-ms must be positive");
        } else if (k == "--dir")
          a.dir = v;
        else if (k == "--csv")
          a.csv = v;
        else if (k == "--modes")
          a.only = v;
        else
          return false;
        return true;
      },
      fail);
  return a;
}

/// The application: its checkpointed state and a work array the compute streams over.
/// Memory-bound means from memory: each step's window follows the previous one through a work array
/// much larger than the last-level cache (256 MiB per rank), so no step finds its data in the cache
/// whatever else ran in between. (A fixed window of a few MiB per rank stayed partly in the L3: the
/// baseline then ran faster than calibrated, and any copy that evicted the window - a checkpoint's or
/// a plain memcpy's - slowed the compute by 10-30%, more than the copy itself took.)
struct App {
  std::vector<double> state, work;
  std::size_t work_n = 0;   ///< elements of `work` one step streams over (calibrated)
  std::size_t work_at = 0;  ///< where the next step's window starts
  std::uint64_t start = 0, global = 0;

  /// One step: a triad over the next work_n elements of `work` (memory-bound) and a change of every
  /// page of the state. Not inlined: every mode runs the same machine code (inlined into each mode's
  /// loop, the compiler made `none`'s copy of it ~17% faster than the others', and a mode that only
  /// read the clock after each step came out at 1.17x none).
  __attribute__((noinline)) void step(std::int64_t s) {
    if (work_at + work_n > work.size()) work_at = 0;
    double* w = work.data() + work_at;
    work_at += work_n;
    const double a = 1.0000001, b = 1e-9 * static_cast<double>(s);
    for (std::size_t i = 0; i < work_n; ++i) w[i] = a * w[i] + b;
    for (std::size_t i = 0; i < state.size(); i += 512) state[i] = static_cast<double>(s);
  }
};

/// The fastest of `runs` steps after `skip` untimed ones, timed from a barrier: no rank measures while
/// another still first-touches its arrays.
double fastest_step(App& app, int skip, int runs) {
  MPI_Barrier(MPI_COMM_WORLD);
  double best = 0;
  for (int i = 0; i < skip + runs; ++i) {
    const auto t0 = Clock::now();
    app.step(0);
    const double t = since(t0);
    if (i >= skip && (i == skip || t < best)) best = t;
  }
  return best;
}

/// work_n = the smallest `n` of the ranks (the slowest rank's choice), at most the whole array.
void agree_work_n(App& app, double n) {
  std::uint64_t mine = static_cast<std::uint64_t>(n), agreed = 0;
  MPI_Allreduce(&mine, &agreed, 1, MPI_UINT64_T, MPI_MIN, MPI_COMM_WORLD);
  app.work_n = static_cast<std::size_t>(std::min<std::uint64_t>(agreed, app.work.size()));
}

/// Sizes the compute so that one step takes about `ms` on every rank (the slowest rank's choice). The
/// fastest of 15 full steps (after 3 untimed ones) sets the pace: a step slowed by another process
/// (a busy machine) must not shrink the compute of every later step.
void calibrate(App& app, double ms) {
  app.work_n = app.work.size() / 8;  // 32 MiB windows, each one out of the cache as in the run
  agree_work_n(app, static_cast<double>(app.work_n) * ms * 1e-3 / fastest_step(app, 3, 15));
  // The time per element depends on the window's size (prefetch, TLB, both ranks streaming at once):
  // steps of the chosen size correct it once, again from the fastest.
  agree_work_n(app, static_cast<double>(app.work_n) * ms * 1e-3 / fastest_step(app, 2, 8));
}

/// CPU time (user + system) the process's other threads have used so far: every thread but the calling
/// (application) one - ckpt's, ADIOS2's, MPI's progress thread - including threads that have ended.
/// The application thread's own time is left out: a memory-bound compute's CPU time varies with the
/// memory traffic beside it by more than the threads' whole cost.
double background_cpu_seconds() {
  rusage all{}, self{};
  getrusage(RUSAGE_SELF, &all);
  getrusage(RUSAGE_THREAD, &self);
  auto s = [](const timeval& t) { return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_usec) * 1e-6; };
  return s(all.ru_utime) + s(all.ru_stime) - s(self.ru_utime) - s(self.ru_stime);
}

/// One run of one mode on this rank.
struct Sample {
  double run_s = 0;      ///< barrier .. the last checkpoint durable
  double blocked_s = 0;  ///< median time blocked per checkpoint
  int kept = 0;          ///< checkpoints written (not superseded; ADIOS2: all)
  double cpu_s = 0;      ///< CPU time of the background threads in the timed run (summed over ranks)
};

/// A mode: per run, `run(round)` does the whole loop and returns this rank's sample.
struct Mode {
  std::string name;
  std::function<Sample(int round)> run;
  std::vector<Sample> rounds;  ///< maxima over ranks, warm-up excluded
};

// ---- none -------------------------------------------------------------------------------------------

Sample run_none(App& app, int steps) {
  MPI_Barrier(MPI_COMM_WORLD);
  const double c0 = background_cpu_seconds();
  const auto t0 = Clock::now();
  for (int s = 0; s < steps; ++s) app.step(s);
  return {since(t0), 0, 0, background_cpu_seconds() - c0};
}

// ---- memcpy: the copy a checkpoint cannot avoid ---------------------------------------------------

Sample run_memcpy(App& app, std::vector<double> (&spare)[2], int steps) {
  std::vector<double> copy;
  copy.reserve(static_cast<std::size_t>(steps));
  MPI_Barrier(MPI_COMM_WORLD);
  const double c0 = background_cpu_seconds();
  const auto t0 = Clock::now();
  for (int s = 0; s < steps; ++s) {
    app.step(s);
    const auto tc = Clock::now();
    std::memcpy(spare[s % 2].data(), app.state.data(), app.state.size() * sizeof(double));
    copy.push_back(since(tc));
  }
  return {since(t0), median(copy), 0, background_cpu_seconds() - c0};
}

// ---- ckpt -------------------------------------------------------------------------------------------

struct CkptMode {
  ckpt::Options options;     ///< what make_runtime() gets
  bool per_round = false;    ///< a fresh Runtime in an empty directory every round (series)
  bool close_timed = false;  ///< the timed run ends with close() (durable at the end)
  std::unique_ptr<ckpt::Runtime> rt;
  std::int64_t next_step = 0;
  bool first_done = false;
  double first_s = 0;         ///< blocked time of the Runtime's first checkpoint (warm-up round)
  std::uint64_t staging = 0;  ///< staging pool bytes at the last checkpoint
};

std::unique_ptr<ckpt::Runtime> make_runtime(const ckpt::Options& o, App& app) {
  auto rt = std::make_unique<ckpt::Runtime>(MPI_COMM_WORLD, o);
  if (!rt->status().ok()) fail("ckpt: " + rt->status().to_string());
  ckpt::Status st = rt->protect("state", app.state.data(), ckpt::DType::f64,
                                ckpt::Block{{app.global}, {app.start}, {app.state.size()}});
  if (!st.ok()) fail("ckpt protect: " + st.to_string());
  return rt;
}

/// Removes a per-round mode's directory (rank 0, untimed) and makes it again, empty.
void fresh_dir(const std::string& dir) {
  MPI_Barrier(MPI_COMM_WORLD);
  if (world_rank() == 0) {
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
    if (const std::string e = make_dir(dir); !e.empty()) fail(e);
  }
  MPI_Barrier(MPI_COMM_WORLD);
}

Sample run_ckpt(App& app, CkptMode& m, int steps) {
  std::vector<ckpt::Ticket> tickets;
  tickets.reserve(static_cast<std::size_t>(steps));
  if (m.per_round) {
    fresh_dir(m.options.dir);
    m.rt = make_runtime(m.options, app);
    m.next_step = 0;
  }
  const bool first = !m.first_done;
  m.first_done = true;
  MPI_Barrier(MPI_COMM_WORLD);
  const double c0 = background_cpu_seconds();
  const auto t0 = Clock::now();
  for (int s = 0; s < steps; ++s) {
    app.step(s);
    tickets.push_back(m.rt->checkpoint(m.next_step++));
  }
  ckpt::Status all = m.rt->wait_all();
  if (all.ok() && m.close_timed) all = m.rt->close();
  Sample out;
  out.run_s = since(t0);
  out.cpu_s = background_cpu_seconds() - c0;
  if (!all.ok()) fail("ckpt: " + all.to_string());
  std::vector<double> blocked;
  int superseded = 0;
  for (auto& t : tickets) {
    ckpt::Status s = t.wait();
    if (s.failed()) fail("ckpt checkpoint " + std::to_string(t.step()) + ": " + s.to_string());
    blocked.push_back(t.stats().blocked_s);
    superseded += s.code() == ckpt::Code::superseded ? 1 : 0;
  }
  out.blocked_s = median(blocked);
  out.kept = steps - superseded;
  if (first) m.first_s = max_over_ranks(blocked.front());
  m.staging = tickets.back().stats().staging_bytes;
  if (m.per_round) {  // untimed: the directory goes, with every step of the round
    tickets.clear();
    ckpt::Status s = m.rt->close();
    if (!s.ok()) fail("ckpt close: " + s.to_string());
    m.rt.reset();
    fresh_dir(m.options.dir);
  }
  return out;
}

// ---- ADIOS2 -----------------------------------------------------------------------------------------

#ifdef CKPT_HAVE_ADIOS2

class Adios2Mode {
 public:
  Adios2Mode(App& app, bool async) : m_app(app), m_io(m_adios.DeclareIO(async ? "async" : "sync")) {
    m_io.SetEngine("BP5");
    if (async) m_io.SetParameter("AsyncWrite", "true");
    m_var = m_io.DefineVariable<double>("state", {app.global}, {app.start}, {app.state.size()}, adios2::ConstantDims);
  }
  Sample run(const std::string& dir, int steps) {
    const std::string path = dir + "/out.bp." + std::to_string(world_rank());
    std::vector<double> blocked;
    MPI_Barrier(MPI_COMM_WORLD);
    const double c0 = background_cpu_seconds();
    const auto t0 = Clock::now();
    adios2::Engine e = m_io.Open(path, adios2::Mode::Write);
    for (int s = 0; s < steps; ++s) {
      m_app.step(s);
      const auto tb = Clock::now();
      e.BeginStep();
      e.Put(m_var, m_app.state.data(), adios2::Mode::Deferred);
      e.EndStep();
      blocked.push_back(since(tb));
    }
    e.Close();
    if (const std::string bad = fsync_tree(path); !bad.empty()) fail("fsync " + bad + " failed");
    Sample out{since(t0), median(blocked), steps, background_cpu_seconds() - c0};
    std::filesystem::remove_all(path);  // untimed
    return out;
  }

 private:
  App& m_app;
  adios2::ADIOS m_adios;
  adios2::IO m_io;
  adios2::Variable<double> m_var;
};
#endif

// ---- driver -----------------------------------------------------------------------------------------

Sample worst_over_ranks(Sample s) {
  double v[2] = {s.run_s, s.blocked_s}, m[2], cpu = 0;
  MPI_Allreduce(v, m, 2, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  MPI_Allreduce(&s.cpu_s, &cpu, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  return {m[0], m[1], s.kept, cpu};
}

double median_of(const Mode& m, double Sample::*f) {
  std::vector<double> v;
  for (const Sample& s : m.rounds) v.push_back(s.*f);
  return median(v);
}

/// Median over 21 memcpy's of the state into a buffer (the copy checkpoint() cannot avoid).
double memcpy_seconds(const App& app) {
  std::vector<double> dst(app.state.size());
  std::vector<double> t;
  for (int i = 0; i < 21; ++i) {
    const auto t0 = Clock::now();
    std::memcpy(dst.data(), app.state.data(), app.state.size() * sizeof(double));
    t.push_back(since(t0));
  }
  return max_over_ranks(median(t));
}

}  // namespace

int main(int argc, char** argv) {
  int provided = 0;
  if (MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided) != MPI_SUCCESS) {
    std::fprintf(stderr, "finegrain: MPI_Init_thread failed\n");
    return 1;
  }
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const Args args = parse_args(argc, argv);
  ckpt::Options base;  // defaults + CKPT_*
  if (!base.error.ok()) fail(base.error.to_string());

  App app;
  const std::uint64_t n = args.bytes / sizeof(double);
  app.state.assign(n, 1.0);
  app.start = n * static_cast<std::uint64_t>(rank);
  app.global = n * static_cast<std::uint64_t>(size);
  app.work.assign((256u << 20) / sizeof(double), 1.0);  // windows of up to 256 MiB, see App
  calibrate(app, args.compute_ms);

  auto wanted = [&](const std::string& name) {
    if (args.only.empty()) return true;
    for (const auto& m : split_list(args.only))
      if (m == name) return true;
    return false;
  };
  std::vector<Mode> modes;
  std::vector<std::unique_ptr<CkptMode>> ckpts;
  std::map<std::string, const CkptMode*> first_of;  // ckpt modes by name
  modes.push_back({"none", [&](int) { return run_none(app, args.steps); }, {}});
  std::vector<double> spare[2] = {std::vector<double>(n, 0.0), std::vector<double>(n, 0.0)};  // touched
  if (wanted("memcpy")) modes.push_back({"memcpy", [&](int) { return run_memcpy(app, spare, args.steps); }, {}});
  using Busy = ckpt::Options::OnBusy;
  enum class Sync { fsync, nofsync, end };  // end: fsynced at close(), inside the timed run
  struct CkptSpec {
    const char* name;
    const char* transport;
    Sync sync;
    Busy on_busy;
    bool series;
  };
  for (const CkptSpec& c : {CkptSpec{"ckpt-wait-fsync", "posix", Sync::fsync, Busy::wait, false},
                            CkptSpec{"ckpt-wait-nofsync", "posix", Sync::nofsync, Busy::wait, false},
                            CkptSpec{"ckpt-coalesce-fsync", "posix", Sync::fsync, Busy::coalesce, false},
                            CkptSpec{"ckpt-coalesce-nofsync", "posix", Sync::nofsync, Busy::coalesce, false},
                            CkptSpec{"ckpt-wait-null", "null", Sync::fsync, Busy::wait, false},
                            CkptSpec{"ckpt-coalesce-null", "null", Sync::fsync, Busy::coalesce, false},
                            CkptSpec{"series-wait-fsync", "posix", Sync::fsync, Busy::wait, true},
                            CkptSpec{"series-wait-nofsync", "posix", Sync::nofsync, Busy::wait, true},
                            CkptSpec{"series-wait-end", "posix", Sync::end, Busy::wait, true},
                            CkptSpec{"series-coalesce-fsync", "posix", Sync::fsync, Busy::coalesce, true},
                            CkptSpec{"series-coalesce-nofsync", "posix", Sync::nofsync, Busy::coalesce, true}}) {
    if (!wanted(c.name)) continue;
    const std::string dir = args.dir + "/" + c.name;
    if (rank == 0)
      if (const std::string e = make_dir(dir); !e.empty()) fail(e);
    MPI_Barrier(MPI_COMM_WORLD);
    auto m = std::make_unique<CkptMode>();
    m->options = base;
    m->options.transport = c.transport;
    m->options.fsync = c.sync != Sync::nofsync;
    m->options.dir = dir;
    m->options.on_busy = c.on_busy;
    if (c.series) {
      m->options.layout = ckpt::Options::Layout::series;
      m->options.keep = 1000000;  // every step written stays
      m->per_round = true;
    }
    if (c.sync == Sync::end) {
      m->options.durable_every_ms = 86400000;  // no sync while running; close() syncs
      m->close_timed = true;
    }
    if (!m->per_round) m->rt = make_runtime(m->options, app);
    CkptMode* mp = m.get();
    ckpts.push_back(std::move(m));
    modes.push_back({c.name, [&app, mp, &args](int) { return run_ckpt(app, *mp, args.steps); }, {}});
    first_of[c.name] = mp;
  }
#ifdef CKPT_HAVE_ADIOS2
  std::vector<std::unique_ptr<Adios2Mode>> adios;
  for (bool async : {false, true}) {
    const std::string name = async ? "adios2-bp5-async" : "adios2-bp5";
    if (!wanted(name)) continue;
    const std::string dir = args.dir + "/" + name;
    if (rank == 0)
      if (const std::string e = make_dir(dir); !e.empty()) fail(e);
    adios.push_back(std::make_unique<Adios2Mode>(app, async));
    Adios2Mode* ap = adios.back().get();
    modes.push_back({name,
                     [ap, dir, &args](int) {
                       try {
                         return ap->run(dir, args.steps);
                       } catch (const std::exception& e) {
                         fail(std::string("ADIOS2: ") + e.what());
                       }
                     },
                     {}});
  }
#endif
  MPI_Barrier(MPI_COMM_WORLD);

  for (int round = 0; round <= args.reps; ++round)  // round 0: warm-up
    for (Mode& m : modes) {
      // Every mode starts on a quiet machine: the previous mode's dirty pages written back and the
      // kernel's deferred work (journal, freed blocks) done. Without this, `none` (first in a round)
      // ran after ADIOS2's run and paid for its write-back: modes came out faster than `none`.
      sync();
      MPI_Barrier(MPI_COMM_WORLD);
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      const Sample s = worst_over_ranks(m.run(round));
      if (round > 0) m.rounds.push_back(s);
    }
  const double hot_copy_s = memcpy_seconds(app);
  // The bound: the in-loop copy (memcpy mode) when it ran, else the cache-hot one.
  double copy_s = hot_copy_s;
  for (const Mode& m : modes)
    if (m.name == "memcpy") copy_s = median_of(m, &Sample::blocked_s);

  std::map<std::string, std::pair<double, std::uint64_t>> first;  // mode -> first blocked, staging bytes
  for (const auto& kv : first_of) first[kv.first] = {kv.second->first_s, kv.second->staging};
  for (auto& c : ckpts) {
    if (!c->rt) continue;  // per-round modes closed theirs
    ckpt::Status s = c->rt->close();
    if (!s.ok()) fail("ckpt close: " + s.to_string());
  }
  ckpts.clear();
  if (rank == 0) {
    std::printf(
        "finegrain: %d ranks, %.2f MiB/rank, %d steps of ~%.1f ms compute (%.1f MiB streamed per step), %d reps; "
        "memcpy %.1f us in the loop, %.1f us cache-hot; the bound below uses %s\n",
        size, static_cast<double>(args.bytes) / (1 << 20), args.steps, args.compute_ms,
        static_cast<double>(app.work_n * sizeof(double)) / (1 << 20), args.reps, copy_s * 1e6, hot_copy_s * 1e6,
        copy_s == hot_copy_s ? "the cache-hot one (no memcpy mode)" : "the one in the loop");
#ifndef CKPT_HAVE_ADIOS2
    std::printf("adios2: not available (pip install adios2, then reconfigure)\n");
#endif
    std::printf("%-22s %8s %8s %6s %16s %26s %14s %14s %12s\n", "mode", "run s", "x none", "kept", "blocked us/ckpt",
                "blocked/(1.5 memcpy+50us)", "bg cpu us/ckpt", "first ckpt us", "staging KiB");
    for (const Mode& m : modes) {
      const double r = median_of(m, &Sample::run_s), b = median_of(m, &Sample::blocked_s);
      // x none: the median of the rounds' ratios (each round's run over the same round's none), so that
      // a slow stretch of the machine, which every mode of a round shares, cancels.
      // bg cpu us/ckpt: the CPU time the background threads (ckpt's, ADIOS2's, MPI's progress) took
      // beyond the same round's none, per checkpoint and rank; not the kernel's flusher threads. On cores
      // the ranks compute on, this is taken from the compute.
      std::vector<double> ratio, cpu;
      for (std::size_t k = 0; k < m.rounds.size(); ++k) {
        ratio.push_back(m.rounds[k].run_s / modes.front().rounds[k].run_s);
        cpu.push_back((m.rounds[k].cpu_s - modes.front().rounds[k].cpu_s) / (args.steps * size));
      }
      std::printf("%-22s %8.3f %8.3f %6d %16.1f %26.2f %14.1f", m.name.c_str(), r, median(ratio), m.rounds.back().kept,
                  b * 1e6, b / (1.5 * copy_s + 50e-6), median(cpu) * 1e6);
      if (auto f = first.find(m.name); f != first.end())
        std::printf(" %14.1f %12.1f", f->second.first * 1e6, static_cast<double>(f->second.second) / 1024);
      std::printf("\n");
    }
    if (!args.csv.empty()) {
      std::FILE* f = std::fopen(args.csv.c_str(), "w");
      if (!f) fail("cannot write " + args.csv);
      std::fprintf(
          f, "mode,ranks,bytes_per_rank,steps,compute_ms,rep,run_s,blocked_s,memcpy_s,kept,memcpy_hot_s,bg_cpu_s\n");
      for (const Mode& m : modes)
        for (std::size_t r = 0; r < m.rounds.size(); ++r)
          std::fprintf(f, "%s,%d,%llu,%d,%.3f,%zu,%.6f,%.6f,%.6f,%d,%.6f,%.6f\n", m.name.c_str(), size,
                       static_cast<unsigned long long>(args.bytes), args.steps, args.compute_ms, r, m.rounds[r].run_s,
                       m.rounds[r].blocked_s, copy_s, m.rounds[r].kept, hot_copy_s, m.rounds[r].cpu_s);
      if (std::fclose(f) != 0) fail("writing " + args.csv + " failed");
    }
  }
  MPI_Barrier(MPI_COMM_WORLD);
  if (rank == 0) {  // only what this program created
    std::error_code ec;
    for (const Mode& m : modes) std::filesystem::remove_all(args.dir + "/" + m.name, ec);
  }
  MPI_Finalize();
  return 0;
}
