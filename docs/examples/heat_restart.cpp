// A small ckpt example: explicit 1D heat diffusion on a global array split over MPI ranks,
// checkpointed asynchronously every K steps. Restarted with --restart, it loads the newest complete
// checkpoint, recomputes that step from scratch and checks the restored state bit for bit, then
// continues. The update of each cell does not depend on the decomposition, so the final `state:`
// line is the same for any rank count and for interrupted and uninterrupted runs.
//
//   mpiexec -n 4 heat_restart --cells 1000000 --steps 200 --every 5 --dir /tmp/heat
//   (kill it)  mpiexec -n 4 heat_restart --cells 1000000 --steps 200 --every 5 --dir /tmp/heat --restart
#include <mpi.h>
#include <xxhash.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "ckpt/ckpt.hpp"

namespace {

struct Args {
  std::uint64_t cells = 1 << 20;
  std::int64_t steps = 100;
  std::int64_t every = 1;
  std::string dir = "heat-ckpt";
  std::string transport;
  bool restart = false;
  int compute_ms = 0;  // extra "compute" per step, to give the background flush time to overlap
};

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    std::string k = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "heat_restart: %s needs a value\n", k.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (k == "--cells")
      a.cells = std::stoull(next());
    else if (k == "--steps")
      a.steps = std::stoll(next());
    else if (k == "--every")
      a.every = std::stoll(next());
    else if (k == "--dir")
      a.dir = next();
    else if (k == "--transport")
      a.transport = next();
    else if (k == "--restart")
      a.restart = true;
    else if (k == "--compute-ms")
      a.compute_ms = std::stoi(next());
    else {
      std::fprintf(stderr,
                   "usage: heat_restart [--cells N] [--steps N] [--every K] [--dir PATH] [--transport NAME] "
                   "[--compute-ms MS] [--restart]\n");
      std::exit(2);
    }
  }
  if (a.every < 1 || a.steps < 0 || a.cells < 2) {
    std::fprintf(stderr, "heat_restart: need --every >= 1, --steps >= 0, --cells >= 2\n");
    std::exit(2);
  }
  return a;
}

/// This rank's cells [lo, lo + n) of the global rod, with one ghost cell on each side.
struct Rod {
  std::uint64_t global = 0, lo = 0, n = 0;
  std::vector<double> u;  // u[0] and u[n + 1] are ghosts
  Rod(std::uint64_t cells, int rank, int size) : global(cells) {
    const std::uint64_t base = cells / size, extra = cells % size;
    n = base + (static_cast<std::uint64_t>(rank) < extra ? 1 : 0);
    lo = rank * base + std::min<std::uint64_t>(rank, extra);
    u.assign(n + 2, 0.0);
  }
  void initial() {  // a hot spot and a warm plateau
    for (std::uint64_t i = 0; i < n; ++i) {
      const double x = static_cast<double>(lo + i) / static_cast<double>(global);
      u[i + 1] = (x > 0.45 && x < 0.55 ? 100.0 : 0.0) + (x > 0.7 && x < 0.9 ? 20.0 : 0.0);
    }
  }
  void step(MPI_Comm comm, int rank, int size, std::vector<double>& scratch) {
    const int left = rank > 0 ? rank - 1 : MPI_PROC_NULL, right = rank + 1 < size ? rank + 1 : MPI_PROC_NULL;
    u[0] = 0.0;  // fixed boundary (stays for the outermost ranks, overwritten otherwise)
    u[n + 1] = 0.0;
    if (n > 0) {
      MPI_Sendrecv(&u[1], 1, MPI_DOUBLE, left, 0, &u[n + 1], 1, MPI_DOUBLE, right, 0, comm, MPI_STATUS_IGNORE);
      MPI_Sendrecv(&u[n], 1, MPI_DOUBLE, right, 1, &u[0], 1, MPI_DOUBLE, left, 1, comm, MPI_STATUS_IGNORE);
    }
    scratch.resize(u.size());
    for (std::uint64_t i = 1; i <= n; ++i) scratch[i] = u[i] + 0.25 * (u[i - 1] - 2.0 * u[i] + u[i + 1]);
    for (std::uint64_t i = 1; i <= n; ++i) u[i] = scratch[i];
  }
};

