#include "simulation.hpp"

#include <xxhash.h>

#include <algorithm>
#include <array>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstring>
// ckpt-glue begin
#include <cstddef>
#include <numeric>
#include <tuple>
// ckpt-glue end
#include <set>
#include <stdexcept>

namespace sedov {
namespace {

constexpr double SEDOV_E = 1.0;  // blast energy per unit length of the full cylinder
constexpr double RHO0 = 1.0, P0 = 1e-5;
constexpr double R_INIT_CELLS = 3.5;  // deposit radius in finest cells (FLASH's sim_nsubzones setup)

// ckpt-glue begin
// The checkpointed arrays of one row per block (this rank's rows: its Morton range), the variables first.
const char* const BLOCK_ARRAYS[] = {"unk/dens",   "unk/momx",   "unk/momy",  "unk/ener",
                                    "grid/level", "grid/coord", "grid/bbox", "grid/refine_flag"};
// ckpt-glue end

void check_mpi(int rc, const char* what) {
  if (rc != MPI_SUCCESS) throw std::runtime_error(std::string("MPI failure in ") + what);
}

/// Counts and displacements of an Alltoallv.
struct Counts {
  std::vector<int> send, sdisp, recv, rdisp;
  explicit Counts(int n) : send(n), sdisp(n), recv(n), rdisp(n) {}
  void finish(MPI_Comm comm) {
    check_mpi(MPI_Alltoall(send.data(), 1, MPI_INT, recv.data(), 1, MPI_INT, comm), "alltoall");
    for (std::size_t r = 1; r < send.size(); ++r) {
      sdisp[r] = sdisp[r - 1] + send[r - 1];
      rdisp[r] = rdisp[r - 1] + recv[r - 1];
    }
  }
  int send_total() const { return sdisp.back() + send.back(); }
  int recv_total() const { return rdisp.back() + recv.back(); }
};

}  // namespace

Simulation::Simulation(MPI_Comm comm, int nroot, int max_level, bool uniform, Cutoffs cutoffs)
    : m_comm(comm), m_uniform(uniform), m_cutoffs(cutoffs), m_tree(nroot, max_level) {
  MPI_Comm_rank(comm, &m_rank);
  MPI_Comm_size(comm, &m_size);
  m_s.max_level = max_level;
  m_s.nroot = nroot;
  m_s.mesh_uniform = uniform ? 1 : 0;
}

std::int64_t Simulation::global_particles() const {
  std::int64_t n = static_cast<std::int64_t>(m_particles.size()), all = 0;
  MPI_Allreduce(&n, &all, 1, MPI_INT64_T, MPI_SUM, m_comm);
  return all;
}

// ckpt-glue begin
std::array<double, NVAR> Simulation::totals() const {
  std::array<double, NVAR> mine{}, all{};
  for (int b = 0; b < m_nlocal; ++b)
    for (int v = 0; v < NVAR; ++v) {
      double sum = 0;
      for (int j = NG; j < NG + NB; ++j)
        for (int i = NG; i < NG + NB; ++i) sum += m_u(b, v, j, i);
      mine[v] += sum * m_dx(b) * m_dx(b);
    }
  MPI_Allreduce(mine.data(), all.data(), NVAR, MPI_DOUBLE, MPI_SUM, m_comm);
  return all;
}
// ckpt-glue end

// ---- mesh, ghosts, guard plan ---------------------------------------------------------------------

int Simulation::slot_of(int global) const {
  if (global >= m_first && global < m_first + m_nlocal) return static_cast<int>(global - m_first);
  auto it = m_ghost_slot.find(global);
  if (it == m_ghost_slot.end())
    throw std::runtime_error("guard fill needs block " + std::to_string(global) + " that is not a ghost");
  return it->second;
}

void Simulation::set_mesh(const std::vector<BlockKey>& leaves) {
  m_tree.set_leaves(leaves);
  m_s.nblocks = m_tree.size();
  m_first = Tree::first(m_rank, m_size, m_s.nblocks);
  m_nlocal = static_cast<int>(Tree::first(m_rank + 1, m_size, m_s.nblocks) - m_first);
  build_exchange_and_plan();
  // ckpt-glue begin
  // The grid structure of this rank's blocks as checkpointed (grid/*: Paramesh's lrefine, coordinates,
  // bnd_box and refine flags); regrid() fills in the flags of the blocks it keeps.
  m_flags.assign(static_cast<std::size_t>(m_nlocal), 0);
  m_grid_level.clear(), m_grid_coord.clear(), m_grid_bbox.clear();
  for (int b = static_cast<int>(m_first); b < m_first + m_nlocal; ++b) {
    const BlockKey& k = m_tree.leaf(b);
    const double s = NB * m_tree.dx(k.level);
    m_grid_level.push_back(k.level);
    m_grid_coord.insert(m_grid_coord.end(), {k.i, k.j});
    m_grid_bbox.insert(m_grid_bbox.end(), {k.i * s, (k.i + 1) * s, k.j * s, (k.j + 1) * s});
  }
  // ckpt-glue end
}

void Simulation::build_exchange_and_plan() {
  // Ghosts: every block of another rank that touches one of ours. Touching is symmetric, so the
  // owner of such a block computes the same pairs and sends it; both sides list it in global order.
  const std::int64_t n = m_s.nblocks;
  std::vector<std::set<int>> send(m_size), recv(m_size);
  for (int b = 0; b < m_nlocal; ++b) {
    const int g = static_cast<int>(m_first + b);
    for (int m : m_tree.neighbours(g)) {
      const int r = Tree::owner(m, m_size, n);
      if (r == m_rank) continue;
      send[r].insert(b);
      recv[r].insert(m);
    }
  }
  m_ghosts = Exchange{std::vector<std::vector<int>>(m_size), std::vector<std::vector<int>>(m_size)};
  m_ghost_slot.clear();
  int slot = m_nlocal;
  for (int r = 0; r < m_size; ++r) {
    m_ghosts.send[r].assign(send[r].begin(), send[r].end());
    for (int m : recv[r]) {
      m_ghost_slot[m] = slot;
      m_ghosts.recv[r].push_back(slot++);
    }
  }
  m_nghost = slot - m_nlocal;
  m_u = BlockView("u", static_cast<std::size_t>(slot), NVAR, NT, NT);
  m_dx = RealList("dx", static_cast<std::size_t>(m_nlocal));
  m_x0 = RealList("x0", static_cast<std::size_t>(m_nlocal));
  m_y0 = RealList("y0", static_cast<std::size_t>(m_nlocal));
  for (int b = 0; b < m_nlocal; ++b) {
    const BlockKey& k = m_tree.leaf(static_cast<int>(m_first + b));
    m_dx(b) = m_tree.dx(k.level);
    m_x0(b) = k.i * NB * m_dx(b);
    m_y0(b) = k.j * NB * m_dx(b);
  }

  // Guard plan, in integer coordinates so that the lookups are exact. A guard cell outside the
  // domain is mapped back inside: mirrored at the walls x=0, y=0 (normal momentum negated), clamped
  // to the last cell at x=1, y=1 (zero-gradient outflow).
  std::vector<int> rows;
  rows.reserve(static_cast<std::size_t>(m_nlocal) * (NT * NT - NB * NB) * 8);
  for (int b = 0; b < m_nlocal; ++b) {
    const BlockKey& k = m_tree.leaf(static_cast<int>(m_first + b));
    const std::int64_t c = Tree::cell_span(k.level), ncell = m_tree.cells(k.level);
    for (int j = 0; j < NT; ++j)
      for (int i = 0; i < NT; ++i) {
        if (i >= NG && i < NG + NB && j >= NG && j < NG + NB) continue;
        std::int64_t ci = static_cast<std::int64_t>(k.i) * NB + i - NG,
                     cj = static_cast<std::int64_t>(k.j) * NB + j - NG;
        int flags = 0;
        if (ci < 0) ci = -1 - ci, flags |= 1;
        if (cj < 0) cj = -1 - cj, flags |= 2;
        ci = std::min(ci, ncell - 1);
        cj = std::min(cj, ncell - 1);
        const int src = m_tree.leaf_at(ci * c + c / 2, cj * c + c / 2);
        const BlockKey& s = m_tree.leaf(src);
        int kind, si, sj;
        if (s.level == k.level) {
          kind = GUARD_COPY, si = static_cast<int>(ci - s.i * NB) + NG, sj = static_cast<int>(cj - s.j * NB) + NG;
        } else if (s.level == k.level - 1) {
          kind = GUARD_PROLONG;
          si = static_cast<int>((ci >> 1) - s.i * NB) + NG, sj = static_cast<int>((cj >> 1) - s.j * NB) + NG;
          flags |= ((ci & 1) ? 4 : 0) | ((cj & 1) ? 8 : 0);
        } else if (s.level == k.level + 1) {
          kind = GUARD_RESTRICT;
          si = static_cast<int>(2 * ci - s.i * NB) + NG, sj = static_cast<int>(2 * cj - s.j * NB) + NG;
        } else {
          throw std::runtime_error("the tree is not 2:1 balanced");
        }
        const int row[8] = {b, j, i, kind, slot_of(src), sj, si, flags};
        rows.insert(rows.end(), row, row + 8);
      }
  }
  m_plan = IntTable("guard_plan", rows.size() / 8, 8);
  std::memcpy(m_plan.data(), rows.data(), rows.size() * sizeof(int));
}

void Simulation::exchange(const BlockView& src, const Exchange& ex, const BlockView& dst, bool guards) const {
  // Interiors only for ghost blocks (guard fills read interiors); whole blocks for a regrid, whose
  // prolongation takes slopes across the parent's edge.
  const int lo = guards ? 0 : NG, hi = guards ? NT : NG + NB, w = hi - lo, per = NVAR * w * w;
  Counts cnt(m_size);
  for (int r = 0; r < m_size; ++r) cnt.send[r] = static_cast<int>(ex.send[r].size()) * per;
  cnt.finish(m_comm);
  std::vector<double> out(static_cast<std::size_t>(cnt.send_total())), in(static_cast<std::size_t>(cnt.recv_total()));
  std::size_t o = 0;
  for (int r = 0; r < m_size; ++r)
    for (int s : ex.send[r])
      for (int v = 0; v < NVAR; ++v)
        for (int j = lo; j < hi; ++j)
          for (int i = lo; i < hi; ++i) out[o++] = src(s, v, j, i);
  check_mpi(MPI_Alltoallv(out.data(), cnt.send.data(), cnt.sdisp.data(), MPI_DOUBLE, in.data(), cnt.recv.data(),
                          cnt.rdisp.data(), MPI_DOUBLE, m_comm),
            "alltoallv blocks");
  o = 0;
  for (int r = 0; r < m_size; ++r) {
    if (static_cast<int>(ex.recv[r].size()) * per != cnt.recv[r]) throw std::runtime_error("block exchange mismatch");
    for (int s : ex.recv[r])
      for (int v = 0; v < NVAR; ++v)
        for (int j = lo; j < hi; ++j)
          for (int i = lo; i < hi; ++i) dst(s, v, j, i) = in[o++];
  }
}

void Simulation::fill_all_guards() {
  exchange(m_u, m_ghosts, m_u, false);
  fill_guards(m_u, m_plan);
}

// ---- initial state --------------------------------------------------------------------------------

void Simulation::init_sedov(std::int64_t nparticles) {
  const int lmax = m_tree.max_level();
  const double dxf = m_tree.dx(lmax), r_init = R_INIT_CELLS * dxf;
  std::vector<BlockKey> leaves;
  for (int j = 0; j < m_tree.nroot(); ++j)
    for (int i = 0; i < m_tree.nroot(); ++i) leaves.push_back({1, i, j});
  m_tree.set_leaves(leaves);
  // Uniform: every block to the finest level. AMR: the blocks near the deposit, then 2:1 balance.
  for (int pass = 1; pass < lmax; ++pass) {
    std::vector<int> flags(static_cast<std::size_t>(m_tree.size()));
    for (int b = 0; b < m_tree.size(); ++b) {
      const BlockKey& k = m_tree.leaf(b);
      const double span = NB * m_tree.dx(k.level);
      flags[b] = (m_uniform || std::hypot(k.i * span, k.j * span) < 2 * r_init) ? 1 : 0;
    }
    m_tree.set_leaves(m_tree.adapt(flags));
  }
  set_mesh(m_tree.leaves());

  // The deposit: E/4 (the quadrant's share) spread evenly over the finest-lattice cells within
  // r_init; counting them on the lattice makes the energy exact and the same on either mesh.
  std::int64_t inside = 0;
  const int reach = static_cast<int>(std::ceil(r_init / dxf)) + 1;
  for (int j = 0; j < reach; ++j)
    for (int i = 0; i < reach; ++i)
      if (std::hypot((i + 0.5) * dxf, (j + 0.5) * dxf) < r_init) ++inside;
  const double e_in = 0.25 * SEDOV_E / (static_cast<double>(inside) * dxf * dxf);
  const double e_out = P0 / (GAMMA - 1.0);
  const BlockView u = m_u;
  const RealList dx = m_dx, x0 = m_x0, y0 = m_y0;
  Kokkos::parallel_for(
      "init_sedov", Kokkos::MDRangePolicy<Exec, Kokkos::Rank<3>>({0, 0, 0}, {m_nlocal, NB, NB}),
      KOKKOS_LAMBDA(int b, int j, int i) {
        const double x = x0(b) + (i + 0.5) * dx(b), y = y0(b) + (j + 0.5) * dx(b);
        u(b, DENS, j + NG, i + NG) = RHO0;
        u(b, MOMX, j + NG, i + NG) = 0;
        u(b, MOMY, j + NG, i + NG) = 0;
        u(b, ENER, j + NG, i + NG) = std::hypot(x, y) < r_init ? e_in : e_out;
      });
  Kokkos::fence();

  // Tracers on a lattice over [0, 0.6]^2, the region the blast sweeps; the tag is the lattice index,
  // the birth rank the rank that owns the block it starts in.
  const std::int64_t side = static_cast<std::int64_t>(std::ceil(std::sqrt(static_cast<double>(nparticles))));
  m_particles.clear();
  for (std::int64_t t = 0; t < nparticles; ++t) {
    Particle p;
    p.x = 0.6 * (static_cast<double>(t % side) + 0.5) / static_cast<double>(side);
    p.y = 0.6 * (static_cast<double>(t / side) + 0.5) / static_cast<double>(side);
    const std::int64_t w = m_tree.width();
    const int g = m_tree.leaf_at(static_cast<std::int64_t>(p.x * static_cast<double>(w)),
                                 static_cast<std::int64_t>(p.y * static_cast<double>(w)));
    if (Tree::owner(g, m_size, m_s.nblocks) != m_rank) continue;
    p.birth = m_rank, p.tag = t, p.block = g;
    m_particles.push_back(p);
  }
  m_s.nparticles = nparticles;
  fill_all_guards();
  relocate_particles();          // sorts them into the global (block, tag) order
  advect_particles(false, 0.0);  // samples density and temperature at the start positions
}

// ---- time step ------------------------------------------------------------------------------------

double Simulation::step(double cfl, double tmax) {
  double rate = max_signal_rate(m_u, m_dx, m_nlocal), all = 0;
  MPI_Allreduce(&rate, &all, 1, MPI_DOUBLE, MPI_MAX, m_comm);
  double dt = cfl / all;
  if (m_s.time + dt > tmax) dt = tmax - m_s.time;
  advect_particles(true, dt);  // velocity at t^n, before the fluid moves on
  m_hydro.advance(m_u, m_dx, m_nlocal, dt);
  fill_all_guards();
  advect_particles(false, dt);  // Heun corrector with the velocity at t^{n+1}
  relocate_particles();
  m_s.time += dt;
  m_s.dt = dt;
  m_s.step += 1;
  return dt;
}

void Simulation::advect_particles(bool predict, double dt) {
  using Unmanaged = Kokkos::View<Particle*, Mem, Kokkos::MemoryTraits<Kokkos::Unmanaged>>;
  Unmanaged parts(m_particles.data(), m_particles.size());
  const BlockView u = m_u;
  const RealList dx = m_dx, x0 = m_x0, y0 = m_y0;
  const std::int64_t first = m_first;
  // Bilinear interpolation between cell centres of the particle's block; a particle is at most a
  // fraction of a cell outside its block during a step, which the two guard layers cover.
  auto sample = [=](int b, double x, double y, int what) {
    double fx = (x - x0(b)) / dx(b) + NG - 0.5, fy = (y - y0(b)) / dx(b) + NG - 0.5;
    int i0 = static_cast<int>(std::floor(fx)), j0 = static_cast<int>(std::floor(fy));
    i0 = i0 < 0 ? 0 : (i0 > NT - 2 ? NT - 2 : i0);
    j0 = j0 < 0 ? 0 : (j0 > NT - 2 ? NT - 2 : j0);
    const double wx = fx - i0, wy = fy - j0;
    auto q = [&](int j, int i) {
      double r, vx, vy, p;
      to_primitive(u(b, DENS, j, i), u(b, MOMX, j, i), u(b, MOMY, j, i), u(b, ENER, j, i), r, vx, vy, p);
      return what == 0 ? vx : what == 1 ? vy : what == 2 ? r : p / r;
    };
    return (1 - wy) * ((1 - wx) * q(j0, i0) + wx * q(j0, i0 + 1)) +
           wy * ((1 - wx) * q(j0 + 1, i0) + wx * q(j0 + 1, i0 + 1));
  };
  Kokkos::parallel_for(
      "advect_particles", Kokkos::RangePolicy<Exec>(0, static_cast<int>(parts.extent(0))), KOKKOS_LAMBDA(int n) {
        Particle& p = parts(n);
        const int b = static_cast<int>(p.block - first);
        if (predict) {
          p.vx0 = sample(b, p.x, p.y, 0);
          p.vy0 = sample(b, p.x, p.y, 1);
          return;
        }
        if (dt > 0) {
          // Heun: x* = x + dt v(x, t^n); x^{n+1} = x + dt/2 (v(x, t^n) + v(x*, t^{n+1})).
          const double xs = p.x + dt * p.vx0, ys = p.y + dt * p.vy0;
          p.x += 0.5 * dt * (p.vx0 + sample(b, xs, ys, 0));
          p.y += 0.5 * dt * (p.vy0 + sample(b, xs, ys, 1));
          if (p.x < 0) p.x = -p.x;  // reflecting walls
          if (p.y < 0) p.y = -p.y;
          p.x = std::fmin(p.x, 1.0 - 1e-12), p.y = std::fmin(p.y, 1.0 - 1e-12);
        }
        p.dens = sample(b, p.x, p.y, 2);
        p.temp = sample(b, p.x, p.y, 3);  // p / rho: temperature in units of R/mu
      });
  Kokkos::fence();
}

void Simulation::relocate_particles() {
  const std::int64_t w = m_tree.width();
  Counts cnt(m_size);
  std::vector<std::vector<Particle>> out(static_cast<std::size_t>(m_size));
  for (Particle& p : m_particles) {
    const std::int64_t X = std::min<std::int64_t>(static_cast<std::int64_t>(p.x * static_cast<double>(w)), w - 1);
    const std::int64_t Y = std::min<std::int64_t>(static_cast<std::int64_t>(p.y * static_cast<double>(w)), w - 1);
    p.block = m_tree.leaf_at(X, Y);
    out[static_cast<std::size_t>(Tree::owner(p.block, m_size, m_s.nblocks))].push_back(p);
  }
  std::vector<Particle> flat;
  for (int r = 0; r < m_size; ++r) {
    cnt.send[r] = static_cast<int>(out[r].size() * sizeof(Particle));
    flat.insert(flat.end(), out[r].begin(), out[r].end());
  }
  cnt.finish(m_comm);
  m_particles.assign(static_cast<std::size_t>(cnt.recv_total()) / sizeof(Particle), Particle{});
  check_mpi(MPI_Alltoallv(flat.data(), cnt.send.data(), cnt.sdisp.data(), MPI_BYTE, m_particles.data(), cnt.recv.data(),
                          cnt.rdisp.data(), MPI_BYTE, m_comm),
            "alltoallv particles");
  // Global order = (block, tag): ranks own increasing block ranges, so it does not depend on them.
  std::sort(m_particles.begin(), m_particles.end(), [](const Particle& a, const Particle& b) {
    return a.block != b.block ? a.block < b.block : a.tag < b.tag;
  });
}

// ---- regrid ---------------------------------------------------------------------------------------

bool Simulation::regrid(RegridMode mode) {
  m_flags.assign(static_cast<std::size_t>(m_nlocal), 0);
  if (mode == RegridMode::lohner) {
    lohner_error(m_u, m_nlocal, m_error);
    for (int b = 0; b < m_nlocal; ++b)
      m_flags[b] = m_error(b) > m_cutoffs.refine ? 1 : (m_error(b) < m_cutoffs.derefine ? -1 : 0);
  } else {
    // ckpt-glue begin
    for (int b = 0; b < m_nlocal; ++b)
      m_flags[b] = m_tree.leaf(static_cast<int>(m_first + b)).level < m_tree.max_level() ? 1 : 0;
    // ckpt-glue end
  }
  // ckpt-glue begin
  // Blocks finer than the maximum level (a restart that lowered it) are coarsened, whatever the
  // estimator says; a family goes once no neighbour is finer than it, so a pass per excess level.
  for (int b = 0; b < m_nlocal; ++b)
    if (m_tree.leaf(static_cast<int>(m_first + b)).level > m_tree.max_level()) m_flags[b] = -1;
  // ckpt-glue end
  std::vector<int> counts(m_size), displs(m_size), flags(static_cast<std::size_t>(m_s.nblocks));
  for (int r = 0; r < m_size; ++r) {
    displs[r] = static_cast<int>(Tree::first(r, m_size, m_s.nblocks));
    counts[r] = static_cast<int>(Tree::first(r + 1, m_size, m_s.nblocks)) - displs[r];
  }
  MPI_Allgatherv(m_flags.data(), m_nlocal, MPI_INT, flags.data(), counts.data(), displs.data(), MPI_INT, m_comm);
  Tree next(m_tree.nroot(), m_tree.max_level());
  next.set_leaves(m_tree.adapt(flags));
  if (next.leaves() == m_tree.leaves()) return false;

  // Where each new block comes from (old global indices): itself, its parent (prolong), or its four
  // children (restrict). Old blocks travel whole (with guards) to the new owners.
  const std::int64_t n_old = m_s.nblocks, n_new = next.size();
  const int my_first_new = static_cast<int>(Tree::first(m_rank, m_size, n_new));
  const int my_n_new = static_cast<int>(Tree::first(m_rank + 1, m_size, n_new)) - my_first_new;
  std::vector<std::set<int>> send(m_size), recv(m_size);
  std::vector<std::array<int, 6>> how_global(static_cast<std::size_t>(n_new));
  for (int g = 0; g < n_new; ++g) {
    const BlockKey& k = next.leaf(g);
    std::array<int, 6>& h = how_global[g];
    h.fill(-1);
    if (int o = m_tree.find(k); o >= 0) {
      h[0] = 0, h[1] = o;
    } else if (int p = m_tree.find(k.parent()); p >= 0) {
      h[0] = 2, h[1] = p, h[5] = (k.i & 1) + 2 * (k.j & 1);
    } else {
      h[0] = 1;
      for (int c = 0; c < 4; ++c) h[1 + c] = m_tree.find(k.child(c & 1, c >> 1));
    }
    const int q = Tree::owner(g, m_size, n_new);
    for (int c = 1; c <= 4; ++c) {
      if (h[c] < 0) continue;
      const int p = Tree::owner(h[c], m_size, n_old);
      if (p == m_rank) send[q].insert(static_cast<int>(h[c] - m_first));
      if (q == m_rank) recv[p].insert(h[c]);
    }
  }
  Exchange ex{std::vector<std::vector<int>>(m_size), std::vector<std::vector<int>>(m_size)};
  std::unordered_map<int, int> pool_slot;
  int slots = 0;
  for (int r = 0; r < m_size; ++r) {
    ex.send[r].assign(send[r].begin(), send[r].end());
    for (int o : recv[r]) {
      pool_slot[o] = slots;
      ex.recv[r].push_back(slots++);
    }
  }
  BlockView pool("regrid_pool", static_cast<std::size_t>(slots), NVAR, NT, NT);
  exchange(m_u, ex, pool, true);
  IntTable how("regrid_how", static_cast<std::size_t>(my_n_new), 6);
  for (int b = 0; b < my_n_new; ++b) {
    const std::array<int, 6>& h = how_global[static_cast<std::size_t>(my_first_new + b)];
    how(b, 0) = h[0];
    for (int c = 1; c <= 4; ++c) how(b, c) = h[c] >= 0 ? pool_slot.at(h[c]) : 0;
    how(b, 5) = h[5];
  }
  set_mesh(next.leaves());
  // ckpt-glue begin
  for (int b = 0; b < my_n_new; ++b)  // blocks that stayed keep their refine flags (grid/refine_flag)
    if (how(b, 0) == 0) m_flags[b] = flags[static_cast<std::size_t>(how_global[my_first_new + b][1])];
  // ckpt-glue end
  remap_blocks(pool, how, m_u);
  fill_all_guards();
  relocate_particles();
  ++m_s.regrids;
  return true;
}

// ---- checkpoint and restart -----------------------------------------------------------------------

// ckpt-glue begin
ckpt::Status Simulation::protect(ckpt::Runtime& rt) {
  CKPT_RETURN_IF_ERROR(rt.protect_scalar("run/time", &m_s.time));
  CKPT_RETURN_IF_ERROR(rt.protect_scalar("run/dt", &m_s.dt));
  CKPT_RETURN_IF_ERROR(rt.protect_scalar("run/step", &m_s.step));
  CKPT_RETURN_IF_ERROR(rt.protect_scalar("run/nblocks", &m_s.nblocks));
  CKPT_RETURN_IF_ERROR(rt.protect_scalar("run/nparticles", &m_s.nparticles));
  CKPT_RETURN_IF_ERROR(rt.protect_scalar("run/mesh_uniform", &m_s.mesh_uniform));
  CKPT_RETURN_IF_ERROR(rt.protect_scalar("run/max_level", &m_s.max_level));
  CKPT_RETURN_IF_ERROR(rt.protect_scalar("run/nroot", &m_s.nroot));
  CKPT_RETURN_IF_ERROR(rt.protect_scalar("run/regrids", &m_s.regrids));
  // The arrays are joined arrays registered as Sources: ckpt asks where they are at every checkpoint and
  // restart, so regrids, migrations and restarts re-register nothing. This rank's rows are its blocks (a
  // Morton range, see load()) or its tracers. Block data, one array [nblocks, 16, 16] per variable: the
  // interiors in m_u, a memory selection of each block's (NVAR * NT) x NT cells (no guards, no packing).
  for (int v = 0; v < NVAR; ++v) {
    auto interiors = [this, v] {
      return ckpt::Place{m_u.data(), {m_nlocal, NB, NB}, {{0, v * NT + NG, NG}, {m_nlocal, NVAR * NT, NT}}};
    };
    CKPT_RETURN_IF_ERROR(rt.protect(BLOCK_ARRAYS[v], ckpt::DType::f64, {interiors, nullptr}, ckpt::SourceKind::joined));
  }
  // The grid structure, kept by set_mesh() and regrid().
  CKPT_RETURN_IF_ERROR(ckpt::track_rows(rt, "grid/level", m_grid_level));
  CKPT_RETURN_IF_ERROR(ckpt::track_rows(rt, "grid/coord", m_grid_coord, 2));
  CKPT_RETURN_IF_ERROR(ckpt::track_rows(rt, "grid/bbox", m_grid_bbox, 4));
  CKPT_RETURN_IF_ERROR(ckpt::track_rows(rt, "grid/refine_flag", m_flags));
  // Tracers: two columns of m_particles per array (a box of it seen as rows of 8-byte words); a restart
  // resizes it to this rank's share of the stored rows, and relocate_particles() sends them home.
  auto resize = [this](const ckpt::Shape& rows) {
    m_particles.resize(rows.at(0));
    return ckpt::Status::OK();
  };
  const std::tuple<const char*, std::size_t, ckpt::DType> columns[] = {
      {"particles/pos", offsetof(Particle, x), ckpt::DType::f64},
      {"particles/dens_temp", offsetof(Particle, dens), ckpt::DType::f64},
      {"particles/id", offsetof(Particle, birth), ckpt::DType::i64}};
  for (auto [name, at, type] : columns) {
    auto where = [this, word = at / 8] {
      const std::size_t n = m_particles.size();
      return ckpt::Place{m_particles.data(), {n, 2}, {{0, word}, {n, sizeof(Particle) / 8}}};
    };
    CKPT_RETURN_IF_ERROR(rt.protect(name, type, {where, resize}, ckpt::SourceKind::joined));
  }
  return ckpt::Status::OK();
}

ckpt::Status Simulation::load(ckpt::Runtime& rt, std::int64_t step) {
  // Every rank reads the whole tree of the checkpoint (levels, coordinates) before anything is allocated;
  // the partition of this rank count then says which stored rows, a Morton range, each rank restores.
  ckpt::Result<ckpt::CheckpointReader> stored = rt.inspect(step);
  ckpt::Result<ckpt::VariableInfo> info = stored.ok() ? stored->variable("grid/level") : stored.status();
  if (!info.ok()) return info.status();
  const std::size_t nb = info->shape.empty() ? 0 : info->shape[0];
  std::vector<std::int32_t> level(nb), coord(2 * nb);
  ckpt::Status st = stored.value().read_rank("run/nroot", 0, &m_s.nroot, sizeof m_s.nroot);
  if (st.ok()) st = stored.value().read("grid/level", level.data(), nb * sizeof(std::int32_t));
  if (st.ok()) st = stored.value().read("grid/coord", coord.data(), 2 * nb * sizeof(std::int32_t));
  int ok = st.ok() ? 1 : 0, all = 0;  // the reads are this rank's own: agree before the collective restart
  MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, m_comm);
  if (!all) return st.ok() ? ckpt::Status(ckpt::Code::corrupt, "restart failed on another rank") : st;
  if (m_s.nroot != m_tree.nroot())  // another maximum level is a cross-mesh restart, another root grid is not
    return ckpt::Status(ckpt::Code::mismatch, "checkpoint " + std::to_string(step) + " has " +
                                                  std::to_string(m_s.nroot) + " root blocks per side, the run " +
                                                  std::to_string(m_tree.nroot()));
  std::vector<BlockKey> leaves(nb);
  for (std::size_t b = 0; b < nb; ++b) leaves[b] = {level[b], coord[2 * b], coord[2 * b + 1]};
  set_mesh(leaves);
  if (m_tree.leaves() != leaves) return ckpt::Status(ckpt::Code::corrupt, "the stored blocks are not in Morton order");
  std::vector<std::uint64_t> rows(static_cast<std::size_t>(m_nlocal));
  std::iota(rows.begin(), rows.end(), static_cast<std::uint64_t>(m_first));
  for (const char* name : BLOCK_ARRAYS) CKPT_RETURN_IF_ERROR(rt.set_restart_rows(name, rows));
  CKPT_RETURN_IF_ERROR(rt.restart(step));  // the blocks, their refine flags, the tracers and the scalars
  fill_all_guards();
  relocate_particles();
  return ckpt::Status::OK();
}
// ckpt-glue end

