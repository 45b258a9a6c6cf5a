// libFuzzer target: the index decoder (base/format.cpp decode_index), which reads untrusted
// bytes from disk. The body is protected by an XXH3 in the footer, which random mutations almost
// never satisfy; so half of the inputs are taken as a *body* and wrapped into a header and a footer
// with the right checksum, which lets the fuzzer reach every field check of the body. A body whose last
// byte has bit 1 set, and the body of a whole input in the transfer encoding, are framed with the transfer
// encoding's version (kTransferIndexVersion: pieced blocks and REFs, as ranks send an index with
// references). A decoded index must re-encode to bytes that decode again to the same counts, in the
// encoding its content asks for (version 1 without references or pieces; the transfer encoding, when the
// input was in it, byte for byte).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "base/format.hpp"

namespace {
void put32(std::vector<std::uint8_t>& v, std::uint32_t x) {
  for (int i = 0; i < 4; ++i) v.push_back(static_cast<std::uint8_t>(x >> (8 * i)));
}
void put64(std::vector<std::uint8_t>& v, std::uint64_t x) {
  for (int i = 0; i < 8; ++i) v.push_back(static_cast<std::uint8_t>(x >> (8 * i)));
}
/// header | body | footer, as docs/format.md describes, with `version` in header and footer.
std::vector<std::uint8_t> wrap(const std::uint8_t* body, std::size_t n, std::uint32_t version) {
  std::vector<std::uint8_t> v;
  const char* magic = "CKPTINDX";
  v.insert(v.end(), magic, magic + 8);
  put32(v, version);
  put32(v, 0);
  v.insert(v.end(), body, body + n);
  put64(v, ckpt::detail::kIndexHeaderBytes);
  put64(v, n);
  put64(v, ckpt::detail::hash64(body, n));
  put32(v, version);
  put32(v, 0);
  const char* end = "CKPTEND1";
  v.insert(v.end(), end, end + 8);
  return v;
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::vector<std::uint8_t> wrapped;
  const std::uint8_t* p = data;
  std::size_t n = size;
  // Inputs that are already whole index files (the seeds) are decoded as they are; others, and
  // every input whose last byte is odd, as a body.
  const bool whole = size >= ckpt::detail::kIndexHeaderBytes + ckpt::detail::kIndexFooterBytes &&
                     std::memcmp(data, "CKPTINDX", 8) == 0;
  if (!whole || (size > 0 && (data[size - 1] & 1))) {
    const std::uint8_t* body = whole ? data + ckpt::detail::kIndexHeaderBytes : data;
    std::size_t bn = whole ? size - ckpt::detail::kIndexHeaderBytes : size;
    if (whole) bn -= ckpt::detail::kIndexFooterBytes;
    const bool transfer = whole ? ckpt::detail::index_header_version(data, size) == ckpt::detail::kTransferIndexVersion
                                : size > 0 && (data[size - 1] & 2);
    wrapped = wrap(body, bn, transfer ? ckpt::detail::kTransferIndexVersion : ckpt::detail::kFormatVersion);
    p = wrapped.data();
    n = wrapped.size();
  }
  auto idx = ckpt::detail::decode_index(p, n);
  if (!idx.ok()) return 0;
  auto bytes = ckpt::detail::encode_index(idx.value());
  auto again = ckpt::detail::decode_index(bytes.data(), bytes.size());
  if (!again.ok() || again->blocks.size() != idx->blocks.size() || again->vars.size() != idx->vars.size() ||
      again->files.size() != idx->files.size() || again->step != idx->step || again->refs.size() != idx->refs.size())
    std::abort();  // encode/decode disagree
  // The transfer encoding is taken exactly when there are references or pieces, and is canonical.
  const std::uint32_t version = ckpt::detail::index_header_version(bytes.data(), bytes.size());
  if ((version == ckpt::detail::kTransferIndexVersion) != idx->incremental()) std::abort();
  if (version == ckpt::detail::kTransferIndexVersion && ckpt::detail::index_header_version(p, n) == version &&
      bytes != std::vector<std::uint8_t>(p, p + n))
    std::abort();
  return 0;
}
