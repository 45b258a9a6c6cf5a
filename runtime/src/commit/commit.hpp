// The commit thread (internal): agreement of every rank on a checkpoint, the index, the store's atomic
// commit and retention, and the ticket's outcome. See docs/design.md.
#ifndef CKPT_RUNTIME_COMMIT_HPP
#define CKPT_RUNTIME_COMMIT_HPP

#include <mpi.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "base/index_v2.hpp"
#include "base/store.hpp"
#include "ckpt/ckpt.hpp"
#include "runtime/src/commit/dir_lock.hpp"
#include "runtime/src/pipeline/job.hpp"
#include "runtime/src/pipeline/threads.hpp"

namespace ckpt::detail {

class Committer;
struct CommitSummary;
struct AgreedSummary;
struct WriterReport;

/// A level the Committer commits into through its hooks, called on the commit thread (funneled: the
/// application thread) at fixed points of every commit, with the commit's communicator: the node
/// level (levels/node_level.hpp; docs/design.md, "Levels").
class CommitLevel {
 public:
  virtual ~CommitLevel() = default;
  /// Collective, first: whether the checkpoint must go elsewhere (some rank's node disk was full);
  /// then the hook commits it there and returns the outcome, and no other hook runs for it.
  virtual std::optional<Status> divert(const std::shared_ptr<Job>& job, MPI_Comm comm) = 0;
  /// Collective, before the agreement: the redundancy data; a failure goes into job.write.error (the
  /// checkpoint is complete on this level only with it).
  virtual void protect(Job& job, MPI_Comm comm) = 0;
  /// Collective, instead of the store's commit: `idx` (rank 0's merged index; unused elsewhere)
  /// committed on this level; the outcome, agreed. `ready`: rank 0's verdict on publishing it (the
  /// index's Status, then the timeline's record of the step); OK elsewhere.
  virtual Status commit(const Job& job, const Result<Index>& idx, const Status& ready, MPI_Comm comm) = 0;
  /// A checkpoint commit() committed, before its ticket is done.
  virtual void committed(std::shared_ptr<Job> job) = 0;
};

/// What the commit needs of the options.
struct CommitConfig {
  bool fsync = true;
  ThreadPolicy threads;      ///< options thread_cpus, thread_slice_us
  int durable_every_ms = 0;  ///< > 0: commits are not fsynced, the store is synced at most this often
  int keep = 2;              ///< retention after each commit; 0 = none here (the drain thread retains the node level)
  int index_format = 1;      ///< option index_format: 2 writes the two-level index (format.md, version 2)
  int verbose = 0;
  /// Rank 0 with a root: told before each commit is published (Timeline::before_commit); a failure
  /// there fails the commit. Shared by both Committers of a run with levels (a spilled checkpoint is
  /// first published by the drained level's).
  Timeline* timeline = nullptr;
  const char* level = "";  ///< for the verbose line: "", " locally", " (drained)"
  /// Options::mpi_threads resolved to funneled: no commit thread; the application thread commits
  /// through the Funnel.
  bool funneled = false;
  /// The level this Committer commits into through hooks instead of its store's plain commit: the
  /// node level (levels/node_level.hpp), or null.
  CommitLevel* node = nullptr;
  /// Option incremental: this rank's chain, which each committed checkpoint extends (commit_spread).
  Chain* chain = nullptr;
};

/// Funneled mode: the commits, run on the application thread at the collective points of the API.
/// Every rank commits the same checkpoints at the same points (the counts come from collectives or
/// from the in-flight window, equal everywhere), so the commit's collectives match.
class Funnel {
 public:
  explicit Funnel(Committer& c) : m_c(c) {}
  /// Checkpoints whose data this rank has written, waiting for their commit (in step order).
  std::size_t ready() const;
  /// Commits the oldest checkpoint not committed yet, after waiting for its data to be written here.
  void commit_next();
  /// Commits checkpoints, oldest first, until `ts` is done.
  void settle(const TicketState& ts) {
    while (!ts.is_done()) commit_next();
  }
  /// Commits the checkpoints every rank has written (an MPI_Allreduce on `comm`); waits for no I/O.
  void commit_ready(MPI_Comm comm);

