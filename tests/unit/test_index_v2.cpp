// Format v2 (two-level) index codec: split/assemble round trips for every kind and writer rule, the
// fixed byte layout of docs/format.md, finding a rank's block the N->N way, and every "Invalid" case of
// the spec that one object or the set of them can show is refused as corrupt; a partial index (restart)
// reads a rank's or a box's sub-indices and no other.
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <tuple>

#include "base/bytes.hpp"
#include "base/index_v2.hpp"
#include "base/partial_index.hpp"

using namespace ckpt;
using namespace ckpt::detail;

namespace {

constexpr std::uint64_t kToken = 0x5eed5eed12345678ull;

std::uint64_t f64_bits(double x) {
  std::uint64_t b = 0;
  std::memcpy(&b, &x, 8);
  return b;
}

VarRecord var(const std::string& name, DType t, RegionKind k, Shape global, std::uint32_t ndim) {
  VarRecord v;
  v.name = name;
  v.dtype = t;
  v.kind = k;
  v.ndim = ndim;
  v.global = std::move(global);
  return v;
}

BlockRecord block(std::uint32_t var, std::uint32_t rank, std::uint32_t file, Shape start, Shape count,
                  std::uint64_t length, std::uint64_t checksum) {
  BlockRecord b;
  b.var = var;
  b.rank = rank;
  b.file = file;
  b.start = std::move(start);
  b.count = std::move(count);
  b.length = length;
  b.checksum = checksum;
  return b;
}

/// An index as commit builds it (files in the order ranks report them, blocks rank by rank, uniform as
/// the blocks give, each rank's writer map entry its own data file), with every kind of variable: a
/// global array, a uniform scalar, per-rank locals (one uniform, one of bytes that rank 1 did not store),
/// a joined array with empty blocks, a global array without blocks; files per rank, one shared (group 1,
/// written by rank 0) and a placeholder no block names.
Index rich(std::uint32_t nranks) {
  Index idx;
  idx.step = 7;
  idx.nranks = nranks;
  idx.ckpt_id = 0x1234abcd;
  idx.created_unix = 1.7e9;
  idx.transport = "posix+mpiio";
  idx.attrs = {{"ckpt_version", "0.9"}, {"mpiio.hint.cb_nodes", "2"}, {"mpiio.hint.cb_nodes", "4"}};
  std::uint64_t rows = 0;
  for (std::uint32_t r = 0; r < nranks; ++r) rows += r % 3;
  idx.vars = {var("grid/rho", DType::f64, RegionKind::global, {2ull * nranks, 8}, 2),
              var("time", DType::f64, RegionKind::scalar, {}, 0),
              var("ids", DType::i32, RegionKind::local, {}, 1),
              var("parts", DType::f32, RegionKind::joined, {rows, 3}, 2),
              var("flag", DType::u8, RegionKind::local, {}, 1),
              var("blob", DType::bytes, RegionKind::local, {}, 1),
              var("ghost", DType::i64, RegionKind::global, {10}, 1)};
  idx.vars[0].attrs = {{"units", "g/cm^3"}};
  idx.vars[1].uniform = true;
  idx.vars[4].uniform = true;
  std::uint32_t shared = 0;
  std::uint64_t row = 0;
  for (std::uint32_t r = 0; r < nranks; ++r) {
    const auto data = static_cast<std::uint32_t>(idx.files.size());
    idx.files.push_back({"data." + std::to_string(r), r, 4096ull * (r + 1)});
    if (r == 0) {
      shared = static_cast<std::uint32_t>(idx.files.size());
      idx.files.push_back({"g1.coio.0", 0, 1u << 20});
      idx.files.push_back({"null", 0, 0});
    }
    idx.rank_file.push_back(data);
    BlockRecord rho = block(0, r, data, {2ull * r, 0}, {2, 8}, 128, 100 + r);
    rho.has_stats = true;
    rho.min_bits = f64_bits(-1.0 * r);
    rho.max_bits = f64_bits(r + 0.5);
    idx.blocks.push_back(rho);
    BlockRecord t = block(1, r, data, {}, {}, 8, 99);
    t.has_stats = true;
    t.min_bits = t.max_bits = f64_bits(1.5);
    idx.blocks.push_back(t);
    BlockRecord ids = block(2, r, shared, {0}, {r + 1ull}, 4 * (r + 1ull), 1000 + r);
    ids.has_stats = true;
    ids.min_bits = static_cast<std::uint64_t>(-static_cast<std::int64_t>(r));
    ids.max_bits = 10ull * r;
    idx.blocks.push_back(ids);
    const std::uint64_t n = r % 3;
    BlockRecord p = block(3, r, data, {row, 0}, {n, 3}, n * 12, 2000 + r);
    p.has_stats = n != 0;
    p.min_bits = n ? f64_bits(0.25) : 0;
    p.max_bits = n ? f64_bits(2.0 + r) : 0;
    idx.blocks.push_back(p);
    row += n;
    BlockRecord fl = block(4, r, data, {0}, {4}, 4, 5);
    fl.has_stats = true;
    fl.min_bits = 1;
    fl.max_bits = 2;
    idx.blocks.push_back(fl);
    if (r != 1) idx.blocks.push_back(block(5, r, data, {0}, {3}, 3, 77 + r));
  }
  return idx;
}

/// A writer rule with its parameters, and the three of them for rich(6).
struct RuleCase {
  WriterRule rule;
  std::uint32_t g;
  std::vector<std::uint32_t> map;
};
std::vector<RuleCase> rules_of_six() {
  return {{WriterRule::per_rank, 0, {}}, {WriterRule::groups, 4, {}}, {WriterRule::mapped, 0, {1, 0, 0, 2, 1, 2}}};
}

/// One global u8 array "x" of 2 elements per rank over `n` ranks (posix: a file per rank); rank r's block is
/// elements [2r, 2r + count(r)), or none when count(r) is nullopt.
Index one_global_array(std::uint32_t n, const std::function<std::optional<std::uint64_t>(std::uint32_t)>& count) {
  Index idx;
  idx.step = 1;
  idx.nranks = n;
  idx.transport = "posix";
  idx.vars = {var("x", DType::u8, RegionKind::global, {2ull * n}, 1)};
  for (std::uint32_t r = 0; r < n; ++r) {
    idx.files.push_back({"data." + std::to_string(r), r, 64});
    idx.rank_file.push_back(r);
    if (const auto c = count(r)) idx.blocks.push_back(block(0, r, r, {2ull * r}, {*c}, *c, r));
  }
  return idx;
}

/// The objects of `s` as a reader gets them: the root through its bytes.
Result<Index> assemble(const SplitIndex& s) {
  const auto root_bytes = encode_root_index(s.root);
  auto root = decode_root_index(root_bytes.data(), root_bytes.size());
  if (!root.ok()) return root.status();
  return assemble_index(root.value(), s.catalog.data(), s.catalog.size(), s.subindices);
}

SplitIndex split(const Index& idx, WriterRule rule, std::uint32_t g = 0, const std::vector<std::uint32_t>& map = {}) {
  auto s = split_index(idx, rule, g, kToken, map);
  EXPECT_TRUE(s.ok()) << s.status().to_string();
  return s.ok() ? s.value() : SplitIndex{};
}

void expect_corrupt(const Status& st, const std::string& why = "") {
  EXPECT_EQ(st.code(), Code::corrupt) << st.to_string();
  if (!why.empty()) EXPECT_NE(st.message().find(why), std::string::npos) << st.message();
}

/// The same checkpoint, whatever the order of files and blocks: files by name, blocks by (rank, var)
/// with their file's name.
void expect_equivalent(const Index& a, const Index& b) {
  EXPECT_EQ(a.step, b.step);
  EXPECT_EQ(a.nranks, b.nranks);
  EXPECT_EQ(a.ckpt_id, b.ckpt_id);
  EXPECT_EQ(a.transport, b.transport);
  EXPECT_EQ(a.attrs, b.attrs);
  ASSERT_EQ(a.vars.size(), b.vars.size());
  for (std::size_t v = 0; v < a.vars.size(); ++v) {
    EXPECT_EQ(a.vars[v].name, b.vars[v].name);
    EXPECT_EQ(a.vars[v].global, b.vars[v].global);
    EXPECT_EQ(a.vars[v].uniform, b.vars[v].uniform) << a.vars[v].name;
    EXPECT_EQ(a.vars[v].attrs, b.vars[v].attrs);
  }
  auto files = [](const Index& x) {
    std::map<std::string, std::pair<std::uint32_t, std::uint64_t>> m;
    for (auto& f : x.files) m[f.name] = {f.writer, f.bytes};
    return m;
  };
  EXPECT_EQ(files(a), files(b));
  auto blocks = [](const Index& x) {
    std::map<std::pair<std::uint32_t, std::uint32_t>, std::tuple<std::string, Shape, Shape, std::uint64_t>> m;
    for (auto& bl : x.blocks)
      m[{bl.rank, bl.var}] = {x.files[bl.file].name, bl.start, bl.count, bl.checksum ^ bl.min_bits ^ bl.length};
    return m;
  };
  EXPECT_EQ(blocks(a), blocks(b));
}

/// Body checksum recomputed after the bytes of an object were changed on purpose.
void reseal(std::vector<std::uint8_t>& o) {
  const std::uint64_t h = hash64(o.data() + kObjectHeaderBytes, o.size() - kObjectHeaderBytes - kObjectFooterBytes);
  std::memcpy(o.data() + o.size() - kObjectFooterBytes + 16, &h, 8);
}

/// The root naming catalog `c` (re-encoded) as split did.
void set_catalog(SplitIndex& s, const Catalog& c) {
  s.catalog = encode_catalog(c);
  s.root.catalog_length = s.catalog.size();
  s.root.catalog_hash = hash128(s.catalog.data(), s.catalog.size());
}

Catalog catalog_of(const SplitIndex& s) {
  auto c = decode_catalog(s.catalog.data(), s.catalog.size(), s.root.rule);
  EXPECT_TRUE(c.ok()) << c.status().to_string();
  return c.value();
}

/// Sub-index w replaced by `bytes`, its catalog entry and the root's catalog hash made to agree: only
/// what the sub-index says can be wrong.
void set_subindex(SplitIndex& s, std::uint32_t w, std::vector<std::uint8_t> bytes, std::uint64_t ranks = ~0ull) {
  Catalog c = catalog_of(s);
  s.subindices[w] = std::move(bytes);
  CatalogEntry& e = c.entries[w];
  e.length = s.subindices[w].size();
  e.checksum = hash64(s.subindices[w].data(), s.subindices[w].size());
  if (ranks != ~0ull) e.ranks = ranks;
  e.self_checksum = catalog_entry_checksum(e, c.token, w);
  set_catalog(s, c);
}

SubIndex subindex_of(const SplitIndex& s, std::uint32_t w) {
  auto sub = decode_subindex(s.subindices[w].data(), s.subindices[w].size(), s.root);
  EXPECT_TRUE(sub.ok()) << sub.status().to_string();
  return sub.value();
}

Status assemble_status(const SplitIndex& s) { return assemble(s).status(); }

std::uint64_t u64_at(const std::vector<std::uint8_t>& b, std::uint64_t at) {
  std::uint64_t x = 0;
  std::memcpy(&x, b.data() + at, 8);
  return x;
}
std::uint32_t u32_at(const std::vector<std::uint8_t>& b, std::uint64_t at) {
  std::uint32_t x = 0;
  std::memcpy(&x, b.data() + at, 4);
  return x;
}

}  // namespace

