// The public Reader over the checkpoint store: listing and index loading (base/store), boxes
// (base/box), verified block streaming (the store's BlockReader) and, for device memory, the device
// layer's copies. Serial, except a Reader opened on a communicator: its listing and each step's index
// are read by rank 0 and broadcast (base/mpi); the data is read by each rank on its own.
#include "ckpt/reader.hpp"

#include <algorithm>
#include <cstring>
#include <optional>

#include "base/box.hpp"
#include "base/bytes.hpp"
#include "base/format.hpp"
#include "base/hash.hpp"
#include "base/mpi.hpp"
#include "base/partial_index.hpp"
#include "base/store.hpp"
#include "gpu/device.hpp"

namespace ckpt {

const char* var_kind_name(VarKind k) noexcept { return detail::region_kind_name(static_cast<detail::RegionKind>(k)); }

namespace detail {

/// Pieces of a block read at once (whole elements: a multiple of 16).
constexpr std::size_t kPieceBytes = 4u << 20;

namespace {

std::uint64_t elements(const Shape& s) {
  std::uint64_t n = 1;
  for (auto e : s) n *= e;
  return n;
}

/// elements(s) * esize, or nullopt on overflow.
std::optional<std::uint64_t> box_bytes(const Shape& s, std::size_t esize) {
  std::uint64_t n = esize;
  for (auto e : s) {
    if (e != 0 && n > UINT64_MAX / e) return std::nullopt;
    n *= e;
  }
  return n;
}

}  // namespace

struct CheckpointReaderState {
  std::string name;  // the checkpoint's path: its directory, or a series step's name (<root>/ckpt.<step>)
  std::string dir;   // where its files are: the directory, or the step's segment
  /// The index: whole, or a version-2 root with the sub-indices loaded so far (opened lazily: what a read
  /// needs is loaded by it). The state lives on the heap and never moves; `index` and `lookup` are the
  /// PartialIndex's own objects, which stay the same as sub-indices are appended and when load_blocks()
  /// replaces a lazy index by the whole one (BlockReader keeps a reference too; it is made anew then).
  PartialIndex part;
  const Index& index;
  const IndexLookup& lookup;
  /// Made once, then changed in place only: load_blocks() fills in blocks and ranks (references into it,
  /// the C API's pointers, stay valid).
  std::vector<VariableInfo> vars;
  bool listed = false;  ///< whether vars list the blocks (the index was whole when described, or load_blocks())
  std::optional<BlockReader> blocks;
  /// Per variable: (writer rank, block index) sorted by rank, so that read_rank finds a rank's block
  /// in log(blocks) instead of scanning them.
  std::vector<std::vector<std::pair<std::uint32_t, std::uint32_t>>> by_rank;
  /// Per global or joined variable: (first index along dimension 0, block index) sorted, and the largest extent
  /// of a block along dimension 0, so that a box read visits only the blocks whose rows along that
  /// dimension can meet the box instead of every block (reading every block's box, as diff and
  /// convert do, would otherwise be quadratic in the rank count).
  std::vector<std::vector<std::pair<std::uint64_t, std::uint32_t>>> by_start;
  std::vector<std::uint64_t> max_count0;
  std::size_t tables_blocks = SIZE_MAX;  // index.blocks.size() when by_rank and by_start were built
  std::vector<std::uint8_t> piece;
  /// The device layer, made on the first read: it tells device memory from host memory and copies into
  /// device memory (the host device when there is no GPU).
  std::unique_ptr<Device> device;
  std::vector<std::uint8_t> bounce;  // device reads: the box in host memory first

  CheckpointReaderState(std::string n, std::string d, PartialIndex p)
      : name(std::move(n)), dir(std::move(d)), part(std::move(p)), index(part.index()), lookup(part.lookup()) {
    blocks.emplace(dir, index);
  }

  /// Builds the variables' descriptions: from the blocks when the index is complete, else from the root
  /// (opened lazily), loading only what the extents of local arrays need (the lowest writer's block).
  /// `local_extents` (one per variable; lazily opened only): the local arrays' extents as another reader
  /// of the same index found them, instead of loading sub-indices here.
  Status describe_all(const std::vector<Shape>* local_extents = nullptr) {
    // Listed only when whole from the start: what the extents load below may complete (one writer) does not
    // count, so every rank of a collective open describes the same way.
    listed = part.complete();
    const bool given = local_extents != nullptr && !listed && local_extents->size() == index.vars.size();
    if (!listed && !given) CKPT_RETURN_IF_ERROR(load_local_extents());
    vars.clear();
    vars.reserve(index.vars.size());
    for (std::uint32_t v = 0; v < index.vars.size(); ++v) {
      vars.push_back(describe(v));
      if (given && index.vars[v].kind == RegionKind::local) vars.back().shape = (*local_extents)[v];
    }
    refresh();
    return Status::OK();
  }