 private:
  Committer& m_c;
};

/// Owns the commit thread (funneled: the Funnel) and its communicator. submit() is called by the write
/// thread; history() by any thread; close() by the application thread once no more jobs come.
class Committer {
 public:
  /// `comm` is a communicator of its own (a dup), freed by close(). `transports` ([g] = group g) and
  /// `store` must outlive the Committer. Starts the thread.
  Committer(MPI_Comm comm, const CommitConfig& cfg, const std::vector<std::unique_ptr<Transport>>& transports,
            Store& store, std::uint64_t run_id, Tracer* tracer);
  ~Committer();
  Committer(const Committer&) = delete;
  Committer& operator=(const Committer&) = delete;

  /// Hands a job whose writers are finished (or failed) to the commit thread; commits run in order.
  void submit(std::shared_ptr<Job> job) { m_queue.push(std::move(job)); }
  /// Called on the commit thread after each checkpoint's ticket is done (the Launcher's count); set
  /// before the first submit().
  void set_on_finished(std::function<void()> f) { m_on_finished = std::move(f); }
  /// Commits what was submitted, syncs what durable_every_ms left unsynced, stops the thread and
  /// frees the communicator. Funneled: what was submitted and not committed fails (the Runtime
  /// commits everything in flight before).
  void close();
  /// Funneled mode only (else null): the commits of the application thread. Expires at close().
  std::shared_ptr<Funnel> funnel() const { return m_funnel; }
  /// The transports' names as the index records them: "posix", or "posix+rbio" with groups.
  const std::string& transport_names() const { return m_transport_names; }
  /// One record per finished checkpoint on this rank, in order.
  std::vector<CheckpointRecord> history() const;

 private:
  friend class Funnel;
  void loop();
  /// Commits `job` and finishes its ticket (the commit thread, or the application thread's Funnel).
  void commit_and_finish(const std::shared_ptr<Job>& job);
  /// Every rank: reports, agreement, rank 0's commit, the outcome on every rank, retention on rank 0.
  Status commit(const std::shared_ptr<Job>& job);
  /// The commit of the two-level index when the transports allow it (index_format 2, Transport::index_writer;
  /// each rank a writer, or rbio's groups with a file per writer): the reports reduced along a tree
  /// (summary.hpp), each group's sub-index written by its writer (from its ranks' parts), rank 0 gets
  /// the writers' catalog entries and the boxes of global and joined blocks, commits catalog and root.
  Status commit_spread(Job& job);
  /// The writer groups of commit_spread() (constructor, collective): `leader` is this rank's group writer.
  void init_writer_groups(int leader);
  /// commit_spread() with groups, on every rank of one: the group's writer gathers its ranks' parts
  /// (`part`: this rank's blocks and files) and writes their sub-index; its report for rank 0.
  WriterReport write_group_subindex(const Job& job, const SubIndex& part, const CommitSummary& all);
  /// commit_spread()'s agreement: the summary of every rank's report and the commit token, the same on
  /// every rank, or the same failure on every rank (allreduce_summary(), else the ordered reduction), and
  /// the largest `report_bytes` (the writer reports' gather slot; 0 after the ordered reduction).
  Result<AgreedSummary> agree_spread(const Job& job, const Index& rep, std::uint64_t report_bytes);
  /// Rank 0 of commit_spread(): the writers' reports checked, the catalog and the root built and committed.
  Status commit_spread_root(const Job& job, const CommitSummary& all, std::uint64_t token, std::uint64_t ckpt_id,
                            const Attributes& rank0_attrs, const std::vector<std::vector<std::uint8_t>>& reports);
  /// Whether a commit fsyncs what it writes (fsync on, no durable_every_ms period).
  bool sync_commits() const { return m_cfg.fsync && m_cfg.durable_every_ms == 0; }
  /// This rank's report: its variables and block records (persistent groups only), or its error.
  Index report_of(const Job& job) const;
  /// Rank 0: the index from every rank's report, or the ranks' failures.
  Result<Index> merge_reports(const Job& job, const std::vector<std::vector<std::uint8_t>>& reports) const;
  /// Gives every joined array's blocks their first rows (rank order) and the array its row count.
  static Status join_rows(Index& idx);
  /// Marks local variables and scalars stored with the same bytes by every rank as uniform.
  void mark_uniform(Index& idx) const;
  /// Rank 0: merge_reports() and the checks of the index to commit.
  Result<Index> index_on_root(const Job& job, const std::vector<std::vector<std::uint8_t>>& reports);
  void apply_retention(std::int64_t just_committed);
  /// Every rank, after a commit's outcome: with durable_every_ms, syncs the store when the period is
  /// over (rank 0 decides, everybody learns it); true when this checkpoint is now durable.
  bool periodic_sync(bool committed);
  /// durable_every_ms: syncs the store and restarts the period; true when it succeeded. `collective`:
  /// every rank, agreed (periodic_sync, with a commit); else this rank alone - the commit thread when
  /// the period passed with commits unsynced and none to come yet (the commits' collectives stay in
  /// step).
  bool sync_store(bool collective);

