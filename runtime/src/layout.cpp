#include "runtime/src/layout.hpp"

namespace ckpt::detail {

const char* region_kind_name(RegionKind k) noexcept {
  switch (k) {
    case RegionKind::local: return "local";
    case RegionKind::global: return "global";
    case RegionKind::scalar: return "scalar";
  }
  return "?";
}

std::uint64_t Region::elements() const {
  std::uint64_t n = 1;
  for (auto c : count) n *= c;
  return n;
}

static std::uint64_t round_up(std::uint64_t x, std::uint64_t a) { return (x + a - 1) / a * a; }

StreamPlan plan_stream(const std::vector<Region>& regions, std::uint64_t alignment) {
  constexpr std::uint64_t kLarge = 64 * 1024;
  StreamPlan p;
  p.vars = regions;
  std::uint64_t off = 0;
  for (std::uint32_t i = 0; i < regions.size(); ++i) {
    const Region& r = regions[i];
    BlockPlan b;
    b.var = i;
    b.length = r.bytes();
    off = round_up(off, b.length >= kLarge ? alignment : 8);
    b.offset = off;
    b.src = r.ptr;
    b.mem = r.mem;
    off += b.length;
    p.payload += b.length;
    p.blocks.push_back(b);
  }
  p.bytes = off;
  return p;
}

Status check_name(const std::string& name) {
  auto bad = [&](const std::string& why) {
    return Status(Code::invalid_argument, "bad region name '" + name + "': " + why);
  };
  if (name.empty()) return bad("empty");
  if (name.size() > 255) return bad("longer than 255 bytes");
  if (name.front() == '/') return bad("starts with '/'");
  for (char c : name) {
    bool okc = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
               c == '.' || c == '/' || c == '-';
    if (!okc) return bad("only letters, digits and _ . / - are allowed");
  }
  std::size_t pos = 0;
  while (pos <= name.size()) {
    std::size_t e = name.find('/', pos);
    if (e == std::string::npos) e = name.size();
    std::string comp = name.substr(pos, e - pos);
    if (comp.empty()) return bad("empty path component");
    if (comp == ".." || comp == ".") return bad("'.' and '..' components are not allowed");
    pos = e + 1;
  }
  return Status::OK();
}

}  // namespace ckpt::detail