  /// A lazily opened index: VariableInfo::shape of a local array is the lowest writer rank's block's, so
  /// writers are loaded in rank order until every such array with blocks has one (writer 0 holds rank 0,
  /// which usually wrote them all). A writer rule that maps ranks freely: everything.
  Status load_local_extents() {
    const RootIndex& root = part.root();
    std::vector<std::uint32_t> want;
    for (std::uint32_t v = 0; v < index.vars.size(); ++v)
      if (index.vars[v].kind == RegionKind::local && root.vars[v].n_blocks > 0) want.push_back(v);
    if (want.empty()) return Status::OK();
    if (root.rule == WriterRule::mapped) return part.load_all();
    // Writers [0, loaded) in batches that double (1, 2, 4, ...): one writer as a rule, O(W log W) at worst.
    std::uint32_t loaded = 0;
    for (std::uint32_t batch = 1; loaded < part.writers(); batch = batch > UINT32_MAX / 2 ? batch : 2 * batch) {
      const std::uint32_t n = std::min(batch, part.writers() - loaded);
      CKPT_RETURN_IF_ERROR(part.load_range(loaded, n));
      loaded += n;
      want.erase(std::remove_if(want.begin(), want.end(), [&](std::uint32_t v) { return !lookup.blocks(v).empty(); }),
                 want.end());
      if (want.empty()) break;
    }
    return Status::OK();
  }

  /// Rebuilds by_rank, by_start and max_count0 when blocks were loaded since they were built.
  void refresh() {
    if (tables_blocks == index.blocks.size()) return;
    tables_blocks = index.blocks.size();
    by_rank.assign(index.vars.size(), {});
    by_start.assign(index.vars.size(), {});
    max_count0.assign(index.vars.size(), 0);
    for (std::uint32_t v = 0; v < index.vars.size(); ++v) {
      for (const std::uint32_t bi : lookup.blocks(v)) {
        const BlockRecord& b = index.blocks[bi];
        by_rank[v].emplace_back(b.rank, bi);
        if (has_global_shape(index.vars[v].kind) && !b.start.empty()) {
          by_start[v].emplace_back(b.start[0], bi);
          max_count0[v] = std::max(max_count0[v], b.count[0]);
        }
      }
      std::sort(by_rank[v].begin(), by_rank[v].end());
      std::sort(by_start[v].begin(), by_start[v].end());
    }
  }

  /// Lists the blocks in vars: a lazily opened index is read whole first, as a serial open reads it (every
  /// sub-index, each checked against the root and the catalog: what the parts loaded alone are not), and
  /// must be the checkpoint that was opened (a step committed again since has another id).
  Status load_blocks() {
    if (listed) return Status::OK();
    if (!part.whole()) {
      auto whole = load_checkpoint_index(dir, index.step);
      if (!whole.ok()) return whole.status();
      if (whole->ckpt_id != index.ckpt_id)
        return Status(Code::failed_precondition, what() + " was replaced since it was opened (checkpoint id " +
                                                     std::to_string(whole->ckpt_id) + ", opened " +
                                                     std::to_string(index.ckpt_id) + "): open it again");
      part = PartialIndex(std::move(whole).value(), 0);
      blocks.emplace(dir, index);  // its per-file state is by file number, which the whole index renumbers
      tables_blocks = SIZE_MAX;
      refresh();
    }
    for (std::uint32_t v = 0; v < index.vars.size(); ++v) list_blocks(v, vars[v]);
    listed = true;
    return Status::OK();
  }

  /// A lazily opened index: loads the sub-indices of the blocks of variable `v` that the box at `start`
  /// of `count` needs (its directory says which).
  Status cover(long v, const Shape& start, const Shape& count) {
    if (part.complete()) return Status::OK();
    const auto var = static_cast<std::uint32_t>(v);
    const Status st = index.vars[var].kind == RegionKind::joined && !start.empty()
                          ? part.cover_rows(var, {{start[0], count[0]}})
                          : part.cover(var, {{start, count}});
    refresh();
    return st;
  }

  /// A lazily opened index: loads the sub-index that holds rank `rank`'s blocks.
  Status cover_rank(std::uint32_t rank) {
    if (part.complete() || rank >= index.nranks) return Status::OK();
    const Status st = part.load_rank(rank);
    refresh();
    return st;
  }

  BlockInfo block_info(const BlockRecord& b) const {
    return BlockInfo{b.rank, b.start, b.count, b.length, index.files[b.file].name, b.offset};
  }

  /// `info.blocks` and `info.ranks` of variable `v`, from the blocks loaded.
  void list_blocks(std::uint32_t v, VariableInfo& info) const {
    info.blocks.clear();
    info.ranks.clear();
    for (const std::uint32_t bi : lookup.blocks(v)) {
      info.blocks.push_back(block_info(index.blocks[bi]));
      info.ranks.push_back(index.blocks[bi].rank);
    }
    std::sort(info.ranks.begin(), info.ranks.end());
    info.ranks.erase(std::unique(info.ranks.begin(), info.ranks.end()), info.ranks.end());
  }

