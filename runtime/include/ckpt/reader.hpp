/// \file reader.hpp
/// Reading checkpoints without restarting: open a checkpoint root (the `dir` of a run) or one
/// checkpoint directory, list its complete steps, describe the variables of a step and read any box
/// of a global array, a rank's local array or scalar, verifying the checksum of every block read.
///
///     auto r = ckpt::Reader::open("/scratch/run/ckpt");          // no MPI needed
///     auto c = r->latest();                                      // Result<CheckpointReader>
///     auto v = c->variable("rho");                               // Result<VariableInfo>
///     std::vector<double> box(10 * 64);
///     ckpt::Status s = c->read("rho", {10, 0}, {10, 64}, box.data(), box.size() * sizeof(double));
///
/// Serial: no MPI call is made, so a tool, a notebook or every rank of a job may read on its own.
/// Reader::open(comm, path) opens on a communicator instead: the listing and each step's index are
/// read once by rank 0 and shared, and every rank then reads its own part of the data in parallel.
/// Thread-safety: a Reader and a CheckpointReader may be used by one thread at a time; distinct
/// objects (also of the same checkpoint) are independent. No MPI, CUDA or HDF5 header is included.
#ifndef CKPT_RUNTIME_READER_HPP
#define CKPT_RUNTIME_READER_HPP

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "ckpt/ckpt.hpp"
#include "ckpt/export.h"
#include "ckpt/status.hpp"

namespace ckpt {

/// How a variable was registered: a Block of a global array, a rank's own array, a single value, or
/// rows of a joined array (every rank's rows concatenated in rank order; read like a global array).
/// The values are those of the stored format.
enum class VarKind : std::uint8_t { local = 0, global = 1, scalar = 2, joined = 3 };
/// "local", "global", "scalar", "joined".
CKPT_API const char* var_kind_name(VarKind k) noexcept;

/// One stored block of a variable: the part one rank wrote.
struct BlockInfo {
  std::uint32_t rank = 0;    ///< rank that wrote it
  Shape start;               ///< global and joined variables: first index of the box; others: zeros
  Shape count;               ///< extents of the box (local variables: the rank's array)
  std::uint64_t bytes = 0;   ///< payload bytes
  std::string file;          ///< data file holding it, relative to the checkpoint directory
  std::uint64_t offset = 0;  ///< byte offset of its payload in `file`; 0 for a block of pieces (incremental)
};

/// A stored variable, as described by the index of its checkpoint (no data is read).
struct VariableInfo {
  std::string name;
  DType dtype = DType::u8;
  VarKind kind = VarKind::local;
  /// Scalars and local arrays: every rank stored the same bytes.
  bool uniform = false;
  /// Global and joined: the extents of the whole array. Local and scalar: the extents of the lowest writer
  /// rank's block ({} for a scalar); blocks[i].count has each rank's.
  Shape shape;
  std::vector<std::pair<std::string, std::string>> attrs;  ///< from annotate(), in order
  /// Whether min/max hold the minimum and maximum over the blocks (false for `bytes`, statistics
  /// off, or no finite value). 64-bit integers beyond 2^53 are rounded to the nearest double.
  bool has_minmax = false;
  double min = 0, max = 0;
  /// In index order. Empty, with `ranks`, while CheckpointReader::blocks_loaded() is false (a two-level
  /// index opened by Runtime::inspect: call load_blocks() to list them).
  std::vector<BlockInfo> blocks;
  std::vector<std::uint32_t> ranks;  ///< ranks that wrote a block, ascending, each once (as `blocks`)
};

class CheckpointReader;
namespace detail {
struct CheckpointReaderState;
struct ReaderState;
class PartialIndex;
/// Internal: a CheckpointReader named `name` over an index already loaded, whole or lazily (a version-2
/// root), whose files are in `dir`; `local_extents` (one Shape per variable) spares a lazily opened one
/// the loads its local arrays' extents need (another rank made them).
Result<CheckpointReader> make_checkpoint_reader(std::string name, std::string dir, PartialIndex index,
                                                const std::vector<Shape>* local_extents);
/// Internal, collective over `comm` (Runtime::inspect, a collective Reader's open_step): the same reader
/// on every rank; a lazily opened index's local extents are loaded by rank 0 and sent; the outcome is
/// agreed. The 3-argument form names it by `dir` (a series step by its step).
Result<CheckpointReader> make_checkpoint_reader(CommRef comm, std::string dir, PartialIndex index);
Result<CheckpointReader> make_checkpoint_reader(CommRef comm, std::string name, std::string dir, PartialIndex index);
}  // namespace detail

/// One complete checkpoint (a step) opened for reading: its index is loaded and validated once (a two-level
/// index opened collectively: its root, then the parts calls need - blocks_loaded()).
/// Movable, not copyable. Every read verifies the XXH3 checksum of each stored block it touches; a
/// mismatch is Code::corrupt, with a message naming the variable, the block's rank, file and offset.
class CKPT_API CheckpointReader {
 public:
  CheckpointReader(CheckpointReader&&) noexcept;
  CheckpointReader& operator=(CheckpointReader&&) noexcept;
  ~CheckpointReader();

