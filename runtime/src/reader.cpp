// The public Reader over the checkpoint store: listing and index loading (base/store), boxes
// (base/box) and verified block streaming (the store's BlockReader). Serial; no MPI call.
#include "ckpt/reader.hpp"

#include <algorithm>
#include <cstring>
#include <optional>

#include "base/box.hpp"
#include "base/format.hpp"
#include "base/hash.hpp"
#include "base/store.hpp"

namespace ckpt {

const char* var_kind_name(VarKind k) noexcept { return detail::region_kind_name(static_cast<detail::RegionKind>(k)); }

namespace detail {

/// Pieces of a block read at once (whole elements: a multiple of 16).
constexpr std::size_t kPieceBytes = 4u << 20;

struct CheckpointReaderState {
  std::string dir;
  Index index;  // BlockReader keeps a reference: this state lives on the heap and never moves
  std::vector<VariableInfo> vars;
  IndexLookup lookup;
  BlockReader blocks;
  std::vector<std::uint8_t> piece;

  CheckpointReaderState(std::string d, Index idx)
      : dir(std::move(d)), index(std::move(idx)), lookup(index), blocks(dir, index) {
    vars.reserve(index.vars.size());
    for (std::uint32_t v = 0; v < index.vars.size(); ++v) vars.push_back(describe(v));
  }

  VariableInfo describe(std::uint32_t v) const {
    const VarRecord& r = index.vars[v];
    VariableInfo info;
    info.name = r.name;
    info.dtype = r.dtype;
    info.kind = static_cast<VarKind>(r.kind);
    info.uniform = r.uniform;
    info.attrs = r.attrs;
    const VarStats st = var_stats(index, v);
    info.has_minmax = st.valid;
    if (st.valid) {
      info.min = stat_to_double(r.dtype, st.min_bits);
      info.max = stat_to_double(r.dtype, st.max_bits);
    }
    for (const std::uint32_t bi : lookup.blocks(v)) {
      const BlockRecord& b = index.blocks[bi];
      info.blocks.push_back(BlockInfo{b.rank, b.start, b.count, b.length});
      info.ranks.push_back(b.rank);
    }
    std::sort(info.ranks.begin(), info.ranks.end());
    info.ranks.erase(std::unique(info.ranks.begin(), info.ranks.end()), info.ranks.end());
    if (r.kind == RegionKind::global) {
      info.shape = r.global;
    } else if (!info.blocks.empty()) {
      const auto lowest = std::min_element(info.blocks.begin(), info.blocks.end(),
                                           [](const BlockInfo& a, const BlockInfo& b) { return a.rank < b.rank; });
      info.shape = lowest->count;
    }
    return info;
  }

  std::string what() const { return "checkpoint " + std::to_string(index.step) + " (" + dir + ")"; }

  Result<long> find(const std::string& name) const {
    const long v = lookup.var(name);
    if (v < 0) return Status(Code::not_found, "variable '" + name + "' is not in " + what());
    return v;
  }