// ---- layout -------------------------------------------------------------------------------------------

TEST(IndexV2, FixedPartsHaveTheSpecifiedSizesAndPlaces) {
  const Index idx = rich(5);
  const SplitIndex s = split(idx, WriterRule::mapped, 0, {2, 0, 2, 1, 0});
  ASSERT_EQ(s.subindices.size(), 3u);
  // Every object: 16-byte header (magic | version 2 | flags), 40-byte footer naming body offset 16.
  const auto root = encode_root_index(s.root);
  for (const auto* o : {&root, &s.catalog, &s.subindices[0]}) {
    EXPECT_EQ(u32_at(*o, 8), 2u);
    EXPECT_EQ(u32_at(*o, 12), 0u);
    EXPECT_EQ(u64_at(*o, o->size() - 40), 16u);
    EXPECT_EQ(u64_at(*o, o->size() - 32), o->size() - 56);
    EXPECT_EQ(u64_at(*o, o->size() - 24), hash64(o->data() + 16, o->size() - 56));
    EXPECT_EQ(u32_at(*o, o->size() - 16), 2u);
    EXPECT_EQ(std::string(o->end() - 8, o->end()), "CKPTEND1");
  }
  EXPECT_EQ(std::string(root.begin(), root.begin() + 8), "CKPTINDX");
  EXPECT_EQ(std::string(s.catalog.begin(), s.catalog.begin() + 8), "CKPTCATL");
  EXPECT_EQ(std::string(s.subindices[0].begin(), s.subindices[0].begin() + 8), "CKPTSUBX");
  // Catalog body: step, id, token, W, reserved (32 bytes); writer w at body offset 32 + 40 w.
  EXPECT_EQ(kCatalogEntryBytes, 40u);
  EXPECT_EQ(static_cast<std::int64_t>(u64_at(s.catalog, 16)), idx.step);
  EXPECT_EQ(u64_at(s.catalog, 24), idx.ckpt_id);
  EXPECT_EQ(u64_at(s.catalog, 32), kToken);
  EXPECT_EQ(u32_at(s.catalog, 40), 3u);
  EXPECT_EQ(u32_at(s.catalog, 44), 0u);
  for (std::uint32_t w = 0; w < 3; ++w) {
    const std::uint64_t at = 16 + 32 + 40 * w;
    EXPECT_EQ(catalog_entry_position(w), at);
    EXPECT_EQ(u64_at(s.catalog, at), 0u);  // offset: each object at offset 0 of its own file
    EXPECT_EQ(u64_at(s.catalog, at + 8), s.subindices[w].size());
    EXPECT_EQ(u64_at(s.catalog, at + 16), hash64(s.subindices[w].data(), s.subindices[w].size()));
    // The entry checks itself: XXH3-64 of its bytes 0..31, the token and w as u64.
    std::uint8_t buf[48];
    std::memcpy(buf, s.catalog.data() + at, 32);
    const std::uint64_t tw[2] = {kToken, w};
    std::memcpy(buf + 32, tw, 16);
    EXPECT_EQ(u64_at(s.catalog, at + 32), hash64(buf, 48));
  }
  EXPECT_EQ(u64_at(s.catalog, 48 + 24), 2u);  // writer 0 holds ranks 1 and 4
  // Rule 2: u32 nranks, then rank r's writer at 48 + 40 W + 4 + 4 r.
  EXPECT_EQ(u32_at(s.catalog, 48 + 120), 5u);
  for (std::uint32_t r = 0; r < 5; ++r)
    EXPECT_EQ(u32_at(s.catalog, 48 + 120 + 4 + 4 * r), (std::vector<std::uint32_t>{2, 0, 2, 1, 0})[r]);
  EXPECT_EQ(catalog_directories_offset(3, WriterRule::mapped, 5), 48u + 120 + 4 + 20);
  EXPECT_EQ(catalog_directories_offset(3, WriterRule::groups, 5), 48u + 120);
  // The directories follow, where the VAR2s say; the catalog ends with them and the footer.
  std::uint64_t dir_bytes = 0;
  for (const Var2& v : s.root.vars) {
    if (v.dir.entries == 0) continue;
    EXPECT_GE(v.dir.offset, 48u + 120 + 24);
    EXPECT_EQ(v.dir.checksum, hash64(s.catalog.data() + v.dir.offset, v.dir.length));
    dir_bytes += v.dir.length;
  }
  EXPECT_EQ(s.catalog.size(), 48u + 120 + 24 + dir_bytes + 40);
  // Sub-index body: step, id, token, w, W, nranks (36 bytes), then its ranks.
  const auto& sub0 = s.subindices[0];
  EXPECT_EQ(u32_at(sub0, 16 + 24), 0u);
  EXPECT_EQ(u32_at(sub0, 16 + 28), 3u);
  EXPECT_EQ(u32_at(sub0, 16 + 32), 5u);
  EXPECT_EQ(u32_at(sub0, 16 + 36), 2u);
  EXPECT_EQ(u32_at(sub0, 16 + 40), 1u);
  EXPECT_EQ(u32_at(sub0, 16 + 44), 4u);
}

TEST(IndexV2, RootCarriesMergedStatisticsAndDirectories) {
  const Index idx = rich(5);
  const SplitIndex s = split(idx, WriterRule::groups, 2);
  const RootIndex& root = s.root;
  EXPECT_EQ(root.writers, 3u);
  EXPECT_EQ(root.base_step, idx.step);
  EXPECT_TRUE(root.refs.empty());
  const Var2& rho = root.vars[0];
  EXPECT_EQ(rho.n_blocks, 5u);
  EXPECT_EQ(rho.bytes, 5u * 128);
  EXPECT_TRUE(rho.has_stats);
  EXPECT_EQ(rho.min_bits, f64_bits(-4.0));
  EXPECT_EQ(rho.max_bits, f64_bits(4.5));
  EXPECT_TRUE(root.vars[1].var.uniform);   // time: same bytes everywhere
  EXPECT_FALSE(root.vars[2].var.uniform);  // ids
  EXPECT_TRUE(root.vars[4].var.uniform);   // flag
  EXPECT_FALSE(root.vars[5].var.uniform);  // blob: rank 1 stored none
  EXPECT_FALSE(root.vars[5].has_stats);
  EXPECT_EQ(root.vars[5].n_blocks, 4u);
  EXPECT_EQ(root.vars[2].min_bits, static_cast<std::uint64_t>(-4ll));
  EXPECT_EQ(root.vars[3].var.global[0], 0u + 1 + 2 + 0 + 1);                   // joined: the total row count
  for (int v : {1, 2, 4, 5, 6}) EXPECT_EQ(root.vars[v].dir.entries, 0u) << v;  // locals, scalars, no blocks
  EXPECT_EQ(root.vars[6].dir.offset, 0u);
  auto rho_dir = decode_directory(s.catalog.data() + rho.dir.offset, rho.dir.length, rho, root.writers);
  ASSERT_TRUE(rho_dir.ok()) << rho_dir.status().to_string();
  ASSERT_EQ(rho_dir->size(), 3u);  // one per writer, its ranks' bounding box
  EXPECT_EQ((*rho_dir)[1].first, 1u);
  EXPECT_EQ((*rho_dir)[1].writers, 1u);
  EXPECT_EQ((*rho_dir)[1].start, (Shape{4, 0}));
  EXPECT_EQ((*rho_dir)[1].count, (Shape{4, 8}));
  EXPECT_EQ((*rho_dir)[2].count, (Shape{2, 8}));
  const Var2& parts = root.vars[3];
  auto parts_dir = decode_directory(s.catalog.data() + parts.dir.offset, parts.dir.length, parts, root.writers);
  ASSERT_TRUE(parts_dir.ok());
  ASSERT_EQ(parts_dir->size(), 3u);
  EXPECT_EQ((*parts_dir)[0].start, (Shape{0, 0}));  // rows [0, 1): rank 0's empty block and rank 1's row
  EXPECT_EQ((*parts_dir)[0].count, (Shape{1, 3}));
  EXPECT_EQ((*parts_dir)[1].start, (Shape{1, 0}));  // rows [1, 3): rank 2's; rank 3's empty block at row 3
  EXPECT_EQ((*parts_dir)[1].count, (Shape{2, 3}));
}

