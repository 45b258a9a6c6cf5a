/// \file blocking.hpp
/// Online blocking analysis (Flyvbjerg & Petersen, J. Chem. Phys. 91, 461 (1989)) of a correlated
/// time series, in O(levels) memory. Level k sees the means of blocks of 2^k consecutive samples;
/// the naive standard error of the mean grows with k while blocks are shorter than the correlation
/// time and levels off once they are longer. All accumulators live in one flat array of doubles so
/// that they can be checkpointed as one region and restored bit for bit.
#ifndef QMC_WALKERS_BLOCKING_HPP
#define QMC_WALKERS_BLOCKING_HPP

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>

namespace qmc {

class Blocking {
 public:
  static constexpr int levels = 30;
  /// Per level: count, sum, sum of squares (of value - shift), pending value, pending flag.
  static constexpr int fields = 5;
  /// Levels with fewer blocks than this do not take part in the error estimate (the error of an
  /// error estimate from n blocks is about 1/sqrt(2(n-1)), 16% at n = 20).
  static constexpr double min_blocks = 20;

  Blocking() { m_data.fill(0.0); }

  void add(double x) {
    if (count(0) == 0) m_data[shift_index] = x;
    // Values are accumulated relative to the first sample so that sum-of-squares does not cancel.
    push(0, x - m_data[shift_index]);
  }
  double count(int k) const { return m_data[k * fields + 0]; }
  double mean() const { return count(0) > 0 ? m_data[shift_index] + m_data[1] / count(0) : 0.0; }
  /// Standard error of the mean at blocking level k (naive formula for the block means).
  double error_at(int k) const {
    const double n = count(k);
    if (n < 2) return 0.0;
    const double m = m_data[k * fields + 1] / n;
    const double var = std::max(0.0, m_data[k * fields + 2] / n - m * m);
    return std::sqrt(var / (n - 1));
  }
  /// The error bar: the largest level estimate among the levels with at least min_blocks blocks.
  /// Taking the maximum is the conservative reading of the plateau.
  double error() const {
    double e = error_at(0);
    for (int k = 1; k < levels; ++k)
      if (count(k) >= min_blocks) e = std::max(e, error_at(k));
    return e;
  }

  double* data() { return m_data.data(); }
  const double* data() const { return m_data.data(); }
  static constexpr std::size_t size() { return levels * fields + 1; }

 private:
  static constexpr int shift_index = levels * fields;
  void push(int k, double x) {
    double* d = &m_data[k * fields];
    d[0] += 1.0;
    d[1] += x;
    d[2] += x * x;
    if (d[4] != 0.0) {
      d[4] = 0.0;
      if (k + 1 < levels) push(k + 1, 0.5 * (d[3] + x));
    } else {
      d[3] = x;
      d[4] = 1.0;
    }
  }
  std::array<double, levels * fields + 1> m_data;
};

}  // namespace qmc

#endif  // QMC_WALKERS_BLOCKING_HPP
