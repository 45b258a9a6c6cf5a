// The checkpoint store: names, listing, index loading, verified block reads, atomic commit, retention.
#include "base/store.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <set>

#include "base/hash.hpp"
#include "base/index_v2.hpp"

namespace ckpt::detail {

// ---- names ---------------------------------------------------------------------------------------

const char* entry_suffix(EntryKind k) noexcept {
  switch (k) {
    case EntryKind::committed: return "";
    case EntryKind::tmp: return "tmp";
    case EntryKind::old: return "old";
    case EntryKind::doomed: return "del";
    case EntryKind::abandoned: return "abandoned";
  }
  return "?";
}

std::optional<StepName> parse_step_name(const std::string& name) {
  constexpr std::size_t kPrefix = 5;  // "ckpt."
  if (name.size() <= kPrefix || name.compare(0, kPrefix, "ckpt.") != 0) return std::nullopt;
  const std::size_t dot = name.find('.', kPrefix);
  const std::size_t digits_end = dot == std::string::npos ? name.size() : dot;
  const std::size_t ndigits = digits_end - kPrefix;
  if (ndigits == 0 || ndigits > 19) return std::nullopt;
  if (ndigits > 1 && name[kPrefix] == '0') return std::nullopt;  // one name per step
  std::uint64_t value = 0;  // 19 digits < 10^19 < 2^64: no overflow before the range check
  for (std::size_t i = kPrefix; i < digits_end; ++i) {
    const char c = name[i];
    if (c < '0' || c > '9') return std::nullopt;
    value = value * 10 + static_cast<std::uint64_t>(c - '0');
  }
  if (value > static_cast<std::uint64_t>(INT64_MAX)) return std::nullopt;
  StepName out;
  out.step = static_cast<std::int64_t>(value);
  if (dot != std::string::npos) {
    const std::string suffix = name.substr(dot + 1);
    if (suffix == "tmp")
      out.kind = EntryKind::tmp;
    else if (suffix == "old")
      out.kind = EntryKind::old;
    else if (suffix == "del")
      out.kind = EntryKind::doomed;
    else if (suffix == "abandoned")
      out.kind = EntryKind::abandoned;
    else
      return std::nullopt;
  }
  return out;
}

std::string step_name(std::int64_t step, EntryKind kind) {
  std::string n = "ckpt." + std::to_string(step);
  if (kind != EntryKind::committed) n += std::string(".") + entry_suffix(kind);
  return n;
}

// ---- one checkpoint directory --------------------------------------------------------------------

namespace {

bool is_directory(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

bool exists_nofollow(const std::string& path) {
  struct stat st {};
  return ::lstat(path.c_str(), &st) == 0;
}

}  // namespace

bool is_store_name(const std::string& name) {
  return name == kLatestName || name == kLatestTmpName || name == kLockName || name == kRootIdName ||
         name == kOwnerName || name == kTimelineName || name == kNodeRunName || name == "index" ||
         parse_step_name(name).has_value() || parse_segment_name(name).has_value();
}

bool is_checkpoint_dir(const std::string& path) {
  const std::string name = split_last(path).second;
  struct stat st {};
  return ::stat((path + "/index").c_str(), &st) == 0 || parse_step_name(name).has_value() || name == kLatestName;
}

Status check_directory(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return errno_status(path);
  if (!S_ISDIR(st.st_mode)) return Status(Code::invalid_argument, path + " is not a directory");
  return Status::OK();
}

Status check_listable(const std::string& path) {
  CKPT_RETURN_IF_ERROR(check_directory(path));
  DIR* d = ::opendir(path.c_str());
  if (d == nullptr) return errno_status(path);
  ::closedir(d);
  return Status::OK();
}

Result<Index> load_checkpoint_dir(const std::string& dir) {
  CKPT_RETURN_IF_ERROR(check_directory(dir));
  const auto name = parse_step_name(split_last(dir).second);
  if (name && name->kind == EntryKind::tmp)
    return Status(Code::failed_precondition, "incomplete checkpoint " + dir + ": it was never committed (.tmp)");
  return load_checkpoint_index(dir, name ? std::optional<std::int64_t>(name->step) : std::nullopt);
}

VarStats var_stats(const Index& idx, std::uint32_t var, const std::vector<std::uint32_t>& blocks) {
  VarStats st;
  const DType t = idx.vars[var].dtype;
  for (const std::uint32_t i : blocks) {
    const BlockRecord& b = idx.blocks[i];
    if (b.var != var || !b.has_stats) continue;
    if (!st.valid) {
      st.valid = true;
      st.min_bits = b.min_bits;
      st.max_bits = b.max_bits;
      continue;
    }
    if (stat_less(t, b.min_bits, st.min_bits)) st.min_bits = b.min_bits;
    if (stat_less(t, st.max_bits, b.max_bits)) st.max_bits = b.max_bits;
  }
  return st;
}

namespace {

Status corrupt_checkpoint(const std::string& dir, const std::string& what) {
  return Status(Code::corrupt, "corrupt checkpoint " + dir + ": " + what);
}

/// A version-2 root of checkpoint directory `dir` decoded and checked (the step it describes when `step`
/// is given, the directory layout), and the bytes of its catalog.
struct RootAndCatalog {
  RootIndex root;
  std::vector<std::uint8_t> catalog;
};
Result<RootAndCatalog> read_root_and_catalog(const std::string& dir, const std::vector<std::uint8_t>& root_bytes,
                                             std::optional<std::int64_t> step) {
  auto root = decode_root_index(root_bytes.data(), root_bytes.size());
  if (!root.ok()) return corrupt_checkpoint(dir, root.status().message());
  if (step && root->step != *step)
    return corrupt_checkpoint(dir, "its index describes step " + std::to_string(root->step));
  if (Status st = check_directory_layout(root.value()); !st.ok()) return corrupt_checkpoint(dir, st.message());
  auto catalog = read_file(dir + "/catalog", kMaxIndexBytes);
  if (!catalog.ok()) return corrupt_checkpoint(dir, "its version-2 index's catalog: " + catalog.status().message());
  return RootAndCatalog{std::move(root).value(), std::move(catalog).value()};
}

/// The one-level index of the version-2 checkpoint `dir` whose root is `root_bytes`, encoded as version 1.
Result<std::vector<std::uint8_t>> assemble_v2(const std::string& dir, const std::vector<std::uint8_t>& root_bytes) {
  auto rc = read_root_and_catalog(dir, root_bytes, std::nullopt);
  if (!rc.ok()) return rc.status();
  std::vector<std::vector<std::uint8_t>> subs;  // no reserve(W): W is untrusted, the first missing file ends it
  for (std::uint32_t w = 0; w < rc->root.writers; ++w) {
    const std::string name = "index." + std::to_string(w);
    auto b = read_file(dir + "/" + name, kMaxIndexBytes);
    if (!b.ok()) return corrupt_checkpoint(dir, "its version-2 index's " + name + ": " + b.status().message());
    subs.push_back(std::move(b).value());
  }
  auto idx = assemble_index(rc->root, rc->catalog.data(), rc->catalog.size(), subs);
  if (!idx.ok()) return corrupt_checkpoint(dir, idx.status().message());
  return encode_index(idx.value());
}

}  // namespace

Result<std::vector<std::uint8_t>> read_index_file(const std::string& dir) {
  auto bytes = read_root_file(dir);
  if (bytes.ok() && index_header_version(bytes->data(), bytes->size()) == kIndexV2Version)
    return assemble_v2(dir, bytes.value());
  return bytes;
}

Result<std::vector<std::uint8_t>> read_root_file(const std::string& dir) {
  auto bytes = read_file(dir + "/index", kMaxIndexBytes);
  if (bytes.ok()) {
    // A file holds version 1 or 2, never the transfer encoding (kTransferIndexVersion) that ranks send.
    if (Status st = check_stored_index_version(bytes->data(), bytes->size()); !st.ok())
      return corrupt_checkpoint(dir, st.message());
    return bytes;
  }
  if (bytes.status().code() == Code::not_found) {
    if (!is_directory(dir)) return Status(Code::not_found, "no checkpoint directory " + dir);
    return Status(Code::not_found, "incomplete checkpoint " + dir + ": no index (the commit did not finish)");
  }
  return Status(bytes.status().code(), "cannot read the index of " + dir + ": " + bytes.status().message());
}

Result<std::vector<std::uint8_t>> stage_index_v2(const std::string& tmp, const Index& idx, std::uint64_t token,
                                                 bool sync) {
  auto split = split_index(idx, WriterRule::per_rank, 0, token);
  if (!split.ok())
    return Status(Code::internal,
                  "version-2 index of step " + std::to_string(idx.step) + ": " + split.status().message());
  CKPT_RETURN_IF_ERROR(write_file(tmp + "/catalog", split->catalog.data(), split->catalog.size(), sync));
  for (std::size_t w = 0; w < split->subindices.size(); ++w) {
    const auto& b = split->subindices[w];
    CKPT_RETURN_IF_ERROR(write_file(tmp + "/index." + std::to_string(w), b.data(), b.size(), sync));
  }
  return encode_root_index(split->root);
}

Status check_committed(const std::string& dir, const std::vector<std::uint8_t>& root_bytes,
                       std::optional<std::int64_t> step) {
  if (index_header_version(root_bytes.data(), root_bytes.size()) != kIndexV2Version)
    return decode_checkpoint_index(root_bytes, dir, step).status();
  auto rc = read_root_and_catalog(dir, root_bytes, step);
  if (!rc.ok()) return rc.status();
  auto c = decode_catalog(rc->catalog.data(), rc->catalog.size(), rc->root.rule);
  if (!c.ok()) return corrupt_checkpoint(dir, c.status().message());
  const Status st = check_catalog(c.value(), rc->root, rc->catalog.data(), rc->catalog.size());
  return st.ok() ? st : corrupt_checkpoint(dir, st.message());
}

Result<Index> decode_checkpoint_index(const std::vector<std::uint8_t>& bytes, const std::string& dir,
                                      std::optional<std::int64_t> step) {
  auto idx = decode_index(bytes.data(), bytes.size());
  if (!idx.ok()) return Status(Code::corrupt, "corrupt checkpoint " + dir + ": " + idx.status().message());
  if (step && idx->step != *step)
    return Status(Code::corrupt,
                  "corrupt checkpoint " + dir + ": its index describes step " + std::to_string(idx->step));
  return idx;
}

Result<Index> load_checkpoint_index(const std::string& dir, std::optional<std::int64_t> step) {
  auto bytes = read_index_file(dir);
  if (!bytes.ok()) return bytes.status();
  return decode_checkpoint_index(bytes.value(), dir, step);
}

Status BlockReader::verify(const BlockRecord& b, std::uint8_t* buf, std::size_t buf_bytes, const PieceFn& fn) {
  const DType t = m_idx.vars[b.var].dtype;
  const bool stats = b.has_stats && dtype_has_stats(t);
  MinMax mm(t);
  CKPT_RETURN_IF_ERROR(stream(b, buf, buf_bytes, [&](const std::uint8_t* p, std::size_t n, std::uint64_t off) {
    if (stats) mm.update(p, n);
    return fn ? fn(p, n, off) : Status::OK();
  }));
  if (stats && (!mm.valid() || mm.min_bits() != b.min_bits || mm.max_bits() != b.max_bits))
    return Status(Code::corrupt, where(b) + ": data matches its checksum but not the min/max in the index");
  return Status::OK();
}

BlockReader::BlockReader(std::string dir, const Index& idx)
    : m_dir(std::move(dir)), m_parent(root_of_checkpoint(m_dir)), m_idx(idx), m_files(m_dir) {}

std::string BlockReader::where(const BlockRecord& b) const {
  const std::string head = "variable '" + m_idx.vars[b.var].name + "', block of rank " + std::to_string(b.rank) + " (" +
                           m_dir + "/" + m_idx.files[b.file].name;
  if (b.pieced())  // an index made in memory may hold any log2: claim() refuses it, a message still names it
    return head + ", " + std::to_string(b.length) + " bytes in " + std::to_string(b.pieces.size()) + " pieces of " +
           (b.piece_log2 < 64 ? human_bytes(std::uint64_t{1} << b.piece_log2) : "2^" + std::to_string(b.piece_log2)) +
           ")";
  return head + " at offset " + std::to_string(b.offset) + ", " + std::to_string(b.length) + " bytes)";
}

std::string BlockReader::root_of_checkpoint(const std::string& dir) {
  // The directory the checkpoint's name is in, whatever path named it: `.`, `ckpt.7/.` or a link to it.
  char* real = ::realpath(dir.c_str(), nullptr);
  if (real == nullptr) return split_last(dir).first;  // reading it fails on its own then
  std::string path(real);
  std::free(real);
  return split_last(path).first;
}

std::string BlockReader::ref_dir(const RefFile& f) const {
  return m_parent + "/" + (f.kind == 0 ? step_name(f.step) : segment_name(f.step));
}

std::string BlockReader::piece_where(const BlockRecord& b, std::size_t i) const {
  const PieceRecord& pc = b.pieces[i];
  std::string file;
  if (pc.ref == 0)
    file = m_dir + "/" + m_idx.files[b.file].name;
  else if (pc.ref <= m_idx.refs.size())
    file = ref_dir(m_idx.refs[pc.ref - 1]) + "/" + m_idx.refs[pc.ref - 1].name;
  else
    file = "REF " + std::to_string(pc.ref) + " of " + std::to_string(m_idx.refs.size());
  return "variable '" + m_idx.vars[b.var].name + "', block of rank " + std::to_string(b.rank) + ", piece " +
         std::to_string(i) + " of " + std::to_string(b.pieces.size()) + " (" + file + " at offset " +
         std::to_string(pc.offset) + ", " + std::to_string(piece_bytes(b, i)) + " bytes)";
}

Status BlockReader::stream(const BlockRecord& b, std::uint8_t* buf, std::size_t buf_bytes, const PieceFn& fn) {
  return stream(
      b, buf_bytes, [buf]() -> Result<std::uint8_t*> { return buf; }, fn);
}

Status BlockReader::stream(const BlockRecord& b, std::size_t buf_bytes, const BufferFn& next, const PieceFn& fn) {
  if (buf_bytes == 0) return Status(Code::internal, "BlockReader::stream without a buffer");
  CKPT_RETURN_IF_ERROR(claim(b));
  Hasher h;
  // `len` bytes at `off` of `name` (read by `files`) in parts of at most buf_bytes, handed to fn as payload
  // bytes from `p0` on; `part` gets them too when given (a piece's hash).
  auto read = [&](FileReader& files, const std::string& name, std::uint64_t off, std::uint64_t len, std::uint64_t p0,
                  Hasher128* part, const std::function<std::string()>& what) -> Status {
    for (std::uint64_t done = 0; done < len;) {
      const std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(len - done, buf_bytes));
      auto buf_or = next();
      if (!buf_or.ok()) return buf_or.status();
      std::uint8_t* buf = buf_or.value();
      Status s = files.read(name, off + done, buf, n);
      if (!s.ok()) return Status(s.code(), what() + ": " + s.message());
      h.update(buf, n);
      if (part != nullptr) part->update(buf, n);
      CKPT_RETURN_IF_ERROR(fn(buf, n, p0 + done));
      done += n;
    }
    return Status::OK();
  };
  if (!b.pieced()) {
    // The kernel is told of the next kAhead bytes as the read proceeds (posix_fadvise WILLNEED, in steps of
    // a quarter of it): its reads then overlap ours and each other, where its own read-ahead keeps one
    // small window in flight.
    constexpr std::uint64_t kAhead = 64 << 20;
    const std::string& name = m_idx.files[b.file].name;
    std::uint64_t hinted = 0;
    for (std::uint64_t done = 0; done < b.length;) {
      if (hinted < b.length && hinted < done + kAhead / 4 * 3) {
        const std::uint64_t n = std::min(b.length - hinted, done + kAhead - hinted);
        m_files.prefetch(name, b.offset + hinted, n);
        hinted += n;
      }
      const std::uint64_t part = std::min<std::uint64_t>(b.length - done, kAhead / 4);
      CKPT_RETURN_IF_ERROR(read(m_files, name, b.offset + done, part, done, nullptr, [&] { return where(b); }));
      done += part;
    }
  } else {
    // Runs of pieces that follow one another in one file are read as one range (a chain's pieces of one
    // step are neighbours), each piece's hash taken where it ends; the kernel is told of the runs ahead
    // (FileReader::prefetch: up to kAhead bytes), so that reads from the chain's files overlap.
    constexpr std::uint64_t kAhead = 64 << 20;
    struct Run {
      std::size_t first, last;  // pieces [first, last)
      std::uint64_t offset, bytes;
    };
    std::vector<Run> runs;
    for (std::size_t i = 0; i < b.pieces.size(); ++i) {
      const PieceRecord& pc = b.pieces[i];
      if (!runs.empty()) {
        Run& r = runs.back();
        if (b.pieces[r.first].ref == pc.ref && r.offset + r.bytes == pc.offset) {
          r.last = i + 1;
          r.bytes += piece_bytes(b, i);
          continue;
        }
      }
      runs.push_back(Run{i, i + 1, pc.offset, piece_bytes(b, i)});
    }
    auto files_of = [&](const Run& r) -> FileReader& {
      const std::uint32_t ref = b.pieces[r.first].ref;
      return ref == 0 ? m_files : *m_refs[ref - 1].files;  // claim() opened it
    };
    auto name_of = [&](const Run& r) -> const std::string& {
      const std::uint32_t ref = b.pieces[r.first].ref;
      return ref == 0 ? m_idx.files[b.file].name : m_idx.refs[ref - 1].name;
    };
    std::size_t hinted = 0;
    std::uint64_t hinted_bytes = 0, read_bytes = 0;
    Hasher128 part;
    for (const Run& r : runs) {
      for (; hinted < runs.size() && hinted_bytes < read_bytes + kAhead; ++hinted) {
        files_of(runs[hinted]).prefetch(name_of(runs[hinted]), runs[hinted].offset, runs[hinted].bytes);
        hinted_bytes += runs[hinted].bytes;
      }
      std::size_t i = r.first;  // the piece being hashed
      std::uint64_t left = piece_bytes(b, i);
      part.reset();
      for (std::uint64_t done = 0; done < r.bytes;) {
        const std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(r.bytes - done, buf_bytes));
        auto buf_or = next();
        if (!buf_or.ok()) return buf_or.status();
        std::uint8_t* buf = buf_or.value();
        Status st = files_of(r).read(name_of(r), r.offset + done, buf, n);
        if (!st.ok()) return Status(st.code(), piece_where(b, i) + ": " + st.message());
        h.update(buf, n);
        for (std::size_t at = 0; at < n;) {
          const std::size_t m = static_cast<std::size_t>(std::min<std::uint64_t>(left, n - at));
          part.update(buf + at, m);
          at += m;
          left -= m;
          if (left != 0) continue;
          if (part.digest() != b.pieces[i].hash)
            return Status(Code::corrupt, "checksum mismatch in " + piece_where(b, i));
          if (++i < r.last) left = piece_bytes(b, i);
          part.reset();
        }
        CKPT_RETURN_IF_ERROR(fn(buf, n, piece_begin(b, r.first) + done));
        done += n;
      }
      read_bytes += r.bytes;
    }
  }
  if (h.digest() != b.checksum) return Status(Code::corrupt, "checksum mismatch in " + where(b));
  return Status::OK();
}