// ---- round trips --------------------------------------------------------------------------------------

TEST(IndexV2, SplitThenAssembleGivesTheIndexBackByteForByte) {
  for (std::uint32_t nranks : {1u, 2u, 4u, 5u, 9u}) {
    const Index idx = rich(nranks < 2 ? 2 : nranks);
    const auto want = encode_index(idx);
    struct Case {
      WriterRule rule;
      std::uint32_t g;
    };
    for (Case c : {Case{WriterRule::per_rank, 0}, Case{WriterRule::groups, 1}, Case{WriterRule::groups, 2},
                   Case{WriterRule::groups, 3}, Case{WriterRule::groups, 64}}) {
      SCOPED_TRACE("nranks " + std::to_string(idx.nranks) + " rule " + std::to_string(static_cast<int>(c.rule)) +
                   " g " + std::to_string(c.g));
      const SplitIndex s = split(idx, c.rule, c.g);
      auto back = assemble(s);
      ASSERT_TRUE(back.ok()) << back.status().to_string();
      EXPECT_EQ(encode_index(back.value()), want);
      auto v1 = decode_index(want.data(), want.size());  // and it is a valid version-1 index
      EXPECT_TRUE(v1.ok());
    }
  }
}

TEST(IndexV2, ARankMapKeepsEveryRecordAndIsAFixedPoint) {
  const Index idx = rich(6);
  const std::vector<std::uint32_t> map = {3, 1, 1, 0, 3, 0};  // writer 2 holds no rank
  const SplitIndex s = split(idx, WriterRule::mapped, 0, map);
  ASSERT_EQ(s.subindices.size(), 4u);
  EXPECT_TRUE(subindex_of(s, 2).ranks.empty());
  auto back = assemble(s);
  ASSERT_TRUE(back.ok()) << back.status().to_string();
  expect_equivalent(back.value(), idx);
  EXPECT_EQ(back->rank_file, derive_rank_file(back.value()));
  const SplitIndex again = split(back.value(), WriterRule::mapped, 0, map);
  auto twice = assemble(again);
  ASSERT_TRUE(twice.ok());
  EXPECT_EQ(encode_index(twice.value()), encode_index(back.value()));
  // The assembled order is the one a split keeps: from then on the objects are the same bytes too.
  const SplitIndex third = split(twice.value(), WriterRule::mapped, 0, map);
  EXPECT_EQ(third.catalog, again.catalog);
  EXPECT_EQ(third.subindices, again.subindices);
  EXPECT_EQ(encode_root_index(third.root), encode_root_index(again.root));
}

TEST(IndexV2, OutOfOrderFilesAndBlocksComeBackInTheAssemblysOrder) {
  // Blocks not rank by rank (each rank's in their order): rank by rank again, byte for byte.
  const Index want = rich(4);
  Index idx = want;
  idx.blocks.clear();
  for (std::uint32_t r = 4; r-- > 0;)
    for (const BlockRecord& b : want.blocks)
      if (b.rank == r) idx.blocks.push_back(b);
  auto back = assemble(split(idx, WriterRule::per_rank));
  ASSERT_TRUE(back.ok()) << back.status().to_string();
  EXPECT_EQ(encode_index(back.value()), encode_index(want));
  // Files in another order: the same records, in the order of first appearance over the writers.
  idx = want;
  std::reverse(idx.files.begin(), idx.files.end());
  const auto nfiles = static_cast<std::uint32_t>(idx.files.size());
  for (auto& b : idx.blocks) b.file = nfiles - 1 - b.file;
  for (auto& f : idx.rank_file) f = nfiles - 1 - f;
  back = assemble(split(idx, WriterRule::per_rank));
  ASSERT_TRUE(back.ok()) << back.status().to_string();
  expect_equivalent(back.value(), want);
  EXPECT_EQ(back->files[0].name, "null");  // writer 0's files, in the index's order: null, g1.coio.0, data.0
  EXPECT_EQ(back->files[2].name, "data.0");
}

TEST(IndexV2, VersionTwoHasNoWriterMapAndAssemblyDerivesIt) {
  Index idx = rich(3);
  EXPECT_EQ(derive_rank_file(idx), idx.rank_file);  // each rank's own data file, as commit sets it
  idx.rank_file = {1, 1, 1};                        // the shared file: version 2 cannot say so
  auto back = assemble(split(idx, WriterRule::per_rank));
  ASSERT_TRUE(back.ok()) << back.status().to_string();
  EXPECT_EQ(back->rank_file, rich(3).rank_file);
  Index expect = idx;
  expect.rank_file = derive_rank_file(idx);
  EXPECT_EQ(encode_index(back.value()), encode_index(expect));
  // A rank's first file it is the writer of; else its first block's file; else file 0.
  Index few;
  few.nranks = 4;
  few.files = {{"data.1", 1, 8}, {"shared", 0, 8}};
  few.vars = {var("x", DType::u8, RegionKind::local, {}, 1)};
  few.blocks = {block(0, 1, 1, {0}, {1}, 1, 1), block(0, 2, 1, {0}, {1}, 1, 1)};
  EXPECT_EQ(derive_rank_file(few), (std::vector<std::uint32_t>{1, 0, 1, 0}));
}

TEST(IndexV2, UniformIsWhatTheBlocksGive) {
  Index idx = rich(3);
  const IndexLookup look(idx);
  for (std::uint32_t v = 0; v < idx.vars.size(); ++v)
    EXPECT_EQ(uniform_blocks(idx, v, look.blocks(v)), idx.vars[v].uniform) << idx.vars[v].name;
  idx.vars[2].uniform = true;  // claimed, not true: the split writes what the blocks give
  const SplitIndex s = split(idx, WriterRule::per_rank);
  EXPECT_FALSE(s.root.vars[2].var.uniform);
}

TEST(IndexV2, ManyWritersHoldingBlocksAreMergedIntoAtMost4096Entries) {
  const std::uint32_t n = 5000;
  const Index idx = one_global_array(
      n, [](std::uint32_t r) { return r % 7 == 3 ? std::nullopt : std::optional<std::uint64_t>(r % 5 == 0 ? 0 : 2); });
  const SplitIndex s = split(idx, WriterRule::per_rank);
  const Var2& x = s.root.vars[0];
  EXPECT_LE(x.dir.entries, kMaxDirEntries);
  EXPECT_GT(x.dir.entries, 2000u);
  auto dir = decode_directory(s.catalog.data() + x.dir.offset, x.dir.length, x, n);
  ASSERT_TRUE(dir.ok()) << dir.status().to_string();
  EXPECT_GT((*dir)[0].writers, 1u);
  auto back = assemble(s);
  ASSERT_TRUE(back.ok()) << back.status().to_string();
  EXPECT_EQ(encode_index(back.value()), encode_index(idx));
}

// ---- finding a block (N->N) ---------------------------------------------------------------------------

