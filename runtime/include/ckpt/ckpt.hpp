/// \file ckpt.hpp
/// The public API of ckpt: register the regions that make up an application's state, checkpoint them
/// asynchronously, find the newest complete checkpoint and restart from it.
///
///     ckpt::Runtime rt(MPI_COMM_WORLD, ckpt::Options());   // collective
///     rt.protect("walkers/pos", pos, ckpt::DType::f64, {n, 3});
///     rt.protect_scalar("step", &step);
///     ckpt::Ticket tk = rt.checkpoint(step);    // returns once the data is captured
///     ...compute...; tk.wait();                 // committed and durable
///
/// Threading: a Runtime is used by one application thread at a time; collective calls come in the
/// same order on every rank. Any MPI thread level works (option mpi_threads, docs/options.md): with
/// MPI_THREAD_MULTIPLE ckpt's own threads call MPI on private duplicates of the communicator and
/// commit in the background; below it (funneled) only the application thread calls MPI, and
/// checkpoint(), poll() and wait_all() commit what every rank has written.
/// No MPI, CUDA, HDF5 or Kokkos header is included here.
#ifndef CKPT_RUNTIME_CKPT_HPP
#define CKPT_RUNTIME_CKPT_HPP

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <initializer_list>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "ckpt/export.h"
#include "ckpt/options.hpp"
#include "ckpt/status.hpp"
#include "ckpt/types.hpp"

