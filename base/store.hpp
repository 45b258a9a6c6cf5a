// The checkpoint store (internal): how checkpoints are named, found, loaded, read back, committed and
// retired under a checkpoint root. The runtime (latest, restart, commit, retention) and the tools use
// it; nothing else parses a checkpoint directory name or loads an index. No MPI: the runtime calls it
// on rank 0 (or on every rank for paths only) and shares the results itself.
#ifndef CKPT_BASE_STORE_HPP
#define CKPT_BASE_STORE_HPP

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/format.hpp"
#include "base/posix_io.hpp"
#include "ckpt/status.hpp"

namespace ckpt::detail {

/// Largest index file anybody reads (an index of ~10^7 blocks).
constexpr std::uint64_t kMaxIndexBytes = 1ull << 32;

// ---- names ---------------------------------------------------------------------------------------

/// What a `ckpt.<step>[.<suffix>]` entry of a root is.
enum class EntryKind {
  committed,  ///< ckpt.<step>: a checkpoint (complete when its index validates)
  tmp,        ///< ckpt.<step>.tmp: being written, or left by a run that died before its commit
  old,        ///< ckpt.<step>.old: the previous ckpt.<step> while a commit of the same step replaces it
  doomed,     ///< ckpt.<step>.del: being removed by retention
  abandoned,  ///< ckpt.<step>.abandoned: a step of a timeline that a later commit of an older step rolled back
};
/// "", "tmp", "old", "del", "abandoned".
const char* entry_suffix(EntryKind k) noexcept;

/// A parsed entry name.
struct StepName {
  std::int64_t step = 0;
  EntryKind kind = EntryKind::committed;
};

/// Parses "ckpt.<step>" with an optional ".tmp", ".old", ".del" or ".abandoned". <step> is the canonical decimal
/// form of a step in [0, 2^63 - 1]: 1 to 19 digits, no sign, no leading zero (so "ckpt.020" and
/// "ckpt.-1" are not checkpoints, and every step has exactly one name). Never throws.
std::optional<StepName> parse_step_name(const std::string& name);
/// The entry name of `step` of kind `kind`: "ckpt.<step>[.<suffix>]".
std::string step_name(std::int64_t step, EntryKind kind = EntryKind::committed);

/// A root's own entries besides its checkpoints: the link to the newest checkpoint, the name that link
/// is made under before the rename that publishes it, and the lock file a running job holds
/// (runtime/src/commit/dir_lock.cpp).
constexpr const char* kLatestName = "latest";
constexpr const char* kLatestTmpName = "latest.tmp";
constexpr const char* kLockName = ".lock";
/// The root's identity (`<dir>/.root`) and a node directory's binding to it (`<node dir>/.owner`):
/// docs/format.md, "Node-local level" (runtime/src/commit/dir_lock.cpp).
constexpr const char* kRootIdName = ".root";
constexpr const char* kOwnerName = ".owner";
/// The root's timeline record (`<dir>/.timeline`) and the run that last labelled a node directory
/// (`<node dir>/.run`): docs/format.md, "Node-local level".
constexpr const char* kTimelineName = ".timeline";
constexpr const char* kNodeRunName = ".run";

/// Whether `name` (one path component) belongs to the store in a checkpoint root: kLatestName,
/// kLatestTmpName, kLockName, kRootIdName, kOwnerName, kTimelineName, kNodeRunName, `index` (a
/// directory holding one is taken for a checkpoint), ckpt.<step> with any suffix parse_step_name()
/// takes, and series.<k>[.del] (parse_segment_name()). The store creates, replaces, renames or removes
/// entries of these names, and reads those it finds: nothing else may be written under one of them in
/// a root (`ckpt convert` refuses such an output).
bool is_store_name(const std::string& name);

// ---- one checkpoint directory --------------------------------------------------------------------

/// Reads `dir`/index: a regular file (no link, no FIFO) of at most kMaxIndexBytes.
/// not_found "incomplete checkpoint <dir>: no index ..." when the directory has none. A version-2 root
/// (docs/format.md, "Version 2 index") is assembled with `dir`/catalog and every `dir`/index.<w> into the
/// one-level index, returned encoded as version 1 - or, when it has references or pieces, in the transfer
/// encoding (encode_index()), which only decode_index() reads and no file may hold (corrupt "corrupt
/// checkpoint <dir>: ..." when they do not make one): every reader of a checkpoint reads both versions through
/// here. An `index` of any version but 1 and 2 is corrupt "... index version N unsupported".
Result<std::vector<std::uint8_t>> read_index_file(const std::string& dir);
/// Reads `dir`/index as it is, a version-2 root not assembled (restart reads the rest lazily: PartialIndex);
/// read_index_file()'s checks and errors.
Result<std::vector<std::uint8_t>> read_root_file(const std::string& dir);
/// Writes the version-2 objects of `idx` but its root into the staging directory `tmp`: `catalog` and
/// one `index.<w>` per rank (writer rule 0: writer w is rank w), fdatasynced with `sync`; returns the
/// root's bytes, which the commit writes as `index` (the commit point, as in version 1). `token`: the
/// commit attempt's, non-zero.
Result<std::vector<std::uint8_t>> stage_index_v2(const std::string& tmp, const Index& idx, std::uint64_t token,
                                                 bool sync);
/// What can be checked of checkpoint directory `dir` without every rank's records, given the bytes of its
/// `index` (read_root_file()): the index validates and describes `step` (when given); with a version-2 root,
/// the root and its catalog, which holds every sub-index's checksum - not the sub-indices (`ckpt ls` of a
/// checkpoint; latest() has the ranks check those). Errors as read_index_file()'s.
Status check_committed(const std::string& dir, const std::vector<std::uint8_t>& root_bytes,
                       std::optional<std::int64_t> step);
/// Decodes and validates the index bytes of checkpoint `dir` (magic, version, footer, checksum, every
/// field); when `step` is given, the index must describe that step. Errors: corrupt "corrupt
/// checkpoint <dir>: ...".
Result<Index> decode_checkpoint_index(const std::vector<std::uint8_t>& bytes, const std::string& dir,
                                      std::optional<std::int64_t> step);
/// read_index_file() then decode_checkpoint_index(); not_found when `dir` does not exist.
Result<Index> load_checkpoint_index(const std::string& dir, std::optional<std::int64_t> step);

/// Whether `path` names one checkpoint directory rather than a root: it holds an `index`, is named
/// ckpt.<step>[.suffix], or is `latest` (a link to ckpt.<step>).
bool is_checkpoint_dir(const std::string& path);
/// Ok when `path` exists and is a directory (following links); not_found / invalid_argument otherwise.
Status check_directory(const std::string& path);
/// check_directory(), and the directory can be listed (opendir): what `latest()`, `steps()` and
/// `restart()` check before an empty listing may read as "no checkpoint".
Status check_listable(const std::string& path);
/// Loads the checkpoint directory `dir` given by its path: a directory whose index validates, for the
/// step of its name when it is named ckpt.<step>; a .tmp entry is failed_precondition (never committed).
Result<Index> load_checkpoint_dir(const std::string& dir);

/// Minimum and maximum of a variable over the statistics of its blocks (from the index; no data read),
/// compared in the stored class (i64, u64 or f64) so that 64-bit integers keep every bit.
struct VarStats {
  bool valid = false;  ///< false when no block carries statistics (dtype bytes, stats off, all NaN)
  std::uint64_t min_bits = 0, max_bits = 0;
};
/// Over `blocks` (indices into idx.blocks, as IndexLookup::blocks(var) gives them: a scan of the whole
/// index per variable would be quadratic in the rank count).
VarStats var_stats(const Index& idx, std::uint32_t var, const std::vector<std::uint32_t>& blocks);

/// Reads the blocks of one checkpoint directory and verifies each against the checksum in its index.
/// Not thread-safe (one open file per directory at a time). `idx` must outlive the reader.
///
/// A pieced block (incremental: docs/format.md, "Version 2 index: incremental references") is read piece by
/// piece, from the block's own file or from the file of an earlier checkpoint it refers to: REF k of kind 0 is
/// `<parent of dir>/ckpt.<step>/<name>` (kind 1: `<parent of dir>/series.<step>/<name>`), opened as the own
/// files are (no link, a regular file). Before such a file is read, the checkpoint it belongs to is checked,
/// once per directory: its `index` must be a version-2 root of that step with the REF's checkpoint id (a step
/// that was removed, replaced or abandoned no longer is), else `corrupt` "... refers to step S, which ...".
class BlockReader {
 public:
  BlockReader(std::string dir, const Index& idx);