  VariableInfo describe(std::uint32_t v) const {
    const VarRecord& r = index.vars[v];
    VariableInfo info;
    info.name = r.name;
    info.dtype = r.dtype;
    info.kind = static_cast<VarKind>(r.kind);
    info.uniform = r.uniform;
    info.attrs = r.attrs;
    VarStats st;
    if (listed) {
      st = var_stats(index, v, lookup.blocks(v));
    } else {  // merged over every rank by the commit, in the root
      const Var2& root = part.root().vars[v];
      st.valid = root.has_stats;
      st.min_bits = root.min_bits;
      st.max_bits = root.max_bits;
    }
    info.has_minmax = st.valid;
    if (st.valid) {
      info.min = stat_to_double(r.dtype, st.min_bits);
      info.max = stat_to_double(r.dtype, st.max_bits);
    }
    const BlockRecord* lowest = nullptr;
    for (const std::uint32_t bi : lookup.blocks(v))
      if (lowest == nullptr || index.blocks[bi].rank < lowest->rank) lowest = &index.blocks[bi];
    if (listed) list_blocks(v, info);
    if (has_global_shape(r.kind))
      info.shape = r.global;
    else if (lowest != nullptr)
      info.shape = lowest->count;
    return info;
  }

  std::string what() const { return "checkpoint " + std::to_string(index.step) + " (" + name + ")"; }

  /// Calls `fn(block index)` for each block of global or joined variable `v` that may intersect the box at
  /// `start` of `count` (all of them for a 0-d variable), in increasing first index along dimension 0.
  template <class Fn>
  Status candidates(long v, const Shape& start, const Shape& count, const Fn& fn) const {
    const auto vi = static_cast<std::size_t>(v);
    if (start.empty()) {
      for (const std::uint32_t bi : lookup.blocks(v)) CKPT_RETURN_IF_ERROR(fn(bi));
      return Status::OK();
    }
    // A block meets the box along dimension 0 only if it starts after start[0] - max_count0 and
    // before start[0] + count[0].
    const std::uint64_t from = start[0] >= max_count0[vi] ? start[0] - max_count0[vi] + 1 : 0;
    const auto& s = by_start[vi];
    auto it = std::lower_bound(s.begin(), s.end(), std::make_pair(from, std::uint32_t{0}));
    for (; it != s.end() && it->first < start[0] + count[0]; ++it) CKPT_RETURN_IF_ERROR(fn(it->second));
    return Status::OK();
  }

  Result<long> find(const std::string& name) const {
    const long v = lookup.var(name);
    if (v < 0) return Status(Code::not_found, "variable '" + name + "' is not in " + what());
    return v;
  }

  /// Calls `fill(dst)` to write `bytes` bytes at dst: `out` itself when it is host memory, else a host
  /// bounce buffer then copied into `out` (device or managed memory) before returning.
  template <class Fill>
  Status into(void* out, std::size_t bytes, const Fill& fill) {
    if (!device) {
      auto d = make_runtime_device(DeviceConfig{});
      if (!d.ok()) return d.status().with_context("reading into " + what());
      device = std::move(d).value();
    }
    auto kind = device->classify(out);
    if (!kind.ok()) return kind.status();
    if (*kind == MemoryKind::host || *kind == MemoryKind::host_pinned) return fill(static_cast<std::uint8_t*>(out));
    bounce.resize(bytes);
    CKPT_RETURN_IF_ERROR(fill(bounce.data()));
    CKPT_RETURN_IF_ERROR(device->restore_begin(nullptr));
    const Status copied = device->copy_to_device(out, bounce.data(), bytes, *kind);
    const Status ended = device->restore_end(nullptr);
    return copied.ok() ? ended : copied;
  }

  /// "variable 'x' of checkpoint 20 (<path>)": how messages name variable `v`.
  std::string var_text(long v) const {
    return "variable '" + index.vars[static_cast<std::size_t>(v)].name + "' of " + what();
  }

  /// What a read of the box at `start` of `count` of variable `v` needs, checked before any byte is read
  /// (CheckpointReader::box_bytes): the box, the claims of the blocks it touches, their coverage.
  Result<std::uint64_t> box_bytes(long v, const Shape& start, const Shape& count) {
    using detail::shape_text;
    const VarRecord& r = index.vars[static_cast<std::size_t>(v)];
    const std::string var = var_text(v);
    if (!has_global_shape(r.kind))
      return Status(Code::invalid_argument,
                    var + " is a " + region_kind_name(r.kind) + " variable: read it by rank (read_rank)");
    if (start.size() != r.global.size() || count.size() != r.global.size())
      return Status(Code::invalid_argument, var + " has " + std::to_string(r.global.size()) +
                                                " dimensions; the box given has start " + shape_text(start) +
                                                " and count " + shape_text(count));
    for (std::size_t d = 0; d < start.size(); ++d)
      if (start[d] > r.global[d] || count[d] > r.global[d] - start[d])
        return Status(Code::invalid_argument, var + ": the box at " + shape_text(start) + " of " + shape_text(count) +
                                                  " lies outside the array " + shape_text(r.global));
    const auto need = detail::box_bytes(count, dtype_size(r.dtype));
    if (!need)
      return Status(Code::invalid_argument, var + ": the box " + shape_text(count) + " needs more than 2^64 bytes");
    CKPT_RETURN_IF_ERROR(cover(v, start, count));
    std::uint64_t covered = 0;
    Shape lo, hi;
    CKPT_RETURN_IF_ERROR(candidates(v, start, count, [&](std::uint32_t bi) -> Status {
      const BlockRecord& b = index.blocks[bi];
      if (!intersect_boxes(start, count, b.start, b.count, lo, hi)) return Status::OK();
      CKPT_RETURN_IF_ERROR(blocks->claim(b));
      std::uint64_t n = 1;
      for (std::size_t d = 0; d < lo.size(); ++d) n *= hi[d] - lo[d];
      covered += n;
      return Status::OK();
    }));
    if (covered != elements(count))
      return Status(Code::mismatch, var + ": the stored blocks cover " + std::to_string(covered) + " of the " +
                                        std::to_string(elements(count)) + " elements of the box at " +
                                        shape_text(start) + " of " + shape_text(count));
    return *need;
  }

