// The out-of-line parts of the public value types (Status, DType, MemoryKind names) and version(), in
// the base library so that every layer has them (the tools link the base layer beside libckpt).
#include <string>

#include "ckpt/ckpt.hpp"
#include "ckpt/config.hpp"

namespace ckpt {

const char* version() noexcept { return CKPT_VERSION; }  // the project version (config.hpp)

const char* code_name(Code c) noexcept {
  switch (c) {
    case Code::ok: return "ok";
    case Code::invalid_argument: return "invalid_argument";
    case Code::not_found: return "not_found";
    case Code::mismatch: return "mismatch";
    case Code::corrupt: return "corrupt";
    case Code::io_error: return "io_error";
    case Code::unavailable: return "unavailable";
    case Code::failed_precondition: return "failed_precondition";
    case Code::internal: return "internal";
    case Code::superseded: return "superseded";
  }
  return "?";
}

std::string Status::to_string() const { return ok() ? "ok" : std::string(code_name(m_code)) + ": " + m_message; }

Status Status::with_context(const std::string& context) const {
  if (ok()) return *this;
  return Status(m_code, context + ": " + m_message);
}

std::size_t dtype_size(DType t) noexcept {
  switch (t) {
    case DType::u8:
    case DType::i8:
    case DType::bytes: return 1;
    case DType::u16:
    case DType::i16: return 2;
    case DType::u32:
    case DType::i32:
    case DType::f32: return 4;
    case DType::u64:
    case DType::i64:
    case DType::f64: return 8;
  }
  return 0;
}

const char* dtype_name(DType t) noexcept {
  switch (t) {
    case DType::u8: return "u8";
    case DType::i8: return "i8";
    case DType::u16: return "u16";
    case DType::i16: return "i16";
    case DType::u32: return "u32";
    case DType::i32: return "i32";
    case DType::u64: return "u64";
    case DType::i64: return "i64";
    case DType::f32: return "f32";
    case DType::f64: return "f64";
    case DType::bytes: return "bytes";
  }
  return "?";
}

const char* memory_kind_name(MemoryKind k) noexcept {
  switch (k) {
    case MemoryKind::host: return "host";
    case MemoryKind::host_pinned: return "host_pinned";
    case MemoryKind::device: return "device";
    case MemoryKind::managed: return "managed";
  }
  return "?";
}

}  // namespace ckpt
