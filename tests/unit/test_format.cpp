// Format v1 encode/decode: round trips, and every kind of damage is rejected, never crashes.
#include <gtest/gtest.h>
#include <xxhash.h>  // the plain functions, not the dispatching ones base/hash.cpp may use

#include <cmath>
#include <cstring>

#include "base/format.hpp"

using namespace ckpt;
using namespace ckpt::detail;

namespace {
Index sample() {
  Index idx;
  idx.step = 42;
  idx.nranks = 2;
  idx.ckpt_id = 0xabcdef;
  idx.created_unix = 1.7e9;
  idx.transport = "posix";
  idx.attrs = {{"ckpt_version", "0.1.0"}};
  idx.files = {{"data.0", 0, 8192}, {"data.1", 1, 8192}};
  VarRecord rho;
  rho.name = "grid/rho";
  rho.dtype = DType::f64;
  rho.kind = RegionKind::global;
  rho.ndim = 2;
  rho.global = {4, 8};
  rho.attrs = {{"units", "g/cm^3"}};
  VarRecord t;
  t.name = "time";
  t.dtype = DType::f64;
  t.kind = RegionKind::scalar;
  t.uniform = true;
  idx.vars = {rho, t};
  BlockRecord b0;
  b0.var = 0;
  b0.rank = 0;
  b0.file = 0;
  b0.offset = 4096;
  b0.length = 2 * 8 * 8;
  b0.start = {0, 0};
  b0.count = {2, 8};
  b0.has_stats = true;
  b0.min_bits = 1;
  b0.max_bits = 2;
  b0.checksum = 77;
  BlockRecord b1 = b0;
  b1.rank = 1;
  b1.file = 1;
  b1.start = {2, 0};
  BlockRecord s0;
  s0.var = 1;
  s0.rank = 0;
  s0.file = 0;
  s0.offset = 4096 + 128;
  s0.length = 8;
  s0.checksum = 5;
  idx.blocks = {b0, b1, s0};
  idx.rank_file = {0, 1};
  return idx;
}
}  // namespace

TEST(Format, IndexRoundTrip) {
  const Index idx = sample();
  auto bytes = encode_index(idx);
  auto back = decode_index(bytes.data(), bytes.size());
  ASSERT_TRUE(back.ok()) << back.status().to_string();
  EXPECT_EQ(back->step, 42);
  EXPECT_EQ(back->nranks, 2u);
  EXPECT_EQ(back->transport, "posix");
  ASSERT_EQ(back->vars.size(), 2u);
  EXPECT_EQ(back->vars[0].name, "grid/rho");
  EXPECT_EQ(back->vars[0].global, (Shape{4, 8}));
  EXPECT_EQ(back->vars[0].attrs[0].second, "g/cm^3");
  EXPECT_TRUE(back->vars[1].uniform);
  ASSERT_EQ(back->blocks.size(), 3u);
  EXPECT_EQ(back->blocks[1].start, (Shape{2, 0}));
  EXPECT_EQ(back->blocks[1].checksum, 77u);
  EXPECT_TRUE(back->blocks[0].has_stats);
  EXPECT_EQ(back->rank_file, (std::vector<std::uint32_t>{0, 1}));
  EXPECT_EQ(encode_index(back.value()), bytes);  // canonical
}

TEST(Format, EveryFlippedByteIsDetected) {
  auto bytes = encode_index(sample());
  for (std::size_t i = 0; i < bytes.size(); ++i) {
    auto bad = bytes;
    bad[i] ^= 0x5a;
    auto r = decode_index(bad.data(), bad.size());
    EXPECT_FALSE(r.ok()) << "flip at byte " << i << " went unnoticed";
    if (!r.ok()) EXPECT_EQ(r.status().code(), Code::corrupt);
  }
}

TEST(Format, EveryTruncationIsDetected) {
  auto bytes = encode_index(sample());
  for (std::size_t n = 0; n < bytes.size(); ++n) EXPECT_FALSE(decode_index(bytes.data(), n).ok()) << n;
}