namespace ckpt {

/// This rank's part of a global row-major array: the box [start, start + count) of `global`.
/// Regions declared this way can be restarted on a different number of ranks.
struct Block {
  Dims global;  ///< extents of the whole array, the same on every rank
  Dims start;   ///< first index of this rank's box in each dimension
  Dims count;   ///< extents of this rank's box (the local array); a zero count is allowed
};

/// This rank's rows of a joined array (ADIOS2's JoinedArray): the global array is every rank's rows,
/// concatenated in rank order, for per-rank lists whose lengths change every step (particles,
/// walkers, atoms). The runtime gathers the row counts at each commit; no offsets to compute.
/// Restartable on any rank count: each rank reads its share of a balanced split of the stored rows
/// (see Runtime::joined_rows), or rows [first_row, first_row + count[0]) when first_row is given.
struct Joined {
  Dims count;  ///< this rank's extents: count[0] rows (0 allowed), the other extents equal on every rank
  /// Restart only: the first stored row this rank reads. Unset: this rank's share of the balanced
  /// split, which count[0] must then equal (restart() fails with mismatch otherwise).
  std::optional<std::uint64_t> first_row;
};

/// The rows of a joined array in a checkpoint, and this rank's share of their balanced split.
struct JoinedRows {
  std::uint64_t total = 0;  ///< rows of every rank together
  std::uint64_t begin = 0;  ///< this rank's balanced share is rows [begin, end)
  std::uint64_t end = 0;
  std::uint64_t count() const { return end - begin; }  ///< rows this rank restores with a balanced split
};

/// Rank `rank`'s share [begin, end) of `total` rows split over `size` ranks: begin = total * rank / size
/// (rounded down), so shares differ by at most one row and rank order follows row order.
CKPT_API JoinedRows balanced_rows(std::uint64_t total, int rank, int size) noexcept;

/// Where a region's elements lie inside a larger row-major allocation (ghost cells, halos, padding):
/// the box of the region's extents starts at `start` in an allocation of extents `alloc`, and the
/// region's pointer points to the allocation (ADIOS2's SetMemorySelection). Only the box is copied and
/// stored, row by row (on the GPU path as 2D copies): no packing by the application. restart() writes
/// only the box; the rest of the allocation is left as it is. Both empty: the elements are packed.
struct MemorySelection {
  Dims start;  ///< first index of the box in the allocation (one per dimension of the region)
  Dims alloc;  ///< extents of the allocation: start + the region's extents <= alloc in every dimension
};

/// One separately allocated piece of a scattered joined array (see Scattered).
struct Piece {
  void* ptr = nullptr;     ///< host or device memory; may be null only when rows is 0
  std::uint64_t rows = 1;  ///< rows of the array at ptr
};

/// This rank's rows of a joined array (see Joined) that lie in separate allocations - AMR blocks,
/// particle tiles: the rank's rows are its pieces' rows, in the order of `pieces`. checkpoint() copies
/// each piece's rows straight into staging (no packing by the application); restart() writes the
/// stored rows back into the pieces registered then, which say where the rows live now (blocks that
/// moved between ranks: with Runtime::set_restart_keys, one key per row in this order). Stored as any
/// joined array: readers, tools and restart on any rank count see one array.
struct Scattered {
  Dims row;                   ///< extents of one row (the array's extents after the first); {}: a row is one element
  std::vector<Piece> pieces;  ///< in this rank's row order; a piece of 0 rows is skipped
  /// Optional: each row is the box [memory.start, memory.start + row) of an allocation of extents
  /// memory.alloc (ghost cells; one entry per dimension of `row`); a piece of k rows holds k such
  /// allocations back to back. Only the boxes are stored and restored.
  MemorySelection memory{};
};

/// Where a region's data is now: what a Source's locate() returns.
struct Place {
  void* ptr = nullptr;  ///< host or device memory; may be null only when the extents hold no element
  Dims count;           ///< extents of a local array ({} for a scalar), or this rank's rows of a joined array
  MemorySelection memory{};  ///< optional: the extents are a box of a larger allocation at ptr
};

/// A region found anew at every checkpoint() and restart(): registration that cannot go stale when the
/// application's memory moves (Kokkos::resize, a std::vector that grows, realloc). See ckpt::track.
struct Source {
  /// Required. Where the data is now. Called on the application thread inside protect(), checkpoint()
  /// and restart(), never concurrently, and must not call the Runtime. An exception it throws is caught
  /// and becomes an invalid_argument error of that call naming the region.
  std::function<Place()> locate;
  /// Optional. Called by restart() before the region is filled, with the extents that it will fill:
  /// the stored extents of this rank's array (a local array), or this rank's share of the balanced
  /// split of the stored rows, {rows, row extents...} (a joined array). It makes room (resize,
  /// reallocate), and locate() is asked again. Without it, locate()'s extents must already be those.
  std::function<Status(const Shape& count)> resize;
};

/// What a Source's extents mean.
enum class SourceKind : std::uint8_t {
  local,   ///< a local array (a scalar when locate() returns no extents); restarts on the same rank count
  joined,  ///< this rank's rows of a joined array (see Joined); restarts on any rank count, balanced
};

/// Figures of one checkpoint on this rank (seconds are wall-clock, steady clock).
struct CheckpointStats {
  std::int64_t step = -1;
  std::uint64_t bytes = 0;          ///< payload bytes of this rank's regions
  std::uint64_t bytes_written = 0;  ///< bytes this rank wrote (stream incl. alignment and header)
  double blocked_s = 0;             ///< time the caller spent inside checkpoint(); final when it returns
  double capture_wait_s = 0;        ///< part of blocked_s spent waiting for a free staging chunk
  double flush_s = 0;               ///< from the first chunk handed to the flush threads to data durable
  double durable_s = 0;             ///< from entering checkpoint() to this rank's data durable
  /// From entering checkpoint() to the commit being visible. It may be less than blocked_s: the flush and
  /// commit start once the last chunk is handed over, and a small checkpoint's can finish before the
  /// application thread (preempted on a busy core) returns from checkpoint().
  double committed_s = 0;
  std::uint64_t staging_bytes = 0;  ///< size of the staging pool during this checkpoint
  /// With options().redundancy partner or xor: seconds of the copy to the partner node or of the
  /// parity exchange and write (part of committed_s), and the bytes this rank sent.
  double redundancy_s = 0;
  std::uint64_t redundancy_bytes = 0;
  /// Part of staging_bytes the GPU can DMA to (pinned). Less than staging_bytes: pinning failed for some
  /// chunks, and device data copied into them is copied synchronously (slower). 0 on the host device.
  std::uint64_t staging_pinned_bytes = 0;
  /// Whether the checkpoint was fsynced (data, index, directories: it survives a crash of the node)
  /// before its ticket completed. False with fsync off, and with durable_every_ms > 0 until the next
  /// periodic sync (it is visible and survives a crash of the processes).
  bool synced = false;
};

namespace detail {
struct TicketState;
class RuntimeImpl;
}  // namespace detail
class CheckpointReader;

/// Says "the newest checkpoint that restores" where a step could stand: rt.restart(ckpt::newest, stream).
struct Newest {
  explicit constexpr Newest() = default;
};
inline constexpr Newest newest{};

/// Handle on one checkpoint in flight. Cheap to copy; copies share the state.
/// wait()/done() may be called from any thread; with funneled MPI calls (Options::mpi_threads) wait()
/// commits on the calling thread, so it is the application thread's and collective: every rank waits
/// on the same checkpoint (or reaches another collective call that commits it).
///
/// An empty ticket (default-constructed, or moved from) stands for no checkpoint: it is done() - its
/// wait() returns at once - and its outcome, wait(), is failed_precondition ("no checkpoint"). done()
/// says whether wait() would block, never whether the checkpoint succeeded: ask wait() for that.
class CKPT_API Ticket {
 public:
  Ticket() = default;  ///< an empty ticket: done(), wait() returns failed_precondition
  /// Blocks until the checkpoint is committed (durable, index written, `latest` updated) or has
  /// failed; returns the outcome. Every rank gets the same outcome. An empty ticket:
  /// failed_precondition at once.
  Status wait() const;
  /// True once wait() would not block (always for an empty ticket). Not the outcome: see wait().
  /// Funneled (Options::mpi_threads): a checkpoint becomes done only at a collective call of the
  /// application thread (checkpoint(), wait(), poll(), wait_all(), restart(), latest(), close()).
  bool done() const;
  /// True for an empty ticket (no checkpoint behind it).
  bool empty() const { return m_state == nullptr; }
  /// The step given to checkpoint(), -1 for an empty ticket.
  std::int64_t step() const;
  /// Figures of this rank; complete once done().
  CheckpointStats stats() const;

