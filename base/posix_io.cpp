// Small POSIX helpers shared by every layer (internal).
#include "base/posix_io.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace ckpt::detail {

Status errno_status(const std::string& what) {
  const int e = errno;
  return Status(e == ENOENT ? Code::not_found : Code::io_error, what + ": " + std::strerror(e));
}

Status pwrite_all(int fd, const void* p, std::size_t n, std::uint64_t off, const std::string& path) {
  auto* b = static_cast<const char*>(p);
  while (n > 0) {
    ssize_t w = ::pwrite(fd, b, n, static_cast<off_t>(off));
    if (w < 0) {
      if (errno == EINTR) continue;
      return errno_status("write " + path + " at offset " + std::to_string(off));
    }
    b += w;
    n -= static_cast<std::size_t>(w);
    off += static_cast<std::uint64_t>(w);
  }
  return Status::OK();
}

void start_writeback(int fd, std::uint64_t off, std::uint64_t n) {
#ifdef __linux__
  (void)::sync_file_range(fd, static_cast<off64_t>(off), static_cast<off64_t>(n), SYNC_FILE_RANGE_WRITE);
#else
  (void)fd;
  (void)off;
  (void)n;
#endif
}

int open_direct(const std::string& path) {
#ifdef O_DIRECT
  return ::open(path.c_str(), O_WRONLY | O_DIRECT | O_CLOEXEC | O_NOFOLLOW);
#else
  (void)path;
  return -1;
#endif
}

void* map_direct_buffer(std::size_t n) {
  constexpr std::size_t kHuge = std::size_t{2} << 20;
  if (n < kHuge) {
    void* p = ::mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    return p == MAP_FAILED ? nullptr : p;
  }
  // Map 2 MiB more than asked, keep the part from the first 2 MiB boundary, unmap the rest.
  void* raw = ::mmap(nullptr, n + kHuge, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED) return nullptr;
  const auto a = reinterpret_cast<std::uintptr_t>(raw);
  const std::uintptr_t start = (a + kHuge - 1) & ~std::uintptr_t{kHuge - 1};
  const auto page = static_cast<std::uintptr_t>(::sysconf(_SC_PAGESIZE));
  const std::uintptr_t end = start + (n + page - 1) / page * page, raw_end = a + n + kHuge;
  if (start > a) ::munmap(raw, start - a);
  if (raw_end > end) ::munmap(reinterpret_cast<void*>(end), raw_end - end);
  void* p = reinterpret_cast<void*>(start);
#ifdef MADV_HUGEPAGE
  (void)::madvise(p, n, MADV_HUGEPAGE);  // advice: where it is refused (no THP), small pages as before
#endif
  return p;
}

Status pwrite_direct(int direct_fd, int fd, const void* p, std::size_t n, std::uint64_t off, const std::string& path,
                     bool writeback) {
  auto* b = static_cast<const char*>(p);
  const auto addr = reinterpret_cast<std::uintptr_t>(p);
  const std::size_t whole = n / kDirectAlign * kDirectAlign;
  std::size_t done = 0;  // bytes written through direct_fd
  if (direct_fd >= 0 && addr % kDirectAlign == 0 && off % kDirectAlign == 0) {
    while (done < whole) {
      ssize_t w = ::pwrite(direct_fd, b + done, whole - done, static_cast<off_t>(off + done));
      if (w < 0) {
        if (errno == EINTR) continue;
        if (errno == EINVAL && done == 0) break;  // refused after all: all of it through fd
        return errno_status("write " + path + " at offset " + std::to_string(off + done));
      }
      done += static_cast<std::size_t>(w);
      if (done % kDirectAlign != 0) break;  // a short write off the alignment: the rest goes through fd
    }
  }
  if (done == n) return Status::OK();
  CKPT_RETURN_IF_ERROR(pwrite_all(fd, b + done, n - done, off + done, path));
  if (writeback) start_writeback(fd, off + done, n - done);
  return Status::OK();
}

Status pread_all(int fd, void* p, std::size_t n, std::uint64_t off, const std::string& path) {
  auto* b = static_cast<char*>(p);
  while (n > 0) {
    ssize_t r = ::pread(fd, b, n, static_cast<off_t>(off));
    if (r < 0) {
      if (errno == EINTR) continue;
      return errno_status("read " + path + " at offset " + std::to_string(off));
    }
    if (r == 0)
      return Status(Code::corrupt, path + " is truncated (wanted bytes at offset " + std::to_string(off) + ")");
    b += r;
    n -= static_cast<std::size_t>(r);
    off += static_cast<std::uint64_t>(r);
  }
  return Status::OK();
}

Result<int> open_regular(const std::string& path, std::uint64_t* size) {
  // O_NONBLOCK: opening a FIFO planted under a checkpoint's file name must not wait for a writer;
  // O_NOFOLLOW: a planted link must not send the read elsewhere. The fstat then refuses both.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  if (fd < 0) {
    if (errno == ELOOP) return Status(Code::corrupt, path + " is a symbolic link; not followed");
    return errno_status("open " + path);
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    Status s = errno_status("stat " + path);
    ::close(fd);
    return s;
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return Status(Code::corrupt, path + " is not a regular file");
  }
  if (size != nullptr) *size = static_cast<std::uint64_t>(st.st_size);
  return fd;
}