TEST(Format, InconsistentRecordsAreRejectedEvenWithAValidChecksum) {
  auto check = [](Index idx, const char* what) {
    auto bytes = encode_index(idx);
    auto r = decode_index(bytes.data(), bytes.size());
    EXPECT_FALSE(r.ok()) << what;
  };
  {
    Index i = sample();
    i.blocks[0].var = 9;
    check(i, "block names a missing variable");
  }
  {
    Index i = sample();
    i.blocks[0].file = 9;
    check(i, "block names a missing file");
  }
  {
    Index i = sample();
    i.blocks[1].start = {3, 0};
    check(i, "block outside the global shape");
  }
  {
    Index i = sample();
    i.blocks[0].length = 1;
    check(i, "length disagrees with extents");
  }
  {
    Index i = sample();
    i.files[0].name = "../etc/passwd";
    check(i, "file name escapes the directory");
  }
  {
    Index i = sample();
    i.vars[0].name = "/abs";
    check(i, "absolute variable name");
  }
  {
    Index i = sample();
    i.vars[0].name = "a/../b";
    check(i, "variable name with ..");
  }
  {
    Index i = sample();
    i.rank_file = {0};
    check(i, "writer map too short");
  }
  {
    Index i = sample();
    i.blocks[0].offset = ~0ull;
    check(i, "offset overflow");
  }
  {
    Index i = sample();
    i.vars[0].global = {~0ull, ~0ull};
    i.blocks.clear();
    check(i, "shape overflow");
  }
}

namespace {
/// The index `idx` encodes to, with byte `at` of the body set to `value` and the body checksum
/// recomputed: a reader sees a well-formed file whose one field breaks the spec.
std::vector<std::uint8_t> with_byte(const Index& idx, std::size_t at, std::uint8_t value) {
  auto bytes = encode_index(idx);
  bytes[at] = value;
  const std::size_t body_len = bytes.size() - kIndexHeaderBytes - kIndexFooterBytes;
  const std::uint64_t h = hash64(bytes.data() + kIndexHeaderBytes, body_len);
  std::memcpy(bytes.data() + bytes.size() - kIndexFooterBytes + 16, &h, 8);
  return bytes;
}
/// Position of the one body byte in which the encodings of `a` and `b` differ.
std::size_t differing_byte(const Index& a, const Index& b) {
  auto x = encode_index(a), y = encode_index(b);
  EXPECT_EQ(x.size(), y.size());
  std::size_t at = 0, n = 0;
  for (std::size_t i = kIndexHeaderBytes; i + kIndexFooterBytes < x.size(); ++i)
    if (x[i] != y[i]) at = i, ++n;
  EXPECT_EQ(n, 1u);
  return at;
}
void expect_rejected(const std::vector<std::uint8_t>& bytes, const std::string& why) {
  auto r = decode_index(bytes.data(), bytes.size());
  ASSERT_FALSE(r.ok()) << why;
  EXPECT_EQ(r.status().code(), Code::corrupt);
  EXPECT_NE(r.status().message().find(why), std::string::npos) << r.status().message();
}
}  // namespace

// docs/format.md: "uniform" is 0 or 1, the VAR reserved byte is 0, BLOCK flags have bit 0 only.
TEST(Format, UniformOtherThanZeroOrOneIsRejected) {
  Index a = sample(), b = sample();
  b.vars[1].uniform = false;
  const std::size_t at = differing_byte(a, b);
  for (std::uint8_t v : {0, 1}) EXPECT_TRUE(decode_index(with_byte(a, at, v).data(), encode_index(a).size()).ok());
  for (std::uint8_t v : {2, 7, 255}) expect_rejected(with_byte(a, at, v), "uniform = " + std::to_string(v));
}

TEST(Format, NonZeroReservedVariableByteIsRejected) {
  Index a = sample(), b = sample();
  b.vars[1].uniform = false;
  const std::size_t at = differing_byte(a, b) + 1;  // reserved follows uniform
  for (std::uint8_t v : {1, 7, 128}) expect_rejected(with_byte(a, at, v), "non-zero reserved byte");
}

TEST(Format, UnknownBlockFlagBitsAreRejected) {
  Index a = sample(), b = sample();
  b.blocks[0].has_stats = false;
  const std::size_t at = differing_byte(a, b);  // the low byte of block 0's flags
  for (std::uint8_t v : {2, 3, 0x80}) expect_rejected(with_byte(a, at, v), "unknown flag bits");
  for (std::size_t hi = 1; hi < 4; ++hi) expect_rejected(with_byte(a, at + hi, 1), "unknown flag bits");
}

