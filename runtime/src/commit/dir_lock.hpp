// The advisory lock of a checkpoint directory (one job, one Runtime, per directory) and the root's
// other markers: its identity, the node directories' binding and the timeline record (internal).
#ifndef CKPT_RUNTIME_DIR_LOCK_HPP
#define CKPT_RUNTIME_DIR_LOCK_HPP

#include <cstdint>
#include <mutex>
#include <optional>
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

/// The root's timeline record, `<dir>/.timeline` (docs/format.md, "Node-local level"): which run
/// began a timeline at which step, so that a node directory last written by an earlier run never
/// gives a step that a later run - with or without local_dir - rolled back. Rank 0 only, with the lock
/// held; before_commit() is called by both commit threads of a run with levels.
class Timeline {
 public:
  Timeline(std::string dir, std::uint64_t run, bool sync);
  /// With local_dir, at construction: appends "run <id> bound" (before any node directory is labelled
  /// with this run) and returns the whole record, for abandoned_from() on the node leaders.
  Result<std::string> bind();
  /// Before `step` is published at any level: appends "run <id> from <step>" when this run has begun
  /// no timeline at or below `step` yet (its first commit, or a roll-back below its first).
  Status before_commit(std::int64_t step);

 private:
  Status append(const std::string& line);
  std::string m_path;
  std::uint64_t m_run;
  bool m_sync;
  std::mutex m_mu;
  std::optional<std::int64_t> m_lowest;  ///< the lowest step this run began a timeline at
};

/// The step from which the steps of a node directory last labelled by run `label` (nothing: no
/// label, as an earlier build left it, or a damaged one) belong to timelines that later runs began,
/// or nothing: the lowest step of the `from` lines of other runs after `label`'s `bound` line (all
/// lines when it has none there). A damaged line there counts as a timeline begun at step 0.
std::optional<std::int64_t> abandoned_from(const std::string& timeline, std::optional<std::uint64_t> label);

/// `<node dir>/.run` ("ckpt run <16 hex digits>\n"): the run that last labelled the node directory;
/// nothing when absent or damaged (then abandoned_from() takes it for older than every line).
Result<std::optional<std::uint64_t>> node_label(const std::string& node_dir);
/// Labels the node directory with `run` (`.run.tmp`, renamed over `.run`, the directory fsynced).
Status label_node_dir(const std::string& node_dir, std::uint64_t run, bool sync);

}  // namespace ckpt::detail

#endif  // CKPT_RUNTIME_DIR_LOCK_HPP
