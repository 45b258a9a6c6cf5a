// adv_craft: rewrites the index of a checkpoint directory as an attacker would, with valid checksums
// (encode_index computes them), for adversarial.py (issue 31, part 6). Serial; no MPI call.
//   adv_craft claim DIR VAR   the first block of global variable VAR claims 1 TiB: the variable's shape,
//                             the block's count and length and its file's recorded size grow to match, so
//                             the index decodes, while the data file holds what it held (a few KiB)
//   adv_craft hostile DIR     hostile bytes wherever an index holds free text: the transport, a checkpoint
//                             attribute, an annotation of every variable (key and value), and the name of
//                             the first data file (renamed on disk too)
// Prints the bytes it planted (hostile) as a Python bytes literal per line, for the checks.
#include <algorithm>
#include <cstdio>
#include <string>

#include "base/format.hpp"
#include "base/posix_io.hpp"
#include "base/store.hpp"

namespace {

using namespace ckpt::detail;

/// Terminal escapes (CSI clear screen, OSC window title ended by BEL), the 8-bit CSI as UTF-8 (C1),
/// bytes that are not UTF-8 (a lone continuation, 0xff, an overlong '/'), a newline, a tab, DEL, a
/// backslash, and a valid non-ASCII letter that must come out as it is.
const std::string kHostile = std::string(
                                 "e\xcc\x81t\xc3\xa9 \x1b[2J\x1b]0;pwned\x07 \xc2\x9b"
                                 "31m \x80\xff\xc0\xaf") +
                             "\n\t\x7f\\x41";

int fail(const std::string& what) {
  std::fprintf(stderr, "adv_craft: %s\n", what.c_str());
  return 1;
}

void print_bytes(const char* what, const std::string& s) {
  std::printf("%s b'", what);
  for (unsigned char c : s) std::printf("\\x%02x", c);
  std::printf("'\n");
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) return fail("usage: adv_craft claim DIR VAR | hostile DIR");
  const std::string mode = argv[1], dir = argv[2];
  auto idx = load_checkpoint_index(dir, std::nullopt);
  if (!idx.ok()) return fail(idx.status().to_string());
  Index& x = idx.value();
  if (mode == "claim" && argc == 4) {
    const long v = x.find_var(argv[3]);
    if (v < 0 || x.vars[v].kind != RegionKind::global || x.vars[v].ndim != 1)
      return fail("no 1-d global " + std::string(argv[3]));
    const std::uint64_t tib = 1ull << 40, elems = tib / dtype_size(x.vars[v].dtype);
    for (BlockRecord& b : x.blocks) {
      if (b.var != static_cast<std::uint32_t>(v) || b.length == 0) continue;
      x.vars[v].global = {b.start[0] + elems};
      b.count = {elems};
      b.length = tib;
      x.files[b.file].bytes = std::max(x.files[b.file].bytes, b.offset + tib);
      break;
    }
  } else if (mode == "hostile") {
    x.transport = "posix" + kHostile;
    x.attrs.emplace_back("k" + kHostile, "v" + kHostile);
    // A NUL in a value: annotate() takes any bytes.
    for (VarRecord& r : x.vars) r.attrs.emplace_back("note" + kHostile, "v" + kHostile + std::string(1, '\0') + "z");
    const std::string old = x.files[0].name, renamed = "data" + kHostile;
    if (::rename((dir + "/" + old).c_str(), (dir + "/" + renamed).c_str()) != 0) return fail("rename " + old);
    x.files[0].name = renamed;
    print_bytes("hostile", kHostile);
    print_bytes("file", renamed);
  } else {
    return fail("usage: adv_craft claim DIR VAR | hostile DIR");
  }
  const auto bytes = encode_index(x);
  if (!decode_index(bytes.data(), bytes.size()).ok()) return fail("the crafted index does not decode");
  ckpt::Status s = write_file(dir + "/index", bytes.data(), bytes.size(), false);
  if (!s.ok()) return fail(s.to_string());
  return 0;
}