TEST(IndexV2, EachRankFindsItsBlocksFromOneEntryAndOneSubIndex) {
  const Index idx = rich(6);
  for (const RuleCase& c : rules_of_six()) {
    SplitIndex s = split(idx, c.rule, c.g, c.map);
    // The catalog at offset 1000 of its file, as in a series segment.
    std::vector<std::uint8_t> file(1000, 0xee);
    file.insert(file.end(), s.catalog.begin(), s.catalog.end());
    s.root.catalog_offset = 1000;
    const auto root_bytes = encode_root_index(s.root);
    auto root = decode_root_index(root_bytes.data(), root_bytes.size());
    ASSERT_TRUE(root.ok()) << root.status().to_string();
    for (std::uint32_t r = 0; r < idx.nranks; ++r) {
      auto at = locate_rank(root.value(), r);
      ASSERT_TRUE(at.ok());
      EXPECT_EQ(at->needs_map, c.rule == WriterRule::mapped);
      if (at->needs_map) {
        EXPECT_EQ(at->map_offset, 1000u + 48 + 40 * root->writers + 4 + 4 * r);
        at = locate_rank_by_map(root.value(), r, file.data() + at->map_offset, 4);
        ASSERT_TRUE(at.ok()) << at.status().to_string();
      }
      const std::uint32_t w = at->writer;
      EXPECT_EQ(w, c.rule == WriterRule::per_rank ? r : c.rule == WriterRule::groups ? r / 4 : c.map[r]);
      EXPECT_EQ(at->entry_offset, 1000u + 48 + 40 * w);
      auto e = decode_catalog_entry(file.data() + at->entry_offset, 40, root.value(), w);
      ASSERT_TRUE(e.ok()) << e.status().to_string();
      const auto& bytes = s.subindices[w];  // read at e->offset (0 here) for e->length bytes
      auto sub = decode_writer_subindex(bytes.data(), e->length, root.value(), e.value(), w);
      ASSERT_TRUE(sub.ok()) << sub.status().to_string();
      EXPECT_TRUE(sub->holds(r));
      for (const BlockRecord& want : idx.blocks) {
        if (want.rank != r) continue;
        const BlockRecord* got = sub->find(want.var, r);
        ASSERT_NE(got, nullptr);
        EXPECT_EQ(got->checksum, want.checksum);
        EXPECT_EQ(got->offset, want.offset);
        EXPECT_EQ(sub->files[got->file].name, idx.files[want.file].name);
      }
      if (r == 1) EXPECT_EQ(sub->find(5, 1), nullptr);  // rank 1 stored no blob
    }
    EXPECT_EQ(locate_rank(root.value(), idx.nranks).status().code(), Code::invalid_argument);
    // Another commit's entry, a damaged entry, a map entry beyond W.
    auto e0 = decode_catalog_entry(file.data() + 1048, 40, root.value(), 0);
    ASSERT_TRUE(e0.ok());
    RootIndex other = root.value();
    other.token ^= 1;
    expect_corrupt(decode_catalog_entry(file.data() + 1048, 40, other, 0).status(), "token");
    expect_corrupt(decode_catalog_entry(file.data() + 1048, 40, root.value(), 1).status());
    std::vector<std::uint8_t> entry(file.begin() + 1048, file.begin() + 1088);
    entry[3] ^= 1;
    expect_corrupt(decode_catalog_entry(entry.data(), 40, root.value(), 0).status());
    if (c.rule == WriterRule::mapped) {
      const std::uint8_t beyond[4] = {3, 0, 0, 0};
      expect_corrupt(locate_rank_by_map(root.value(), 0, beyond, 4).status(), "names writer 3");
    }
  }
}

TEST(IndexV2, ARankMapPointingElsewhereIsCaughtByTheSubIndex) {
  const Index idx = rich(4);
  SplitIndex s = split(idx, WriterRule::mapped, 0, {0, 1, 0, 1});
  Catalog c = catalog_of(s);
  c.rank_map[2] = 1;  // rank 2's entry damaged: it leads to writer 1, which does not hold it
  const auto bytes = encode_catalog(c);
  auto at = locate_rank_by_map(s.root, 2, bytes.data() + 48 + 40 * 2 + 4 + 4 * 2, 4);
  ASSERT_TRUE(at.ok());
  EXPECT_EQ(at->writer, 1u);
  auto sub = decode_writer_subindex(s.subindices[1].data(), s.subindices[1].size(), s.root, c.entries[1], 1);
  ASSERT_TRUE(sub.ok());
  EXPECT_FALSE(sub->holds(2));
  set_catalog(s, c);
  expect_corrupt(assemble_status(s), "the map");  // entry counts no longer match the map
}

// ---- damage -------------------------------------------------------------------------------------------

TEST(IndexV2, EveryFlippedByteAndEveryTruncationIsDetected) {
  const Index idx = rich(2);
  const SplitIndex s = split(idx, WriterRule::mapped, 0, {1, 0});
  const auto root = encode_root_index(s.root);
  auto decoders = [&](int which, const std::vector<std::uint8_t>& b, std::size_t n) -> Status {
    switch (which) {
      case 0: return decode_root_index(b.data(), n).status();
      case 1: return decode_catalog(b.data(), n, s.root.rule).status();
      default: return decode_subindex(b.data(), n, s.root).status();
    }
  };
  const std::vector<std::uint8_t>* objects[] = {&root, &s.catalog, &s.subindices[0], &s.subindices[1]};
  for (int o = 0; o < 4; ++o) {
    const auto& bytes = *objects[o];
    ASSERT_TRUE(decoders(o, bytes, bytes.size()).ok());
    for (std::size_t i = 0; i < bytes.size(); ++i) {
      auto bad = bytes;
      bad[i] ^= 0x5a;
      const Status st = decoders(o, bad, bad.size());
      EXPECT_EQ(st.code(), Code::corrupt) << "object " << o << ", flip at byte " << i << ": " << st.to_string();
      // The set of objects notices too (a catalog or sub-index is also checked against its root's hash).
      if (o == 0) continue;
      SplitIndex t = s;
      if (o == 1) t.catalog = bad;
      if (o >= 2) t.subindices[o - 2] = bad;
      EXPECT_EQ(assemble_status(t).code(), Code::corrupt) << "object " << o << ", flip at byte " << i;
    }
    for (std::size_t n = 0; n < bytes.size(); ++n)
      EXPECT_EQ(decoders(o, bytes, n).code(), Code::corrupt) << "object " << o << " truncated to " << n;
  }
}

TEST(IndexV2, RootWriterFieldsAreChecked) {
  const SplitIndex s = split(rich(6), WriterRule::groups, 4);
  auto rejected = [](RootIndex r, const std::string& why) {
    const auto b = encode_root_index(r);
    expect_corrupt(decode_root_index(b.data(), b.size()).status(), why);
  };
  RootIndex r = s.root;
  ASSERT_TRUE(decode_root_index(encode_root_index(r).data(), encode_root_index(r).size()).ok());
  r.writers = 0;
  rejected(r, "0 writers for 6 ranks");
  r = s.root;
  r.writers = 7;
  rejected(r, "7 writers for 6 ranks");
  r = s.root;
  r.rule = static_cast<WriterRule>(3);
  rejected(r, "unknown writer rule 3");
  r = s.root;
  r.rule = WriterRule::per_rank;
  r.g = 0;
  rejected(r, "rule 0 with 2 writers");
  r = s.root;
  r.g = 0;
  rejected(r, "rule 1 with g = 0");
  r = s.root;
  r.g = 2;  // ceil(6 / 2) = 3 writers, not 2
  rejected(r, "rule 1 with g = 2");
  r = s.root;
  r.rule = WriterRule::mapped;
  rejected(r, "g = 4 without rule 1");
  r = s.root;
  r.token = 0;
  rejected(r, "zero token");
  r = s.root;
  r.catalog_length = 16 + 32 + 80 + 39;  // cannot hold 2 entries and the footer
  rejected(r, "cannot hold 2 writers");
  r = s.root;
  r.catalog_offset = ~0ull - 10;
  rejected(r, "catalog extent overflows");
  r = s.root;
  r.nranks = 0;
  rejected(r, "zero ranks");
  // Header flags: bit 0 without references, any other bit; version 3; the reserved u32 after g.
  auto b = encode_root_index(s.root);
  for (std::uint32_t flags : {1u, 2u, 0x80000000u}) {
    auto bad = b;
    std::memcpy(bad.data() + 12, &flags, 4);
    expect_corrupt(decode_root_index(bad.data(), bad.size()).status());
  }
  auto v3 = b;
  v3[8] = 3;
  expect_corrupt(decode_root_index(v3.data(), v3.size()).status(), "version 3 unsupported");
  expect_corrupt(decode_index(b.data(), b.size()).status(), "version 2 unsupported");  // a version-1 reader
  const std::size_t after_g = 16 + 8 + 4 + 8 + 8 + 4 + s.root.transport.size() + 4 + [&] {
    std::size_t n = 0;
    for (auto& kv : s.root.attrs) n += 8 + kv.first.size() + kv.second.size();
    return n;
  }() + 8 + 4 + 4 + 4;
  EXPECT_EQ(u32_at(b, after_g - 4), 4u);  // g
  auto reserved = b;
  reserved[after_g] = 1;
  reseal(reserved);
  expect_corrupt(decode_root_index(reserved.data(), reserved.size()).status(), "reserved field after g");
}

TEST(IndexV2, RootReferencesAreDecodedAndChecked) {
  const SplitIndex s = split(rich(2), WriterRule::per_rank);
  RootIndex r = s.root;
  r.step = 10;
  r.base_step = 8;
  r.refs = {{0, 8, 77}, {0, 9, 78}, {1, 3, 0}};
  auto b = encode_root_index(r);
  EXPECT_EQ(u32_at(b, 12), kRootFlagRefs);
  auto back = decode_root_index(b.data(), b.size());
  ASSERT_TRUE(back.ok()) << back.status().to_string();
  EXPECT_EQ(back->refs, r.refs);
  EXPECT_EQ(back->base_step, 8);
  auto rejected = [](const RootIndex& x, const std::string& why) {
    const auto bytes = encode_root_index(x);
    expect_corrupt(decode_root_index(bytes.data(), bytes.size()).status(), why);
  };
  RootIndex x = r;
  x.refs[0].kind = 2;
  rejected(x, "unknown kind 2");
  x = r;
  x.refs[2].ckpt_id = 5;  // a segment has no id
  rejected(x, "non-zero reserved");
  x = r;
  x.refs[0].step = 7;  // before the base
  rejected(x, "outside [base step, step)");
  x = r;
  x.refs[1].step = 10;  // not before this step
  rejected(x, "outside [base step, step)");
  x = r;
  x.refs[1] = x.refs[0];
  rejected(x, "listed twice");
  x = r;
  x.base_step = 10;
  rejected(x, "not below step");
  x = s.root;
  x.base_step = x.step - 1;  // no references: its own base
  rejected(x, "without references");
  // A reserved field of a REFSUM, in place.
  const std::size_t refs_at = b.size() - 40 - 4 - [&] {
    std::size_t n = 0;
    ByteWriter w;
    for (auto& v : r.vars) put_var_record(w, v.var), n += 72;
    return n + w.bytes().size();
  }() - 3 * 32;
  auto bad = b;
  EXPECT_EQ(u32_at(bad, refs_at), 0u);  // kind 0
  bad[refs_at + 4] = 1;
  reseal(bad);
  expect_corrupt(decode_root_index(bad.data(), bad.size()).status(), "non-zero reserved");
  bad = b;
  bad[refs_at + 24] = 1;
  reseal(bad);
  expect_corrupt(decode_root_index(bad.data(), bad.size()).status(), "non-zero reserved");
}

