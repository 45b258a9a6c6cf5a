// Format v1: data-file header and index encode/decode (internal). Byte layout in docs/format.md.
// Every decode is bounds-checked: a checkpoint on disk is untrusted input.
#ifndef CKPT_BASE_FORMAT_HPP
#define CKPT_BASE_FORMAT_HPP

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <unordered_map>
#include <vector>

#include "base/hash.hpp"
#include "base/layout.hpp"
#include "ckpt/status.hpp"
#include "ckpt/types.hpp"

namespace ckpt::detail {

constexpr std::uint32_t kFormatVersion = 1;
constexpr std::size_t kDataHeaderBytes = 64;  ///< encoded size; the stream starts at `alignment`
constexpr std::size_t kIndexHeaderBytes = 16;
constexpr std::size_t kIndexFooterBytes = 40;
constexpr std::uint32_t kMaxDims = 16;
constexpr std::uint32_t kMaxAttrs = 4096;

/// Header at the start of every data file.
struct DataHeader {
  std::int64_t step = 0;
  std::uint32_t writer = 0;  ///< rank that wrote the file
  std::uint32_t nranks = 0;
  std::uint64_t ckpt_id = 0;
  std::uint64_t data_offset = 0;  ///< where the first stream starts in this file
};
/// The checkpoint id of step `step` of run `run_id` (the same on every rank): in every data file's
/// header and in the index, which must agree.
std::uint64_t checkpoint_id(std::uint64_t run_id, std::int64_t step);
std::vector<std::uint8_t> encode_data_header(const DataHeader& h);
Result<DataHeader> decode_data_header(const std::uint8_t* p, std::size_t n);

struct VarRecord {
  std::string name;
  DType dtype = DType::u8;
  RegionKind kind = RegionKind::local;
  bool uniform = false;  ///< scalar/local: every rank stored the same bytes
  std::uint32_t ndim = 0;
  Shape global;  ///< global kind: ndim extents; others: empty
  Attributes attrs;
};

struct BlockRecord {
  std::uint32_t var = 0;   ///< index into Index::vars
  std::uint32_t rank = 0;  ///< rank that captured it
  std::uint32_t file = 0;  ///< index into Index::files
  bool has_stats = false;
  std::uint64_t offset = 0;                  ///< byte offset in the file
  std::uint64_t length = 0;                  ///< payload bytes
  Shape start;                               ///< global kind: ndim; others: ndim zeros
  Shape count;                               ///< ndim extents
  std::uint64_t min_bits = 0, max_bits = 0;  ///< i64 / u64 / f64 bit patterns, by dtype class
  std::uint64_t checksum = 0;                ///< XXH3-64 of the payload
};

struct FileRecord {
  std::string name;  ///< relative to the checkpoint directory; no '/'
  std::uint32_t writer = 0;
  std::uint64_t bytes = 0;
};

/// Everything a reader needs; written last, its presence and checksum make a checkpoint complete.
struct Index {
  std::int64_t step = 0;
  std::uint32_t nranks = 0;
  std::uint64_t ckpt_id = 0;
  double created_unix = 0;
  std::string transport;
  Attributes attrs;
  std::vector<FileRecord> files;
  std::vector<VarRecord> vars;
  std::vector<BlockRecord> blocks;
  std::vector<std::uint32_t> rank_file;  ///< writer map: rank -> file index its data went to

  /// Index of variable `name`, or -1 (a linear scan: use IndexLookup for many lookups).
  long find_var(const std::string& name) const;
  /// Bytes of every block's payload (the checkpoint's size, headers and alignment not counted).
  std::uint64_t payload_bytes() const;
};

/// Variable by name and the blocks of each variable, built once for an index, so that restoring n
/// variables costs O(n + blocks), not O(n * (n + blocks)).
class IndexLookup {
 public:
  explicit IndexLookup(const Index& idx);
  /// Index of variable `name`, or -1.
  long var(const std::string& name) const;
  /// Indices (into Index::blocks) of the blocks of variable `var`, in index order.
  const std::vector<std::uint32_t>& blocks(long var) const { return m_blocks[static_cast<std::size_t>(var)]; }

 private:
  std::unordered_map<std::string, long> m_by_name;
  std::vector<std::vector<std::uint32_t>> m_blocks;
};

/// The blocks of every joined array of `idx` tile its rows [0, global[0]) without gap or overlap, in
/// block order, which must be rank order (the commit assigns them so; anything else is corrupt).
Status check_joined_rows(const Index& idx);

class ByteReader;
class ByteWriter;
/// The FILE, VAR and BLOCK records of version 1, which the version-2 index (base/index_v2.hpp) holds
/// "as version 1". A get_* reads one record and checks what can be checked of it alone (names, kinds,
/// extents against the variable, indices below `nfiles` / `nranks`; not a name or (variable, rank) seen
/// twice); its Status is corrupt, saying what without a prefix (the caller adds its own and the reader's
/// position).
void put_file_record(ByteWriter& w, const FileRecord& f);
void put_var_record(ByteWriter& w, const VarRecord& v);
void put_block_record(ByteWriter& w, const BlockRecord& b);
Status get_file_record(ByteReader& r, std::uint32_t nranks, FileRecord& f);
Status get_var_record(ByteReader& r, VarRecord& v);
/// Block number `i` (for messages); `var(v)` is variable v (< nvars), whose kind and extents the block's are
/// checked against.
Status get_block_record(ByteReader& r, std::size_t nvars, const std::function<const VarRecord&(std::uint32_t)>& var,
                        std::size_t nfiles, std::uint32_t nranks, std::uint64_t i, BlockRecord& b);

/// The whole index file: header, body, footer.
std::vector<std::uint8_t> encode_index(const Index& idx);
/// Validates magic, version, footer, body checksum and every field against the others.
Result<Index> decode_index(const std::uint8_t* p, std::size_t n);
/// The version in the header of the index object at `p` (1, or 2 for a version-2 root); 0 when `n` is
/// shorter than a header or `p` does not begin with the index magic. Nothing else is checked.
std::uint32_t index_header_version(const std::uint8_t* p, std::size_t n);

/// "1.5 MiB" (bytes below 1 KiB as "123 B"): sizes in messages and in the tools' output.
std::string human_bytes(std::uint64_t n);

}  // namespace ckpt::detail

#endif  // CKPT_BASE_FORMAT_HPP