  /// Callback of stream(): `n` bytes at byte `offset` of the block's payload. A non-ok Status stops.
  using PieceFn = std::function<Status(const std::uint8_t* p, std::size_t n, std::uint64_t offset)>;

  /// Streams the payload of `b` in order through `buf` (`buf_bytes` at a time) into `fn`, then compares
  /// the XXH3 of the payload with the index: a mismatch is `corrupt` "checksum mismatch in <where>".
  /// Read errors name the block too. Pieces hold whole elements when `buf_bytes` is a multiple of 16.
  /// A pieced block is read in its pieces' order, each in parts of at most `buf_bytes` (`fn` still gets
  /// payload offsets, in order), and each piece's XXH3-128 is checked after its last part: a mismatch is
  /// `corrupt` "checksum mismatch in <where>, piece i of n (<its file> ...)"; then the payload's XXH3-64.
  Status stream(const BlockRecord& b, std::uint8_t* buf, std::size_t buf_bytes, const PieceFn& fn);
  /// Where the next piece is read into (`buf_bytes` bytes); may block until a buffer is free again.
  using BufferFn = std::function<Result<std::uint8_t*>()>;
  /// As above, reading each piece into the buffer `next` hands out (the restart alternates two bounce
  /// buffers so that reading a piece overlaps the device copies of the previous one).
  Status stream(const BlockRecord& b, std::size_t buf_bytes, const BufferFn& next, const PieceFn& fn);
  /// Checks, reading no data, that `b` lies inside its file as the file is (its size is looked up once
  /// per file): an index - damaged, or crafted with valid checksums - may claim more bytes than were
  /// written, and a reader must learn that before it allocates what the claim says. `corrupt` "<where>:
  /// its file holds N bytes ...", or the error opening the file. stream() starts with it. A pieced block:
  /// as many pieces as its length needs, each inside its file (a referenced one after its checkpoint is
  /// checked, as the class comment says; a referenced file that is missing is `corrupt`).
  Status claim(const BlockRecord& b);
  /// stream() of `b` (pieces also handed to `fn` when given), then, when the block carries
  /// statistics, its min/max recomputed against the index: a difference is `corrupt` "... data
  /// matches its checksum but not the min/max in the index". What `ckpt verify` and Reader::verify check.
  Status verify(const BlockRecord& b, std::uint8_t* buf, std::size_t buf_bytes, const PieceFn& fn = nullptr);
  /// "variable 'x', block of rank 3 (<dir>/<file> at offset N, L bytes)": how messages name a block
  /// ("(<dir>/<file>, L bytes in n pieces of P bytes)" when it is pieced).
  std::string where(const BlockRecord& b) const;
  /// The checkpoint directory.
  const std::string& dir() const { return m_dir; }

