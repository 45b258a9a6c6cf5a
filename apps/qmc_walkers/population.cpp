#include "population.hpp"

#include <algorithm>
#include <cstring>
#include <vector>

#include "rng.hpp"

namespace Kokkos {
// Lets Kokkos::Sum reduce a StepSums (all four fields at once).
template <>
struct reduction_identity<qmc::StepSums> {
  KOKKOS_FORCEINLINE_FUNCTION static qmc::StepSums sum() { return qmc::StepSums(); }
};
}  // namespace Kokkos

namespace qmc {
namespace {

// Streams of the counter-based generator (one per use within a step).
constexpr std::uint64_t stream_move = 1, stream_decide = 2, stream_init = 3;
// Copies of one walker are capped: an outlier weight must not blow up the population. At the time
// steps used here w stays within a few per cent of 1, so the cap never binds in practice.
constexpr std::int64_t max_copies = 4;

using Range = Kokkos::RangePolicy<Kokkos::DefaultExecutionSpace>;

std::uint64_t balanced_start(std::uint64_t global, int rank, int size) {
  return global * static_cast<std::uint64_t>(rank) / static_cast<std::uint64_t>(size);
}

/// Local energy of psi_T = exp(-alpha r^2) for the sum r2 of all squared coordinates:
/// -1/2 lap(psi)/psi = sum over coordinates of (alpha - 2 alpha^2 x^2), V = r2 / 2.
KOKKOS_INLINE_FUNCTION double local_energy(double alpha, int dims, double r2) {
  const double kinetic = alpha * dims - 2.0 * alpha * alpha * r2;
  return kinetic + 0.5 * r2;
}

KOKKOS_INLINE_FUNCTION std::uint64_t bits_of(double x) {
  std::uint64_t u;
  std::memcpy(&u, &x, sizeof u);
  return u;
}

KOKKOS_INLINE_FUNCTION std::uint64_t mix(std::uint64_t h, std::uint64_t v) { return splitmix64(h ^ v); }

}  // namespace

void Population::Arrays::reserve(std::uint64_t n, int dims, int history) {
  if (n <= capacity && id.extent(0) > 0) return;
  // Headroom so that a population that breathes by a few per cent does not reallocate every step.
  const std::uint64_t cap = std::max<std::uint64_t>(n + n / 8 + 16, capacity);
  const auto no_init = Kokkos::WithoutInitializing;
  id = IdVector(Kokkos::view_alloc("walkers/id", no_init), cap);
  w = Vector(Kokkos::view_alloc("walkers/weight", no_init), cap);
  el = Vector(Kokkos::view_alloc("walkers/local_energy", no_init), cap);
  pos = Matrix(Kokkos::view_alloc("walkers/position", no_init), cap, dims);
  hist = Matrix(Kokkos::view_alloc("walkers/history", no_init), history > 0 ? cap : 0, history);
  capacity = cap;
}

Population::Population(const Physics& physics, int history, MPI_Comm comm)
    : m_physics(physics), m_history(history), m_comm(comm) {
  MPI_Comm_rank(comm, &m_rank);
  MPI_Comm_size(comm, &m_size);
}

void Population::update_offsets() {
  std::uint64_t n = m_count, off = 0;
  MPI_Exscan(&n, &off, 1, MPI_UINT64_T, MPI_SUM, m_comm);
  m_offset = m_rank == 0 ? 0 : off;
  MPI_Allreduce(&n, &m_global, 1, MPI_UINT64_T, MPI_SUM, m_comm);
}

void Population::allocate_balanced(std::uint64_t global_count) {
  const std::uint64_t lo = balanced_start(global_count, m_rank, m_size);
  m_count = balanced_start(global_count, m_rank + 1, m_size) - lo;
  m_cur.reserve(m_count, m_physics.dims(), m_history);
  update_offsets();
}

void Population::initialize(std::uint64_t global_count) {
  allocate_balanced(global_count);
  const int dims = m_physics.dims(), history = m_history;
  const double sigma = 1.0 / std::sqrt(4.0 * m_physics.alpha);  // |psi_T|^2 is Gaussian, var 1/(4 alpha)
  const double alpha = m_physics.alpha;
  const std::uint64_t seed = m_physics.seed, offset = m_offset;
  auto id = m_cur.id;
  auto w = m_cur.w;
  auto el = m_cur.el;
  auto pos = m_cur.pos;
  auto hist = m_cur.hist;
  Kokkos::parallel_for(
      "qmc::initialize", Range(0, m_count), KOKKOS_LAMBDA(const std::int64_t i) {
        const std::uint64_t my_id = offset + static_cast<std::uint64_t>(i);
        CounterRng rng(seed, my_id, 0, stream_init);
        double r2 = 0.0;
        for (int k = 0; k < dims; ++k) {
          const double x = sigma * rng.normal();
          pos(i, k) = x;
          r2 += x * x;
        }
        for (int k = 0; k < history; ++k) hist(i, k) = pos(i, k % dims);
        id(i) = my_id;
        w(i) = 1.0;
        el(i) = local_energy(alpha, dims, r2);
      });
  Kokkos::fence();
}

StepSums Population::energy_sums() const {
  auto el = m_cur.el;
  StepSums local;
  Kokkos::parallel_reduce(
      "qmc::energy_sums", Range(0, m_count),
      KOKKOS_LAMBDA(const std::int64_t i, StepSums& s) {
        s.weight += to_fixed(1.0);
        s.weighted_energy += to_fixed(el(i));
        s.walkers += 1;
      },
      Kokkos::Sum<StepSums>(local));
  StepSums global;
  MPI_Allreduce(&local, &global, 4, MPI_INT64_T, MPI_SUM, m_comm);
  return global;
}

StepSums Population::advance(std::int64_t step, double trial_energy) {
  const int dims = m_physics.dims(), history = m_history;
  const double alpha = m_physics.alpha, tau = m_physics.tau, sqrt_tau = std::sqrt(tau);
  const bool dmc = m_physics.dmc;
  const std::uint64_t seed = m_physics.seed, ustep = static_cast<std::uint64_t>(step);
  // The history is a ring buffer of positions, slot step mod (history / dims).
  const int slot = history > 0 ? static_cast<int>(ustep % static_cast<std::uint64_t>(history / dims)) * dims : 0;
  if (m_mult.extent(0) < m_cur.capacity) m_mult = IndexVector("walkers/multiplicity", m_cur.capacity);
  auto id = m_cur.id;
  auto w = m_cur.w;
  auto el = m_cur.el;
  auto pos = m_cur.pos;
  auto hist = m_cur.hist;
  auto mult = m_mult;
  StepSums local;
  Kokkos::parallel_reduce(
      "qmc::advance", Range(0, m_count),
      KOKKOS_LAMBDA(const std::int64_t i, StepSums& s) {
        // Proposal x' = x + tau v(x) + sqrt(tau) chi with drift v = grad ln psi_T = -2 alpha x.
        // First pass: the Metropolis ratio |psi(x')|^2 G(x'->x) / (|psi(x)|^2 G(x->x')), where
        // G(x->x') = exp(-(x' - x - tau v(x))^2 / (2 tau)).
        double r2_old = 0.0, r2_new = 0.0, log_ratio = 0.0;
        {
          CounterRng rng(seed, id(i), ustep, stream_move);
          for (int k = 0; k < dims; ++k) {
            const double x = pos(i, k);
            const double chi = rng.normal();
            const double xn = x + tau * (-2.0 * alpha * x) + sqrt_tau * chi;
            const double back = x - xn - tau * (-2.0 * alpha * xn);
            log_ratio += 0.5 * chi * chi - back * back / (2.0 * tau);
            r2_old += x * x;
            r2_new += xn * xn;
          }
          log_ratio += -2.0 * alpha * (r2_new - r2_old);
        }
        // Acceptance and branching draws come from their own stream so that the proposal can be
        // regenerated below without them.
        CounterRng decide(seed, id(i), ustep, stream_decide);
        const bool accept = log_ratio >= 0.0 || decide.uniform() < std::exp(log_ratio);
        const double e_old = el(i);
        double e_new = e_old;
        if (accept) {
          // Second pass: the same draws again (the generator is counter-based), now applied.
          CounterRng rng(seed, id(i), ustep, stream_move);
          for (int k = 0; k < dims; ++k) {
            const double x = pos(i, k);
            pos(i, k) = x + tau * (-2.0 * alpha * x) + sqrt_tau * rng.normal();
          }
          e_new = local_energy(alpha, dims, r2_new);
        }
        for (int k = 0; k < dims && history > 0; ++k) hist(i, slot + k) = pos(i, k);
        // DMC: the branching factor of the short-time Green's function, trapezoidal in E_L.
        const double weight = dmc ? std::exp(-tau * (0.5 * (e_old + e_new) - trial_energy)) : 1.0;
        w(i) = weight;
        el(i) = e_new;
        std::int64_t copies = 1;
        if (dmc) {
          copies = static_cast<std::int64_t>(weight + decide.uniform());
          copies = copies < max_copies ? copies : max_copies;
        }
        mult(i) = copies;
        s.weight += to_fixed(weight);
        s.weighted_energy += to_fixed(weight * e_new);
        s.accepted += accept ? 1 : 0;
        s.walkers += 1;
      },
      Kokkos::Sum<StepSums>(local));
  StepSums global;
  MPI_Allreduce(&local, &global, 4, MPI_INT64_T, MPI_SUM, m_comm);
  return global;
}

std::uint64_t Population::branch(std::int64_t /*step*/, std::uint64_t next_id) {
  const std::int64_t n = static_cast<std::int64_t>(m_count);
  if (m_dest.extent(0) < m_cur.capacity + 1) {
    m_dest = IndexVector("walkers/destination", m_cur.capacity + 1);
    m_extra = IndexVector("walkers/extra_ids", m_cur.capacity + 1);
  }
  auto mult = m_mult;
  auto dest = m_dest;
  auto extra = m_extra;
  // Exclusive scans: where the copies of walker i go, and how many new ids come before them here.
  Kokkos::parallel_scan(
      "qmc::branch_scan", Range(0, n + 1), KOKKOS_LAMBDA(const std::int64_t i, std::int64_t& copies, const bool final) {
        if (final) dest(i) = copies;
        if (i < n) copies += mult(i);
      });
  Kokkos::parallel_scan(
      "qmc::branch_extra_scan", Range(0, n + 1),
      KOKKOS_LAMBDA(const std::int64_t i, std::int64_t& extras, const bool final) {
        if (final) extra(i) = extras;
        if (i < n) extras += mult(i) > 1 ? mult(i) - 1 : 0;
      });
  std::int64_t new_count = 0, local_extras = 0;
  Kokkos::deep_copy(new_count, Kokkos::subview(dest, n));
  Kokkos::deep_copy(local_extras, Kokkos::subview(extra, n));
  // New ids are numbered in global order: ranks before this one take theirs first.
  std::int64_t extras_before = 0, total_extras = 0;
  MPI_Exscan(&local_extras, &extras_before, 1, MPI_INT64_T, MPI_SUM, m_comm);
  if (m_rank == 0) extras_before = 0;
  MPI_Allreduce(&local_extras, &total_extras, 1, MPI_INT64_T, MPI_SUM, m_comm);

  m_next.reserve(static_cast<std::uint64_t>(new_count), m_physics.dims(), m_history);
  const int dims = m_physics.dims(), history = m_history;
  const std::uint64_t id_base = next_id + static_cast<std::uint64_t>(extras_before);
  auto src = m_cur;
  auto dst = m_next;
  Kokkos::parallel_for(
      "qmc::branch_copy", Range(0, n), KOKKOS_LAMBDA(const std::int64_t i) {
        for (std::int64_t j = 0; j < mult(i); ++j) {
          const std::int64_t d = dest(i) + j;
          // The first copy keeps the parent's id; the others get fresh ones.
          dst.id(d) = j == 0 ? src.id(i) : id_base + static_cast<std::uint64_t>(extra(i) + j - 1);
          dst.w(d) = 1.0;
          dst.el(d) = src.el(i);
          for (int k = 0; k < dims; ++k) dst.pos(d, k) = src.pos(i, k);
          for (int k = 0; k < history; ++k) dst.hist(d, k) = src.hist(i, k);
        }
      });
  Kokkos::fence();
  std::swap(m_cur, m_next);
  m_count = static_cast<std::uint64_t>(new_count);
  update_offsets();
  return next_id + static_cast<std::uint64_t>(total_extras);
}

void Population::rebalance() {
  // Current segment [m_offset, m_offset + m_count); target segment balanced_start(r)..(r + 1).
  std::vector<std::uint64_t> counts(m_size), starts(m_size + 1, 0);
  MPI_Allgather(&m_count, 1, MPI_UINT64_T, counts.data(), 1, MPI_UINT64_T, m_comm);
  for (int r = 0; r < m_size; ++r) starts[r + 1] = starts[r] + counts[r];
  const std::uint64_t my_lo = balanced_start(m_global, m_rank, m_size);
  const std::uint64_t my_hi = balanced_start(m_global, m_rank + 1, m_size);
  bool moved = false;
  std::vector<std::uint64_t> send_n(m_size), send_at(m_size), recv_n(m_size), recv_at(m_size);
  for (int r = 0; r < m_size; ++r) {
    const std::uint64_t t_lo = balanced_start(m_global, r, m_size), t_hi = balanced_start(m_global, r + 1, m_size);
    const std::uint64_t s_lo = std::max(t_lo, m_offset), s_hi = std::min(t_hi, m_offset + m_count);
    send_n[r] = s_hi > s_lo ? s_hi - s_lo : 0;
    send_at[r] = s_hi > s_lo ? s_lo - m_offset : 0;
    const std::uint64_t r_lo = std::max(my_lo, starts[r]), r_hi = std::min(my_hi, starts[r + 1]);
    recv_n[r] = r_hi > r_lo ? r_hi - r_lo : 0;
    recv_at[r] = r_hi > r_lo ? r_lo - my_lo : 0;
    if (r != m_rank && (send_n[r] || recv_n[r])) moved = true;
  }
  int any = moved ? 1 : 0, any_global = 0;
  MPI_Allreduce(&any, &any_global, 1, MPI_INT, MPI_MAX, m_comm);
  if (!any_global) return;

  const std::uint64_t new_count = my_hi - my_lo;
  m_next.reserve(new_count, m_physics.dims(), m_history);
  // One Alltoallv per array; `width` values per walker. Host mirrors make this work with device
  // Views too (without CUDA-aware MPI); on a host execution space they are the Views themselves.
  auto exchange = [&](auto src_view, auto dst_view, std::uint64_t width, MPI_Datatype type) {
    if (width == 0) return;
    auto h_src = Kokkos::create_mirror_view(src_view);
    auto h_dst = Kokkos::create_mirror_view(dst_view);
    Kokkos::deep_copy(h_src, src_view);
    std::vector<int> sc(m_size), sd(m_size), rc(m_size), rd(m_size);
    for (int r = 0; r < m_size; ++r) {
      sc[r] = static_cast<int>(send_n[r] * width);
      sd[r] = static_cast<int>(send_at[r] * width);
      rc[r] = static_cast<int>(recv_n[r] * width);
      rd[r] = static_cast<int>(recv_at[r] * width);
    }
    MPI_Alltoallv(h_src.data(), sc.data(), sd.data(), type, h_dst.data(), rc.data(), rd.data(), type, m_comm);
    Kokkos::deep_copy(dst_view, h_dst);
  };
  exchange(m_cur.id, m_next.id, 1, MPI_UINT64_T);
  exchange(m_cur.w, m_next.w, 1, MPI_DOUBLE);
  exchange(m_cur.el, m_next.el, 1, MPI_DOUBLE);
  exchange(m_cur.pos, m_next.pos, m_physics.dims(), MPI_DOUBLE);
  exchange(m_cur.hist, m_next.hist, m_history, MPI_DOUBLE);
  std::swap(m_cur, m_next);
  m_count = new_count;
  update_offsets();
}

std::uint64_t Population::digest() const {
  const int dims = m_physics.dims(), history = m_history;
  const std::uint64_t offset = m_offset;
  auto id = m_cur.id;
  auto w = m_cur.w;
  auto el = m_cur.el;
  auto pos = m_cur.pos;
  auto hist = m_cur.hist;
  std::uint64_t local = 0;
  // A wrapping sum of per-walker hashes salted with the global index: order-sensitive, and the
  // same for any split of the sequence over ranks.
  Kokkos::parallel_reduce(
      "qmc::digest", Range(0, m_count),
      KOKKOS_LAMBDA(const std::int64_t i, std::uint64_t& s) {
        std::uint64_t h = mix(0x51ed270b27c1e3a5ull, id(i));
        h = mix(h, bits_of(w(i)));
        h = mix(h, bits_of(el(i)));
        for (int k = 0; k < dims; ++k) h = mix(h, bits_of(pos(i, k)));
        for (int k = 0; k < history; ++k) h = mix(h, bits_of(hist(i, k)));
        s += mix(h, splitmix64(offset + static_cast<std::uint64_t>(i)));
      },
      local);
  std::uint64_t global = 0;
  MPI_Allreduce(&local, &global, 1, MPI_UINT64_T, MPI_SUM, m_comm);
  return global;
}

}  // namespace qmc