// ---- diagnostics ----------------------------------------------------------------------------------

template <class Fn>
void Simulation::gather_global(Fn&& on_root) {
  // Block interiors (with their keys) and particles to rank 0 in global order.
  std::vector<double> mine(static_cast<std::size_t>(m_nlocal) * NVAR * NB * NB);
  std::size_t o = 0;
  for (int b = 0; b < m_nlocal; ++b)
    for (int v = 0; v < NVAR; ++v)
      for (int j = NG; j < NG + NB; ++j)
        for (int i = NG; i < NG + NB; ++i) mine[o++] = m_u(b, v, j, i);
  std::vector<double> pmine;
  for (const Particle& p : m_particles) {
    double tag;
    const std::int64_t t = p.tag;
    std::memcpy(&tag, &t, sizeof tag);
    pmine.insert(pmine.end(), {p.x, p.y, p.dens, p.temp, tag});
  }
  auto gather = [&](const std::vector<double>& in) {
    int n = static_cast<int>(in.size());
    std::vector<int> counts(m_size), displs(m_size);
    MPI_Gather(&n, 1, MPI_INT, counts.data(), 1, MPI_INT, 0, m_comm);
    int total = 0;
    for (int r = 0; r < m_size; ++r) displs[r] = total, total += counts[r];
    std::vector<double> all(m_rank == 0 ? static_cast<std::size_t>(total) : 0);
    MPI_Gatherv(in.data(), n, MPI_DOUBLE, all.data(), counts.data(), displs.data(), MPI_DOUBLE, 0, m_comm);
    return all;
  };
  std::vector<double> blocks = gather(mine), parts = gather(pmine);
  if (m_rank == 0) on_root(blocks, parts);
}

