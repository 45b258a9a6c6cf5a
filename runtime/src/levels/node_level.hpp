// The node-local level as one module (internal; docs/design.md, "Levels"): with options.local_dir a
// checkpoint is committed into the node directories, protected by partner copies or XOR parity,
// spilled to `dir` when a node's disk is full, and drained to `dir` by a thread of its own.
#ifndef CKPT_RUNTIME_LEVELS_NODE_LEVEL_HPP
#define CKPT_RUNTIME_LEVELS_NODE_LEVEL_HPP

#include <mpi.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/store.hpp"
#include "runtime/src/commit.hpp"
#include "runtime/src/dir_lock.hpp"
#include "runtime/src/flush.hpp"
#include "runtime/src/levels/drain.hpp"
#include "runtime/src/levels/partner.hpp"
#include "runtime/src/resolve.hpp"
#include "transports/transport.hpp"

namespace ckpt::detail {

/// What of the rest of the Runtime the drain writes into: `dir`'s transports and store.
struct GlobalLevel {
  const std::vector<std::unique_ptr<Transport>>* transports = nullptr;  ///< [g] = transport group g
  Store* store = nullptr;
  bool persistent = false;  ///< some transport writes files
  bool sync_each = true;    ///< writers sync their files (not with durable_every_ms)
  std::uint64_t run_id = 0;
  Tracer* tracer = nullptr;
};

/// The node level of one Runtime. Made and opened at construction (collective), attached to the
/// pipeline's Committer, closed after it. Application thread only; the drain has its own thread.
class NodeLevel {
 public:
  /// Collective on `app`. This rank's node and node directory, and the node level's transports (posix,
  /// one per transport group, each spilling into `global`'s store when the node's disk is full);
  /// invalid_argument when the redundancy cannot work with the nodes found.
  static Result<std::unique_ptr<NodeLevel>> make(MPI_Comm app, const Resolved& cfg, std::size_t groups,
                                                 Store& global);
  ~NodeLevel() { close(); }
  NodeLevel(const NodeLevel&) = delete;
  NodeLevel& operator=(const NodeLevel&) = delete;

  /// Node leaders (local): the node directory made (never through a link planted at its name), bound
  /// to the root `root` (`root_created`: its `.root` was made by this run), locked, recovered, the
  /// steps that runs after its last use rolled back abandoned (the root's `timeline` record), and
  /// labelled with run `run`.
  Status open(std::uint64_t root, bool root_created, std::uint64_t run, const std::string& timeline);

  /// Collective on `app`. The drain into `global` (its thread, a Committer of its own on `dir`), and
  /// the pipeline's commit configuration for the node level made from `cfg`: the pipeline commits
  /// into the node directories and retains nothing (the drain thread retains them).
  CommitConfig attach(MPI_Comm app, const CommitConfig& cfg, const GlobalLevel& global);
  /// The pipeline's Committer hands committed checkpoints to the drain, and spilled ones to `global`
  /// (`dir`'s store).
  void connect(Committer& pipeline, const Store& global);

  bool leader() const { return m_layout.leader(); }
  const NodeLayout& layout() const { return m_layout; }
  Store& store() { return *m_store; }
  std::vector<std::unique_ptr<Transport>>& transports() { return m_transports; }

  /// Waits for the drains in flight; `fail_on_error`: as Drainer::wait_idle.
  Status wait_idle(bool fail_on_error) { return m_drainer ? m_drainer->wait_idle(fail_on_error) : Status::OK(); }
  /// After the pipeline's Committer closed (it feeds the drain): the drain, its Committer, the lock.
  /// Idempotent.
  void close();
  /// The node directory's lock, released early (a Runtime whose construction failed).
  void release_lock() { m_lock.release(); }

 private:
  explicit NodeLevel(const Resolved& cfg) : m_cfg(cfg) {}

  const Resolved m_cfg;  ///< the Runtime's settings
  NodeLayout m_layout;                                   ///< which ranks form which node
  std::string m_dir;                                     ///< <local_dir>/node<k> or local_dir
  std::unique_ptr<Store> m_store;                        ///< the node directory's store
  DirLock m_lock;                                        ///< node leaders: the node directory's lock
  std::vector<std::unique_ptr<Transport>> m_transports;  ///< posix, one per group
  std::unique_ptr<Committer> m_committer;                ///< commits drained checkpoints in `dir`
  std::unique_ptr<Drainer> m_drainer;
};

}  // namespace ckpt::detail

#endif  // CKPT_RUNTIME_LEVELS_NODE_LEVEL_HPP