TEST(IndexV2, Var2FieldsAreChecked) {
  const SplitIndex s = split(rich(3), WriterRule::per_rank);
  auto rejected = [](const RootIndex& r, const std::string& why) {
    const auto b = encode_root_index(r);
    expect_corrupt(decode_root_index(b.data(), b.size()).status(), why);
  };
  RootIndex r = s.root;
  r.vars[5].min_bits = 3;  // blob has no statistics
  rejected(r, "min/max without stats");
  r = s.root;
  r.vars[0].n_blocks = 4;
  rejected(r, "4 blocks on 3 ranks");
  r = s.root;
  r.vars[1].dir = r.vars[0].dir;  // a scalar with a directory
  rejected(r, "scalar variable 'time' has a directory");
  r = s.root;
  r.vars[0].dir.entries = kMaxDirEntries + 1;
  r.vars[0].dir.length = (kMaxDirEntries + 1ull) * (8 + 32);
  rejected(r, "4097 entries");
  r = s.root;
  r.vars[0].dir.length += 1;
  rejected(r, "bytes for 3 entries");
  r = s.root;
  r.vars[6].dir.offset = 100;  // no entries: offset, length and checksum 0
  rejected(r, "empty directory");
  r = s.root;
  r.vars[0].dir.offset = 16;  // over the catalog's fixed part
  rejected(r, "outside the catalog's directories");
  r = s.root;
  r.vars[0].dir.offset = r.catalog_length - 40 - r.vars[0].dir.length + 1;  // into the footer
  rejected(r, "outside the catalog's directories");
  r = s.root;
  r.vars[3].var.name = "grid/rho";
  rejected(r, "appears twice");
  // The flags byte and its 7 zero bytes, in place: they follow the version-1 VAR of variable 0.
  const auto b = encode_root_index(s.root);
  ByteWriter w;
  put_var_record(w, s.root.vars[0].var);
  std::size_t at = 0;
  for (std::size_t i = 0; i + w.bytes().size() <= b.size(); ++i)
    if (std::memcmp(b.data() + i, w.bytes().data(), w.bytes().size()) == 0) at = i + w.bytes().size();
  ASSERT_NE(at, 0u);
  EXPECT_EQ(b[at], 1);  // rho has statistics
  for (std::uint8_t v : {2, 3, 0x81}) {
    auto bad = b;
    bad[at] = v;
    reseal(bad);
    expect_corrupt(decode_root_index(bad.data(), bad.size()).status(), "unknown flag bits");
  }
  for (std::size_t i = 1; i < 8; ++i) {
    auto bad = b;
    bad[at + i] = 1;
    reseal(bad);
    expect_corrupt(decode_root_index(bad.data(), bad.size()).status(), "non-zero reserved byte");
  }
  auto bad = b;
  bad[at + 8 * 5 + 4] = 1;  // the u32 after `entries`
  reseal(bad);
  expect_corrupt(decode_root_index(bad.data(), bad.size()).status(), "non-zero reserved field");
}

TEST(IndexV2, ACatalogOfAnotherCommitStepOrCheckpointIsRefused) {
  const SplitIndex s = split(rich(4), WriterRule::groups, 2);
  ASSERT_TRUE(assemble(s).ok());
  auto with = [&](auto change, const std::string& why) {
    SplitIndex t = s;
    Catalog c = catalog_of(t);
    change(c);
    set_catalog(t, c);
    expect_corrupt(assemble_status(t), why);
  };
  with([](Catalog& c) { c.step += 1; }, "disagrees with its root index");
  with([](Catalog& c) { c.ckpt_id += 1; }, "disagrees with its root index");
  with([](Catalog& c) { c.writers = 3; }, "");  // no longer decodes: 2 entries for 3 writers
  with(
      [](Catalog& c) {
        c.token += 1;  // another attempt's catalog, self-consistent
        for (std::uint32_t w = 0; w < c.writers; ++w)
          c.entries[w].self_checksum = catalog_entry_checksum(c.entries[w], c.token, w);
      },
      "disagrees with its root index");
  with([](Catalog& c) { c.entries[1].ranks = 3; }, "damaged");  // without its own checksum
  with(
      [](Catalog& c) {
        c.entries[1].ranks = 3;
        c.entries[1].self_checksum = catalog_entry_checksum(c.entries[1], c.token, 1);
      },
      "holds 3 ranks, the rule gives 2");
  // The root's hash names the catalog: another catalog with the same content but one byte.
  SplitIndex t = s;
  t.catalog[20] ^= 1;
  reseal(t.catalog);
  ASSERT_TRUE(decode_catalog(t.catalog.data(), t.catalog.size(), t.root.rule).ok());  // it decodes alone...
  expect_corrupt(assemble_status(t), "not the one the root index names");             // ...but is not this root's
  // Catalog flags, a zero W, the reserved field, a rank map entry beyond W.
  auto raw = s.catalog;
  raw[12] = 1;
  expect_corrupt(decode_catalog(raw.data(), raw.size(), WriterRule::groups).status(), "flags 1");
  raw = s.catalog;
  raw[44] = 1;
  reseal(raw);
  expect_corrupt(decode_catalog(raw.data(), raw.size(), WriterRule::groups).status(), "reserved");
  Catalog c = catalog_of(s);
  c.writers = 0;
  c.entries.clear();
  auto zero = encode_catalog(c);
  expect_corrupt(decode_catalog(zero.data(), zero.size(), WriterRule::groups).status(), "zero writers");
  const SplitIndex m = split(rich(4), WriterRule::mapped, 0, {0, 1, 1, 0});
  Catalog mc = catalog_of(m);
  mc.rank_map[3] = 2;
  auto beyond = encode_catalog(mc);
  expect_corrupt(decode_catalog(beyond.data(), beyond.size(), WriterRule::mapped).status(), "names writer 2");
  mc = catalog_of(m);
  mc.rank_map.pop_back();
  SplitIndex short_map = m;
  set_catalog(short_map, mc);
  expect_corrupt(assemble_status(short_map));
}

TEST(IndexV2, ASubIndexOfAnotherCommitStepCheckpointOrWriterIsRefused) {
  const SplitIndex s = split(rich(4), WriterRule::groups, 2);
  auto with = [&](std::uint32_t w, auto change, const std::string& why) {
    SplitIndex t = s;
    SubIndex sub = subindex_of(t, w);
    change(sub);
    set_subindex(t, w, encode_subindex(sub), sub.ranks.size());
    expect_corrupt(assemble_status(t), why);
  };
  with(
      1, [](SubIndex& x) { x.token += 1; }, "not its root index's");
  with(
      1, [](SubIndex& x) { x.step -= 1; }, "not its root index's");
  with(
      1, [](SubIndex& x) { x.ckpt_id += 1; }, "not its root index's");
  with(
      1, [](SubIndex& x) { x.w = 0; }, "not its root index's");
  with(
      0, [](SubIndex& x) { x.writers = 3; }, "not its root index's");
  with(
      0, [](SubIndex& x) { x.nranks = 5; }, "not its root index's");
  // Sub-index 1 given writer 0's bytes (whose w is 0), the catalog entry made to name them.
  SplitIndex t = s;
  set_subindex(t, 1, s.subindices[0]);
  expect_corrupt(assemble_status(t), "not its root index's");
  // The catalog entry's checksum or length does not name the sub-index.
  t = s;
  t.subindices[1].push_back(0);
  expect_corrupt(assemble_status(t), "not the one its catalog entry names");
  t = s;
  t.subindices[0] = s.subindices[1];
  expect_corrupt(assemble_status(t), "not the one its catalog entry names");
  // Wrong number of sub-indices: the caller's mistake.
  t = s;
  t.subindices.pop_back();
  EXPECT_EQ(assemble_status(t).code(), Code::invalid_argument);
}

