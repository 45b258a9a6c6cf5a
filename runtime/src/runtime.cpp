// Runtime facade, construction, the region registry and the capture half of the pipeline (app thread).
#include <sys/stat.h>

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <random>

#include "base/mpi.hpp"
#include "base/posix_io.hpp"
#include "ckpt/ckpt.hpp"
#include "runtime/src/resolve.hpp"
#include "runtime/src/runtime_impl.hpp"
#include "runtime/src/spill.hpp"

namespace ckpt {

// ---- Ticket ----------------------------------------------------------------------------------------

namespace detail {
void TicketState::finish(Status s) {
  {
    std::lock_guard<std::mutex> lk(mu);
    if (done) return;
    status = std::move(s);
    done = true;
  }
  cv.notify_all();
}
}  // namespace detail

Status Ticket::wait() const {
  if (!m_state) return Status(Code::failed_precondition, "wait() on an empty ticket");
  detail::Span span(m_state->tracer.get(), "ckpt:wait", detail::TraceThread::app, m_state->step);
  if (auto funnel = m_state->funnel.lock()) funnel->settle(*m_state);  // funneled: commit on this thread
  std::unique_lock<std::mutex> lk(m_state->mu);
  m_state->cv.wait(lk, [&] { return m_state->done; });
  m_state->observed = true;
  return m_state->status;
}

bool Ticket::done() const {
  if (!m_state) return true;
  std::lock_guard<std::mutex> lk(m_state->mu);
  return m_state->done;
}

std::int64_t Ticket::step() const { return m_state ? m_state->step : -1; }

CheckpointStats Ticket::stats() const {
  if (!m_state) return {};
  std::lock_guard<std::mutex> lk(m_state->mu);
  return m_state->stats;
}

// ---- Runtime facade ------------------------------------------------------------------------------

Runtime::Runtime(CommRef comm, const Options& options) : m_impl(std::make_unique<detail::RuntimeImpl>(comm, options)) {}
Runtime::~Runtime() { m_impl->close(); }
Status Runtime::status() const { return m_impl->status(); }
int Runtime::rank() const { return m_impl->rank(); }
int Runtime::size() const { return m_impl->size(); }
const Options& Runtime::options() const { return m_impl->options(); }

namespace {
/// The registry's `start` of a joined region: {first_row}, or {} for the balanced split.
Shape joined_start(const Joined& j) { return j.first_row ? Shape{*j.first_row} : Shape{}; }

Status check_signs(const char* call, const std::string& name, const Dims& a, const Dims& b = {}, const Dims& c = {}) {
  if (!a.has_negative() && !b.has_negative() && !c.has_negative()) return Status::OK();
  return Status(Code::invalid_argument, std::string(call) + ": region '" + name + "': negative extent or start");
}
}  // namespace

Status Runtime::protect(const std::string& name, void* ptr, DType dtype, Dims dims) {
  CKPT_RETURN_IF_ERROR(check_signs("protect", name, dims));
  const auto kind = dims.empty() ? detail::RegionKind::scalar : detail::RegionKind::local;
  return m_impl->protect(name, ptr, dtype, kind, {}, {}, std::move(dims));
}
Status Runtime::protect(const std::string& name, void* ptr, DType dtype, const Block& b) {
  CKPT_RETURN_IF_ERROR(check_signs("protect", name, b.global, b.start, b.count));
  return m_impl->protect(name, ptr, dtype, detail::RegionKind::global, b.global, b.start, b.count);
}
Status Runtime::protect(const std::string& name, void* ptr, DType dtype, const Joined& j) {
  CKPT_RETURN_IF_ERROR(check_signs("protect", name, j.count));
  return m_impl->protect(name, ptr, dtype, detail::RegionKind::joined, {}, joined_start(j), j.count);
}
Status Runtime::update(const std::string& name, void* ptr, Dims dims) {
  CKPT_RETURN_IF_ERROR(check_signs("update", name, dims));
  const auto kind = dims.empty() ? detail::RegionKind::scalar : detail::RegionKind::local;
  return m_impl->update(name, ptr, kind, {}, {}, std::move(dims));
}
Status Runtime::update(const std::string& name, void* ptr, const Block& b) {
  CKPT_RETURN_IF_ERROR(check_signs("update", name, b.global, b.start, b.count));
  return m_impl->update(name, ptr, detail::RegionKind::global, b.global, b.start, b.count);
}
Status Runtime::update(const std::string& name, void* ptr, const Joined& j) {
  CKPT_RETURN_IF_ERROR(check_signs("update", name, j.count));
  return m_impl->update(name, ptr, detail::RegionKind::joined, {}, joined_start(j), j.count);
}
Status Runtime::protect(const std::string& name, DType dtype, Source source, SourceKind kind) {
  return m_impl->protect_source(name, dtype,
                                kind == SourceKind::joined ? detail::RegionKind::joined : detail::RegionKind::local,
                                std::make_shared<const Source>(std::move(source)));
}
Status Runtime::protect_or_update(const std::string& name, void* ptr, DType dtype, Dims dims) {
  CKPT_RETURN_IF_ERROR(check_signs("protect_or_update", name, dims));
  const auto kind = dims.empty() ? detail::RegionKind::scalar : detail::RegionKind::local;
  return m_impl->protect_or_update(name, ptr, dtype, kind, {}, {}, std::move(dims));
}
Status Runtime::protect_or_update(const std::string& name, void* ptr, DType dtype, const Block& b) {
  CKPT_RETURN_IF_ERROR(check_signs("protect_or_update", name, b.global, b.start, b.count));
  return m_impl->protect_or_update(name, ptr, dtype, detail::RegionKind::global, b.global, b.start, b.count);
}
Status Runtime::protect_or_update(const std::string& name, void* ptr, DType dtype, const Joined& j) {
  CKPT_RETURN_IF_ERROR(check_signs("protect_or_update", name, j.count));
  return m_impl->protect_or_update(name, ptr, dtype, detail::RegionKind::joined, {}, joined_start(j), j.count);
}
Status Runtime::set_optional(const std::string& name, bool optional) { return m_impl->set_optional(name, optional); }
const std::vector<std::string>& Runtime::skipped_optional() const { return m_impl->skipped_optional(); }
Result<JoinedRows> Runtime::joined_rows(std::int64_t step, const std::string& name) {
  return m_impl->joined_rows(step, name);
}

JoinedRows balanced_rows(std::uint64_t total, int rank, int size) noexcept {
  JoinedRows r;
  r.total = total;
  if (size <= 0 || rank < 0 || rank >= size) return r;
  using U = unsigned __int128;  // total * rank must not overflow
  r.begin = static_cast<std::uint64_t>(U(total) * U(rank) / U(size));
  r.end = static_cast<std::uint64_t>(U(total) * U(rank + 1) / U(size));
  return r;
}
Status Runtime::unprotect(const std::string& name) { return m_impl->unprotect(name); }
Status Runtime::annotate(const std::string& name, const std::string& key, const std::string& value) {
  return m_impl->annotate(name, key, value);
}
Ticket Runtime::checkpoint(std::int64_t step, void* stream) { return m_impl->checkpoint(step, stream); }
Status Runtime::wait_all() { return m_impl->wait_all(); }
Status Runtime::poll() { return m_impl->poll(); }
bool Runtime::funneled() const { return m_impl->funneled(); }
const char* Runtime::device_name() const { return m_impl->device_name(); }
std::optional<std::int64_t> Runtime::latest() { return m_impl->latest(); }
Result<std::vector<std::int64_t>> Runtime::steps() { return m_impl->steps(); }
Status Runtime::restart(std::int64_t step) { return m_impl->restart(step, nullptr); }
Status Runtime::restart(std::int64_t step, void* stream) { return m_impl->restart(step, stream); }
Result<CheckpointReader> Runtime::inspect(std::int64_t step) { return m_impl->inspect(step); }
const std::string& Runtime::restart_level() const { return m_impl->restart_level(); }
Result<std::int64_t> Runtime::restart() { return m_impl->restart_newest(nullptr); }
Result<std::int64_t> Runtime::restart_newest(void* stream) { return m_impl->restart_newest(stream); }
Status Runtime::close() { return m_impl->close(); }

// ---- RuntimeImpl: construction -------------------------------------------------------------------

namespace detail {


// ---- MPI_Finalize before the Runtime's end ----------------------------------------------------------
// A Runtime declared in main's scope outlives MPI_Finalize. An attribute on MPI_COMM_SELF is deleted
// at the very start of MPI_Finalize, while MPI still works: its callback drains and closes every live
// Runtime, so the checkpoints in flight commit and no thread calls MPI after the finalisation.
namespace {
std::mutex g_live_mu;
std::vector<RuntimeImpl*> g_live;  // in construction order
bool g_finalize_hooked = false;

int close_live_runtimes(MPI_Comm, int, void*, void*) {
  std::vector<RuntimeImpl*> live;
  {
    std::lock_guard<std::mutex> lk(g_live_mu);
    live = g_live;
  }
  for (auto it = live.rbegin(); it != live.rend(); ++it) (*it)->close_at_finalize();
  return MPI_SUCCESS;
}
}  // namespace

void RuntimeImpl::register_live(RuntimeImpl* r) {
  std::lock_guard<std::mutex> lk(g_live_mu);
  if (!g_finalize_hooked) {
    int key = MPI_KEYVAL_INVALID;
    MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, close_live_runtimes, &key, nullptr);
    MPI_Comm_set_attr(MPI_COMM_SELF, key, nullptr);
    // Freeing the key now is allowed and keeps the attribute alive: MPI frees the key itself once
    // MPI_Finalize has deleted the attribute (valgrind saw the key as leaked otherwise).
    MPI_Comm_free_keyval(&key);
    g_finalize_hooked = true;
  }
  g_live.push_back(r);
}

void RuntimeImpl::unregister_live(RuntimeImpl* r) {
  std::lock_guard<std::mutex> lk(g_live_mu);
  g_live.erase(std::remove(g_live.begin(), g_live.end(), r), g_live.end());
}

void RuntimeImpl::close_at_finalize() {
  Status s = close();
  std::lock_guard<std::recursive_mutex> lk(m_close_mu);
  m_closed_by_finalize = true;
  if (!s.ok() && m_rank == 0)
    std::fprintf(stderr, "ckpt: closing the Runtime at MPI_Finalize: %s\n", s.to_string().c_str());
}

RuntimeImpl::RuntimeImpl(CommRef comm, const Options& options) : m_opts(options) {
  auto checked = comm_from_ref(comm, "ckpt::Runtime");
  if (!checked.ok()) {
    m_status = checked.status();
    return;
  }
  MPI_Comm user = checked.value();
  int inter = 0;
  MPI_Comm_test_inter(user, &inter);
  if (inter) {
    m_status =
        Status(Code::invalid_argument, "the communicator is an intercommunicator; ckpt needs an intracommunicator");
    return;
  }
  // Collective from here on: every rank takes the same path, errors are agreed.
  MPI_Comm_dup(user, &m_app_comm);
  MPI_Comm_rank(m_app_comm, &m_rank);
  MPI_Comm_size(m_app_comm, &m_size);
  if (m_rank == 0)  // e.g. an unknown CKPT_* variable: said once, never fatal
    for (const auto& w : m_opts.warnings) std::fprintf(stderr, "ckpt: warning: %s\n", w.c_str());
  int provided = MPI_THREAD_SINGLE;
  MPI_Query_thread(&provided);
  // Every rule between options, then the ranks' agreement on the job-wide ones (resolve.hpp): before
  // anything whose count of collective calls depends on an option (the communicators below).
  auto resolved = resolve(m_opts, ResolveEnv{provided, physical_memory()});
  m_status = agree(m_app_comm, resolved.status());
  if (m_status.ok()) m_status = agree_options(m_app_comm, resolved->options);
  if (!m_status.ok()) return;  // the same Status on every rank (agreeing again would prefix it twice)
  m_cfg = std::move(resolved).value();
  m_opts = m_cfg.options;
  m_funneled = m_cfg.funneled;
  m_levels = m_cfg.levels;
  if (m_rank == 0 && m_opts.verbose >= 2) std::fprintf(stderr, "ckpt: options:\n%s", m_cfg.describe().c_str());
  MPI_Comm_dup(user, &m_commit_comm);
  MPI_Comm_dup(user, &m_flush_comm);
  if (m_levels) {
    MPI_Comm_dup(user, &m_drain_comm);
    MPI_Comm_dup(user, &m_global_commit_comm);
  }
  ThreadPolicy threads = m_cfg.threads;
  const bool series = m_cfg.series;
  m_store = series ? make_series_store(m_opts.dir) : make_directory_store(m_opts.dir);
  m_status = make_transports();
  if (m_status.ok()) m_status = check_transports(m_cfg, m_transports);
  if (m_status.ok() && m_levels) m_status = make_node_level();
  if (m_rank == 0)
    m_run_id = std::random_device{}() ^ (static_cast<std::uint64_t>(std::random_device{}()) << 32) ^
               static_cast<std::uint64_t>(Clock::now().time_since_epoch().count());
  long long next_segment = 0;  // layout series: rank 0 finds it, everybody gets it
  // The root's identity, whether made now (levels only) and this run's id: from rank 0.
  std::uint64_t root[3] = {0, 0, m_run_id};
  std::vector<std::uint8_t> timeline;  // levels: the root's timeline record, from rank 0
  if (m_status.ok() && m_rank == 0 && (m_persistent || m_levels)) {
    m_status = make_dirs(m_opts.dir).with_context("checkpoint directory");
    // One job per directory: without the lock a second job's start-up recovery deletes the first
    // one's checkpoint in flight, and its retention deletes the first one's checkpoints.
    if (m_status.ok() && m_persistent) m_status = m_lock.acquire(m_opts.dir, m_run_id);
    if (m_status.ok() && m_persistent) m_status = check_root_layout(&next_segment);
    // Before any checkpoint of this run: what a run that died left behind (docs/format.md).
    if (m_status.ok() && m_persistent)
      m_status = m_store->recover().with_context("recovering checkpoint directory " + m_opts.dir);
    // A series whose kept steps fill the disk could never commit again: refused now, saying why.
    if (m_status.ok() && m_persistent && series) m_status = check_series_space(*m_store, m_opts.keep);
    if (m_status.ok() && m_levels) {
      bool created = false;
      auto id = root_id(m_opts.dir, &created);
      m_status = id.status();
      if (id.ok()) root[0] = id.value(), root[1] = created ? 1 : 0;
    }
    if (m_status.ok()) m_timeline = std::make_unique<Timeline>(m_opts.dir, m_run_id, m_opts.fsync);
    if (m_status.ok() && m_levels) {
      auto text = m_timeline->bind();  // before any node directory is labelled with this run
      m_status = text.status();
      if (text.ok()) timeline.assign(text->begin(), text->end());
    }
  }
  m_status = agree(m_app_comm, m_status);
  // Every rank sees the directory rank 0 locked: proven by reading the lock's text back, not assumed
  // from equal paths (another node's /tmp, a per-node mount) or device numbers (NFS, Lustre clients).
  if (m_status.ok() && m_persistent) {
    std::vector<std::uint8_t> text(m_lock.text().begin(), m_lock.text().end());
    bcast_bytes(m_app_comm, text, 0);
    m_status = agree(m_app_comm, m_rank == 0 ? Status::OK() : same_directory(m_opts.dir, std::string(text.begin(), text.end())));
  }
  // The node directories: this root's, or refused on every rank (design.md, "Levels").
  if (m_status.ok() && m_levels) {
    MPI_Bcast(root, 3, MPI_UINT64_T, 0, m_app_comm);
    bcast_bytes(m_app_comm, timeline, 0);
    m_status = agree(m_app_comm, m_node_leader ? open_node_dir(root[0], root[1] != 0, root[2],
                                                               std::string(timeline.begin(), timeline.end()))
                                               : Status::OK());
  }
  if (!m_status.ok()) {
    m_lock.release();
    m_local_lock.release();
    return;
  }
  register_live(this);
  if (series) {
    MPI_Bcast(&next_segment, 1, MPI_LONG_LONG, 0, m_app_comm);
    m_series = std::make_unique<SeriesCursor>(m_opts.dir, static_cast<std::int64_t>(next_segment), m_opts.segment_bytes,
                                              m_opts.segment_steps, m_opts.alignment);
  }

  MPI_Bcast(&m_run_id, 1, MPI_UINT64_T, 0, m_app_comm);
  MPI_Barrier(m_app_comm);  // a common time origin for every rank's trace
  m_tracer = std::make_shared<Tracer>(!m_opts.trace.empty());
  CudaDeviceConfig device_cfg = m_cfg.device;
  device_cfg.say_fallbacks = m_rank == 0 || m_opts.verbose >= 1;
  auto device = make_runtime_device(device_cfg);
  // A GPU that is there but whose device failed to start is an error: the host device would memcpy
  // device pointers. Agreed, so that every rank stops here together.
  m_status = agree(m_app_comm, device.ok() ? Status::OK() : device.status());
  if (!m_status.ok()) return;
  m_device = std::move(device).value();
  m_pool = std::make_unique<StagingPool>(*m_device, static_cast<std::size_t>(initial_chunk_bytes(m_opts)));
  threads.warn = m_rank == 0 || m_opts.verbose >= 1;
  {
    // The auto pool's cap is a share of the node's memory: ranks on one node split it.
    MPI_Comm node = MPI_COMM_NULL;
    int on_node = 1;
    MPI_Comm_split_type(m_app_comm, MPI_COMM_TYPE_SHARED, m_rank, MPI_INFO_NULL, &node);
    if (node != MPI_COMM_NULL) {
      MPI_Comm_size(node, &on_node);
      // Collective on the node whatever this rank's thread_cpus: a per-rank option, so the ranks of a
      // node may differ in it, and only those with auto use the answer.
      std::vector<int> spare = spare_cpus(node);
      if (threads.where == ThreadPolicy::Cpus::spare) {  // thread_cpus: auto
        threads.cpus = std::move(spare);
        threads.where = threads.cpus.empty() ? ThreadPolicy::Cpus::inherit : ThreadPolicy::Cpus::list;
      }
      MPI_Comm_free(&node);
    }
    m_pool->set_ranks_on_node(on_node);
  }
  // A fixed pool is reserved now, not in the first checkpoint(); its failure is that checkpoint's.
  if (m_opts.pool_bytes) (void)reserve_for_stream(*m_pool, m_opts, 0);
  m_registry = std::make_unique<Registry>(*m_device, m_opts.groups, m_opts.alignment, [this](const Region& r) {
    return m_transports[r.group]->check_region(r);  // e.g. hdf5: the block must be contiguous in its dataset
  });
  // durable_every_ms: writers and the store's commit skip their fsyncs; the commit thread syncs.
  const bool sync_each = m_opts.fsync && m_opts.durable_every_ms == 0;
  CommitConfig commit_cfg;
  commit_cfg.fsync = m_opts.fsync;
  commit_cfg.threads = threads;
  commit_cfg.durable_every_ms = m_opts.durable_every_ms;
  commit_cfg.keep = m_opts.keep;
  commit_cfg.verbose = m_opts.verbose;
  commit_cfg.funneled = m_funneled;
  commit_cfg.timeline = m_timeline.get();
  if (m_levels) {
    // `dir` is the drained level: a second Committer, fed by the drain thread.
    CommitConfig global_cfg = commit_cfg;
    global_cfg.level = " (drained)";
    global_cfg.keep = m_opts.keep_global.value_or(m_opts.keep);  // retention in `dir`
    m_global_committer =
        std::make_unique<Committer>(m_global_commit_comm, global_cfg, m_transports, *m_store, m_run_id, m_tracer.get());
    m_global_commit_comm = MPI_COMM_NULL;  // the global Committer's now
    const OpenEnv drain_open{m_drain_comm, m_rank,   m_size,    &m_transports,
                             m_persistent, m_run_id, sync_each, m_opts.fsync};
    m_drainer = std::make_unique<Drainer>(
        DrainConfig{m_opts.drain_every, m_opts.keep, m_node_leader, io_piece_bytes(m_opts), threads}, drain_open,
        *m_local_store, *m_store, *m_global_committer);
    m_drain_comm = MPI_COMM_NULL;  // the Drainer's now
    // The pipeline commits into the node directories; the drain thread retains them.
    commit_cfg.keep = 0;
    commit_cfg.node_level = true;
    commit_cfg.node_leader = m_node_leader;
    commit_cfg.level = " locally";
    if (m_persistent) commit_cfg.drained = m_store.get();
    if (m_opts.redundancy == Redundancy::partner) {
      const int n = m_layout.nodes();
      commit_cfg.partner = true;
      commit_cfg.partner_to = m_layout.peer((m_layout.node + 1) % n);
      commit_cfg.partner_from = m_layout.peer((m_layout.node + n - 1) % n);
    } else if (m_opts.redundancy == Redundancy::xor_parity) {
      commit_cfg.xor_parity = true;
      commit_cfg.xor_group = make_xor_group(m_layout, m_opts.xor_group);
    }
  }
  auto& pipeline_transports = m_levels ? m_local_transports : m_transports;
  Store& pipeline_store = m_levels ? *m_local_store : *m_store;
  m_committer = std::make_unique<Committer>(m_commit_comm, commit_cfg, pipeline_transports, pipeline_store, m_run_id,
                                            m_tracer.get());
  m_commit_comm = MPI_COMM_NULL;  // the Committer's now
  if (m_drainer) {
    m_committer->on_committed([d = m_drainer.get()](std::shared_ptr<Job> j) { d->submit(std::move(j)); });
    m_committer->on_spilled(*m_store,
                            [d = m_drainer.get()](std::shared_ptr<Job> j) { return d->commit_spilled(std::move(j)); });
  }
  OpenEnv open{MPI_COMM_NULL, m_rank,    m_size,      &pipeline_transports, m_persistent || m_levels,
               m_run_id,      sync_each, m_opts.fsync};
  if (m_persistent) open.series = m_series.get();
  OpenEnv flush_open = open;
  flush_open.comm = m_flush_comm;
  flush_open.agreed_before = m_funneled;  // checkpoint() agreed on the application thread
  m_flush = std::make_unique<FlushPipeline>(FlushConfig{m_opts.stats, m_cfg.flush_delay_ms, threads}, flush_open,
                                            *m_device, *m_pool, *m_committer, m_tracer.get());
  m_flush_comm = MPI_COMM_NULL;  // the FlushPipeline's now
  if (m_opts.on_busy == Options::OnBusy::coalesce) {
    MPI_Comm launch_comm = MPI_COMM_NULL;
    MPI_Comm_dup(m_app_comm, &launch_comm);
    m_launcher = std::make_unique<Launcher>(launch_comm, m_opts.max_in_flight, threads, *m_device, *m_flush, *m_pool);
    m_committer->set_on_finished([l = m_launcher.get()] { l->finished(); });
  }
  OpenEnv app_open = open;
  app_open.comm = m_app_comm;
  app_open.agreed_before = m_funneled;
  m_capture = std::make_unique<Capture>(CaptureEnv{&m_opts, m_device.get(), m_pool.get(), &pipeline_transports,
                                                   app_open, &pipeline_store, m_tracer, m_flush.get(), m_launcher.get(),
                                                   m_committer->funnel(), m_funneled});
  m_restorer = std::make_unique<Restorer>(m_app_comm, m_opts, m_persistent, *m_store, m_local_store.get(), m_layout,
                                          *m_device, *m_pool, m_tracer.get());
}

Status RuntimeImpl::make_node_level() {
  m_layout = make_node_layout(m_app_comm, m_opts.ranks_per_node.value_or(0));
  m_node_leader = m_layout.leader();
  m_node_dir =
      m_opts.ranks_per_node ? m_opts.local_dir + "/node" + std::to_string(m_layout.node) : m_opts.local_dir;
  if (m_opts.redundancy != Redundancy::none && (m_layout.nodes() < 2 || !m_layout.uniform()))
    return Status(Code::invalid_argument, std::string("option 'redundancy': ") +
                                              (m_opts.redundancy == Redundancy::partner ? "partner" : "xor") +
                                              " needs at least two nodes with the same number of ranks (found " +
                                              std::to_string(m_layout.nodes()) + " nodes)");
  m_local_store = make_directory_store(m_node_dir);
  // The node level writes one posix file per rank and group (node-local disks hold no shared files).
  const TransportEnv env{m_app_comm, m_rank, m_size};
  // A full node disk sends that rank's file to `dir` instead (spill.hpp): a posix transport for that.
  for (std::size_t i = 0; i < m_transports.size(); ++i) {
    auto t = make_transport("posix", m_cfg.transport, env);
    if (!t.ok()) return t.status();
    auto spill = make_transport("posix", m_cfg.transport, env);
    if (!spill.ok()) return spill.status();
    m_local_transports.push_back(make_spill_transport(std::move(t).value(), std::move(spill).value(), *m_store));
  }
  return Status::OK();
}

Status RuntimeImpl::open_node_dir(std::uint64_t root, bool root_created, std::uint64_t run,
                                  const std::string& timeline) {
  // The node directory is not followed through a link planted at its name: checked before anything is
  // created in it, and again by bind_node_dir() with the lock held.
  struct stat st {};
  if (::lstat(m_node_dir.c_str(), &st) == 0 && S_ISLNK(st.st_mode))
    return bind_node_dir(m_node_dir, root, m_opts.dir, root_created);  // says so
  Status s = make_dirs(m_node_dir).with_context("node-local checkpoint directory");
  // Before the lock and recovery touch anything: another root's directory is left exactly as it is.
  // (The binding needs no lock: `.owner` is created O_EXCL, and a live job of this root holds `dir`'s.)
  if (s.ok()) s = bind_node_dir(m_node_dir, root, m_opts.dir, root_created);
  if (s.ok()) s = m_local_lock.acquire(m_node_dir);
  if (s.ok()) s = m_local_store->recover().with_context("recovering node-local directory " + m_node_dir);
  // Steps that later runs rolled back while this directory was not used (a run without local_dir, or
  // one that lacked this node) are abandoned before anything reads them; then it is this run's.
  auto label = s.ok() ? node_label(m_node_dir) : Result<std::optional<std::uint64_t>>(s);
  if (!label.ok()) return label.status();
  if (auto from = abandoned_from(timeline, label.value()))
    s = m_local_store->abandon_newer_than(*from - 1, m_opts.fsync);
  if (s.ok()) s = label_node_dir(m_node_dir, run, m_opts.fsync);
  return s;
}

void RuntimeImpl::wait_drains() {
  if (m_drainer) (void)m_drainer->wait_idle(false);
}

const char* RuntimeImpl::device_name() const { return m_device ? m_device->name() : "none"; }

const std::string& RuntimeImpl::restart_level() const {
  static const std::string none;
  return m_restorer ? m_restorer->level() : none;
}

Status RuntimeImpl::check_root_layout(long long* next_segment) const {
  const RootContents c = scan_root(m_opts.dir);
  *next_segment = c.next_segment;
  if (m_opts.layout == Options::Layout::series && c.directories)
    return Status(Code::failed_precondition,
                  "option 'layout' is series, but " + m_opts.dir +
                      " holds checkpoint directories (ckpt.<step>/) of a run with layout directory: a series needs "
                      "a root of its own (use another dir, or layout directory to continue that run)");
  if (m_opts.layout == Options::Layout::directory && c.series)
    return Status(Code::failed_precondition,
                  "option 'layout' is directory, but " + m_opts.dir +
                      " holds a series (series.<k>/ segments): set layout to series to continue it, or use another "
                      "dir");
  return Status::OK();
}

Status RuntimeImpl::make_transports() {
  const TransportEnv env{m_app_comm, m_rank, m_size};
  std::vector<std::string> names{m_opts.transport};
  for (auto& g : m_opts.groups) names.push_back(g.transport);
  for (std::size_t i = 0; i < names.size(); ++i) {
    auto t = make_transport(names[i], m_cfg.transport, env);
    if (!t.ok()) return i == 0 ? t.status() : t.status().with_context("group '" + m_opts.groups[i - 1].name + "'");
    m_persistent = m_persistent || t.value()->persistent();
    m_transports.push_back(std::move(t).value());
  }
  return Status::OK();
}

RuntimeImpl::~RuntimeImpl() {
  close();
  unregister_live(this);
}

Status RuntimeImpl::close() {
  if (m_closed) return Status::OK();
  std::lock_guard<std::recursive_mutex> closing(m_close_mu);
  if (m_closed) return Status::OK();
  int finalized = 0;
  MPI_Finalized(&finalized);
  Status mismatch = m_status.ok() && !finalized ? match_checkpoint_counts() : Status::OK();
  Status first = m_status.ok() ? wait_all() : Status::OK();  // before m_closed: wait_all() refuses after
  if (!mismatch.ok()) first = mismatch;                      // the cause of the failures wait_all() reports
  m_closed = true;
  if (m_launcher) m_launcher->close();  // before the flush threads: it pushes into them
  if (m_flush) m_flush->close();
  if (m_committer) m_committer->close();
  if (m_drainer) m_drainer->close();  // after the Committer, which feeds it
  if (m_global_committer) m_global_committer->close();
  if (m_capture) m_capture->clear();
  if (m_status.ok() && !finalized && m_tracer && m_tracer->enabled()) write_trace_and_summary();
  if (m_pool) m_pool->shutdown();
  m_pool.reset();
  free_comm(m_app_comm);
  free_comm(m_commit_comm);
  free_comm(m_flush_comm);
  free_comm(m_drain_comm);
  free_comm(m_global_commit_comm);
  m_lock.release();
  m_local_lock.release();
  return first;
}

Status RuntimeImpl::match_checkpoint_counts() {
  // Funneled, checkpoint() itself makes the agreement: a rank ahead is stuck there, not here.
  if (m_funneled || !m_capture) return Status::OK();
  long long v[2] = {m_checkpoints, -m_checkpoints}, r[2] = {0, 0};
  allreduce(v, r, 2, MPI_LONG_LONG, MPI_MAX, m_app_comm);
  const long long most = r[0], fewest = -r[1];
  if (most == fewest) return Status::OK();
  const Status refused(Code::failed_precondition,
                       "close(): the ranks called checkpoint() different numbers of times (" + std::to_string(fewest) +
                           " to " + std::to_string(most) +
                           "); every rank must make the same calls. The checkpoints past " + std::to_string(fewest) +
                           " were not written");
  // The missing checkpoints of this rank, refused: every rank's agreement on them fails with `refused`.
  for (long long k = m_checkpoints; k < most; ++k) (void)m_capture->checkpoint(0, nullptr, {}, refused);
  m_checkpoints = most;
  return refused;
}

Status RuntimeImpl::usable() const {
  if (m_closed_by_finalize)
    return Status(Code::failed_precondition,
                  "the Runtime was closed by MPI_Finalize (its checkpoints were drained first)");
  if (m_closed) return Status(Code::failed_precondition, "the Runtime is closed");
  return m_status;
}

Status RuntimeImpl::protect(const std::string& name, void* ptr, DType dtype, RegionKind kind, Shape global, Shape start,
                            Shape count) {
  CKPT_RETURN_IF_ERROR(usable());
  CKPT_RETURN_IF_ERROR(
      m_registry->protect(name, ptr, dtype, kind, std::move(global), std::move(start), std::move(count)));
  reserve_for_regions(Resize::protect);
  return Status::OK();
}
Status RuntimeImpl::update(const std::string& name, void* ptr, RegionKind kind, Shape global, Shape start,
                           Shape count) {
  CKPT_RETURN_IF_ERROR(usable());
  CKPT_RETURN_IF_ERROR(m_registry->update(name, ptr, kind, std::move(global), std::move(start), std::move(count)));
  reserve_for_regions(Resize::update);
  return Status::OK();
}

void RuntimeImpl::reserve_for_regions(Resize when) {
  // Outside checkpoint(): pinned allocations take seconds at 16 GiB and synchronise the device; the
  // auto chunk size follows the state here. (Inside checkpoint(), for regions with a Source, the pool
  // only grows by pieces: Resize::checkpoint.) A failure is reported by the next checkpoint(), which
  // tries again.
  (void)detail::reserve_for_regions(*m_pool, m_opts, m_registry->stream_bound(), m_transports.size(), when);
}
Status RuntimeImpl::protect_source(const std::string& name, DType dtype, RegionKind kind,
                                   std::shared_ptr<const Source> source) {
  CKPT_RETURN_IF_ERROR(usable());
  CKPT_RETURN_IF_ERROR(m_registry->protect(name, dtype, kind, std::move(source)));
  reserve_for_regions(Resize::protect);
  return Status::OK();
}
Status RuntimeImpl::protect_or_update(const std::string& name, void* ptr, DType dtype, RegionKind kind, Shape global,
                                      Shape start, Shape count) {
  CKPT_RETURN_IF_ERROR(usable());
  const std::size_t had = m_registry->regions().size();
  CKPT_RETURN_IF_ERROR(
      m_registry->protect_or_update(name, ptr, dtype, kind, std::move(global), std::move(start), std::move(count)));
  reserve_for_regions(m_registry->regions().size() > had ? Resize::protect : Resize::update);
  return Status::OK();
}
Status RuntimeImpl::set_optional(const std::string& name, bool optional) {
  CKPT_RETURN_IF_ERROR(usable());
  return m_registry->set_optional(name, optional);
}
const std::vector<std::string>& RuntimeImpl::skipped_optional() const {
  static const std::vector<std::string> none;
  return m_restorer ? m_restorer->skipped_optional() : none;
}
Status RuntimeImpl::unprotect(const std::string& name) {
  CKPT_RETURN_IF_ERROR(usable());
  return m_registry->unprotect(name);
}
Status RuntimeImpl::annotate(const std::string& name, const std::string& key, const std::string& value) {
  CKPT_RETURN_IF_ERROR(usable());
  return m_registry->annotate(name, key, value);
}

Ticket RuntimeImpl::checkpoint(std::int64_t step, void* stream) {
  if (Status s = usable(); !s.ok()) return failed_ticket(step, s);
  // Regions registered with a Source say where they are now (agreed with the arguments: a rank whose
  // locate() failed fails every rank's checkpoint, naming the region).
  Status located;
  const auto& regions = m_registry->regions();
  if (std::any_of(regions.begin(), regions.end(), [](const Region& r) { return r.source != nullptr; })) {
    located = m_registry->locate_sources();
    if (located.ok()) reserve_for_regions(Resize::checkpoint);
  }
  ++m_checkpoints;
  return m_capture->checkpoint(step, stream, m_registry->regions(), located);
}
Status RuntimeImpl::wait_all() {
  if (m_closed) return Status(Code::failed_precondition, "the Runtime is closed");
  Status s = m_capture ? m_capture->wait_all() : Status::OK();
  if (m_drainer) {
    Status d = m_drainer->wait_idle(true);
    if (s.ok()) s = d;
  }
  return s;
}
Status RuntimeImpl::poll() {
  CKPT_RETURN_IF_ERROR(usable());
  if (auto funnel = m_committer->funnel()) funnel->commit_ready(m_app_comm);
  return Status::OK();
}
std::optional<std::int64_t> RuntimeImpl::latest() {
  if (!usable().ok()) return std::nullopt;
  (void)poll();
  wait_drains();
  return m_restorer->latest();
}
Result<std::vector<std::int64_t>> RuntimeImpl::steps() {
  CKPT_RETURN_IF_ERROR(usable());
  (void)poll();
  wait_drains();
  return m_restorer->steps();
}
Status RuntimeImpl::agree_arguments(const char* call, std::vector<NamedValue> args) {
  // A collective call whose ranks disagree on its argument would mismatch its messages inside MPI
  // (restart(2) on one rank, restart(3) on another: MPI_ERR_TRUNCATE): the same error everywhere.
  return agree_equal(m_app_comm, args,
                     std::string(call) + ": the ranks called it with different arguments (every rank must make the "
                                         "same collective calls)");
}

Status RuntimeImpl::restart(std::int64_t step, void* stream) {
  CKPT_RETURN_IF_ERROR(usable());
  CKPT_RETURN_IF_ERROR(agree_arguments("restart(step)", {{"the step", std::to_string(step)}}));
  if (m_drainer) {
    (void)m_capture->wait_all();  // then the drains those commits started
    wait_drains();
  }
  return m_restorer->restart(step, stream, *m_registry, *m_capture);
}
Result<CheckpointReader> RuntimeImpl::inspect(std::int64_t step) {
  CKPT_RETURN_IF_ERROR(usable());
  CKPT_RETURN_IF_ERROR(agree_arguments("inspect(step)", {{"the step", std::to_string(step)}}));
  if (m_drainer) {
    (void)m_capture->wait_all();
    wait_drains();
  }
  auto idx = m_restorer->inspect(step, *m_capture);
  if (!idx.ok()) return idx.status();
  return make_checkpoint_reader(idx->dir, std::move(idx->index));
}
Result<JoinedRows> RuntimeImpl::joined_rows(std::int64_t step, const std::string& name) {
  CKPT_RETURN_IF_ERROR(usable());
  CKPT_RETURN_IF_ERROR(
      agree_arguments("joined_rows(step, name)", {{"the step", std::to_string(step)}, {"the name", name}}));
  return m_restorer->joined_rows(step, name, *m_capture);
}
Result<std::int64_t> RuntimeImpl::restart_newest(void* stream) {
  CKPT_RETURN_IF_ERROR(usable());
  if (m_drainer) {
    (void)m_capture->wait_all();
    wait_drains();
  }
  return m_restorer->restart_newest(stream, *m_registry, *m_capture);
}

}  // namespace detail
}  // namespace ckpt