  explicit Ticket(std::shared_ptr<detail::TicketState> s) : m_state(std::move(s)) {}

 private:
  std::shared_ptr<detail::TicketState> m_state;
};

/// The checkpoint runtime of one communicator. Not copyable, not movable.
/// Thread-safety: one application thread at a time; collective calls in the same order on all ranks.
class CKPT_API Runtime {
 public:
  /// Collective over `comm`. Never throws: a failure (bad options, ranks that disagree on a job-wide
  /// option, a directory that cannot be created or is another job's) is kept in status() and returned
  /// by later calls.
  Runtime(CommRef comm, const Options& options);
  /// Collective: calls close().
  ~Runtime();
  Runtime(const Runtime&) = delete;
  Runtime& operator=(const Runtime&) = delete;

  /// Ok, or why the Runtime cannot work.
  Status status() const;
  int rank() const;
  int size() const;
  /// The options in effect: as resolved at construction (environment overrides applied, `dir` and
  /// `local_dir` absolute, agreed across ranks); as given when the construction failed.
  const Options& options() const;
  /// The device that copies the regions: "host" (built without a GPU device, or no GPU found), "cuda"
  /// or "hip"; "none" when the Runtime failed before choosing one (see status()). A static string.
  const char* device_name() const;

  /// Registers `count` (a local array, this rank only) elements of `dtype` at `ptr`, shape `dims`.
  /// `ptr` may be host or device memory; the kind is detected. ckpt reads it in checkpoint() and
  /// writes it in restart(); the application keeps ownership and must keep it valid until
  /// unprotect() or the Runtime's end. Names: [A-Za-z0-9_./-], no "..", no leading '/', no empty
  /// path component, at most 255 bytes; unique.
  Status protect(const std::string& name, void* ptr, DType dtype, Dims dims);
  /// Registers this rank's box of a global array (see Block); restartable on other rank counts.
  Status protect(const std::string& name, void* ptr, DType dtype, const Block& block);
  /// Registers this rank's rows of a joined array (see Joined); restartable on any rank count.
  /// `ptr` may be null while count[0] is 0.
  Status protect(const std::string& name, void* ptr, DType dtype, const Joined& rows);
  /// Registers this rank's rows of a joined array that lie in separately allocated pieces (see
  /// Scattered); restartable on any rank count, into the pieces registered at restart.
  Status protect(const std::string& name, DType dtype, const Scattered& rows);
  /// Registers a single value (step, time, dt, RNG seed). Values equal on every rank restart on any
  /// rank count.
  template <class T>
  Status protect_scalar(const std::string& name, T* value) {
    return protect(name, static_cast<void*>(value), dtype_of<T>(), Dims{});
  }
  /// Changes the pointer and extents of a registered region (e.g. a walker count that changes every
  /// step). The dtype and the kind (local or Block) stay.
  Status update(const std::string& name, void* ptr, Dims dims);
  Status update(const std::string& name, void* ptr, const Block& block);
  Status update(const std::string& name, void* ptr, const Joined& rows);
  /// The pieces of a region protected with Scattered, anew (blocks refined, coarsened or moved): the
  /// pieces, their rows and the memory selection may all change; the row extents may not.
  Status update(const std::string& name, const Scattered& rows);
  /// Registers a region found through `source` at every checkpoint() and restart() (see Source): what
  /// ckpt reads and fills is always where the application's data is now, never a freed buffer.
  /// locate() is called once here to check the region. With resize, one restart() call suffices for
  /// arrays whose extents depend on the checkpoint (joined arrays on another rank count).
  Status protect(const std::string& name, DType dtype, Source source, SourceKind kind = SourceKind::local);
  /// protect() the first time `name` is seen, update() afterwards: one call for code that registers
  /// its buffers wherever it (re)allocates them. The dtype and the kind must stay the same.
  Status protect_or_update(const std::string& name, void* ptr, DType dtype, Dims dims);
  Status protect_or_update(const std::string& name, void* ptr, DType dtype, const Block& block);
  Status protect_or_update(const std::string& name, void* ptr, DType dtype, const Joined& rows);
  Status protect_or_update(const std::string& name, DType dtype, const Scattered& rows);
  /// Stores only a box of region `name`'s memory (see MemorySelection): `ptr` of protect()/update() is
  /// then the allocation's, the extents those of the box. Kept through update(), which fails when its
  /// new extents no longer fit the selection; an empty selection packs the region again. Not for
  /// scalars, nor for Source-registered or Scattered regions (their Place or Scattered carries it).
  Status set_memory_selection(const std::string& name, const MemorySelection& selection);
  /// Restart of joined array `name` fills this rank's rows with the stored rows `rows` (0-based indices
  /// into the stored array), in this order: rows.size() rows, one per registered row at restart (a
  /// Source's resize is asked for that many). Any order, any subset; a row may be asked for by several
  /// ranks, or twice. Only the blocks that hold them are read. Replaces Joined::first_row and the
  /// balanced split until clear_restart_rows(); kept through update(). The N->M restart of blocks that
  /// moved (AMR): each rank asks for the rows it owns now, no all-to-all in the application.
  Status set_restart_rows(const std::string& name, std::vector<std::uint64_t> rows);
  /// As set_restart_rows(), the rows named by their values in `key`, a joined integer array of one
  /// dimension with one value per row of `name` (a block or particle id; `name` itself may be the key):
  /// row i of this rank is the stored row whose key is keys[i]. Resolved by restart() (collective:
  /// each rank reads its share of the key column and the ranks route the requests, O(rows / ranks)
  /// each); a key asked for that no stored row holds fails the restart with not_found, one that two
  /// stored rows hold with invalid_argument (on every rank). Keys are 64-bit signed: a u64 column
  /// holding a value of 2^63 or more anywhere fails the restart (invalid_argument). Each run of
  /// consecutive stored rows asked for costs a few small allocations: for millions of scattered rows
  /// (particles) prefer the balanced split or Joined::first_row.
  Status set_restart_keys(const std::string& name, const std::string& key, std::vector<std::int64_t> keys);
  /// Back to Joined::first_row or the balanced split for joined array `name`.
  Status clear_restart_rows(const std::string& name);
  /// Marks region `name` optional (or not again): a restart from a checkpoint that does not have it
  /// leaves the region untouched and goes on, instead of failing with not_found. For variables added to
  /// a code after checkpoints were written. The regions skipped so are named by skipped_optional() and
  /// in the warning() of restart()'s Result.
  Status set_optional(const std::string& name, bool optional = true);
  /// The optional regions the last restart left untouched because its checkpoint lacked them.
  const std::vector<std::string>& skipped_optional() const;
  /// Forgets a region.
  Status unprotect(const std::string& name);
  /// Attaches a string attribute to a region; stored in the index of every later checkpoint.
  Status annotate(const std::string& name, const std::string& key, const std::string& value);

