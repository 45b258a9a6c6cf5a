/// \file store.hpp
/// What the `ckpt` tool adds to the checkpoint store (base/store.hpp): which paths are roots and which
/// are checkpoints, one-line errors for a checkpoint given by path, the public Reader through which
/// every subcommand reads data, and small formatting helpers. Serial; no MPI call is made. Internal to tools/.
#ifndef CKPT_TOOLS_STORE_HPP
#define CKPT_TOOLS_STORE_HPP

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/format.hpp"
#include "base/posix_io.hpp"
#include "base/store.hpp"
#include "ckpt/ckpt.hpp"
#include "ckpt/reader.hpp"

namespace ckpt::tools {

using detail::BlockRecord;
using detail::FileRecord;
using detail::Index;
using detail::RegionKind;
using detail::VarRecord;
using detail::human_bytes;

/// Exit statuses shared by every subcommand.
enum ExitCode : int {
  kExitOk = 0,     ///< success (verify: every check passed; diff --tol: within tolerance)
  kExitBad = 1,    ///< verify found bad data; diff --tol found a variable beyond the tolerance
  kExitError = 2,  ///< a usage error, a missing path, an incomplete or unreadable checkpoint
};

/// A committed checkpoint whose index decoded and validated.
struct Checkpoint {
  std::string dir;       ///< path of the checkpoint as given (or as found under a root): ckpt.<step>
  std::string data_dir;  ///< where the index's files are: `dir`, or a series step's segment
  Index index;
};

using detail::EntryKind;
using detail::StepEntry;

using detail::check_directory;
using detail::names_checkpoint;
using detail::var_stats;
using detail::VarStats;

/// Loads the checkpoint `dir` names (detail::load_checkpoint: a directory, or a step of a series root)
/// and validates its index (magic, version, footer, checksum, every field, the step of its name).
/// Errors are one line: "incomplete checkpoint ...", "corrupt checkpoint ...", ...
Result<Checkpoint> open_checkpoint(const std::string& dir);

/// When `path` is a segment directory of a series root (`<root>/series.<k>`) or a file in one, which no
/// subcommand takes (a segment is no root and no checkpoint): the one-line error naming the root to
/// give instead, "<path> is segment <k> of the series root <root>; give the root".
std::optional<std::string> segment_path_error(const std::string& path);

/// The public reader (ckpt/reader.hpp) of a checkpoint directory as is, or of the newest complete
/// checkpoint of a root: how every subcommand reads data. Errors are one line, as open_checkpoint's.
Result<CheckpointReader> open_reader(const std::string& path);

/// Whether variables of kind `k` are one array read by box (global and joined), as for the stored kind.
inline bool has_global_shape(VarKind k) { return detail::has_global_shape(static_cast<RegionKind>(k)); }

/// Calls `f(T{})` with the C++ element type of `t` (`bytes` maps to std::uint8_t).
template <class F>
decltype(auto) visit_dtype(DType t, F&& f) {
  switch (t) {
    case DType::i8: return f(std::int8_t{});
    case DType::u16: return f(std::uint16_t{});
    case DType::i16: return f(std::int16_t{});
    case DType::u32: return f(std::uint32_t{});
    case DType::i32: return f(std::int32_t{});
    case DType::u64: return f(std::uint64_t{});
    case DType::i64: return f(std::int64_t{});
    case DType::f32: return f(float{});
    case DType::f64: return f(double{});
    case DType::u8:
    case DType::bytes: break;
  }
  return f(std::uint8_t{});
}

/// Number of elements of a block (1 for a 0-d block).
std::uint64_t block_elements(const BlockRecord& b);
/// Product of a shape (1 for {}).
std::uint64_t shape_elements(const Shape& s);
/// "[16, 12]" / "[]".
std::string shape_to_string(const Shape& s);

/// A one-line progress bar on stderr, drawn only when stderr is a terminal. Redraws at most ~10x/s.
class Progress {
 public:
  Progress(std::string label, std::uint64_t total);
  ~Progress();
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;
  /// Counts `n` more units done.
  void add(std::uint64_t n);
  /// Clears the bar (also done by the destructor).
  void finish();

 private:
  void draw();
  std::string m_label;
  std::uint64_t m_total, m_done = 0;
  bool m_enabled;
  double m_last_draw = 0;
};

}  // namespace ckpt::tools

#endif  // CKPT_TOOLS_STORE_HPP