 private:
  /// A referenced file (Index::refs[k]), once claim() has checked its checkpoint and looked up its size.
  struct RefState {
    FileReader* files = nullptr;  ///< its directory's reader (m_ref_dirs); nullptr until checked
    std::uint64_t size = 0;
  };
  /// What the `index` of a referenced checkpoint directory gave: its id, or why it is not usable.
  struct RefRoot {
    std::string error;  ///< "which is gone (...)", ...; empty when the root is a version-2 root of its step
    std::uint64_t ckpt_id = 0;
  };
  /// The size of `b`'s own file (looked up once).
  Result<std::uint64_t> own_size(const BlockRecord& b);
  /// Piece i of `b` names a REF: checks its checkpoint and opens its file (once per REF).
  Result<const RefState*> open_ref(const BlockRecord& b, std::size_t i);
  /// `<parent>/ckpt.<step>` (kind 0) or `<parent>/series.<step>` (kind 1).
  std::string ref_dir(const RefFile& f) const;
  /// The root a checkpoint directory is in: the parent of its real path (realpath), so that a checkpoint
  /// named `.`, `ckpt.7/.` or through a link finds the checkpoints it refers to.
  static std::string root_of_checkpoint(const std::string& dir);
  /// "variable 'x', block of rank 3, piece i of n (<its file> at offset N, L bytes)".
  std::string piece_where(const BlockRecord& b, std::size_t i) const;

