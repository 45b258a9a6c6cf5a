// SplitMix64's finaliser: test data that is a pure function of (step, index), so a check after a
// crash needs no recomputation (crash_app, adv_app).
#ifndef CKPT_TESTS_SUPPORT_SPLITMIX_HPP
#define CKPT_TESTS_SUPPORT_SPLITMIX_HPP

#include <cstdint>

namespace ckpt::test {

inline std::uint64_t mix(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

}  // namespace ckpt::test

#endif  // CKPT_TESTS_SUPPORT_SPLITMIX_HPP
