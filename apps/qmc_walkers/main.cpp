// qmc_walkers: variational and diffusion Monte Carlo of N distinguishable particles in a 3D
// harmonic trap, on Kokkos, checkpointing every Monte Carlo step through ckpt (see README.md).
//
//   mpiexec -n 4 qmc_walkers --steps 400 --walkers 500 --checkpoint-every 1 --dir /tmp/qmc
//   mpiexec -n 4 qmc_walkers --steps 800 --walkers 500 --checkpoint-every 1 --dir /tmp/qmc --restart
//
// The last two lines on rank 0 are `energy: <E> +- <error>` and `state: <digest>`.
#include <mpi.h>
#include <xxhash.h>

#include <CLI/CLI.hpp>
#include <Kokkos_Core.hpp>

#include <algorithm>
#include <cinttypes>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "blocking.hpp"
#include "ckpt/ckpt.hpp"
#include "population.hpp"

namespace {

struct Args {
  std::int64_t steps = 0;
  std::uint64_t walkers = 500;  // per rank, at the start
  std::int64_t every = 1;
  std::string dir;
  bool restart = false;
  std::string transport;
  std::string config;
  std::string size = "small";
  std::string mode = "dmc";
  std::uint64_t seed = 1;
  int particles = 4;
  double alpha = 0.4;
  double tau = 0;            // 0: the mode's default
  std::int64_t warmup = -1;  // -1: the mode's default (never derived from --steps; see main())
  std::int64_t rebalance_every = 4;
  bool compare_null = false;
};

/// MiB of checkpoint data per rank of each --size preset.
double preset_mib(const std::string& size) {
  if (size == "none") return 0;
  if (size == "small") return 1;
  if (size == "medium") return 16;
  return 64;  // large
}

/// Everything besides the walkers that a continued run needs. Every field has the same value on
/// every rank, so ckpt marks the scalars uniform and they restart on any rank count.
struct State {
  std::int64_t step = 0;
  double trial_energy = 0;      // E_T of the next step
  double reference_energy = 0;  // smoothed energy estimate that E_T is steered around
  std::uint64_t population_target = 0;
  std::uint64_t next_id = 0;  // first unused walker id
  std::uint64_t global_walkers = 0;
  std::int64_t accepted = 0, proposed = 0;
  // The parameters the trajectory depends on; a restart checks them against the command line.
  std::int64_t particles = 0, dmc = 0, history = 0, warmup = 0;
  double alpha = 0, tau = 0;
  std::uint64_t seed = 0;
  qmc::Blocking blocking;  // of the per-step mixed estimator, after warm-up
};

struct Summary {
  double seconds = 0;    // main loop plus draining the last checkpoints
  double blocked_s = 0;  // max over ranks of the summed time inside checkpoint()
  std::uint64_t checkpoints = 0, bytes = 0;
  double energy = 0, error = 0;
  std::string state;
  bool ok = false;
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

bool all_ok(bool mine) {
  int v = mine ? 1 : 0, all = 0;
  MPI_Allreduce(&v, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  return all == 1;
}

/// Digest of the walkers and of every scalar and accumulator of the state (16 hex digits).
std::string state_digest(const qmc::Population& pop, const State& s) {
  std::vector<std::uint64_t> words = {pop.digest(),
                                      pop.global_count(),
                                      static_cast<std::uint64_t>(s.step),
                                      s.population_target,
                                      s.next_id,
                                      static_cast<std::uint64_t>(s.accepted),
                                      static_cast<std::uint64_t>(s.proposed)};
  auto add_double = [&](double x) {
    std::uint64_t u;
    std::memcpy(&u, &x, sizeof u);
    words.push_back(u);
  };
  add_double(s.trial_energy);
  add_double(s.reference_energy);
  for (std::size_t i = 0; i < qmc::Blocking::size(); ++i) add_double(s.blocking.data()[i]);
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016" PRIx64,
                static_cast<std::uint64_t>(XXH3_64bits(words.data(), words.size() * 8)));
  return hex;
}

/// This rank's walkers as rows of a joined array: ckpt concatenates every rank's rows at commit, and
/// a restart reads this rank's share of their balanced split (the split allocate_balanced() makes).
ckpt::Joined walker_rows(const qmc::Population& pop, std::uint64_t width) {
  if (width == 0) return ckpt::Joined{{pop.local_count()}, std::nullopt};
  return ckpt::Joined{{pop.local_count(), width}, std::nullopt};
}

/// Registers (first call) or re-points (later calls) the walker arrays: their pointers and per-rank
/// counts change every step.
ckpt::Status sync_walker_regions(ckpt::Runtime& rt, qmc::Population& pop, int dims, bool first) {
  struct Region {
    const char* name;
    void* ptr;
    ckpt::DType type;
    std::uint64_t width;
  };
  std::vector<Region> regions = {
      {"walkers/id", pop.ids(), ckpt::DType::u64, 0},
      {"walkers/weight", pop.weights(), ckpt::DType::f64, 0},
      {"walkers/local_energy", pop.local_energies(), ckpt::DType::f64, 0},
      {"walkers/position", pop.positions(), ckpt::DType::f64, static_cast<std::uint64_t>(dims)},
  };
  if (pop.history() > 0)
    regions.push_back(
        {"walkers/history", pop.histories(), ckpt::DType::f64, static_cast<std::uint64_t>(pop.history())});
  for (const Region& r : regions) {
    const ckpt::Joined rows = walker_rows(pop, r.width);
    CKPT_RETURN_IF_ERROR(first ? rt.protect(r.name, r.ptr, r.type, rows) : rt.update(r.name, r.ptr, rows));
  }
  return ckpt::Status::OK();
}

/// The per-walker history (doubles) that brings a rank's checkpoint to the --size preset.
int history_for(const Args& a) {
  const double bytes = preset_mib(a.size) * 1048576.0 / static_cast<double>(std::max<std::uint64_t>(a.walkers, 1));
  const int dims = 3 * a.particles;
  const double core = 8.0 * (3 + dims);  // id, weight, local energy, position
  const int entries = static_cast<int>(std::max(0.0, (bytes - core) / (8.0 * dims)));
  return entries * dims;
}

/// Loads the newest complete checkpoint with one restart: inspect() tells the stored walker count and
/// history length, the walker arrays are allocated and registered with them, then everything (the
/// scalars too) is restored at once. Returns the step loaded.
ckpt::Result<std::int64_t> restore(ckpt::Runtime& rt, State& s, std::unique_ptr<qmc::Population>& pop,
                                   const qmc::Physics& physics, std::int64_t warmup, MPI_Comm comm) {
  const ckpt::Result<std::optional<std::int64_t>> newest = rt.latest();
  if (!newest.ok()) return newest.status();
  if (!newest.value()) return ckpt::Status(ckpt::Code::not_found, "no complete checkpoint in " + rt.options().dir);
  const std::int64_t step = *newest.value();
  ckpt::Result<ckpt::CheckpointReader> stored = rt.inspect(step);
  if (!stored.ok()) return stored.status();
  ckpt::Result<ckpt::VariableInfo> ids = stored->variable("walkers/id");
  if (!ids.ok() || ids->shape.size() != 1)
    return ckpt::Status(ckpt::Code::mismatch, "checkpoint " + std::to_string(step) + " holds no walkers/id array");
  ckpt::Result<ckpt::VariableInfo> hist = stored->variable("walkers/history");
  const std::uint64_t history = hist.ok() && hist->shape.size() == 2 ? hist->shape[1] : 0;
  pop = std::make_unique<qmc::Population>(physics, static_cast<int>(history), comm);
  pop->allocate_balanced(ids->shape[0]);
  CKPT_RETURN_IF_ERROR(sync_walker_regions(rt, *pop, physics.dims(), true));
  ckpt::Status st = rt.restart(step);
  if (!all_ok(st.ok())) return st.ok() ? ckpt::Status(ckpt::Code::corrupt, "restart failed on another rank") : st;
  if (s.particles != physics.particles || s.dmc != (physics.dmc ? 1 : 0) || s.alpha != physics.alpha ||
      s.tau != physics.tau || s.seed != physics.seed || s.warmup != warmup)
    return ckpt::Status(ckpt::Code::mismatch, "checkpoint " + std::to_string(step) +
                                                  " was written with other --particles/--mode/"
                                                  "--alpha/--timestep/--seed/--warmup than given now");
  // Only rank 0 stored the (replicated) accumulators; see the Block in run().
  MPI_Bcast(s.blocking.data(), static_cast<int>(qmc::Blocking::size()), MPI_DOUBLE, 0, comm);
  return step;
}

Summary run(const Args& a, const ckpt::Options& options, bool restart, bool quiet) {
  Summary out;
  MPI_Comm comm = MPI_COMM_WORLD;
  int size = 1;
  MPI_Comm_size(comm, &size);
  ckpt::Runtime rt(comm, options);
  if (!all_ok(rt.status().ok())) {
    say("qmc_walkers: cannot start the checkpoint runtime: %s\n", rt.status().to_string().c_str());
    return out;
  }

  qmc::Physics physics;
  physics.particles = a.particles;
  physics.alpha = a.alpha;
  physics.tau = a.tau;
  physics.seed = a.seed;
  physics.dmc = a.mode == "dmc";
  State s;
  s.particles = physics.particles;
  s.dmc = physics.dmc ? 1 : 0;
  s.alpha = physics.alpha;
  s.tau = physics.tau;
  s.seed = physics.seed;
  s.history = history_for(a);
  s.warmup = a.warmup;
  s.population_target = a.walkers * static_cast<std::uint64_t>(size);

  rt.protect_scalar("state/step", &s.step);
  rt.protect_scalar("state/trial_energy", &s.trial_energy);
  rt.protect_scalar("state/reference_energy", &s.reference_energy);
  rt.protect_scalar("state/population_target", &s.population_target);
  rt.protect_scalar("state/next_id", &s.next_id);
  rt.protect_scalar("state/global_walkers", &s.global_walkers);
  rt.protect_scalar("state/accepted", &s.accepted);
  rt.protect_scalar("state/proposed", &s.proposed);
  rt.protect_scalar("params/particles", &s.particles);
  rt.protect_scalar("params/dmc", &s.dmc);
  rt.protect_scalar("params/history", &s.history);
  rt.protect_scalar("params/alpha", &s.alpha);
  rt.protect_scalar("params/tau", &s.tau);
  rt.protect_scalar("params/seed", &s.seed);
  rt.protect_scalar("params/warmup", &s.warmup);
  // The accumulators are replicated; a local region would not restart on another rank count, so
  // they are a global array held by rank 0 alone (count 0 elsewhere) and broadcast after restart.
  const std::uint64_t nblk = qmc::Blocking::size();
  rt.protect("estimator/blocking", s.blocking.data(), ckpt::DType::f64,
             ckpt::Block{{nblk}, {0}, {g_rank == 0 ? nblk : 0}});

  std::unique_ptr<qmc::Population> pop;
  bool restored = false;
  if (restart) {
    ckpt::Result<std::int64_t> r = restore(rt, s, pop, physics, s.warmup, comm);
    if (r.ok()) {
      restored = true;
      if (!quiet)
        say("restored: step %lld walkers %llu on %d ranks, state %s\n", static_cast<long long>(r.value()),
            static_cast<unsigned long long>(pop->global_count()), size, state_digest(*pop, s).c_str());
    } else if (r.status().code() == ckpt::Code::not_found && !pop) {
      say("restart: %s; starting from step 0\n", r.status().to_string().c_str());
    } else {
      say("qmc_walkers: restart failed: %s\n", r.status().to_string().c_str());
      return out;
    }
  }
  if (!restored) {
    pop = std::make_unique<qmc::Population>(physics, static_cast<int>(s.history), comm);
    pop->initialize(s.population_target);
    const qmc::StepSums e0 = pop->energy_sums();
    s.reference_energy = qmc::from_fixed(e0.weighted_energy) / qmc::from_fixed(e0.weight);
    s.trial_energy = s.reference_energy;
    s.next_id = pop->global_count();
    s.global_walkers = pop->global_count();
    if (!all_ok(sync_walker_regions(rt, *pop, physics.dims(), true).ok())) {
      say("qmc_walkers: cannot register the walker arrays\n");
      return out;
    }
  }
  const std::int64_t warmup = s.warmup;
  const std::int64_t first_step = s.step + 1;
  const int in_flight = options.max_in_flight;

  std::vector<ckpt::Ticket> tickets;
  double blocked = 0;
  MPI_Barrier(comm);
  const double t0 = MPI_Wtime();
  for (std::int64_t step = first_step; step <= a.steps; ++step) {
    const qmc::StepSums sums = pop->advance(step, s.trial_energy);
    const double e_step = qmc::from_fixed(sums.weighted_energy) / qmc::from_fixed(sums.weight);
    s.accepted += sums.accepted;
    s.proposed += sums.walkers;
    if (step > warmup) s.blocking.add(e_step);
    if (physics.dmc) {
      s.next_id = pop->branch(step, s.next_id);
      if (pop->global_count() == 0) {
        say("qmc_walkers: the population died out at step %lld\n", static_cast<long long>(step));
        return out;
      }
      // Population control: E_T follows the energy estimate (relaxation time 1 in imaginary time)
      // and is pushed down when there are too many walkers, up when too few.
      s.reference_energy += std::min(1.0, physics.tau) * (e_step - s.reference_energy);
      s.trial_energy = s.reference_energy -
                       std::log(static_cast<double>(pop->global_count()) / static_cast<double>(s.population_target));
    }
    s.global_walkers = pop->global_count();
    if (step % a.rebalance_every == 0) pop->rebalance();
    s.step = step;
    if (step % a.every == 0) {
      ckpt::Status st = sync_walker_regions(rt, *pop, physics.dims(), false);
      if (!all_ok(st.ok())) {
        say("qmc_walkers: %s\n", st.to_string().c_str());
        return out;
      }
      tickets.push_back(rt.checkpoint(step));
      blocked += tickets.back().stats().blocked_s;
      // checkpoint() waited until at most max_in_flight were uncommitted, so this older ticket is
      // done on every rank and its outcome (the same everywhere) can stop the run collectively. With
      // on_busy = coalesce checkpoint() never waits: failures come from wait_all() at the end.
      const std::size_t n = tickets.size();
      if (rt.options().on_busy != ckpt::Options::OnBusy::coalesce && n > static_cast<std::size_t>(in_flight)) {
        ckpt::Status old = tickets[n - 1 - in_flight].wait();
        if (old.failed()) {
          say("qmc_walkers: checkpoint %lld failed: %s\n", static_cast<long long>(tickets[n - 1 - in_flight].step()),
              old.to_string().c_str());
          return out;
        }
      }
    }
  }
  ckpt::Status drained = rt.wait_all();
  MPI_Barrier(comm);
  out.seconds = MPI_Wtime() - t0;
  if (!drained.ok()) {
    say("qmc_walkers: %s\n", drained.to_string().c_str());
    return out;
  }
  std::uint64_t bytes = 0;
  for (const ckpt::Ticket& t : tickets) bytes += t.stats().bytes;
  MPI_Reduce(&bytes, &out.bytes, 1, MPI_UINT64_T, MPI_SUM, 0, comm);
  MPI_Reduce(&blocked, &out.blocked_s, 1, MPI_DOUBLE, MPI_MAX, 0, comm);
  out.checkpoints = tickets.size();
  out.energy = s.blocking.mean();
  out.error = s.blocking.error();
  out.state = state_digest(*pop, s);
  out.ok = true;
  if (!quiet) {
    say("summary: steps %lld..%lld (%lld warm-up), walkers %llu (target %llu), acceptance %.5f\n",
        static_cast<long long>(first_step), static_cast<long long>(a.steps), static_cast<long long>(warmup),
        static_cast<unsigned long long>(pop->global_count()), static_cast<unsigned long long>(s.population_target),
        s.proposed > 0 ? static_cast<double>(s.accepted) / static_cast<double>(s.proposed) : 0.0);
    say("summary: reference energies: VMC (analytic) %.6f, exact ground state %.6f\n", physics.vmc_energy(),
        physics.exact_energy());
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
  int size = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &size);

  Args a;
  CLI::App app{"QMC walkers (VMC/DMC, harmonic trap) with a checkpoint every Monte Carlo step"};
  app.add_option("--steps", a.steps, "Monte Carlo steps in total (a restart continues to this step)")->required();
  app.add_option("--walkers", a.walkers, "walkers per rank at the start (population target / ranks)");
  app.add_option("--checkpoint-every", a.every, "checkpoint every K steps")->check(CLI::PositiveNumber);
  app.add_option("--dir", a.dir, "checkpoint directory")->required();
  app.add_flag("--restart", a.restart, "continue from the newest complete checkpoint in --dir");
  app.add_option("--transport", a.transport, "ckpt transport (posix, null, ...); overrides the config");
  app.add_option("--config", a.config, "ckpt YAML configuration file");
  app.add_option("--size", a.size,
                 "checkpoint data per rank: none (walkers only), small 1 MiB, medium 16 MiB, large 64 MiB")
      ->check(CLI::IsMember({"none", "small", "medium", "large"}));
  app.add_option("--mode", a.mode, "vmc or dmc")->check(CLI::IsMember({"vmc", "dmc"}));
  app.add_option("--seed", a.seed, "random seed");
  app.add_option("--particles", a.particles, "number of particles N")->check(CLI::PositiveNumber);
  app.add_option("--alpha", a.alpha, "trial function exponent (0.5 is exact)")->check(CLI::PositiveNumber);
  app.add_option("--timestep", a.tau, "imaginary time step (default: dmc 0.01, vmc 0.3)");
  app.add_option("--warmup", a.warmup, "steps left out of the estimate (default: dmc 2/timestep, vmc 50)");
  app.add_option("--rebalance-every", a.rebalance_every, "rebalance walkers across ranks every R steps")
      ->check(CLI::PositiveNumber);
  app.add_flag("--compare-null", a.compare_null, "run again with the null transport and report the overhead");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int rc = g_rank == 0 ? app.exit(e) : (e.get_exit_code() == 0 ? 0 : 2);
    MPI_Finalize();
    return rc;
  }
  if (a.tau <= 0) a.tau = a.mode == "dmc" ? 0.01 : 0.3;
  // The warm-up must not depend on --steps: a run to M steps continued to N must accumulate the
  // same samples as a run straight to N. DMC: 2 units of imaginary time (the trial function's
  // excited admixture decays as exp(-2 t)); VMC: 50 steps (|psi_T|^2 is sampled from the start).
  if (a.warmup < 0) a.warmup = a.mode == "dmc" ? static_cast<std::int64_t>(std::llround(2.0 / a.tau)) : 50;