Result<std::vector<std::uint8_t>> read_file(const std::string& path, std::uint64_t max_bytes) {
  std::uint64_t size = 0;
  auto opened = open_regular(path, &size);
  if (!opened.ok()) return opened.status();
  const int fd = opened.value();
  if (size > max_bytes) {
    ::close(fd);
    return Status(Code::corrupt, path + " is larger than " + std::to_string(max_bytes) + " bytes");
  }
  std::vector<std::uint8_t> buf(static_cast<std::size_t>(size));
  Status s = pread_all(fd, buf.data(), buf.size(), 0, path);
  ::close(fd);
  if (!s.ok()) return s;
  return buf;
}

Status write_file(const std::string& path, const void* p, std::size_t n, bool sync) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0666);
  if (fd < 0) return errno_status("create " + path);
  Status s = pwrite_all(fd, p, n, 0, path);
  if (s.ok() && sync && ::fsync(fd) != 0) s = errno_status("fsync " + path);
  if (::close(fd) != 0 && s.ok()) s = errno_status("close " + path);
  return s;
}

Status copy_file(const std::string& from, const std::string& to, bool create, bool sync) {
  std::uint64_t size = 0;
  auto in = open_regular(from, &size);
  if (!in.ok()) return in.status();
  const int out = ::open(to.c_str(), O_WRONLY | O_CLOEXEC | O_NOFOLLOW | (create ? O_CREAT | O_TRUNC : 0), 0666);
  Status s = out < 0 ? errno_status((create ? "create " : "open ") + to) : Status::OK();
  std::vector<std::uint8_t> buf(static_cast<std::size_t>(std::min<std::uint64_t>(size, 8ull << 20)));
  for (std::uint64_t off = 0; off < size && s.ok(); off += buf.size()) {
    const std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(buf.size(), size - off));
    s = pread_all(in.value(), buf.data(), n, off, from);
    if (s.ok()) s = pwrite_all(out, buf.data(), n, off, to);
  }
  if (out >= 0) {
    if (s.ok() && sync && ::fdatasync(out) != 0) s = errno_status("fdatasync " + to);
    if (::close(out) != 0 && s.ok()) s = errno_status("close " + to);
  }
  ::close(in.value());
  return s;
}

Status fsync_dir(const std::string& dir, bool sync) {
  if (!sync) return Status::OK();
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return errno_status("open directory " + dir);
  Status s;
  if (::fsync(fd) != 0) s = errno_status("fsync directory " + dir);
  ::close(fd);
  return s;
}

Status make_dirs(const std::string& dir) {
  if (dir.empty()) return Status(Code::invalid_argument, "empty directory name");
  std::string cur;
  std::size_t pos = 0;
  while (pos != std::string::npos) {
    std::size_t next = dir.find('/', pos + 1);
    cur = dir.substr(0, next);
    pos = next;
    if (cur.empty() || cur == "/") continue;
    if (::mkdir(cur.c_str(), 0777) != 0 && errno != EEXIST) return errno_status("create directory " + cur);
  }
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0) return errno_status("stat " + dir);
  if (!S_ISDIR(st.st_mode)) return Status(Code::invalid_argument, dir + " exists and is not a directory");
  return Status::OK();
}

Status make_dirs_nofollow(const std::string& dir) {
  CKPT_RETURN_IF_ERROR(make_dirs(dir));
  struct stat st {};
  if (::lstat(dir.c_str(), &st) != 0) return errno_status("stat " + dir);
  if (S_ISLNK(st.st_mode)) return Status(Code::invalid_argument, dir + " is a symbolic link; not followed");
  return Status::OK();
}

Status remove_tree(const std::string& path) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) return errno == ENOENT ? Status::OK() : errno_status("stat " + path);
  if (S_ISDIR(st.st_mode)) {
    DIR* d = ::opendir(path.c_str());
    if (d == nullptr) return errno_status("open directory " + path);
    Status first;
    while (dirent* e = ::readdir(d)) {
      std::string n = e->d_name;
      if (n == "." || n == "..") continue;
      Status s = remove_tree(path + "/" + n);
      if (!s.ok() && first.ok()) first = s;
    }
    ::closedir(d);
    if (::rmdir(path.c_str()) != 0 && first.ok()) first = errno_status("remove " + path);
    return first;
  }
  if (::unlink(path.c_str()) != 0 && errno != ENOENT) return errno_status("remove " + path);
  return Status::OK();
}

FileReader::~FileReader() {
  if (m_fd >= 0) ::close(m_fd);
}

Status FileReader::open(const std::string& file) {
  if (file == m_file) return Status::OK();
  if (m_fd >= 0) ::close(m_fd);
  m_fd = -1;
  m_file.clear();
  auto fd = open_regular(m_dir + "/" + file, &m_size);
  if (!fd.ok()) return fd.status();
  m_fd = fd.value();
  m_file = file;
  return Status::OK();
}

Status FileReader::read(const std::string& file, std::uint64_t offset, void* dst, std::size_t n) {
  CKPT_RETURN_IF_ERROR(open(file));
  return pread_all(m_fd, dst, n, offset, m_dir + "/" + file);
}

void FileReader::prefetch(const std::string& file, std::uint64_t offset, std::uint64_t n) {
  if (open(file).ok())
    (void)::posix_fadvise(m_fd, static_cast<off_t>(offset), static_cast<off_t>(n), POSIX_FADV_WILLNEED);
}

Result<std::uint64_t> FileReader::size(const std::string& file) {
  CKPT_RETURN_IF_ERROR(open(file));
  return m_size;
}

std::pair<std::string, std::string> split_last(std::string path) {
  while (path.size() > 1 && path.back() == '/') path.pop_back();
  const auto slash = path.rfind('/');
  if (slash == std::string::npos) return {".", path};
  return {slash == 0 ? "/" : path.substr(0, slash), path.substr(slash + 1)};
}

}  // namespace ckpt::detail
