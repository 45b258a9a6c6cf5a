// base/posix_io: pwrite_direct() (option direct_io) writes exactly the bytes pwrite_all() would, for
// every alignment of address, offset and length, through O_DIRECT where it can (the page cache does
// not keep those pages) and through the page cache where it cannot (tmpfs, unaligned pieces).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "base/posix_io.hpp"
#include "test_util.hpp"

using ckpt::Status;
using namespace ckpt::detail;
using ckpt::test::resident_pages;
using ckpt::test::scratch_dir;

namespace {

/// 4 KiB-aligned memory holding a byte pattern that differs at every offset.
struct Buffer {
  explicit Buffer(std::size_t n) : bytes(n) {
    p = static_cast<std::uint8_t*>(std::aligned_alloc(kDirectAlign, (n + kDirectAlign) / kDirectAlign * kDirectAlign));
    for (std::size_t i = 0; i < n + 1; ++i) p[i] = static_cast<std::uint8_t>((i * 131) ^ (i >> 9));
  }
  ~Buffer() { std::free(p); }
  std::uint8_t* p;
  std::size_t bytes;
};

std::vector<std::uint8_t> read_all(const std::string& path) {
  auto r = read_file(path, 1ull << 30);
  EXPECT_TRUE(r.ok()) << r.status().to_string();
  return r.ok() ? r.value() : std::vector<std::uint8_t>{};
}

/// Writes `n` bytes of `src` at `off` of a fresh file with pwrite_direct (direct descriptor when
/// `direct`) and fdatasyncs; returns the pages of the file in the page cache right after.
std::size_t write_synced(const std::string& path, const std::uint8_t* src, std::size_t n, std::uint64_t off,
                         bool direct) {
  ::unlink(path.c_str());
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  EXPECT_GE(fd, 0);
  const int dfd = direct ? open_direct(path) : -1;
  Status s = pwrite_direct(dfd, fd, src, n, off, path);
  EXPECT_TRUE(s.ok()) << s.to_string();
  EXPECT_EQ(::fdatasync(fd), 0);
  if (dfd >= 0) ::close(dfd);
  ::close(fd);
  return resident_pages(path);
}

/// The file holds `off` zero bytes, then the `n` bytes of `src`.
void check_file(const std::string& path, const std::uint8_t* src, std::size_t n, std::uint64_t off) {
  const auto got = read_all(path);
  ASSERT_EQ(got.size(), off + n);
  for (std::uint64_t i = 0; i < off; ++i) ASSERT_EQ(got[i], 0) << "hole byte " << i;
  for (std::size_t i = 0; i < n; ++i) ASSERT_EQ(got[off + i], src[i]) << "byte " << i << " of " << n << " at " << off;
}

void write_and_check(const std::string& path, const std::uint8_t* src, std::size_t n, std::uint64_t off, bool direct) {
  (void)write_synced(path, src, n, off, direct);
  check_file(path, src, n, off);
}

}  // namespace

TEST(PosixIo, DirectWritesTheSameBytesForEveryAlignment) {
  const std::string dir = scratch_dir();
  Buffer b(3 * kDirectAlign + 1000);
  const std::uint64_t offsets[] = {0, 512, kDirectAlign, 2 * kDirectAlign + 7};
  const std::size_t lengths[] = {1, 4095, kDirectAlign, 3 * kDirectAlign, 3 * kDirectAlign + 1000};
  for (bool direct : {true, false})
    for (std::size_t shift : {std::size_t{0}, std::size_t{1}})  // aligned and unaligned address
      for (std::uint64_t off : offsets)
        for (std::size_t n : lengths) {
          if (shift + n > b.bytes + 1) continue;
          SCOPED_TRACE("direct " + std::to_string(direct) + " shift " + std::to_string(shift) + " off " +
                       std::to_string(off) + " n " + std::to_string(n));
          write_and_check(dir + "/f", b.p + shift, n, off, direct);
        }
}