TEST(Format, DuplicateNamesSecondBlocksOfARankBadFileWritersAndVariableKeysTwiceAreRejected) {
  auto rejected = [](const Index& idx, const std::string& why) { expect_rejected(encode_index(idx), why); };
  Index twice = sample();
  twice.vars[1].name = "grid/rho";
  twice.vars[1].kind = RegionKind::global;
  twice.vars[1].ndim = 0;
  twice.blocks.pop_back();  // only rho's blocks
  rejected(twice, "appears twice");
  Index two_local = sample();
  two_local.blocks.push_back(two_local.blocks[2]);  // rank 0 stores `time` twice
  rejected(two_local, "rank 0 has two blocks of 'time'");
  Index two_global = sample();
  two_global.blocks[1].rank = 0;  // both halves of rho from rank 0
  rejected(two_global, "rank 0 has two blocks of 'grid/rho'");
  Index writer = sample();
  writer.files[1].writer = 2;  // 2 ranks
  rejected(writer, "names writer rank 2");
  Index key_twice = sample();
  key_twice.vars[0].attrs = {{"units", "g/cc"}, {"units", "kg/m3"}};  // annotate() would have replaced it
  rejected(key_twice, "has attribute 'units' twice");
  Index ok = sample();
  ok.attrs = {{"mpiio.hint.cb_nodes", "2"}, {"mpiio.hint.cb_nodes", "4"}};  // checkpoint attributes: a list
  ok.vars[0].attrs = {{"units", "g/cc"}, {"origin", "sedov"}};
  ok.blocks.push_back(ok.blocks[2]);
  ok.blocks.back().rank = 1;  // rank 1's `time`: one block per rank is fine
  auto bytes = encode_index(ok);
  EXPECT_TRUE(decode_index(bytes.data(), bytes.size()).ok());
}

TEST(Format, DataHeaderReservedFieldAndWriterRankAreChecked) {
  auto header = [](std::uint32_t writer, std::uint32_t nranks, std::uint64_t reserved) {
    DataHeader h;
    h.writer = writer;
    h.nranks = nranks;
    h.data_offset = 4096;
    auto b = encode_data_header(h);
    std::memcpy(b.data() + 48, &reserved, 8);
    const std::uint64_t sum = hash64(b.data(), kDataHeaderBytes - 8);
    std::memcpy(b.data() + kDataHeaderBytes - 8, &sum, 8);
    return decode_data_header(b.data(), b.size());
  };
  EXPECT_TRUE(header(3, 4, 0).ok());
  auto r = header(3, 4, 1);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("reserved"), std::string::npos);
  EXPECT_FALSE(header(4, 4, 0).ok());  // writer >= nranks
  EXPECT_FALSE(header(0, 0, 0).ok());  // no ranks
}

TEST(Format, DataHeaderRoundTripAndDamage) {
  DataHeader h;
  h.step = 7;
  h.writer = 3;
  h.nranks = 4;
  h.ckpt_id = 99;
  h.data_offset = 4096;
  auto b = encode_data_header(h);
  ASSERT_EQ(b.size(), kDataHeaderBytes);
  auto back = decode_data_header(b.data(), b.size());
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->writer, 3u);
  EXPECT_EQ(back->data_offset, 4096u);
  for (std::size_t i = 0; i < b.size(); ++i) {
    auto bad = b;
    bad[i] ^= 1;
    EXPECT_FALSE(decode_data_header(bad.data(), bad.size()).ok()) << i;
  }
}

TEST(Format, StreamingHashEqualsOneShot) {
  std::vector<std::uint8_t> data(100000);
  for (std::size_t i = 0; i < data.size(); ++i) data[i] = static_cast<std::uint8_t>(i * 31 + 7);
  Hasher h;
  for (std::size_t off = 0; off < data.size(); off += 4096)
    h.update(data.data() + off, std::min<std::size_t>(4096, data.size() - off));
  EXPECT_EQ(h.digest(), hash64(data.data(), data.size()));
}

