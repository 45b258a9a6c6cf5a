// Incremental checkpoints, the read side (docs/format.md, "Version 2 index: incremental references"): pieced
// blocks and REFs through the sub-index and the transfer encoding (an index with references as ranks send it),
// version 1 unchanged when there is neither, every "Invalid" case of the spec refused as corrupt, the transfer
// encoding never taken from a file, and a two-step chain on disk read back through BlockReader - the exact
// bytes, a damaged, replaced or removed referenced step refused as corrupt - and through the assembled index and
// restart's partial one.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "base/bytes.hpp"
#include "base/format.hpp"
#include "base/hash.hpp"
#include "base/index_v2.hpp"
#include "base/partial_index.hpp"
#include "base/posix_io.hpp"
#include "base/step_log.hpp"
#include "base/store.hpp"
#include "test_util.hpp"

using namespace ckpt;
using namespace ckpt::detail;

namespace {

constexpr std::uint64_t kToken = 0x70c3e2a1b4d5f607ull;
constexpr std::uint32_t kLog2 = 16;  // 64 KiB pieces
constexpr std::uint64_t kPiece = std::uint64_t{1} << kLog2;

void expect_corrupt(const Status& st, const std::string& why = "") {
  EXPECT_EQ(st.code(), Code::corrupt) << st.to_string();
  if (!why.empty()) EXPECT_NE(st.message().find(why), std::string::npos) << st.message();
}

std::uint32_t u32_at(const std::vector<std::uint8_t>& b, std::size_t at) {
  std::uint32_t x = 0;
  std::memcpy(&x, b.data() + at, 4);
  return x;
}

/// Body checksum recomputed after bytes of a framed object (v2 object or index) were changed on purpose.
void reseal(std::vector<std::uint8_t>& o) {
  const std::uint64_t h = hash64(o.data() + 16, o.size() - 16 - 40);
  std::memcpy(o.data() + o.size() - 40 + 16, &h, 8);
}

/// `n` bytes of a recognisable pattern (`seed` makes another).
std::vector<std::uint8_t> pattern(std::size_t n, std::uint32_t seed) {
  std::vector<std::uint8_t> v(n);
  std::uint64_t x = 0x9e3779b97f4a7c15ull * (seed + 1);
  for (auto& c : v) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    c = static_cast<std::uint8_t>(x);
  }
  return v;
}

/// A one-dimensional u8 variable.
VarRecord bytes_var(const std::string& name, RegionKind kind, std::uint64_t global) {
  VarRecord v;
  v.name = name;
  v.dtype = DType::u8;
  v.kind = kind;
  v.ndim = 1;
  if (has_global_shape(kind)) v.global = {global};
  return v;
}

/// Block of `payload` (var, rank, file) cut into 64 KiB pieces: piece i is `refs_of(i)` (0: stored in its own
/// file at `stored_at` + its position among the stored ones times 64 KiB; k: at `ref_at(i)` of REF k).
BlockRecord pieced(std::uint32_t var, std::uint32_t rank, std::uint32_t file, std::uint64_t start,
                   const std::vector<std::uint8_t>& payload, const std::vector<std::uint32_t>& refs_of,
                   std::uint64_t stored_at, const std::vector<std::uint64_t>& ref_at) {
  BlockRecord b;
  b.var = var;
  b.rank = rank;
  b.file = file;
  b.start = {start};
  b.count = {payload.size()};
  b.length = payload.size();
  b.checksum = hash64(payload.data(), payload.size());
  b.piece_log2 = kLog2;
  std::uint64_t stored = 0;
  for (std::size_t i = 0; i < piece_count(b.length, kLog2); ++i) {
    PieceRecord pc;
    pc.ref = refs_of[i];
    pc.offset = pc.ref == 0 ? stored_at + kPiece * stored++ : ref_at[i];
    pc.hash = hash128(payload.data() + i * kPiece, static_cast<std::size_t>(piece_bytes(b, i)));
    b.pieces.push_back(pc);
  }
  return b;
}

/// A root with references to steps 8 and 9 (ids 108, 109) of a step-10 checkpoint with one global array
/// Step 10 (id 110) of one rank, its file data.0; no variable, no block.
Index one_rank_index() {
  Index idx;
  idx.step = 10;
  idx.nranks = 1;
  idx.ckpt_id = 110;
  idx.transport = "posix";
  idx.files = {{"data.0", 0, 1 << 20}};
  idx.rank_file = {0};
  return idx;
}

/// "x" of 1 MiB, and a sub-index of writer 0 (its only rank) whose block of x is pieced.
struct Sample {
  RootIndex root;
  SubIndex sub;
};
Sample sample() {
  Index idx = one_rank_index();
  idx.vars = {bytes_var("x", RegionKind::global, 5 * kPiece + 100)};
  const auto payload = pattern(5 * kPiece + 100, 1);
  idx.refs = {{0, 8, 108, "data.0"}, {0, 9, 109, "data.0"}};
  idx.blocks = {pieced(0, 0, 0, 0, payload, {0, 1, 2, 0, 2, 1}, 4096, {0, 4096, 4096 + kPiece, 0, 8192, 65536})};
  auto s = split_index(idx, WriterRule::per_rank, 0, kToken);
  EXPECT_TRUE(s.ok()) << s.status().to_string();
  Sample out;
  const auto root_bytes = encode_root_index(s->root);
  auto root = decode_root_index(root_bytes.data(), root_bytes.size());
  EXPECT_TRUE(root.ok()) << root.status().to_string();
  out.root = root.value();
  auto sub = decode_subindex(s->subindices[0].data(), s->subindices[0].size(), out.root);
  EXPECT_TRUE(sub.ok()) << sub.status().to_string();
  out.sub = sub.value();
  return out;
}

