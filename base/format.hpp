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
/// Internal, never written to disk: the version in the header and footer of encode_index()'s *transfer
/// encoding*, which an Index with references or pieces (assembled from a version-2 index) takes to travel
/// between ranks as bytes. Not a format version (docs/format.md defines 1 and 2): read_root_file() and the
/// step log refuse an index of any version but 1 and 2, so these bytes are never read from a file.
constexpr std::uint32_t kTransferIndexVersion = 0x7F01;
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

/// Incremental checkpoints (docs/format.md, "Version 2 index: incremental references"): one piece of a
/// pieced block - payload bytes [i P, min((i + 1) P, length)) for piece i - stored in the block's own file
/// or in a file an earlier checkpoint of the same chain stored.
struct PieceRecord {
  std::uint32_t ref = 0;     ///< 0: the block's own file (BlockRecord::file); k >= 1: Index::refs[k - 1]
  std::uint64_t offset = 0;  ///< absolute, in that file
  Hash128 hash;              ///< XXH3-128 of the piece's bytes
};

/// REF: a file of an earlier checkpoint of the chain that pieces refer to.
struct RefFile {
  std::uint32_t kind = 0;     ///< 0: `<root>/ckpt.<step>/<name>`; 1 (series): `<root>/series.<step>/<name>`
  std::int64_t step = 0;      ///< kind 0: the checkpoint's step; kind 1: the segment number
  std::uint64_t ckpt_id = 0;  ///< kind 0: that checkpoint's id (its index must still have it); kind 1: 0
  std::string name;           ///< a plain name, as FileRecord's
  bool operator==(const RefFile& o) const {
    return kind == o.kind && step == o.step && ckpt_id == o.ckpt_id && name == o.name;
  }
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
  /// Pieced (incremental; BLOCK2 flag bit 1): log2 of the piece size (16..24) and ceil(length / 2^log2)
  /// pieces, `offset` 0. Not pieced: 0 and no pieces, the payload at `offset` of `file`.
  std::uint32_t piece_log2 = 0;
  std::vector<PieceRecord> pieces;
  bool pieced() const { return piece_log2 != 0; }
};

/// Piece sizes (docs/format.md, "Pieces"): 2^16 (64 KiB) to 2^24 (16 MiB) bytes.
constexpr std::uint32_t kMinPieceLog2 = 16;
constexpr std::uint32_t kMaxPieceLog2 = 24;
constexpr std::size_t kPieceRecordBytes = 32;
/// ceil(length / 2^log2): the pieces of a block of `length` bytes (`log2` at most 63).
std::uint64_t piece_count(std::uint64_t length, std::uint32_t log2);
/// Payload offset of piece `i` of pieced block `b`, and its length (the last piece may be shorter).
std::uint64_t piece_begin(const BlockRecord& b, std::size_t i);
std::uint64_t piece_bytes(const BlockRecord& b, std::size_t i);

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
  /// Incremental: the files of earlier checkpoints that pieces refer to (PieceRecord::ref k is refs[k - 1]).
  /// Only a version-2 index has them; an Index with refs or pieces travels between ranks in the transfer
  /// encoding (encode_index), never as a version-1 file.
  std::vector<RefFile> refs;

  /// Index of variable `name`, or -1 (a linear scan: use IndexLookup for many lookups).
  long find_var(const std::string& name) const;
  /// Whether it has references or pieced blocks: what encode_index() writes in the transfer encoding.
  bool incremental() const;
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
/// A pieced block with flag bit 1 and, after its checksum, `u32 log2, u32 0` and its PIECE records.
void put_block_record(ByteWriter& w, const BlockRecord& b);
/// REF: `u32 kind, u32 0, i64 step, u64 checkpoint id, str name`.
void put_ref_record(ByteWriter& w, const RefFile& f);
Status get_file_record(ByteReader& r, std::uint32_t nranks, FileRecord& f);
Status get_var_record(ByteReader& r, VarRecord& v);
/// Whether a BLOCK may be pieced (flag bit 1) and how many REFs its pieces may name.
struct PieceLimits {
  bool allowed = false;     ///< false: version 1, where flag bit 1 is an unknown bit like any other
  std::uint64_t nrefs = 0;  ///< a piece's `ref` is at most this
};
/// Block number `i` (for messages); `var(v)` is variable v (< nvars), whose kind and extents the block's are
/// checked against. A pieced block (only where `pieces.allowed`): log2 in 16..24, a non-zero length (its
/// piece count follows from it), offset 0, each piece's ref at most `pieces.nrefs`, its offset plus its
/// length within 64 bits, every reserved field zero.
Status get_block_record(ByteReader& r, std::size_t nvars, const std::function<const VarRecord&(std::uint32_t)>& var,
                        std::size_t nfiles, std::uint32_t nranks, std::uint64_t i, BlockRecord& b,
                        const PieceLimits& pieces = PieceLimits{});
/// A REF: kind 0 or 1, zero reserved field, a kind-1 REF's id 0, a step (or segment) >= 0, a plain file
/// name as FILE's. Which steps it may name is the caller's to check.
Status get_ref_record(ByteReader& r, RefFile& f);
/// A key that tells REFs apart exactly when RefFile::operator== does (kind, step, id and name).
std::string ref_key(const RefFile& f);

/// The whole index file: header, body, footer. An index without references or pieces is version 1, byte for
/// byte; one with either (Index::incremental()) takes the transfer encoding (kTransferIndexVersion in header
/// and footer, pieced blocks as put_block_record() writes them, and after the writer map `u32 n_refs, REF...`),
/// which ranks send each other and nobody writes to disk.
std::vector<std::uint8_t> encode_index(const Index& idx);
/// Validates magic, version, footer, body checksum and every field against the others. Reads version 1 (no
/// pieces, no REFs) and the transfer encoding (pieces, REFs unique, each of kind 0 naming a step below the
/// index's, every piece's ref naming one; at least a REF or a pieced block).
Result<Index> decode_index(const std::uint8_t* p, std::size_t n);
/// The version in the header of the index object at `p` (1, or 2 for a version-2 root); 0 when `n` is
/// shorter than a header or `p` does not begin with the index magic. Nothing else is checked.
std::uint32_t index_header_version(const std::uint8_t* p, std::size_t n);
/// What may come from a file (an `index`, a step-log record's payload): corrupt "index version N unsupported"
/// when the bytes begin with the index magic and a version that is neither 1 nor 2 (the transfer encoding
/// among them); OK otherwise (the decoder then says what else is wrong).
Status check_stored_index_version(const std::uint8_t* p, std::size_t n);

/// "1.5 MiB" (bytes below 1 KiB as "123 B"): sizes in messages and in the tools' output.
std::string human_bytes(std::uint64_t n);

}  // namespace ckpt::detail

#endif  // CKPT_BASE_FORMAT_HPP
