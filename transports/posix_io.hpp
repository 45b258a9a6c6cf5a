// Small POSIX helpers shared by transports, the runtime and tools (internal).
#ifndef CKPT_TRANSPORTS_POSIX_IO_HPP
#define CKPT_TRANSPORTS_POSIX_IO_HPP

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "ckpt/status.hpp"

namespace ckpt::detail {

/// Status for the current errno: "<what>: <strerror>" (io_error; not_found for ENOENT).
Status errno_status(const std::string& what);
/// pwrite until done; EINTR retried; short writes continued.
Status pwrite_all(int fd, const void* p, std::size_t n, std::uint64_t off, const std::string& path);
/// pread exactly n bytes; a short file is `corrupt` ("truncated").
Status pread_all(int fd, void* p, std::size_t n, std::uint64_t off, const std::string& path);
/// Reads a whole small file (index, config), refusing more than `max_bytes`.
Result<std::vector<std::uint8_t>> read_file(const std::string& path, std::uint64_t max_bytes);
/// Writes a whole file (O_NOFOLLOW, truncating), fsyncs it when `sync`.
Status write_file(const std::string& path, const void* p, std::size_t n, bool sync);
/// fsync of a directory.
Status fsync_dir(const std::string& dir, bool sync);
/// mkdir -p.
Status make_dirs(const std::string& dir);
/// make_dirs(), and the last component must be a real directory, not a symlink (a checkpoint's
/// temporary directory: a planted link would send the data elsewhere).
Status make_dirs_nofollow(const std::string& dir);
/// rm -rf of a path (does not follow symbolic links).
Status remove_tree(const std::string& path);

}  // namespace ckpt::detail

#endif  // CKPT_TRANSPORTS_POSIX_IO_HPP
