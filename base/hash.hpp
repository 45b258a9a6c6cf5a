// XXH3-64 checksums and min/max statistics (internal).
#ifndef CKPT_BASE_HASH_HPP
#define CKPT_BASE_HASH_HPP

#include <cstddef>
#include <cstdint>
#include <string>

#include "ckpt/status.hpp"
#include "ckpt/types.hpp"

namespace ckpt::detail {

/// XXH3-64 of a byte range, and a streaming variant.
std::uint64_t hash64(const void* p, std::size_t n);
/// XXH3-128 (`XXH3_128bits`, seed 0) of a byte range; stored low half first (docs/format.md).
struct Hash128 {
  std::uint64_t lo = 0, hi = 0;
  bool operator==(const Hash128& o) const { return lo == o.lo && hi == o.hi; }
  bool operator!=(const Hash128& o) const { return !(*this == o); }
};
Hash128 hash128(const void* p, std::size_t n);
class Hasher {
 public:
  Hasher();
  ~Hasher();
  Hasher(const Hasher&) = delete;
  Hasher& operator=(const Hasher&) = delete;
  void reset();
  void update(const void* p, std::size_t n);
  std::uint64_t digest() const;

 private:
  void* m_state;
};

/// Streaming XXH3-128 (seed 0): the hash of an incremental checkpoint's piece (docs/format.md) when the
/// piece arrives in parts. digest() equals hash128() of the bytes given since reset().
class Hasher128 {
 public:
  Hasher128();
  ~Hasher128();
  Hasher128(const Hasher128&) = delete;
  Hasher128& operator=(const Hasher128&) = delete;
  void reset();
  void update(const void* p, std::size_t n);
  Hash128 digest() const;

 private:
  void* m_state;
};

/// Running min/max over elements of a numeric dtype; NaNs are ignored.
class MinMax {
 public:
  explicit MinMax(DType t) : m_type(t) {}
  /// `n` must be whole elements (the caller carries a partial element across calls).
  void update(const void* p, std::size_t n);
  bool valid() const { return m_seen; }
  std::uint64_t min_bits() const { return m_min; }
  std::uint64_t max_bits() const { return m_max; }

 private:
  DType m_type;
  bool m_seen = false;
  std::uint64_t m_min = 0, m_max = 0;
};
/// Whether a dtype gets min/max (all but `bytes`).
bool dtype_has_stats(DType t) noexcept;
/// Human form of a stored min/max bit pattern.
std::string stat_to_string(DType t, std::uint64_t bits);
/// Stored min/max as a double (for tools).
double stat_to_double(DType t, std::uint64_t bits);
/// 64 bits for ids and tokens that must differ across processes and calls (not a secret): the random
/// device mixed with the steady and system clocks, the process id and a per-process count, hashed. Never
/// throws: where the random device fails (no entropy source, no file descriptor left) the rest still
/// differs - a draw must not fail on one rank only. May be 0: callers that need non-zero say so.
std::uint64_t random64();
/// Whether stored bits `a` are below `b` as values of `t` (floats as doubles: a NaN is below nothing,
/// signed integers signed, the rest unsigned): how blocks' min/max merge into a variable's.
bool stat_less(DType t, std::uint64_t a, std::uint64_t b);

}  // namespace ckpt::detail

#endif  // CKPT_BASE_HASH_HPP
