// The node-local level as one module (internal; docs/design.md, "Levels"): with options.local_dir a
// checkpoint is committed into the node directories, protected by partner copies or XOR parity,
// spilled to `dir` when a node's disk is full, and drained to `dir` by a thread of its own.
#ifndef CKPT_RUNTIME_LEVELS_NODE_LEVEL_HPP
#define CKPT_RUNTIME_LEVELS_NODE_LEVEL_HPP

#include <mpi.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/store.hpp"
#include "runtime/src/commit/commit.hpp"
#include "runtime/src/commit/dir_lock.hpp"
#include "runtime/src/pipeline/flush.hpp"
#include "runtime/src/levels/drain.hpp"
#include "runtime/src/levels/partner.hpp"
#include "runtime/src/levels/xor.hpp"
#include "runtime/src/api/resolve.hpp"
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
class NodeLevel final : public CommitLevel {
 public:
  /// Collective on `app`. This rank's node and node directory, and the node level's transports (posix,
  /// one per transport group, each spilling into `global`'s store when the node's disk is full);
  /// invalid_argument when the redundancy cannot work with the nodes found.
  static Result<std::unique_ptr<NodeLevel>> make(MPI_Comm app, const Resolved& cfg, std::size_t groups,
                                                 Store& global);
  ~NodeLevel() override { close(); }
  NodeLevel(const NodeLevel&) = delete;
  NodeLevel& operator=(const NodeLevel&) = delete;

  /// Node leaders (local): the node directory made (never through a link planted at its name), bound
  /// to the root `root` (`root_created`: its `.root` was made by this run), locked, recovered, the
  /// steps that runs after its last use rolled back abandoned (the root's `timeline` record), and
  /// labelled with run `run`.
  Status open(std::uint64_t root, bool root_created, std::uint64_t run, const std::string& timeline);

  /// Collective on `app`. The drain into `global` (its thread, a Committer of its own on `dir`), and
  /// the pipeline's commit configuration made from `cfg`: the pipeline's Committer calls this level's
  /// hooks, commits into the node directories and retains nothing (the drain thread retains them).
  CommitConfig attach(MPI_Comm app, const CommitConfig& cfg, const GlobalLevel& global);

  // The pipeline Committer's hooks (CommitLevel):
  /// Some rank's node disk was full (its file went to `dir`, spill.hpp): every rank's files copied to
  /// `dir`'s staging directory, the node's staging directory removed, the checkpoint committed in `dir`.
  std::optional<Status> divert(const std::shared_ptr<Job>& job, MPI_Comm comm) override;
  /// partner (this rank's files to the same position on the next node, its predecessor's into
  /// partner/) or xor (the group's parity into the staging directory).
  void protect(Job& job, MPI_Comm comm) override;
  /// Rank 0's index to every rank, each node leader's commit into its node directory, the agreement;
  /// the drained level's steps at or after this one abandoned first (a roll-back).
  Status commit(const Job& job, const Result<Index>& idx, const Status& ready, MPI_Comm comm) override;
  /// To the drain.
  void committed(std::shared_ptr<Job> job) override { m_drainer->submit(std::move(job)); }

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
  // Set by attach():
  Store* m_global = nullptr;   ///< `dir`'s store (spilled checkpoints)
  Store* m_drained = nullptr;  ///< `dir`'s store when some transport writes files
  bool m_sync = true;                ///< commits sync (fsync without durable_every_ms)
  int m_partner_to = MPI_PROC_NULL;  ///< redundancy partner: this rank's files go there
  int m_partner_from = MPI_PROC_NULL;
  std::optional<XorGroup> m_xor;  ///< redundancy xor: this rank's parity group
};

}  // namespace ckpt::detail

#endif  // CKPT_RUNTIME_LEVELS_NODE_LEVEL_HPP
