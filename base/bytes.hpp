// Little-endian byte serialisation (internal): the index codec and the MPI gathers that send
// records (transports/hdf5.cpp) write and read with these, so there is one serialiser.
#ifndef CKPT_BASE_BYTES_HPP
#define CKPT_BASE_BYTES_HPP

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "base/layout.hpp"

namespace ckpt::detail {

/// Appends values (host byte order: the codec is little-endian only) to a byte vector.
class ByteWriter {
 public:
  void raw(const void* p, std::size_t n) {
    auto* b = static_cast<const std::uint8_t*>(p);
    m_out.insert(m_out.end(), b, b + n);
  }
  template <class T>
  void put(T v) {
    raw(&v, sizeof v);
  }
  void str(const std::string& s) {
    put<std::uint32_t>(static_cast<std::uint32_t>(s.size()));
    raw(s.data(), s.size());
  }
  void attrs(const Attributes& a) {
    put<std::uint32_t>(static_cast<std::uint32_t>(a.size()));
    for (auto& kv : a) {
      str(kv.first);
      str(kv.second);
    }
  }
  std::vector<std::uint8_t>& bytes() { return m_out; }

 private:
  std::vector<std::uint8_t> m_out;
};

/// Reads what ByteWriter wrote, bounds-checked: every read returns false (and keeps the first
/// error) once the input is exhausted or a count is out of range.
class ByteReader {
 public:
  ByteReader(const std::uint8_t* p, std::size_t n) : m_p(p), m_n(n) {}
  std::size_t left() const { return m_n - m_pos; }
  bool raw(void* dst, std::size_t n) {
    if (n > left()) return fail("truncated");
    std::memcpy(dst, m_p + m_pos, n);
    m_pos += n;
    return true;
  }
  template <class T>
  bool get(T& v) {
    return raw(&v, sizeof v);
  }
  bool str(std::string& s, std::uint32_t max_len = 1u << 20) {
    std::uint32_t len = 0;
    if (!get(len)) return false;
    if (len > max_len || len > left()) return fail("string length out of range");
    s.assign(reinterpret_cast<const char*>(m_p + m_pos), len);
    m_pos += len;
    return true;
  }
  /// Reads a count and checks that `count * min_each` bytes can follow.
  template <class T>
  bool count(T& c, std::size_t min_each, std::uint64_t max) {
    if (!get(c)) return false;
    if (c > max || (min_each > 0 && static_cast<std::uint64_t>(c) > left() / min_each))
      return fail("count out of range");
    return true;
  }
  bool attrs(Attributes& a, std::uint32_t max_attrs) {
    std::uint32_t n = 0;
    if (!count(n, 8, max_attrs)) return false;
    a.resize(n);
    for (auto& kv : a)
      if (!str(kv.first) || !str(kv.second)) return false;
    return true;
  }
  bool fail(const char* why) {
    if (m_error.empty()) m_error = std::string(why) + " at byte " + std::to_string(m_pos);
    return false;
  }
  const std::string& error() const { return m_error; }
  bool at_end() const { return m_pos == m_n; }

 private:
  const std::uint8_t* m_p;
  std::size_t m_n;
  std::size_t m_pos = 0;
  std::string m_error;
};

}  // namespace ckpt::detail

#endif  // CKPT_BASE_BYTES_HPP
