#include "hydro.hpp"

#include <cmath>

namespace sedov {
namespace {

using Policy3 = Kokkos::MDRangePolicy<Exec, Kokkos::Rank<3>>;

KOKKOS_INLINE_FUNCTION double minmod(double a, double b) {
  if (a * b <= 0) return 0;
  return std::fabs(a) < std::fabs(b) ? a : b;
}

/// van Leer's harmonic limiter: second order in smooth regions, no new extrema at shocks.
KOKKOS_INLINE_FUNCTION double van_leer(double a, double b) { return a * b > 0 ? 2.0 * a * b / (a + b) : 0.0; }

/// HLLC flux (Toro, ch. 10) for states (rho, normal velocity, tangential velocity, p); f gets the
/// fluxes of (rho, normal momentum, tangential momentum, energy).
KOKKOS_INLINE_FUNCTION void hllc(double rl, double ul, double vl, double pl, double rr, double ur, double vr, double pr,
                                 double f[4]) {
  const double cl = std::sqrt(GAMMA * pl / rl), cr = std::sqrt(GAMMA * pr / rr);
  const double el = pl / (GAMMA - 1.0) + 0.5 * rl * (ul * ul + vl * vl);
  const double er = pr / (GAMMA - 1.0) + 0.5 * rr * (ur * ur + vr * vr);
  const double sl = std::fmin(ul - cl, ur - cr), sr = std::fmax(ul + cl, ur + cr);  // Davis
  const double ss = (pr - pl + rl * ul * (sl - ul) - rr * ur * (sr - ur)) / (rl * (sl - ul) - rr * (sr - ur));
  if (sl >= 0) {
    f[0] = rl * ul, f[1] = rl * ul * ul + pl, f[2] = rl * ul * vl, f[3] = ul * (el + pl);
  } else if (sr <= 0) {
    f[0] = rr * ur, f[1] = rr * ur * ur + pr, f[2] = rr * ur * vr, f[3] = ur * (er + pr);
  } else if (ss >= 0) {
    const double c = rl * (sl - ul) / (sl - ss);
    const double us[4] = {c, c * ss, c * vl, c * (el / rl + (ss - ul) * (ss + pl / (rl * (sl - ul))))};
    const double uk[4] = {rl, rl * ul, rl * vl, el};
    const double fk[4] = {rl * ul, rl * ul * ul + pl, rl * ul * vl, ul * (el + pl)};
    for (int k = 0; k < 4; ++k) f[k] = fk[k] + sl * (us[k] - uk[k]);
  } else {
    const double c = rr * (sr - ur) / (sr - ss);
    const double us[4] = {c, c * ss, c * vr, c * (er / rr + (ss - ur) * (ss + pr / (rr * (sr - ur))))};
    const double uk[4] = {rr, rr * ur, rr * vr, er};
    const double fk[4] = {rr * ur, rr * ur * ur + pr, rr * ur * vr, ur * (er + pr)};
    for (int k = 0; k < 4; ++k) f[k] = fk[k] + sr * (us[k] - uk[k]);
  }
}

KOKKOS_INLINE_FUNCTION void prim_at(const BlockView& u, int b, int j, int i, double w[4]) {
  to_primitive(u(b, DENS, j, i), u(b, MOMX, j, i), u(b, MOMY, j, i), u(b, ENER, j, i), w[0], w[1], w[2], w[3]);
}

KOKKOS_INLINE_FUNCTION double pressure_at(const BlockView& u, int b, int j, int i) {
  double w[4];
  prim_at(u, b, j, i, w);
  return w[3];
}

}  // namespace

void fill_guards(const BlockView& u, const IntTable& plan) {
  Kokkos::parallel_for(
      "fill_guards", Kokkos::RangePolicy<Exec>(0, static_cast<int>(plan.extent(0))), KOKKOS_LAMBDA(int e) {
        const int ds = plan(e, 0), dj = plan(e, 1), di = plan(e, 2), kind = plan(e, 3);
        const int ss = plan(e, 4), sj = plan(e, 5), si = plan(e, 6), fl = plan(e, 7);
        for (int v = 0; v < NVAR; ++v) {
          double val;
          if (kind == GUARD_COPY) {
            val = u(ss, v, sj, si);
          } else if (kind == GUARD_RESTRICT) {
            val = 0.25 * (u(ss, v, sj, si) + u(ss, v, sj, si + 1) + u(ss, v, sj + 1, si) + u(ss, v, sj + 1, si + 1));
          } else {
            // Linear prolongation with minmod slopes taken inside the source's interior only: its
            // guards may be being filled by this very kernel.
            const double c = u(ss, v, sj, si);
            const double sx =
                (si > NG && si < NG + NB - 1) ? minmod(u(ss, v, sj, si + 1) - c, c - u(ss, v, sj, si - 1)) : 0.0;
            const double sy =
                (sj > NG && sj < NG + NB - 1) ? minmod(u(ss, v, sj + 1, si) - c, c - u(ss, v, sj - 1, si)) : 0.0;
            val = c + 0.25 * ((fl & 4) ? sx : -sx) + 0.25 * ((fl & 8) ? sy : -sy);
          }
          if ((v == MOMX && (fl & 1)) || (v == MOMY && (fl & 2))) val = -val;
          u(ds, v, dj, di) = val;
        }
      });
  Kokkos::fence();
}

double max_signal_rate(const BlockView& u, const RealList& dx, int nlocal) {
  double rate = 0;
  Kokkos::parallel_reduce(
      "max_signal_rate", Policy3({0, NG, NG}, {nlocal, NG + NB, NG + NB}),
      KOKKOS_LAMBDA(int b, int j, int i, double& m) {
        double w[4];
        prim_at(u, b, j, i, w);
        const double c = std::sqrt(GAMMA * w[3] / w[0]);
        const double r = (std::fabs(w[1]) + c + std::fabs(w[2]) + c) / dx(b);
        if (r > m) m = r;
      },
      Kokkos::Max<double>(rate));
  return rate;
}

void Hydro::resize(int nlocal) {
  if (nlocal <= m_capacity) return;
  m_capacity = nlocal;
  m_wh = BlockView("wh", nlocal, NVAR, NT, NT);
  m_dx = BlockView("dx", nlocal, NVAR, NT, NT);
  m_dy = BlockView("dy", nlocal, NVAR, NT, NT);
  m_fx = BlockView("fx", nlocal, NVAR, NT, NT);
  m_fy = BlockView("fy", nlocal, NVAR, NT, NT);
}

void Hydro::advance(const BlockView& u, const RealList& dx, int nlocal, double dt) {
  resize(nlocal);
  const BlockView wh = m_wh, sx = m_dx, sy = m_dy, fx = m_fx, fy = m_fy;
  // 1. Limited slopes of the primitives and the Hancock half step, in every cell that has both
  //    neighbours (the first guard layer included: its states feed the boundary faces).
  Kokkos::parallel_for(
      "hancock", Policy3({0, 1, 1}, {nlocal, NT - 1, NT - 1}), KOKKOS_LAMBDA(int b, int j, int i) {
        double w[4], wl[4], wr[4], wb[4], wt[4], ax[4], ay[4];
        prim_at(u, b, j, i, w);
        prim_at(u, b, j, i - 1, wl);
        prim_at(u, b, j, i + 1, wr);
        prim_at(u, b, j - 1, i, wb);
        prim_at(u, b, j + 1, i, wt);
        for (int v = 0; v < 4; ++v) {
          ax[v] = van_leer(w[v] - wl[v], wr[v] - w[v]);
          ay[v] = van_leer(w[v] - wb[v], wt[v] - w[v]);
        }
        const double h = 0.5 * dt / dx(b);
        // Primitive-form Euler equations: W_t + A(W) W_x + B(W) W_y = 0.
        const double r = w[0], vx = w[1], vy = w[2], p = w[3];
        const double dw[4] = {vx * ax[0] + r * ax[1] + vy * ay[0] + r * ay[2], vx * ax[1] + ax[3] / r + vy * ay[1],
                              vx * ax[2] + vy * ay[2] + ay[3] / r,
                              vx * ax[3] + GAMMA * p * ax[1] + vy * ay[3] + GAMMA * p * ay[2]};
        for (int v = 0; v < 4; ++v) {
          wh(b, v, j, i) = w[v] - h * dw[v];
          sx(b, v, j, i) = ax[v];
          sy(b, v, j, i) = ay[v];
        }
      });
  // 2. HLLC fluxes through the x faces (face i is the left face of cell i) and the y faces.
  Kokkos::parallel_for(
      "flux_x", Policy3({0, NG, NG}, {nlocal, NG + NB, NG + NB + 1}), KOKKOS_LAMBDA(int b, int j, int i) {
        double l[4], r[4], f[4];
        for (int v = 0; v < 4; ++v) {
          l[v] = wh(b, v, j, i - 1) + 0.5 * sx(b, v, j, i - 1);
          r[v] = wh(b, v, j, i) - 0.5 * sx(b, v, j, i);
        }
        l[0] = std::fmax(l[0], SMALL_DENS), r[0] = std::fmax(r[0], SMALL_DENS);
        l[3] = std::fmax(l[3], SMALL_PRES), r[3] = std::fmax(r[3], SMALL_PRES);
        hllc(l[0], l[1], l[2], l[3], r[0], r[1], r[2], r[3], f);
        fx(b, DENS, j, i) = f[0], fx(b, MOMX, j, i) = f[1], fx(b, MOMY, j, i) = f[2], fx(b, ENER, j, i) = f[3];
      });
  Kokkos::parallel_for(
      "flux_y", Policy3({0, NG, NG}, {nlocal, NG + NB + 1, NG + NB}), KOKKOS_LAMBDA(int b, int j, int i) {
        double l[4], r[4], f[4];
        for (int v = 0; v < 4; ++v) {
          l[v] = wh(b, v, j - 1, i) + 0.5 * sy(b, v, j - 1, i);
          r[v] = wh(b, v, j, i) - 0.5 * sy(b, v, j, i);
        }
        l[0] = std::fmax(l[0], SMALL_DENS), r[0] = std::fmax(r[0], SMALL_DENS);
        l[3] = std::fmax(l[3], SMALL_PRES), r[3] = std::fmax(r[3], SMALL_PRES);
        hllc(l[0], l[2], l[1], l[3], r[0], r[2], r[1], r[3], f);  // normal = y
        fy(b, DENS, j, i) = f[0], fy(b, MOMY, j, i) = f[1], fy(b, MOMX, j, i) = f[2], fy(b, ENER, j, i) = f[3];
      });
  // 3. Conservative update of the interior.
  Kokkos::parallel_for(
      "update", Policy3({0, NG, NG}, {nlocal, NG + NB, NG + NB}), KOKKOS_LAMBDA(int b, int j, int i) {
        const double c = dt / dx(b);
        for (int v = 0; v < NVAR; ++v)
          u(b, v, j, i) -= c * (fx(b, v, j, i + 1) - fx(b, v, j, i) + fy(b, v, j + 1, i) - fy(b, v, j, i));
      });
  Kokkos::fence();
}

void lohner_error(const BlockView& u, int nlocal, RealList& err) {
  if (static_cast<int>(err.extent(0)) < nlocal) err = RealList("lohner", nlocal);
  const RealList e = err;
  // FLASH's gr_estimateBlkError (Lohner 1987): second differences normalised by first differences
  // plus a filter (0.01) against small ripples, cross terms included, maximum over the block.
  Kokkos::parallel_for(
      "lohner", Kokkos::RangePolicy<Exec>(0, nlocal), KOKKOS_LAMBDA(int b) {
        constexpr double filter = 0.01;
        double worst = 0;
        for (int var = 0; var < 2; ++var) {
          auto q = [&](int j, int i) { return var == 0 ? u(b, DENS, j, i) : pressure_at(u, b, j, i); };
          for (int j = NG; j < NG + NB; ++j)
            for (int i = NG; i < NG + NB; ++i) {
              double num = 0, den = 0;
              for (int a = 0; a < 2; ++a)      // direction of the first difference
                for (int s = 0; s < 2; ++s) {  // direction of the shift
                  const int di = a == 0, dj = a == 1, si = s == 0, sj = s == 1;
                  const double dp = q(j + sj + dj, i + si + di) - q(j + sj - dj, i + si - di);
                  const double dm = q(j - sj + dj, i - si + di) - q(j - sj - dj, i - si - di);
                  const double ap = std::fabs(q(j + sj + dj, i + si + di)) + std::fabs(q(j + sj - dj, i + si - di));
                  const double am = std::fabs(q(j - sj + dj, i - si + di)) + std::fabs(q(j - sj - dj, i - si - di));
                  num += (dp - dm) * (dp - dm);
                  const double d = std::fabs(dp) + std::fabs(dm) + filter * (ap + am);
                  den += d * d;
                }
              const double x = den > 0 ? std::sqrt(num / den) : 0.0;
              if (x > worst) worst = x;
            }
        }
        e(b) = worst;
      });
  Kokkos::fence();
}

void remap_blocks(const BlockView& pool, const IntTable& how, const BlockView& out) {
  const int n = static_cast<int>(how.extent(0));
  Kokkos::parallel_for(
      "remap_blocks", Policy3({0, 0, 0}, {n, NB, NB}), KOKKOS_LAMBDA(int b, int fj, int fi) {
        const int kind = how(b, 0);
        for (int v = 0; v < NVAR; ++v) {
          double val;
          if (kind == 0) {
            val = pool(how(b, 1), v, fj + NG, fi + NG);
          } else if (kind == 1) {
            // Restriction: the 2x2 fine cells under this cell, in the child that covers it.
            const int c = (fi >= NB / 2) + 2 * (fj >= NB / 2);
            const int s = how(b, 1 + c), ci = 2 * (fi % (NB / 2)) + NG, cj = 2 * (fj % (NB / 2)) + NG;
            val = 0.25 *
                  (pool(s, v, cj, ci) + pool(s, v, cj, ci + 1) + pool(s, v, cj + 1, ci) + pool(s, v, cj + 1, ci + 1));
          } else {
            // Prolongation: parent value plus minmod slopes (guards of the parent are filled); the
            // four children of a parent cell sum to four times it, so mass, momentum and energy stay.
            const int q = how(b, 5), s = how(b, 1);
            const int pi = (q & 1) * (NB / 2) + fi / 2 + NG, pj = (q >> 1) * (NB / 2) + fj / 2 + NG;
            const double c = pool(s, v, pj, pi);
            const double sx = minmod(pool(s, v, pj, pi + 1) - c, c - pool(s, v, pj, pi - 1));
            const double sy = minmod(pool(s, v, pj + 1, pi) - c, c - pool(s, v, pj - 1, pi));
            val = c + 0.25 * ((fi & 1) ? sx : -sx) + 0.25 * ((fj & 1) ? sy : -sy);
          }
          out(b, v, fj + NG, fi + NG) = val;
        }
      });
  Kokkos::fence();
}

}  // namespace sedov
