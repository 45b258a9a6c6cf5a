/// \file types.hpp
/// The vocabulary of ckpt's interfaces: element types, extents, memory kinds and the communicator
/// handle. The public API (ckpt.hpp, reader.hpp) and ckpt's internal layers share these; nothing here
/// depends on the Runtime. No MPI header is included.
#ifndef CKPT_RUNTIME_TYPES_HPP
#define CKPT_RUNTIME_TYPES_HPP

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <type_traits>
#include <utility>
#include <vector>

#include "ckpt/export.h"

namespace ckpt {

/// Element type of a region. `bytes` is opaque data (no min/max).
enum class DType : std::uint8_t { u8 = 1, i8, u16, i16, u32, i32, u64, i64, f32, f64, bytes };

/// Size in bytes of one element of `t`.
CKPT_API std::size_t dtype_size(DType t) noexcept;
/// "f64", "i32", ...
CKPT_API const char* dtype_name(DType t) noexcept;
/// The DType of a C++ arithmetic type.
template <class T>
constexpr DType dtype_of() {
  static_assert(std::is_arithmetic<T>::value, "dtype_of<T>: T must be arithmetic");
  if constexpr (std::is_floating_point<T>::value) {
    static_assert(sizeof(T) == 4 || sizeof(T) == 8, "only float and double");
    return sizeof(T) == 4 ? DType::f32 : DType::f64;
  } else if constexpr (std::is_signed<T>::value) {
    return sizeof(T) == 1 ? DType::i8 : sizeof(T) == 2 ? DType::i16 : sizeof(T) == 4 ? DType::i32 : DType::i64;
  } else {
    return sizeof(T) == 1 ? DType::u8 : sizeof(T) == 2 ? DType::u16 : sizeof(T) == 4 ? DType::u32 : DType::u64;
  }
}

/// Extents of an array, slowest dimension first (row-major / C order). {} is a single value.
using Shape = std::vector<std::uint64_t>;

/// Extents as an application passes them: a Shape built from values of any integral type, so that
/// `{n, 3}` with an `int n` neither narrows nor warns. A negative value is remembered, and protect()
/// and update() reject it with invalid_argument naming the region.
class Dims : public Shape {
 public:
  Dims() = default;
  Dims(const Shape& s) : Shape(s) {}        // NOLINT: implicit by design
  Dims(Shape&& s) : Shape(std::move(s)) {}  // NOLINT: implicit by design
  template <class I, class = std::enable_if_t<std::is_integral<I>::value>>
  Dims(std::initializer_list<I> values) {  // NOLINT: implicit by design
    for (I v : values) add(v);
  }
  template <class I, class = std::enable_if_t<std::is_integral<I>::value && !std::is_same<I, std::uint64_t>::value>>
  Dims(const std::vector<I>& values) {  // NOLINT: implicit by design
    for (I v : values) add(v);
  }
  /// Mixed integral types, e.g. {rows, std::size_t(3)}.
  template <class... I, class = std::enable_if_t<(sizeof...(I) >= 2) && (std::is_integral<I>::value && ...)>>
  Dims(I... values) {  // NOLINT: implicit by design
    (add(values), ...);
  }
  /// True when one of the values given was negative (it is stored wrapped; never use such a Dims).
  bool has_negative() const { return m_negative; }

 private:
  template <class I>
  void add(I v) {
    if constexpr (std::is_signed<I>::value)
      if (v < 0) m_negative = true;
    push_back(static_cast<std::uint64_t>(v));
  }
  bool m_negative = false;
};

/// Where a registered pointer lives, as detected by the device layer.
enum class MemoryKind : std::uint8_t { host, host_pinned, device, managed };
CKPT_API const char* memory_kind_name(MemoryKind k) noexcept;

/// An opaque copy of an MPI communicator handle (MPI_Comm is a pointer in Open MPI and an int in
/// MPICH); lets this header stay free of mpi.h. Built implicitly from any MPI_Comm.
class CommRef {
 public:
  template <class Comm, class = std::enable_if_t<std::is_trivially_copyable<Comm>::value &&
                                                 !std::is_same<Comm, CommRef>::value && sizeof(Comm) <= 16>>
  CommRef(Comm comm) : m_size(sizeof(Comm)) {  // NOLINT: implicit by design
    std::memcpy(m_bytes, &comm, sizeof(Comm));
  }
  const unsigned char* bytes() const { return m_bytes; }
  std::size_t size() const { return m_size; }

 private:
  unsigned char m_bytes[16] = {};
  std::size_t m_size = 0;
};

}  // namespace ckpt

#endif  // CKPT_RUNTIME_TYPES_HPP