Status decode_sub(const SubIndex& sub, const RootIndex& root) {
  const auto b = encode_subindex(sub);
  return decode_subindex(b.data(), b.size(), root).status();
}

/// Where, in encode_subindex(sub) of a sub-index with one block, the block begins and the REF list begins.
struct SubPlaces {
  std::size_t block = 0, refs = 0;
};
SubPlaces places(const SubIndex& sub) {
  const auto b = encode_subindex(sub);
  ByteWriter blk, refs;
  put_block_record(blk, sub.blocks.at(0));
  for (const RefFile& f : sub.refs) put_ref_record(refs, f);
  SubPlaces p;
  p.block = b.size() - 40 - blk.bytes().size();
  p.refs = p.block - 8 - refs.bytes().size();
  return p;
}

}  // namespace

// ---- codecs ------------------------------------------------------------------------------------------------

TEST(Incremental, Hasher128InPartsIsXxh3_128) {
  const auto data = pattern(100000, 3);
  Hasher128 h;
  for (std::size_t at = 0; at < data.size(); at += 777)
    h.update(data.data() + at, std::min<std::size_t>(777, data.size() - at));
  EXPECT_EQ(h.digest(), hash128(data.data(), data.size()));
  h.reset();
  EXPECT_EQ(h.digest(), hash128(nullptr, 0));
}

TEST(Incremental, PiecedBlocksAndRefsRoundTripThroughTheSubIndex) {
  const Sample s = sample();
  EXPECT_EQ(s.root.base_step, 8);
  EXPECT_EQ(s.root.refs, (std::vector<RefSummary>{{0, 8, 108}, {0, 9, 109}}));
  // The sub-index lists the REFs in the order its pieces first name them.
  ASSERT_EQ(s.sub.refs.size(), 2u);
  EXPECT_EQ(s.sub.refs[0], (RefFile{0, 8, 108, "data.0"}));
  EXPECT_EQ(s.sub.refs[1], (RefFile{0, 9, 109, "data.0"}));
  const BlockRecord& b = s.sub.blocks.at(0);
  EXPECT_EQ(b.piece_log2, kLog2);
  ASSERT_EQ(b.pieces.size(), 6u);
  EXPECT_EQ(b.offset, 0u);
  EXPECT_EQ(piece_bytes(b, 5), 100u);
  EXPECT_EQ(b.pieces[4].ref, 2u);
  EXPECT_EQ(b.pieces[4].offset, 8192u);
  // The bytes: flag bit 0 in the header, n_refs and the REFs before the blocks, BLOCK2 flag bit 1 and the
  // pieces after the checksum; decoding and encoding again gives the same bytes.
  const auto bytes = encode_subindex(s.sub);
  EXPECT_EQ(u32_at(bytes, 12), 1u);
  const SubPlaces at = places(s.sub);
  EXPECT_EQ(u32_at(bytes, at.refs - 4), 2u);
  EXPECT_EQ(u32_at(bytes, at.refs), 0u);        // kind
  EXPECT_EQ(u32_at(bytes, at.refs + 4), 0u);    // reserved
  EXPECT_EQ(u32_at(bytes, at.block + 12), 2u);  // BLOCK2 flags: pieces, no statistics
  const std::size_t tail = at.block + 56 + 16;  // after the checksum of a 1-d block
  EXPECT_EQ(u32_at(bytes, tail), kLog2);
  EXPECT_EQ(u32_at(bytes, tail + 4), 0u);
  EXPECT_EQ(bytes.size() - 40 - (tail + 8), 6 * kPieceRecordBytes);
  EXPECT_EQ(u32_at(bytes, tail + 8 + 32), 1u);  // piece 1: REF 1
  std::uint64_t lo = 0;
  std::memcpy(&lo, bytes.data() + tail + 8 + 16, 8);
  EXPECT_EQ(lo, b.pieces[0].hash.lo);
  auto back = decode_subindex(bytes.data(), bytes.size(), s.root);
  ASSERT_TRUE(back.ok()) << back.status().to_string();
  EXPECT_EQ(encode_subindex(back.value()), bytes);
  // Without pieces the same sub-index has flags 0 and no REF.
  SubIndex plain = s.sub;
  plain.refs.clear();
  plain.blocks[0].piece_log2 = 0;
  plain.blocks[0].pieces.clear();
  plain.blocks[0].offset = 4096;
  const auto pb = encode_subindex(plain);
  EXPECT_EQ(u32_at(pb, 12), 0u);
  EXPECT_TRUE(decode_subindex(pb.data(), pb.size(), s.root).ok());
}

namespace {

/// The one-level index of `s` (as ranks send it, in the transfer encoding).
Index transfer_index(const Sample& s) {
  Index idx = one_rank_index();
  idx.vars = {s.root.vars[0].var};
  idx.blocks = s.sub.blocks;
  idx.refs = s.sub.refs;
  return idx;
}

}  // namespace