  /// Collective. Every rank must pass the same `step`: a rank with a bad argument, or ranks that
  /// disagree on the step, make every rank's ticket fail with the same invalid_argument (no rank is
  /// left waiting; agreed in the background, so reported by the ticket, and nothing is written). A
  /// step still in flight is waited for first, then written again. Funneled (Options::mpi_threads):
  /// the ranks agree here instead (one allreduce: it waits for the other ranks to call it) and
  /// commit the earlier checkpoints every rank has written.
  /// Captures every registered region for `step` (>= 0) and returns once the data is
  /// copied (host) or its copies are ordered on `stream` (device; a cudaStream_t, nullptr = default
  /// stream). The host may overwrite its buffers at once. Writing and committing continue in the
  /// background. Waits first if max_in_flight checkpoints are still uncommitted. A failure of an
  /// earlier checkpoint is reported by this ticket's wait() too.
  Ticket checkpoint(std::int64_t step, void* stream = nullptr);

  /// Collective. Blocks until every checkpoint in flight is done; returns the first failure. With
  /// options().local_dir it also waits for the drains to options().dir in flight and reports a drain
  /// that failed since the last call (tickets report the node-local commit).
  Status wait_all();

  /// Collective. With funneled MPI calls (Options::mpi_threads): commits, on this thread, the
  /// checkpoints whose data every rank has written (one MPI_Allreduce; waits for no I/O), so that an
  /// application that checkpoints rarely can see them done() sooner. Otherwise it does nothing (the
  /// commit thread commits). The Runtime's status.
  Status poll();
  /// Whether this Runtime's MPI calls are all made on the application thread (Options::mpi_threads,
  /// "auto" resolved with MPI_Query_thread).
  bool funneled() const;

