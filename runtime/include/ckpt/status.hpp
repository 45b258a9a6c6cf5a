/// \file status.hpp
/// Errors as values: Status and Result<T>. Every public ckpt call returns one of these; the library
/// never throws across its API and never calls exit().
#ifndef CKPT_RUNTIME_STATUS_HPP
#define CKPT_RUNTIME_STATUS_HPP

// Every C++ header of ckpt includes this one. (C code includes ckpt/ckpt.h, which needs C99 only.)
#if __cplusplus < 201703L
#error "ckpt's C++ API needs C++17: compile with -std=c++17 (pkg-config --variable=cxxflags ckpt), or use the C API ckpt/ckpt.h"
#endif

#include <optional>
#include <string>
#include <utility>

#include "ckpt/export.h"

namespace ckpt {

/// What kind of failure a Status reports. Callers branch on the code, people read the message.
enum class Code {
  ok = 0,
  invalid_argument,     ///< bad input from the caller: a name, a shape, an option value
  not_found,            ///< no such checkpoint, variable or file
  mismatch,             ///< restart target differs from what is stored (dtype, shape, rank count)
  corrupt,              ///< on-disk data failed validation (checksum, index, footer)
  io_error,             ///< the operating system refused (ENOSPC, EIO, EACCES, ...)
  unavailable,          ///< a feature not compiled in, or an MPI without the needed thread level
  failed_precondition,  ///< call made in the wrong state (e.g. after close())
  internal,             ///< a bug in ckpt: please report it
  /// Not a failure: with on_busy = coalesce, a newer checkpoint replaced this one before it was
  /// flushed (Status::failed() is false; see docs/options.md).
  superseded,
};

/// Name of a code, e.g. "io_error".
CKPT_API const char* code_name(Code c) noexcept;

/// Outcome of an operation: ok, or a code with a human-readable message.
/// Value type; cheap to copy when ok. Thread-safe to read from several threads.
class CKPT_API Status {
 public:
  Status() = default;  ///< ok
  Status(Code code, std::string message) : m_code(code), m_message(std::move(message)) {}

  static Status OK() { return Status(); }
  bool ok() const noexcept { return m_code == Code::ok; }
  /// Not ok and not `superseded`: something went wrong.
  bool failed() const noexcept { return m_code != Code::ok && m_code != Code::superseded; }
  Code code() const noexcept { return m_code; }
  /// The message, without the code; empty when ok.
  const std::string& message() const noexcept { return m_message; }
  /// "ok" or "<code>: <message>".
  std::string to_string() const;
  /// A copy whose message is prefixed with `context: `; ok stays ok.
  Status with_context(const std::string& context) const;

 private:
  Code m_code = Code::ok;
  std::string m_message;
};

/// A value or the Status saying why there is none.
template <class T>
class Result {
 public:
  Result(T value) : m_value(std::move(value)) {}         // NOLINT: implicit by design
  Result(Status status) : m_status(std::move(status)) {  // NOLINT: implicit by design
    if (m_status.ok()) m_status = Status(Code::internal, "Result built from an ok Status without value");
  }
  /// A value with a note: the operation succeeded, but something the caller should know happened
  /// (e.g. restart() fell back past newer checkpoints); `note` is a non-ok Status saying what.
  Result(T value, Status note) : m_value(std::move(value)), m_warning(std::move(note)) {}
  bool ok() const noexcept { return m_status.ok(); }
  const Status& status() const noexcept { return m_status; }
  /// Ok, or what the caller should know about a successful result (see the constructor above).
  const Status& warning() const noexcept { return m_warning; }
  /// The value; only valid when ok().
  const T& value() const& { return *m_value; }
  T& value() & { return *m_value; }
  T&& value() && { return std::move(*m_value); }
  const T& operator*() const& { return *m_value; }
  const T* operator->() const { return &*m_value; }

 private:
  std::optional<T> m_value;
  Status m_status;
  Status m_warning;
};

}  // namespace ckpt

/// Internal helper: return the Status of `expr` from the enclosing function if it is not ok.
#define CKPT_RETURN_IF_ERROR(expr)                 \
  do {                                             \
    ::ckpt::Status ckpt_impl_st_ = (expr);         \
    if (!ckpt_impl_st_.ok()) return ckpt_impl_st_; \
  } while (0)

#endif  // CKPT_RUNTIME_STATUS_HPP