TEST(Incremental, TheTransferEncodingCarriesPiecesAndRefs) {
  const Sample s = sample();
  Index idx = transfer_index(s);
  ASSERT_TRUE(idx.incremental());
  const auto bytes = encode_index(idx);
  EXPECT_EQ(index_header_version(bytes.data(), bytes.size()), kTransferIndexVersion);
  EXPECT_EQ(u32_at(bytes, bytes.size() - 16), kTransferIndexVersion);  // the footer's version too
  auto back = decode_index(bytes.data(), bytes.size());
  ASSERT_TRUE(back.ok()) << back.status().to_string();
  EXPECT_EQ(back->refs, idx.refs);
  ASSERT_EQ(back->blocks.size(), 1u);
  EXPECT_EQ(back->blocks[0].piece_log2, kLog2);
  ASSERT_EQ(back->blocks[0].pieces.size(), idx.blocks[0].pieces.size());
  for (std::size_t i = 0; i < idx.blocks[0].pieces.size(); ++i) {
    EXPECT_EQ(back->blocks[0].pieces[i].ref, idx.blocks[0].pieces[i].ref);
    EXPECT_EQ(back->blocks[0].pieces[i].offset, idx.blocks[0].pieces[i].offset);
    EXPECT_EQ(back->blocks[0].pieces[i].hash, idx.blocks[0].pieces[i].hash);
  }
  EXPECT_EQ(encode_index(back.value()), bytes);
  // REFs alone (no block pieced) travel so too.
  Index refs_only = idx;
  refs_only.blocks[0].piece_log2 = 0;
  refs_only.blocks[0].pieces.clear();
  const auto ro = encode_index(refs_only);
  EXPECT_EQ(index_header_version(ro.data(), ro.size()), kTransferIndexVersion);
  auto ro_back = decode_index(ro.data(), ro.size());
  ASSERT_TRUE(ro_back.ok()) << ro_back.status().to_string();
  EXPECT_EQ(ro_back->refs, idx.refs);

  // What the transfer decoder refuses.
  auto refused = [](const Index& x, const std::string& why) {
    const auto b = encode_index(x);
    expect_corrupt(decode_index(b.data(), b.size()).status(), why);
  };
  Index bad = idx;
  bad.blocks[0].pieces[1].ref = 3;  // 2 REFs
  refused(bad, "naming REF 3 of 2");
  bad = idx;
  bad.refs[1] = bad.refs[0];
  refused(bad, "listed twice");
  bad = idx;
  bad.refs[0].step = 10;  // not before the index's step
  refused(bad, "not before step 10");
  bad = idx;
  bad.refs[0].kind = 1;  // a segment has no id
  refused(bad, "with a checkpoint id");
  bad = idx;
  bad.refs[0].name = "..";
  refused(bad, "not allowed");
  bad = idx;
  bad.blocks[0].piece_log2 = 25;
  bad.blocks[0].pieces.resize(1);
  refused(bad, "2^25");
  // Neither REF nor piece: that is version 1's encoding, the transfer version's is refused.
  Index plain = refs_only;
  plain.refs.clear();
  auto framed = encode_index(plain);
  EXPECT_EQ(index_header_version(framed.data(), framed.size()), kFormatVersion);
  std::memcpy(framed.data() + 8, &kTransferIndexVersion, 4);
  std::memcpy(framed.data() + framed.size() - 16, &kTransferIndexVersion, 4);
  std::vector<std::uint8_t> with_nrefs(framed.begin(), framed.end() - 40);
  with_nrefs.insert(with_nrefs.end(), 4, 0);  // n_refs 0
  with_nrefs.insert(with_nrefs.end(), framed.end() - 40, framed.end());
  const std::uint64_t body_len = with_nrefs.size() - 56;
  std::memcpy(with_nrefs.data() + with_nrefs.size() - 32, &body_len, 8);
  reseal(with_nrefs);
  expect_corrupt(decode_index(with_nrefs.data(), with_nrefs.size()).status(), "without references or pieces");
  // Header and footer must agree; version 1 knows no pieces (flag bit 1 is an unknown bit there).
  auto mixed = bytes;
  const std::uint32_t one = 1;
  std::memcpy(mixed.data() + 8, &one, 4);
  expect_corrupt(decode_index(mixed.data(), mixed.size()).status(), "unsupported");
  std::memcpy(mixed.data() + mixed.size() - 16, &one, 4);
  expect_corrupt(decode_index(mixed.data(), mixed.size()).status(), "unknown flag bits");
}