TEST(PosixIo, DirectBypassesThePageCacheWhereTheFileSystemAllows) {
  const std::string dir = scratch_dir(), path = dir + "/f";
  const int probe = ::open(path.c_str(), O_WRONLY | O_CREAT, 0644);
  ASSERT_GE(probe, 0);
  ::close(probe);
  const int dfd = open_direct(path);
  if (dfd < 0) GTEST_SKIP() << "the file system of " << dir << " refuses O_DIRECT (tmpfs?)";
  ::close(dfd);
  Buffer b(64 * kDirectAlign + 100);  // 64 whole pages and a tail of 100 bytes
  // The 64 pages went around the page cache: at most the tail page (written through it) should be
  // there; a few more are tolerated (the kernel may cache a page for its own reasons), not most.
  const std::size_t direct = write_synced(path, b.p, b.bytes, kDirectAlign, true);
  EXPECT_LE(direct, 8u) << "pages of " << path << " in the page cache after O_DIRECT writes of 64";
  check_file(path, b.p, b.bytes, kDirectAlign);
  // Through the page cache, which keeps (most of) the pages after the fdatasync: the residency
  // measurement sees them, so the small count above means something.
  const std::size_t cached = write_synced(path, b.p, b.bytes, kDirectAlign, false);
  EXPECT_GE(cached, 32u) << "pages of " << path << " in the page cache after buffered writes of 65";
  EXPECT_GT(cached, direct + 16);
  check_file(path, b.p, b.bytes, kDirectAlign);
}

TEST(PosixIo, OpenDirectRefusedOnTmpfs) {
  struct statfs fs {};
  if (::statfs("/dev/shm", &fs) != 0 || fs.f_type != 0x01021994 /* TMPFS_MAGIC */)
    GTEST_SKIP() << "/dev/shm is not a tmpfs here";
  const std::string path = "/dev/shm/ckpt-unit-posix-io." + std::to_string(::getpid());
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  ASSERT_GE(fd, 0);
  const int dfd = open_direct(path);
  Buffer b(2 * kDirectAlign);
  // Whether or not this kernel's tmpfs takes O_DIRECT (5.x refuses it), the bytes arrive.
  Status s = pwrite_direct(dfd, fd, b.p, b.bytes, 0, path);
  EXPECT_TRUE(s.ok()) << s.to_string();
  if (dfd >= 0) ::close(dfd);
  ::close(fd);
  const auto got = read_all(path);
  ::unlink(path.c_str());
  ASSERT_EQ(got.size(), b.bytes);
  for (std::size_t i = 0; i < b.bytes; ++i) ASSERT_EQ(got[i], b.p[i]);
}

namespace {
/// Whether every page of [p, p + n) is mapped: msync fails with ENOMEM on an unmapped page.
bool mapped(const void* p, std::size_t n) { return ::msync(const_cast<void*>(p), n, MS_ASYNC) == 0; }
}  // namespace

// The staging pool's memory: exactly the bytes asked for are mapped (no stray head or tail left of the
// over-sized mapping it trims), from 2 MiB on starting at a 2 MiB boundary, writable to the last byte,
// and an O_DIRECT write from it lands byte for byte.
TEST(PosixIo, MapDirectBufferIsExactlyTheBlockAskedFor) {
  const std::size_t huge = std::size_t{2} << 20, page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
  for (std::size_t n : {std::size_t{4096}, huge - 1, huge, 3 * huge + 12345, 8 * huge}) {
    SCOPED_TRACE(n);
    auto* p = static_cast<std::uint8_t*>(map_direct_buffer(n));
    ASSERT_NE(p, nullptr);
    const auto a = reinterpret_cast<std::uintptr_t>(p);
    if (n >= huge) EXPECT_EQ(a % huge, 0u) << "a block of 2 MiB or more starts at a 2 MiB boundary";
    EXPECT_EQ(a % page, 0u);
    const std::size_t len = (n + page - 1) / page * page;
    EXPECT_TRUE(mapped(p, len));
    if (n >= huge) {  // what the over-sized mapping had around the block is gone
      EXPECT_FALSE(mapped(p - page, page)) << "the page before the block is still mapped";
      EXPECT_FALSE(mapped(p + len, page)) << "the page after the block is still mapped";
    }
    for (std::size_t i = 0; i < n; i += 1024) p[i] = static_cast<std::uint8_t>(i >> 10);
    p[n - 1] = 0xA5;
    if (n == 3 * huge + 12345) {  // through O_DIRECT where the file system takes it, as the pool's chunks go
      const std::string path = scratch_dir() + "/map_direct_buffer.bin";
      const std::size_t whole = n / kDirectAlign * kDirectAlign;
      write_synced(path, p, whole, 0, true);
      check_file(path, p, whole, 0);
      ::unlink(path.c_str());
    }
    ASSERT_EQ(::munmap(p, n), 0);
    EXPECT_FALSE(mapped(p, page));
  }
}
