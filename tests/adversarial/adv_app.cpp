// adv_app: the program adversarial.py runs, kills and restarts (issue 14).
//   adv_app --dir D [--transport T] [--steps N] [--cells C] [--keep K] [--ack FILE] [--recommit]
//           [--flush-delay MS] [--hold-ms MS] [--mode run|check|finalize-first|finalize-last]
//           [--timeline T] [--rollback R] [--levels] [--layout series] [--segment-steps N] [--incremental]
//           [--coalesce]
// run: checkpoint steps 1..N, waiting for each; rank 0 appends "<step>" to --ack after every commit
//      that returned ok (what the application was promised). --recommit writes step N again at the end.
//      --rollback R: restart(R) first (it must restore timeline 0's step R), then checkpoint R+1..N.
// check: restart() the newest checkpoint and compare every byte with what step S captured; prints
//      "check: ok step S timeline T" (exit 0), "check: none" (exit 3) or "check: FAIL ..." (exit 1).
// --timeline T salts every value, so that a run rolled back to an older step writes data that differ
// from the abandoned timeline's at the same step (check tells which timeline it restored).
// finalize-first: the Runtime lives in main's scope; MPI_Finalize is called with a checkpoint in
//      flight, before the Runtime's destructor. finalize-last: the usual order.
// --levels: the node-local level in <dir>.local, one node per rank, every 2nd checkpoint drained.
// --incremental (issue 36): incremental checkpoints (index_format 2, pieces of 64 KiB, a full checkpoint
//      every 4th), and each 64 KiB region of "field" changes at about every 4th step only, so that most
//      pieces refer to earlier steps. With a roll-back the values a region got at or before step R are
//      timeline 0's: check takes the same --rollback R to know them.
// --coalesce: on_busy coalesce with background_cpu 0.05: checkpoint() after every step of ~5 ms without
//      waiting (most are superseded: the budget holds the next launch back ~20x a checkpoint's CPU time),
//      each ticket acknowledged once it is done ok (in order), the rest after wait_all().
// Every region's content is a pure function of (step, global index).
#include <mpi.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "ckpt/ckpt.hpp"
#include "splitmix.hpp"

