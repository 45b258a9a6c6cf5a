// Small POSIX helpers shared by every layer (internal).
#ifndef CKPT_BASE_POSIX_IO_HPP
#define CKPT_BASE_POSIX_IO_HPP

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "ckpt/status.hpp"

namespace ckpt::detail {

/// Status for the current errno: "<what>: <strerror>" (io_error; not_found for ENOENT).
Status errno_status(const std::string& what);
/// pwrite until done; EINTR retried; short writes continued.
Status pwrite_all(int fd, const void* p, std::size_t n, std::uint64_t off, const std::string& path);
/// Starts the write-back of [off, off + n) of `fd` to the device without waiting for it (Linux:
/// sync_file_range(SYNC_FILE_RANGE_WRITE); elsewhere nothing). A later fdatasync then waits only for
/// what is still in flight: the disk works while the rest is written. Errors are the fdatasync's.
void start_writeback(int fd, std::uint64_t off, std::uint64_t n);
/// A second descriptor of `path` opened with O_DIRECT for writing (the page cache bypassed), or -1
/// where the file system refuses O_DIRECT (tmpfs) or the platform has none.
int open_direct(const std::string& path);
/// `n` bytes of anonymous memory for buffers that O_DIRECT writes read (the staging pool), not yet
/// touched; nullptr (errno set) when the mapping fails. Free with munmap(p, n). From 2 MiB on the block
/// starts at a 2 MiB boundary and is advised as transparent huge pages (MADV_HUGEPAGE; where the kernel
/// runs THP in `madvise` or `always` mode): an O_DIRECT write then pins one page per 2 MiB instead of
/// 512, which cut the CPU time of a 16-64 MiB write + fdatasync 3.6-14x here (perf/micro BM_DirectWrite), and
/// copies into the block miss the TLB less. The tail past the last 2 MiB boundary keeps small pages.
void* map_direct_buffer(std::size_t n);
/// Writes like pwrite_all() on `fd`, but the part of [p, p + n) that O_DIRECT can take - from `p` and
/// `off` both multiples of kDirectAlign, whole multiples of it - goes through `direct_fd` (when >= 0),
/// straight from `p` to the device without a copy into the page cache; the rest through `fd`, whose
/// write-back starts at once when `writeback` (start_writeback()).
Status pwrite_direct(int direct_fd, int fd, const void* p, std::size_t n, std::uint64_t off, const std::string& path,
                     bool writeback = false);
/// Alignment O_DIRECT needs here (address, offset and length): the largest logical block size in use.
constexpr std::uint64_t kDirectAlign = 4096;
/// pread exactly n bytes; a short file is `corrupt` ("truncated").
Status pread_all(int fd, void* p, std::size_t n, std::uint64_t off, const std::string& path);
/// Opens `path` for reading, refusing anything but a regular file (no symbolic link as the last
/// component, no FIFO, device or directory; the open never blocks). Returns the descriptor (the caller
/// closes it) and, when `size` is given, the file's size.
Result<int> open_regular(const std::string& path, std::uint64_t* size);
/// Reads a whole small file (an index) with open_regular(), refusing more than `max_bytes`.
Result<std::vector<std::uint8_t>> read_file(const std::string& path, std::uint64_t max_bytes);
/// Writes a whole file (O_NOFOLLOW, truncating), fsyncs it when `sync`.
Status write_file(const std::string& path, const void* p, std::size_t n, bool sync);
/// Copies the regular file `from` (open_regular()) to `to` in 8 MiB pieces: `to` is created and
/// truncated when `create`, else it must exist and is overwritten from its start (longer stays longer).
/// fdatasync of `to` when `sync`.
Status copy_file(const std::string& from, const std::string& to, bool create, bool sync);
/// fsync of a directory.
Status fsync_dir(const std::string& dir, bool sync);
/// mkdir -p.
Status make_dirs(const std::string& dir);
/// make_dirs(), and the last component must be a real directory, not a symlink (a checkpoint's
/// temporary directory: a planted link would send the data elsewhere).
Status make_dirs_nofollow(const std::string& dir);
/// rm -rf of a path (does not follow symbolic links).
Status remove_tree(const std::string& path);
/// The last component of `path` and what comes before it, trailing slashes ignored: "a/b/" -> {"a",
/// "b"}, "b" -> {".", "b"}, "/b" -> {"/", "b"}. Text only (nothing is looked up).
std::pair<std::string, std::string> split_last(std::string path);

/// Reads byte ranges of the files of one checkpoint directory (every persistent transport writes
/// byte files named in the index, so one reader serves them all). Keeps the last file open. Files
/// are opened with O_NOFOLLOW | O_NONBLOCK and must be regular files. Not thread-safe.
class FileReader {
 public:
  explicit FileReader(std::string dir) : m_dir(std::move(dir)) {}
  ~FileReader();
  FileReader(const FileReader&) = delete;
  FileReader& operator=(const FileReader&) = delete;
  /// Reads exactly `n` bytes at `offset` of `file` (a name from the index); short files are `corrupt`.
  Status read(const std::string& file, std::uint64_t offset, void* dst, std::size_t n);
  /// Tells the kernel that `n` bytes at `offset` of `file` will be read soon (posix_fadvise WILLNEED: it
  /// starts reading them in the background). A hint: errors are ignored.
  void prefetch(const std::string& file, std::uint64_t offset, std::uint64_t n);
  /// The size of `file` when it was opened (opens it as read() does, and keeps it open).
  Result<std::uint64_t> size(const std::string& file);

 private:
  Status open(const std::string& file);
  std::string m_dir, m_file;
  int m_fd = -1;
  std::uint64_t m_size = 0;
};

}  // namespace ckpt::detail

#endif  // CKPT_BASE_POSIX_IO_HPP