TEST(IndexV2, EveryRankIsInExactlyOneSubIndex) {
  // Rule 1: writer 1 claims rank 1 too (and its catalog entry agrees), or gives up rank 3.
  const SplitIndex s = split(rich(4), WriterRule::groups, 2);
  SplitIndex t = s;
  SubIndex sub = subindex_of(t, 1);
  sub.ranks.insert(sub.ranks.begin(), 1);
  set_subindex(t, 1, encode_subindex(sub), 3);
  expect_corrupt(assemble_status(t));
  t = s;
  sub = subindex_of(t, 1);
  sub.ranks = {1, 3};  // rank 2 in no sub-index, rank 1 in two
  std::vector<BlockRecord> rank3;
  for (auto& b : sub.blocks)
    if (b.rank == 3) rank3.push_back(b);
  sub.blocks = rank3;
  set_subindex(t, 1, encode_subindex(sub), 2);
  expect_corrupt(assemble_status(t), "rule 1 gives another writer");
  t = s;
  sub = subindex_of(t, 1);
  sub.ranks = {2};
  std::vector<BlockRecord> kept;
  for (auto& b : sub.blocks)
    if (b.rank == 2) kept.push_back(b);
  sub.blocks = kept;
  set_subindex(t, 1, encode_subindex(sub), 1);
  expect_corrupt(assemble_status(t));  // rank 3 nowhere: the catalog entry must say 2 for rule 1
  // Rule 2: a sub-index holding a rank the map gives another writer; the map and the entries made to agree.
  const SplitIndex m = split(rich(4), WriterRule::mapped, 0, {0, 1, 0, 1});
  t = m;
  sub = subindex_of(t, 1);
  sub.ranks = {0, 1, 3};
  set_subindex(t, 1, encode_subindex(sub), 3);
  expect_corrupt(assemble_status(t), "the map");
  t = m;
  Catalog c = catalog_of(t);
  c.rank_map = {0, 1, 1, 1};  // rank 2 now says writer 1, which does not hold it
  c.entries[0].ranks = 1;
  c.entries[1].ranks = 3;
  for (std::uint32_t w = 0; w < 2; ++w) c.entries[w].self_checksum = catalog_entry_checksum(c.entries[w], c.token, w);
  set_catalog(t, c);
  expect_corrupt(assemble_status(t));
  // A sub-index listing a rank twice, or out of order, or beyond nranks.
  for (const std::vector<std::uint32_t>& ranks :
       {std::vector<std::uint32_t>{1, 1}, std::vector<std::uint32_t>{3, 1}, std::vector<std::uint32_t>{1, 4}}) {
    t = m;
    sub = subindex_of(t, 1);
    sub.ranks = ranks;
    sub.blocks.clear();
    const auto bytes = encode_subindex(sub);
    expect_corrupt(decode_subindex(bytes.data(), bytes.size(), t.root).status(), "rank list not ascending");
  }
}

TEST(IndexV2, SubIndexRecordsAreCheckedAsVersionOneChecksThem) {
  const SplitIndex s = split(rich(4), WriterRule::groups, 2);
  auto rejected = [&](auto change, const std::string& why) {
    SubIndex sub = subindex_of(s, 1);
    change(sub);
    const auto b = encode_subindex(sub);
    expect_corrupt(decode_subindex(b.data(), b.size(), s.root).status(), why);
  };
  rejected([](SubIndex& x) { x.blocks[0].rank = 0; }, "which it does not hold");
  rejected([](SubIndex& x) { x.blocks[0].var = 99; }, "missing variable, file or rank");
  rejected([](SubIndex& x) { x.blocks[0].file = 99; }, "missing variable, file or rank");
  rejected([](SubIndex& x) { x.blocks.push_back(x.blocks[0]); }, "has two blocks of 'grid/rho'");
  rejected([](SubIndex& x) { x.blocks[0].start = {7, 0}; }, "lies outside the global shape");
  rejected([](SubIndex& x) { x.blocks[0].length = 1; }, "length disagrees with its extents");
  rejected([](SubIndex& x) { x.files[0].name = "../x"; }, "not allowed");
  rejected([](SubIndex& x) { x.files[0].writer = 4; }, "names writer rank 4");
  // Pieces (flag bit 0) only under a root with references, and then only with a pieced block (unit_incremental
  // has the rest).
  const auto b = s.subindices[1];
  auto pieces = b;
  pieces[12] = 1;
  expect_corrupt(decode_subindex(pieces.data(), pieces.size(), s.root).status(), "without references");
  RootIndex with_refs = s.root;
  with_refs.step = 9;
  with_refs.base_step = 8;
  with_refs.refs = {{0, 8, 1}};
  expect_corrupt(decode_subindex(pieces.data(), pieces.size(), with_refs).status(), "no block is pieced");
  pieces[12] = 2;
  expect_corrupt(decode_subindex(pieces.data(), pieces.size(), s.root).status(), "flags 2");
  // n_refs sits just before the u64 block count.
  SubIndex sub = subindex_of(s, 1);
  ByteWriter w;
  for (auto& bl : sub.blocks) put_block_record(w, bl);
  const std::size_t nrefs_at = b.size() - 40 - w.bytes().size() - 8 - 4;
  EXPECT_EQ(u32_at(b, nrefs_at), 0u);
  auto refs = b;
  refs[nrefs_at] = 1;
  reseal(refs);
  expect_corrupt(decode_subindex(refs.data(), refs.size(), s.root).status(), "REFs without pieces");
  auto bit1 = b;  // BLOCK2 flag bit 1 (pieces) of the first block
  bit1[nrefs_at + 4 + 8 + 12] = 3;
  reseal(bit1);
  expect_corrupt(decode_subindex(bit1.data(), bit1.size(), s.root).status(), "unknown flag bits");
}

TEST(IndexV2, AFileIsOneRecordWhereverItIsListed) {
  const SplitIndex s = split(rich(4), WriterRule::per_rank);
  SplitIndex t = s;
  SubIndex sub = subindex_of(t, 2);
  bool changed = false;
  for (auto& f : sub.files)
    if (f.name == "g1.coio.0") f.bytes += 1, changed = true;
  ASSERT_TRUE(changed);
  set_subindex(t, 2, encode_subindex(sub));
  expect_corrupt(assemble_status(t), "file 'g1.coio.0' is listed with writer 0 and 1048577 bytes by sub-index 2");
  Index twice = rich(2);
  twice.files[2].name = "data.0";
  EXPECT_EQ(split_index(twice, WriterRule::per_rank, 0, kToken).status().code(), Code::invalid_argument);
}

TEST(IndexV2, RootStatisticsMustBeWhatTheBlocksGive) {
  const SplitIndex s = split(rich(4), WriterRule::groups, 2);
  auto with = [&](auto change, const std::string& why) {
    SplitIndex t = s;
    change(t.root);
    expect_corrupt(assemble_status(t), why);
  };
  with([](RootIndex& r) { r.vars[0].n_blocks -= 1; }, "'grid/rho' has 3 blocks");
  with([](RootIndex& r) { r.vars[2].bytes += 4; }, "'ids' has 4 blocks of");
  with([](RootIndex& r) { r.vars[0].min_bits = f64_bits(-3.5); }, "min/max of 'grid/rho'");
  with([](RootIndex& r) { r.vars[2].max_bits += 1; }, "min/max of 'ids'");
  with([](RootIndex& r) { r.vars[5].has_stats = true; }, "min/max of 'blob'");
  with(
      [](RootIndex& r) {
        r.vars[0].has_stats = false;
        r.vars[0].min_bits = r.vars[0].max_bits = 0;
      },
      "min/max of 'grid/rho'");
  with([](RootIndex& r) { r.vars[1].var.uniform = false; }, "'time' is not uniform");
  with([](RootIndex& r) { r.vars[2].var.uniform = true; }, "'ids' is uniform");
  with([](RootIndex& r) { r.vars[3].var.global[0] += 1; }, "joined array 'parts' has 4 rows but its blocks hold 3");
  // -0.0 and +0.0 are the same minimum in the stored class (compared as doubles).
  Index z = rich(2);
  z.blocks[0].min_bits = f64_bits(0.0);
  z.blocks[6].min_bits = f64_bits(-0.0);
  z.blocks[6].max_bits = f64_bits(1.0);
  SplitIndex zs = split(z, WriterRule::per_rank);
  zs.root.vars[0].min_bits = zs.root.vars[0].min_bits == f64_bits(0.0) ? f64_bits(-0.0) : f64_bits(0.0);
  EXPECT_TRUE(assemble(zs).ok());
}

TEST(IndexV2, DirectoriesAreCheckedAlone) {
  const SplitIndex s = split(rich(6), WriterRule::per_rank);
  const Var2& rho = s.root.vars[0];
  auto dir = decode_directory(s.catalog.data() + rho.dir.offset, rho.dir.length, rho, 6);
  ASSERT_TRUE(dir.ok());
  auto rejected = [&](std::vector<DirEntry> entries, const std::string& why, const Var2& base) {
    Var2 v = base;
    const auto b = encode_directory(entries);
    v.dir.entries = static_cast<std::uint32_t>(entries.size());
    v.dir.length = b.size();
    v.dir.checksum = hash64(b.data(), b.size());
    expect_corrupt(decode_directory(b.data(), b.size(), v, 6).status(), why);
  };
  auto d = dir.value();
  std::swap(d[1], d[2]);
  rejected(d, "overlaps or precedes", rho);
  d = dir.value();
  d[1].writers = 2;  // [1, 3) and [2, 3)
  rejected(d, "overlaps or precedes", rho);
  d = dir.value();
  d[2].writers = 0;
  rejected(d, "names writers [2, 2)", rho);
  d = dir.value();
  d[5].writers = 2;
  rejected(d, "names writers [5, 7) of 6", rho);
  d = dir.value();
  d[3].count[0] = 100;
  rejected(d, "outside the global shape", rho);
  d = dir.value();
  d[3].start[1] = ~0ull;
  rejected(d, "outside the global shape", rho);
  const Var2& parts = s.root.vars[3];
  auto pdir = decode_directory(s.catalog.data() + parts.dir.offset, parts.dir.length, parts, 6);
  ASSERT_TRUE(pdir.ok());
  d = pdir.value();
  d[1].count[1] = 2;
  rejected(d, "not a set of whole rows", parts);
  std::vector<DirEntry> many;
  for (std::uint32_t i = 0; i <= kMaxDirEntries; ++i) many.push_back(DirEntry{i, 1, {0, 0}, {0, 0}});
  rejected(many, "4097 entries", rho);
  // The checksum and the size the VAR2 gives.
  auto bytes = std::vector<std::uint8_t>(s.catalog.begin() + rho.dir.offset,
                                         s.catalog.begin() + rho.dir.offset + rho.dir.length);
  bytes[0] ^= 1;
  expect_corrupt(decode_directory(bytes.data(), bytes.size(), rho, 6).status(), "checksum mismatch");
  expect_corrupt(decode_directory(bytes.data(), bytes.size() - 1, rho, 6).status(), "bytes for 6 entries");
  expect_corrupt(decode_directory(bytes.data(), 0, s.root.vars[1], 6).status(), "has none");
}