  /// The step.
  std::int64_t step() const;
  /// Ranks that wrote it.
  int nranks() const;
  /// Transport that wrote it ("posix", "mpiio", "rbio", "hdf5", ...).
  const std::string& transport() const;
  /// The checkpoint's path: its directory, or for a step of a series root its name
  /// `<root>/ckpt.<step>` (the step's files are in a segment of the root).
  const std::string& path() const;
  /// Attributes of the checkpoint as a whole.
  const std::vector<std::pair<std::string, std::string>>& attrs() const;
  /// Every variable, in registration order.
  const std::vector<VariableInfo>& variables() const;
  /// The variable `name`; not_found naming it and the step.
  Result<VariableInfo> variable(const std::string& name) const;
  /// Whether variables() lists the blocks and writer ranks. Always, except for a checkpoint with a
  /// two-level index (index_format 2) opened collectively (Runtime::inspect(), a Reader opened on a
  /// communicator): that reads the root index only - what is per variable (dtype, kind, shape,
  /// attributes, min/max), O(variables) on every rank, whatever the rank count - and the block records
  /// (one sub-index per writer) when a call needs them: read() those of the writers whose blocks meet
  /// the box, read_rank() the rank's writer's. A damaged sub-index fails the call that needs it
  /// (corrupt), and every later one that needs another; what was loaded before still serves. Until
  /// load_blocks() or verify(), VariableInfo::blocks and ranks stay empty.
  bool blocks_loaded() const;
  /// Reads the whole index as a serial open does (every sub-index, checked against the root and the
  /// catalog: O(ranks)) and fills in the blocks and ranks of variables() (references to it stay valid);
  /// nothing when blocks_loaded(). corrupt when a sub-index is damaged or missing, failed_precondition
  /// when the step was committed again since it was opened. verify() calls it first.
  Status load_blocks();
  /// Index bytes this reader read from files or received, as Runtime::restart_index_bytes() counts a
  /// restart's: opened lazily, the root and what its calls loaded since (on rank 0 of a collective open
  /// also what the local extents needed; the other ranks receive those, not counted); opened whole
  /// collectively, the encoded index; 0 for a whole index opened serially (read by the store).
  std::uint64_t index_bytes() const;

  /// The bytes that read(name, start, count, ...) writes (the box's elements * dtype_size), after the
  /// checks read() makes before it reads anything: the box (as read()), every block the box touches lies
  /// inside its data file as the file is now, and those blocks cover the box. Reads no data. Allocate
  /// the buffer from this, not from extents or block sizes: an index - damaged, or crafted with valid
  /// checksums - may claim more than its files hold (a block of 1 TiB in a file of a few KiB is
  /// `corrupt` here, not an allocation of 1 TiB). Errors as read()'s.
  Result<std::uint64_t> box_bytes(const std::string& name, const Shape& start, const Shape& count);
  /// The same for read_rank(name, rank): the bytes of the block rank `rank` wrote, once it is known to lie
  /// inside its data file.
  Result<std::uint64_t> rank_bytes(const std::string& name, std::uint32_t rank);