  std::string m_dir;
  std::string m_parent;  ///< the directory `m_dir` is in: where the checkpoints it refers to are
  const Index& m_idx;
  FileReader m_files;
  std::vector<std::uint64_t> m_sizes;  ///< per file of the index; UINT64_MAX until looked up
  std::vector<RefState> m_refs;        ///< per REF of the index (grows with it, as m_sizes)
  std::map<std::string, std::unique_ptr<FileReader>> m_ref_dirs;  ///< by referenced directory
  std::map<std::string, RefRoot> m_ref_roots;                     ///< by referenced checkpoint directory
};

// ---- a checkpoint root ---------------------------------------------------------------------------

/// How a root stores its checkpoints (Options::layout).
enum class Layout {
  directory,  ///< one directory per checkpoint, committed by renames
  series,     ///< every checkpoint appended to segment files opened once, committed by an appended record
};

/// One entry of a root, with the outcome of loading its index.
struct StepEntry {
  std::string name;  ///< entry name, e.g. "ckpt.20" or "ckpt.30.tmp"
  std::string path;  ///< root + "/" + name
  std::int64_t step = 0;
  EntryKind kind = EntryKind::committed;
  bool complete = false;  ///< committed name and an index that validates for this step
  std::string reason;     ///< why not complete (empty when complete)
  /// Not complete because what was committed does not validate (an index or a step-log record that
  /// fails its checks), rather than because a commit did not finish: `ckpt ls` says "damaged".
  bool damaged = false;
  std::optional<Index> index;  ///< set when complete (but by a listing of ListDepth::roots)
  /// A listing of ListDepth::roots, a version-2 step: its root index as read, complete as far as the root
  /// and its catalog say, its sub-indices not read - the caller checks them (check_subindices_collective()).
  /// Empty otherwise.
  std::vector<std::uint8_t> unchecked_root;
  bool subindices_unchecked() const { return !unchecked_root.empty(); }
};

/// How deep Store::list() checks a committed step: its whole index (every sub-index of a version-2
/// one), or a version-2 one's root and catalog only (check_committed()).
enum class ListDepth { whole, roots };

/// Where the checkpoints of a run live and how they get there. Serial: one process (rank 0, or a tool)
/// calls the operations that change the root; path queries may be used anywhere. An interface because
/// a second layout (a series of steps in shared files) implements the same operations.
class Store {
 public:
  virtual ~Store() = default;
  /// The root as given.
  virtual const std::string& root() const = 0;
  /// Which layout this store reads and writes.
  virtual Layout layout() const = 0;
  /// Directory of committed step `step`: a path only for directories; a series reads its logs (on
  /// other ranks than the one that commits, ask that one: restart does).
  virtual std::string checkpoint_dir(std::int64_t step) const = 0;
  /// Directory a checkpoint of `step` is written into before its commit.
  virtual std::string staging_dir(std::int64_t step) const = 0;

