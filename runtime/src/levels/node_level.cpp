#include "runtime/src/levels/node_level.hpp"

#include <sys/stat.h>

#include "base/posix_io.hpp"
#include "runtime/src/levels/spill.hpp"
#include "runtime/src/levels/xor.hpp"

namespace ckpt::detail {

Result<std::unique_ptr<NodeLevel>> NodeLevel::make(MPI_Comm app, const Resolved& cfg, std::size_t groups,
                                                   Store& global) {
  const Options& o = cfg.options;
  std::unique_ptr<NodeLevel> n(new NodeLevel(cfg));
  n->m_layout = make_node_layout(app, o.ranks_per_node.value_or(0));
  n->m_dir = o.ranks_per_node ? o.local_dir + "/node" + std::to_string(n->m_layout.node) : o.local_dir;
  if (o.redundancy != Redundancy::none && (n->m_layout.nodes() < 2 || !n->m_layout.uniform()))
    return Status(Code::invalid_argument, std::string("option 'redundancy': ") +
                                              (o.redundancy == Redundancy::partner ? "partner" : "xor") +
                                              " needs at least two nodes with the same number of ranks (found " +
                                              std::to_string(n->m_layout.nodes()) + " nodes)");
  n->m_store = make_directory_store(n->m_dir);
  // One posix file per rank and group (node-local disks hold no shared files); a full node disk sends
  // that rank's file to `dir` instead (spill.hpp), through a posix transport of its own.
  int rank = 0, size = 1;
  MPI_Comm_rank(app, &rank);
  MPI_Comm_size(app, &size);
  const TransportEnv env{app, rank, size};
  for (std::size_t i = 0; i < groups; ++i) {
    auto t = make_transport("posix", cfg.transport, env);
    if (!t.ok()) return t.status();
    auto spill = make_transport("posix", cfg.transport, env);
    if (!spill.ok()) return spill.status();
    n->m_transports.push_back(make_spill_transport(std::move(t).value(), std::move(spill).value(), global));
  }
  return n;
}

Status NodeLevel::open(std::uint64_t root, bool root_created, std::uint64_t run, const std::string& timeline) {
  const Options& o = m_cfg.options;
  // The node directory is not followed through a link planted at its name: checked before anything is
  // created in it, and again by bind_node_dir() with the lock held.
  struct stat st {};
  if (::lstat(m_dir.c_str(), &st) == 0 && S_ISLNK(st.st_mode))
    return bind_node_dir(m_dir, root, o.dir, root_created);  // says so
  Status s = make_dirs(m_dir).with_context("node-local checkpoint directory");
  // Before the lock and recovery touch anything: another root's directory is left exactly as it is.
  // (The binding needs no lock: `.owner` is created O_EXCL, and a live job of this root holds `dir`'s.)
  if (s.ok()) s = bind_node_dir(m_dir, root, o.dir, root_created);
  if (s.ok()) s = m_lock.acquire(m_dir);
  if (s.ok()) s = m_store->recover().with_context("recovering node-local directory " + m_dir);
  // Steps that later runs rolled back while this directory was not used (a run without local_dir, or
  // one that lacked this node) are abandoned before anything reads them; then it is this run's.
  auto label = s.ok() ? node_label(m_dir) : Result<std::optional<std::uint64_t>>(s);
  if (!label.ok()) return label.status();
  if (auto from = abandoned_from(timeline, label.value())) s = m_store->abandon_newer_than(*from - 1, o.fsync);
  if (s.ok()) s = label_node_dir(m_dir, run, o.fsync);
  return s;
}

CommitConfig NodeLevel::attach(MPI_Comm app, const CommitConfig& cfg, const GlobalLevel& global) {
  const Options& o = m_cfg.options;
  int rank = 0, size = 1;
  MPI_Comm_rank(app, &rank);
  MPI_Comm_size(app, &size);
  MPI_Comm drain_comm = MPI_COMM_NULL, commit_comm = MPI_COMM_NULL;
  MPI_Comm_dup(app, &commit_comm);
  MPI_Comm_dup(app, &drain_comm);
  // `dir` is the drained level: a second Committer, fed by the drain thread.
  CommitConfig global_cfg = cfg;
  global_cfg.level = " (drained)";
  global_cfg.keep = o.keep_global.value_or(o.keep);  // retention in `dir`
  m_committer = std::make_unique<Committer>(commit_comm, global_cfg, *global.transports, *global.store,
                                            global.run_id, global.tracer);
  const OpenEnv open{drain_comm,     rank,           size,    global.transports, global.persistent,
                     global.run_id, global.sync_each, o.fsync};
  m_drainer = std::make_unique<Drainer>(
      DrainConfig{o.drain_every, o.keep, leader(), io_piece_bytes(o), cfg.threads}, open, *m_store, *global.store,
      *m_committer);
  // The pipeline commits into the node directories; the drain thread retains them.
  CommitConfig node = cfg;
  node.keep = 0;
  node.node_level = true;
  node.node_leader = leader();
  node.level = " locally";
  if (global.persistent) node.drained = global.store;
  if (o.redundancy == Redundancy::partner) {
    const int n = m_layout.nodes();
    node.partner = true;
    node.partner_to = m_layout.peer((m_layout.node + 1) % n);
    node.partner_from = m_layout.peer((m_layout.node + n - 1) % n);
  } else if (o.redundancy == Redundancy::xor_parity) {
    node.xor_parity = true;
    node.xor_group = make_xor_group(m_layout, o.xor_group);
  }
  return node;
}

void NodeLevel::connect(Committer& pipeline, const Store& global) {
  pipeline.on_committed([d = m_drainer.get()](std::shared_ptr<Job> j) { d->submit(std::move(j)); });
  pipeline.on_spilled(global,
                      [d = m_drainer.get()](std::shared_ptr<Job> j) { return d->commit_spilled(std::move(j)); });
}

void NodeLevel::close() {
  if (m_drainer) m_drainer->close();  // the pipeline's Committer, which feeds it, closed before
  if (m_committer) m_committer->close();
  m_lock.release();
}

}  // namespace ckpt::detail
