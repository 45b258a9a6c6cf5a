// The distributed state of amr_sedov: this rank's blocks (a contiguous range of the Morton order)
// with guard cells, ghost copies of touching blocks of other ranks, tracer particles, and the
// operations on them: guard fill, hydro step, regrid with migration, checkpoint registration and restore.
#ifndef AMR_SEDOV_SIMULATION_HPP
#define AMR_SEDOV_SIMULATION_HPP

#include <mpi.h>

#include <array>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

// ckpt-glue begin
#include "ckpt/ckpt.hpp"
// ckpt-glue end
#include "hydro.hpp"
#include "mesh.hpp"

namespace sedov {

/// A Lagrangian tracer. id = (birth rank, tag) as in FLASH-X/AMReX; the tags given at start are
/// unique over all ranks, so (block, tag) orders particles the same way on any rank count.
struct Particle {
  double x = 0, y = 0, dens = 0, temp = 0;
  double vx0 = 0, vy0 = 0;  // velocity at the start of the step (Heun predictor)
  std::int64_t birth = 0, tag = 0;
  std::int64_t block = 0;  // global leaf index that contains the particle
};

/// Run scalars: the same on every rank (ckpt marks them uniform, they restart on any rank count).
struct RunScalars {
  double time = 0, dt = 0;
  std::int64_t step = 0, nblocks = 0, nparticles = 0;
  std::int64_t mesh_uniform = 0, max_level = 0, nroot = 0;
  std::int64_t regrids = 0;
};

enum class RegridMode {
  lohner,
  // ckpt-glue begin
  refine_all,  // refine every block below the maximum level: a cross-mesh restart onto a uniform mesh
  // ckpt-glue end
};

/// Thresholds of the Lohner estimator (FLASH's refine_cutoff, derefine_cutoff): a block is refined
/// above `refine`, may be coarsened below `derefine`.
struct Cutoffs {
  double refine = 0.8, derefine = 0.2;  // FLASH defaults
};

class Simulation {
 public:
  Simulation(MPI_Comm comm, int nroot, int max_level, bool uniform, Cutoffs cutoffs = {});

  /// Sedov initial state: energy E (per unit length, full plane) in the cells within 3.5 finest
  /// cells of the origin; the domain is the quadrant [0,1]^2 with reflecting walls at x=0 and y=0.
  void init_sedov(std::int64_t nparticles);

  /// One time step: CFL dt (at most tmax - time), hydro, tracers; returns dt.
  double step(double cfl, double tmax);
  /// Error estimation and regrid; returns whether the mesh changed. Blocks finer than the maximum
  /// level (restored from a run with a higher one) are coarsened in either mode.
  bool regrid(RegridMode mode);

  // ckpt-glue begin
  /// Registers the whole state with `rt` once, before any restart or checkpoint: the run scalars and,
  /// as Sources that ckpt locates at every checkpoint and restart, the blocks' interiors, the grid
  /// structure and the tracers (no re-registration after regrids or migrations).
  ckpt::Status protect(ckpt::Runtime& rt);
  /// Restores checkpoint `step` on this rank count: reads its tree, builds this rank's part of the
  /// mesh, restarts the blocks it owns by their stored rows, then the ghosts and the particles.
  ckpt::Status load(ckpt::Runtime& rt, std::int64_t step);
  // ckpt-glue end

  /// Digest of the tree, all block interiors and all particles in global order (rank 0; "" elsewhere).
  std::string digest();
  /// Shock radius from the angle-averaged density (rank 0; 0 elsewhere).
  double shock_radius();

  RunScalars& scalars() { return m_s; }
  const Tree& tree() const { return m_tree; }
  int nlocal() const { return m_nlocal; }
  std::int64_t global_particles() const;
  // ckpt-glue begin
  /// Domain integrals of the conserved variables (mass, x and y momentum, energy) over all ranks'
  /// blocks: a conservative regrid keeps them up to round-off.
  std::array<double, NVAR> totals() const;
  // ckpt-glue end

 private:
  struct Exchange {
    std::vector<std::vector<int>> send, recv;  // slots per peer rank, in matching order
  };
  void set_mesh(const std::vector<BlockKey>& leaves);
  void build_exchange_and_plan();
  void exchange(const BlockView& src, const Exchange& ex, const BlockView& dst, bool guards) const;
  void fill_all_guards();
  int slot_of(int global) const;
  void relocate_particles();
  void advect_particles(bool predict, double dt);
  template <class Fn>
  void gather_global(Fn&& on_root);

  MPI_Comm m_comm;
  int m_rank = 0, m_size = 1;
  bool m_uniform;
  Cutoffs m_cutoffs;
  RunScalars m_s;
  Tree m_tree;
  std::int64_t m_first = 0;
  int m_nlocal = 0, m_nghost = 0;
  BlockView m_u;              // slots [0, nlocal): own blocks; [nlocal, nlocal+nghost): ghosts
  RealList m_dx, m_x0, m_y0;  // per slot: cell width and block origin
  IntTable m_plan;
  Exchange m_ghosts;
  std::unordered_map<int, int> m_ghost_slot;  // global leaf -> ghost slot
  Hydro m_hydro;
  RealList m_error;
  std::vector<int> m_flags;  // refine flags of the last regrid, this rank's blocks (also grid/refine_flag)
  std::vector<Particle> m_particles;
  // ckpt-glue begin
  std::vector<std::int32_t> m_grid_level, m_grid_coord;  // this rank's blocks' level and (i, j)
  std::vector<double> m_grid_bbox;                       // and bounding box (x0, x1, y0, y1)
  // ckpt-glue end
};

}  // namespace sedov

#endif