TEST(Incremental, VersionOneIsByteForByteWhatItWas) {
  // A hand-built version-1 index: nothing of the incremental model may change its bytes.
  Index idx;
  idx.step = 3;
  idx.nranks = 1;
  idx.ckpt_id = 0x55;
  idx.created_unix = 0;
  idx.transport = "posix";
  idx.files = {{"data.0", 0, 8}};
  idx.vars = {bytes_var("v", RegionKind::local, 0)};
  BlockRecord b;
  b.count = {2};
  b.start = {0};
  b.length = 2;
  b.offset = 64;
  b.checksum = 0xabc;
  idx.blocks = {b};
  idx.rank_file = {0};
  ASSERT_FALSE(idx.incremental());
  std::vector<std::uint8_t> body;
  auto put = [&body](const void* p, std::size_t n) {
    body.insert(body.end(), static_cast<const std::uint8_t*>(p), static_cast<const std::uint8_t*>(p) + n);
  };
  auto u32 = [&](std::uint32_t x) { put(&x, 4); };
  auto u64 = [&](std::uint64_t x) { put(&x, 8); };
  auto str = [&](const std::string& s) { u32(static_cast<std::uint32_t>(s.size())), put(s.data(), s.size()); };
  u64(3), u32(1), u64(0x55), u64(0), str("posix"), u32(0);  // step, nranks, id, created, transport, attrs
  u32(1), str("data.0"), u32(0), u64(8);                    // files
  u32(1), str("v");                                         // vars: name, dtype u8, kind local, 0, 0, ndim 1
  const std::uint8_t vb[4] = {1, 0, 0, 0};
  put(vb, 4), u32(1), u32(0);
  u64(1), u32(0), u32(0), u32(0), u32(0), u64(64), u64(2), u64(0), u64(2), u64(0), u64(0), u64(0xabc);  // block
  u32(1), u32(0);                                                                                       // map
  std::vector<std::uint8_t> want = {'C', 'K', 'P', 'T', 'I', 'N', 'D', 'X', 1, 0, 0, 0, 0, 0, 0, 0};
  want.insert(want.end(), body.begin(), body.end());
  const std::uint64_t footer[3] = {16, body.size(), hash64(body.data(), body.size())};
  const std::uint8_t* f = reinterpret_cast<const std::uint8_t*>(footer);
  want.insert(want.end(), f, f + 24);
  const std::uint8_t end[16] = {1, 0, 0, 0, 0, 0, 0, 0, 'C', 'K', 'P', 'T', 'E', 'N', 'D', '1'};
  want.insert(want.end(), end, end + 16);
  EXPECT_EQ(encode_index(idx), want);
  // And every index of the version-1 corpus decodes and encodes to the very bytes on disk.
  const char* data = std::getenv("CKPTTEST_DATA");
  ASSERT_NE(data, nullptr) << "CKPTTEST_DATA names tests/data";
  for (const char* dir : {"directory/ckpt.10", "directory/ckpt.20", "mpiio/ckpt.10", "mpiio/ckpt.20"}) {
    SCOPED_TRACE(dir);
    auto bytes = read_file(std::string(data) + "/format-v1/" + dir + "/index", kMaxIndexBytes);
    ASSERT_TRUE(bytes.ok()) << bytes.status().to_string();
    auto decoded = decode_index(bytes->data(), bytes->size());
    ASSERT_TRUE(decoded.ok()) << decoded.status().to_string();
    EXPECT_FALSE(decoded->incremental());
    EXPECT_EQ(encode_index(decoded.value()), bytes.value());
  }
}

TEST(Incremental, EveryInvalidReferenceIsRefused) {
  const Sample s = sample();
  auto refused = [&](auto change, const std::string& why, const RootIndex* root = nullptr) {
    SubIndex sub = s.sub;
    change(sub);
    expect_corrupt(decode_sub(sub, root ? *root : s.root), why);
  };
  // A piece size outside 2^16..2^24 (the piece count made to match it).
  for (std::uint32_t log2 : {15u, 25u})
    refused(
        [log2](SubIndex& x) {
          x.blocks[0].piece_log2 = log2;
          x.blocks[0].pieces.resize(static_cast<std::size_t>(piece_count(x.blocks[0].length, log2)));
        },
        "2^" + std::to_string(log2));
  // A piece count that does not match the length: the records that follow are misread.
  refused([](SubIndex& x) { x.blocks[0].pieces.pop_back(); }, "");
  refused([](SubIndex& x) { x.blocks[0].pieces.push_back(x.blocks[0].pieces[0]); }, "trailing bytes");
  // A zero-length block cannot be pieced; a pieced block's own offset is 0.
  refused(
      [](SubIndex& x) {
        x.blocks[0].count = {0};
        x.blocks[0].length = 0;
        x.blocks[0].pieces.clear();
      },
      "empty");
  refused([](SubIndex& x) { x.blocks[0].offset = 4096; }, "offset 4096");
  // A piece offset whose end overflows.
  refused([](SubIndex& x) { x.blocks[0].pieces[2].offset = ~0ull - 10; }, "overflows");
  // A ref beyond the REFs.
  refused([](SubIndex& x) { x.blocks[0].pieces[1].ref = 3; }, "names REF 3 of 2");
  // A REF whose step is outside [base step, step), or whose kind, step or id is not in the root's list.
  refused([](SubIndex& x) { x.refs[0].step = 7; }, "outside [base step 8, step 10)");
  refused([](SubIndex& x) { x.refs[0].step = 10; }, "outside [base step 8, step 10)");
  refused([](SubIndex& x) { x.refs[1].ckpt_id = 999; }, "not in the root index's list");
  RootIndex only8 = s.root;
  only8.refs = {{0, 8, 108}};
  refused([](SubIndex&) {}, "not in the root index's list", &only8);
  refused(
      [](SubIndex& x) {
        x.refs[1].kind = 1;
        x.refs[1].ckpt_id = 0;
      },
      "series segment");
  refused([](SubIndex& x) { x.refs[1].kind = 2; }, "unknown kind 2");
  refused([](SubIndex& x) { x.refs.push_back(x.refs[0]); }, "listed twice");
  refused([](SubIndex& x) { x.refs[0].name = "../data.0"; }, "not allowed");
  refused([](SubIndex& x) { x.refs[0].name = ""; }, "not allowed");
  // Pieces in a checkpoint whose root has no references; REFs without pieces; the flag without a pieced block.
  RootIndex full = s.root;
  full.refs.clear();
  full.base_step = full.step;
  refused([](SubIndex&) {}, "without references", &full);
  refused(
      [](SubIndex& x) {
        x.blocks[0].piece_log2 = 0;
        x.blocks[0].pieces.clear();
        x.blocks[0].offset = 4096;
      },
      "REFs without pieces");
  {
    SubIndex x = s.sub;
    x.refs.clear();
    x.blocks[0].piece_log2 = 0;
    x.blocks[0].pieces.clear();
    auto b = encode_subindex(x);
    b[12] = 1;
    expect_corrupt(decode_subindex(b.data(), b.size(), s.root).status(), "no block is pieced");
  }
  // Non-zero reserved fields: the pieces' header, a piece, a REF.
  const auto good = encode_subindex(s.sub);
  const SubPlaces at = places(s.sub);
  const std::size_t tail = at.block + 56 + 16;
  for (const std::size_t byte : {tail + 4, tail + 8 + 4, tail + 8 + 5 * 32 + 7, at.refs + 4}) {
    auto b = good;
    b[byte] = 1;
    reseal(b);
    expect_corrupt(decode_subindex(b.data(), b.size(), s.root).status(), "non-zero reserved");
  }
  // The whole sub-index decodes untouched (the cases above are the only reason each was refused).
  EXPECT_TRUE(decode_subindex(good.data(), good.size(), s.root).ok());
  // A REFSUM no sub-index names is accepted (the root lists more than it needs: harmless).
  RootIndex more = s.root;
  more.refs.push_back({0, 9, 555});
  EXPECT_TRUE(decode_sub(s.sub, more).ok());
}

