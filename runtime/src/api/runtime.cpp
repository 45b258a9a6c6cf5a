// Runtime facade, construction, the region registry and the capture half of the pipeline (app thread).
#include <sys/stat.h>

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <cstring>

#include "base/hash.hpp"
#include "base/mpi.hpp"
#include "base/posix_io.hpp"
#include "ckpt/ckpt.hpp"
#include "runtime/src/api/resolve.hpp"
#include "runtime/src/api/runtime_impl.hpp"

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
Status Runtime::protect(const std::string& name, DType dtype, const Scattered& s) {
  CKPT_RETURN_IF_ERROR(check_signs("protect", name, s.row, s.memory.start, s.memory.alloc));
  return m_impl->set_scattered(name, dtype, s, detail::Upsert::protect);
}
Status Runtime::update(const std::string& name, const Scattered& s) {
  CKPT_RETURN_IF_ERROR(check_signs("update", name, s.row, s.memory.start, s.memory.alloc));
  return m_impl->set_scattered(name, DType::u8, s, detail::Upsert::update);
}
Status Runtime::protect_or_update(const std::string& name, DType dtype, const Scattered& s) {
  CKPT_RETURN_IF_ERROR(check_signs("protect_or_update", name, s.row, s.memory.start, s.memory.alloc));
  return m_impl->set_scattered(name, dtype, s, detail::Upsert::either);
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
Status Runtime::set_restart_rows(const std::string& name, std::vector<std::uint64_t> rows) {
  return m_impl->set_restart_rows(
      name, std::make_shared<const detail::RestartRows>(detail::RestartRows{std::string(), std::move(rows)}));
}
Status Runtime::set_restart_keys(const std::string& name, const std::string& key, std::vector<std::int64_t> keys) {
  if (key.empty()) return Status(Code::invalid_argument, "set_restart_keys: region '" + name + "': no key variable");
  return m_impl->set_restart_rows(name, std::make_shared<const detail::RestartRows>(detail::RestartRows{
                                            key, std::vector<std::uint64_t>(keys.begin(), keys.end())}));
}
Status Runtime::clear_restart_rows(const std::string& name) { return m_impl->set_restart_rows(name, nullptr); }
Status Runtime::set_memory_selection(const std::string& name, const MemorySelection& selection) {
  return m_impl->set_memory_selection(name, selection);
}
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
Result<std::optional<std::int64_t>> Runtime::latest() { return m_impl->latest(); }
Result<std::vector<std::int64_t>> Runtime::steps() { return m_impl->steps(); }
Status Runtime::restart(std::int64_t step) { return m_impl->restart(step, nullptr); }
Status Runtime::restart(std::int64_t step, void* stream) { return m_impl->restart(step, stream); }
Result<CheckpointReader> Runtime::inspect(std::int64_t step) { return m_impl->inspect(step); }
const std::string& Runtime::restart_level() const { return m_impl->restart_level(); }
std::uint64_t Runtime::restart_index_bytes() const { return m_impl->restart_index_bytes(); }
Result<std::int64_t> Runtime::restart() { return m_impl->restart_newest(nullptr); }
Result<std::int64_t> Runtime::restart(Newest, void* stream) { return m_impl->restart_newest(stream); }
Status Runtime::close() { return m_impl->close(); }

// ---- RuntimeImpl: construction -------------------------------------------------------------------

namespace detail {

/// background_cpu auto where ckpt's threads share the ranks' cores: the share of one core they may use
/// (docs/performance.md, "A cache-resident compute: perf/everystep").
constexpr double kAutoBackgroundCpu = 0.1;

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
  // Each step is collective and ends in a Status every rank agrees on: all stop at the same step.
  m_status = join(comm);
  if (m_status.ok()) m_status = open_root(make_io());
  if (m_status.ok()) m_status = start_device();
  if (m_status.ok()) make_pipeline();
}

Status RuntimeImpl::join(CommRef comm) {
  auto checked = comm_from_ref(comm, "ckpt::Runtime");
  if (!checked.ok()) return checked.status();
  MPI_Comm user = checked.value();
  int inter = 0;
  MPI_Comm_test_inter(user, &inter);
  if (inter) return Status(Code::invalid_argument, "the communicator is an intercommunicator; ckpt needs an intracommunicator");
  // Collective from here on: every rank takes the same path, errors are agreed.
  MPI_Comm_dup(user, &m_app_comm);
  MPI_Comm_rank(m_app_comm, &m_rank);
  MPI_Comm_size(m_app_comm, &m_size);
  if (m_rank == 0)  // e.g. an unknown CKPT_* variable: said once, never fatal
    for (const auto& w : m_opts.warnings) std::fprintf(stderr, "ckpt: warning: %s\n", w.c_str());
  int provided = MPI_THREAD_SINGLE;
  MPI_Query_thread(&provided);
  // Every rule between options, then the ranks' agreement on the job-wide ones (resolve.hpp): before
  // anything whose count of collective calls depends on an option.
  auto resolved = resolve(m_opts, ResolveEnv{provided, physical_memory()});
  Status s = agree(m_app_comm, resolved.status());
  if (s.ok()) s = agree_options(m_app_comm, resolved->options);
  if (!s.ok()) return s;  // the same Status on every rank (agreeing again would prefix it twice)
  m_cfg = std::move(resolved).value();
  m_opts = m_cfg.options;
  m_funneled = m_cfg.funneled;
  if (m_rank == 0 && m_opts.verbose >= 2) std::fprintf(stderr, "ckpt: options:\n%s", m_cfg.describe().c_str());
  MPI_Comm_dup(m_app_comm, &m_commit_comm);
  MPI_Comm_dup(m_app_comm, &m_flush_comm);
  return s;
}

Status RuntimeImpl::make_io() {
  m_store = m_cfg.series ? make_series_store(m_opts.dir) : make_directory_store(m_opts.dir);
  Status s = make_transports();
  if (s.ok()) s = check_transports(m_cfg, m_transports);
  if (s.ok() && m_cfg.levels) {
    auto node = NodeLevel::make(m_app_comm, m_cfg, m_transports.size(), *m_store);
    s = node.status();
    if (node.ok()) m_node = std::move(node).value();
  }
  return s;
}

Status RuntimeImpl::prepare_root(std::uint64_t root[2], std::vector<std::uint8_t>* timeline, long long* next_segment) {
  Status s = make_dirs(m_opts.dir).with_context("checkpoint directory");
  // One job per directory: without the lock a second job's start-up recovery deletes the first
  // one's checkpoint in flight, and its retention deletes the first one's checkpoints.
  if (s.ok() && m_persistent) s = m_lock.acquire(m_opts.dir, m_run_id);
  if (s.ok() && m_persistent) s = check_root_layout(next_segment);
  // Before any checkpoint of this run: what a run that died left behind (docs/format.md).
  if (s.ok() && m_persistent) s = m_store->recover().with_context("recovering checkpoint directory " + m_opts.dir);
  // A series whose kept steps fill the disk could never commit again: refused now, saying why.
  if (s.ok() && m_persistent && m_cfg.series) s = check_series_space(*m_store, m_opts.keep);
  if (s.ok() && m_node) {
    bool created = false;
    auto id = root_id(m_opts.dir, &created);
    s = id.status();
    if (id.ok()) root[0] = id.value(), root[1] = created ? 1 : 0;
  }
  if (s.ok()) m_timeline = std::make_unique<Timeline>(m_opts.dir, m_run_id, m_opts.fsync);
  if (s.ok() && m_node) {
    auto text = m_timeline->bind();  // before any node directory is labelled with this run
    s = text.status();
    if (text.ok()) timeline->assign(text->begin(), text->end());
  }
  return s;
}

Status RuntimeImpl::open_root(Status made) {
  if (m_rank == 0) m_run_id = random64();
  long long next_segment = 0;      // layout series: rank 0 finds it, everybody gets it
  std::uint64_t root[2] = {0, 0};  // with levels: the root's identity and whether this run made it
  std::vector<std::uint8_t> timeline;  // with levels: the root's timeline record
  Status s = made;
  if (s.ok() && m_rank == 0 && (m_persistent || m_node)) s = prepare_root(root, &timeline, &next_segment);
  s = agree(m_app_comm, s);
  // Every rank sees the directory rank 0 locked: proven by reading the lock's text back, not assumed
  // from equal paths (another node's /tmp, a per-node mount) or device numbers (NFS, Lustre clients).
  if (s.ok() && m_persistent) {
    std::vector<std::uint8_t> text(m_lock.text().begin(), m_lock.text().end());
    bcast_bytes(m_app_comm, text, 0);
    s = agree(m_app_comm, m_rank == 0 ? Status::OK() : same_directory(m_opts.dir, std::string(text.begin(), text.end())));
  }
  MPI_Bcast(&m_run_id, 1, MPI_UINT64_T, 0, m_app_comm);
  // The node directories: this root's, or refused on every rank (design.md, "Levels").
  if (s.ok() && m_node) {
    MPI_Bcast(root, 2, MPI_UINT64_T, 0, m_app_comm);
    bcast_bytes(m_app_comm, timeline, 0);
    s = agree(m_app_comm, m_node->leader() ? m_node->open(root[0], root[1] != 0, m_run_id,
                                                          std::string(timeline.begin(), timeline.end()))
                                           : Status::OK());
  }
  if (!s.ok()) {
    m_lock.release();
    if (m_node) m_node->release_lock();
    return s;
  }
  register_live(this);
  if (m_cfg.series) {
    MPI_Bcast(&next_segment, 1, MPI_LONG_LONG, 0, m_app_comm);
    m_series = std::make_unique<SeriesCursor>(m_opts.dir, static_cast<std::int64_t>(next_segment), m_opts.segment_bytes,
                                              m_opts.segment_steps, m_opts.alignment);
  }
  MPI_Barrier(m_app_comm);  // a common time origin for every rank's trace
  m_tracer = std::make_shared<Tracer>(!m_opts.trace.empty());
  return s;
}

Status RuntimeImpl::start_device() {
  DeviceConfig device_cfg = m_cfg.device;
  device_cfg.say_fallbacks = m_rank == 0 || m_opts.verbose >= 1;
  auto device = make_runtime_device(device_cfg);
  // A GPU that is there but whose device failed to start is an error: the host device would memcpy
  // device pointers. Agreed, so that every rank stops here together.
  Status s = agree(m_app_comm, device.ok() ? Status::OK() : device.status());
  if (!s.ok()) return s;
  m_device = std::move(device).value();
  m_pool = std::make_unique<StagingPool>(*m_device, static_cast<std::size_t>(initial_chunk_bytes(m_opts)));
  ThreadPolicy& threads = m_cfg.threads;
  threads.warn = m_rank == 0 || m_opts.verbose >= 1;
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
  // background_cpu auto: a budget where ckpt's threads share the ranks' cores (no spare CPU found, inherit,
  // all), none where they run on CPUs of their own (found spare, or a list the user gave).
  threads.cpu_budget = m_opts.background_cpu                       ? *m_opts.background_cpu
                       : threads.where == ThreadPolicy::Cpus::list ? 0.0
                                                                   : kAutoBackgroundCpu;
  if (m_opts.on_busy != Options::OnBusy::coalesce) threads.cpu_budget = 0;  // every checkpoint is written
  if (threads.cpu_budget > 0) threads.meter = std::make_shared<CpuMeter>();
  m_pool->set_ranks_on_node(on_node);
  // A fixed pool is reserved now, not in the first checkpoint(); its failure is that checkpoint's.
  if (m_opts.pool_bytes) (void)reserve_for_stream(*m_pool, m_opts, 0);
  return s;
}

void RuntimeImpl::make_pipeline() {
  // Incremental: blocks of a piece or more start at a piece boundary (plan_stream), which the bound allows for.
  const std::uint64_t alignment =
      m_opts.incremental ? std::max(m_opts.alignment, m_opts.incremental_piece_bytes) : m_opts.alignment;
  m_registry = std::make_unique<Registry>(*m_device, m_opts.groups, alignment, [this](const Region& r) {
    return m_transports[r.group]->check_region(r);  // e.g. hdf5: the block must be contiguous in its dataset
  });
  // durable_every_ms: writers and the store's commit skip their fsyncs; the commit thread syncs.
  const bool sync_each = m_opts.fsync && m_opts.durable_every_ms == 0;
  CommitConfig commit_cfg;
  commit_cfg.fsync = m_opts.fsync;
  commit_cfg.threads = m_cfg.threads;
  commit_cfg.durable_every_ms = m_opts.durable_every_ms;
  commit_cfg.keep = m_opts.keep;
  commit_cfg.index_format = m_opts.index_format;
  commit_cfg.verbose = m_opts.verbose;
  commit_cfg.funneled = m_funneled;
  commit_cfg.timeline = m_timeline.get();
  if (m_opts.incremental) {
    m_chain = std::make_unique<Chain>(m_opts.incremental_full_every);
    commit_cfg.chain = m_chain.get();
  }
  if (m_node)
    commit_cfg = m_node->attach(
        m_app_comm, commit_cfg,
        GlobalLevel{&m_transports, m_store.get(), m_persistent, sync_each, m_run_id, m_tracer.get()});
  auto& transports = m_node ? m_node->transports() : m_transports;
  Store& store = m_node ? m_node->store() : *m_store;
  m_committer = std::make_unique<Committer>(m_commit_comm, commit_cfg, transports, store, m_run_id, m_tracer.get());
  m_commit_comm = MPI_COMM_NULL;  // the Committer's now
  OpenEnv open{MPI_COMM_NULL, m_rank,    m_size,      &transports, m_persistent || m_node != nullptr,
               m_run_id,      sync_each, m_opts.fsync};
  if (m_persistent) open.series = m_series.get();
  OpenEnv flush_open = open;
  flush_open.comm = m_flush_comm;
  flush_open.agreed_before = m_funneled;  // checkpoint() agreed on the application thread
  m_flush = std::make_unique<FlushPipeline>(FlushConfig{m_opts.stats, m_cfg.flush_delay_ms, m_cfg.threads}, flush_open,
                                            *m_device, *m_pool, *m_committer, m_tracer.get(), m_chain.get());
  m_flush_comm = MPI_COMM_NULL;  // the FlushPipeline's now
  if (m_opts.on_busy == Options::OnBusy::coalesce) {
    MPI_Comm launch_comm = MPI_COMM_NULL;
    MPI_Comm_dup(m_app_comm, &launch_comm);
    m_launcher =
        std::make_unique<Launcher>(launch_comm, m_opts.max_in_flight, m_cfg.threads, *m_device, *m_flush, *m_pool);
    m_committer->set_on_finished([l = m_launcher.get()] { l->finished(); });
  }
  OpenEnv app_open = open;
  app_open.comm = m_app_comm;
  app_open.agreed_before = m_funneled;
  m_capture = std::make_unique<Capture>(CaptureEnv{&m_opts, m_device.get(), m_pool.get(), &transports, app_open, &store,
                                                   m_tracer, m_flush.get(), m_launcher.get(), m_committer->funnel(),
                                                   m_funneled});
  static const NodeLayout kOneLevel;  // without local_dir: no node directories to read
  m_restorer = std::make_unique<Restorer>(m_app_comm, m_opts, m_persistent, *m_store, m_node ? &m_node->store() : nullptr,
                                          m_node ? m_node->layout() : kOneLevel, *m_device, *m_pool, m_tracer.get());
}

void RuntimeImpl::wait_drains() {
  if (m_node) (void)m_node->wait_idle(false);
}

const char* RuntimeImpl::device_name() const { return m_device ? m_device->name() : "none"; }

std::uint64_t RuntimeImpl::restart_index_bytes() const { return m_restorer ? m_restorer->index_bytes() : 0; }

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
  if (m_node) m_node->close();  // after the Committer, which feeds its drain
  if (m_capture) m_capture->clear();
  if (m_status.ok() && !finalized && m_tracer && m_tracer->enabled()) write_trace_and_summary();
  if (m_pool) m_pool->shutdown();
  m_pool.reset();
  free_comm(m_app_comm);
  free_comm(m_commit_comm);
  free_comm(m_flush_comm);
  m_lock.release();
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
Status RuntimeImpl::set_scattered(const std::string& name, DType dtype, const Scattered& s, Upsert mode) {
  CKPT_RETURN_IF_ERROR(usable());
  std::vector<PieceRef> pieces;
  pieces.reserve(s.pieces.size());
  for (const Piece& p : s.pieces) pieces.push_back(PieceRef{p.ptr, p.rows});
  const std::size_t had = m_registry->regions().size();
  CKPT_RETURN_IF_ERROR(
      m_registry->set_scattered(name, dtype, std::move(pieces), s.row, s.memory.start, s.memory.alloc, mode));
  reserve_for_regions(m_registry->regions().size() > had ? Resize::protect : Resize::update);
  return Status::OK();
}
Status RuntimeImpl::set_optional(const std::string& name, bool optional) {
  CKPT_RETURN_IF_ERROR(usable());
  return m_registry->set_optional(name, optional);
}
Status RuntimeImpl::set_memory_selection(const std::string& name, const MemorySelection& selection) {
  CKPT_RETURN_IF_ERROR(usable());
  if (selection.start.has_negative() || selection.alloc.has_negative())
    return Status(Code::invalid_argument, "set_memory_selection: region '" + name + "': a negative extent");
  return m_registry->set_memory_selection(name, selection.start, selection.alloc);
}
Status RuntimeImpl::set_restart_rows(const std::string& name, std::shared_ptr<const RestartRows> rows) {
  CKPT_RETURN_IF_ERROR(usable());
  return m_registry->set_restart_rows(name, std::move(rows));
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
  if (m_node) {
    Status d = m_node->wait_idle(true);
    if (s.ok()) s = d;
  }
  return s;
}
Status RuntimeImpl::poll() {
  CKPT_RETURN_IF_ERROR(usable());
  if (auto funnel = m_committer->funnel()) funnel->commit_ready(m_app_comm);
  return Status::OK();
}
Result<std::optional<std::int64_t>> RuntimeImpl::latest() {
  CKPT_RETURN_IF_ERROR(usable());
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
  if (m_node) {
    (void)m_capture->wait_all();  // then the drains those commits started
    wait_drains();
  }
  Status s = m_restorer->restart(step, stream, *m_registry, *m_capture);
  if (m_chain) m_chain->reset();  // a restart starts a new chain (docs/format.md): the next checkpoint is full
  return s;
}
Result<CheckpointReader> RuntimeImpl::inspect(std::int64_t step) {
  CKPT_RETURN_IF_ERROR(usable());
  CKPT_RETURN_IF_ERROR(agree_arguments("inspect(step)", {{"the step", std::to_string(step)}}));
  if (m_node) {
    (void)m_capture->wait_all();
    wait_drains();
  }
  auto idx = m_restorer->inspect(step, *m_capture);
  if (!idx.ok()) return idx.status();
  return make_checkpoint_reader(m_app_comm, idx->dir, std::move(idx.value().index));
}
Result<JoinedRows> RuntimeImpl::joined_rows(std::int64_t step, const std::string& name) {
  CKPT_RETURN_IF_ERROR(usable());
  CKPT_RETURN_IF_ERROR(
      agree_arguments("joined_rows(step, name)", {{"the step", std::to_string(step)}, {"the name", name}}));
  return m_restorer->joined_rows(step, name, *m_capture);
}
Result<std::int64_t> RuntimeImpl::restart_newest(void* stream) {
  CKPT_RETURN_IF_ERROR(usable());
  if (m_node) {
    (void)m_capture->wait_all();
    wait_drains();
  }
  auto s = m_restorer->restart_newest(stream, *m_registry, *m_capture);
  if (m_chain) m_chain->reset();
  return s;
}

}  // namespace detail
}  // namespace ckpt