namespace {

using ckpt::test::mix;

struct Args {
  std::string dir, transport = "posix", ack, mode = "run";
  std::int64_t steps = 3, rollback = -1;
  std::uint64_t timeline = 0;
  std::uint64_t cells = 4096;
  int keep = 2, flush_delay = 0, hold_ms = 0;
  bool recommit = false;
  bool groups = false;   ///< "walkers/*" through mpiio (a transport group); rank 1 holds none of them
  bool collide = false;  ///< also "field/x": a name that is a group in an HDF5 export of "field"
  bool levels = false;   ///< the node-local level in <dir>.local
  bool series = false;   ///< layout series
  int segment_steps = 0;
  bool incremental = false;  ///< incremental checkpoints of a sparsely changing field
  bool coalesce = false;     ///< on_busy coalesce with a CPU budget, no wait between checkpoints
};

struct State {
  std::uint64_t lo = 0, n = 0, global = 0;
  std::vector<std::uint64_t> field;
  std::vector<double> walkers;  ///< --groups: 8 per rank, none on rank 1 (a zero-length block)
  std::uint64_t wlo = 0, wn = 0, wglobal = 0;
  std::int64_t step = -1;
  bool sparse = false;     ///< --incremental: a region changes at about every 4th step
  std::int64_t fork = -1;  ///< --rollback: values written at or before it are timeline 0's
  State(std::uint64_t cells, int rank, int size) : global(cells) {
    n = cells / static_cast<std::uint64_t>(size);
    lo = n * static_cast<std::uint64_t>(rank);
    if (rank == size - 1) n = cells - lo;
    field.resize(n);
    wglobal = 8 * static_cast<std::uint64_t>(size - (size > 1 ? 1 : 0));
    wn = rank == 1 ? 0 : 8;
    wlo = 8 * static_cast<std::uint64_t>(rank > 1 ? rank - 1 : rank);
    walkers.resize(wn);
  }
  /// Element i at step s: the value of the step its 64 KiB region last changed at (every step without
  /// `sparse`), in the timeline of that step.
  std::uint64_t value(std::int64_t s, std::uint64_t i, std::uint64_t timeline) const {
    const std::uint64_t region = i / 8192;
    while (sparse && s > 1 && (region * 3 + static_cast<std::uint64_t>(s)) % 4 != 0) --s;
    if (s <= fork) timeline = 0;
    return mix((static_cast<std::uint64_t>(s) << 32 ^ i) + timeline * 0x9e3779b97f4a7c15ull);
  }
  void fill(std::int64_t s, std::uint64_t timeline) {
    for (std::uint64_t i = 0; i < n; ++i) field[i] = value(s, lo + i, timeline);
    for (std::uint64_t i = 0; i < wn; ++i) walkers[i] = static_cast<double>(s * 1000 + wlo + i);
    step = s;
  }
  bool is(std::int64_t s, bool groups, std::uint64_t timeline) const {
    for (std::uint64_t i = 0; i < n; ++i)
      if (field[i] != value(s, lo + i, timeline)) return false;
    for (std::uint64_t i = 0; i < (groups ? wn : 0); ++i)
      if (walkers[i] != static_cast<double>(s * 1000 + wlo + i)) return false;
    return step == s;
  }
};

ckpt::Options options(const Args& a) {
  ckpt::Options o;  // defaults, then CKPT_* variables (adversarial.py sets bad ones)
  if (!o.error.ok()) return o;
  o.dir = a.dir;
  o.transport = a.transport;
  o.keep = a.keep;
  o.chunk_bytes = 64 << 10;
  if (a.flush_delay > 0) ::setenv("CKPT_TEST_FLUSH_DELAY_MS", std::to_string(a.flush_delay).c_str(), 1);
  if (a.groups) o.groups.push_back({"walkers", {"walkers/*"}, "mpiio"});
  if (a.levels) {
    o.local_dir = a.dir + ".local";
    o.ranks_per_node = 1;
    o.drain_every = 2;
  }
  if (a.series) o.layout = ckpt::Options::Layout::series;
  o.segment_steps = a.segment_steps;
  if (a.incremental) {
    o.index_format = 2;
    o.incremental = true;
    o.incremental_piece_bytes = 64 << 10;
    o.incremental_full_every = 4;
  }
  if (a.coalesce) {
    o.on_busy = ckpt::Options::OnBusy::coalesce;
    o.background_cpu = 0.05;
  }
  return o;
}

void protect(ckpt::Runtime& rt, State& st, const Args& a) {
  rt.protect("field", st.field.data(), ckpt::DType::u64, ckpt::Block{{st.global}, {st.lo}, {st.n}});
  if (a.groups)
    rt.protect("walkers/pos", st.walkers.data(), ckpt::DType::f64, ckpt::Block{{st.wglobal}, {st.wlo}, {st.wn}});
  rt.protect_scalar("step", &st.step);
  if (a.collide) rt.protect_scalar("field/x", &st.step);
}

int run(ckpt::Runtime& rt, State& st, const Args& a, int rank) {
  auto acknowledge = [&](std::int64_t s, const ckpt::Status& r) {
    if (rank == 0) std::printf("checkpoint %lld: %s\n", static_cast<long long>(s), r.to_string().c_str());
    std::fflush(stdout);
    if (r.ok() && rank == 0 && !a.ack.empty()) {
      FILE* f = std::fopen(a.ack.c_str(), "a");
      if (f) {
        std::fprintf(f, "%lld\n", static_cast<long long>(s));
        std::fclose(f);
      }
    }
    return r.ok() || (a.coalesce && r.code() == ckpt::Code::superseded);
  };
  std::vector<ckpt::Ticket> pending;  // --coalesce: in step order, not acknowledged yet
  auto acknowledge_done = [&](bool all) {
    bool fine = true;
    while (!pending.empty() && (all || pending.front().done())) {
      fine = acknowledge(pending.front().step(), pending.front().wait()) && fine;
      pending.erase(pending.begin());
    }
    return fine;
  };
  auto take = [&](std::int64_t s) {
    st.fill(s, a.timeline);
    if (!a.coalesce) return acknowledge(s, rt.checkpoint(s).wait());
    pending.push_back(rt.checkpoint(s));
    std::this_thread::sleep_for(std::chrono::milliseconds(5));  // the next step's compute
    return acknowledge_done(false);
  };
  bool ok = true;
  std::int64_t first = 1;
  if (a.rollback >= 0) {
    ckpt::Status r = rt.restart(a.rollback);
    int same = r.ok() && st.is(a.rollback, a.groups, 0) ? 1 : 0, all = 0;
    MPI_Allreduce(&same, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (rank == 0) std::printf("rollback to %lld: %s\n", static_cast<long long>(a.rollback), all ? "ok" : "FAIL");
    if (!all) return 1;
    first = a.rollback + 1;
  }
  for (std::int64_t s = first; s <= a.steps; ++s) ok = take(s) && ok;
  if (a.recommit) ok = take(a.steps) && ok;
  if (a.coalesce) {
    const bool drained = rt.wait_all().ok();
    ok = acknowledge_done(true) && drained && ok;  // what finished ok is acknowledged even after a failure
  }
  if (a.hold_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(a.hold_ms));
  return ok ? 0 : 1;
}

int check(ckpt::Runtime& rt, State& st, const Args& a, int rank) {
  auto r = rt.restart();
  if (!r.ok()) {
    if (rank == 0)
      std::printf("%s\n", r.status().code() == ckpt::Code::not_found
                              ? "check: none"
                              : ("check: FAIL restart: " + r.status().to_string()).c_str());
    return r.status().code() == ckpt::Code::not_found ? 3 : 1;
  }
  // Which timeline (0 or 1) the restored data belong to: every rank must agree on one.
  int same[2] = {st.is(r.value(), a.groups, 0) ? 1 : 0, st.is(r.value(), a.groups, 1) ? 1 : 0}, both[2] = {0, 0};
  MPI_Allreduce(same, both, 2, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  const int all = both[0] || both[1] ? 1 : 0;
  if (rank == 0) {
    if (all)
      std::printf("check: ok step %lld timeline %d%s\n", static_cast<long long>(r.value()), both[0] ? 0 : 1,
                  r.warning().ok() ? "" : " (fell back)");
    else
      std::printf("check: FAIL step %lld restored but its data differs (torn)\n", static_cast<long long>(r.value()));
  }
  return all ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string k = argv[i];
    auto next = [&]() { return i + 1 < argc ? std::string(argv[++i]) : std::string(); };
    if (k == "--dir")
      a.dir = next();
    else if (k == "--transport")
      a.transport = next();
    else if (k == "--steps")
      a.steps = std::atoll(next().c_str());
    else if (k == "--cells")
      a.cells = std::strtoull(next().c_str(), nullptr, 10);
    else if (k == "--keep")
      a.keep = std::atoi(next().c_str());
    else if (k == "--ack")
      a.ack = next();
    else if (k == "--recommit")
      a.recommit = true;
    else if (k == "--groups")
      a.groups = true;
    else if (k == "--collide")
      a.collide = true;
    else if (k == "--flush-delay")
      a.flush_delay = std::atoi(next().c_str());
    else if (k == "--hold-ms")
      a.hold_ms = std::atoi(next().c_str());
    else if (k == "--mode")
      a.mode = next();
    else if (k == "--timeline")
      a.timeline = std::strtoull(next().c_str(), nullptr, 10);
    else if (k == "--rollback")
      a.rollback = std::atoll(next().c_str());
    else if (k == "--levels")
      a.levels = true;
    else if (k == "--layout") {
      const std::string v = next();
      if (v != "series" && v != "directory") {
        if (rank == 0) std::fprintf(stderr, "adv_app: --layout %s: series or directory\n", v.c_str());
        MPI_Abort(MPI_COMM_WORLD, 2);
      }
      a.series = v == "series";
    }
    else if (k == "--segment-steps")
      a.segment_steps = std::atoi(next().c_str());
    else if (k == "--incremental")
      a.incremental = true;
    else if (k == "--coalesce")
      a.coalesce = true;
    else {
      if (rank == 0) std::fprintf(stderr, "adv_app: unknown argument %s\n", k.c_str());
      MPI_Abort(MPI_COMM_WORLD, 2);
    }
  }
  State st(a.cells, rank, size);
  st.sparse = a.incremental;
  st.fork = a.rollback;
  if (a.mode == "finalize-first") {
    // The natural way: a Runtime in main's scope, destroyed after MPI_Finalize.
    ckpt::Runtime rt(MPI_COMM_WORLD, options(a));
    if (!rt.status().ok()) {
      if (rank == 0) std::printf("runtime: %s\n", rt.status().to_string().c_str());
      MPI_Finalize();
      return 4;
    }
    protect(rt, st, a);
    st.fill(1, a.timeline);
    ckpt::Ticket tk = rt.checkpoint(1);  // still in flight (flush delay) when MPI_Finalize starts
    MPI_Finalize();
    ckpt::Status s = tk.wait();
    ckpt::Status after = rt.checkpoint(2).wait();
    if (rank == 0)
      std::printf("finalize-first: in-flight %s; after finalize: %s\n", s.to_string().c_str(),
                  after.to_string().c_str());
    return s.ok() && after.code() == ckpt::Code::failed_precondition ? 0 : 1;
  }
  int rc = 0;
  {
    ckpt::Runtime rt(MPI_COMM_WORLD, options(a));
    if (!rt.status().ok()) {
      if (rank == 0) std::printf("runtime: %s\n", rt.status().to_string().c_str());
      rc = 4;
    } else {
      protect(rt, st, a);
      if (a.mode == "check")
        rc = check(rt, st, a, rank);
      else if (a.mode == "finalize-last") {
        st.fill(1, a.timeline);
        ckpt::Ticket tk = rt.checkpoint(1);
        rc = rt.close().ok() && tk.wait().ok() ? 0 : 1;
        if (rank == 0) std::printf("finalize-last: %s\n", tk.wait().to_string().c_str());
      } else
        rc = run(rt, st, a, rank);
    }
  }
  int worst = 0;
  MPI_Allreduce(&rc, &worst, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  MPI_Finalize();
  return worst;
}
