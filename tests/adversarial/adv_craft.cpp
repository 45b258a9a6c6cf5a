// adv_craft: rewrites the index of a checkpoint directory as an attacker would, with valid checksums
// (encode_index computes them), for adversarial.py (issue 31, part 6). Serial; no MPI call.
//   adv_craft claim DIR VAR   the first block of global variable VAR claims 1 TiB: the variable's shape,
//                             the block's count and length and its file's recorded size grow to match, so
//                             the index decodes, while the data file holds what it held (a few KiB)
#include <algorithm>
#include <cstdio>
#include <string>

#include "base/format.hpp"
#include "base/posix_io.hpp"
#include "base/store.hpp"

namespace {

using namespace ckpt::detail;

int fail(const std::string& what) {
  std::fprintf(stderr, "adv_craft: %s\n", what.c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) return fail("usage: adv_craft claim DIR VAR");
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
  } else {
    return fail("usage: adv_craft claim DIR VAR");
  }
  const auto bytes = encode_index(x);
  if (!decode_index(bytes.data(), bytes.size()).ok()) return fail("the crafted index does not decode");
  ckpt::Status s = write_file(dir + "/index", bytes.data(), bytes.size(), false);
  if (!s.ok()) return fail(s.to_string());
  return 0;
}
