// Kokkos kernels of amr_sedov: MUSCL-Hancock + HLLC for the 2D Euler equations on 16x16 blocks with
// guard cells, the guard-cell fill from a precomputed plan (same level, restriction, prolongation,
// boundaries), the Lohner error estimator, and the regrid's conservative prolongation/restriction.
#ifndef AMR_SEDOV_HYDRO_HPP
#define AMR_SEDOV_HYDRO_HPP

#include <Kokkos_Core.hpp>

#include "mesh.hpp"

namespace sedov {

using Exec = Kokkos::DefaultHostExecutionSpace;
using Mem = Kokkos::HostSpace;
/// Blocks of conserved variables: (slot, var, j, i), i along x fastest; guards included.
using BlockView = Kokkos::View<double****, Kokkos::LayoutRight, Mem>;
using IntTable = Kokkos::View<int**, Kokkos::LayoutRight, Mem>;
using RealList = Kokkos::View<double*, Mem>;

constexpr double GAMMA = 1.4;
constexpr double SMALL_DENS = 1e-10, SMALL_PRES = 1e-12;

/// Guard-cell plan: one row per guard cell of a local block.
/// Columns: dst slot, dst j, dst i, kind, src slot, src j, src i, flags.
/// kind 0 copy, 1 restrict (src is the lower-left of 2x2 fine cells), 2 prolong (flags bits 2/3 =
/// fine cell in the upper half along x/y); flags bit 0/1 = negate x/y momentum (reflecting wall).
enum GuardKind { GUARD_COPY = 0, GUARD_RESTRICT = 1, GUARD_PROLONG = 2 };
void fill_guards(const BlockView& u, const IntTable& plan);

/// Largest (|u| + c)/dx + (|v| + c)/dy over the interiors of slots [0, nlocal).
double max_signal_rate(const BlockView& u, const RealList& dx, int nlocal);

/// Scratch arrays of the hydro step, sized for nlocal blocks.
class Hydro {
 public:
  void resize(int nlocal);
  /// One MUSCL-Hancock step of length dt on slots [0, nlocal); guards must be filled.
  void advance(const BlockView& u, const RealList& dx, int nlocal, double dt);

 private:
  BlockView m_wh, m_dx, m_dy, m_fx, m_fy;  // half-step primitives, slopes, face fluxes
  int m_capacity = -1;
};

/// Largest Lohner error (density and pressure) per block; guards must be filled.
void lohner_error(const BlockView& u, int nlocal, RealList& err);

/// Regrid: builds new blocks from old ones held in `pool` (guards filled). Rows of `how`:
/// kind (0 copy, 1 restrict from 4 children, 2 prolong from the parent), src slots s0..s3 (children
/// in order (0,0),(1,0),(0,1),(1,1); s0 only for copy/prolong), quadrant (a + 2b) of the new block
/// in its parent for prolong.
void remap_blocks(const BlockView& pool, const IntTable& how, const BlockView& out);

/// Primitive variables of a conserved state, with floors.
KOKKOS_INLINE_FUNCTION void to_primitive(double d, double mx, double my, double e, double& r, double& u, double& v,
                                         double& p) {
  r = d > SMALL_DENS ? d : SMALL_DENS;
  u = mx / r;
  v = my / r;
  p = (GAMMA - 1.0) * (e - 0.5 * r * (u * u + v * v));
  if (p < SMALL_PRES) p = SMALL_PRES;
}

}  // namespace sedov

#endif
