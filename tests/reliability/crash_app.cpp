// crash_app: the program the crash-consistency harness (crash_harness.py) kills with SIGKILL.
//   crash_app --dir D [--transport T] [--steps N] [--cells C] [--compute-ms MS]     checkpoint every step
//   crash_app --dir D --check                                                       after a kill
// With --ack FILE, rank 0 appends "<step>\n" to FILE (one write(2): a kill cannot tear it) as soon as
// a checkpoint's ticket is done and its wait() is OK: the harness then knows which commits were
// acknowledged before the kill, and the restart must not be older than the newest of them.
// Every region's contents are a pure function of (step, global index), so a check needs no
// recomputation: --check asks latest() for the newest complete checkpoint, restarts (restart()
// must pick that same step: no torn checkpoint may be newer than the newest loadable one), and
// compares every restored byte with what was captured for that step. Exit 0 and a line
// "check: ok step S" when all is well; 1 with the reason otherwise; 3 when no checkpoint exists.
#include <fcntl.h>
#include <mpi.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <string>
#include <thread>
#include <vector>

#include "ckpt/ckpt.hpp"
#include "splitmix.hpp"

namespace {

using ckpt::test::mix;

struct State {
  std::uint64_t global = 0, lo = 0, n = 0;
  std::vector<double> field;       // a Block of a global array (restartable on any rank count)
  std::vector<std::uint64_t> tag;  // per-step values equal on every rank (uniform local)
  std::int64_t step = -1;
  State(std::uint64_t cells, int rank, int size) : global(cells) {
    const std::uint64_t base = cells / size, extra = cells % size;
    n = base + (static_cast<std::uint64_t>(rank) < extra ? 1 : 0);
    lo = rank * base + std::min<std::uint64_t>(rank, extra);
    field.resize(n);
    tag.resize(513);
  }
  /// CKPTTEST_SPARSE (incremental checkpoints): each 64 KiB region of the global array changes about every
  /// tenth step only, so that most pieces of a checkpoint are the previous one's.
  bool sparse = std::getenv("CKPTTEST_SPARSE") != nullptr;
  /// The step whose value element g holds at step s: s, or with `sparse` the last step its region changed.
  std::int64_t written_at(std::uint64_t g, std::int64_t s) const {
    const std::uint64_t region = g / 8192;
    while (sparse && s > 1 && (region * 7 + static_cast<std::uint64_t>(s)) % 10 != 0) --s;
    return s;
  }
  void fill(std::int64_t s) {
    for (std::uint64_t i = 0; i < n; ++i) {
      std::uint64_t bits = mix(static_cast<std::uint64_t>(written_at(lo + i, s)) << 40 ^ (lo + i));
      std::memcpy(&field[i], &bits, 8);  // any bit pattern, NaNs included: compared bytewise
    }
    for (std::size_t i = 0; i < tag.size(); ++i) tag[i] = mix(static_cast<std::uint64_t>(s) * 977 + i);
    step = s;
  }
  bool is(std::int64_t s) const {
    State r = *this;
    r.fill(s);
    return std::memcmp(r.field.data(), field.data(), n * 8) == 0 && r.tag == tag && step == s;
  }
};

}  // namespace