  MPI_Comm m_commit_comm;
  int m_rank = 0, m_size = 1;
  CommitConfig m_cfg;
  std::string m_transport_names;         ///< for the index: "posix" or "posix+rbio"
  std::vector<bool> m_group_persistent;  ///< per transport group: whether it writes files
  bool m_persistent = false;             ///< some group writes files
  bool m_spread = false;                 ///< commit_spread(): index_format 2, the transports allow it
  /// commit_spread() with writer groups (rbio with a file per writer): the ranks of this rank's group, and
  /// the group writers (the groups' first ranks, numbered in rank order); null with a writer per rank
  MPI_Comm m_group_comm = MPI_COMM_NULL, m_writers_comm = MPI_COMM_NULL;
  std::uint32_t m_writer = 0;                  ///< the number of this rank's writer (without groups: the rank)
  std::uint32_t m_writer_count = 0;            ///< W (rank 0, and the writers of groups)
  WriterRule m_rule = WriterRule::per_rank;    ///< rank 0: how the root describes the writers
  std::uint32_t m_rule_g = 0;                  ///< rank 0: rule 1's ranks per writer
  std::vector<std::uint32_t> m_owner;          ///< rank 0, commit_spread(): rank r's writer
  std::optional<std::uint64_t> m_agreed_vars;  ///< allreduce_summary()'s count, kept between commits
  Store& m_store;
  std::uint64_t m_run_id;
  Tracer* m_tracer;
  BlockingQueue<std::shared_ptr<Job>> m_queue;
  mutable std::mutex m_history_mu;
  std::vector<CheckpointRecord> m_history;  // appended by the commit thread
  CheckpointRecord m_root_last;             // commit thread, rank 0: files/attrs of the last commit
  std::function<void()> m_on_finished;
  Clock::time_point m_last_sync = Clock::now();  ///< commit thread: the last periodic sync
  bool m_unsynced = false;                       ///< commit thread: commits since then
  std::int64_t m_newest_committed = -1;  ///< rank 0: the newest step committed by this run
  std::int64_t m_retain_after = -1;      ///< rank 0: the step whose retention runs after the periodic sync
  /// rank 0, durable_every_ms: the newest step known to be on disk (synced by this run, or the newest
  /// one an earlier run left); retention keeps it while the newer ones are in the page cache only
  std::int64_t m_durable_step = -1;
  std::thread m_thread;
  std::shared_ptr<Funnel> m_funnel;
};

}  // namespace ckpt::detail

#endif  // CKPT_RUNTIME_COMMIT_HPP