TEST(Incremental, TheTransferVersionIsNeverReadFromAFile) {
  const std::string root = test::scratch_dir();
  const Sample s = sample();
  Index idx = transfer_index(s);
  const auto transfer = encode_index(idx);
  ASSERT_TRUE(decode_index(transfer.data(), transfer.size()).ok());
  const std::string dir = root + "/ckpt.10";
  ASSERT_TRUE(make_dirs(dir).ok());
  ASSERT_TRUE(write_file(dir + "/index", transfer.data(), transfer.size(), false).ok());
  expect_corrupt(read_root_file(dir).status(), "index version 32513 unsupported");
  expect_corrupt(load_checkpoint_index(dir, 10).status(), "index version 32513 unsupported");
  expect_corrupt(make_directory_store(root)->load_index(10).status(), "unsupported");
  // The store does not commit it either (it would be unreadable).
  ASSERT_TRUE(make_dirs(root + "/ckpt.11.tmp").ok());
  EXPECT_EQ(make_directory_store(root)->commit(11, root + "/ckpt.11.tmp", transfer, false).code(), Code::internal);
  // A step-log record whose payload is the transfer encoding is damaged.
  const std::string series = test::scratch_dir("-series");
  ASSERT_TRUE(make_dirs(series + "/series.0").ok());
  auto log = encode_step_log_header(0, 77);
  const auto rec = encode_step_record(77, 0, 10, transfer.data(), transfer.size());
  log.insert(log.end(), rec.begin(), rec.end());
  ASSERT_TRUE(write_file(series + "/series.0/steps", log.data(), log.size(), false).ok());
  auto store = make_series_store(series);
  expect_corrupt(store->load_index(10).status(), "index version 32513 unsupported");
  expect_corrupt(store->read_index(10).status(), "unsupported");
}

// ---- a chain on disk ---------------------------------------------------------------------------------------

namespace {

constexpr std::uint64_t kDataAt = 4096;
constexpr std::uint64_t kId10 = 0x1010, kId11 = 0x1011;

/// Writes checkpoint directory `dir` as the directory layout keeps a version-2 index: index (the root),
/// catalog, index.<w>; the root's base step `base` when it has references.
void write_v2(const std::string& dir, const Index& idx, std::int64_t base = -1) {
  ASSERT_TRUE(make_dirs(dir).ok());
  auto s = split_index(idx, WriterRule::per_rank, 0, kToken);
  ASSERT_TRUE(s.ok()) << s.status().to_string();
  if (base >= 0) s.value().root.base_step = base;
  const auto root = encode_root_index(s->root);
  ASSERT_TRUE(write_file(dir + "/index", root.data(), root.size(), false).ok());
  ASSERT_TRUE(write_file(dir + "/catalog", s->catalog.data(), s->catalog.size(), false).ok());
  for (std::size_t w = 0; w < s->subindices.size(); ++w)
    ASSERT_TRUE(
        write_file(dir + "/index." + std::to_string(w), s->subindices[w].data(), s->subindices[w].size(), false).ok());
}

/// A data file: its header, then `payload` at kDataAt.
void write_data(const std::string& path, std::int64_t step, std::uint64_t id,
                const std::vector<std::uint8_t>& payload) {
  DataHeader h;
  h.step = step;
  h.writer = 0;
  h.nranks = 1;
  h.ckpt_id = id;
  h.data_offset = kDataAt;
  std::vector<std::uint8_t> bytes = encode_data_header(h);
  bytes.resize(kDataAt, 0);
  bytes.insert(bytes.end(), payload.begin(), payload.end());
  ASSERT_TRUE(write_file(path, bytes.data(), bytes.size(), false).ok());
}

Index one_var(std::int64_t step, std::uint64_t id, std::uint64_t length) {
  Index idx;
  idx.step = step;
  idx.nranks = 1;
  idx.ckpt_id = id;
  idx.transport = "posix";
  idx.vars = {bytes_var("x", RegionKind::global, length)};
  idx.rank_file = {0};
  return idx;
}

/// Step 10, full: "x" of 4 pieces and 1000 bytes, stored whole in ckpt.10/data.0. Step 11: pieces 1 and 3
/// changed and stored in ckpt.11/data.0 (at kDataAt, kDataAt + 64 KiB), pieces 0, 2 and 4 referring to
/// ckpt.10/data.0.
struct Chain {
  std::string root, dir10, dir11;
  std::vector<std::uint8_t> payload10, payload11;
  Index idx10, idx11;
};
Chain make_chain(const std::string& root) {
  Chain c;
  c.root = root;
  c.dir10 = root + "/ckpt.10";
  c.dir11 = root + "/ckpt.11";
  const std::uint64_t length = 4 * kPiece + 1000;
  c.payload10 = pattern(length, 10);
  c.payload11 = c.payload10;
  const auto fresh = pattern(2 * kPiece, 11);
  std::copy(fresh.begin(), fresh.begin() + kPiece, c.payload11.begin() + kPiece);
  std::copy(fresh.begin() + kPiece, fresh.end(), c.payload11.begin() + 3 * kPiece);
  c.idx10 = one_var(10, kId10, length);
  c.idx10.files = {{"data.0", 0, kDataAt + length}};
  BlockRecord b10;
  b10.start = {0};
  b10.count = {length};
  b10.length = length;
  b10.offset = kDataAt;
  b10.checksum = hash64(c.payload10.data(), c.payload10.size());
  c.idx10.blocks = {b10};
  write_v2(c.dir10, c.idx10);
  write_data(c.dir10 + "/data.0", 10, kId10, c.payload10);

  c.idx11 = one_var(11, kId11, length);
  c.idx11.files = {{"data.0", 0, kDataAt + 2 * kPiece}};
  c.idx11.refs = {{0, 10, kId10, "data.0"}};
  c.idx11.blocks = {pieced(0, 0, 0, 0, c.payload11, {1, 0, 1, 0, 1}, kDataAt,
                           {kDataAt, 0, kDataAt + 2 * kPiece, 0, kDataAt + 4 * kPiece})};
  write_v2(c.dir11, c.idx11, 10);
  std::vector<std::uint8_t> stored(c.payload11.begin() + kPiece, c.payload11.begin() + 2 * kPiece);
  stored.insert(stored.end(), c.payload11.begin() + 3 * kPiece, c.payload11.begin() + 4 * kPiece);
  write_data(c.dir11 + "/data.0", 11, kId11, stored);
  return c;
}

/// The payload of `b` as BlockReader::stream() hands it out with a `buf`-byte buffer, offsets checked in order.
Result<std::vector<std::uint8_t>> read_block(const std::string& dir, const Index& idx, const BlockRecord& b,
                                             std::size_t buf) {
  BlockReader reader(dir, idx);
  std::vector<std::uint8_t> out, tmp(buf);
  Status st = reader.stream(b, tmp.data(), tmp.size(), [&](const std::uint8_t* p, std::size_t n, std::uint64_t off) {
    if (off != out.size()) return Status(Code::internal, "out of order at " + std::to_string(off));
    if (n > buf) return Status(Code::internal, "a part larger than the buffer");
    out.insert(out.end(), p, p + n);
    return Status::OK();
  });
  if (!st.ok()) return st;
  return out;
}

void flip(const std::string& path, std::uint64_t at) {
  auto b = read_file(path, 1ull << 30);
  ASSERT_TRUE(b.ok());
  b.value()[at] ^= 0x40;
  ASSERT_TRUE(write_file(path, b->data(), b->size(), false).ok());
}

}  // namespace

