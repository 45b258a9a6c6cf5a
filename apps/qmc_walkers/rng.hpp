/// \file rng.hpp
/// A counter-based random number generator for the walkers: every draw is a pure function of
/// (seed, walker id, step, stream, counter). No generator state lives in a walker or on a rank, so a
/// walker's trajectory is the same whichever rank moves it, and nothing about the RNG needs to be
/// checkpointed. The mixing function is SplitMix64 (Steele, Lea, Flood 2014), which is itself a
/// counter-based generator: output k of a sequence is splitmix64(key + k * golden_gamma).
#ifndef QMC_WALKERS_RNG_HPP
#define QMC_WALKERS_RNG_HPP

#include <Kokkos_Core.hpp>

#include <cmath>
#include <cstdint>

namespace qmc {

KOKKOS_INLINE_FUNCTION std::uint64_t splitmix64(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

/// Draws of one walker in one step. Construct it where the draws are needed (inside a kernel);
/// two generators built from the same key produce the same numbers, which lets a kernel regenerate
/// a proposal instead of storing it.
class CounterRng {
 public:
  /// `stream` separates independent uses in the same step (moves, branching, initial positions).
  KOKKOS_INLINE_FUNCTION CounterRng(std::uint64_t seed, std::uint64_t walker_id, std::uint64_t step,
                                    std::uint64_t stream)
      : m_key(splitmix64(splitmix64(splitmix64(splitmix64(seed) ^ walker_id) ^ step) ^ stream)) {}

  KOKKOS_INLINE_FUNCTION std::uint64_t next_u64() {
    ++m_counter;
    return splitmix64(m_key + m_counter * 0x9e3779b97f4a7c15ull);
  }
  /// Uniform in [0, 1) with 53 random bits.
  KOKKOS_INLINE_FUNCTION double uniform() { return static_cast<double>(next_u64() >> 11) * 0x1.0p-53; }
  /// Standard normal (Box-Muller; the second value of a pair is kept for the next call).
  KOKKOS_INLINE_FUNCTION double normal() {
    if (m_has_spare) {
      m_has_spare = false;
      return m_spare;
    }
    const double u1 = 1.0 - uniform();  // (0, 1]: log() stays finite
    const double u2 = uniform();
    const double r = std::sqrt(-2.0 * std::log(u1));
    const double phi = 6.283185307179586476925 * u2;
    m_spare = r * std::sin(phi);
    m_has_spare = true;
    return r * std::cos(phi);
  }

 private:
  std::uint64_t m_key;
  std::uint64_t m_counter = 0;
  double m_spare = 0.0;
  bool m_has_spare = false;
};

}  // namespace qmc

#endif  // QMC_WALKERS_RNG_HPP