Result<std::uint64_t> BlockReader::own_size(const BlockRecord& b) {
  if (m_sizes.size() < m_idx.files.size()) m_sizes.resize(m_idx.files.size(), UINT64_MAX);  // files grow (PartialIndex)
  std::uint64_t& size = m_sizes[b.file];
  if (size == UINT64_MAX) {
    auto s = m_files.size(m_idx.files[b.file].name);
    if (!s.ok()) return Status(s.status().code(), where(b) + ": " + s.status().message());
    size = s.value();
  }
  return size;
}

Result<const BlockReader::RefState*> BlockReader::open_ref(const BlockRecord& b, std::size_t i) {
  const std::uint32_t ref = b.pieces[i].ref;
  if (ref > m_idx.refs.size()) return Status(Code::corrupt, piece_where(b, i) + ": no such REF");
  if (m_refs.size() < m_idx.refs.size()) m_refs.resize(m_idx.refs.size());  // REFs grow (PartialIndex)
  RefState& st = m_refs[ref - 1];
  if (st.files != nullptr) return &st;
  const RefFile& f = m_idx.refs[ref - 1];
  const std::string dir = ref_dir(f);
  if (f.kind == 0) {
    // The checkpoint referred to must still be the one the REF names (a segment's files never move).
    auto it = m_ref_roots.find(dir);
    if (it == m_ref_roots.end()) {
      RefRoot rr;
      auto bytes = read_root_file(dir);
      if (!bytes.ok()) {
        rr.error = std::string(bytes.status().code() == Code::not_found ? "which is gone" : "whose index is unusable") +
                   " (" + bytes.status().message() + ")";
      } else if (index_header_version(bytes->data(), bytes->size()) != kIndexV2Version) {
        rr.error = "which was replaced (its index is not a version-2 root)";
      } else if (auto root = decode_root_index(bytes->data(), bytes->size()); !root.ok()) {
        rr.error = "whose index is damaged (" + root.status().message() + ")";
      } else if (root->step != f.step) {
        rr.error = "whose index describes step " + std::to_string(root->step);
      } else {
        rr.ckpt_id = root->ckpt_id;
      }
      it = m_ref_roots.emplace(dir, std::move(rr)).first;
    }
    const std::string refers = piece_where(b, i) + ": refers to step " + std::to_string(f.step) + " (" + dir + "), ";
    if (!it->second.error.empty()) return Status(Code::corrupt, refers + it->second.error);
    if (it->second.ckpt_id != f.ckpt_id)
      return Status(Code::corrupt, refers + "which was replaced (it holds checkpoint id " +
                                       std::to_string(it->second.ckpt_id) + ", the reference names " +
                                       std::to_string(f.ckpt_id) + ")");
  }
  std::unique_ptr<FileReader>& files = m_ref_dirs[dir];
  if (!files) files = std::make_unique<FileReader>(dir);
  auto size = files->size(f.name);
  if (!size.ok()) {
    // A referenced file that is gone while its checkpoint is there: the referring checkpoint is damaged.
    const Code code = size.status().code() == Code::not_found ? Code::corrupt : size.status().code();
    return Status(code, piece_where(b, i) + ": " + size.status().message());
  }
  st.files = files.get();
  st.size = size.value();
  return &st;
}