TEST(IncrementalChain, TheReaderGivesTheExactBytesFromBothSteps) {
  const Chain c = make_chain(test::scratch_dir());
  // Through the one place every reader loads an index: assembled, then in the transfer encoding.
  auto raw = read_index_file(c.dir11);
  ASSERT_TRUE(raw.ok()) << raw.status().to_string();
  EXPECT_EQ(index_header_version(raw->data(), raw->size()), kTransferIndexVersion);
  auto idx = load_checkpoint_index(c.dir11, 11);
  ASSERT_TRUE(idx.ok()) << idx.status().to_string();
  EXPECT_EQ(idx->refs, c.idx11.refs);
  ASSERT_EQ(idx->blocks.size(), 1u);
  const BlockRecord& b = idx->blocks[0];
  ASSERT_EQ(b.pieces.size(), 5u);
  for (std::size_t i = 0; i < 5; ++i) {
    EXPECT_EQ(b.pieces[i].ref, c.idx11.blocks[0].pieces[i].ref) << i;
    EXPECT_EQ(b.pieces[i].offset, c.idx11.blocks[0].pieces[i].offset) << i;
  }
  // A buffer smaller than a piece (each piece in parts), one that ends inside pieces, one larger than all.
  for (const std::size_t buf : {std::size_t{4096}, std::size_t{50000}, std::size_t{1} << 20}) {
    auto got = read_block(c.dir11, idx.value(), b, buf);
    ASSERT_TRUE(got.ok()) << buf << ": " << got.status().to_string();
    EXPECT_TRUE(got.value() == c.payload11) << buf;
  }
  BlockReader reader(c.dir11, idx.value());
  EXPECT_TRUE(reader.claim(b).ok());
  std::vector<std::uint8_t> buf(1 << 16);
  EXPECT_TRUE(reader.verify(b, buf.data(), buf.size()).ok());
  EXPECT_NE(reader.where(b).find("5 pieces of 64.0 KiB"), std::string::npos) << reader.where(b);
  // The full step is read as always.
  auto idx10 = load_checkpoint_index(c.dir10, 10);
  ASSERT_TRUE(idx10.ok());
  EXPECT_FALSE(idx10->incremental());
  auto got10 = read_block(c.dir10, idx10.value(), idx10->blocks[0], 1 << 16);
  ASSERT_TRUE(got10.ok());
  EXPECT_TRUE(got10.value() == c.payload10);
  // The checkpoint given by another path than its name (a link): referenced steps are beside the directory.
  const std::string link = c.root + "/latest";
  ASSERT_EQ(::symlink("ckpt.11", link.c_str()), 0);
  auto via_link = read_block(link, idx.value(), b, 1 << 16);
  ASSERT_TRUE(via_link.ok()) << via_link.status().to_string();
  EXPECT_TRUE(via_link.value() == c.payload11);
}

