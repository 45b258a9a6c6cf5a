// The advisory lock of a checkpoint directory: one job (one Runtime) per directory (internal).
#ifndef CKPT_RUNTIME_DIR_LOCK_HPP
#define CKPT_RUNTIME_DIR_LOCK_HPP

#include <cstdint>
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

  /// Takes the lock and writes "pid <p> on host <h> run <token>" into the file, synced: the ranks of
  /// the job read it back to prove that they see the same directory (same_directory()).
  Status acquire(const std::string& dir, std::uint64_t token = 0);
  void release();
  bool held() const { return m_fd >= 0; }
  /// What acquire() wrote (empty before).
  const std::string& text() const { return m_text; }

 private:
  int m_fd = -1;
  std::string m_text;
};

/// Whether `<dir>/.lock` holds `text` (what the lock holder, another rank, wrote): ok, or
/// failed_precondition saying that this rank sees another directory (or none) under that path.
Status same_directory(const std::string& dir, const std::string& text);

}  // namespace ckpt::detail

#endif  // CKPT_RUNTIME_DIR_LOCK_HPP