// The checksums are part of the format: whatever instruction set base/hash.cpp's XXH3 runs on (the
// dispatching functions of libxxhash where it has them), the values are the plain functions', for every
// length class of XXH3 (0, 1-3, 4-8, 9-16, 17-128, 129-240, longer) and fed to the streaming hashers in
// odd parts. And min/max (an AVX2 copy of its loop where the CPU has it) equals a plain scan.
TEST(Format, HashesAreThePlainXxh3s) {
  std::vector<std::uint8_t> data((1 << 20) + 7);
  for (std::size_t i = 0; i < data.size(); ++i) data[i] = static_cast<std::uint8_t>(i * 131 + (i >> 9));
  const std::size_t lengths[] = {
      0, 1, 2, 3, 4, 8, 9, 16, 17, 64, 128, 129, 200, 240, 241, 1024, 1025, 65535, 65536, 65537, (1u << 20) + 7};
  for (std::size_t n : lengths) {
    EXPECT_EQ(hash64(data.data(), n), XXH3_64bits(data.data(), n)) << n;
    const XXH128_hash_t plain = XXH3_128bits(data.data(), n);
    const Hash128 mine = hash128(data.data(), n);
    EXPECT_EQ(mine.lo, plain.low64) << n;
    EXPECT_EQ(mine.hi, plain.high64) << n;
    Hasher h;
    Hasher128 h128;
    for (std::size_t off = 0, part = 1; off < n; off += part, part = part * 3 + 1) {
      h.update(data.data() + off, std::min(part, n - off));
      h128.update(data.data() + off, std::min(part, n - off));
    }
    EXPECT_EQ(h.digest(), XXH3_64bits(data.data(), n)) << n;
    EXPECT_EQ(h128.digest().lo, plain.low64) << n;
    EXPECT_EQ(h128.digest().hi, plain.high64) << n;
  }
  std::vector<double> v(100003);
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = std::sin(static_cast<double>(i)) * static_cast<double>(i % 977);
  v[5] = std::nan("");
  MinMax m(DType::f64);
  m.update(v.data(), v.size() * sizeof(double));
  double lo = v[0], hi = v[0];
  for (double x : v)
    if (!std::isnan(x)) lo = std::min(lo, x), hi = std::max(hi, x);
  EXPECT_EQ(stat_to_double(DType::f64, m.min_bits()), lo);
  EXPECT_EQ(stat_to_double(DType::f64, m.max_bits()), hi);
}

TEST(Format, MinMaxIgnoresNaNAndHandlesSignedTypes) {
  double v[] = {3.0, std::nan(""), -2.5, 7.25};
  MinMax m(DType::f64);
  m.update(v, sizeof v);
  ASSERT_TRUE(m.valid());
  EXPECT_EQ(stat_to_double(DType::f64, m.min_bits()), -2.5);
  EXPECT_EQ(stat_to_double(DType::f64, m.max_bits()), 7.25);
  std::int32_t w[] = {5, -9, 2};
  MinMax n(DType::i32);
  n.update(w, sizeof w);
  EXPECT_EQ(stat_to_string(DType::i32, n.min_bits()), "-9");
  EXPECT_EQ(stat_to_string(DType::i32, n.max_bits()), "5");
}

TEST(Format, MinMaxMatchesAPlainLoopAcrossUpdates) {
  // The unrolled loop (8 accumulators) against std::min/max: leading NaNs, NaNs inside, extremes in
  // every lane and in the tail, values split over several update() calls at odd element counts.
  std::vector<double> v(1003);
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = std::sin(0.37 * static_cast<double>(i)) * (1.0 + i % 13);
  v[0] = v[1] = v[500] = std::nan("");
  v[777] = -1e6;
  v[1002] = 1e6;
  MinMax m(DType::f64);
  for (std::size_t off = 0; off < v.size(); off += 97)
    m.update(v.data() + off, std::min<std::size_t>(97, v.size() - off) * sizeof(double));
  EXPECT_EQ(stat_to_double(DType::f64, m.min_bits()), -1e6);
  EXPECT_EQ(stat_to_double(DType::f64, m.max_bits()), 1e6);
  std::vector<std::uint8_t> u(77);
  for (std::size_t i = 0; i < u.size(); ++i) u[i] = static_cast<std::uint8_t>(100 + (i * 37) % 50);
  u[3] = 7;
  u[76] = 250;
  MinMax n(DType::u8);
  n.update(u.data(), u.size());
  EXPECT_EQ(stat_to_string(DType::u8, n.min_bits()), "7");
  EXPECT_EQ(stat_to_string(DType::u8, n.max_bits()), "250");
  double all_nan[9];
  for (double& x : all_nan) x = std::nan("");
  MinMax none(DType::f64);
  none.update(all_nan, sizeof all_nan);
  EXPECT_FALSE(none.valid());
}

