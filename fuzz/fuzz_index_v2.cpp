// libFuzzer target: the version-2 index decoders (base/index_v2.cpp decode_root_index, decode_catalog,
// decode_subindex, decode_directory, assemble_index), which read untrusted bytes from disk. As in
// fuzz_index, random bytes almost never carry a valid checksum, so inputs are taken as *bodies* and
// framed with the right header, footer and checksum. The first byte picks what the rest is:
//   0 a root index, 1 a catalog (rule: the second byte), 2 a sub-index of a fixed sample root,
//   3 a directory of the sample's global or joined variable, 4 the sample with its catalog or one
//   sub-index replaced (the catalog entry and the root's hash made to agree, so that assemble_index's
//   cross-checks are reached). In modes 2 and 4 the second byte's top bit frames the sub-index with flag
//   bit 0 (pieces) under the sample root given references (REFSUMs of steps 3 and 4), so that pieced
//   blocks and REFs are decoded, and assembled into Index::refs.
// An input that is a version-1 index (the seed corpus: fuzz/make_corpus.sh copies every index) is split
// by each rule and assembled again. Properties (std::abort when broken): a decoded object re-encodes to
// the very bytes it came from; whatever split_index accepts, assemble_index accepts, and assembling is a
// fixed point; an assembled index is a valid index (version 1, or the transfer encoding when it has
// references or pieces).
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "base/index_v2.hpp"

using ckpt::Result;
using namespace ckpt::detail;

