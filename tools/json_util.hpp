/// \file json_util.hpp
/// Small JSON helpers shared by the subcommands (internal to tools/).
#ifndef CKPT_TOOLS_JSON_UTIL_HPP
#define CKPT_TOOLS_JSON_UTIL_HPP

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>

#include "base/format.hpp"

namespace ckpt::tools {

/// "0x0123456789abcdef" (checksums and ids: JSON numbers lose bits above 2^53 in most readers).
inline std::string hex64(std::uint64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "0x%016llx", static_cast<unsigned long long>(v));
  return buf;
}

/// A stored min/max as a JSON number of its class (i64, u64 or f64); non-finite floats become null.
inline nlohmann::ordered_json stat_json(DType t, std::uint64_t bits) {
  switch (t) {
    case DType::f32:
    case DType::f64: {
      const double d = detail::stat_to_double(t, bits);
      return std::isfinite(d) ? nlohmann::ordered_json(d) : nlohmann::ordered_json(nullptr);
    }
    case DType::i8:
    case DType::i16:
    case DType::i32:
    case DType::i64: return static_cast<std::int64_t>(bits);
    default: return bits;
  }
}

/// Key/value attributes as a JSON object (later duplicates win).
inline nlohmann::ordered_json attrs_json(const detail::Attributes& attrs) {
  nlohmann::ordered_json j = nlohmann::ordered_json::object();
  for (auto& kv : attrs) j[kv.first] = kv.second;
  return j;
}

/// A double as JSON; NaN and infinities become null (JSON has no such numbers).
inline nlohmann::ordered_json num_json(double d) {
  return std::isfinite(d) ? nlohmann::ordered_json(d) : nlohmann::ordered_json(nullptr);
}

}  // namespace ckpt::tools

#endif  // CKPT_TOOLS_JSON_UTIL_HPP