  /// The block rank `rank` wrote of per-rank variable `v`, once it is known to lie inside its file.
  Result<const BlockRecord*> rank_block(long v, std::uint32_t rank) {
    const VarRecord& r = index.vars[static_cast<std::size_t>(v)];
    if (has_global_shape(r.kind))
      return Status(Code::invalid_argument,
                    var_text(v) + " is a " + region_kind_name(r.kind) + " array: read a box of it (read)");
    CKPT_RETURN_IF_ERROR(cover_rank(rank));
    const auto& ranks = by_rank[static_cast<std::size_t>(v)];
    const auto it = std::lower_bound(ranks.begin(), ranks.end(), std::make_pair(rank, std::uint32_t{0}));
    if (it == ranks.end() || it->first != rank)
      return Status(Code::not_found, var_text(v) + ": rank " + std::to_string(rank) + " wrote no block of it");
    const BlockRecord& b = index.blocks[it->second];
    CKPT_RETURN_IF_ERROR(blocks->claim(b));
    return &b;
  }

  /// Streams block `b` whole (so that its checksum is verified), handing each piece to `fn`.
  Status stream(const BlockRecord& b, const BlockReader::PieceFn& fn) {
    if (piece.empty()) piece.resize(kPieceBytes);
    return blocks->stream(b, piece.data(), piece.size(), fn);
  }
};

struct ReaderState {
  std::string path;
  bool single = false;              // path names one checkpoint (a directory, or a step of a series)
  std::string single_dir;           // then: where its files are
  std::unique_ptr<Store> store;     // when it is a root
  std::vector<std::int64_t> steps;  // complete, oldest first
  std::vector<std::string> skipped;
  std::vector<std::int64_t> skipped_steps;  // the step of each line of `skipped`
  std::optional<Index> single_index;  // when it is one checkpoint (serial)
  /// Listed with ListDepth::roots (rank 0 of a collective open): the steps whose sub-indices are unchecked,
  /// and their roots as the listing read them.
  std::vector<std::int64_t> unchecked;
  std::vector<std::vector<std::uint8_t>> unchecked_roots;
  bool collective = false;
  MPI_Comm comm = MPI_COMM_NULL;  // the caller's, when collective
  int rank = 0;
};

namespace {

/// The path of step `step` of `s`: the path given to open() for one checkpoint, else `<root>/ckpt.<step>`
/// (a series step has no directory: its files are in a segment).
std::string step_path(const ReaderState& s, std::int64_t step) {
  return s.single ? s.path : s.path + "/" + step_name(step);
}

}  // namespace
}  // namespace detail

// ---- CheckpointReader -----------------------------------------------------------------------------

CheckpointReader::CheckpointReader(std::unique_ptr<detail::CheckpointReaderState> s) : m_s(std::move(s)) {}
CheckpointReader::CheckpointReader(CheckpointReader&&) noexcept = default;
CheckpointReader& CheckpointReader::operator=(CheckpointReader&&) noexcept = default;
CheckpointReader::~CheckpointReader() = default;

std::int64_t CheckpointReader::step() const { return m_s->index.step; }
int CheckpointReader::nranks() const { return static_cast<int>(m_s->index.nranks); }
const std::string& CheckpointReader::transport() const { return m_s->index.transport; }
const std::string& CheckpointReader::path() const { return m_s->name; }
const std::vector<std::pair<std::string, std::string>>& CheckpointReader::attrs() const { return m_s->index.attrs; }
const std::vector<VariableInfo>& CheckpointReader::variables() const { return m_s->vars; }
bool CheckpointReader::blocks_loaded() const { return m_s->listed; }
Status CheckpointReader::load_blocks() { return m_s->load_blocks(); }
std::uint64_t CheckpointReader::index_bytes() const { return m_s->part.bytes_read(); }

Result<VariableInfo> CheckpointReader::variable(const std::string& name) const {
  auto v = m_s->find(name);
  if (!v.ok()) return v.status();
  return m_s->vars[static_cast<std::size_t>(v.value())];
}

Result<std::uint64_t> CheckpointReader::box_bytes(const std::string& name, const Shape& start, const Shape& count) {
  auto vi = m_s->find(name);
  if (!vi.ok()) return vi.status();
  return m_s->box_bytes(vi.value(), start, count);
}

Result<std::uint64_t> CheckpointReader::rank_bytes(const std::string& name, std::uint32_t rank) {
  auto vi = m_s->find(name);
  if (!vi.ok()) return vi.status();
  auto b = m_s->rank_block(vi.value(), rank);
  if (!b.ok()) return b.status();
  return b.value()->length;
}

Status CheckpointReader::read(const std::string& name, const Shape& start, const Shape& count, void* out,
                              std::size_t out_bytes) {
  auto vi = m_s->find(name);
  if (!vi.ok()) return vi.status();
  auto need = m_s->box_bytes(vi.value(), start, count);
  if (!need.ok()) return need.status();
  if (*need > out_bytes)
    return Status(Code::invalid_argument, m_s->var_text(vi.value()) + ": the box " + detail::shape_text(count) +
                                              " needs " + std::to_string(*need) + " bytes, the buffer has " +
                                              std::to_string(out_bytes));
  if (*need == 0) return Status::OK();
  const std::size_t esize = dtype_size(m_s->index.vars[static_cast<std::size_t>(vi.value())].dtype);
  return m_s->into(out, static_cast<std::size_t>(*need), [&](std::uint8_t* dst) -> Status {
    Shape lo, hi;
    return m_s->candidates(vi.value(), start, count, [&](std::uint32_t bi) -> Status {
      const detail::BlockRecord& b = m_s->index.blocks[bi];
      if (!detail::intersect_boxes(start, count, b.start, b.count, lo, hi)) return Status::OK();
      detail::RowWalker rows(lo, hi, b.start, b.count, start, count, esize);
      return m_s->stream(b, [&](const std::uint8_t* piece, std::size_t len, std::uint64_t p0) {
        return rows.scatter_piece(p0, len, [&](std::uint64_t to, std::uint64_t from, std::uint64_t bytes) {
          std::memcpy(dst + to, piece + from, bytes);
          return Status::OK();
        });
      });
    });
  });
}

Status CheckpointReader::read(const std::string& name, void* out, std::size_t out_bytes) {
  auto vi = m_s->find(name);
  if (!vi.ok()) return vi.status();
  const detail::VarRecord& v = m_s->index.vars[static_cast<std::size_t>(vi.value())];
  return read(name, Shape(v.global.size(), 0), v.global, out, out_bytes);
}

Result<std::vector<std::uint64_t>> CheckpointReader::rows_by_key(const std::string& key,
                                                                 std::vector<std::int64_t>* keys,
                                                                 bool allow_duplicates) {
  auto vi = m_s->find(key);
  if (!vi.ok()) return vi.status();
  const VariableInfo& v = m_s->vars[static_cast<std::size_t>(vi.value())];
  const std::string what = "key '" + key + "'";
  if (v.kind != VarKind::joined)
    return Status(Code::invalid_argument,
                  what + " is a " + var_kind_name(v.kind) + " variable; a key is a joined array (one value per row)");
  const DType t = v.dtype;
  if (!detail::is_integer_dtype(t))
    return Status(Code::invalid_argument, what + " holds " + dtype_name(t) +
                                              " values; a key must be an integer variable (a block or particle id)");
  if (v.shape.empty() || v.shape.size() > 2 || (v.shape.size() == 2 && v.shape[1] != 1))
    return Status(Code::invalid_argument, what + " has shape " + detail::shape_text(v.shape) +
                                              "; a key needs one value per row ([rows] or [rows, 1])");
  // Sized from what the reader checked against the files, never from the index's claim alone.
  auto need = m_s->box_bytes(vi.value(), Shape(v.shape.size(), 0), v.shape);
  if (!need.ok()) return need.status();
  std::vector<std::uint8_t> raw(static_cast<std::size_t>(*need));
  CKPT_RETURN_IF_ERROR(read(key, raw.data(), raw.size()));
  const std::size_t esize = dtype_size(t);
  const std::size_t rows = raw.size() / esize;
  std::vector<std::int64_t> value(rows);
  for (std::size_t i = 0; i < rows; ++i)
    if (!detail::widen_integer(raw.data() + i * esize, t, value[i])) {
      std::uint64_t u = 0;  // only a u64 can be beyond
      std::memcpy(&u, raw.data() + i * esize, sizeof u);
      return Status(Code::invalid_argument, what + ": row " + std::to_string(i) + " holds " + std::to_string(u) +
                                                ", beyond the keys ckpt orders (up to 2^63 - 1)");
    }
  std::vector<std::uint64_t> order(rows);
  for (std::size_t i = 0; i < rows; ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](std::uint64_t a, std::uint64_t b) { return value[a] < value[b]; });
  // A value held by two rows does not say which row is which: name the first few, count them all.
  std::string dups;
  std::uint64_t ndup = 0;
  for (std::size_t i = 1; i < rows; ++i) {
    if (value[order[i]] != value[order[i - 1]] || (i >= 2 && value[order[i - 1]] == value[order[i - 2]])) continue;
    ++ndup;
    if (ndup <= 5) {
      dups += (dups.empty() ? "" : ", ") + std::to_string(value[order[i]]) + " (rows " + std::to_string(order[i - 1]);
      for (std::size_t j = i; j < rows && value[order[j]] == value[order[i]]; ++j)
        dups += ", " + std::to_string(order[j]);
      dups += ")";
    }
  }
  if (ndup > 0 && !allow_duplicates)
    return Status(Code::invalid_argument, what + " is not unique: " + std::to_string(ndup) +
                                              " value(s) held by more than one row: " + dups +
                                              (ndup > 5 ? ", ..." : ""));
  if (keys != nullptr) {
    keys->resize(rows);
    for (std::size_t i = 0; i < rows; ++i) (*keys)[i] = value[order[i]];
  }
  return order;
}