Status BlockReader::claim(const BlockRecord& b) {
  if (b.length == 0) return Status::OK();  // an empty block has no bytes: where it points need not exist
  const std::string claims = " bytes (a truncated file, or an index that claims more than was written)";
  if (!b.pieced()) {
    auto size = own_size(b);
    if (!size.ok()) return size.status();
    if (b.offset <= *size && b.length <= *size - b.offset) return Status::OK();
    return Status(Code::corrupt, where(b) + ": its file holds " + std::to_string(*size) + claims);
  }
  // An index made in memory (not decoded) is held to what the decoder checks too.
  if (b.piece_log2 < kMinPieceLog2 || b.piece_log2 > kMaxPieceLog2 ||
      b.pieces.size() != piece_count(b.length, b.piece_log2))
    return Status(Code::corrupt, where(b) + ": not the piece count its length needs");
  for (std::size_t i = 0; i < b.pieces.size(); ++i) {
    const PieceRecord& pc = b.pieces[i];
    std::uint64_t size = 0;
    if (pc.ref == 0) {
      auto own = own_size(b);
      if (!own.ok()) return own.status();
      size = own.value();
    } else {
      auto st = open_ref(b, i);
      if (!st.ok()) return st.status();
      size = st.value()->size;
    }
    const std::uint64_t len = piece_bytes(b, i);
    if (pc.offset > size || len > size - pc.offset)
      return Status(Code::corrupt, piece_where(b, i) + ": its file holds " + std::to_string(size) + claims);
  }
  return Status::OK();
}

