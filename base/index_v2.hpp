// Format v2 index: the two-level index (root index, catalog, sub-indices) codec (internal). Byte layout
// and rules: docs/format.md, "Version 2 index: two levels". The store writes it (stage_index_v2, option
// index_format: 2) and assembles it into the one-level index for every reader (read_index_file). Every decode is
// bounds-checked: a checkpoint on disk is untrusted input, and what the spec calls invalid is `corrupt`.
//
// Incremental references (docs/format.md, "Version 2 index: incremental references"): the root's flag bit 0,
// base step and REFSUM list; a sub-index's REF list and pieced BLOCK2s (its flag bit 0), allowed only under a
// root with references, each REF in the root's list. Assembled, a sub-index's REFs become Index::refs (one
// list across the sub-indices) and its pieces name them there.
#ifndef CKPT_BASE_INDEX_V2_HPP
#define CKPT_BASE_INDEX_V2_HPP

#include <cstddef>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "base/format.hpp"
#include "base/hash.hpp"
#include "ckpt/status.hpp"

namespace ckpt::detail {

constexpr std::uint32_t kIndexV2Version = 2;
/// Every v2 object: a 16-byte header (magic, version, flags) and version 1's 40-byte footer.
constexpr std::size_t kObjectHeaderBytes = 16;
constexpr std::size_t kObjectFooterBytes = 40;
constexpr std::size_t kCatalogFixedBytes = 32;  ///< catalog body before the writer entries
constexpr std::size_t kCatalogEntryBytes = 40;  ///< one WRITER: writer w at body offset 32 + 40 w
constexpr std::size_t kRefSummaryBytes = 32;
constexpr std::uint32_t kMaxDirEntries = 4096;
constexpr std::uint32_t kRootFlagRefs = 1;  ///< root header flags bit 0: the checkpoint has references

/// Which ranks a writer holds (the root's `rule`).
enum class WriterRule : std::uint32_t {
  per_rank = 0,  ///< writer w is rank w (W = nranks)
  groups = 1,    ///< rank r belongs to writer floor(r / g) (W = ceil(nranks / g))
  mapped = 2,    ///< the catalog's rank map says (one u32 per rank)
};

/// REFSUM: a checkpoint or segment that some sub-index refers to (incremental).
struct RefSummary {
  std::uint32_t kind = 0;     ///< 0: a checkpoint directory of this root; 1: a segment of this series root
  std::int64_t step = 0;      ///< kind 0: the step; kind 1: the segment number
  std::uint64_t ckpt_id = 0;  ///< kind 0: that checkpoint's id; kind 1: 0
  bool operator==(const RefSummary& o) const { return kind == o.kind && step == o.step && ckpt_id == o.ckpt_id; }
};

/// Where a variable's directory is: `length` bytes at `offset` of the catalog (from its first byte).
/// A variable without entries (local, scalar, or no block at all) has offset, length and checksum 0.
struct DirectoryRef {
  std::uint32_t entries = 0;  ///< <= kMaxDirEntries; 0 for local and scalar kinds
  std::uint64_t offset = 0, length = 0;
  std::uint64_t checksum = 0;  ///< XXH3-64 of the `length` bytes
};

/// VAR2: a version-1 VAR and what the blocks of the variable give, merged over every rank.
struct Var2 {
  VarRecord var;  ///< as version 1; for a joined array global[0] is the total row count
  bool has_stats = false;
  std::uint64_t min_bits = 0, max_bits = 0;  ///< over all blocks, as var_stats() merges them; 0 without stats
  std::uint64_t n_blocks = 0;                ///< at most one per rank
  std::uint64_t bytes = 0;                   ///< sum of the blocks' lengths
  DirectoryRef dir;
};

/// The root index (`ckpt.<step>/index`, or a step-log record's payload): what is per variable.
struct RootIndex {
  std::int64_t step = 0;
  std::uint32_t nranks = 0;
  std::uint64_t ckpt_id = 0;
  double created_unix = 0;
  std::string transport;
  Attributes attrs;
  std::uint64_t token = 0;    ///< random, non-zero, per commit attempt; in the catalog and every sub-index
  std::uint32_t writers = 0;  ///< W, 1 <= W <= nranks
  WriterRule rule = WriterRule::per_rank;
  std::uint32_t g = 0;                                   ///< rule 1: ranks per writer; otherwise 0
  std::uint64_t catalog_offset = 0, catalog_length = 0;  ///< in the catalog's file
  Hash128 catalog_hash;                                  ///< XXH3-128 of the whole catalog
  std::int64_t base_step = 0;                            ///< = step without references
  std::vector<RefSummary> refs;                          ///< non-empty iff header flag bit 0 (encoded from it)
  std::vector<Var2> vars;
};

/// WRITER: writer w's catalog entry.
struct CatalogEntry {
  std::uint64_t offset = 0, length = 0;  ///< of sub-index w in its file (directory layout: offset 0)
  std::uint64_t checksum = 0;            ///< XXH3-64 of the whole sub-index object
  std::uint64_t ranks = 0;               ///< how many ranks it holds
  std::uint64_t self_checksum = 0;       ///< catalog_entry_checksum(): the entry checks itself
};

/// The catalog (`catalog`): what is per writer, and the variables' directories as raw bytes (decoded one
/// variable at a time, by decode_directory(), from the range its DirectoryRef gives).
struct Catalog {
  std::int64_t step = 0;
  std::uint64_t ckpt_id = 0;
  std::uint64_t token = 0;
  std::uint32_t writers = 0;
  std::vector<CatalogEntry> entries;    ///< one per writer
  std::vector<std::uint32_t> rank_map;  ///< rule 2 only: rank r's writer (nranks entries); else empty
  /// The body from the end of the rank map (or of the entries) to the footer: the directories, which
  /// begin at catalog offset catalog_directories_offset().
  std::vector<std::uint8_t> directories;
};

/// One entry of a variable's directory: the writers [first, first + writers) hold their blocks of the
/// variable inside the box [start, start + count).
struct DirEntry {
  std::uint32_t first = 0, writers = 0;
  Shape start, count;  ///< ndim each
};

/// Sub-index w (`index.<w>`): the block records of writer w's ranks.
struct SubIndex {
  std::int64_t step = 0;
  std::uint64_t ckpt_id = 0;
  std::uint64_t token = 0;
  std::uint32_t w = 0, writers = 0, nranks = 0;
  std::vector<std::uint32_t> ranks;  ///< ascending
  std::vector<FileRecord> files;     ///< as version 1: its blocks' files (and its ranks' placeholders)
  std::vector<RefFile> refs;         ///< incremental: the files its pieces refer to (PieceRecord::ref k: refs[k - 1])
  /// BLOCK2: `var` indexes the root's variables, `file` these files, `rank` is one of `ranks`; a pieced
  /// block (flag bit 1) names `refs`. The header's flag bit 0 says whether any block is pieced.
  std::vector<BlockRecord> blocks;
  /// Whether `rank` is one of `ranks` (binary search).
  bool holds(std::uint32_t rank) const;
  /// The block of variable `var` of rank `rank`, or nullptr (that rank stored none).
  const BlockRecord* find(std::uint32_t var, std::uint32_t rank) const;
};

// ---- objects ---------------------------------------------------------------------------------------

/// The root index object: header (magic CKPTINDX, version 2, flags), body, footer.
std::vector<std::uint8_t> encode_root_index(const RootIndex& root);
/// Everything the root alone can tell: frame and checksum, the version-1 checkpoint and VAR fields,
/// token, W / rule / g, the catalog's extent (large enough for its entries and rank map), references,
/// each VAR2 (flags, zero bytes, at most nranks blocks, its directory's size and place in the catalog).
Result<RootIndex> decode_root_index(const std::uint8_t* p, std::size_t n);

/// The directory layout keeps every object from offset 0 of its own file: corrupt when the root puts its
/// catalog elsewhere (every reader of a checkpoint directory checks it alike).
Status check_directory_layout(const RootIndex& root);
/// Catalog offset (from its first byte) of writer entry w: 16 + 32 + 40 w.
std::uint64_t catalog_entry_position(std::uint32_t w);
/// Catalog offset where the directories begin: after the entries, and with rule 2 the rank map.
std::uint64_t catalog_directories_offset(std::uint32_t writers, WriterRule rule, std::uint32_t nranks);
/// XXH3-64 of (the entry's bytes 0..31, token, w as u64).
std::uint64_t catalog_entry_checksum(const CatalogEntry& e, std::uint64_t token, std::uint32_t w);

/// The catalog object (magic CKPTCATL). Writes `entries` as they are (self checksums included) and
/// `rank_map` when it is not empty.
std::vector<std::uint8_t> encode_catalog(const Catalog& c);
/// `rule` is the root's: it says whether a rank map follows the entries. Checks the frame, W >= 1, the
/// zero fields, each entry's own checksum (with the catalog's token), the map's entries below W.
Result<Catalog> decode_catalog(const std::uint8_t* p, std::size_t n, WriterRule rule);

/// The sub-index object (magic CKPTSUBX; flag bit 0 when a block is pieced).
std::vector<std::uint8_t> encode_subindex(const SubIndex& s);
/// Needs the root for the variables (a BLOCK2's size and checks depend on its variable's kind, dtype and
/// shape), the rank count and the references. Checks the frame, ranks ascending and < nranks, files and
/// blocks as version 1 does, each block's rank one of its ranks, one block per (variable, rank); flag bit 0
/// exactly when a block is pieced, and only under a root with references (bit 0); REFs only with pieces,
/// unique, each of kind 0 (a checkpoint directory: the sub-indices this build reads are in one) with a step in
/// [base step, step) and its (kind, step, id) in the root's REFSUM list; pieces as get_block_record() checks
/// them. Does not compare step, id, token, w, W or nranks with the root: check_subindex() does.
Result<SubIndex> decode_subindex(const std::uint8_t* p, std::size_t n, const RootIndex& root);

/// A directory's bytes: entries x (u32 first, u32 writers, ndim x u64 start, ndim x u64 count).
std::vector<std::uint8_t> encode_directory(const std::vector<DirEntry>& entries);
/// `p` holds the `dir.length` bytes at the variable's `dir.offset` in the catalog. Checks their
/// checksum, the entry count (<= 4096, as the VAR2 says), each range non-empty and within W, the ranges
/// sorted and disjoint, each box inside the global shape (a joined array's: whole rows).
Result<std::vector<DirEntry>> decode_directory(const std::uint8_t* p, std::size_t n, const Var2& v,
                                               std::uint32_t writers);

// ---- one object against another ----------------------------------------------------------------------

/// A catalog against its root: length and XXH3-128, step, id, token, W, the rank map's size, and each
/// entry as check_catalog_entry() (with rule 2, `ranks` = the map entries naming the writer). `p`/`n`
/// are the catalog's bytes.
Status check_catalog(const Catalog& c, const RootIndex& root, const std::uint8_t* p, std::size_t n);
/// One entry read alone (restart N->N): its own checksum with the root's token, its rank count by the
/// rule (rule 2: at most nranks), an extent that can hold a sub-index.
Status check_catalog_entry(const CatalogEntry& e, const RootIndex& root, std::uint32_t w);
/// The 40 bytes of entry w (read at catalog_entry_position(w)), decoded and checked as above.
Result<CatalogEntry> decode_catalog_entry(const std::uint8_t* p, std::size_t n, const RootIndex& root, std::uint32_t w);
/// Sub-index w against its root and catalog entry: length and XXH3-64, step, id, token, w, W, nranks, its
/// rank count, and with rules 0 and 1 exactly the ranks the rule gives (rule 2: the caller checks the
/// ranks against the map, or that the rank it looks for is held).
Status check_subindex(const SubIndex& s, const RootIndex& root, const CatalogEntry& e, std::uint32_t w,
                      const std::uint8_t* p, std::size_t n);
/// check_subindex()'s checksum first, then decode_subindex(), then the rest of check_subindex().
Result<SubIndex> decode_writer_subindex(const std::uint8_t* p, std::size_t n, const RootIndex& root,
                                        const CatalogEntry& e, std::uint32_t w);

// ---- finding a block (restart N->N) -------------------------------------------------------------------

/// Where rank r's records are. Offsets are absolute in the catalog's file (the root's catalog offset C
/// included), so that a reader reads only those bytes.
struct RankPlace {
  std::uint32_t writer = 0;        ///< r's writer (rule 2: once the map entry is known)
  bool needs_map = false;          ///< rule 2: read the u32 at map_offset, then locate_rank_by_map()
  std::uint64_t map_offset = 0;    ///< rule 2: C + 48 + 40 W + 4 + 4 r
  std::uint64_t entry_offset = 0;  ///< C + 48 + 40 w, once `writer` is known
};
/// invalid_argument when r >= nranks (a restart on another rank count reads directories instead).
Result<RankPlace> locate_rank(const RootIndex& root, std::uint32_t rank);
/// Rule 2: rank r's place from the 4 bytes of its map entry (corrupt when they name no writer). The
/// sub-index they lead to must hold r (SubIndex::holds): a map damaged to point elsewhere is caught so.
Result<RankPlace> locate_rank_by_map(const RootIndex& root, std::uint32_t rank, const std::uint8_t* map_entry,
                                     std::size_t n);

// ---- conversion from and to the one-level model -------------------------------------------------------

/// Every object of a two-level index, each at offset 0 of its own file (the directory layout).
struct SplitIndex {
  RootIndex root;
  std::vector<std::uint8_t> catalog;
  std::vector<std::vector<std::uint8_t>> subindices;  ///< one per writer
};
/// Splits a valid version-1 index (or one with references: pieced blocks and Index::refs) by `rule` (`g`: rule 1's
/// ranks per writer, else 0; `rank_map`: rule 2's writer of each rank, W = its largest entry + 1), with commit token
/// `token` (non-zero). The root gets each variable's merged statistics, block count, bytes and `uniform` from the
/// blocks (uniform_blocks()); every global or joined variable a directory of one entry per writer holding blocks, with
/// the bounding box of those blocks (neighbouring writers merged when more than 4096 hold blocks). Sub-index w lists,
/// in the index's order, its ranks' blocks and the files they name, its ranks' `rank_file` files and the
/// files its ranks are the writer of (so a placeholder no block names is kept), and the REFs its pieces name
/// (renumbered to its own list). With references the root lists every REF's checkpoint (REFSUM) and its base
/// step is the lowest step referred to: a writer that knows an older base of its chain sets root.base_step
/// before encoding the root (nothing else depends on it). invalid_argument for a bad rule, g, map or token, a
/// block naming a missing variable, rank, file or REF, a file name listed twice (files are identified by name
/// across sub-indices), a variable whose bytes overflow 64 bits, a REF of a series segment (kind 1: the directory
/// layout refers to checkpoint directories) or of a step not below the index's.
Result<SplitIndex> split_index(const Index& idx, WriterRule rule, std::uint32_t g, std::uint64_t token,
                               const std::vector<std::uint32_t>& rank_map = {});
/// The catalog of `root` (directory layout: every object at offset 0 of its own file), filling in the
/// root's directory references and catalog extent and hash: `entries[w]` gives writer w's sub-index
/// length, checksum and rank count (offset and self checksum are set here); the directories come from
/// the blocks of `boxes` (only var, rank, start and count are read; its variables are the root's, in the
/// root's order) with `owner[r]` rank r's writer; `rank_map` is rule 2's. split_index() uses it, and the
/// commit whose ranks write their own sub-indices (rank 0 has the boxes of the global and joined blocks).
std::vector<std::uint8_t> build_catalog(RootIndex& root, std::vector<CatalogEntry> entries, const Index& boxes,
                                        const std::vector<std::uint32_t>& owner,
                                        const std::vector<std::uint32_t>& rank_map = {});

/// Rebuilds the one-level index from a root (as decode_root_index returned it), the catalog's bytes and
/// every sub-index's bytes (`subindices[w]` is writer w's), checking what `ckpt verify` checks: the catalog
/// and each sub-index against the root (and with rule 2 each rank against the map), every rank in exactly
/// one sub-index, each file the same record wherever it is listed, joined rows tiling in rank order, each
/// block inside its writer's directory entry, and the root's n_blocks, bytes, min/max and uniform equal
/// to what the blocks give. Not checked (as in version 1's decoder): that global blocks are disjoint.
///
/// The result's order: files by first appearance over the sub-indices in writer order (each in its own
/// order), blocks by rank (each rank's in its sub-index's order), variables as the root's; REFs, likewise by
/// first appearance, merged into Index::refs (each (kind, step, id, name) once) and every piece's ref renumbered
/// to it. A REF is checked against the root by decode_subindex(); a REFSUM no sub-index uses is accepted. Version 2
/// has no writer map: `rank_file` is derive_rank_file()'s. So encode_index(assemble(split(idx))) ==
/// encode_index(idx) when idx's files and blocks are in that order, its uniform flags are what the blocks
/// give and its rank_file is derive_rank_file(idx) - as for the indexes commit builds, rank_file aside.
Result<Index> assemble_index(const RootIndex& root, const std::uint8_t* catalog, std::size_t catalog_bytes,
                             const std::vector<std::vector<std::uint8_t>>& subindices);

/// Adds a sub-index's REFs `add` to `refs` (`by_key`: ref_key() -> position in `refs`): REFs are one list
/// across the sub-indices, each REF once. Returns the position in `refs` of each of `add`.
std::vector<std::uint32_t> merge_refs(std::vector<RefFile>& refs,
                                      std::unordered_map<std::string, std::uint32_t>& by_key,
                                      const std::vector<RefFile>& add);
/// A block of a sub-index renumbered into the merged lists: its file by `file_map` (merge_files()), its
/// pieces' refs by `ref_map` (merge_refs(); ref k >= 1 becomes ref_map[k - 1] + 1). Both must be in range.
void renumber_block(BlockRecord& b, const std::vector<std::uint32_t>& file_map,
                    const std::vector<std::uint32_t>& ref_map);
/// Adds sub-index w's files `add` to `files` by name (`by_name`: name -> position in `files`): a file that
/// several sub-indices list must be the same record in each (corrupt otherwise). Returns the position in
/// `files` of each of `add`. assemble_index() and restart's partial reading (PartialIndex) merge so.
Result<std::vector<std::uint32_t>> merge_files(std::vector<FileRecord>& files,
                                               std::unordered_map<std::string, std::uint32_t>& by_name,
                                               const std::vector<FileRecord>& add, std::uint32_t w);
/// Version 1's writer map, derived from files and blocks: rank r's first file (in `files` order) whose
/// writer is r, else the file of r's first block, else 0.
std::vector<std::uint32_t> derive_rank_file(const Index& idx);
/// What `uniform` is for variable `var` given its blocks (indices into idx.blocks): a local or scalar
/// variable with a block on every rank, all of the same extents and checksum (what commit marks).
bool uniform_blocks(const Index& idx, std::uint32_t var, const std::vector<std::uint32_t>& blocks);

}  // namespace ckpt::detail

#endif  // CKPT_BASE_INDEX_V2_HPP