Status CheckpointReader::read_rank(const std::string& name, std::uint32_t rank, void* out, std::size_t out_bytes) {
  auto vi = m_s->find(name);
  if (!vi.ok()) return vi.status();
  auto block = m_s->rank_block(vi.value(), rank);
  if (!block.ok()) return block.status();
  const detail::BlockRecord& b = *block.value();
  if (b.length > out_bytes)
    return Status(Code::invalid_argument, m_s->var_text(vi.value()) + ", rank " + std::to_string(rank) +
                                              ": the block holds " + std::to_string(b.length) + " bytes, the buffer " +
                                              std::to_string(out_bytes));
  if (b.length == 0) return Status::OK();
  return m_s->into(out, static_cast<std::size_t>(b.length), [&](std::uint8_t* dst) {
    return m_s->stream(b, [&](const std::uint8_t* piece, std::size_t len, std::uint64_t p0) {
      std::memcpy(dst + p0, piece, len);
      return Status::OK();
    });
  });
}

Status CheckpointReader::verify() { return verify(nullptr); }

Status CheckpointReader::verify(const BlockCheckFn& on_block) {
  constexpr std::size_t kMaxLines = 20;
  std::size_t bad = 0;
  std::string lines;
  CKPT_RETURN_IF_ERROR(m_s->load_blocks());
  if (m_s->piece.empty()) m_s->piece.resize(detail::kPieceBytes);
  for (const detail::BlockRecord& b : m_s->index.blocks) {
    const Status s = m_s->blocks->verify(b, m_s->piece.data(), m_s->piece.size());
    if (on_block) on_block(m_s->vars[b.var], m_s->block_info(b), s);
    if (s.ok()) continue;
    if (bad++ < kMaxLines) lines += "\n  " + s.message();
  }
  if (bad == 0) return Status::OK();
  return Status(Code::corrupt, m_s->what() + ": " + std::to_string(bad) + " bad block(s) of " +
                                   std::to_string(m_s->index.blocks.size()) + lines +
                                   (bad > kMaxLines ? "\n  ..." : ""));
}