// ---- the directory layout ------------------------------------------------------------------------

namespace {

/// Order of kinds for equal steps in listings.
int kind_rank(EntryKind k) {
  switch (k) {
    case EntryKind::committed: return 0;
    case EntryKind::old: return 1;
    case EntryKind::tmp: return 2;
    case EntryKind::doomed: return 3;
    case EntryKind::abandoned: return 4;
  }
  return 5;
}

/// The checkpoint directories the root index in `dir` refers to (incremental: the steps whose files hold
/// some of its pieces); none for a version-1 index.
Result<std::vector<std::int64_t>> referenced_steps(const std::string& dir) {
  auto root = read_root_file(dir);
  if (!root.ok()) return root.status();
  std::vector<std::int64_t> out;
  if (index_header_version(root->data(), root->size()) != kIndexV2Version) return out;
  auto r = decode_root_index(root->data(), root->size());
  if (!r.ok()) return r.status();
  for (const RefSummary& ref : r->refs)
    if (ref.kind == 0) out.push_back(ref.step);
  return out;
}

class DirectoryStore final : public Store {
 public:
  explicit DirectoryStore(std::string root) : m_root(std::move(root)) {}

  const std::string& root() const override { return m_root; }
  Layout layout() const override { return Layout::directory; }
  std::string checkpoint_dir(std::int64_t step) const override { return path_of(step, EntryKind::committed); }
  std::string staging_dir(std::int64_t step) const override { return path_of(step, EntryKind::tmp); }