  /// Reads the box [start, start + count) of global (or joined) variable `name` into `out` (`out_bytes`
  /// >= the box's elements * dtype_size, row-major, the stored dtype). `out` may be host memory or memory
  /// of the GPU (the device layer classifies it, as it does registered regions): device memory is filled
  /// through a host bounce buffer and the copy has completed when read returns. Reads only the
  /// blocks that intersect the box, each one whole and verified. Errors: not_found (no such
  /// variable), invalid_argument (neither global nor joined, wrong rank of start/count, box outside the array,
  /// `out_bytes` too small), corrupt (checksum, a block beyond the end of its file), mismatch (part of the
  /// box was stored by no block).
  Status read(const std::string& name, const Shape& start, const Shape& count, void* out, std::size_t out_bytes);
  /// Reads the whole of global (or joined) variable `name`.
  Status read(const std::string& name, void* out, std::size_t out_bytes);
  /// The rows of joined variable `key` ordered by its values: element i is the stored row that holds
  /// the i-th smallest key; `keys` (optional) receives the values in that order. `key` is an integer
  /// variable with one value per row ([rows] or [rows, 1]: a block or particle id). Rows of a joined array
  /// are stored in writer-rank order, so the same state written by 4 ranks and by 2 ranks (or after a
  /// load balance) stores its rows in different orders: reading joined arrays of the same rows in this
  /// order makes them comparable (`ckpt diff --key`). Rows holding equal values keep their stored order.
  /// Reads `key` whole. Errors: not_found (no such variable), invalid_argument (not joined, not an integer
  /// dtype, more than one value per row, an unsigned value of 2^63 or more, or - unless allow_duplicates -
  /// a value held by more than one row: the message names the first few with their rows), and read()'s.
  Result<std::vector<std::uint64_t>> rows_by_key(const std::string& key, std::vector<std::int64_t>* keys = nullptr,
                                                 bool allow_duplicates = false);
  /// Reads the block rank `rank` wrote of local or scalar variable `name` (its extents are in
  /// VariableInfo::blocks); not_found when that rank wrote none. A uniform variable may be read
  /// from any rank that wrote it. `out` may be host or device memory, as for read().
  Status read_rank(const std::string& name, std::uint32_t rank, void* out, std::size_t out_bytes);
  /// Reads every block and checks its checksum and its min/max against the index. Ok, or corrupt
  /// with one line per bad block (variable, rank, file, offset), at most 20 lines and a count.
  Status verify();
  /// What verify(on_block) reports for each block, in index order: its variable, the block and the
  /// outcome of its check (ok, or the error naming variable, rank, file and offset). Called on the
  /// calling thread, after the block was read; `var` and `block` are valid during the call only.
  using BlockCheckFn = std::function<void(const VariableInfo& var, const BlockInfo& block, const Status& result)>;
  /// verify(), also handing every block's outcome to `on_block` (a checker lists them all; a progress
  /// bar counts BlockInfo::bytes). Returns what verify() returns.
  Status verify(const BlockCheckFn& on_block);

 private:
  friend class Reader;
  friend Result<CheckpointReader> detail::make_checkpoint_reader(std::string name, std::string dir,
                                                                 detail::PartialIndex index,
                                                                 const std::vector<Shape>* local_extents);
  CKPT_LOCAL explicit CheckpointReader(std::unique_ptr<detail::CheckpointReaderState> s);
  std::unique_ptr<detail::CheckpointReaderState> m_s;
};

/// The checkpoints under one root (the `dir` option of a run), or a single checkpoint directory.
/// Movable, not copyable.
class CKPT_API Reader {
 public:
  /// Opens `path`: a checkpoint root, or one checkpoint directory (ckpt.<step>, `latest`, or any
  /// directory holding an `index`). Nothing but the listing is read. not_found / invalid_argument when
  /// `path` is not a directory.
  static Result<Reader> open(const std::string& path);
  /// Collective over `comm` (every rank calls it with the same `path`): as open(path), but rank 0
  /// lists the root and every rank gets the listing (and the same error). open_step() and latest() of
  /// this Reader are then collective too: rank 0 reads and validates the index once and every rank
  /// gets it, so the ranks of a job open a step with one read of the index, not one per rank. Reads
  /// (CheckpointReader::read, read_rank, verify) stay independent: each rank reads its own part of a
  /// variable, in parallel. `comm` must stay valid while open_step() and latest() are called.
  static Result<Reader> open(CommRef comm, const std::string& path);
  Reader(Reader&&) noexcept;
  Reader& operator=(Reader&&) noexcept;
  ~Reader();

  /// The path given to open().
  const std::string& path() const;
  /// Whether it was opened on a communicator (open_step() and latest() are collective).
  bool collective() const;
  /// Complete steps (committed, with an index that validates), oldest first.
  std::vector<std::int64_t> steps() const;
  /// Why each entry that is not a complete checkpoint was passed over ("ckpt.30.tmp: ..."), newest first.
  const std::vector<std::string>& skipped() const;
  /// Opens step `step`: not_found when it is not a complete step of this root. Collective when
  /// collective().
  Result<CheckpointReader> open_step(std::int64_t step) const;
  /// Opens the newest complete step; not_found when there is none. Collective when collective().
  Result<CheckpointReader> latest() const;

 private:
  CKPT_LOCAL explicit Reader(std::unique_ptr<detail::ReaderState> s);
  std::unique_ptr<detail::ReaderState> m_s;
};

}  // namespace ckpt

#endif  // CKPT_RUNTIME_READER_HPP