Result<CheckpointReader> detail::make_checkpoint_reader(std::string name, std::string dir, detail::PartialIndex index,
                                                        const std::vector<Shape>* local_extents) {
  auto s = std::make_unique<detail::CheckpointReaderState>(std::move(name), std::move(dir), std::move(index));
  CKPT_RETURN_IF_ERROR(s->describe_all(local_extents));
  return CheckpointReader(std::move(s));
}

Result<CheckpointReader> detail::make_checkpoint_reader(CommRef comm_ref, std::string dir, detail::PartialIndex index) {
  // A series step's files are in its segment (<root>/series.<k>); the checkpoint is <root>/ckpt.<step>.
  std::string name = dir;
  const auto slash = dir.rfind('/');
  if (slash != std::string::npos && detail::parse_segment_name(dir.substr(slash + 1)))
    name = dir.substr(0, slash) + "/" + detail::step_name(index.index().step);
  return make_checkpoint_reader(comm_ref, std::move(name), std::move(dir), std::move(index));
}

Result<CheckpointReader> detail::make_checkpoint_reader(CommRef comm_ref, std::string name, std::string dir,
                                                        detail::PartialIndex index) {
  auto comm = detail::comm_from_ref(comm_ref, "opening a checkpoint collectively");
  if (!comm.ok()) return comm.status();
  int rank = 0;
  MPI_Comm_rank(comm.value(), &rank);
  // A lazily opened index: rank 0 loads what the local arrays' extents need (usually writer 0's sub-index)
  // and sends the extents, so that one rank reads that sub-index, not every rank of the job.
  const bool lazy = !index.complete();
  Result<CheckpointReader> out = Status(Code::internal, "no reader");
  Result<std::vector<std::uint8_t>> extents = std::vector<std::uint8_t>{};
  if (rank == 0) {
    out = make_checkpoint_reader(name, dir, std::move(index), nullptr);
    if (out.ok() && lazy) {
      detail::ByteWriter w;
      for (const VariableInfo& v : out->variables()) {
        w.put<std::uint32_t>(static_cast<std::uint32_t>(v.shape.size()));
        for (const std::uint64_t e : v.shape) w.put<std::uint64_t>(e);
      }
      extents = std::move(w.bytes());
    } else if (!out.ok()) {
      extents = out.status();
    }
  }
  auto got = detail::bcast_result(comm.value(), std::move(extents), 0);
  if (!got.ok()) return got.status();  // rank 0's failure, on every rank
  if (rank != 0) {
    std::vector<Shape> shapes;
    bool ok = true;
    if (lazy) {
      detail::ByteReader rd(got->data(), got->size());
      for (std::size_t v = 0; ok && v < index.index().vars.size(); ++v) {
        std::uint32_t ndim = 0;
        ok = rd.get(ndim) && ndim <= 64;
        Shape sh(ok ? ndim : 0);
        for (auto& e : sh) ok = ok && rd.get(e);
        shapes.push_back(std::move(sh));
      }
      ok = ok && rd.at_end();
    }
    // Malformed: this rank fails, and the agreement below tells every rank (none is left waiting in it).
    out = ok ? make_checkpoint_reader(std::move(name), std::move(dir), std::move(index), lazy ? &shapes : nullptr)
             : Result<CheckpointReader>(Status(Code::internal, "the extents rank 0 sent are malformed"));
  }
  const Status agreed = detail::agree(comm.value(), out.status());
  if (!agreed.ok()) return agreed;
  return out;
}