  std::vector<std::int64_t> committed_steps() const override {
    std::vector<std::int64_t> out;
    for (auto& e : scan())
      if (e.kind == EntryKind::committed) out.push_back(e.step);
    return out;
  }

  Result<std::vector<StepEntry>> list(ListDepth depth) const override {
    struct stat st {};
    if (::stat(m_root.c_str(), &st) != 0) return errno_status(m_root);
    if (!S_ISDIR(st.st_mode)) return Status(Code::invalid_argument, m_root + " is not a directory");
    CKPT_RETURN_IF_ERROR(check_one_layout(m_root));
    std::vector<StepEntry> out = scan();
    std::set<std::int64_t> committed;
    for (auto& e : out)
      if (e.kind == EntryKind::committed) committed.insert(e.step);
    for (auto& e : out) {
      switch (e.kind) {
        case EntryKind::tmp: e.reason = "never committed (" + e.name + ")"; continue;
        case EntryKind::doomed: e.reason = "being removed by retention (" + e.name + ")"; continue;
        case EntryKind::abandoned:
          e.reason = "rolled back: a later commit of an older step abandoned it (" + e.name + ")";
          continue;
        case EntryKind::old:
        case EntryKind::committed: break;
      }
      Result<Index> idx = Status(Code::internal, "not read");
      if (depth == ListDepth::roots) {
        // A version-2 root and its catalog say what they can; the sub-indices are the caller's to check.
        auto root = read_root_file(e.path);
        Status ok = root.ok() ? check_committed(e.path, root.value(), e.step) : root.status();
        if (ok.ok() && index_header_version(root->data(), root->size()) == kIndexV2Version) {
          e.unchecked_root = std::move(root).value();
          idx = Index{};
        } else {
          idx = ok.ok() ? load_checkpoint_index(e.path, e.step) : Result<Index>(ok);
        }
      } else {
        idx = load_checkpoint_index(e.path, e.step);
      }
      if (!idx.ok()) {
        e.reason = idx.status().message();
        e.damaged = idx.status().code() == Code::corrupt;
      } else if (e.kind == EntryKind::old) {
        e.reason =
            committed.count(e.step) != 0
                ? "being replaced by a newer commit of the same step"
                : "left by a commit that died between its renames; the next run puts it back as " + step_name(e.step);
      } else {
        e.complete = true;
        if (!e.subindices_unchecked()) e.index = std::move(idx).value();
      }
    }
    return out;
  }