  /// Collective. Newest checkpoint in options().dir whose index validates; an empty optional if
  /// there is none. With options().local_dir: the newer of the newest step every node holds locally
  /// and the newest drained one (docs/design.md, "Levels"). An error - options().dir is not a
  /// directory that can be listed (io_error, not_found, invalid_argument), the Runtime failed or is
  /// closed - is an error, never "no checkpoint": an application must not start afresh over a
  /// directory it cannot read.
  Result<std::optional<std::int64_t>> latest();
  /// Collective. The complete steps, oldest first: those of options().dir whose index validates
  /// (committed; what inspect() opens and restart() tries) and, with options().local_dir, the steps
  /// the node level can restore. Rank 0 lists, every rank gets the same list; a two-level index is
  /// validated by every rank together (rank 0 each step's root and catalog, each rank its writers'
  /// sub-indices, one agreement a step). Commits what poll() commits first. failed_precondition after
  /// close().
  Result<std::vector<std::int64_t>> steps();
  /// The level the last successful restart read from: "local" (the node directories of
  /// options().local_dir), "partner" or "xor" (lost nodes rebuilt from the redundancy data first, then
  /// read locally), "global" (options().dir), or "" before any.
  const std::string& restart_level() const;
  /// Index bytes this rank read or received in the last restart from `dir` or the node level: with
  /// options().index_format 2 in directories, the root and only the catalog pieces and sub-indices this
  /// rank's regions needed (its own, N->N; those whose boxes meet its regions, N->M); the whole index
  /// otherwise. 0 before any. (perf/scale reports it.)
  std::uint64_t restart_index_bytes() const;

  /// Collective. The rows of joined array `name` in checkpoint `step` and this rank's balanced share:
  /// what to allocate before restart(step). not_found without such a checkpoint or variable;
  /// mismatch when `name` is not a joined array there.
  Result<JoinedRows> joined_rows(std::int64_t step, const std::string& name);