TEST(IncrementalChain, RestartsPartialIndexCarriesPiecesAndRefs) {
  const Chain c = make_chain(test::scratch_dir());
  auto root = read_root_file(c.dir11);
  ASSERT_TRUE(root.ok());
  auto p = PartialIndex::open_v2(c.dir11, root.value(), 11);
  ASSERT_TRUE(p.ok()) << p.status().to_string();
  ASSERT_TRUE(p.value().load_rank(0).ok());
  const Index& idx = p->index();
  EXPECT_EQ(idx.refs, c.idx11.refs);
  ASSERT_EQ(idx.blocks.size(), 1u);
  auto got = read_block(c.dir11, idx, idx.blocks[0], 1 << 16);
  ASSERT_TRUE(got.ok()) << got.status().to_string();
  EXPECT_TRUE(got.value() == c.payload11);
}

TEST(IncrementalChain, ADamagedReferencedPieceIsCorrupt) {
  const Chain c = make_chain(test::scratch_dir());
  auto idx = load_checkpoint_index(c.dir11, 11);
  ASSERT_TRUE(idx.ok());
  const BlockRecord& b = idx->blocks[0];
  // A byte of piece 2, which step 11 refers to in step 10's file.
  flip(c.dir10 + "/data.0", kDataAt + 2 * kPiece + 77);
  auto got = read_block(c.dir11, idx.value(), b, 1 << 14);
  expect_corrupt(got.status(), "checksum mismatch");
  EXPECT_NE(got.status().message().find("piece 2 of 5 (" + c.dir10 + "/data.0"), std::string::npos)
      << got.status().message();
  flip(c.dir10 + "/data.0", kDataAt + 2 * kPiece + 77);
  EXPECT_TRUE(read_block(c.dir11, idx.value(), b, 1 << 14).ok());
  // A byte of piece 3, stored in step 11's own file.
  flip(c.dir11 + "/data.0", kDataAt + kPiece + 5);
  got = read_block(c.dir11, idx.value(), b, 1 << 14);
  expect_corrupt(got.status(), "piece 3 of 5 (" + c.dir11 + "/data.0");
  flip(c.dir11 + "/data.0", kDataAt + kPiece + 5);
  // A piece whose hash holds but whose bytes are not the block's (the index forged consistently but for the
  // whole block's XXH3-64): the second, independent check.
  Index forged = idx.value();
  std::vector<std::uint8_t> other = c.payload11;
  other[10] ^= 0x40;  // what flip() does
  forged.blocks[0].pieces[0].hash = hash128(other.data(), kPiece);
  flip(c.dir10 + "/data.0", kDataAt + 10);
  got = read_block(c.dir11, forged, forged.blocks[0], 1 << 16);
  expect_corrupt(got.status(), "checksum mismatch in variable 'x', block of rank 0 (");
  flip(c.dir10 + "/data.0", kDataAt + 10);
  // Step 10's file cut short: claim() says so before anything is read; so does one that is missing.
  auto whole = read_file(c.dir10 + "/data.0", 1ull << 30);
  ASSERT_TRUE(whole.ok());
  ASSERT_EQ(::truncate((c.dir10 + "/data.0").c_str(), static_cast<off_t>(kDataAt + 3 * kPiece)), 0);
  BlockReader short_reader(c.dir11, idx.value());
  expect_corrupt(short_reader.claim(b), "piece 4 of 5");
  ASSERT_EQ(::unlink((c.dir10 + "/data.0").c_str()), 0);
  BlockReader missing(c.dir11, idx.value());
  expect_corrupt(missing.claim(b), c.dir10 + "/data.0");
  ASSERT_TRUE(write_file(c.dir10 + "/data.0", whole->data(), whole->size(), false).ok());
  EXPECT_TRUE(read_block(c.dir11, idx.value(), b, 1 << 16).ok());
}

TEST(IncrementalChain, AReplacedOrRemovedReferencedStepIsCorrupt) {
  const Chain c = make_chain(test::scratch_dir());
  auto idx = load_checkpoint_index(c.dir11, 11);
  ASSERT_TRUE(idx.ok());
  const BlockRecord& b = idx->blocks[0];
  const auto root10 = read_file(c.dir10 + "/index", kMaxIndexBytes);
  ASSERT_TRUE(root10.ok());
  // Step 10 committed again by another run: another checkpoint id, the same bytes where the pieces are.
  Index again = c.idx10;
  again.ckpt_id = 0x2010;
  write_v2(c.dir10, again);
  auto got = read_block(c.dir11, idx.value(), b, 1 << 16);
  expect_corrupt(got.status(), "refers to step 10");
  EXPECT_NE(got.status().message().find("replaced"), std::string::npos) << got.status().message();
  // A version-1 index there: not the checkpoint referred to either.
  const auto v1 = encode_index(c.idx10);
  ASSERT_TRUE(write_file(c.dir10 + "/index", v1.data(), v1.size(), false).ok());
  expect_corrupt(read_block(c.dir11, idx.value(), b, 1 << 16).status(), "not a version-2 root");
  // Its index damaged.
  auto damaged = root10.value();
  damaged[damaged.size() / 2] ^= 1;
  ASSERT_TRUE(write_file(c.dir10 + "/index", damaged.data(), damaged.size(), false).ok());
  expect_corrupt(read_block(c.dir11, idx.value(), b, 1 << 16).status(), "damaged");
  // Put back: readable again.
  ASSERT_TRUE(write_file(c.dir10 + "/index", root10->data(), root10->size(), false).ok());
  EXPECT_TRUE(read_block(c.dir11, idx.value(), b, 1 << 16).ok());
  // Removed (retention, or by hand): corrupt, not a crash; the index of step 11 itself still loads.
  ASSERT_TRUE(remove_tree(c.dir10).ok());
  got = read_block(c.dir11, idx.value(), b, 1 << 16);
  expect_corrupt(got.status(), "refers to step 10");
  EXPECT_NE(got.status().message().find("gone"), std::string::npos) << got.status().message();
  EXPECT_TRUE(load_checkpoint_index(c.dir11, 11).ok());
  // Renamed away (abandoned): the same.
  make_chain(c.root);
  ASSERT_EQ(::rename(c.dir10.c_str(), (c.root + "/ckpt.10.abandoned").c_str()), 0);
  expect_corrupt(read_block(c.dir11, idx.value(), b, 1 << 16).status(), "gone");
}