  Result<std::vector<std::uint8_t>> read_index(std::int64_t step) const override {
    return read_index_file(checkpoint_dir(step));
  }

  Result<Index> load_index(std::int64_t step) const override {
    return load_checkpoint_index(checkpoint_dir(step), step);
  }

  std::optional<std::int64_t> newest_complete(std::vector<std::string>* skipped) const override {
    for (auto s : committed_steps()) {
      auto idx = load_index(s);
      if (idx.ok()) return s;
      if (skipped != nullptr) skipped->push_back("step " + std::to_string(s) + ": " + idx.status().message());
    }
    return std::nullopt;
  }

  std::optional<std::int64_t> latest_link() const override {
    char buf[4096];
    const ssize_t n = ::readlink((m_root + "/" + kLatestName).c_str(), buf, sizeof buf - 1);
    if (n <= 0) return std::nullopt;
    std::string target(buf, static_cast<std::size_t>(n));
    while (target.size() > 1 && target.back() == '/') target.pop_back();
    const auto slash = target.rfind('/');
    auto name = parse_step_name(slash == std::string::npos ? target : target.substr(slash + 1));
    if (!name || name->kind != EntryKind::committed) return std::nullopt;
    return name->step;
  }

  Status recover() override {
    const auto entries = scan();
    std::set<std::int64_t> committed;
    for (auto& e : entries)
      if (e.kind == EntryKind::committed) committed.insert(e.step);
    Status first;
    auto note = [&](const Status& s) {
      if (!s.ok() && first.ok()) first = s;
    };
    bool renamed = false;
    for (auto& e : entries) {
      switch (e.kind) {
        case EntryKind::committed:
        case EntryKind::abandoned: break;
        case EntryKind::tmp:
        case EntryKind::doomed: note(remove_tree(e.path)); break;
        case EntryKind::old:
          if (committed.count(e.step) == 0) {
            // The commit moved the checkpoint aside and died before the new one took its name.
            const std::string to = checkpoint_dir(e.step);
            if (::rename(e.path.c_str(), to.c_str()) != 0)
              note(errno_status("restore " + e.path + " as " + to));
            else
              renamed = true;
          } else if (load_index(e.step).ok()) {
            note(remove_tree(e.path));  // the commit finished its renames: this is the replaced version
          }
          break;
      }
    }
    if (renamed) {
      forget_newer_than(std::nullopt);
      note(fsync_dir(m_root, true));
    }
    return first;
  }

  Status commit(std::int64_t step, const std::string& staged, const std::vector<std::uint8_t>& index,
                bool sync) override {
    (void)staged;  // always staging_dir(step)
    return publish(step, index, sync, true);
  }

  Status commit_rebuilt(std::int64_t step, const std::vector<std::uint8_t>& index, bool sync) override {
    return publish(step, index, sync, false);
  }