  /// Collective. Fills every protected region from checkpoint `step`, verifying checksums. On a
  /// failure the regions' contents are unspecified and the Status names the variable and block.
  /// Copies into device memory are ordered after the work enqueued so far on the default stream; the
  /// data is in place when it returns. (One name, two forms: restart(step) returns a Status, since
  /// the caller knows the step; restart() and restart(ckpt::newest, stream) a Result with the step
  /// they chose.)
  Status restart(std::int64_t step);
  /// Collective. As restart(step), with the copies into device memory ordered after the work enqueued
  /// so far on `stream` (a cudaStream_t or hipStream_t; nullptr = default stream), and work enqueued
  /// on `stream` afterwards ordered after them. The stream must belong to the Runtime's device and
  /// not be under graph capture (failed_precondition). The data is in place when it returns.
  Status restart(std::int64_t step, void* stream);
  /// Collective. Newest checkpoint that loads and verifies, falling back to older ones; returns the
  /// step, or a Status listing why each candidate failed (not_found only when there is no
  /// candidate at all; otherwise the code of the newest candidate's failure, e.g. corrupt or
  /// mismatch; an error of its own when options().dir cannot be listed, as for latest()). When newer
  /// candidates were skipped, the Result's warning() says which and why.
  Result<std::int64_t> restart();
  /// Collective. As restart(), ordered on `stream` like restart(step, stream):
  /// `rt.restart(ckpt::newest, stream)`.
  Result<std::int64_t> restart(Newest, void* stream);
  /// The name restart(ckpt::newest, stream) had until 0.x; kept for one release.
  [[deprecated("use restart(ckpt::newest, stream)")]] Result<std::int64_t> restart_newest(void* stream) {
    return restart(newest, stream);
  }

  /// Collective. Describes checkpoint `step` of options().dir without restoring anything: its
  /// variables in registration order with dtype, kind, global shape, attributes, min/max, blocks and
  /// writer ranks (rank 0 reads the index once, every rank gets it; a two-level index, index_format 2:
  /// its root only, the blocks when a call of the reader needs them - CheckpointReader::blocks_loaded()).
  /// An application registers its regions with the stored extents and then calls restart(step) once.
  /// The CheckpointReader may also read data, serially on any rank (ckpt/reader.hpp). Waits for the
  /// checkpoints in flight first. not_found when `step` is not a complete checkpoint, corrupt when its
  /// index (a two-level one: its root, or what rank 0 read of it) is damaged.
  Result<CheckpointReader> inspect(std::int64_t step);

  /// Collective. Waits for checkpoints in flight, stops the background threads, frees staging memory.
  /// Idempotent; later calls other than status() fail with failed_precondition. When the ranks called
  /// checkpoint() different numbers of times, the extra checkpoints fail (nothing of them is committed)
  /// and close() returns failed_precondition naming the counts on every rank, instead of waiting forever.
  Status close();

 private:
  std::unique_ptr<detail::RuntimeImpl> m_impl;
};

/// Registers `v` as a local array region that follows the vector: its current data() and size() are
/// read at each checkpoint(), and restart() resizes it to the stored size before filling it. `v` must
/// outlive the registration (until unprotect() or the Runtime's end).
template <class T>
Status track(Runtime& rt, const std::string& name, std::vector<T>& v) {
  Source src;
  src.locate = [&v] { return Place{v.data(), Dims{v.size()}}; };
  src.resize = [&v](const Shape& count) {
    v.resize(static_cast<std::size_t>(count.at(0)));
    return Status::OK();
  };
  return rt.protect(name, dtype_of<T>(), std::move(src), SourceKind::local);
}

/// Registers `v` as this rank's rows of a joined array of rows of `width` elements (v.size() must be a
/// multiple of width), followed like track(): restart() resizes it to this rank's balanced share of
/// the stored rows.
template <class T>
Status track_rows(Runtime& rt, const std::string& name, std::vector<T>& v, std::uint64_t width = 1) {
  if (width == 0) return Status(Code::invalid_argument, "track_rows: region '" + name + "': width 0");
  Source src;
  src.locate = [&v, width] {
    const std::uint64_t rows = v.size() / width;
    if (rows * width != v.size()) throw std::length_error("the vector's size is not a multiple of its row width");
    return width == 1 ? Place{v.data(), Dims{rows}} : Place{v.data(), Dims{rows, width}};
  };
  src.resize = [&v, width](const Shape& count) {
    v.resize(static_cast<std::size_t>(count.at(0) * width));
    return Status::OK();
  };
  return rt.protect(name, dtype_of<T>(), std::move(src), SourceKind::joined);
}

/// Version of ckpt, e.g. "0.1.0".
CKPT_API const char* version() noexcept;

}  // namespace ckpt

// Runtime::inspect() returns a CheckpointReader; reader.hpp needs the declarations above, so it comes last.
#include "ckpt/reader.hpp"

#endif  // CKPT_RUNTIME_CKPT_HPP