TEST(IndexV2, BlocksMustLieInsideTheirWritersDirectoryEntry) {
  const SplitIndex s = split(rich(4), WriterRule::per_rank);
  auto with = [&](std::uint32_t var, auto change) {
    SplitIndex t = s;
    Catalog c = catalog_of(t);
    const Var2& v = t.root.vars[var];
    const std::uint64_t at = v.dir.offset - catalog_directories_offset(4, WriterRule::per_rank, 4);
    auto dir = decode_directory(t.catalog.data() + v.dir.offset, v.dir.length, v, 4);
    EXPECT_TRUE(dir.ok());
    auto entries = dir.value();
    change(entries);
    auto b = encode_directory(entries);
    EXPECT_LE(b.size(), v.dir.length);  // fewer entries: the directories after it move down
    c.directories.erase(c.directories.begin() + at, c.directories.begin() + at + v.dir.length);
    c.directories.insert(c.directories.begin() + at, b.begin(), b.end());
    const std::int64_t shrink = static_cast<std::int64_t>(v.dir.length) - static_cast<std::int64_t>(b.size());
    for (Var2& other : t.root.vars)
      if (other.dir.entries != 0 && other.dir.offset > v.dir.offset) other.dir.offset -= shrink;
    Var2& mine = t.root.vars[var];
    mine.dir.entries = static_cast<std::uint32_t>(entries.size());
    mine.dir.length = b.size();
    mine.dir.checksum = hash64(b.data(), b.size());
    set_catalog(t, c);
    return assemble_status(t);
  };
  expect_corrupt(with(0, [](std::vector<DirEntry>& e) { e[2].count[0] = 1; }),
                 "the block of rank 2 (writer 2) lies outside");
  expect_corrupt(with(0, [](std::vector<DirEntry>& e) { e.erase(e.begin() + 1); }),
                 "writer 1 holds a block of it (rank 1)");
  expect_corrupt(with(3, [](std::vector<DirEntry>& e) { e.erase(e.begin()); }), "writer 0 holds a block of it");
  expect_corrupt(with(3,
                      [](std::vector<DirEntry>& e) {
                        e[3].start[0] = 0;  // rank 3's empty block is at row 3
                        e[3].count[0] = 2;
                      }),
                 "rank 3 (writer 3) lies outside");
  // Merging writers is allowed: one entry for all four, their bounding box, or a larger box.
  EXPECT_TRUE(with(0, [](std::vector<DirEntry>& e) { e = {DirEntry{0, 4, {0, 0}, {8, 8}}}; }).ok());
  EXPECT_TRUE(with(3, [](std::vector<DirEntry>& e) {
                e = {DirEntry{0, 2, {0, 0}, {1, 3}}, DirEntry{2, 1, {1, 0}, {2, 3}}, DirEntry{3, 1, {0, 0}, {3, 3}}};
              }).ok());
  expect_corrupt(with(0, [](std::vector<DirEntry>& e) { e = {DirEntry{0, 4, {0, 0}, {7, 8}}}; }), "rank 3");
}

TEST(IndexV2, SplitRefusesWhatCannotBeSplit) {
  const Index idx = rich(4);
  auto code = [&](WriterRule rule, std::uint32_t g, std::uint64_t token, std::vector<std::uint32_t> map) {
    return split_index(idx, rule, g, token, map).status().code();
  };
  EXPECT_EQ(code(WriterRule::per_rank, 0, 0, {}), Code::invalid_argument);  // token 0
  EXPECT_EQ(code(WriterRule::groups, 0, kToken, {}), Code::invalid_argument);
  EXPECT_EQ(code(WriterRule::per_rank, 2, kToken, {}), Code::invalid_argument);
  EXPECT_EQ(code(WriterRule::mapped, 0, kToken, {0, 1}), Code::invalid_argument);
  EXPECT_EQ(code(WriterRule::mapped, 0, kToken, {}), Code::invalid_argument);
  EXPECT_EQ(code(WriterRule::mapped, 0, kToken, {0, 1, 4, 0}), Code::invalid_argument);  // W > nranks
  EXPECT_EQ(code(WriterRule::mapped, 0, kToken, {0, 1, ~0u, 0}), Code::invalid_argument);
  EXPECT_EQ(code(static_cast<WriterRule>(3), 0, kToken, {}), Code::invalid_argument);
  Index bad = idx;
  bad.blocks[0].file = 99;
  EXPECT_EQ(split_index(bad, WriterRule::per_rank, 0, kToken).status().code(), Code::invalid_argument);
}

// ---- a partial index (restart's lazy reading) ----------------------------------------------------------

