#include "base/partial_index.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>

#include "base/box.hpp"
#include "base/mpi.hpp"
#include "base/posix_io.hpp"
#include "base/store.hpp"

namespace ckpt::detail {

namespace {

std::string num(std::uint64_t v) { return std::to_string(v); }

/// `n` bytes at `off` of the regular file `path` (open_regular()), which must hold exactly `size` bytes
/// (every object of the directory layout is a file of its own): its size is checked before anything is
/// allocated, as an untrusted index may claim any length.
Result<std::vector<std::uint8_t>> read_at(const std::string& path, std::uint64_t off, std::uint64_t n,
                                          std::uint64_t size) {
  std::uint64_t have = 0;
  auto fd = open_regular(path, &have);
  if (!fd.ok()) return fd.status();
  std::uint64_t end = 0;
  if (have != size || __builtin_add_overflow(off, n, &end) || end > have) {
    ::close(fd.value());
    return Status(Code::corrupt, path + " holds " + num(have) + " bytes, the index names " + num(size) +
                                     " (a read of " + num(n) + " at " + num(off) + ")");
  }
  std::vector<std::uint8_t> out(static_cast<std::size_t>(n));
  Status s = pread_all(fd.value(), out.data(), out.size(), off, path);
  ::close(fd.value());
  if (!s.ok()) return s;
  return out;
}

/// Elements of the box (count), as a 128-bit sum can hold several.
unsigned __int128 volume(const Shape& count) {
  unsigned __int128 v = 1;
  for (const std::uint64_t c : count) v *= c;
  return v;
}

}  // namespace

PartialIndex::PartialIndex(Index whole, std::uint64_t decoded_bytes)
    : m_idx(std::move(whole)), m_look(m_idx), m_bytes(decoded_bytes) {}

Status PartialIndex::corrupt(const std::string& what) const {
  return Status(Code::corrupt, "corrupt checkpoint " + m_dir + ": " + what);
}

Result<PartialIndex> PartialIndex::open_v2(std::string dir, const std::vector<std::uint8_t>& root_bytes,
                                           std::int64_t step) {
  PartialIndex p;
  p.m_whole = false;
  p.m_dir = std::move(dir);
  auto root = decode_root_index(root_bytes.data(), root_bytes.size());
  if (!root.ok()) return p.corrupt(root.status().message());
  if (root->step != step) return p.corrupt("its index describes step " + std::to_string(root->step));
  p.m_root = std::move(root).value();
  p.m_bytes = root_bytes.size();
  // The directory layout: every object from offset 0 of its own file (a series segment is read whole).
  if (Status st = check_directory_layout(p.m_root); !st.ok()) return p.corrupt(st.message());
  Index& idx = p.m_idx;
  idx.step = p.m_root.step;
  idx.nranks = p.m_root.nranks;
  idx.ckpt_id = p.m_root.ckpt_id;
  idx.created_unix = p.m_root.created_unix;
  idx.transport = p.m_root.transport;
  idx.attrs = p.m_root.attrs;
  idx.vars.reserve(p.m_root.vars.size());
  for (const Var2& v : p.m_root.vars) idx.vars.push_back(v.var);
  p.m_look = IndexLookup(idx);
  return p;
}

Result<std::vector<std::uint8_t>> PartialIndex::read_catalog(std::uint64_t at, std::uint64_t n) {
  // read_at() refuses a catalog file of another length than the root's and a read past its end.
  auto b = read_at(m_dir + "/catalog", at, n, m_root.catalog_length);
  if (!b.ok()) return corrupt("its version-2 index's catalog: " + b.status().message());
  m_bytes += n;
  return b;
}

Status PartialIndex::load_rank(std::uint32_t rank) {
  if (m_whole || m_writer_of_rank.count(rank) != 0) return Status::OK();  // loaded before any failure
  if (!m_failed.ok()) return m_failed;
  Status st = load_rank_once(rank);
  if (st.code() != Code::invalid_argument) m_failed = st;  // not a rank of the checkpoint: nothing was read
  return st;
}

Status PartialIndex::load_writer(std::uint32_t w) {
  if (m_failed.ok() && !m_whole && w >= m_root.writers)
    return Status(Code::invalid_argument, "writer " + num(w) + " of " + num(m_root.writers));
  return load_range(w, 1);
}

Status PartialIndex::load_range(std::uint32_t first, std::uint32_t count) {
  if (!m_failed.ok()) return m_failed;
  if (m_whole) return Status::OK();
  if (first > m_root.writers || count > m_root.writers - first)
    return Status(Code::invalid_argument, "writers [" + num(first) + ", " + num(std::uint64_t{first} + count) +
                                              ") of " + num(m_root.writers));
  m_failed = load_writers({{first, count}});
  return m_failed;
}

Status PartialIndex::load_all() { return load_range(0, writers()); }

Status PartialIndex::load_rank_once(std::uint32_t rank) {
  auto at = locate_rank(m_root, rank);
  if (!at.ok()) return at.status();
  if (at->needs_map) {
    auto entry = read_catalog(at->map_offset - m_root.catalog_offset, 4);
    if (!entry.ok()) return entry.status();
    at = locate_rank_by_map(m_root, rank, entry->data(), entry->size());
    if (!at.ok()) return corrupt(at.status().message());
  }
  CKPT_RETURN_IF_ERROR(load_writers({{at->writer, 1}}));
  if (m_writer_of_rank.count(rank) == 0)
    return corrupt("the rank map names writer " + num(at->writer) + " for rank " + num(rank) +
                   ", whose sub-index does not hold it");
  return Status::OK();
}

Status PartialIndex::load_writers(const std::vector<std::pair<std::uint32_t, std::uint32_t>>& ranges) {
  bool added = false;
  for (auto [first, count] : ranges) {
    // Skip the loaded ones at both ends; the entries of those in between are read with the rest (one read).
    while (count > 0 && m_loaded.count(first) != 0) ++first, --count;
    while (count > 0 && m_loaded.count(first + count - 1) != 0) --count;
    if (count == 0) continue;
    auto entries = read_catalog(catalog_entry_position(first), static_cast<std::uint64_t>(count) * kCatalogEntryBytes);
    Status st = entries.status();
    for (std::uint32_t k = 0; st.ok() && k < count; ++k) {
      const std::uint32_t w = first + k;
      if (m_loaded.count(w) != 0) continue;
      auto e = decode_catalog_entry(entries->data() + static_cast<std::size_t>(k) * kCatalogEntryBytes,
                                    kCatalogEntryBytes, m_root, w);
      st = e.ok() ? add_subindex(w, e.value()) : corrupt(e.status().message());
      added = added || st.ok();
    }
    if (!st.ok()) {
      // The sub-indices added before the failure stay, found by the lookup (a reader's later calls that
      // need only them still work).
      if (added) m_look = IndexLookup(m_idx);
      return st;
    }
  }
  if (!added) return Status::OK();
  m_look = IndexLookup(m_idx);
  for (std::uint32_t v = 0; v < m_idx.vars.size(); ++v)
    if (m_dirs.count(v) != 0 || m_idx.vars[v].kind == RegionKind::joined) CKPT_RETURN_IF_ERROR(check_var(v));
  return Status::OK();
}

Status PartialIndex::add_subindex(std::uint32_t w, const CatalogEntry& e) {
  const std::string name = "index." + num(w);
  if (e.offset != 0)
    return corrupt("catalog entry of writer " + num(w) + " puts its sub-index at offset " + num(e.offset) + " of " +
                   name + " (0 in a checkpoint directory)");
  auto bytes = read_at(m_dir + "/" + name, 0, e.length, e.length);
  if (!bytes.ok()) return corrupt("its version-2 index's " + name + ": " + bytes.status().message());
  m_bytes += bytes->size();
  auto s = decode_writer_subindex(bytes->data(), bytes->size(), m_root, e, w);
  if (!s.ok()) return corrupt(name + ": " + s.status().message());
  SubIndex sub = std::move(s).value();
  for (const std::uint32_t r : sub.ranks) {
    auto [it, fresh] = m_writer_of_rank.emplace(r, w);
    if (!fresh) return corrupt("rank " + num(r) + " is in sub-indices " + num(it->second) + " and " + num(w));
  }
  auto files = merge_files(m_idx.files, m_file_ix, sub.files, w);
  if (!files.ok()) return corrupt(files.status().message());
  const std::vector<std::uint32_t>& file_map = files.value();
  const std::vector<std::uint32_t> ref_map = merge_refs(m_idx.refs, m_ref_ix, sub.refs);
  for (BlockRecord& b : sub.blocks) {
    renumber_block(b, file_map, ref_map);
    m_idx.blocks.push_back(std::move(b));
  }
  m_loaded.insert(w);
  ++m_subindices;
  return Status::OK();
}

Status PartialIndex::check_var(std::uint32_t var) const {
  const std::string& name = m_idx.vars[var].name;
  const auto& blocks = m_look.blocks(var);
  auto dir = m_dirs.find(var);
  if (dir != m_dirs.end())
    for (const std::uint32_t bi : blocks) {
      const BlockRecord& b = m_idx.blocks[bi];
      const std::uint32_t w = m_writer_of_rank.at(b.rank);
      const auto& entries = dir->second;
      auto it = std::upper_bound(entries.begin(), entries.end(), w,
                                 [](std::uint32_t x, const DirEntry& e) { return x < e.first; });
      bool inside =
          it != entries.begin() && w < std::prev(it)->first + static_cast<std::uint64_t>(std::prev(it)->writers);
      for (std::size_t d = 0; inside && d < b.start.size(); ++d)
        inside = b.start[d] >= std::prev(it)->start[d] &&
                 b.start[d] + b.count[d] <= std::prev(it)->start[d] + std::prev(it)->count[d];
      if (!inside)
        return corrupt("directory of '" + name + "': the block of rank " + num(b.rank) + " (writer " + num(w) +
                       ") lies outside the entries that name its writer");
    }
  if (m_idx.vars[var].kind != RegionKind::joined) return Status::OK();
  // The rows of the ranks follow each other in rank order (check_joined_rows() of what is here).
  std::vector<std::uint32_t> by_rank(blocks.begin(), blocks.end());
  std::sort(by_rank.begin(), by_rank.end(),
            [&](std::uint32_t a, std::uint32_t b) { return m_idx.blocks[a].rank < m_idx.blocks[b].rank; });
  for (std::size_t k = 1; k < by_rank.size(); ++k) {
    const BlockRecord& a = m_idx.blocks[by_rank[k - 1]];
    const BlockRecord& b = m_idx.blocks[by_rank[k]];
    if (b.start[0] < a.start[0] + a.count[0])
      return corrupt("joined array '" + name + "': the rows of rank " + num(b.rank) + " start at row " +
                     num(b.start[0]) + ", before the end of rank " + num(a.rank) + "'s (row " +
                     num(a.start[0] + a.count[0]) + ")");
  }
  return Status::OK();
}

Status PartialIndex::cover(std::uint32_t var, const std::vector<Box>& boxes) {
  if (m_whole || var >= m_idx.vars.size() || m_idx.vars[var].kind != RegionKind::global) return Status::OK();
  if (!m_failed.ok()) return cover_once(var, &boxes, {}, false);
  m_failed = cover_once(var, &boxes, {}, true);
  return m_failed;
}

Status PartialIndex::cover_rows(std::uint32_t var, const std::vector<std::pair<std::uint64_t, std::uint64_t>>& rows) {
  if (m_whole || var >= m_idx.vars.size() || m_idx.vars[var].kind != RegionKind::joined) return Status::OK();
  // [lo, hi), sorted and merged (a restart by rows or keys may ask for one range per row).
  std::vector<std::pair<std::uint64_t, std::uint64_t>> merged;
  merged.reserve(rows.size());
  for (const auto& [first, count] : rows)
    if (count > 0) merged.emplace_back(first, first + count);
  std::sort(merged.begin(), merged.end());
  std::size_t n = 0;
  for (const auto& iv : merged) {
    if (n > 0 && iv.first <= merged[n - 1].second)
      merged[n - 1].second = std::max(merged[n - 1].second, iv.second);
    else
      merged[n++] = iv;
  }
  merged.resize(n);
  if (!m_failed.ok()) return cover_once(var, nullptr, merged, false);
  m_failed = cover_once(var, nullptr, merged, true);
  return m_failed;
}

Status PartialIndex::cover_once(std::uint32_t var, const std::vector<Box>* boxes,
                                const std::vector<std::pair<std::uint64_t, std::uint64_t>>& rows, bool may_load) {
  const auto first_ending_after = [&](std::uint64_t row) {  // the first range [lo, hi) with hi > row
    return std::upper_bound(
        rows.begin(), rows.end(), row,
        [](std::uint64_t x, const std::pair<std::uint64_t, std::uint64_t>& iv) { return x < iv.second; });
  };
  Shape lo, hi;
  const auto meets = [&](const Shape& start, const Shape& count) {
    if (boxes != nullptr) {
      for (const Box& box : *boxes)
        if (intersect_boxes(box.first, box.second, start, count, lo, hi)) return true;
      return false;
    }
    auto it = first_ending_after(start[0]);
    return count[0] > 0 && it != rows.end() && it->first < start[0] + count[0];
  };
  // Covered already? The usual N->N restart: this rank's block. A sum of overlaps counts only when the
  // blocks that meet the boxes do not overlap one another (a joined array's: check_var() saw to it).
  unsigned __int128 want = 0, got = 0;
  if (boxes != nullptr) {
    for (const Box& box : *boxes) want += volume(box.second);
  } else {
    for (const auto& iv : rows) want += iv.second - iv.first;
  }
  std::vector<const BlockRecord*> meeting;
  for (const std::uint32_t bi : m_look.blocks(var)) {
    const BlockRecord& b = m_idx.blocks[bi];
    if (boxes == nullptr) {
      for (auto it = first_ending_after(b.start[0]); it != rows.end() && it->first < b.start[0] + b.count[0]; ++it)
        got += std::min(it->second, b.start[0] + b.count[0]) - std::max(it->first, b.start[0]);
      continue;
    }
    bool met = false;
    for (const Box& box : *boxes)
      if (intersect_boxes(box.first, box.second, b.start, b.count, lo, hi)) {
        unsigned __int128 v = 1;
        for (std::size_t d = 0; d < lo.size(); ++d) v *= hi[d] - lo[d];
        got += v;
        met = true;
      }
    if (met) meeting.push_back(&b);
  }
  for (std::size_t i = 0; i < meeting.size(); ++i)
    for (std::size_t j = i + 1; j < meeting.size(); ++j)
      if (intersect_boxes(meeting[i]->start, meeting[i]->count, meeting[j]->start, meeting[j]->count, lo, hi))
        return corrupt("the blocks of '" + m_idx.vars[var].name + "' of ranks " + num(meeting[i]->rank) + " and " +
                       num(meeting[j]->rank) + " overlap");
  if (got >= want) return Status::OK();
  if (!may_load) return m_failed;
  auto dir = m_dirs.find(var);
  if (dir == m_dirs.end()) {
    const Var2& v = m_root.vars[var];
    auto bytes = read_catalog(v.dir.offset, v.dir.length);
    if (!bytes.ok()) return bytes.status();
    auto entries = decode_directory(bytes->data(), bytes->size(), v, m_root.writers);
    if (!entries.ok()) return corrupt(entries.status().message());
    dir = m_dirs.emplace(var, std::move(entries).value()).first;
    CKPT_RETURN_IF_ERROR(check_var(var));
  }
  // The writers of the entries that meet the boxes, neighbouring ranges read together.
  std::vector<std::pair<std::uint32_t, std::uint32_t>> ranges;  // (first, count)
  for (const DirEntry& e : dir->second) {
    if (!meets(e.start, e.count)) continue;
    if (!ranges.empty() && ranges.back().first + ranges.back().second == e.first)
      ranges.back().second += e.writers;
    else
      ranges.emplace_back(e.first, e.writers);
  }
  return load_writers(ranges);
}

Status check_subindices_collective(MPI_Comm comm, const std::string& dir, const std::vector<std::uint8_t>& root_bytes,
                                   std::int64_t step) {
  int rank = 0, size = 1;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  auto partial = PartialIndex::open_v2(dir, root_bytes, step);
  Status mine = partial.status();
  if (mine.ok())
    for (std::uint64_t w = static_cast<std::uint64_t>(rank); mine.ok() && w < partial->writers();
         w += static_cast<std::uint64_t>(size))
      mine = partial.value().load_writer(static_cast<std::uint32_t>(w));
  return agree(comm, mine);
}

}  // namespace ckpt::detail