namespace {

void put32(std::vector<std::uint8_t>& v, std::uint32_t x) {
  for (int i = 0; i < 4; ++i) v.push_back(static_cast<std::uint8_t>(x >> (8 * i)));
}
void put64(std::vector<std::uint8_t>& v, std::uint64_t x) {
  for (int i = 0; i < 8; ++i) v.push_back(static_cast<std::uint8_t>(x >> (8 * i)));
}

/// header | body | footer, as docs/format.md describes every version-2 object.
std::vector<std::uint8_t> wrap(const char* magic, std::uint32_t version, std::uint32_t flags, const std::uint8_t* body,
                               std::size_t n) {
  std::vector<std::uint8_t> v(magic, magic + 8);
  put32(v, version);
  put32(v, flags);
  v.insert(v.end(), body, body + n);
  put64(v, kObjectHeaderBytes);
  put64(v, n);
  put64(v, hash64(body, n));
  put32(v, version);
  put32(v, 0);
  const char* end = "CKPTEND1";
  v.insert(v.end(), end, end + 8);
  return v;
}

/// Aborts naming the broken property's line, so that a CI log says which one failed.
void check_at(bool ok, int line) {
  if (ok) return;
  std::fprintf(stderr, "fuzz_index_v2: property at fuzz_index_v2.cpp:%d broken\n", line);
  std::abort();
}
#define check(ok) check_at((ok), __LINE__)

/// A small checkpoint of 3 ranks: a global array, a joined array, a local array, in two files.
Index sample_index() {
  Index idx;
  idx.step = 5;
  idx.nranks = 3;
  idx.ckpt_id = 77;
  idx.transport = "posix";
  idx.files = {{"data.0", 0, 4096}, {"data.1", 1, 4096}, {"data.2", 2, 4096}};
  idx.rank_file = {0, 1, 2};
  VarRecord g{"g", ckpt::DType::f64, RegionKind::global, false, 2, {6, 4}, {}};
  VarRecord j{"j", ckpt::DType::i32, RegionKind::joined, false, 2, {2, 2}, {}};
  VarRecord l{"l", ckpt::DType::u8, RegionKind::local, false, 1, {}, {}};
  idx.vars = {g, j, l};
  for (std::uint32_t r = 0; r < 3; ++r) {
    // var, rank, file, has_stats, offset, length, start, count, min, max, checksum
    idx.blocks.push_back({0, r, r, true, 64, 64, {2ull * r, 0}, {2, 4}, r, r + 1, 11 + r});
    const std::uint64_t rows = r == 1 ? 0 : 1;  // rank 1 holds no row of j: rows [0, 1), [1, 1), [1, 2)
    idx.blocks.push_back({1, r, r, false, 128, 8 * rows, {r == 0 ? 0ull : 1ull, 0}, {rows, 2}, 0, 0, 21 + r});
    idx.blocks.push_back({2, r, r, true, 256, r + 1ull, {0}, {r + 1ull}, 1, 2, 31 + r});
  }
  return idx;
}

struct Sample {
  SplitIndex split;
  RootIndex root;
  RootIndex with_refs;  ///< root with references: base step 3, REFSUMs of steps 3 and 4 (ids 30, 40)
};

const Sample& sample() {
  static const Sample s = [] {
    Sample out;
    auto sp = split_index(sample_index(), WriterRule::groups, 2, 0x1234);
    check(sp.ok());
    out.split = sp.value();
    const auto b = encode_root_index(out.split.root);
    auto root = decode_root_index(b.data(), b.size());
    check(root.ok());
    out.root = root.value();
    auto back = assemble_index(out.root, out.split.catalog.data(), out.split.catalog.size(), out.split.subindices);
    check(back.ok());
    RootIndex refs = out.split.root;
    refs.base_step = 3;
    refs.refs = {{0, 3, 30}, {0, 4, 40}};
    const auto rb = encode_root_index(refs);
    auto with_refs = decode_root_index(rb.data(), rb.size());
    check(with_refs.ok());
    out.with_refs = with_refs.value();
    return out;
  }();
  return s;
}

/// assemble_index's result must be a valid index (the transfer encoding when it has references or pieces).
void check_assembled(const Result<Index>& idx) {
  if (!idx.ok()) return;
  const auto bytes = encode_index(idx.value());
  check(decode_index(bytes.data(), bytes.size()).ok());
}

/// Assembles `s` with `root` re-decoded from its bytes (assemble_index trusts a decoded root only).
Result<Index> assemble_split(const SplitIndex& s) {
  const auto b = encode_root_index(s.root);
  auto root = decode_root_index(b.data(), b.size());
  if (!root.ok()) return root.status();
  return assemble_index(root.value(), s.catalog.data(), s.catalog.size(), s.subindices);
}

void fuzz_v1(const Index& idx, const std::uint8_t* data, std::size_t size) {
  const std::uint32_t g = size > 1 ? 1 + data[1] % 8 : 1;
  std::vector<std::uint32_t> map(idx.nranks);
  for (std::uint32_t r = 0; r < idx.nranks; ++r) map[r] = size > 2 + r % 64 ? data[2 + r % 64] % (r + 1) : 0;
  for (int rule = 0; rule < 3; ++rule) {
    auto s = split_index(idx, static_cast<WriterRule>(rule), rule == 1 ? g : 0, 0x9e3779b97f4a7c15ull,
                         rule == 2 ? map : std::vector<std::uint32_t>{});
    if (!s.ok()) continue;
    auto once = assemble_split(s.value());
    check(once.ok());  // what split writes, assemble reads
    check_assembled(once);
    auto again = split_index(once.value(), static_cast<WriterRule>(rule), rule == 1 ? g : 0, 0x9e3779b97f4a7c15ull,
                             rule == 2 ? map : std::vector<std::uint32_t>{});
    check(again.ok());
    auto twice = assemble_split(again.value());
    check(twice.ok() && encode_index(twice.value()) == encode_index(once.value()));
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  // A version-1 index (a seed), whole or - when its last byte is odd - as a body to frame.
  if (size >= kObjectHeaderBytes + kObjectFooterBytes && std::memcmp(data, "CKPTINDX", 8) == 0 && data[8] == 1) {
    auto idx = decode_index(data, size);
    if (!idx.ok() && (data[size - 1] & 1)) {
      const auto framed =
          wrap("CKPTINDX", 1, 0, data + kObjectHeaderBytes, size - kObjectHeaderBytes - kObjectFooterBytes);
      idx = decode_index(framed.data(), framed.size());
    }
    if (idx.ok()) fuzz_v1(idx.value(), data, size);
    return 0;
  }
  if (size < 2) return 0;
  const Sample& s = sample();
  const std::uint8_t mode = data[0] % 5, arg = data[1];
  const std::uint8_t* body = data + 2;
  const std::size_t n = size - 2;
  switch (mode) {
    case 0: {
      const auto b = wrap("CKPTINDX", kIndexV2Version, arg & 1, body, n);
      auto root = decode_root_index(b.data(), b.size());
      if (root.ok()) check(encode_root_index(root.value()) == b);
      break;
    }
    case 1: {
      const auto b = wrap("CKPTCATL", kIndexV2Version, 0, body, n);
      auto cat = decode_catalog(b.data(), b.size(), static_cast<WriterRule>(arg % 3));
      if (cat.ok()) check(encode_catalog(cat.value()) == b);
      break;
    }
    case 2: {
      const bool pieces = (arg & 0x80) != 0;
      const auto b = wrap("CKPTSUBX", kIndexV2Version, pieces ? 1 : 0, body, n);
      auto sub = decode_subindex(b.data(), b.size(), pieces ? s.with_refs : s.root);
      if (sub.ok()) check(encode_subindex(sub.value()) == b);
      break;
    }
    case 3: {
      Var2 v = s.root.vars[arg % 2];  // the global or the joined array
      v.dir.length = n;
      v.dir.entries = static_cast<std::uint32_t>(n / (8 + 16 * v.var.ndim));
      v.dir.checksum = n == 0 ? 0 : hash64(body, n);
      auto dir = decode_directory(body, n, v, s.root.writers);
      if (dir.ok()) check(encode_directory(dir.value()) == std::vector<std::uint8_t>(body, body + n));
      break;
    }
    default: {
      SplitIndex t = s.split;
      const bool pieces = (arg & 0x80) != 0;
      if (pieces) t.root = s.with_refs;  // the catalog does not depend on the references
      const std::uint32_t which = (arg & 0x7f) % (t.subindices.size() + 1);
      auto cat = decode_catalog(t.catalog.data(), t.catalog.size(), t.root.rule);
      check(cat.ok());
      if (which == t.subindices.size()) {
        t.catalog = wrap("CKPTCATL", kIndexV2Version, 0, body, n);
      } else {
        t.subindices[which] = wrap("CKPTSUBX", kIndexV2Version, pieces ? 1 : 0, body, n);
        CatalogEntry& e = cat.value().entries[which];
        e.length = t.subindices[which].size();
        e.checksum = hash64(t.subindices[which].data(), t.subindices[which].size());
        e.self_checksum = catalog_entry_checksum(e, cat->token, which);
        t.catalog = encode_catalog(cat.value());
      }
      t.root.catalog_length = t.catalog.size();
      t.root.catalog_hash = hash128(t.catalog.data(), t.catalog.size());
      check_assembled(assemble_split(t));
      break;
    }
  }
  return 0;
}