TEST(IncrementalChain, RefsOfSeveralSubIndicesMergeIntoOneList) {
  // Two ranks (two sub-indices): rank 0's pieces name REFs A then C, rank 1's C then B. Assembled, the list is
  // A, C, B (first appearance in writer order) and every piece still names its file; rank 1 alone (restart's
  // partial index) gets C, B.
  const std::string root = test::scratch_dir();
  Index idx;
  idx.step = 12;
  idx.nranks = 2;
  idx.ckpt_id = 0x1012;
  idx.transport = "posix";
  idx.vars = {bytes_var("x", RegionKind::global, 4 * kPiece)};
  idx.files = {{"data.0", 0, 1 << 20}, {"data.1", 1, 1 << 20}};
  idx.rank_file = {0, 1};
  const RefFile a{0, 10, kId10, "data.0"}, b{0, 11, kId11, "data.1"}, cc{0, 10, kId10, "shared"};
  idx.refs = {a, b, cc};
  const auto p0 = pattern(2 * kPiece, 20), p1 = pattern(2 * kPiece, 21);
  idx.blocks = {pieced(0, 0, 0, 0, p0, {1, 3}, 0, {0, 100}), pieced(0, 1, 1, 2 * kPiece, p1, {3, 2}, 0, {200, 300})};
  auto s = split_index(idx, WriterRule::per_rank, 0, kToken);
  ASSERT_TRUE(s.ok()) << s.status().to_string();
  EXPECT_EQ(s->root.refs, (std::vector<RefSummary>{{0, 10, kId10}, {0, 11, kId11}}));
  EXPECT_EQ(s->root.base_step, 10);
  const auto root_bytes = encode_root_index(s->root);
  auto r = decode_root_index(root_bytes.data(), root_bytes.size());
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  auto whole = assemble_index(r.value(), s->catalog.data(), s->catalog.size(), s->subindices);
  ASSERT_TRUE(whole.ok()) << whole.status().to_string();
  EXPECT_EQ(whole->refs, (std::vector<RefFile>{a, cc, b}));
  for (std::size_t k = 0; k < 2; ++k)
    for (std::size_t i = 0; i < 2; ++i) {
      const PieceRecord& got = whole->blocks[k].pieces[i];
      const PieceRecord& want = idx.blocks[k].pieces[i];
      EXPECT_EQ(whole->refs[got.ref - 1], idx.refs[want.ref - 1]) << k << " " << i;
      EXPECT_EQ(got.offset, want.offset);
    }
  // Assembled again from its own split: the same bytes (a fixed point, as without references).
  auto again = split_index(whole.value(), WriterRule::per_rank, 0, kToken);
  ASSERT_TRUE(again.ok());
  auto twice = assemble_index(r.value(), again->catalog.data(), again->catalog.size(), again->subindices);
  ASSERT_TRUE(twice.ok()) << twice.status().to_string();
  EXPECT_EQ(encode_index(twice.value()), encode_index(whole.value()));
  // Restart N->N on rank 1 reads its own sub-index only.
  const std::string dir = root + "/ckpt.12";
  ASSERT_TRUE(make_dirs(dir).ok());
  ASSERT_TRUE(write_file(dir + "/index", root_bytes.data(), root_bytes.size(), false).ok());
  ASSERT_TRUE(write_file(dir + "/catalog", s->catalog.data(), s->catalog.size(), false).ok());
  for (std::size_t w = 0; w < 2; ++w)
    ASSERT_TRUE(
        write_file(dir + "/index." + std::to_string(w), s->subindices[w].data(), s->subindices[w].size(), false).ok());
  auto p = PartialIndex::open_v2(dir, root_bytes, 12);
  ASSERT_TRUE(p.ok());
  ASSERT_TRUE(p.value().load_rank(1).ok());
  EXPECT_EQ(p->index().refs, (std::vector<RefFile>{cc, b}));
  ASSERT_EQ(p->index().blocks.size(), 1u);
  EXPECT_EQ(p->index().blocks[0].pieces[0].ref, 1u);
  EXPECT_EQ(p->index().blocks[0].pieces[1].ref, 2u);
  ASSERT_TRUE(p.value().load_rank(0).ok());
  EXPECT_EQ(p->index().refs, (std::vector<RefFile>{cc, b, a}));
  // What split refuses: a piece naming a missing REF, a series REF, a REF not below the step.
  Index bad = idx;
  bad.blocks[0].pieces[0].ref = 4;
  EXPECT_EQ(split_index(bad, WriterRule::per_rank, 0, kToken).status().code(), Code::invalid_argument);
  bad = idx;
  bad.refs[1].kind = 1;
  EXPECT_EQ(split_index(bad, WriterRule::per_rank, 0, kToken).status().code(), Code::invalid_argument);
  bad = idx;
  bad.refs[1].step = 12;
  EXPECT_EQ(split_index(bad, WriterRule::per_rank, 0, kToken).status().code(), Code::invalid_argument);
}
