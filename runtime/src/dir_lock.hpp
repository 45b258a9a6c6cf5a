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

/// The identity of the root `dir`: the id in `<dir>/.root`, which is created (a random non-zero id,
/// O_EXCL, fsynced with `dir`) when missing. A `.root` that is a link, not a regular file or not of
/// the form of docs/format.md is failed_precondition naming it. `*created` says whether this call made
/// it (a new root, or one whose `.root` was lost). Rank 0 only, with the lock held.
Result<std::uint64_t> root_id(const std::string& dir, bool* created);

/// Binds the node directory `node_dir` to the root `id` (at `root`, for messages), or refuses it, as
/// docs/design.md "Levels" says: a symbolic link, an `.owner` naming another root or damaged, or
/// `ckpt.*` entries without `.owner` are failed_precondition and nothing is written; a directory
/// without either gets its `.owner` (fsynced). When the root's `.root` was `created` by this run, an
/// `.owner` naming another id but the same path `root` is taken over (the root lost its identity file,
/// as when `dir` is lost and the node level survives): rewritten with `id`. `node_dir` exists; called
/// before the node's lock is taken, so that a refused directory is not touched at all.
Status bind_node_dir(const std::string& node_dir, std::uint64_t id, const std::string& root, bool created);

}  // namespace ckpt::detail

#endif  // CKPT_RUNTIME_DIR_LOCK_HPP
