/// \file population.hpp
/// The walker population of one rank: Kokkos Views holding this rank's contiguous segment of the
/// global walker sequence, and the kernels that move, weight, branch and rebalance walkers.
///
/// Determinism: the global sequence of walkers (ids, positions, order) after every step is a pure
/// function of the seed and the step, independent of the number of ranks. Three things make it so:
///  - random numbers are keyed by (walker id, step) (rng.hpp);
///  - branching replaces a walker in place by its copies; new ids come from a global counter in
///    global sequence order (an exclusive scan over ranks), so they are unique and deterministic;
///  - sums over walkers are taken in fixed point (int64, 2^-32 resolution), whose addition is
///    associative, so the estimators and the trial energy do not depend on how walkers are split.
/// Rebalancing only moves the segment boundaries, never the order.
#ifndef QMC_WALKERS_POPULATION_HPP
#define QMC_WALKERS_POPULATION_HPP

#include <mpi.h>

#include <Kokkos_Core.hpp>

#include <cstdint>

namespace qmc {

/// N distinguishable particles in an isotropic 3D harmonic trap (hbar = m = omega = 1) with the
/// trial function psi_T(R) = exp(-alpha sum_i r_i^2). alpha = 1/2 is exact; other values are not.
struct Physics {
  int particles = 4;
  double alpha = 0.4;
  double tau = 0.01;  ///< imaginary time step
  std::uint64_t seed = 1;
  bool dmc = true;
  int dims() const { return 3 * particles; }
  /// <psi_T|H|psi_T> / <psi_T|psi_T> = N (3 alpha / 2 + 3 / (8 alpha)) (README derives it).
  double vmc_energy() const { return particles * (1.5 * alpha + 3.0 / (8.0 * alpha)); }
  /// Ground state: 3/2 per particle.
  double exact_energy() const { return 1.5 * particles; }
};

/// Global sums of one step in fixed point (see to_fixed), identical on every rank.
struct StepSums {
  std::int64_t weight = 0;           ///< sum of w
  std::int64_t weighted_energy = 0;  ///< sum of w * E_L
  std::int64_t accepted = 0;         ///< accepted moves
  std::int64_t walkers = 0;          ///< proposed moves (walkers moved)
  KOKKOS_INLINE_FUNCTION StepSums& operator+=(const StepSums& o) {
    weight += o.weight;
    weighted_energy += o.weighted_energy;
    accepted += o.accepted;
    walkers += o.walkers;
    return *this;
  }
  KOKKOS_INLINE_FUNCTION void operator+=(const volatile StepSums& o) volatile {
    weight += o.weight;
    weighted_energy += o.weighted_energy;
    accepted += o.accepted;
    walkers += o.walkers;
  }
};

constexpr double fixed_scale = 4294967296.0;  // 2^32
KOKKOS_INLINE_FUNCTION std::int64_t to_fixed(double x) {
  return static_cast<std::int64_t>(x * fixed_scale + (x >= 0 ? 0.5 : -0.5));
}
inline double from_fixed(std::int64_t x) { return static_cast<double>(x) / fixed_scale; }

class Population {
 public:
  using Matrix = Kokkos::View<double**, Kokkos::LayoutRight>;
  using Vector = Kokkos::View<double*>;
  using IdVector = Kokkos::View<std::uint64_t*>;
  using IndexVector = Kokkos::View<std::int64_t*>;

  /// `history` = doubles of per-walker history buffer (a multiple of dims(); 0 for none): the last
  /// history/dims() positions of the walker, the stand-in for the per-walker buffers (determinant
  /// inverses, Jastrow caches) that make real QMC checkpoints large.
  Population(const Physics& physics, int history, MPI_Comm comm);

  /// Walkers 0..global_count-1, balanced over the ranks, positions drawn exactly from |psi_T|^2.
  void initialize(std::uint64_t global_count);
  /// Room for this rank's balanced share of `global_count` walkers; contents to be filled by restart.
  void allocate_balanced(std::uint64_t global_count);
  /// One drift-diffusion + Metropolis move of every walker, local energies, DMC weights
  /// exp(-tau (E_L(old) + E_L(new)) / 2 - E_T)) and branching multiplicities. Collective.
  StepSums advance(std::int64_t step, double trial_energy);
  /// Replaces each walker by floor(w + u) copies of weight 1, in place in the global order; extra
  /// copies get ids next_id, next_id + 1, ... in global order. Returns the new next_id. Collective.
  std::uint64_t branch(std::int64_t step, std::uint64_t next_id);
  /// Gives every rank floor-balanced contiguous segments of the (unchanged) global order. Collective.
  void rebalance();
  /// Sums of E_L over the current population at unit weight (the initial estimate). Collective.
  StepSums energy_sums() const;
  /// Order-sensitive hash of every walker's id, weight, energy, position and history. It depends
  /// on the global sequence only, not on the decomposition. Collective.
  std::uint64_t digest() const;

  std::uint64_t local_count() const { return m_count; }
  std::uint64_t global_count() const { return m_global; }
  int history() const { return m_history; }

  // This rank's arrays, first local_count() rows valid; pointers change when the population does.
  std::uint64_t* ids() { return m_cur.id.data(); }
  double* weights() { return m_cur.w.data(); }
  double* local_energies() { return m_cur.el.data(); }
  double* positions() { return m_cur.pos.data(); }
  double* histories() { return m_cur.hist.data(); }

 private:
  struct Arrays {
    IdVector id;
    Vector w, el;
    Matrix pos, hist;
    std::uint64_t capacity = 0;
    void reserve(std::uint64_t n, int dims, int history);
  };
  /// Recomputes m_offset and m_global after m_count changed.
  void update_offsets();

  Physics m_physics;
  int m_history;
  MPI_Comm m_comm;
  int m_rank = 0, m_size = 1;
  Arrays m_cur, m_next;  // double buffer: branch and rebalance write m_next, then swap
  IndexVector m_mult, m_dest, m_extra;
  std::uint64_t m_count = 0, m_offset = 0, m_global = 0;
};

}  // namespace qmc

#endif  // QMC_WALKERS_POPULATION_HPP