int main(int argc, char** argv) {
  int provided = 0;
  // CKPTTEST_MPI_THREAD_LEVEL=funneled: MPI as an application that never asked for threads has it
  // (ckpt's "auto" then funnels every MPI call through this thread).
  const char* level = std::getenv("CKPTTEST_MPI_THREAD_LEVEL");
  const bool funneled = level != nullptr && std::string(level) == "funneled";
  MPI_Init_thread(&argc, &argv, funneled ? MPI_THREAD_FUNNELED : MPI_THREAD_MULTIPLE, &provided);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  std::string dir, transport, ack;
  std::int64_t steps = 1000000;
  std::uint64_t cells = 1 << 20;
  int compute_ms = 0;
  bool check = false;
  for (int i = 1; i < argc; ++i) {
    std::string k = argv[i];
    auto next = [&]() { return i + 1 < argc ? std::string(argv[++i]) : std::string(); };
    if (k == "--dir")
      dir = next();
    else if (k == "--transport")
      transport = next();
    else if (k == "--steps")
      steps = std::stoll(next());
    else if (k == "--cells")
      cells = std::stoull(next());
    else if (k == "--compute-ms")
      compute_ms = std::stoi(next());
    else if (k == "--ack")
      ack = next();
    else if (k == "--check")
      check = true;
    else {
      if (rank == 0) std::fprintf(stderr, "crash_app: unknown argument %s\n", k.c_str());
      MPI_Abort(MPI_COMM_WORLD, 2);
    }
  }
  int rc = 0;
  {
    ckpt::Options o;
    o.dir = dir;
    if (!transport.empty()) o.transport = transport;
    ckpt::Runtime rt(MPI_COMM_WORLD, o);
    if (!rt.status().ok()) {
      if (rank == 0) std::printf("crash_app: %s\n", rt.status().to_string().c_str());
      MPI_Abort(MPI_COMM_WORLD, 4);
    }
    State st(cells, rank, size);
    rt.protect("field", st.field.data(), ckpt::DType::f64, ckpt::Block{{st.global}, {st.lo}, {st.n}});
    rt.protect("tag", st.tag.data(), ckpt::DType::u64, {st.tag.size()});
    rt.protect_scalar("step", &st.step);
    if (!check) {
      const int ack_fd = !ack.empty() && rank == 0 ? ::open(ack.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644) : -1;
      std::deque<ckpt::Ticket> pending;  // with --ack: tickets not yet done, oldest first
      for (std::int64_t s = 1; s <= steps; ++s) {
        st.fill(s);
        ckpt::Ticket tk = rt.checkpoint(s);
        if (tk.done() && !tk.wait().ok()) {
          if (rank == 0) std::printf("checkpoint %lld: %s\n", static_cast<long long>(s), tk.wait().to_string().c_str());
          rc = 1;
          break;
        }
        if (ack_fd >= 0) {
          pending.push_back(tk);
          while (!pending.empty() && pending.front().done()) {
            if (pending.front().wait().ok()) {
              const std::string line = std::to_string(pending.front().step()) + "\n";
              if (::write(ack_fd, line.data(), line.size()) != static_cast<ssize_t>(line.size())) rc = 1;
            }
            pending.pop_front();
          }
        }
        if (compute_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(compute_ms));
      }
      ckpt::Status s = rt.wait_all();
      if (!s.ok()) rc = 1;
      if (ack_fd >= 0) ::close(ack_fd);
    } else {
      auto newest = rt.latest();
      const std::optional<std::int64_t> l = newest.ok() ? newest.value() : std::nullopt;
      if (!newest.ok()) {
        if (rank == 0) std::printf("check: latest(): %s\n", newest.status().to_string().c_str());
        rc = 3;
      } else if (!l) {
        if (rank == 0) std::printf("check: no complete checkpoint\n");
        rc = 3;
      } else {
        auto r = rt.restart();
        int same = r.ok() && st.is(r.value()) ? 1 : 0, all = 0;
        MPI_Allreduce(&same, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
        if (!r.ok()) {
          if (rank == 0) std::printf("check: FAIL: restart: %s\n", r.status().to_string().c_str());
          rc = 1;
        } else if (r.value() != *l) {
          if (rank == 0)
            std::printf("check: FAIL: latest() = %lld but restart() loaded %lld\n", static_cast<long long>(*l),
                        static_cast<long long>(r.value()));
          rc = 1;
        } else if (!all) {
          if (rank == 0)
            std::printf("check: FAIL: step %lld restored, but the data differs from what was captured\n",
                        static_cast<long long>(r.value()));
          rc = 1;
        } else if (rank == 0) {
          std::printf("check: ok step %lld (%d ranks, restored data equals the capture bit for bit)\n",
                      static_cast<long long>(r.value()), size);
        }
      }
    }
    rt.close();
  }
  MPI_Finalize();
  return rc;
}