  /// commit() (`timeline`: the step is this timeline's newest, newer ones are rolled back and `latest`
  /// points at it) or commit_rebuilt() (neither).
  Status publish(std::int64_t step, const std::vector<std::uint8_t>& index, bool sync, bool timeline) {
    const std::string tmp = staging_dir(step), fin = checkpoint_dir(step), old = path_of(step, EntryKind::old);
    if (!check_stored_index_version(index.data(), index.size()).ok())  // read_root_file() would refuse it
      return Status(Code::internal, "commit of step " + std::to_string(step) +
                                        ": an index with references or pieces in the transfer encoding (only a "
                                        "version-2 index stores them)");
    CKPT_RETURN_IF_ERROR(write_file(tmp + "/index", index.data(), index.size(), sync));
    CKPT_RETURN_IF_ERROR(fsync_dir(tmp, sync));
    if (timeline) CKPT_RETURN_IF_ERROR(abandon_newer_than(step, sync));
    {
      std::lock_guard<std::mutex> lock(m_known_mu);  // the committed version is about to change
      m_complete.erase(step);
      m_refs.erase(step);
    }
    bool moved = false;
    if (exists_nofollow(fin)) {
      CKPT_RETURN_IF_ERROR(remove_tree(old));  // stale: `fin` is the committed version
      if (::rename(fin.c_str(), old.c_str()) != 0) return errno_status("rename " + fin);
      moved = true;
    }
    if (::rename(tmp.c_str(), fin.c_str()) != 0) {
      Status s = errno_status("rename " + tmp);
      if (moved) (void)::rename(old.c_str(), fin.c_str());  // put the previous version back
      return s;
    }
    {
      std::lock_guard<std::mutex> lock(m_known_mu);
      m_complete.insert(step);  // every writer's files were written before its index
    }
    CKPT_RETURN_IF_ERROR(fsync_dir(m_root, sync));
    // Any .old of this step is now a replaced version (also one left by an earlier failed commit).
    (void)remove_tree(old);
    if (!timeline) return Status::OK();
    {
      std::lock_guard<std::mutex> lock(m_abandon_mu);
      m_newest = step;
    }
    // No fsync for `latest`: it is a hint for people and tools; readers scan the directories, and the
    // rename of the checkpoint itself is already durable. For the same reason a `latest` that cannot
    // be replaced (a directory planted there, say) must not turn a committed checkpoint into a failed
    // one: it is reported on stderr only.
    const std::string link_tmp = m_root + "/" + kLatestTmpName;
    ::unlink(link_tmp.c_str());
    Status link;
    if (::symlink(step_name(step).c_str(), link_tmp.c_str()) != 0)
      link = errno_status("symlink " + link_tmp);
    else if (::rename(link_tmp.c_str(), (m_root + "/" + kLatestName).c_str()) != 0)
      link = errno_status("rename " + link_tmp + " to latest");
    if (!link.ok()) {
      ::unlink(link_tmp.c_str());
      std::fprintf(stderr, "ckpt: checkpoint %lld committed, but the 'latest' link was not updated: %s\n",
                   static_cast<long long>(step), link.to_string().c_str());
    }
    return Status::OK();
  }

  void discard(const std::string& staged) override { (void)remove_tree(staged); }

  // An .old of a newer step goes too (the next start-up would otherwise rename it back into the
  // timeline): it becomes the abandoned copy when its committed twin is missing, and is removed when
  // the twin was moved. An older abandoned copy of the same step is replaced.
  Status abandon_newer_than(std::int64_t step, bool sync) override {
    std::lock_guard<std::mutex> lock(m_abandon_mu);  // the node level calls it from a second thread
    // Along one timeline steps grow: once this store knows no committed step is newer than `step`
    // (it committed the newest itself), a commit needs no scan of the root for this.
    if (m_newest && *m_newest <= step) return Status::OK();
    std::vector<std::int64_t> newer;
    for (auto& e : scan()) {  // newest first; for one step, committed before old
      if (e.step <= step || (e.kind != EntryKind::committed && e.kind != EntryKind::old)) continue;
      const std::string to = path_of(e.step, EntryKind::abandoned);
      if (e.kind == EntryKind::old && !newer.empty() && newer.back() == e.step) {
        CKPT_RETURN_IF_ERROR(remove_tree(e.path));
        continue;
      }
      CKPT_RETURN_IF_ERROR(remove_tree(to));
      if (::rename(e.path.c_str(), to.c_str()) != 0) {
        if (errno == ENOENT) continue;  // moved meanwhile (the drained level: two commit threads)
        return errno_status("rename " + e.path + " to " + to);
      }
      newer.push_back(e.step);
    }
    m_newest = step;  // every committed step above it is now abandoned (the commit of `step` follows)
    if (newer.empty()) return Status::OK();
    forget_newer_than(step);
    std::fprintf(stderr,
                 "ckpt: %zu checkpoint(s) newer than step %lld (steps %lld..%lld) in %s belong to a timeline that "
                 "was rolled back: renamed to ckpt.<step>.abandoned\n",
                 newer.size(), static_cast<long long>(step), static_cast<long long>(newer.back()),
                 static_cast<long long>(newer.front()), m_root.c_str());
    return fsync_dir(m_root, sync);
  }

  Status sync() override { return sync_filesystem(m_root); }

