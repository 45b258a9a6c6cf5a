// DirLock: flock() on <dir>/.lock; the holder's pid and host are written into the file for the message.
#include "runtime/src/dir_lock.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "base/store.hpp"

namespace ckpt::detail {

Status DirLock::acquire(const std::string& dir, std::uint64_t token) {
  release();
  const std::string path = dir + "/" + kLockName;
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0644);
  if (fd < 0) {
    const int e = errno;
    return Status(Code::io_error, "cannot open the directory lock " + path + ": " + std::strerror(e) +
                                      (e == ELOOP ? " (it is a symbolic link)" : ""));
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return Status(Code::io_error, "the directory lock " + path + " is not a regular file");
  }
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    const int e = errno;
    char holder[256] = {};
    const ssize_t n = ::pread(fd, holder, sizeof holder - 1, 0);
    ::close(fd);
    if (e != EWOULDBLOCK) return Status(Code::io_error, "cannot lock " + path + ": " + std::strerror(e));
    std::string who = n > 0 ? std::string(holder, static_cast<std::size_t>(n)) : std::string("unknown");
    while (!who.empty() && (who.back() == '\n' || who.back() == '\0')) who.pop_back();
    return Status(Code::failed_precondition, "checkpoint directory " + dir +
                                                 " is in use by another live job or Runtime (" + who + "; lock file " +
                                                 path + "): give each job a directory of its own");
  }
  char host[128] = {};
  ::gethostname(host, sizeof host - 1);
  const std::string me =
      "pid " + std::to_string(::getpid()) + " on host " + host + " run " + std::to_string(token) + "\n";
  // The text names the holder for a job that finds the lock held, and proves to the other ranks that
  // they see this very directory: synced, so that another node's client reads it (NFS: close-to-open).
  const bool written = ::ftruncate(fd, 0) == 0 && ::pwrite(fd, me.data(), me.size(), 0) == static_cast<ssize_t>(me.size()) &&
                       ::fsync(fd) == 0;
  if (!written) {
    const int e = errno;
    ::close(fd);
    return Status(Code::io_error, "cannot write the directory lock " + path + ": " + std::strerror(e));
  }
  m_fd = fd;
  m_text = me;
  return Status::OK();
}

Status same_directory(const std::string& dir, const std::string& text) {
  const std::string path = dir + "/.lock";
  const std::string advice =
      ": option 'dir' must name one directory on a file system every rank shares (for storage on each node, "
      "use local_dir)";
  const int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0)
    return Status(Code::failed_precondition, "the checkpoint directory " + dir +
                                                 " that rank 0 created is not visible here (" + path + ": " +
                                                 std::strerror(errno) + ")" + advice);
  char buf[512] = {};
  const ssize_t n = ::pread(fd, buf, sizeof buf - 1, 0);
  ::close(fd);
  if (n < 0 || std::string(buf, static_cast<std::size_t>(n)) != text)
    return Status(Code::failed_precondition,
                  "the checkpoint directory " + dir + " is not the one rank 0 created: " + path + " holds another job's lock" +
                      advice);
  return Status::OK();
}

void DirLock::release() {
  if (m_fd < 0) return;
  ::flock(m_fd, LOCK_UN);
  ::close(m_fd);
  m_fd = -1;
  m_text.clear();
}

}  // namespace ckpt::detail