  /// Streams block `b` whole (so that its checksum is verified), handing each piece to `fn`.
  Status stream(const BlockRecord& b, const BlockReader::PieceFn& fn) {
    if (piece.empty()) piece.resize(kPieceBytes);
    return blocks.stream(b, piece.data(), piece.size(), fn);
  }
};

struct ReaderState {
  std::string path;
  bool single = false;              // path is one checkpoint directory
  std::unique_ptr<Store> store;     // when it is a root
  std::vector<std::int64_t> steps;  // complete, oldest first
  std::vector<std::string> skipped;
  std::optional<Index> single_index;  // when it is one checkpoint
};

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
}  // namespace detail

// ---- CheckpointReader -----------------------------------------------------------------------------

CheckpointReader::CheckpointReader(std::unique_ptr<detail::CheckpointReaderState> s) : m_s(std::move(s)) {}
CheckpointReader::CheckpointReader(CheckpointReader&&) noexcept = default;
CheckpointReader& CheckpointReader::operator=(CheckpointReader&&) noexcept = default;
CheckpointReader::~CheckpointReader() = default;

std::int64_t CheckpointReader::step() const { return m_s->index.step; }
int CheckpointReader::nranks() const { return static_cast<int>(m_s->index.nranks); }
const std::string& CheckpointReader::transport() const { return m_s->index.transport; }
const std::string& CheckpointReader::path() const { return m_s->dir; }
const std::vector<std::pair<std::string, std::string>>& CheckpointReader::attrs() const { return m_s->index.attrs; }
const std::vector<VariableInfo>& CheckpointReader::variables() const { return m_s->vars; }

Result<VariableInfo> CheckpointReader::variable(const std::string& name) const {
  auto v = m_s->find(name);
  if (!v.ok()) return v.status();
  return m_s->vars[static_cast<std::size_t>(v.value())];
}

Status CheckpointReader::read(const std::string& name, const Shape& start, const Shape& count, void* out,
                              std::size_t out_bytes) {
  using detail::shape_text;
  auto vi = m_s->find(name);
  if (!vi.ok()) return vi.status();
  const detail::VarRecord& v = m_s->index.vars[static_cast<std::size_t>(vi.value())];
  const std::string var = "variable '" + name + "' of " + m_s->what();
  if (v.kind != detail::RegionKind::global)
    return Status(Code::invalid_argument,
                  var + " is a " + detail::region_kind_name(v.kind) + " variable: read it by rank (read_rank)");
  if (start.size() != v.global.size() || count.size() != v.global.size())
    return Status(Code::invalid_argument, var + " has " + std::to_string(v.global.size()) +
                                              " dimensions; the box given has start " + shape_text(start) +
                                              " and count " + shape_text(count));
  for (std::size_t d = 0; d < start.size(); ++d)
    if (start[d] > v.global[d] || count[d] > v.global[d] - start[d])
      return Status(Code::invalid_argument, var + ": the box at " + shape_text(start) + " of " + shape_text(count) +
                                                " lies outside the array " + shape_text(v.global));
  const std::size_t esize = dtype_size(v.dtype);
  const auto need = detail::box_bytes(count, esize);
  if (!need || *need > out_bytes)
    return Status(Code::invalid_argument, var + ": the box " + shape_text(count) + " needs " +
                                              (need ? std::to_string(*need) : std::string("more than 2^64")) +
                                              " bytes, the buffer has " + std::to_string(out_bytes));
  if (*need == 0) return Status::OK();
  auto* dst = static_cast<std::uint8_t*>(out);
  std::uint64_t copied = 0;
  Shape lo, hi;
  for (const std::uint32_t bi : m_s->lookup.blocks(vi.value())) {
    const detail::BlockRecord& b = m_s->index.blocks[bi];
    if (!detail::intersect_boxes(start, count, b.start, b.count, lo, hi)) continue;
    detail::RowWalker rows(lo, hi, b.start, b.count, start, count, esize);
    std::uint64_t n = 1;
    for (std::size_t d = 0; d < lo.size(); ++d) n *= hi[d] - lo[d];
    copied += n;
    CKPT_RETURN_IF_ERROR(m_s->stream(b, [&](const std::uint8_t* piece, std::size_t len, std::uint64_t p0) {
      return rows.scatter_piece(p0, len, [&](std::uint64_t to, std::uint64_t from, std::uint64_t bytes) {
        std::memcpy(dst + to, piece + from, bytes);
        return Status::OK();
      });
    }));
  }
  if (copied != detail::elements(count))
    return Status(Code::mismatch, var + ": the stored blocks cover " + std::to_string(copied) + " of the " +
                                      std::to_string(detail::elements(count)) + " elements of the box at " +
                                      shape_text(start) + " of " + shape_text(count));
  return Status::OK();
}

Status CheckpointReader::read(const std::string& name, void* out, std::size_t out_bytes) {
  auto vi = m_s->find(name);
  if (!vi.ok()) return vi.status();
  const detail::VarRecord& v = m_s->index.vars[static_cast<std::size_t>(vi.value())];
  return read(name, Shape(v.global.size(), 0), v.global, out, out_bytes);
}

Status CheckpointReader::read_rank(const std::string& name, std::uint32_t rank, void* out, std::size_t out_bytes) {
  auto vi = m_s->find(name);
  if (!vi.ok()) return vi.status();
  const detail::VarRecord& v = m_s->index.vars[static_cast<std::size_t>(vi.value())];
  const std::string var = "variable '" + name + "' of " + m_s->what();
  if (v.kind == detail::RegionKind::global)
    return Status(Code::invalid_argument, var + " is a global array: read a box of it (read)");
  for (const std::uint32_t bi : m_s->lookup.blocks(vi.value())) {
    const detail::BlockRecord& b = m_s->index.blocks[bi];
    if (b.rank != rank) continue;
    if (b.length > out_bytes)
      return Status(Code::invalid_argument, var + ", rank " + std::to_string(rank) + ": the block holds " +
                                                std::to_string(b.length) + " bytes, the buffer " +
                                                std::to_string(out_bytes));
    auto* dst = static_cast<std::uint8_t*>(out);
    return m_s->stream(b, [&](const std::uint8_t* piece, std::size_t len, std::uint64_t p0) {
      std::memcpy(dst + p0, piece, len);
      return Status::OK();
    });
  }
  return Status(Code::not_found, var + ": rank " + std::to_string(rank) + " wrote no block of it");
}

Status CheckpointReader::verify() {
  constexpr std::size_t kMaxLines = 20;
  std::size_t bad = 0;
  std::string lines;
  for (const detail::BlockRecord& b : m_s->index.blocks) {
    const DType t = m_s->index.vars[b.var].dtype;
    const bool stats = b.has_stats && detail::dtype_has_stats(t);
    detail::MinMax mm(t);
    Status s = m_s->stream(b, [&](const std::uint8_t* p, std::size_t n, std::uint64_t) {
      if (stats) mm.update(p, n);
      return Status::OK();
    });
    if (s.ok() && stats && (!mm.valid() || mm.min_bits() != b.min_bits || mm.max_bits() != b.max_bits))
      s = Status(Code::corrupt, m_s->blocks.where(b) + ": data matches its checksum but not the min/max in the index");
    if (s.ok()) continue;
    if (bad++ < kMaxLines) lines += "\n  " + s.message();
  }
  if (bad == 0) return Status::OK();
  return Status(Code::corrupt, m_s->what() + ": " + std::to_string(bad) + " bad block(s) of " +
                                   std::to_string(m_s->index.blocks.size()) + lines +
                                   (bad > kMaxLines ? "\n  ..." : ""));
}

CheckpointReader detail::make_checkpoint_reader(std::string dir, detail::Index index) {
  return CheckpointReader(std::make_unique<detail::CheckpointReaderState>(std::move(dir), std::move(index)));
}

// ---- Reader ---------------------------------------------------------------------------------------

Reader::Reader(std::unique_ptr<detail::ReaderState> s) : m_s(std::move(s)) {}
Reader::Reader(Reader&&) noexcept = default;
Reader& Reader::operator=(Reader&&) noexcept = default;
Reader::~Reader() = default;

Result<Reader> Reader::open(const std::string& path) {
  CKPT_RETURN_IF_ERROR(detail::check_directory(path));
  auto s = std::make_unique<detail::ReaderState>();
  s->path = path;
  if (detail::is_checkpoint_dir(path)) {
    auto idx = detail::load_checkpoint_dir(path);
    if (!idx.ok()) return idx.status();
    s->single = true;
    s->steps.push_back(idx->step);
    s->single_index = std::move(idx).value();
    return Reader(std::move(s));
  }
  s->store = detail::make_directory_store(path);
  auto entries = s->store->list();
  if (!entries.ok()) return entries.status();
  for (auto& e : entries.value()) {  // newest first
    if (e.complete)
      s->steps.push_back(e.step);
    else
      s->skipped.push_back(e.name + ": " + e.reason);
  }
  std::reverse(s->steps.begin(), s->steps.end());
  return Reader(std::move(s));
}

const std::string& Reader::path() const { return m_s->path; }
std::vector<std::int64_t> Reader::steps() const { return m_s->steps; }
const std::vector<std::string>& Reader::skipped() const { return m_s->skipped; }

Result<CheckpointReader> Reader::open_step(std::int64_t step) const {
  if (std::find(m_s->steps.begin(), m_s->steps.end(), step) == m_s->steps.end())
    return Status(Code::not_found, "step " + std::to_string(step) + " is not a complete checkpoint in " + m_s->path);
  if (m_s->single)
    return CheckpointReader(std::make_unique<detail::CheckpointReaderState>(m_s->path, *m_s->single_index));
  // Loaded again: the checkpoint may have been replaced or retired since open().
  auto idx = m_s->store->load_index(step);
  if (!idx.ok()) return idx.status();
  return CheckpointReader(
      std::make_unique<detail::CheckpointReaderState>(m_s->store->checkpoint_dir(step), std::move(idx).value()));
}

Result<CheckpointReader> Reader::latest() const {
  if (m_s->steps.empty()) return Status(Code::not_found, "no complete checkpoint in " + m_s->path);
  return open_step(m_s->steps.back());
}

}  // namespace ckpt