  /// Steps with a committed name, newest first (no index is read).
  virtual std::vector<std::int64_t> committed_steps() const = 0;
  /// Every entry of the root, newest step first (for equal steps: committed, old, tmp, del, abandoned), each with
  /// its completeness; not_found/invalid_argument when the root is not a directory. `depth` roots: see
  /// ListDepth (the series layout reads its step logs whole either way).
  virtual Result<std::vector<StepEntry>> list(ListDepth depth = ListDepth::whole) const = 0;
  /// The raw index of committed step `step` (read_index_file()).
  virtual Result<std::vector<std::uint8_t>> read_index(std::int64_t step) const = 0;
  /// The validated index of committed step `step`.
  virtual Result<Index> load_index(std::int64_t step) const = 0;
  /// The newest step whose index validates. `skipped` (optional) gets one line per newer step passed over.
  virtual std::optional<std::int64_t> newest_complete(std::vector<std::string>* skipped = nullptr) const = 0;
  /// The step the `latest` link names, if it exists and names a committed entry.
  virtual std::optional<std::int64_t> latest_link() const = 0;

  /// Start-up recovery, before the first commit of a run: removes .tmp and .del entries; an .old entry
  /// whose committed twin is complete is removed, one whose twin is missing is renamed back (a commit
  /// died between its two renames: the step is not lost); an .old beside an incomplete twin is kept.
  /// .abandoned entries are kept (retain() removes them).
  virtual Status recover() = 0;
  /// Publishes staging_dir(step) as step `step` with `index` (encoded): writes the index, fsyncs it and
  /// the directory (when `sync`), moves a committed ckpt.<step> aside to .old, renames, fsyncs the root,
  /// removes the .old and points `latest` at the step. A crash at any point leaves either the previous
  /// checkpoint of `step` (recovered by recover()) or the new one.
  /// Steps only grow along one timeline: committed entries of steps newer than `step` belong to a
  /// timeline that was rolled back (a restart from an older step, or an earlier run in the same root)
  /// and are renamed to ckpt.<s>.abandoned first, so that latest(), restart() and retention never mix
  /// two timelines (a crash after that leaves the older checkpoints of the new timeline).
  /// `staged` is where the checkpoint's files were written: staging_dir(step) for directories, the
  /// segment a series appended to (the runtime's SeriesCursor chose it).
  virtual Status commit(std::int64_t step, const std::string& staged, const std::vector<std::uint8_t>& index,
                        bool sync) = 0;
  /// commit() of a step rebuilt at restart (partner or xor redundancy of the node level): the same
  /// crash-safe renames, but no roll-back of newer steps and no `latest`: a rebuilt step restores one
  /// of the timeline the other nodes hold and begins none (the restart may still fail, or end without
  /// a commit; the first commit after it rolls the newer steps back, on every node). The directory
  /// layout only; the series layout refuses it (failed_precondition).
  virtual Status commit_rebuilt(std::int64_t step, const std::vector<std::uint8_t>& index, bool sync) {
    (void)step, (void)index, (void)sync;
    return Status(Code::failed_precondition, "the series layout rebuilds no step");
  }
  /// Drops what a checkpoint that was not committed left in `staged` (its staging directory is removed;
  /// a series keeps its segment: the bytes stay unreferenced).
  virtual void discard(const std::string& staged) = 0;
  /// commit()'s first move, also called alone by the node level for the drained level (a roll-back
  /// committed locally must not leave the drained level's newer steps in front of it): committed
  /// entries of steps newer than `step` become ckpt.<s>.abandoned, newest first, with one line on
  /// stderr. An entry another thread moved meanwhile is skipped.
  virtual Status abandon_newer_than(std::int64_t step, bool sync) = 0;
  /// Makes what this process committed or wrote under the store so far durable (a commit with
  /// sync = false is only visible). Any rank; for its own files.
  virtual Status sync() = 0;
  /// Retention: keeps `just_committed` and the newest complete checkpoints up to `keep` in all;
  /// committed entries older than the last one kept are renamed to .del, then removed, so a crash never
  /// leaves a half-removed directory under a committed name. Incomplete entries newer than that are
  /// left alone and not counted. Leftover .del entries are removed, and so are .abandoned entries of
  /// steps up to `just_committed` (the new timeline has reached them). `durable` (>= 0) is kept too,
  /// whatever its age: the newest checkpoint known to be on disk while the newer ones may still be in
  /// the page cache only (durable_every_ms), so that a power cut never leaves nothing. Returns the
  /// first failure.
  virtual Status retain(int keep, std::int64_t just_committed, std::int64_t durable = -1) = 0;
};

/// The directory layout: checkpoint `s` is the directory `root`/ckpt.<s> (docs/format.md).
std::unique_ptr<Store> make_directory_store(const std::string& root);

// ---- the series layout (docs/format.md, "Series layout") -----------------------------------------

/// "directory", "series".
const char* layout_name(Layout l) noexcept;
/// Parses "series.<k>" (k canonical decimal, as steps) with an optional ".del"; `doomed` says which.
std::optional<std::int64_t> parse_segment_name(const std::string& name, bool* doomed = nullptr);
/// "series.<k>".
std::string segment_name(std::int64_t k);
/// The segment directory `root`/series.<k>.
std::string segment_dir(const std::string& root, std::int64_t k);
/// What a root holds: whether any entry is a series segment, any a checkpoint directory
/// (ckpt.<step>[.suffix]), and the first segment number a new run may use (one above any there).
struct RootContents {
  bool series = false, directories = false;
  bool store_entries = false;  ///< any entry of whatever type whose name is_store_name() (a job's .lock, ...)
  std::int64_t next_segment = 0;
};
RootContents scan_root(const std::string& root);
/// failed_precondition naming both kinds of entry when `root` holds checkpoint directories and series
/// segments (docs/format.md, "One layout per root"); OK otherwise. Every Store's list() checks it.
Status check_one_layout(const std::string& root);

/// The series layout: checkpoint `s` is a record of `root`/series.<k>/steps pointing into the data
/// files of that segment. checkpoint_dir(s) is the segment directory (the index's file names are
/// relative to it); commit() appends the record (no directory operation); retention removes whole
/// segments. Thread-safe (the runtime's restart and commit threads share one).
std::unique_ptr<Store> make_series_store(const std::string& root);
/// One complete or damaged record of a segment's step log, whether its step is in force or not (a
/// record that a later commit rolled back or replaced still describes where its stream lies in the
/// data files; a damaged one's `error` says what failed, and where its stream lies is unknown).
struct SegmentRecord {
  std::int64_t step = 0;
  std::optional<Index> index;  ///< empty when the record's index does not decode (`error` says why)
  std::string error;
};
/// One segment of a series root as its step log says.
struct SegmentLog {
  std::int64_t number = 0;
  std::string dir;
  /// Every complete or damaged record of known step, in commit order (= data-file order).
  std::vector<SegmentRecord> records;
  bool torn = false;  ///< bytes after the last complete record are not a record
  /// Damage in the log that costs no step (a damaged trailer, padding that is not zero, bytes
  /// between records): one line each. (Damaged records are listed by the store.)
  std::vector<std::string> notes;
};
/// Every segment series.<k> of `root` (not .del), by number, with all its complete records (the step
/// log's own checks; `ckpt verify` checks the data files' bytes between their streams).
std::vector<SegmentLog> read_segments(const std::string& root);
/// The store of an existing root in the layout it holds (series when it has a segment).
std::unique_ptr<Store> open_store(const std::string& root);

/// One checkpoint named by a path: a checkpoint directory (`data_dir` = `path`), or `<root>/ckpt.<step>`
/// or `<root>/latest` of a series root, which are names only (`data_dir` = the step's segment).
struct CheckpointRef {
  std::string path;      ///< as given
  std::string data_dir;  ///< where the index's files are
  Index index;
};
/// Whether `path` names one checkpoint rather than a root: is_checkpoint_dir(), or one of the names
/// above in a series root.
bool names_checkpoint(const std::string& path);
/// Loads the checkpoint `path` names (load_checkpoint_dir() for a directory).
Result<CheckpointRef> load_checkpoint(const std::string& path);

/// Makes `path` (and what was written under it) durable on this node: syncfs of its file system.
Status sync_filesystem(const std::string& path);

}  // namespace ckpt::detail

#endif  // CKPT_BASE_STORE_HPP