// ---- Reader ---------------------------------------------------------------------------------------

Reader::Reader(std::unique_ptr<detail::ReaderState> s) : m_s(std::move(s)) {}
Reader::Reader(Reader&&) noexcept = default;
Reader& Reader::operator=(Reader&&) noexcept = default;
Reader::~Reader() = default;

namespace detail {
namespace {

/// What Reader::open(path) reads: one checkpoint, or a root's listing with each step checked to `depth`.
Result<std::unique_ptr<ReaderState>> list_path(const std::string& path, ListDepth depth) {
  auto s = std::make_unique<ReaderState>();
  s->path = path;
  if (names_checkpoint(path)) {
    auto c = load_checkpoint(path);
    if (!c.ok()) return c.status();
    s->single = true;
    s->single_dir = c->data_dir;
    s->steps.push_back(c->index.step);
    s->single_index = std::move(c->index);
    return s;
  }
  CKPT_RETURN_IF_ERROR(check_directory(path));
  s->store = open_store(path);
  auto entries = s->store->list(depth);
  if (!entries.ok()) return entries.status();
  for (auto& e : entries.value()) {  // newest first
    if (e.complete)
      s->steps.push_back(e.step);
    else
      s->skipped.push_back(e.name + ": " + e.reason), s->skipped_steps.push_back(e.step);
    if (e.complete && e.subindices_unchecked()) {
      s->unchecked.push_back(e.step);
      s->unchecked_roots.push_back(std::move(e.unchecked_root));
    }
  }
  std::reverse(s->steps.begin(), s->steps.end());
  return s;
}

}  // namespace
}  // namespace detail

Result<Reader> Reader::open(const std::string& path) {
  auto s = detail::list_path(path, detail::ListDepth::whole);
  if (!s.ok()) return s.status();
  return Reader(std::move(s).value());
}

Result<Reader> Reader::open(CommRef comm, const std::string& path) {
  auto c = detail::comm_from_ref(comm, "ckpt::Reader::open");
  if (!c.ok()) return c.status();
  int rank = 0;
  MPI_Comm_rank(c.value(), &rank);
  // Rank 0 lists (as open(path), a version-2 step checked by its root and catalog only) and sends the
  // listing: single flag, steps, skipped lines, and the steps whose sub-indices every rank checks below.
  Result<std::vector<std::uint8_t>> listing = std::vector<std::uint8_t>{};
  std::unique_ptr<detail::ReaderState> listed;
  if (rank == 0) {
    auto r = detail::list_path(path, detail::ListDepth::roots);
    if (r.ok()) {
      listed = std::move(r).value();
      detail::ByteWriter w;
      w.put<std::uint8_t>(listed->single ? 1 : 0);
      w.str(listed->single_dir);
      w.put<std::uint64_t>(listed->steps.size());
      for (const std::int64_t st : listed->steps) w.put<std::int64_t>(st);
      w.put<std::uint64_t>(listed->skipped.size());
      for (std::size_t i = 0; i < listed->skipped.size(); ++i) {
        w.put<std::int64_t>(listed->skipped_steps[i]);
        w.str(listed->skipped[i]);
      }
      w.put<std::uint64_t>(listed->unchecked.size());
      for (const std::int64_t st : listed->unchecked) w.put<std::int64_t>(st);
      listing = std::move(w.bytes());
    } else {
      listing = r.status();
    }
  }
  auto bytes = detail::bcast_result(c.value(), std::move(listing), 0);
  if (!bytes.ok()) return bytes.status();
  auto s = std::make_unique<detail::ReaderState>();
  s->path = path;
  s->collective = true;
  s->comm = c.value();
  s->rank = rank;
  detail::ByteReader rd(bytes->data(), bytes->size());
  std::uint8_t single = 0;
  std::uint64_t n = 0;
  bool ok = rd.get(single) && rd.str(s->single_dir, 1u << 20) && rd.count(n, sizeof(std::int64_t), UINT32_MAX);
  for (std::uint64_t i = 0; ok && i < n; ++i) {
    std::int64_t st = 0;
    ok = rd.get(st);
    s->steps.push_back(st);
  }
  ok = ok && rd.count(n, sizeof(std::int64_t) + 4, UINT32_MAX);
  for (std::uint64_t i = 0; ok && i < n; ++i) {
    std::int64_t st = 0;
    std::string sk;
    ok = rd.get(st) && rd.str(sk);
    s->skipped_steps.push_back(st);
    s->skipped.push_back(std::move(sk));
  }
  ok = ok && rd.count(n, sizeof(std::int64_t), UINT32_MAX);
  std::vector<std::int64_t> unchecked;
  for (std::uint64_t i = 0; ok && i < n; ++i) {
    std::int64_t st = 0;
    ok = rd.get(st);
    unchecked.push_back(st);
  }
  if (!ok || !rd.at_end()) return Status(Code::internal, "the listing rank 0 sent is malformed: " + rd.error());
  s->single = single != 0;
  if (!s->single && rank == 0) s->store = std::move(listed->store);  // the others get what it reads
  // The sub-indices of the version-2 steps, spread over the ranks as latest() checks them: per step rank 0
  // sends the root its listing read and its directory (the others' `path` is not read), each rank checks
  // its writers'.
  for (std::size_t k = 0; k < unchecked.size(); ++k) {
    const std::int64_t step = unchecked[k];
    std::vector<std::uint8_t> root, where;
    if (rank == 0) {
      const std::string d = s->store->checkpoint_dir(step);
      where.assign(d.begin(), d.end());
      root = std::move(listed->unchecked_roots[k]);
    }
    detail::bcast_bytes(c.value(), where, 0);
    detail::bcast_bytes(c.value(), root, 0);
    const std::string dir(where.begin(), where.end());
    const Status st = detail::check_subindices_collective(c.value(), dir, root, step);
    if (st.ok()) continue;
    s->steps.erase(std::remove(s->steps.begin(), s->steps.end(), step), s->steps.end());
    // Newest first, the committed entry before the others of its step (as the store lists them).
    const auto at =
        std::find_if(s->skipped_steps.begin(), s->skipped_steps.end(), [&](std::int64_t k) { return k <= step; });
    const auto i = at - s->skipped_steps.begin();
    s->skipped_steps.insert(at, step);
    s->skipped.insert(s->skipped.begin() + i, detail::step_name(step) + ": " + st.message());
  }
  return Reader(std::move(s));
}

