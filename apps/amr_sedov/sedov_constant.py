#!/usr/bin/env python3
"""The Sedov-Taylor constant xi0 in R(t) = xi0 (E t^2 / rho0)^(1/(nu+2)), from the self-similar solution.

With lambda = r/R(t), Rdot = delta R/t (delta = 2/(nu+2)), the ansatz u = Rdot f, rho = rho0 g,
p = rho0 Rdot^2 h turns the Euler equations (geometry nu = 1, 2, 3) into three ODEs in lambda:
    g f' + (f - lambda) g'                  = -(nu - 1) g f / lambda          (mass)
    (f - lambda) f' + h'/g                  = -(delta - 1)/delta f            (momentum)
    (f - lambda) h' - gamma h (f - lambda) g'/g = -2 (delta - 1)/delta h      (entropy)
started at the strong-shock jump, f = h = 2/(gamma+1), g = (gamma+1)/(gamma-1) at lambda = 1, and
integrated inwards (RK4). The blast energy E = A_nu rho0 Rdot^2 R^nu I with
I = int_0^1 (g f^2/2 + h/(gamma-1)) lambda^(nu-1) dlambda and A = 2 (planar, both sides), 2 pi, 4 pi,
so xi0 = (delta^2 A_nu I)^(-1/(nu+2)). Check: nu = 3, gamma = 1.4 gives 1.033 (Taylor 1950, Sedov).
"""
import math
import sys

import numpy as np


def rhs(lam, y, nu, gamma):
    f, g, h = y
    a = f - lam
    d = 2.0 / (nu + 2)
    k = (d - 1) / d
    m = np.array([[g, a, 0.0], [a, 0.0, 1.0 / g], [0.0, -gamma * h * a / g, a]])
    b = np.array([-(nu - 1) * g * f / lam, -k * f, -2 * k * h])
    return np.linalg.solve(m, b)


def xi0(nu, gamma, n=200000, lam_min=1e-6):
    y = np.array([2 / (gamma + 1), (gamma + 1) / (gamma - 1), 2 / (gamma + 1)])
    lams = np.geomspace(1.0, lam_min, n)  # the profile is steep near the shock, flat inside
    integral = 0.0
    integrand = lambda lam, y: (y[1] * y[0] ** 2 / 2 + y[2] / (gamma - 1)) * lam ** (nu - 1)
    for l0, l1 in zip(lams[:-1], lams[1:]):
        hstep = l1 - l0
        k1 = rhs(l0, y, nu, gamma)
        k2 = rhs(l0 + hstep / 2, y + hstep / 2 * k1, nu, gamma)
        k3 = rhs(l0 + hstep / 2, y + hstep / 2 * k2, nu, gamma)
        k4 = rhs(l1, y + hstep * k3, nu, gamma)
        y1 = y + hstep / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
        integral += -hstep * 0.5 * (integrand(l0, y) + integrand(l1, y1))  # trapezoid, lam decreasing
        y = y1
    area = {1: 2.0, 2: 2 * math.pi, 3: 4 * math.pi}[nu]
    d = 2.0 / (nu + 2)
    return (d * d * area * integral) ** (-1.0 / (nu + 2))


if __name__ == "__main__":
    gamma = float(sys.argv[1]) if len(sys.argv) > 1 else 1.4
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 20000
    for nu, name in ((1, "planar"), (2, "cylindrical"), (3, "spherical")):
        print(f"gamma {gamma} {name:12s} xi0 = {xi0(nu, gamma, n):.5f}")
