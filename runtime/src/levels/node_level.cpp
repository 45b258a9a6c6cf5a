#include "runtime/src/levels/node_level.hpp"

#include <sys/stat.h>

#include "base/format.hpp"
#include "base/mpi.hpp"
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
  m_global = global.store;
  m_drained = global.persistent ? global.store : nullptr;
  m_sync = cfg.fsync && cfg.durable_every_ms == 0;
  const int n = m_layout.nodes();
  if (o.redundancy == Redundancy::partner) {
    m_partner_to = m_layout.peer((m_layout.node + 1) % n);
    m_partner_from = m_layout.peer((m_layout.node + n - 1) % n);
  } else if (o.redundancy == Redundancy::xor_parity) {
    m_xor = make_xor_group(m_layout, o.xor_group);
  }
  // The pipeline commits into the node directories; the drain thread retains them.
  CommitConfig node = cfg;
  node.keep = 0;
  node.node = this;
  node.level = " locally";
  return node;
}

std::optional<Status> NodeLevel::divert(const std::shared_ptr<Job>& jp, MPI_Comm comm) {
  int spilled = 0;
  for (auto& p : jp->write.placements) spilled |= p.spilled ? 1 : 0;
  allreduce(MPI_IN_PLACE, &spilled, 1, MPI_INT, MPI_MAX, comm);
  if (!spilled) return std::nullopt;
  Job& job = *jp;
  job.spilled = true;
  const std::string global = m_global->staging_dir(job.step);
  Status mine = job.write.error;
  if (mine.ok()) mine = make_dirs_nofollow(global);
  for (auto& p : job.write.placements)
    if (mine.ok() && !p.spilled && !p.file.empty() && p.file != "none")
      mine = copy_file(job.tmp_dir + "/" + p.file, global + "/" + p.file, true, m_cfg.options.fsync);
  // The checkpoint lives in `dir` only, and restart reads the node level first: the node's steps at or
  // after this one are the old timeline's (a roll-back that spilled). A no-op along one timeline.
  if (mine.ok() && leader()) mine = m_store->abandon_newer_than(job.step - 1, m_sync);
  // Every rank's copy is done before the node's staging directory goes (the commit in `dir` agrees
  // again, and fails on every rank when one failed).
  (void)agree(comm, mine);
  if (leader()) remove_tree(job.tmp_dir);
  if (!mine.ok() && job.write.error.ok()) job.write.error = mine.with_context("node disk full, copying to " + global);
  job.tmp_dir = global;
  return m_drainer->commit_spilled(jp);
}

void NodeLevel::protect(Job& job, MPI_Comm comm) {
  if (m_cfg.options.redundancy == Redundancy::none) return;
  // Every rank takes part, also after a failure (then it sends no files), so that nobody waits.
  std::vector<std::string> names;
  if (job.write.error.ok())
    for (auto& p : job.write.placements)
      if (!p.file.empty() && p.file != "none") names.push_back(p.file);
  const auto t0 = Clock::now();
  std::uint64_t sent = 0;
  const bool fsync = m_cfg.options.fsync;
  Status s = m_xor ? xor_encode(comm, *m_xor, job.tmp_dir, names, fsync, &sent)
                   : exchange_files(comm, m_partner_to, job.tmp_dir, names, m_partner_from, job.tmp_dir + "/partner",
                                    fsync, &sent);
  {
    std::lock_guard<std::mutex> lk(job.ticket->mu);
    job.ticket->stats.redundancy_s = seconds_since(t0);
    job.ticket->stats.redundancy_bytes = sent;
  }
  if (!s.ok() && job.write.error.ok())
    job.write.error = s.with_context(m_xor ? "redundancy" : "partner copy");  // fails the commit
}

Status NodeLevel::commit(const Job& job, const Result<Index>& idx, const Status& ready, MPI_Comm comm) {
  int rank = 0;
  MPI_Comm_rank(comm, &rank);
  Status outcome = bcast_status(comm, ready, 0);
  if (outcome.ok()) {
    std::vector<std::uint8_t> bytes;
    if (rank == 0) bytes = encode_index(idx.value());
    bcast_bytes(comm, bytes, 0);
    Status mine;
    // The drained level's copy of this very step is the old timeline's too (a drain of this one follows).
    if (rank == 0 && m_drained != nullptr) mine = m_drained->abandon_newer_than(job.step - 1, m_sync);
    // Every node directory gets the whole index (and holds the data files of its own ranks).
    if (mine.ok() && leader()) mine = m_store->commit(job.step, job.tmp_dir, bytes, m_sync);
    outcome = agree(comm, mine);
  }
  if (!outcome.ok() && leader()) remove_tree(job.tmp_dir);
  return outcome;
}

void NodeLevel::close() {
  if (m_drainer) m_drainer->close();  // the pipeline's Committer, which feeds it, closed before
  if (m_committer) m_committer->close();
  m_lock.release();
}

}  // namespace ckpt::detail
