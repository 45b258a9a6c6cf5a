// The commit thread: agreement, index, the store's commit, retention. See docs/design.md.
#include "runtime/src/commit/commit.hpp"
#include "runtime/src/pipeline/overlap.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <map>
#include <set>
#include <unordered_map>
#include <utility>

#include "base/bytes.hpp"
#include "base/index_v2.hpp"
#include "base/mpi.hpp"
#include "base/posix_io.hpp"
#include "runtime/src/commit/summary.hpp"
#include "runtime/src/pipeline/threads.hpp"

namespace ckpt::detail {
namespace {

/// A version-2 index's token: random and non-zero per commit attempt (a sub-index of another attempt
/// at the same step never matches its root).
std::uint64_t commit_token(std::uint64_t run_id, std::int64_t step) {
  const std::uint64_t t = random64() ^ hash64(&run_id, sizeof run_id) ^ static_cast<std::uint64_t>(step);
  return t != 0 ? t : 1;
}

}  // namespace

Committer::Committer(MPI_Comm comm, const CommitConfig& cfg, const std::vector<std::unique_ptr<Transport>>& transports,
                     Store& store, std::uint64_t run_id, Tracer* tracer)
    : m_commit_comm(comm), m_cfg(cfg), m_store(store), m_run_id(run_id), m_tracer(tracer) {
  MPI_Comm_rank(comm, &m_rank);
  MPI_Comm_size(comm, &m_size);
  // Who writes this rank's sub-index (index_format 2): the rank itself when its file records are whole
  // (posix, mpiio, hdf5, rbio with one file), the writer of its group when every file of its blocks is its
  // group's alone and only the writer knows its size (rbio with a file per writer); otherwise (a transport
  // that promises neither, a null group) rank 0 writes them all (commit()).
  bool spread = !transports.empty();
  int leader = Transport::kOwnFiles;
  for (auto& t : transports) {
    if (m_transport_names.find(t->name()) == std::string::npos)
      m_transport_names += (m_transport_names.empty() ? "" : "+") + std::string(t->name());
    m_group_persistent.push_back(t->persistent());
    m_persistent = m_persistent || t->persistent();
    if (!t->persistent()) {
      // A null group's placeholder record ("null", one per rank, written by none) is merged into one on
      // rank 0 (format.md): the ranks' own sub-indices would list it with different writers.
      spread = false;
      continue;
    }
    const int w = t->index_writer();
    if (w == Transport::kSharedFiles || (w >= 0 && leader >= 0 && w != leader)) spread = false;
    if (w >= 0) leader = w;
  }
  m_spread = cfg.index_format == 2 && spread && m_persistent && cfg.node == nullptr;
  m_writer = static_cast<std::uint32_t>(m_rank);
  m_writer_count = static_cast<std::uint32_t>(m_size);
  // Groups of ranks merge their parts' files and blocks, not references: incremental checkpoints (posix
  // only, resolve.cpp) keep a writer per rank.
  if (leader >= 0 && cfg.chain != nullptr) m_spread = false;
  if (m_spread && leader >= 0) init_writer_groups(leader);  // the same on every rank: the transports' options
  if (m_spread && leader < 0 && m_rank == 0)
    for (std::uint32_t r = 0; r < m_writer_count; ++r) m_owner.push_back(r);  // writer r is rank r
  if (m_rank == 0 && m_persistent && cfg.durable_every_ms > 0) {
    const auto steps = store.committed_steps();  // newest first; an earlier run's close() synced them
    if (!steps.empty()) m_durable_step = steps.front();
  }
  if (cfg.funneled) {
    m_funnel = std::make_shared<Funnel>(*this);
    return;
  }
  m_thread = std::thread([this] {
    start_ckpt_thread("ckpt commit", "ckpt commit", m_cfg.threads);
    set_sleeping_waits(true);
    loop();
  });
}

void Committer::init_writer_groups(int leader) {
  // The group: the ranks whose leader is the same rank (a group's first rank, so rank 0 leads one);
  // writers numbered in rank order.
  MPI_Comm_split(m_commit_comm, leader, m_rank, &m_group_comm);
  int grank = 0, w = 0, nw = 0;
  MPI_Comm_rank(m_group_comm, &grank);
  MPI_Comm_split(m_commit_comm, grank == 0 ? 0 : MPI_UNDEFINED, m_rank, &m_writers_comm);
  if (m_writers_comm != MPI_COMM_NULL) {
    MPI_Comm_rank(m_writers_comm, &w);
    MPI_Comm_size(m_writers_comm, &nw);
  }
  MPI_Bcast(&w, 1, MPI_INT, 0, m_group_comm);
  m_writer = static_cast<std::uint32_t>(w);
  m_writer_count = static_cast<std::uint32_t>(nw);
  // Rank 0: every rank's writer, and the root's rule for it (once per Runtime: P integers).
  std::vector<std::uint32_t> owner(m_rank == 0 ? static_cast<std::size_t>(m_size) : 0);
  MPI_Gather(&m_writer, 1, MPI_UINT32_T, owner.data(), 1, MPI_UINT32_T, 0, m_commit_comm);
  if (m_rank != 0) return;
  const auto nranks = static_cast<std::uint32_t>(m_size);
  std::uint32_t g = 0;
  while (g < nranks && owner[g] == 0) ++g;
  bool contiguous = true;
  for (std::uint32_t r = 0; r < nranks && contiguous; ++r) contiguous = owner[r] == r / g;
  if (m_writer_count == nranks) {
    m_rule = WriterRule::per_rank;
  } else if (contiguous) {
    m_rule = WriterRule::groups;
    m_rule_g = g;
  } else {
    m_rule = WriterRule::mapped;
  }
  m_owner = std::move(owner);
}

std::size_t Funnel::ready() const { return m_c.m_queue.size(); }

void Funnel::commit_next() {
  std::shared_ptr<Job> job;
  if (m_c.m_queue.pop(job)) m_c.commit_and_finish(job);
}

void Funnel::commit_ready(MPI_Comm comm) {
  unsigned long long mine = ready(), all = 0;
  MPI_Allreduce(&mine, &all, 1, MPI_UNSIGNED_LONG_LONG, MPI_MIN, comm);
  for (unsigned long long i = 0; i < all; ++i) commit_next();
}

Committer::~Committer() { close(); }

void Committer::close() {
  m_queue.close();
  if (m_thread.joinable()) m_thread.join();
  m_funnel.reset();
  // Funneled: nothing should be left (the Runtime committed everything in flight); no collective here.
  std::shared_ptr<Job> left;
  while (m_queue.pop(left))
    left->ticket->finish(Status(Code::failed_precondition, "the Runtime was closed before this checkpoint's commit"));
  if (m_unsynced && m_persistent) (void)m_store.sync();  // the end of the run is durable
  m_unsynced = false;
  free_comm(m_writers_comm);
  free_comm(m_group_comm);
  free_comm(m_commit_comm);
}

std::vector<CheckpointRecord> Committer::history() const {
  std::lock_guard<std::mutex> lk(m_history_mu);
  return m_history;
}

void Committer::loop() {
  using Popped = BlockingQueue<std::shared_ptr<Job>>::Popped;
  std::shared_ptr<Job> job;
  for (;;) {
    if (m_unsynced && m_cfg.durable_every_ms > 0) {
      // durable_every_ms: no commit came to carry the (collective) periodic sync within the period:
      // this rank syncs what it committed on its own. Otherwise an application that computes for an
      // hour after its last checkpoint would leave that checkpoint exposed to a node crash that long.
      const Popped got = m_queue.pop_until(job, m_last_sync + std::chrono::milliseconds(m_cfg.durable_every_ms));
      if (got == Popped::closed) return;
      if (got == Popped::timeout) {
        (void)sync_store(false);
        continue;
      }
    } else if (!m_queue.pop(job)) {
      return;
    }
    commit_and_finish(job);
    job.reset();
  }
}

void Committer::commit_and_finish(const std::shared_ptr<Job>& job) {
  Span span(m_tracer, "ckpt:commit", TraceThread::commit, job->step);
  Status s = commit(job);
  if (m_cfg.chain != nullptr) {
    // A failed commit may have rolled newer steps back before it failed (abandon_newer_than): the chain
    // may name steps that are gone, so the next checkpoint is full.
    if (!s.ok()) m_cfg.chain->reset();
    if (job->incremental.started) m_cfg.chain->settle();  // the next one may compare
  }
  const bool synced = periodic_sync(s.ok()) && s.ok();
  if (m_retain_after >= 0) apply_retention(std::exchange(m_retain_after, -1));  // knows what the sync made durable
  span.end();
  {
    std::lock_guard<std::mutex> lk(job->ticket->mu);
    job->ticket->stats.committed_s = seconds_since(job->t0);
    job->ticket->stats.synced = synced;
  }
  if (m_cfg.verbose >= 1 && m_rank == 0) {
    const auto st = Ticket(job->ticket).stats();
    if (s.ok())
      std::fprintf(
          stderr,
          "ckpt: step %lld committed%s: %.1f MiB on rank 0, blocked %.2f ms, durable %.3f s, committed %.3f s\n",
          static_cast<long long>(job->step), job->spilled ? " in dir (a node disk was full)" : m_cfg.level,
          static_cast<double>(st.bytes) / (1 << 20), st.blocked_s * 1e3, st.durable_s, st.committed_s);
    else
      std::fprintf(stderr, "ckpt: step %lld failed%s: %s\n", static_cast<long long>(job->step),
                   job->spilled ? " in dir (a node disk was full)" : m_cfg.level, s.to_string().c_str());
  }
  // Before the ticket is done: whoever waited for the ticket finds the drain already queued.
  if (s.ok() && m_cfg.node != nullptr && !job->spilled) m_cfg.node->committed(job);
  job->ticket->finish(s);
  if (m_on_finished) m_on_finished();
  {
    std::lock_guard<std::mutex> lk(m_history_mu);
    CheckpointRecord rec = m_rank == 0 ? m_root_last : CheckpointRecord{};
    rec.stats = Ticket(job->ticket).stats();
    rec.ok = s.ok();
    m_history.push_back(std::move(rec));
    m_root_last = CheckpointRecord{};
  }
}

namespace {

/// Where plan block `i` of `job` starts in its segment's file: where the transport placed it, or its
/// place in the stream after the file's base offset.
std::uint64_t block_file_offset(const Job& job, std::uint32_t i) {
  const std::size_t g = job.plan.segment_of_var(i);
  const Placement& pl = job.write.placements[g];
  return pl.block_offsets.empty() ? pl.base_offset + (job.plan.blocks[i].offset - job.plan.segments[g].begin)
                                  : pl.block_offsets.at(i);
}

}  // namespace

Index Committer::report_of(const Job& job) const {
  Index rep;
  rep.step = job.step;
  rep.nranks = static_cast<std::uint32_t>(m_size);
  rep.transport = m_transport_names;
  rep.rank_file.assign(static_cast<std::size_t>(m_size), 0);
  if (!job.write.error.ok()) {
    rep.attrs.emplace_back("error", job.write.error.to_string());
    // The code travels too, so the checkpoint fails with the rank's own code (a rejected stream is
    // failed_precondition, a missing GPU unavailable), not with a blanket io_error.
    rep.attrs.emplace_back("error_code", std::to_string(static_cast<int>(job.write.error.code())));
    rep.files.push_back({"none", static_cast<std::uint32_t>(m_rank), 0});  // keeps the writer map valid
  } else {
    // One file record per segment; blocks of non-persistent groups (null) are not recorded.
    std::vector<std::uint32_t> seg_file(job.plan.segments.size(), 0);
    for (std::size_t g = 0; g < job.plan.segments.size(); ++g) {
      const Placement& pl = job.write.placements[g];
      seg_file[g] = static_cast<std::uint32_t>(rep.files.size());
      rep.files.push_back({pl.file.empty() ? "none" : pl.file, static_cast<std::uint32_t>(pl.writer),
                           pl.file_bytes != 0 ? pl.file_bytes : pl.record_bytes});
      for (auto& kv : pl.attrs) rep.attrs.push_back(kv);
    }
    for (std::uint32_t i = 0; i < job.plan.vars.size(); ++i) {
      const Region& r = job.plan.vars[i];
      const std::size_t g = job.plan.segment_of_var(i);
      if (!m_group_persistent[job.plan.segments[g].group]) continue;
      const BlockPlan& bp = job.plan.blocks[i];
      const BlockProgress& pr = job.digest.progress[i];
      VarRecord v;
      v.name = r.name;
      v.dtype = r.dtype;
      v.kind = r.kind;
      v.ndim = static_cast<std::uint32_t>(r.count.size());
      if (r.kind == RegionKind::global) v.global = r.global;
      if (r.kind == RegionKind::joined) v.global = r.count;  // this rank's rows; join_rows() sums them
      v.attrs = r.attrs;
      rep.vars.push_back(std::move(v));
      BlockRecord b;
      b.var = static_cast<std::uint32_t>(rep.vars.size() - 1);
      b.rank = static_cast<std::uint32_t>(m_rank);
      b.file = seg_file[g];
      b.offset = block_file_offset(job, i);
      b.length = bp.length;
      // Incremental: the pieces, when some refer to an earlier checkpoint (the REFs go to rep.refs).
      (void)pieced_block(job.incremental, i, r.name, b.offset, b, rep.refs);
      b.start = r.kind == RegionKind::global ? r.start : Shape(r.count.size(), 0);
      b.count = r.count;
      b.checksum = pr.digest.checksum;
      b.has_stats = pr.digest.has_stats;
      b.min_bits = pr.digest.min_bits;
      b.max_bits = pr.digest.max_bits;
      rep.blocks.push_back(std::move(b));
    }
  }
  return rep;
}

Status Committer::commit(const std::shared_ptr<Job>& jp) {
  Job& job = *jp;
  if (m_cfg.node != nullptr) {
    if (auto diverted = m_cfg.node->divert(jp, m_commit_comm)) return *diverted;
    m_cfg.node->protect(job, m_commit_comm);
  }
  if (m_spread) return commit_spread(job);
  // Gather every rank's report (encoded with the index codec) on rank 0: this is also the agreement
  // that all ranks succeeded.
  const auto reports = gatherv_bytes(m_commit_comm, encode_index(report_of(job)), 0);
  Result<Index> idx = Status(Code::internal, "not rank 0");
  Status outcome;  // rank 0: whether the index may be published (at any level)
  if (m_rank == 0) {
    idx = index_on_root(job, reports);
    outcome = idx.status();
    if (outcome.ok() && m_cfg.timeline != nullptr) outcome = m_cfg.timeline->before_commit(job.step);
  }
  if (m_cfg.node != nullptr) return m_cfg.node->commit(job, idx, outcome, m_commit_comm);
  if (m_rank == 0) {
    // Make it durable and visible: index, renames, directory fsyncs, `latest` (retention runs after
    // the outcome is sent).
    const bool sync = sync_commits();
    if (outcome.ok() && m_persistent) {
      // Version 2: the catalog and the sub-indices are staged beside the data, the root is the index.
      Result<std::vector<std::uint8_t>> index =
          m_cfg.index_format == 2 ? stage_index_v2(job.tmp_dir, idx.value(), commit_token(m_run_id, job.step), sync)
                                  : encode_index(idx.value());
      outcome = index.ok() ? m_store.commit(job.step, job.tmp_dir, index.value(), sync) : index.status();
    }
    if (!outcome.ok() && m_persistent) m_store.discard(job.tmp_dir);
  }
  outcome = bcast_status(m_commit_comm, outcome, 0);  // everybody learns the outcome
  if (outcome.ok() && m_rank == 0) m_newest_committed = job.step;
  if (outcome.ok() && m_rank == 0 && m_persistent && m_cfg.keep > 0)
    m_retain_after = job.step;  // after the periodic sync, off the other ranks' path
  return outcome;
}

/// What a writer tells rank 0 after writing its sub-index (commit_spread): its failure, or its catalog
/// entry, file count and the boxes of its ranks' blocks of global and joined variables (root numbering; a
/// group's writer merges them: merge_adjacent_boxes).
struct WriterReport {
  /// Its ranks' failures, "rank r: message; ..." (add_failure), and a group's overlapping blocks (the message
  /// names both ranks); empty: written.
  std::string error;
  std::int32_t code = 0;
  CatalogEntry entry;
  std::uint32_t files = 0;
  std::vector<BlockRecord> boxes;  ///< var, start, count
  /// Incremental: the steps its pieces refer to (checkpoints of this run) and the full checkpoint their
  /// chain started with; none: no reference.
  std::vector<std::int64_t> ref_steps;
  std::int64_t base_step = 0;
  /// A group's writer: each box names a rank (a merged box the lowest of its parts') and entry.ranks is the
  /// group's size; a writer of one rank sends neither (the gather's order names it).
  bool grouped = false;
};

namespace {

// A report's first byte says which optional parts follow: the error (message and code) and the references
// (base step and steps). A rank that refers to nothing and wrote its sub-index sends neither: rank 0
// receives one report per rank at every commit.
constexpr std::uint8_t kReportError = 1, kReportRefs = 2, kReportGrouped = 4;

std::vector<std::uint8_t> encode_writer_report(const WriterReport& r) {
  ByteWriter w;
  const std::uint8_t parts =
      (r.error.empty() ? 0 : kReportError) | (r.ref_steps.empty() ? 0 : kReportRefs) | (r.grouped ? kReportGrouped : 0);
  w.put<std::uint8_t>(parts);
  if ((parts & kReportError) != 0) {
    w.str(r.error);
    w.put<std::int32_t>(r.code);
  }
  w.put<std::uint64_t>(r.entry.length);
  w.put<std::uint64_t>(r.entry.checksum);
  w.put<std::uint32_t>(r.files);
  if ((parts & kReportGrouped) != 0) w.put<std::uint64_t>(r.entry.ranks);
  w.put<std::uint32_t>(static_cast<std::uint32_t>(r.boxes.size()));
  for (const BlockRecord& b : r.boxes) {
    w.put<std::uint32_t>(b.var);
    if ((parts & kReportGrouped) != 0) w.put<std::uint32_t>(b.rank);
    w.put<std::uint32_t>(static_cast<std::uint32_t>(b.start.size()));
    for (const auto x : b.start) w.put<std::uint64_t>(x);
    for (const auto x : b.count) w.put<std::uint64_t>(x);
  }
  if ((parts & kReportRefs) != 0) {
    w.put<std::int64_t>(r.base_step);
    w.put<std::uint32_t>(static_cast<std::uint32_t>(r.ref_steps.size()));
    for (const auto s : r.ref_steps) w.put<std::int64_t>(s);
  }
  return std::move(w.bytes());
}

/// A writer's report (commit_spread); `nranks`: the ranks of the commit.
Result<WriterReport> decode_writer_report(const std::vector<std::uint8_t>& bytes, std::size_t nvars,
                                          std::uint32_t nranks) {
  ByteReader r(bytes.data(), bytes.size());
  WriterReport out;
  out.entry.ranks = 1;
  std::uint8_t parts = 0;
  std::uint32_t n = 0;
  if (!r.get(parts) || (parts & ~(kReportError | kReportRefs | kReportGrouped)) != 0)
    return Status(Code::internal, "writer report: bad parts");
  out.grouped = (parts & kReportGrouped) != 0;
  if ((parts & kReportError) != 0 && (!r.str(out.error) || !r.get(out.code) || out.error.empty()))
    return Status(Code::internal, "writer report: bad error");
  if (!r.get(out.entry.length) || !r.get(out.entry.checksum) || !r.get(out.files))
    return Status(Code::internal, "writer report: " + r.error());
  if (out.grouped && (!r.get(out.entry.ranks) || out.entry.ranks == 0 || out.entry.ranks > nranks))
    return Status(Code::internal, "writer report: bad rank count");
  if (!r.count(n, 8, 1u << 30)) return Status(Code::internal, "writer report: " + r.error());
  out.boxes.resize(n);
  for (BlockRecord& b : out.boxes) {
    std::uint32_t ndim = 0;
    if (!r.get(b.var) || (out.grouped && (!r.get(b.rank) || b.rank >= nranks)) || !r.count(ndim, 16, kMaxDims) ||
        b.var >= nvars)
      return Status(Code::internal, "writer report: bad box");
    b.start.resize(ndim);
    b.count.resize(ndim);
    for (auto& x : b.start)
      if (!r.get(x)) return Status(Code::internal, "writer report: " + r.error());
    for (auto& x : b.count)
      if (!r.get(x)) return Status(Code::internal, "writer report: " + r.error());
  }
  if ((parts & kReportRefs) != 0) {
    if (!r.get(out.base_step) || !r.count(n, 8, 1u << 20) || n == 0)
      return Status(Code::internal, "writer report: bad references");
    out.ref_steps.resize(n);
    for (auto& s : out.ref_steps)
      if (!r.get(s)) return Status(Code::internal, "writer report: " + r.error());
  }
  if (!r.at_end()) return Status(Code::internal, "writer report: trailing bytes");
  return out;
}

/// Whether block `b` of a rank's report is sent to rank 0 as a box: a block of a global or joined variable.
bool has_box(const Index& rep, const BlockRecord& b) { return has_global_shape(rep.vars[b.var].kind); }

/// The box of block `b` that a writer report carries: its variable, rank, start and count.
BlockRecord box_of(const BlockRecord& b) {
  BlockRecord box;
  box.var = b.var;
  box.rank = b.rank;
  box.start = b.start;
  box.count = b.count;
  return box;
}

/// What a rank's writer report holds before its sub-index is written (commit_spread): the boxes
/// of its blocks of global and joined variables (`rep`'s numbers and starts: commit_spread renumbers them in
/// place after the agreement, the sizes stay) and the steps its pieces refer to. Its encoded size, error
/// aside, is the gather's slot.
WriterReport draft_writer_report(const Index& rep) {
  WriterReport out;
  for (const BlockRecord& b : rep.blocks)
    if (has_box(rep, b)) out.boxes.push_back(box_of(b));
  for (const RefFile& f : rep.refs)
    if (std::find(out.ref_steps.begin(), out.ref_steps.end(), f.step) == out.ref_steps.end())
      out.ref_steps.push_back(f.step);
  return out;
}

}  // namespace

Status Committer::commit_spread(Job& job) {
  const std::string ckpt = "checkpoint " + std::to_string(job.step);
  const auto nranks = static_cast<std::uint32_t>(m_size);
  const auto rank = static_cast<std::uint32_t>(m_rank);
  // 1. The agreement: one allreduce when every rank registered alike and none failed; else every rank's
  // report reduced along a tree to rank 0 (O(variables) bytes per round), its verdict and plan broadcast.
  const Index rep = report_of(job);
  WriterReport mine = draft_writer_report(rep);
  auto agreed = agree_spread(job, rep, encode_writer_report(mine).size());
  if (!agreed.ok()) {
    if (m_rank == 0) m_store.discard(job.tmp_dir);
    return agreed.status();
  }
  const CommitSummary& all = agreed->summary;
  const std::uint64_t token = agreed->token;
  // This rank's variables by the root's numbers, and the joined arrays' places among the joined ones.
  std::unordered_map<std::string, std::uint32_t> var_of;
  for (std::uint32_t v = 0; v < all.vars.size(); ++v) var_of.emplace(all.vars[v].var.name, v);
  std::vector<std::uint32_t> root_var(rep.vars.size());
  for (std::size_t i = 0; i < rep.vars.size(); ++i) root_var[i] = var_of.at(rep.vars[i].name);
  std::vector<int> joined_at(all.vars.size(), -1);
  int joined = 0;
  for (std::uint32_t v = 0; v < all.vars.size(); ++v)
    if (all.vars[v].var.kind == RegionKind::joined) joined_at[v] = joined++;

  // 2. Joined arrays: each rank's first row is the rows of the ranks before it.
  std::vector<std::uint64_t> rows(static_cast<std::size_t>(joined), 0), first_row(rows.size(), 0);
  for (const BlockRecord& b : rep.blocks)
    if (const int j = joined_at[root_var[b.var]]; j >= 0) rows[static_cast<std::size_t>(j)] = b.count.at(0);
  if (joined > 0) {
    exscan_sum(rows.data(), first_row.data(), static_cast<int>(rows.size()), m_commit_comm);
  }

  // 3. This rank's sub-index (with groups: its part of its writer's), written beside its data; the
  // writer's entry and boxes to rank 0.
  const std::uint64_t ckpt_id = checkpoint_id(m_run_id, job.step);
  const bool grouped = m_group_comm != MPI_COMM_NULL;
  SubIndex sub;
  sub.step = job.step;
  sub.ckpt_id = ckpt_id;
  sub.token = token;
  sub.w = m_writer;
  sub.writers = m_writer_count;
  sub.nranks = nranks;
  sub.ranks = {rank};
  // A shared file's record is the same in every sub-index that lists it (Transport::index_writer); a file
  // counts where its writer is.
  for (const FileRecord& f : rep.files)
    if (f.writer == rank) ++mine.files;
  sub.files = rep.files;
  sub.refs = rep.refs;
  mine.base_step = job.incremental.previous ? job.incremental.previous->base_step : job.step;
  auto box = mine.boxes.begin();  // the draft's boxes, in the blocks' order: numbered and placed as the root is
  for (BlockRecord b : rep.blocks) {
    const bool boxed = has_box(rep, b);
    b.var = root_var[b.var];
    if (const int j = joined_at[b.var]; j >= 0) b.start.at(0) = first_row[static_cast<std::size_t>(j)];
    if (boxed) {
      box->var = b.var;
      box->start = b.start;
      ++box;
    }
    sub.blocks.push_back(std::move(b));
  }
  if (grouped) {
    mine = write_group_subindex(job, sub, all);
  } else {
    const std::vector<std::uint8_t> bytes = encode_subindex(sub);
    const Status s =
        write_file(job.tmp_dir + "/index." + std::to_string(rank), bytes.data(), bytes.size(), sync_commits());
    if (!s.ok()) add_failure(mine.error, rank, s.to_string());
    mine.code = static_cast<std::int32_t>(s.code());
    mine.entry.length = bytes.size();
    mine.entry.checksum = hash64(bytes.data(), bytes.size());
  }
  // One gather of fixed slots, as large as the largest report (agreed in the allreduce): a report with an
  // error message longer than its slot follows point to point. When the padding would more than double
  // what rank 0 receives (a few ranks with many more boxes than the others), or after the ordered
  // reduction (no slot), the lengths first, then the bytes. With groups the writers' reports, whose sizes
  // the allreduce did not see, in one gather of lengths and bytes over the writers.
  const std::vector<std::uint8_t> report = encode_writer_report(mine);
  const std::uint64_t slot = agreed->slot + sizeof(std::uint64_t);
  const bool slots =
      !grouped && agreed->slot > 0 && agreed->slot <= 2 * (agreed->slot_sum / nranks);  // the mean >= half the largest
  std::vector<std::vector<std::uint8_t>> reports;
  if (!grouped)
    reports = slots ? gather_slots(m_commit_comm, report, slot, 0) : gatherv_bytes(m_commit_comm, report, 0);
  else if (m_writers_comm != MPI_COMM_NULL)
    reports = gatherv_bytes(m_writers_comm, report, 0);

  // 4. Rank 0: the catalog and the root from the entries, the boxes and the summary; the store's commit.
  Status outcome;
  if (m_rank == 0) outcome = commit_spread_root(job, all, token, ckpt_id, rep.attrs, reports);
  if (!outcome.ok() && m_rank == 0) m_store.discard(job.tmp_dir);
  outcome = bcast_status(m_commit_comm, outcome, 0);
  if (outcome.ok() && m_rank == 0) m_newest_committed = job.step;
  if (outcome.ok() && m_rank == 0 && m_cfg.keep > 0) m_retain_after = job.step;
  if (outcome.ok() && m_cfg.chain != nullptr && !job.write.placements.empty()) {
    // The chain's newest: where this checkpoint's pieces are (its own file, or where it referred to).
    std::vector<std::uint64_t> own(job.plan.blocks.size(), 0);
    for (std::uint32_t i = 0; i < own.size(); ++i) own[i] = block_file_offset(job, i);
    m_cfg.chain->committed(job.step, ckpt_id, job.write.placements[0].file, job.incremental, job.plan, own);
  }
  return outcome;
}

WriterReport Committer::write_group_subindex(const Job& job, const SubIndex& part, const CommitSummary& all) {
  // A rank's part: its rank, then its blocks and files as a sub-index of one rank.
  ByteWriter w;
  w.put<std::uint32_t>(part.ranks.at(0));
  const std::vector<std::uint8_t> sub = encode_subindex(part);
  w.raw(sub.data(), sub.size());
  const auto parts = gatherv_bytes(m_group_comm, w.bytes(), 0);
  WriterReport out;
  out.grouped = true;
  if (m_writers_comm == MPI_COMM_NULL) return out;  // not the group's writer: rank 0 hears from it

  // The writer: its ranks' parts (in rank order) merged into sub-index m_writer.
  RootIndex numbering;  // what decoding a part needs of the root: the rank count, the variables
  numbering.nranks = part.nranks;
  for (const SummaryVar& v : all.vars) {
    numbering.vars.emplace_back();
    numbering.vars.back().var = v.var;
  }
  SubIndex group;
  group.step = part.step;
  group.ckpt_id = part.ckpt_id;
  group.token = part.token;
  group.w = m_writer;
  group.writers = m_writer_count;
  group.nranks = part.nranks;
  std::unordered_map<std::string, std::uint32_t> file_of;
  Code first_code = Code::ok;
  for (const std::vector<std::uint8_t>& bytes : parts) {
    ByteReader r(bytes.data(), bytes.size());
    std::uint32_t rank = 0;
    auto p = r.get(rank) ? decode_subindex(bytes.data() + (bytes.size() - r.left()), r.left(), numbering)
                         : Result<SubIndex>(Status(Code::internal, "no rank field"));
    if (p.ok() && (p->ranks.size() != 1 || p->ranks[0] != rank))
      p = Status(Code::internal, "its ranks are not its sender's");
    if (!p.ok()) {
      add_failure(out.error, rank, "its part of the group's sub-index: " + p.status().message());
      if (first_code == Code::ok) first_code = Code::internal;
      continue;
    }
    group.ranks.push_back(rank);
    std::vector<std::uint32_t> file_at;
    for (const FileRecord& f : p->files) {
      auto [it, added] = file_of.emplace(f.name, static_cast<std::uint32_t>(group.files.size()));
      if (added) {
        group.files.push_back(f);
      } else if (group.files[it->second].writer != f.writer) {
        add_failure(out.error, rank,
                    "file '" + f.name + "' has writer " + std::to_string(f.writer) + ", not " +
                        std::to_string(group.files[it->second].writer));
        if (first_code == Code::ok) first_code = Code::internal;
      } else {  // the writer knows the file's size, its other ranks 0
        group.files[it->second].bytes = std::max(group.files[it->second].bytes, f.bytes);
      }
      file_at.push_back(it->second);
    }
    for (BlockRecord b : p->blocks) {
      b.file = file_at.at(b.file);
      if (has_global_shape(all.vars.at(b.var).var.kind)) out.boxes.push_back(box_of(b));
      group.blocks.push_back(std::move(b));
    }
  }
  // Rank 0 receives the group's boxes merged (merge_adjacent_boxes: for a group whose blocks form a grid of a
  // box, one per variable). Its check across groups would find an overlap inside the group too, naming the
  // merged box; here the group's own blocks are checked, so the message names the two blocks' ranks.
  Index mine;
  for (const SummaryVar& v : all.vars) mine.vars.push_back(v.var);
  mine.blocks = std::move(out.boxes);
  if (const Status s = check_disjoint_blocks(mine); !s.ok()) {
    if (out.error.size() < kMaxFailureText)
      out.error += (out.error.empty() ? "" : "; ") + s.message();  // names its ranks
    if (first_code == Code::ok) first_code = s.code();
  }
  merge_adjacent_boxes(mine.blocks);
  out.boxes = std::move(mine.blocks);
  out.files = 0;  // a file counts where its writer is (a shared mpiio file is listed by other groups too)
  for (const FileRecord& f : group.files)
    if (std::binary_search(group.ranks.begin(), group.ranks.end(), f.writer)) ++out.files;
  out.entry.ranks = parts.size();
  if (out.error.empty()) {
    const std::vector<std::uint8_t> bytes = encode_subindex(group);
    const Status s =
        write_file(job.tmp_dir + "/index." + std::to_string(m_writer), bytes.data(), bytes.size(), sync_commits());
    if (!s.ok()) {
      add_failure(out.error, static_cast<std::uint32_t>(m_rank), s.to_string());
      first_code = s.code();
    }
    out.entry.length = bytes.size();
    out.entry.checksum = hash64(bytes.data(), bytes.size());
  }
  out.code = static_cast<std::int32_t>(first_code);
  return out;
}

Result<AgreedSummary> Committer::agree_spread(const Job& job, const Index& rep, std::uint64_t report_bytes) {
  const std::string ckpt = "checkpoint " + std::to_string(job.step);
  const auto nranks = static_cast<std::uint32_t>(m_size);
  if (auto fast = allreduce_summary(m_commit_comm, rep, random64(), m_agreed_vars, report_bytes)) {
    CKPT_RETURN_IF_ERROR(summary_status(fast->summary, nranks, job.step));  // the same data on every rank
    return std::move(*fast);
  }
  auto merged = reduce_bytes(m_commit_comm, encode_summary(summarize(rep, static_cast<std::uint32_t>(m_rank))),
                             [](std::vector<std::uint8_t> left, const std::vector<std::uint8_t>& right) {
                               auto l = decode_summary(left.data(), left.size());
                               auto r = decode_summary(right.data(), right.size());
                               if (!l.ok() || !r.ok()) return std::vector<std::uint8_t>{};  // rank 0 says internal
                               merge_summary(l.value(), r.value());
                               return encode_summary(l.value());
                             });
  // Rank 0's verdict, then the plan every rank numbers its blocks by: the token, the variables.
  Status verdict;
  std::vector<std::uint8_t> plan;
  if (m_rank == 0) {
    auto sum = decode_summary(merged.data(), merged.size());
    verdict = sum.ok() ? summary_status(sum.value(), nranks, job.step)
                       : Status(Code::internal, ckpt + ": " + sum.status().message());
    if (verdict.ok()) {
      ByteWriter w;
      w.put<std::uint64_t>(commit_token(m_run_id, job.step));
      w.raw(merged.data(), merged.size());
      plan = std::move(w.bytes());
    }
  }
  CKPT_RETURN_IF_ERROR(bcast_status(m_commit_comm, verdict, 0));
  bcast_bytes(m_commit_comm, plan, 0);
  AgreedSummary out;
  std::memcpy(&out.token, plan.data(), sizeof out.token);
  auto sum = decode_summary(plan.data() + sizeof out.token, plan.size() - sizeof out.token);
  if (!sum.ok()) return Status(Code::internal, ckpt + ": " + sum.status().message());  // the same on every rank
  out.summary = std::move(sum).value();
  return out;
}

Status Committer::commit_spread_root(const Job& job, const CommitSummary& all, std::uint64_t token,
                                     std::uint64_t ckpt_id, const Attributes& rank0_attrs,
                                     const std::vector<std::vector<std::uint8_t>>& reports) {
  const std::string ckpt = "checkpoint " + std::to_string(job.step);
  const auto nranks = static_cast<std::uint32_t>(m_size);
  const auto writers = static_cast<std::uint32_t>(reports.size());  // one per writer (rank, or group)
  std::vector<CatalogEntry> entries(writers);
  Index boxes;  // the boxes of global and joined variables, for the directories and the overlap check
  boxes.nranks = nranks;
  for (const SummaryVar& v : all.vars) boxes.vars.push_back(v.var);
  std::string failures;
  int files = 0;
  Code first_code = Code::ok;
  std::int64_t base_step = job.step;  // incremental: the oldest chain base any rank refers from
  std::set<std::int64_t> ref_steps;   // every step some rank refers to
  for (std::uint32_t w = 0; w < writers; ++w) {
    auto decoded = decode_writer_report(reports[w], all.vars.size(), nranks);
    if (!decoded.ok())
      return Status(Code::internal, ckpt + ": writer " + std::to_string(w) + ": " + decoded.status().message());
    WriterReport wr = std::move(decoded).value();
    if (!wr.error.empty()) {
      if (first_code == Code::ok) first_code = static_cast<Code>(wr.code);
      if (failures.size() < kMaxFailureText) failures += (failures.empty() ? "" : "; ") + wr.error;  // as listed
      continue;
    }
    entries[w] = wr.entry;
    files += static_cast<int>(wr.files);
    if (!wr.ref_steps.empty()) {
      base_step = std::min(base_step, wr.base_step);
      ref_steps.insert(wr.ref_steps.begin(), wr.ref_steps.end());
    }
    for (BlockRecord& b : wr.boxes) {
      if (!wr.grouped) b.rank = w;
      boxes.blocks.push_back(std::move(b));
    }
  }
  if (!failures.empty()) return Status(first_code, ckpt + " not committed: " + failures);
  // A global array whose stored blocks overlap (ghost cells) can never be restored: refuse it now. A group
  // writer checked its own group's blocks and sent their union as merged boxes.
  if (const Status s = check_disjoint_blocks(boxes); !s.ok())
    return s.with_context(ckpt + " not committed" +
                          (m_group_comm != MPI_COMM_NULL ? " (a box is the union of a writer group's adjacent blocks, "
                                                           "named by the lowest of their ranks)"
                                                         : ""));

  RootIndex root;
  root.step = job.step;
  root.nranks = nranks;
  root.ckpt_id = ckpt_id;
  root.created_unix = static_cast<double>(std::time(nullptr));
  root.transport = m_transport_names;
  root.attrs.emplace_back("ckpt_version", version());
  for (const auto& kv : rank0_attrs) root.attrs.push_back(kv);
  root.token = token;
  root.writers = writers;
  root.rule = m_rule;
  root.g = m_rule_g;
  root.base_step = base_step;
  for (const std::int64_t s : ref_steps) root.refs.push_back(RefSummary{0, s, checkpoint_id(m_run_id, s)});
  for (const SummaryVar& v : all.vars) {
    Var2 out;
    out.var = v.var;
    out.var.uniform = summary_uniform(v, nranks);
    out.has_stats = v.has_stats;
    out.min_bits = v.min_bits;
    out.max_bits = v.max_bits;
    out.n_blocks = v.n_blocks;
    out.bytes = v.bytes;
    root.vars.push_back(std::move(out));
  }
  if (m_owner.size() != nranks || root.writers != m_writer_count)
    return Status(Code::internal, ckpt + ": " + std::to_string(root.writers) + " writer reports for " +
                                      std::to_string(m_writer_count) + " writers");
  const std::vector<std::uint8_t> catalog = build_catalog(
      root, std::move(entries), boxes, m_owner, m_rule == WriterRule::mapped ? m_owner : std::vector<std::uint32_t>{});
  m_root_last.files = files;
  m_root_last.attrs = root.attrs;

  if (m_cfg.timeline != nullptr) CKPT_RETURN_IF_ERROR(m_cfg.timeline->before_commit(job.step));
  const bool sync = sync_commits();
  CKPT_RETURN_IF_ERROR(write_file(job.tmp_dir + "/catalog", catalog.data(), catalog.size(), sync));
  return m_store.commit(job.step, job.tmp_dir, encode_root_index(root), sync);
}

Result<Index> Committer::merge_reports(const Job& job, const std::vector<std::vector<std::uint8_t>>& reports) const {
  Index idx;
  idx.step = job.step;
  idx.nranks = static_cast<std::uint32_t>(m_size);
  idx.ckpt_id = checkpoint_id(m_run_id, job.step);
  idx.created_unix = static_cast<double>(std::time(nullptr));
  idx.transport = m_transport_names;
  idx.attrs.emplace_back("ckpt_version", version());
  idx.rank_file.assign(static_cast<std::size_t>(m_size), 0);

  std::string failures, agreed;  // agreed: the one message while every rank reported the same
  int failed_ranks = 0;
  Code first_code = Code::ok;
  bool have_code = false;
  std::vector<Index> reps;
  reps.reserve(reports.size());
  for (int r = 0; r < m_size; ++r) {
    auto d = decode_index(reports[static_cast<std::size_t>(r)].data(), reports[static_cast<std::size_t>(r)].size());
    if (!d.ok()) return Status(Code::internal, "report of rank " + std::to_string(r) + ": " + d.status().message());
    if (r == 0)
      for (auto& kv : d->attrs)
        if (kv.first != "error" && kv.first != "error_code") idx.attrs.push_back(kv);
    for (auto& kv : d->attrs)
      if (kv.first == "error") {
        if (failed_ranks++ == 0) agreed = kv.second;
        if (kv.second != agreed) agreed.clear();
        add_failure(failures, static_cast<std::uint32_t>(r), kv.second);
        if (first_code == Code::ok) first_code = Code::io_error;  // unless the rank's code follows
      } else if (kv.first == "error_code" && !have_code) {
        have_code = true;  // the first failing rank's own code
        const int c = std::atoi(kv.second.c_str());
        if (c > 0 && c <= static_cast<int>(Code::internal)) first_code = static_cast<Code>(c);
      }
    reps.push_back(std::move(d).value());
  }
  // A failure the ranks agreed on (agree_on_job: an argument, the steps) is the same on every rank:
  // said once (it names the rank it came from). With one rank every failure looks agreed: it keeps
  // its "rank 0: " like any rank's own failure.
  if (m_size > 1 && failed_ranks == m_size && !agreed.empty()) failures = agreed;
  if (!failures.empty())
    return Status(first_code, "checkpoint " + std::to_string(job.step) + " not committed: " + failures);

  std::map<std::string, std::uint32_t> file_ix, var_ix;
  for (int r = 0; r < m_size; ++r) {
    Index& rep = reps[static_cast<std::size_t>(r)];
    std::vector<std::uint32_t> fmap, vmap;
    for (auto& f : rep.files) {
      auto it = file_ix.find(f.name);
      if (it == file_ix.end()) {
        it = file_ix.emplace(f.name, static_cast<std::uint32_t>(idx.files.size())).first;
        idx.files.push_back(f);
      } else {
        idx.files[it->second].bytes = std::max(idx.files[it->second].bytes, f.bytes);
      }
      fmap.push_back(it->second);
    }
    if (!fmap.empty()) idx.rank_file[static_cast<std::size_t>(r)] = fmap[0];  // the default group's file
    for (auto& v : rep.vars) {
      auto it = var_ix.find(v.name);
      if (it == var_ix.end()) {
        it = var_ix.emplace(v.name, static_cast<std::uint32_t>(idx.vars.size())).first;
        idx.vars.push_back(v);
      } else {
        // A joined array's row count differs per rank (summed by join_rows()); its row extents may not.
        if (!same_registration(idx.vars[it->second], v))
          return Status(Code::invalid_argument, "checkpoint " + std::to_string(job.step) + ": " +
                                                    registered_differently(v.name, static_cast<std::uint32_t>(r)));
      }
      vmap.push_back(it->second);
    }
    for (auto b : rep.blocks) {
      b.var = vmap.at(b.var);
      b.file = fmap.at(b.file);
      idx.blocks.push_back(std::move(b));
    }
  }
  CKPT_RETURN_IF_ERROR(join_rows(idx).with_context("checkpoint " + std::to_string(job.step) + " not committed"));
  mark_uniform(idx);
  return idx;
}

Status Committer::join_rows(Index& idx) {
  // Blocks are in rank order: each rank's rows follow those of the ranks before it.
  std::vector<std::uint64_t> rows(idx.vars.size(), 0);
  for (BlockRecord& b : idx.blocks) {
    VarRecord& v = idx.vars[b.var];
    if (v.kind != RegionKind::joined) continue;
    b.start[0] = rows[b.var];
    if (__builtin_add_overflow(rows[b.var], b.count[0], &rows[b.var]))
      return Status(Code::invalid_argument, "joined array '" + v.name + "': the row count overflows");
  }
  for (std::size_t i = 0; i < idx.vars.size(); ++i) {
    VarRecord& v = idx.vars[i];
    if (v.kind != RegionKind::joined) continue;
    v.global[0] = rows[i];
    std::uint64_t bytes = dtype_size(v.dtype);
    for (auto g : v.global)
      if (__builtin_mul_overflow(bytes, g, &bytes))
        return Status(Code::invalid_argument, "joined array '" + v.name + "': its size in bytes exceeds 2^64");
  }
  return Status::OK();
}

void Committer::mark_uniform(Index& idx) const {
  // Scalars and local arrays equal on every rank are `uniform`: they restart on any rank count.
  const IndexLookup look(idx);
  for (std::uint32_t v = 0; v < idx.vars.size(); ++v) {
    if (has_global_shape(idx.vars[v].kind)) continue;
    const auto& blocks = look.blocks(v);
    bool same = true;
    for (const std::uint32_t bi : blocks) {
      const BlockRecord& b = idx.blocks[bi];
      const BlockRecord& first = idx.blocks[blocks.front()];
      if (b.checksum != first.checksum || b.count != first.count) same = false;
    }
    idx.vars[v].uniform = same && static_cast<int>(blocks.size()) == m_size;
  }
}

Result<Index> Committer::index_on_root(const Job& job, const std::vector<std::vector<std::uint8_t>>& reports) {
  auto idx = merge_reports(job, reports);
  if (!idx.ok()) return idx.status();
  // A global array whose stored blocks overlap (ghost cells) can never be restored: refuse it now.
  CKPT_RETURN_IF_ERROR(
      check_disjoint_blocks(idx.value()).with_context("checkpoint " + std::to_string(job.step) + " not committed"));
  if (m_persistent) {
    m_root_last.files = static_cast<int>(idx->files.size());
    m_root_last.attrs = idx->attrs;
  }
  return idx;
}

bool Committer::periodic_sync(bool committed) {
  if (!m_cfg.fsync || !m_persistent) return false;
  if (m_cfg.durable_every_ms <= 0) return committed;  // fsynced by the commit itself
  m_unsynced = m_unsynced || committed;
  int now = 0;
  if (m_rank == 0) now = m_unsynced && seconds_since(m_last_sync) * 1e3 >= m_cfg.durable_every_ms ? 1 : 0;
  bcast(&now, 1, MPI_INT, 0, m_commit_comm);
  if (now == 0) return false;
  return sync_store(true);
}

bool Committer::sync_store(bool collective) {
  Span span(m_tracer, "ckpt:fsync", TraceThread::commit);
  Status s = m_store.sync();
  if (collective) s = agree(m_commit_comm, s);
  m_last_sync = Clock::now();
  m_unsynced = !s.ok();  // tried again a period later
  // Every rank synced what it wrote: the newest commit is on disk, retention may pass older ones.
  if (s.ok() && collective && m_newest_committed >= 0) m_durable_step = m_newest_committed;
  if (!s.ok() && m_cfg.verbose >= 1 && collective && m_rank == 0)
    std::fprintf(stderr, "ckpt: periodic sync: %s\n", s.to_string().c_str());
  if (!s.ok() && m_cfg.verbose >= 1 && !collective)
    std::fprintf(stderr, "ckpt: rank %d: periodic sync: %s\n", m_rank, s.to_string().c_str());
  return s.ok();
}

void Committer::apply_retention(std::int64_t just_committed) {
  // With durable_every_ms the newest commits may be in the page cache only: the last synced one stays.
  Status st = m_store.retain(m_cfg.keep, just_committed, m_cfg.durable_every_ms > 0 ? m_durable_step : -1);
  if (!st.ok() && m_cfg.verbose >= 1) std::fprintf(stderr, "ckpt: retention: %s\n", st.to_string().c_str());
}

}  // namespace ckpt::detail
