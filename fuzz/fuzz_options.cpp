// libFuzzer target: the YAML options parser. Options::try_load takes a path, so each input is
// written to a file in /dev/shm (or $TMPDIR) first. Any outcome but a crash, a hang or an escaped
// exception is fine; a loaded Options must also pass validate().
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "ckpt/options.hpp"

namespace {
std::string temp_path() {
  const char* d =
      ::access("/dev/shm", W_OK) == 0 ? "/dev/shm" : (std::getenv("TMPDIR") ? std::getenv("TMPDIR") : "/tmp");
  return std::string(d) + "/ckpt-fuzz-options." + std::to_string(::getpid()) + ".yaml";
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const std::string path = temp_path();
  FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) return 0;
  std::fwrite(data, 1, size, f);
  std::fclose(f);
  auto o = ckpt::Options::try_load(path);
  ::unlink(path.c_str());  // libFuzzer ends with exit(): nothing would remove the last one
  if (!o.ok()) return 0;
  if (!o->validate().ok()) std::abort();  // try_load must only return valid options
  // What to_yaml() prints loads back as the same options (the printing of every row reads back).
  const std::string y = o->to_yaml();
  f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) return 0;
  std::fwrite(y.data(), 1, y.size(), f);
  std::fclose(f);
  auto back = ckpt::Options::try_load(path);
  ::unlink(path.c_str());
  if (!back.ok() || back->to_yaml() != y) std::abort();
  return 0;
}
