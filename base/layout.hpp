// Regions and the per-checkpoint stream plan (internal).
#ifndef CKPT_BASE_LAYOUT_HPP
#define CKPT_BASE_LAYOUT_HPP

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "ckpt/status.hpp"
#include "ckpt/types.hpp"

namespace ckpt {
struct Source;  // ckpt.hpp: a region the Runtime locates anew at each checkpoint (held here, never called)
}  // namespace ckpt

namespace ckpt::detail {

/// How a region maps to stored data. Values are part of format v1.
enum class RegionKind : std::uint8_t {
  local = 0,   ///< this rank's own array; restarts on the same rank
  global = 1,  ///< a Block of a global array; restarts on any rank count
  scalar = 2,  ///< a single value; restarts anywhere if it was equal on every rank
  joined = 3,  ///< rows of a joined array (every rank's rows, concatenated in rank order); any rank count
};
const char* region_kind_name(RegionKind k) noexcept;
/// True for the kinds stored as boxes of one global shape (global and joined): restartable on any rank
/// count, compared and converted as one array.
inline bool has_global_shape(RegionKind k) { return k == RegionKind::global || k == RegionKind::joined; }

/// Whether `t` is an integer dtype (i8..i64, u8..u64): what a key column (a block or particle id) holds.
bool is_integer_dtype(DType t) noexcept;
/// The integer of integer dtype `t` at `p` (unaligned), widened to i64 in `out`; false for an unsigned
/// value above 2^63 - 1 (beyond the keys ckpt orders and looks up).
bool widen_integer(const std::uint8_t* p, DType t, std::int64_t& out) noexcept;

/// Region::first_row of a joined region that restarts from its share of the balanced split.
constexpr std::uint64_t kBalancedRows = ~std::uint64_t{0};

using Attributes = std::vector<std::pair<std::string, std::string>>;

/// Which stored rows a joined region's rows are filled with at restart (Runtime::set_restart_rows,
/// set_restart_keys): row i of this rank gets stored row values[i] (key empty), or the stored row whose
/// value in the joined integer column `key` is values[i] (a key's bit pattern, sign-extended).
struct RestartRows {
  std::string key;
  std::vector<std::uint64_t> values;
};

/// One separately allocated piece of a scattered joined region (Runtime::protect with Pieces): `rows`
/// of the region's rows at `ptr`.
struct PieceRef {
  void* ptr = nullptr;
  std::uint64_t rows = 0;
};

/// A registered region (owned by the registry; the memory belongs to the application).
struct Region {
  std::string name;
  void* ptr = nullptr;
  DType dtype = DType::u8;
  RegionKind kind = RegionKind::local;
  MemoryKind mem = MemoryKind::host;
  Shape global;  ///< global kind only
  Shape start;   ///< global kind only
  Shape count;   ///< the local extents (all kinds; {} for a scalar)
  /// Memory selection (Runtime::set_memory_selection): the elements are the box [mem_start, mem_start +
  /// count) of a row-major allocation of extents mem_alloc at `ptr` (ghost cells stay out of the
  /// checkpoint). Both empty: the elements are packed at `ptr`.
  Shape mem_start, mem_alloc;
  /// Joined kind, restart only: the first stored row read into this rank's rows, or kBalancedRows.
  std::uint64_t first_row = kBalancedRows;
  /// Joined kind, restart only: the stored rows by index or key, in this rank's order (null: first_row).
  std::shared_ptr<const RestartRows> restart_rows;
  /// Joined kind: the region's rows are these pieces' rows, in this order (a scattered region; `ptr` is
  /// null). A memory selection then describes one row: dimension 0 of mem_start is 0 and of mem_alloc
  /// the region's row count, the other dimensions the box of a row in its allocation. Null: at `ptr`.
  std::shared_ptr<const std::vector<PieceRef>> pieces;
  bool optional = false;                 ///< a restart from a checkpoint without it leaves it untouched
  std::shared_ptr<const Source> source;  ///< located anew at each checkpoint and restart (Runtime::protect)
  Attributes attrs;
  std::uint32_t group = 0;  ///< transport group (0 = the default transport)
  std::uint64_t elements() const;
  std::uint64_t bytes() const { return elements() * dtype_size(dtype); }
  bool packed() const { return mem_alloc.empty(); }
};

/// A run of a region's rows that lies in one allocation: the region's elements are its parts' elements,
/// packed, one part after the other. A scattered region has one part per piece (pieces of no row have
/// none); any other region is one part, itself.
struct MemoryPart {
  void* ptr = nullptr;
  Shape count;                  ///< the part's extents (its rows first, for a joined region)
  Shape mem_start, mem_alloc;   ///< its memory selection, as Region's (both empty: packed at ptr)
  std::uint64_t first_row = 0;  ///< rows of the region before it (joined kind; 0 otherwise)
  std::uint64_t offset = 0;     ///< bytes of the region's packed elements before it
  std::uint64_t bytes = 0;      ///< its packed elements' bytes
  bool packed() const { return mem_alloc.empty(); }
};
/// The parts of `r`, in order (see MemoryPart).
std::vector<MemoryPart> memory_parts(const Region& r);

/// One region's bytes in this rank's stream for one checkpoint. Where they are is the region's
/// (StreamPlan::vars[var]): at its `ptr`, or in `parts` for a scattered one.
struct BlockPlan {
  std::uint32_t var = 0;     ///< index into StreamPlan::vars
  std::uint64_t offset = 0;  ///< stream offset
  std::uint64_t length = 0;  ///< payload bytes
  MemoryKind mem = MemoryKind::host;
  /// A scattered region's memory_parts (its pieces, as registered at this checkpoint); empty for any
  /// other region, which is one part, itself: a plain region costs no allocation here (checkpoint()
  /// plans every region on the application's blocked path).
  std::vector<MemoryPart> parts;
};

/// The part of the stream that goes through one transport group: [begin, end), begin a multiple of
/// the chunk size, so that every chunk belongs to exactly one segment.
struct Segment {
  std::uint32_t group = 0;
  std::uint64_t begin = 0, end = 0;
};

/// This rank's stream for one checkpoint: the regions end to end, aligned, grouped by transport group.
struct StreamPlan {
  std::vector<Region> vars;       ///< snapshot of the registry at checkpoint(), ordered by group
  std::vector<BlockPlan> blocks;  ///< one per var, in stream order
  std::vector<Segment> segments;  ///< one per group present, in stream order
  std::uint64_t bytes = 0;        ///< stream length incl. padding
  std::uint64_t payload = 0;      ///< sum of block lengths
  /// Index of the segment holding stream offset `off`.
  std::size_t segment_of(std::uint64_t off) const;
  /// Index of the segment of variable `var`.
  std::size_t segment_of_var(std::uint32_t var) const;
};

/// Lays out `regions` end to end, group by group (registration order within a group): blocks of
/// >= 64 KiB aligned to `alignment`, smaller ones to 8 bytes; each group's segment starts at a
/// multiple of `chunk_bytes`. Every group in [0, ngroups) gets a segment, possibly empty. `piece_bytes` (a
/// power of two dividing `chunk_bytes`; incremental checkpoints): blocks of at least that many bytes are aligned
/// to it too, so that each of their pieces lies in one chunk; 0: none.
StreamPlan plan_stream(const std::vector<Region>& regions, std::uint64_t alignment, std::uint64_t chunk_bytes = 4096,
                       std::uint32_t ngroups = 1, std::uint64_t piece_bytes = 0);

/// Checks a region name: [A-Za-z0-9_./-], no "..", no leading '/', no empty component, <= 255 bytes.
Status check_name(const std::string& name);

}  // namespace ckpt::detail

#endif  // CKPT_BASE_LAYOUT_HPP