/// XXH3 of the whole rod in global order (gathered on rank 0), as hex.
std::string digest(const Rod& rod, MPI_Comm comm, int rank, int size) {
  int n = static_cast<int>(rod.n);
  std::vector<int> counts(size), displs(size);
  MPI_Gather(&n, 1, MPI_INT, counts.data(), 1, MPI_INT, 0, comm);
  std::vector<double> all(rank == 0 ? rod.global : 0);
  for (int r = 1; r < size; ++r) displs[r] = displs[r - 1] + counts[r - 1];
  MPI_Gatherv(rod.u.data() + 1, n, MPI_DOUBLE, all.data(), counts.data(), displs.data(), MPI_DOUBLE, 0, comm);
  char hex[17] = {};
  if (rank == 0)
    std::snprintf(hex, sizeof hex, "%016llx",
                  static_cast<unsigned long long>(XXH3_64bits(all.data(), all.size() * sizeof(double))));
  return hex;
}

}  // namespace

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const Args a = parse(argc, argv);
  int rc = 0;
  {
    ckpt::Options opts;  // defaults, then CKPT_* variables
    opts.dir = a.dir;
    if (!a.transport.empty()) opts.transport = a.transport;
    ckpt::Runtime rt(MPI_COMM_WORLD, opts);
    if (!rt.status().ok()) {
      if (rank == 0) std::fprintf(stderr, "heat_restart: %s\n", rt.status().to_string().c_str());
      MPI_Abort(MPI_COMM_WORLD, 1);
    }
    Rod rod(a.cells, rank, size);
    std::vector<double> scratch;
    std::int64_t step = 0;
    double time = 0.0;
    rt.protect("rod/u", rod.u.data() + 1, ckpt::DType::f64, ckpt::Block{{rod.global}, {rod.lo}, {rod.n}});
    rt.protect_scalar("step", &step);
    rt.protect_scalar("time", &time);
    rod.initial();

    if (a.restart) {
      auto r = rt.restart();
      if (!r.ok()) {
        if (rank == 0) std::printf("restart: %s; starting from step 0\n", r.status().to_string().c_str());
      } else {
        // Recompute the same step from scratch and compare bit for bit.
        Rod ref(a.cells, rank, size);
        ref.initial();
        for (std::int64_t s = 0; s < step; ++s) ref.step(MPI_COMM_WORLD, rank, size, scratch);
        int same = std::memcmp(ref.u.data() + 1, rod.u.data() + 1, rod.n * sizeof(double)) == 0 ? 1 : 0, all = 0;
        MPI_Allreduce(&same, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
        if (rank == 0)
          std::printf("restart: loaded checkpoint %lld (step %lld, t=%g) on %d ranks: %s\n",
                      static_cast<long long>(r.value()), static_cast<long long>(step), time, size,
                      all ? "restored state verified bit for bit against a recomputation" : "MISMATCH");
        if (!all) rc = 1;
      }
    }

    double blocked = 0;
    int taken = 0;
    ckpt::Ticket last;
    const auto t0 = std::chrono::steady_clock::now();
    while (step < a.steps && rc == 0) {
      rod.step(MPI_COMM_WORLD, rank, size, scratch);
      ++step;
      time += 0.25;
      if (a.compute_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(a.compute_ms));
      if (step % a.every == 0) {
        last = rt.checkpoint(step);
        blocked += last.stats().blocked_s;
        ++taken;
        if (last.done() && last.wait().failed()) {  // superseded (on_busy: coalesce) is not a failure
          if (rank == 0)
            std::fprintf(stderr, "checkpoint %lld: %s\n", static_cast<long long>(step),
                         last.wait().to_string().c_str());
          rc = 1;
        }
      }
      if (rank == 0 && step % 50 == 0) std::printf("step %lld\n", static_cast<long long>(step)), std::fflush(stdout);
    }
    ckpt::Status st = rt.wait_all();
    if (!st.ok()) {
      if (rank == 0) std::fprintf(stderr, "heat_restart: %s\n", st.to_string().c_str());
      rc = 1;
    }
    const double run_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const std::string d = digest(rod, MPI_COMM_WORLD, rank, size);
    if (rank == 0) {
      std::printf("checkpoints: %d, blocked in checkpoint(): %.3f s of %.3f s (%.2f%%)\n", taken, blocked, run_s,
                  run_s > 0 ? 100.0 * blocked / run_s : 0.0);
      std::printf("state: %s\n", d.c_str());
    }
  }
  MPI_Finalize();
  return rc;
}