std::string Simulation::digest() {
  std::string out;
  gather_global([&](const std::vector<double>& blocks, const std::vector<double>& parts) {
    XXH3_state_t* h = XXH3_createState();
    XXH3_64bits_reset(h);
    XXH3_64bits_update(h, &m_s.time, sizeof m_s.time);
    XXH3_64bits_update(h, &m_s.step, sizeof m_s.step);
    for (const BlockKey& k : m_tree.leaves()) XXH3_64bits_update(h, &k, sizeof k);
    XXH3_64bits_update(h, blocks.data(), blocks.size() * sizeof(double));
    XXH3_64bits_update(h, parts.data(), parts.size() * sizeof(double));
    char hex[17];
    std::snprintf(hex, sizeof hex, "%016" PRIx64, static_cast<std::uint64_t>(XXH3_64bits_digest(h)));
    XXH3_freeState(h);
    out = hex;
  });
  return out;
}

double Simulation::shock_radius() {
  double radius = 0;
  gather_global([&](const std::vector<double>& blocks, const std::vector<double>&) {
    // Angle-averaged density in rings one finest cell wide; a coarse cell is split into finest-size
    // pieces so that every ring is sampled evenly. The shock is where the average falls, outside the
    // peak, to halfway between the peak and the ambient density (a captured shock is 2-3 cells wide
    // and nearly symmetric about that level).
    const int lf = m_tree.finest_level();
    const double w = m_tree.dx(lf);
    std::vector<double> mass(static_cast<std::size_t>(std::ceil(std::sqrt(2.0) / w)) + 2, 0.0), area(mass.size(), 0.0);
    for (int b = 0; b < m_tree.size(); ++b) {
      const BlockKey& k = m_tree.leaf(b);
      const int sub = 1 << (lf - k.level);
      const double dx = m_tree.dx(k.level);
      for (int j = 0; j < NB; ++j)
        for (int i = 0; i < NB; ++i) {
          const double rho = blocks[((static_cast<std::size_t>(b) * NVAR + DENS) * NB + j) * NB + i];
          for (int sj = 0; sj < sub; ++sj)
            for (int si = 0; si < sub; ++si) {
              const double x = (k.i * NB + i) * dx + (si + 0.5) * w, y = (k.j * NB + j) * dx + (sj + 0.5) * w;
              const std::size_t bin = static_cast<std::size_t>(std::hypot(x, y) / w);
              mass[bin] += rho, area[bin] += 1;
            }
        }
    }
    std::vector<double> mean(mass.size(), 0.0);
    std::size_t peak = 0;
    for (std::size_t n = 0; n < mass.size(); ++n) {
      mean[n] = area[n] > 0 ? mass[n] / area[n] : 0.0;
      if (mean[n] > mean[peak]) peak = n;
    }
    const double level = 0.5 * (mean[peak] + RHO0);
    for (std::size_t n = peak + 1; n < mean.size(); ++n)
      if (area[n] > 0 && mean[n] < level) {
        const double f = (mean[n - 1] - level) / (mean[n - 1] - mean[n]);
        radius = (static_cast<double>(n - 1) + 0.5 + f) * w;
        break;
      }
  });
  return radius;
}

}  // namespace sedov
