// amr_sedov: the 2D Sedov blast wave (gamma = 1.4) on a block-structured AMR mesh (or a uniform one)
// with tracer particles, on Kokkos, checkpointing through ckpt (see README.md).
//
//   mpiexec -n 4 amr_sedov --tmax 0.05 --max-level 4 --checkpoint-every 20 --dir /tmp/sedov --particles 1024
//   mpiexec -n 3 amr_sedov --tmax 0.08 --max-level 4 --checkpoint-every 20 --dir /tmp/sedov --restart
//
// The last two lines on rank 0 are `shock radius: <r> analytic: <r0> error: <percent>%` and
// `state: <digest>`; the digest covers the tree, every block and every particle in global order and
// does not depend on the rank count.
#include <mpi.h>

#include <CLI/CLI.hpp>
#include <Kokkos_Core.hpp>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

// ckpt-glue begin
#include "ckpt/ckpt.hpp"
// ckpt-glue end
#include "simulation.hpp"

namespace {

// R(t) = XI0 (E t^2 / rho0)^(1/4) for a cylindrical blast, gamma = 1.4: XI0 from the self-similar
// solution, computed by sedov_constant.py (it gives 1.0328 for the spherical case, Taylor's 1.033).
constexpr double XI0 = 1.00402;
constexpr double CFL = 0.7;      // of the unsplit scheme: dt (|u|+c)/dx + dt (|v|+c)/dy <= CFL
constexpr int REGRID_EVERY = 2;  // steps between regrids (FLASH's nrefs default)
constexpr int NROOT = 2;         // root blocks per side

struct Args {
  double tmax = 0;
  int max_level = 4;
  std::string mesh = "amr";
  std::int64_t particles = 0;
  sedov::Cutoffs cutoffs;
  // ckpt-glue begin
  std::int64_t every = 20;
  double checkpoint_dt = 0;  // > 0: checkpoint at t = k * checkpoint_dt instead of every `every` steps
  std::string dir, transport, config;
  bool restart = false;
  // ckpt-glue end
};

int g_rank = 0;

void say(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
void say(const char* fmt, ...) {
  if (g_rank != 0) return;
  va_list ap;
  va_start(ap, fmt);
  std::vprintf(fmt, ap);
  va_end(ap);
  std::fflush(stdout);
}

double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

int run(const Args& a, const ckpt::Options& options) {
  MPI_Comm comm = MPI_COMM_WORLD;
  int size = 1;
  MPI_Comm_size(comm, &size);
  const bool uniform = a.mesh == "uniform";
  sedov::Simulation sim(comm, NROOT, a.max_level, uniform, a.cutoffs);
  sedov::RunScalars& s = sim.scalars();
  // ckpt-glue begin
  // Collective; a failure (bad options too) is its status() on every rank. protect() registers the
  // whole state once: restarts and checkpoints find it wherever regrids have put it.
  ckpt::Runtime rt(comm, options);
  ckpt::Status st = rt.status().ok() ? sim.protect(rt) : rt.status();
  bool restored = false;
  if (st.ok() && a.restart) {
    // The newest complete checkpoint, on this rank count (load(): its tree first, then one restart()).
    const auto newest = rt.latest();
    const bool found = newest.ok() && newest.value();
    st = found         ? sim.load(rt, *newest.value())
         : newest.ok() ? ckpt::Status(ckpt::Code::not_found, "no complete checkpoint in " + a.dir)
                       : newest.status();
    restored = st.ok();
    if (!found && st.code() == ckpt::Code::not_found) {
      say("restart: %s; starting from t = 0\n", st.to_string().c_str());
      st = ckpt::Status::OK();
    }
  }
  if (!st.ok()) {
    say("amr_sedov: %s%s\n", a.restart ? "restart failed: " : "", st.to_string().c_str());
    return options.error.ok() ? 1 : 2;  // 2: a bad --config, like a bad command line
  }
  if (restored) {
    const bool stored_uniform = s.mesh_uniform != 0;
    const int stored_level = static_cast<int>(s.max_level);
    say("restored: step %lld time %.9g blocks %lld particles %lld on %d ranks, state %s\n",
        static_cast<long long>(s.step), s.time, static_cast<long long>(s.nblocks), static_cast<long long>(s.nparticles),
        size, sim.digest().c_str());
    if (stored_uniform != uniform || stored_level != a.max_level) {
      // Cross-mesh restart: regrid at once until the mesh is what this run asks for (a uniform
      // mesh at the finest level, or the AMR mesh the error estimator wants), by conservative
      // prolongation (parent + limited slopes) and restriction (average) of the restored blocks.
      const std::array<double, sedov::NVAR> before = sim.totals();
      int passes = 0;
      const int limit = 2 * std::max(stored_level, a.max_level);
      while (passes < limit && sim.regrid(uniform ? sedov::RegridMode::refine_all : sedov::RegridMode::lohner))
        ++passes;
      s.mesh_uniform = uniform ? 1 : 0;
      s.max_level = a.max_level;
      const std::array<double, sedov::NVAR> after = sim.totals();
      say("cross-mesh restart: %s checkpoint (max level %d) -> %s mesh (max level %d), %d regrid passes, "
          "%lld blocks; mass %.17g -> %.17g, energy %.17g -> %.17g\n",
          stored_uniform ? "uniform" : "amr", stored_level, a.mesh.c_str(), a.max_level, passes,
          static_cast<long long>(s.nblocks), before[sedov::DENS], after[sedov::DENS], before[sedov::ENER],
          after[sedov::ENER]);
    }
  }
  // ckpt-glue end
  if (!restored) sim.init_sedov(a.particles);

  // ckpt-glue begin
  std::vector<ckpt::Ticket> tickets;
  // ckpt-glue end
  std::int64_t min_blocks = s.nblocks, max_blocks = s.nblocks;
  const std::int64_t first_step = s.step;
  // ckpt-glue begin
  const bool digests = std::getenv("AMR_SEDOV_DIGESTS") != nullptr;  // per-checkpoint digests (tests)
  auto write = [&]() -> bool {
    tickets.push_back(rt.checkpoint(s.step));
    // checkpoint() waited until at most max_in_flight were uncommitted (coalesce never waits: wait_all()
    // reports): the one before them is done, its outcome (with any earlier failure) the same on every rank.
    const std::size_t n = tickets.size(), k = static_cast<std::size_t>(options.max_in_flight);
    const bool waited = options.on_busy != ckpt::Options::OnBusy::coalesce && n > k;
    const ckpt::Status old = waited ? tickets[n - 1 - k].wait() : ckpt::Status::OK();
    if (old.failed()) {
      say("amr_sedov: checkpoint %lld failed: %s\n", static_cast<long long>(tickets[n - 1 - k].step()),
          old.to_string().c_str());
      return false;
    }
    if (digests)
      say("checkpoint: step %lld time %.9g blocks %lld particles %lld state %s\n", static_cast<long long>(s.step),
          s.time, static_cast<long long>(s.nblocks), static_cast<long long>(s.nparticles), sim.digest().c_str());
    return true;
  };

  // With --checkpoint-dt the steps are shortened to land on t = k * checkpoint_dt (as tmax), so that
  // runs on different meshes (different time steps) have checkpoints at the same times.
  const double ck_dt = a.checkpoint_dt;
  auto next_checkpoint_time = [&] { return ck_dt * (std::floor(s.time / ck_dt + 1e-9) + 1); };
  double next_ck = ck_dt > 0 ? next_checkpoint_time() : a.tmax;
  // ckpt-glue end
  MPI_Barrier(comm);
  const double t_start = now();
  while (s.time < a.tmax) {
    if (!uniform && s.step % REGRID_EVERY == 0) sim.regrid(sedov::RegridMode::lohner);
    min_blocks = std::min(min_blocks, s.nblocks), max_blocks = std::max(max_blocks, s.nblocks);
    sim.step(CFL, std::min(a.tmax, next_ck));
    // ckpt-glue begin
    const bool due = ck_dt > 0 ? s.time >= next_ck - 1e-12 * ck_dt : s.step % a.every == 0;
    if (due && !write()) return 1;
    if (due && ck_dt > 0) next_ck = next_checkpoint_time();
    // ckpt-glue end
  }
  // ckpt-glue begin
  // FLASH writes a last checkpoint at the end of the run; it cannot overlap with computing.
  if ((tickets.empty() || tickets.back().step() != s.step) && !write()) return 1;
  double io = now();  // this rank's seconds spent on checkpoints: the final drain + inside checkpoint()
  ckpt::Status drained = rt.wait_all();
  io = now() - io;
  for (const ckpt::Ticket& t : tickets) io += t.stats().blocked_s;
  // ckpt-glue end
  MPI_Barrier(comm);
  const double seconds = now() - t_start;
  // ckpt-glue begin
  int ok = drained.ok() ? 1 : 0, all = 0;  // wait_all() reports this rank's drains: stop everywhere or nowhere
  MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, comm);
  if (!all) {
    say("amr_sedov: %s\n", drained.to_string().c_str());
    return 1;
  }
  double io_sum = 0, io_max = 0;
  MPI_Reduce(&io, &io_sum, 1, MPI_DOUBLE, MPI_SUM, 0, comm);
  MPI_Reduce(&io, &io_max, 1, MPI_DOUBLE, MPI_MAX, 0, comm);
  // ckpt-glue end
  const std::int64_t nparticles = sim.global_particles();
  const double radius = sim.shock_radius();
  const std::string state = sim.digest();
  const double analytic = XI0 * std::pow(s.time * s.time / 1.0, 0.25);  // E = 1, rho0 = 1
  int lmin = 99, lmax = 0;
  for (const sedov::BlockKey& k : sim.tree().leaves()) lmin = std::min(lmin, k.level), lmax = std::max(lmax, k.level);
  say("summary: steps %lld..%lld, time %.6g, %s mesh, blocks %lld (levels %d..%d; %lld..%lld during the run), "
      "regrids %lld, particles %lld, %d ranks\n",
      static_cast<long long>(first_step), static_cast<long long>(s.step), s.time, uniform ? "uniform" : "amr",
      static_cast<long long>(s.nblocks), lmin, lmax, static_cast<long long>(min_blocks),
      static_cast<long long>(max_blocks), static_cast<long long>(s.regrids), static_cast<long long>(nparticles), size);
  // ckpt-glue begin
  const double per_rank = io_sum / size;
  say("io: transport %s, checkpoints %zu, avg/proc per checkpoint %.4f s, io time %.4f s (rank average; max %.4f s), "
      "run %.3f s, %.2f %% of the run on I/O\n",
      options.transport.c_str(), tickets.size(), tickets.empty() ? 0.0 : per_rank / static_cast<double>(tickets.size()),
      per_rank, io_max, seconds, 100.0 * per_rank / seconds);
  // ckpt-glue end
  say("shock radius: %.6f analytic: %.6f error: %.3f%%\n", radius, analytic, 100.0 * (radius - analytic) / analytic);
  say("state: %s\n", state.c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
  Args a;
  CLI::App app{"2D Sedov blast on block-structured AMR with tracer particles, checkpointed through ckpt"};
  app.add_option("--tmax", a.tmax, "final time (a restart continues to it)")->required()->check(CLI::PositiveNumber);
  app.add_option("--max-level", a.max_level, "finest level (level 1: 2x2 blocks of 16x16 cells)")
      ->check(CLI::Range(1, 12));
  // ckpt-glue begin
  app.add_option("--checkpoint-every", a.every, "checkpoint every K steps")->check(CLI::PositiveNumber);
  app.add_option("--dir", a.dir, "checkpoint directory")->required();
  app.add_flag("--restart", a.restart, "continue from the newest complete checkpoint in --dir");
  // ckpt-glue end
  app.add_option("--mesh", a.mesh, "amr or uniform (at --max-level)")->check(CLI::IsMember({"amr", "uniform"}));
  // ckpt-glue begin
  app.add_option("--transport", a.transport, "ckpt transport (posix, hdf5, hdf5-sync, ...); overrides the config");
  app.add_option("--config", a.config, "ckpt YAML configuration file");
  // ckpt-glue end
  app.add_option("--particles", a.particles, "tracer particles at the start")->check(CLI::NonNegativeNumber);
  // ckpt-glue begin
  app.add_option("--checkpoint-dt", a.checkpoint_dt,
                 "checkpoint at t = T, 2T, ... (steps shortened to land on them) instead of every K steps")
      ->check(CLI::PositiveNumber);
  // ckpt-glue end
  app.add_option("--refine-cutoff", a.cutoffs.refine, "Lohner estimator: refine a block above this (0.8)")
      ->check(CLI::Range(0.0, 1.0));
  app.add_option("--derefine-cutoff", a.cutoffs.derefine, "Lohner estimator: coarsen a block below this (0.2)")
      ->check(CLI::Range(0.0, 1.0));
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int rc = g_rank == 0 ? app.exit(e) : (e.get_exit_code() == 0 ? 0 : 2);
    MPI_Finalize();
    return rc;
  }
  if (a.cutoffs.derefine >= a.cutoffs.refine) {
    say("amr_sedov: --derefine-cutoff %g must be below --refine-cutoff %g\n", a.cutoffs.derefine, a.cutoffs.refine);
    MPI_Finalize();
    return 2;
  }
  // ckpt-glue begin
  ckpt::Options options = a.config.empty() ? ckpt::Options() : ckpt::Options::load(a.config);  // errors: run()
  options.dir = a.dir;
  if (!a.transport.empty()) options.transport = a.transport;
  // ckpt-glue end
  int rc = 1;
  Kokkos::initialize(argc, argv);
  {
    int size = 1;
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    say("amr_sedov: %s mesh, max level %d (finest %d x %d cells), tmax %g, %d ranks, transport %s, Kokkos %s\n",
        a.mesh.c_str(), a.max_level, NROOT * sedov::NB << (a.max_level - 1), NROOT * sedov::NB << (a.max_level - 1),
        a.tmax, size, options.transport.c_str(), Kokkos::DefaultHostExecutionSpace::name());
    try {
      rc = run(a, options);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "amr_sedov (rank %d): %s\n", g_rank, e.what());
      MPI_Abort(MPI_COMM_WORLD, 3);
    }
  }
  Kokkos::finalize();
  MPI_Finalize();
  return rc;
}