  ckpt::Options options = a.config.empty() ? ckpt::Options() : ckpt::Options::load(a.config);
  if (!options.error.ok()) {
    say("qmc_walkers: %s\n", options.error.to_string().c_str());
    MPI_Finalize();
    return 2;
  }
  options.dir = a.dir;
  if (!a.transport.empty()) options.transport = a.transport;

  int rc = 1;
  Kokkos::initialize(argc, argv);
  {
    const int dims = 3 * a.particles, history = history_for(a);
    const double mib = static_cast<double>(a.walkers) * 8.0 * (3 + dims + history) / 1048576.0;
    say("qmc_walkers: %s, N=%d particles, alpha=%g, tau=%g, seed %llu, %d ranks x %llu walkers, transport %s, "
        "Kokkos %s\n",
        a.mode.c_str(), a.particles, a.alpha, a.tau, static_cast<unsigned long long>(a.seed), size,
        static_cast<unsigned long long>(a.walkers), options.transport.c_str(), Kokkos::DefaultExecutionSpace::name());
    say("size %s: %.2f MiB of checkpoint data per rank per step (%d history doubles per walker)\n", a.size.c_str(), mib,
        history);
    Summary main_run = run(a, options, a.restart, false);
    if (main_run.ok) {
      rc = 0;
      say("summary: checkpoints written %llu, bytes %.1f MiB (all ranks), time blocked in checkpoint %.3f s (max "
          "rank), run time %.3f s\n",
          static_cast<unsigned long long>(main_run.checkpoints), static_cast<double>(main_run.bytes) / 1048576.0,
          main_run.blocked_s, main_run.seconds);
      if (a.compare_null && a.restart) {
        say("summary: --compare-null is ignored with --restart (the runs would cover different steps)\n");
      } else if (a.compare_null) {
        ckpt::Options null_options = options;
        null_options.transport = "null";
        null_options.layout = ckpt::Options::Layout::directory;  // a series needs posix; null writes nothing
        null_options.dir = a.dir + "/null-compare";
        Summary ref = run(a, null_options, false, true);
        if (!ref.ok) {
          rc = 1;
        } else {
          say("summary: null-transport run %.3f s, blocked %.3f s; overhead %.1f %% (%s)\n", ref.seconds, ref.blocked_s,
              100.0 * (main_run.seconds - ref.seconds) / ref.seconds,
              ref.state == main_run.state ? "same final state" : "DIFFERENT final state");
        }
      }
      say("energy: %.10f +- %.10f\n", main_run.energy, main_run.error);
      say("state: %s\n", main_run.state.c_str());
    }
  }
  Kokkos::finalize();
  MPI_Finalize();
  return rc;
}
