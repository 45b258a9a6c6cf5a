// The evolution of a qmc_walkers run, read from its checkpoints alone (no log, no restart): the C++
// twin of evolution.py, and an example of a Reader opened on a communicator.
//
//     mpiexec -n 4 qmc_walkers --mode dmc --steps 300 --walkers 250 --checkpoint-every 1 \
//         --dir /tmp/qmc --config keep.yaml                  # keep.yaml: "keep: 100000"
//     mpiexec -n 4 evolution /tmp/qmc                        # or serially: evolution /tmp/qmc
//
// Rank 0 lists the run and reads each step's index once; every rank gets them (Reader::open(comm, ...)).
// Each rank then reads its share of the walker arrays - whatever rank count wrote them - and the sums
// are reduced. One line per complete checkpoint on rank 0:
//     step <s> walkers <n> trial_energy <E_T> mean_local_energy <sum(w E_L) / sum(w)>
#include <mpi.h>

#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "ckpt/reader.hpp"

namespace {

/// Sums of weight and weight * local energy over this rank's share of the walkers of step `c`.
ckpt::Status weighted_sums(ckpt::CheckpointReader& c, int rank, int size, double sums[2]) {
  auto w = c.variable("walkers/weight");
  if (!w.ok()) return w.status();
  const std::uint64_t n = w->shape.at(0);
  const std::uint64_t lo = n * rank / size, count = n * (rank + 1) / size - lo;
  std::vector<double> weight(count), energy(count);
  CKPT_RETURN_IF_ERROR(c.read("walkers/weight", {lo}, {count}, weight.data(), count * sizeof(double)));
  CKPT_RETURN_IF_ERROR(c.read("walkers/local_energy", {lo}, {count}, energy.data(), count * sizeof(double)));
  sums[0] = sums[1] = 0;
  for (std::uint64_t i = 0; i < count; ++i) {
    sums[0] += weight[i];
    sums[1] += weight[i] * energy[i];
  }
  return ckpt::Status::OK();
}

/// A scalar every rank stored alike (the lowest writer rank's copy).
template <class T>
ckpt::Status uniform_scalar(ckpt::CheckpointReader& c, const std::string& name, T& out) {
  auto v = c.variable(name);
  if (!v.ok()) return v.status();
  if (v->ranks.empty()) return ckpt::Status(ckpt::Code::not_found, name + " has no block");
  return c.read_rank(name, v->ranks.front(), &out, sizeof out);
}

int run(const std::string& root, int rank, int size) {
  auto r = ckpt::Reader::open(MPI_COMM_WORLD, root);
  if (!r.ok()) {
    if (rank == 0) std::fprintf(stderr, "evolution: %s\n", r.status().to_string().c_str());
    return 1;
  }
  for (const std::int64_t step : r->steps()) {
    auto c = r->open_step(step);  // collective: one read of the index
    if (!c.ok()) {
      if (rank == 0) std::fprintf(stderr, "evolution: %s\n", c.status().to_string().c_str());
      return 1;
    }
    double local[2] = {0, 0}, global[2] = {0, 0};
    std::uint64_t walkers = 0;
    double trial = 0;
    ckpt::Status s = weighted_sums(c.value(), rank, size, local);
    if (s.ok()) s = uniform_scalar(c.value(), "state/global_walkers", walkers);
    if (s.ok()) s = uniform_scalar(c.value(), "state/trial_energy", trial);
    int bad = s.ok() ? 0 : 1, any_bad = 0;
    MPI_Allreduce(&bad, &any_bad, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (any_bad) {
      if (!s.ok())
        std::fprintf(stderr, "evolution: rank %d, step %" PRId64 ": %s\n", rank, step, s.to_string().c_str());
      return 1;
    }
    MPI_Reduce(local, global, 2, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
    if (rank == 0)
      std::printf("step %" PRId64 " walkers %" PRIu64 " trial_energy %.12g mean_local_energy %.12g\n", step, walkers,
                  trial, global[1] / global[0]);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  int rc = 2;
  if (argc != 2) {
    if (rank == 0) std::fprintf(stderr, "usage: evolution <checkpoint root>\n");
  } else {
    rc = run(argv[1], rank, size);
  }
  MPI_Finalize();
  return rc;
}