  Status retain(int keep, std::int64_t just_committed, std::int64_t durable) override {
    Status first;
    auto note = [&](const Status& s) {
      if (!s.ok() && first.ok()) first = s;
    };
    int kept = 0;
    // Incremental: the steps a kept checkpoint refers to are kept with it (its root's REFSUM list), and the
    // steps those refer to (a step kept for its pieces still reads as a checkpoint: it must stay whole). A
    // kept root that cannot be read may refer to anything older: then nothing older is removed.
    std::set<std::int64_t> referenced;
    bool unsure = false;
    // The memo's lock is held for its lookups and updates only, not while a file is read or removed: the
    // node level's commit thread publishes while its drain thread applies retention.
    auto keep_refs = [&](const StepEntry& e) {
      {
        std::lock_guard<std::mutex> lock(m_known_mu);
        if (auto known = m_refs.find(e.step); known != m_refs.end()) {
          referenced.insert(known->second.begin(), known->second.end());
          return;
        }
      }
      auto refs = referenced_steps(e.path);
      if (!refs.ok()) {
        unsure = true;
        return;
      }
      referenced.insert(refs->begin(), refs->end());
      std::lock_guard<std::mutex> lock(m_known_mu);
      m_refs.emplace(e.step, std::move(refs).value());
    };
    // A step counts once it is known complete; it is read whole (every sub-index of a version-2 index)
    // once per store, not at every commit.
    auto complete = [&](const StepEntry& e) {
      {
        std::lock_guard<std::mutex> lock(m_known_mu);
        if (m_complete.count(e.step) != 0) return true;
      }
      if (!load_index(e.step).ok()) return false;
      std::lock_guard<std::mutex> lock(m_known_mu);
      m_complete.insert(e.step);
      return true;
    };
    for (auto& e : scan()) {  // newest first
      if (e.kind == EntryKind::doomed) {
        note(remove_tree(e.path));  // left by a retention that died
        continue;
      }
      if (e.kind == EntryKind::abandoned) {
        if (e.step <= just_committed) note(remove_tree(e.path));  // the new timeline has reached it
        continue;
      }
      if (e.kind != EntryKind::committed) continue;
      if (e.step == just_committed) {
        ++kept;
        keep_refs(e);
        continue;
      }
      if (kept < keep) {
        if (complete(e)) {  // an incomplete one is not counted, and not removed yet
          ++kept;
          keep_refs(e);
        }
        continue;
      }
      if (e.step == durable) {  // the newer ones may not be on disk yet; its pieces in older steps are
        keep_refs(e);           // (synced with it: one syncfs made it durable)
        continue;
      }
      if (unsure) continue;
      if (referenced.count(e.step) != 0) {  // a kept checkpoint's pieces are stored there
        keep_refs(e);
        continue;
      }
      const std::string doomed = path_of(e.step, EntryKind::doomed);
      note(remove_tree(doomed));
      if (::rename(e.path.c_str(), doomed.c_str()) != 0) {
        note(errno_status("rename " + e.path + " to " + doomed));
        continue;
      }
      {
        std::lock_guard<std::mutex> lock(m_known_mu);
        m_complete.erase(e.step);
        m_refs.erase(e.step);
      }
      note(remove_tree(doomed));
    }
    return first;
  }

 private:
  std::string path_of(std::int64_t step, EntryKind kind) const { return m_root + "/" + step_name(step, kind); }

  /// Every directory entry of the root with a checkpoint name, newest step first.
  std::vector<StepEntry> scan() const {
    std::vector<StepEntry> out;
    DIR* d = ::opendir(m_root.c_str());
    if (d == nullptr) return out;
    while (dirent* e = ::readdir(d)) {
      auto name = parse_step_name(e->d_name);
      if (!name) continue;
      StepEntry s;
      s.name = e->d_name;
      s.path = m_root + "/" + s.name;
      s.step = name->step;
      s.kind = name->kind;
      if (is_directory(s.path)) out.push_back(std::move(s));
    }
    ::closedir(d);
    std::sort(out.begin(), out.end(), [](const StepEntry& a, const StepEntry& b) {
      return a.step != b.step ? a.step > b.step : kind_rank(a.kind) < kind_rank(b.kind);
    });
    return out;
  }

  /// Retention forgets steps newer than `step` (rolled back), or every step (`step` unset: recovery
  /// renamed entries back).
  void forget_newer_than(std::optional<std::int64_t> step) {
    std::lock_guard<std::mutex> lock(m_known_mu);
    m_complete.erase(step ? m_complete.upper_bound(*step) : m_complete.begin(), m_complete.end());
    m_refs.erase(step ? m_refs.upper_bound(*step) : m_refs.begin(), m_refs.end());
  }

  std::string m_root;
  /// What retention knows of committed steps without reading them again (a kept step would otherwise be
  /// read whole at every commit: with `keep` K and a version-2 index, (K-1) x P sub-indices per commit):
  /// the steps known complete - this store committed them (a root is published only after every writer's
  /// files are written) or read them whole once - and the steps each root refers to, once read. A step
  /// committed again, rolled back, recovered or removed is forgotten.
  std::mutex m_known_mu;
  std::set<std::int64_t> m_complete;
  std::map<std::int64_t, std::vector<std::int64_t>> m_refs;
  std::mutex m_abandon_mu;
  /// The newest committed step, once this store knows it (it abandoned or committed it: the runtime's
  /// store on rank 0, which holds the directory's lock); unknown to any other store.
  std::optional<std::int64_t> m_newest;
};

}  // namespace

std::unique_ptr<Store> make_directory_store(const std::string& root) { return std::make_unique<DirectoryStore>(root); }

Status sync_filesystem(const std::string& path) {
  // syncfs: every dirty page of this file system on this node - the data files written since the
  // last sync, the indexes, the renames - in one call, where an fsync per file would need the names.
  const int fd = ::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return errno_status("open " + path + " for syncfs");
  Status s = ::syncfs(fd) == 0 ? Status::OK() : errno_status("syncfs " + path);
  ::close(fd);
  return s;
}

}  // namespace ckpt::detail