namespace {

/// Writes `s` into a fresh directory as the directory layout keeps it: index, catalog, index.<w>.
std::string write_split(const SplitIndex& s, const std::string& name) {
  const std::string dir = ::testing::TempDir() + "partial-" + name + "-" + std::to_string(::getpid());
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  auto put = [&](const std::string& f, const std::vector<std::uint8_t>& b) {
    std::ofstream(dir + "/" + f, std::ios::binary).write(reinterpret_cast<const char*>(b.data()), b.size());
  };
  put("index", encode_root_index(s.root));
  put("catalog", s.catalog);
  for (std::size_t w = 0; w < s.subindices.size(); ++w) put("index." + std::to_string(w), s.subindices[w]);
  return dir;
}

/// The blocks of `idx` (a partial one's, or the whole one's) of variable `var`, as (rank, checksum, file name).
std::vector<std::tuple<std::uint32_t, std::uint64_t, std::string>> blocks_of(const Index& idx, std::uint32_t var) {
  std::vector<std::tuple<std::uint32_t, std::uint64_t, std::string>> out;
  for (const BlockRecord& b : idx.blocks)
    if (b.var == var) out.emplace_back(b.rank, b.checksum, idx.files[b.file].name);
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

TEST(PartialIndex, EachRankReadsTheRootOneEntryAndItsOwnSubIndex) {
  const Index idx = rich(6);
  for (const RuleCase& c : rules_of_six()) {
    SCOPED_TRACE("rule " + std::to_string(static_cast<int>(c.rule)));
    const SplitIndex s = split(idx, c.rule, c.g, c.map);
    const std::string dir = write_split(s, "own");
    const auto root = encode_root_index(s.root);
    for (std::uint32_t r = 0; r < idx.nranks; ++r) {
      auto p = PartialIndex::open_v2(dir, root, 7);
      ASSERT_TRUE(p.ok()) << p.status().to_string();
      EXPECT_FALSE(p->whole());
      EXPECT_EQ(p->index().vars.size(), idx.vars.size());
      EXPECT_TRUE(p->index().blocks.empty()) << "nothing before it is asked";
      ASSERT_TRUE(p.value().load_rank(r).ok());
      const std::uint32_t w = c.rule == WriterRule::per_rank ? r : c.rule == WriterRule::groups ? r / 4 : c.map[r];
      EXPECT_EQ(p->subindices_read(), 1u);
      EXPECT_EQ(p->bytes_read(), root.size() + 40 + (c.rule == WriterRule::mapped ? 4 : 0) + s.subindices[w].size());
      // Its blocks are the whole index's, with their files; a second ask reads nothing.
      for (std::uint32_t v = 0; v < idx.vars.size(); ++v) {
        auto want = blocks_of(idx, v);
        want.erase(std::remove_if(want.begin(), want.end(),
                                  [&](const auto& b) {
                                    const std::uint32_t br = std::get<0>(b);
                                    return (c.rule == WriterRule::per_rank ? br
                                            : c.rule == WriterRule::groups ? br / 4
                                                                           : c.map[br]) != w;
                                  }),
                   want.end());
        EXPECT_EQ(blocks_of(p->index(), v), want) << "variable " << v;
      }
      const std::uint64_t before = p->bytes_read();
      ASSERT_TRUE(p.value().load_rank(r).ok());
      EXPECT_EQ(p->bytes_read(), before);
      EXPECT_EQ(p.value().load_rank(6).code(), Code::invalid_argument);
    }
    std::filesystem::remove_all(dir);
  }
}

TEST(PartialIndex, ABoxReadsTheWritersItsDirectoryNamesAndNoOther) {
  const Index idx = rich(6);
  const SplitIndex s = split(idx, WriterRule::per_rank);
  const std::string dir = write_split(s, "box");
  const auto root = encode_root_index(s.root);
  // grid/rho: rank r holds rows [2r, 2r + 2) of 12 x 8. Rows 3..6 meet ranks 1, 2 and 3.
  auto p = PartialIndex::open_v2(dir, root, 7);
  ASSERT_TRUE(p.ok());
  ASSERT_TRUE(p.value().cover(0, {{{3, 2}, {4, 5}}}).ok());
  EXPECT_EQ(p->subindices_read(), 3u);
  std::vector<std::uint32_t> ranks;
  for (const auto& b : blocks_of(p->index(), 0)) ranks.push_back(std::get<0>(b));
  EXPECT_EQ(ranks, (std::vector<std::uint32_t>{1, 2, 3}));
  // Covered now: asking again (or for a smaller box) reads nothing more.
  const std::uint64_t before = p->bytes_read();
  ASSERT_TRUE(p.value().cover(0, {{{4, 0}, {2, 8}}}).ok());
  EXPECT_EQ(p->bytes_read(), before);
  // The joined array: rows by rank 0..5 hold 0,1,2,0,1,2 rows = [0,0) [0,1) [1,3) [3,3) [3,4) [4,6); many
  // row ranges (a restart by keys) merge: rows 1..2 and 4 meet ranks 2 and 5 (and rank 4's row 3 is not asked).
  auto q = PartialIndex::open_v2(dir, root, 7);
  ASSERT_TRUE(q.ok());
  ASSERT_TRUE(q.value().cover_rows(3, {{2, 1}, {1, 1}, {4, 1}}).ok());
  ranks.clear();
  for (const auto& b : blocks_of(q->index(), 3)) ranks.push_back(std::get<0>(b));
  EXPECT_EQ(ranks, (std::vector<std::uint32_t>{2, 5}));
  // Local variables have no directory: cover() reads nothing for them.
  const std::uint64_t qb = q->bytes_read();
  ASSERT_TRUE(q.value().cover(2, {{{0}, {3}}}).ok());
  EXPECT_EQ(q->bytes_read(), qb);
  // The whole global box reads every writer that holds a block, and finds every block.
  auto all = PartialIndex::open_v2(dir, root, 7);
  ASSERT_TRUE(all.ok());
  ASSERT_TRUE(all.value().cover(0, {{{0, 0}, {12, 8}}}).ok());
  EXPECT_EQ(blocks_of(all->index(), 0), blocks_of(idx, 0));
  EXPECT_EQ(all->subindices_read(), 6u);
  std::filesystem::remove_all(dir);
}

TEST(PartialIndex, DamageIsFoundWhereItIsReadAndNowhereElse) {
  const Index idx = rich(6);
  SplitIndex s = split(idx, WriterRule::per_rank);
  s.subindices[4][s.subindices[4].size() / 2] ^= 0x10;  // writer 4's sub-index damaged
  const std::string dir = write_split(s, "damage");
  const auto root = encode_root_index(s.root);
  for (std::uint32_t r = 0; r < idx.nranks; ++r) {
    auto p = PartialIndex::open_v2(dir, root, 7);
    ASSERT_TRUE(p.ok());
    const Status st = p.value().load_rank(r);
    if (r == 4) {
      expect_corrupt(st);
      EXPECT_NE(st.message().find("corrupt checkpoint " + dir), std::string::npos) << st.to_string();
    } else {
      EXPECT_TRUE(st.ok()) << st.to_string();
    }
  }
  // A box of rows 0..3 does not need it; rows 8..9 do.
  auto p = PartialIndex::open_v2(dir, root, 7);
  ASSERT_TRUE(p.ok());
  EXPECT_TRUE(p.value().cover(0, {{{0, 0}, {4, 8}}}).ok());
  expect_corrupt(p.value().cover(0, {{{8, 0}, {2, 8}}}));
  // Missing files, another step, a damaged root.
  std::filesystem::remove(dir + "/index.2");
  auto m = PartialIndex::open_v2(dir, root, 7);
  ASSERT_TRUE(m.ok());
  const Status missing = m.value().load_rank(2);
  expect_corrupt(missing);
  EXPECT_NE(missing.message().find("index.2"), std::string::npos) << missing.to_string();
  expect_corrupt(PartialIndex::open_v2(dir, root, 8).status(), "step 7");
  auto bad = root;
  bad[bad.size() / 2] ^= 1;
  expect_corrupt(PartialIndex::open_v2(dir, bad, 7).status());
  std::filesystem::remove(dir + "/catalog");
  auto c = PartialIndex::open_v2(dir, root, 7);
  ASSERT_TRUE(c.ok());
  expect_corrupt(c.value().load_rank(0), "catalog");
  std::filesystem::remove_all(dir);
}

TEST(PartialIndex, ADirectoryThatLeavesABlockOutIsCaughtWhenBothAreRead) {
  // A block outside its writer's directory entry: a box inside the entry but asking for more than the
  // loaded blocks cover reads the directory, which then disagrees with the block already loaded.
  Index idx = rich(4);
  SplitIndex s = split(idx, WriterRule::per_rank);
  SubIndex sub = subindex_of(s, 1);
  // The block of rank 1 moved to rows [6, 8), which the directory gives writer 3 (rank 1's entry: [2, 4)).
  for (BlockRecord& b : sub.blocks)
    if (b.var == 0) b.start = {6, 0}, b.count = {2, 8};
  set_subindex(s, 1, encode_subindex(sub));
  const std::string dir = write_split(s, "outside");
  const auto root = encode_root_index(s.root);
  auto p = PartialIndex::open_v2(dir, root, 7);
  ASSERT_TRUE(p.ok());
  ASSERT_TRUE(p.value().load_rank(1).ok());
  expect_corrupt(p.value().cover(0, {{{2, 0}, {2, 8}}}), "outside");
  std::filesystem::remove_all(dir);
}

TEST(PartialIndex, WhatAnIndexClaimsIsCheckedAgainstTheFilesBeforeItIsRead) {
  const Index idx = rich(4);
  const SplitIndex s = split(idx, WriterRule::per_rank);
  const auto root = encode_root_index(s.root);
  {
    // A sub-index file longer than its entry says (or an entry claiming more than the file holds): refused
    // before anything the size of the claim is allocated; and after a failure every call fails alike.
    const std::string dir = write_split(s, "longer");
    std::ofstream(dir + "/index.2", std::ios::binary | std::ios::app).write("xx", 2);
    auto p = PartialIndex::open_v2(dir, root, 7);
    ASSERT_TRUE(p.ok());
    const Status st = p.value().load_rank(2);
    expect_corrupt(st, "holds");
    EXPECT_EQ(p.value().load_rank(0).message(), st.message()) << "a failed index stays failed";
    EXPECT_EQ(p.value().cover(0, {{{0, 0}, {2, 8}}}).message(), st.message());
    std::filesystem::remove_all(dir);
  }
  {
    // The catalog elsewhere than at offset 0 of its file: not the directory layout.
    SplitIndex moved = s;
    moved.root.catalog_offset = 64;
    const std::string dir = write_split(moved, "offset");
    expect_corrupt(PartialIndex::open_v2(dir, encode_root_index(moved.root), 7).status(), "offset 64");
    std::filesystem::remove_all(dir);
  }
  {
    // Two blocks of one writer that overlap in the box asked for: their sum cannot say it is covered.
    Index ov = rich(4);
    for (BlockRecord& b : ov.blocks)
      if (b.var == 0 && b.rank == 1) b.start = {1, 0};  // rows [1, 3): overlaps rank 0's [0, 2)
    const SplitIndex g = split(ov, WriterRule::groups, 2);
    const std::string dir = write_split(g, "overlap");
    auto p = PartialIndex::open_v2(dir, encode_root_index(g.root), 7);
    ASSERT_TRUE(p.ok());
    ASSERT_TRUE(p.value().load_rank(0).ok());  // writer 0: ranks 0 and 1
    expect_corrupt(p.value().cover(0, {{{0, 0}, {2, 8}}}), "overlap");
    std::filesystem::remove_all(dir);
  }
}

TEST(PartialIndex, AMergedDirectoryEntryReadsItsWritersAndNoOther) {
  // 5000 writers holding blocks of one global array: the directory merges neighbours (at most 4096
  // entries), so a box may meet an entry of two writers of which one holds nothing inside it.
  const std::uint32_t n = 5000;
  const Index idx = one_global_array(n, [](std::uint32_t) { return std::optional<std::uint64_t>(2); });
  const SplitIndex s = split(idx, WriterRule::per_rank);
  const std::string dir = write_split(s, "merged");
  auto p = PartialIndex::open_v2(dir, encode_root_index(s.root), 1);
  ASSERT_TRUE(p.ok());
  ASSERT_TRUE(p.value().cover(0, {{{4001}, {4}}}).ok());  // elements 4001..4004: ranks 2000, 2001, 2002
  std::vector<std::uint32_t> ranks;
  for (const auto& b : blocks_of(p->index(), 0)) ranks.push_back(std::get<0>(b));
  ASSERT_GE(ranks.size(), 3u);
  EXPECT_LE(ranks.size(), 6u) << "only the writers of the entries that meet the box";
  for (const std::uint32_t r : {2000u, 2001u, 2002u})
    EXPECT_NE(std::find(ranks.begin(), ranks.end(), r), ranks.end()) << r;
  EXPECT_EQ(p->subindices_read(), ranks.size());
  // The directory (at most 4096 entries) and those sub-indices: far less than every sub-index.
  std::uint64_t all = 0;
  for (const auto& b : s.subindices) all += b.size();
  EXPECT_LT(p->bytes_read(), all / 10);
  std::filesystem::remove_all(dir);
}
