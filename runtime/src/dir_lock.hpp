// The advisory lock of a checkpoint directory: one job (one Runtime) per directory (internal).
#ifndef CKPT_RUNTIME_DIR_LOCK_HPP
#define CKPT_RUNTIME_DIR_LOCK_HPP

#include <string>

#include "ckpt/status.hpp"

namespace ckpt::detail {

/// An exclusive flock() on `<dir>/.lock`, held from acquire() to release() or destruction. The
/// kernel drops the lock when its holder dies, so the lock of a dead job is taken over at once; a
/// live holder (another job, or another Runtime of this process) makes acquire() fail with
/// failed_precondition naming the holder's pid and host. The file is never followed if it is a link.
class DirLock {
 public:
  DirLock() = default;
  ~DirLock() { release(); }
  DirLock(const DirLock&) = delete;
  DirLock& operator=(const DirLock&) = delete;

  Status acquire(const std::string& dir);
  void release();
  bool held() const { return m_fd >= 0; }

 private:
  int m_fd = -1;
};

}  // namespace ckpt::detail

#endif  // CKPT_RUNTIME_DIR_LOCK_HPP