const std::string& Reader::path() const { return m_s->path; }
bool Reader::collective() const { return m_s->collective; }
std::vector<std::int64_t> Reader::steps() const { return m_s->steps; }
const std::vector<std::string>& Reader::skipped() const { return m_s->skipped; }

Result<CheckpointReader> Reader::open_step(std::int64_t step) const {
  if (std::find(m_s->steps.begin(), m_s->steps.end(), step) == m_s->steps.end())
    return Status(Code::not_found, "step " + std::to_string(step) + " is not a complete checkpoint in " + m_s->path);
  if (m_s->collective) {
    // Every rank has the same listing, so every rank is here: rank 0 reads the index and where its
    // files are (a series step's segment), all validate it. A two-level index of a checkpoint directory:
    // its root only, opened lazily as Runtime::inspect() opens it (the blocks when a call needs them).
    Result<std::vector<std::uint8_t>> mine = std::vector<std::uint8_t>{};
    std::vector<std::uint8_t> where;
    std::uint8_t lazy = 0;
    if (m_s->rank == 0) {
      if (m_s->single) {
        auto c = detail::load_checkpoint(m_s->path);
        mine = c.ok() ? Result<std::vector<std::uint8_t>>(detail::encode_index(c->index)) : c.status();
      } else {
        const std::string d = m_s->store->checkpoint_dir(step);
        where.assign(d.begin(), d.end());
        if (m_s->store->layout() == detail::Layout::directory) {
          // A one-level index is read whole by this one read (read_index_file() reads the same file).
          mine = detail::read_root_file(d);
          lazy = mine.ok() && detail::index_header_version(mine->data(), mine->size()) == detail::kIndexV2Version;
        } else {
          mine = m_s->store->read_index(step);
        }
      }
      where.push_back(lazy);
    }
    detail::bcast_bytes(m_s->comm, where, 0);
    lazy = where.empty() ? 0 : where.back();
    if (!where.empty()) where.pop_back();
    const std::string dir = m_s->single ? m_s->single_dir : std::string(where.begin(), where.end());
    auto bytes = detail::bcast_result(m_s->comm, std::move(mine), 0);
    if (!bytes.ok()) return bytes.status();
    if (lazy != 0) {
      auto part = detail::PartialIndex::open_v2(dir, bytes.value(), step);
      if (!part.ok()) return part.status();
      return detail::make_checkpoint_reader(CommRef(m_s->comm), detail::step_path(*m_s, step), dir,
                                            std::move(part).value());
    }
    auto idx = detail::decode_checkpoint_index(bytes.value(), dir, step);
    if (!idx.ok()) return idx.status();
    return detail::make_checkpoint_reader(detail::step_path(*m_s, step), dir,
                                          detail::PartialIndex(std::move(idx).value(), bytes->size()), nullptr);
  }
  if (m_s->single)
    return detail::make_checkpoint_reader(m_s->path, m_s->single_dir, detail::PartialIndex(*m_s->single_index, 0),
                                          nullptr);
  // Loaded again: the checkpoint may have been replaced or retired since open().
  auto idx = m_s->store->load_index(step);
  if (!idx.ok()) return idx.status();
  return detail::make_checkpoint_reader(detail::step_path(*m_s, step), m_s->store->checkpoint_dir(step),
                                        detail::PartialIndex(std::move(idx).value(), 0), nullptr);
}

Result<CheckpointReader> Reader::latest() const {
  if (m_s->steps.empty()) return Status(Code::not_found, "no complete checkpoint in " + m_s->path);
  return open_step(m_s->steps.back());
}

}  // namespace ckpt