TEST(Format, IndexOfOnlyScalarsDecodes) {
  // Regression: the smallest block record (a 0-d scalar) is 56 bytes; an index that ends with many
  // of them must decode.
  Index idx;
  idx.step = 1;
  idx.nranks = 4;
  idx.transport = "posix";
  idx.files = {{"data.0", 0, 4096}};
  VarRecord v;
  v.name = "step";
  v.dtype = DType::i64;
  v.kind = RegionKind::scalar;
  idx.vars = {v};
  for (std::uint32_t r = 0; r < 4; ++r) {
    BlockRecord b;
    b.rank = r;
    b.length = 8;
    idx.blocks.push_back(b);
  }
  idx.rank_file = {0, 0, 0, 0};
  auto bytes = encode_index(idx);
  auto back = decode_index(bytes.data(), bytes.size());
  ASSERT_TRUE(back.ok()) << back.status().to_string();
  EXPECT_EQ(back->blocks.size(), 4u);
}

namespace {
/// Two ranks' rows of a joined array [5 rows, 3]: rank 0 rows [0, 2), rank 1 rows [2, 5).
Index joined_sample() {
  Index idx = sample();
  VarRecord w;
  w.name = "walkers";
  w.dtype = DType::f64;
  w.kind = RegionKind::joined;
  w.ndim = 2;
  w.global = {5, 3};
  idx.vars.push_back(w);
  BlockRecord b;
  b.var = 2;
  b.rank = 0;
  b.offset = 8192;
  b.start = {0, 0};
  b.count = {2, 3};
  b.length = 2 * 3 * 8;
  idx.blocks.push_back(b);
  b.rank = 1;
  b.file = 1;
  b.start = {2, 0};
  b.count = {3, 3};
  b.length = 3 * 3 * 8;
  idx.blocks.push_back(b);
  return idx;
}
}  // namespace

TEST(Format, JoinedArrayRoundTrips) {
  auto bytes = encode_index(joined_sample());
  auto back = decode_index(bytes.data(), bytes.size());
  ASSERT_TRUE(back.ok()) << back.status().to_string();
  EXPECT_EQ(back->vars[2].kind, RegionKind::joined);
  EXPECT_EQ(back->vars[2].global, (Shape{5, 3}));
  EXPECT_EQ(back->blocks[4].start, (Shape{2, 0}));
}

TEST(Format, JoinedRowsThatDoNotTileAreCorrupt) {
  auto check = [](Index idx, const char* what) {
    auto bytes = encode_index(idx);
    auto r = decode_index(bytes.data(), bytes.size());
    ASSERT_FALSE(r.ok()) << what;
    EXPECT_EQ(r.status().code(), Code::corrupt) << what;
  };
  {
    Index i = joined_sample();
    i.blocks[4].start = {1, 0};  // overlaps rank 0's rows
    check(i, "overlapping rows");
  }
  {
    Index i = joined_sample();
    i.vars[2].global = {6, 3};  // a row nobody stored
    check(i, "row count larger than the blocks");
  }
  {
    Index i = joined_sample();
    std::swap(i.blocks[3].rank, i.blocks[4].rank);  // rank 1's rows before rank 0's
    check(i, "rows out of rank order");
  }
  {
    Index i = joined_sample();
    i.blocks[4].count = {3, 2};  // not whole rows
    i.blocks[4].length = 3 * 2 * 8;
    i.vars[2].global = {5, 3};
    check(i, "partial rows");
  }
  {
    Index i = joined_sample();
    i.vars[2].ndim = 0;
    i.vars[2].global.clear();
    check(i, "a joined array without dimensions");
  }
}
