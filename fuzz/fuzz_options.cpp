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
  if (o.ok() && !o->validate().ok()) std::abort();  // try_load must only return valid options
  return 0;
}
