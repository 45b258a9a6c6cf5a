// Runtime facade, construction, the region registry and the capture half of the pipeline (app thread).
#include <dirent.h>
#include <fnmatch.h>
#include <unistd.h>

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <random>

#include "base/posix_io.hpp"
#include "ckpt/ckpt.hpp"
#include "runtime/src/runtime_impl.hpp"

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

Status Runtime::protect(const std::string& name, void* ptr, DType dtype, Shape dims) {
  const auto kind = dims.empty() ? detail::RegionKind::scalar : detail::RegionKind::local;
  return m_impl->protect(name, ptr, dtype, kind, {}, {}, std::move(dims));
}
Status Runtime::protect(const std::string& name, void* ptr, DType dtype, const Block& b) {
  return m_impl->protect(name, ptr, dtype, detail::RegionKind::global, b.global, b.start, b.count);
}
Status Runtime::update(const std::string& name, void* ptr, Shape dims) {
  return m_impl->update(name, ptr, false, {}, {}, std::move(dims));
}
Status Runtime::update(const std::string& name, void* ptr, const Block& b) {
  return m_impl->update(name, ptr, true, b.global, b.start, b.count);
}
Status Runtime::unprotect(const std::string& name) { return m_impl->unprotect(name); }
Status Runtime::annotate(const std::string& name, const std::string& key, const std::string& value) {
  return m_impl->annotate(name, key, value);
}
Ticket Runtime::checkpoint(std::int64_t step, void* stream) { return m_impl->checkpoint(step, stream); }
Status Runtime::wait_all() { return m_impl->wait_all(); }
std::optional<std::int64_t> Runtime::latest() { return m_impl->latest(); }
Status Runtime::restart(std::int64_t step) { return m_impl->restart(step); }
Result<std::int64_t> Runtime::restart() { return m_impl->restart_newest(); }
Status Runtime::close() { return m_impl->close(); }

// ---- RuntimeImpl: construction -------------------------------------------------------------------

namespace detail {

namespace {
const char* thread_level_name(int level) {
  switch (level) {
    case MPI_THREAD_SINGLE: return "MPI_THREAD_SINGLE";
    case MPI_THREAD_FUNNELED: return "MPI_THREAD_FUNNELED";
    case MPI_THREAD_SERIALIZED: return "MPI_THREAD_SERIALIZED";
    case MPI_THREAD_MULTIPLE: return "MPI_THREAD_MULTIPLE";
  }
  return "unknown";
}

}  // namespace

RuntimeImpl::RuntimeImpl(CommRef comm, const Options& options) : m_opts(options) {
  m_status = m_opts.error;
  if (m_status.ok()) m_status = m_opts.validate();
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (!initialized || finalized) {
    m_status = Status(Code::failed_precondition, "MPI is not initialised (call MPI_Init_thread before ckpt::Runtime)");
    return;
  }
  if (comm.size() != sizeof(MPI_Comm)) {
    m_status = Status(Code::invalid_argument, "the communicator handle is not an MPI_Comm of this MPI library");
    return;
  }
  MPI_Comm user;
  std::memcpy(&user, comm.bytes(), sizeof(MPI_Comm));
  // Collective from here on: every rank takes the same path, errors are agreed below.
  MPI_Comm_dup(user, &m_app_comm);
  MPI_Comm_dup(user, &m_commit_comm);
  MPI_Comm_rank(m_app_comm, &m_rank);
  MPI_Comm_size(m_app_comm, &m_size);

  int provided = MPI_THREAD_SINGLE;
  MPI_Query_thread(&provided);
  if (m_status.ok() && provided < MPI_THREAD_MULTIPLE) {
    m_status = Status(Code::unavailable,
                      std::string("ckpt runs its commit on a background thread and needs MPI_THREAD_MULTIPLE, but "
                                  "MPI was initialised with ") +
                          thread_level_name(provided) +
                          "; call MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided)");
  }
  m_store = make_directory_store(m_opts.dir);
  // Transports are made on every rank, in the same order (they may split the communicator).
  m_status = agree(m_app_comm, m_status);
  if (m_status.ok()) {
    TransportEnv env{m_app_comm, m_rank, m_size};
    std::vector<std::string> names{m_opts.transport};
    for (auto& g : m_opts.groups) names.push_back(g.transport);
    for (std::size_t i = 0; i < names.size() && m_status.ok(); ++i) {
      auto t = make_transport(names[i], m_opts, env);
      if (!t.ok()) {
        m_status = i == 0 ? t.status() : t.status().with_context("group '" + m_opts.groups[i - 1].name + "'");
        break;
      }
      m_persistent = m_persistent || t.value()->persistent();
      m_transports.push_back(std::move(t).value());
    }
  }
  if (m_status.ok() && m_rank == 0 && m_persistent) {
    m_status = make_dirs(m_opts.dir).with_context("checkpoint directory");
    // Before any checkpoint of this run: what a run that died left behind (docs/format.md).
    if (m_status.ok()) m_status = m_store->recover().with_context("recovering checkpoint directory " + m_opts.dir);
  }
  m_status = agree(m_app_comm, m_status);
  if (!m_status.ok()) return;

  std::uint64_t id = 0;
  if (m_rank == 0)
    id = std::random_device{}() ^ (static_cast<std::uint64_t>(std::random_device{}()) << 32) ^
         static_cast<std::uint64_t>(Clock::now().time_since_epoch().count());
  MPI_Bcast(&id, 1, MPI_UINT64_T, 0, m_app_comm);
  m_run_id = id;

  MPI_Barrier(m_app_comm);  // a common time origin for every rank's trace
  m_tracer = std::make_shared<Tracer>(!m_opts.trace.empty());
  CudaDeviceConfig dev;
  dev.double_buffer = m_opts.gpu_double_buffer == "on"     ? CudaDeviceConfig::DoubleBuffer::on
                      : m_opts.gpu_double_buffer == "auto" ? CudaDeviceConfig::DoubleBuffer::automatic
                                                           : CudaDeviceConfig::DoubleBuffer::off;
  dev.spare_bytes = static_cast<std::size_t>(m_opts.gpu_spare_bytes);
  m_device = make_default_device(dev);
  m_pool = std::make_unique<StagingPool>(*m_device, static_cast<std::size_t>(m_opts.chunk_bytes));
  m_digest_thread = std::thread([this] {
    nvtx_name_thread("ckpt flush: digest");
    digest_loop();
  });
  m_write_thread = std::thread([this] {
    nvtx_name_thread("ckpt flush: write");
    write_loop();
  });
  m_commit_thread = std::thread([this] {
    nvtx_name_thread("ckpt commit");
    commit_loop();
  });
}

RuntimeImpl::~RuntimeImpl() { close(); }

Status RuntimeImpl::close() {
  if (m_closed) return Status::OK();
  int finalized = 0;
  MPI_Finalized(&finalized);
  Status first = m_status.ok() ? wait_all() : Status::OK();  // before m_closed: wait_all() refuses after
  m_closed = true;
  m_flush_q.close();
  if (m_digest_thread.joinable()) m_digest_thread.join();
  m_write_q.close();
  if (m_write_thread.joinable()) m_write_thread.join();
  m_commit_q.close();
  if (m_commit_thread.joinable()) m_commit_thread.join();
  m_in_flight.clear();
  if (m_status.ok() && !finalized && m_tracer && m_tracer->enabled()) write_trace_and_summary();
  if (m_pool) m_pool->shutdown();
  m_pool.reset();
  if (!finalized) {
    if (m_app_comm != MPI_COMM_NULL) MPI_Comm_free(&m_app_comm);
    if (m_commit_comm != MPI_COMM_NULL) MPI_Comm_free(&m_commit_comm);
  }
  return first;
}

Status RuntimeImpl::usable() const {
  if (m_closed) return Status(Code::failed_precondition, "the Runtime is closed");
  return m_status;
}

// ---- registry ------------------------------------------------------------------------------------

Region* RuntimeImpl::find(const std::string& name) {
  auto it = m_region_at.find(name);
  return it == m_region_at.end() ? nullptr : &m_regions[it->second];
}

namespace {
Status check_extents(const std::string& name, RegionKind kind, const Shape& global, const Shape& start,
                     const Shape& count) {
  auto bad = [&](const std::string& why) { return Status(Code::invalid_argument, "region '" + name + "': " + why); };
  if (count.size() > kMaxDims) return bad("more than 16 dimensions");
  if (kind == RegionKind::global) {
    if (global.empty()) return bad("a Block needs a global shape with at least one dimension");
    if (global.size() != start.size() || global.size() != count.size())
      return bad("Block global, start and count must have the same number of dimensions");
    std::uint64_t total = 1;
    for (std::size_t d = 0; d < global.size(); ++d) {
      if (global[d] == 0) return bad("zero-size global dimension " + std::to_string(d));
      if (start[d] > global[d] || count[d] > global[d] - start[d])
        return bad("Block box exceeds the global shape in dimension " + std::to_string(d));
      if (__builtin_mul_overflow(total, global[d], &total)) return bad("global shape overflows");
    }
    return Status::OK();
  }
  std::uint64_t total = 1;
  for (auto c : count) {
    if (c == 0)
      return bad(
          "zero-size dimension (a zero-size region cannot be restored; use a Block for "
          "arrays whose local part may be empty)");
    if (__builtin_mul_overflow(total, c, &total)) return bad("shape overflows");
  }
  return Status::OK();
}
}  // namespace

Status RuntimeImpl::protect(const std::string& name, void* ptr, DType dtype, RegionKind kind, Shape global, Shape start,
                            Shape count) {
  CKPT_RETURN_IF_ERROR(usable());
  CKPT_RETURN_IF_ERROR(check_name(name));
  if (find(name) != nullptr) return Status(Code::invalid_argument, "region '" + name + "' is already protected");
  if (dtype_size(dtype) == 0) return Status(Code::invalid_argument, "region '" + name + "': unknown dtype");
  CKPT_RETURN_IF_ERROR(check_extents(name, kind, global, start, count));
  Region r;
  r.name = name;
  r.ptr = ptr;
  r.dtype = dtype;
  r.kind = kind;
  r.global = std::move(global);
  r.start = std::move(start);
  r.count = std::move(count);
  if (r.bytes() > 0 && ptr == nullptr) return Status(Code::invalid_argument, "region '" + name + "': null pointer");
  r.mem = ptr != nullptr ? m_device->classify(ptr) : MemoryKind::host;
  for (std::size_t g = 0; g < m_opts.groups.size() && r.group == 0; ++g)
    for (auto& pattern : m_opts.groups[g].match)
      if (::fnmatch(pattern.c_str(), name.c_str(), 0) == 0) {
        r.group = static_cast<std::uint32_t>(g + 1);
        break;
      }
  m_region_at.emplace(r.name, m_regions.size());
  m_regions.push_back(std::move(r));
  return Status::OK();
}

Status RuntimeImpl::update(const std::string& name, void* ptr, bool is_block, Shape global, Shape start, Shape count) {
  CKPT_RETURN_IF_ERROR(usable());
  Region* r = find(name);
  if (r == nullptr) return Status(Code::not_found, "update: region '" + name + "' is not protected");
  if (is_block != (r->kind == RegionKind::global))
    return Status(Code::invalid_argument, "update: region '" + name + "' was protected as " +
                                              region_kind_name(r->kind) + "; its kind cannot change");
  if (r->kind == RegionKind::scalar && !count.empty())
    return Status(Code::invalid_argument, "update: scalar '" + name + "' cannot get dimensions");
  if (r->kind == RegionKind::local && count.empty())
    return Status(Code::invalid_argument, "update: array '" + name + "' needs dimensions");
  CKPT_RETURN_IF_ERROR(check_extents(name, r->kind, global, start, count));
  Region n = *r;
  n.ptr = ptr;
  n.global = std::move(global);
  n.start = std::move(start);
  n.count = std::move(count);
  if (n.bytes() > 0 && ptr == nullptr) return Status(Code::invalid_argument, "region '" + name + "': null pointer");
  n.mem = ptr != nullptr ? m_device->classify(ptr) : MemoryKind::host;
  *r = std::move(n);
  return Status::OK();
}

Status RuntimeImpl::unprotect(const std::string& name) {
  CKPT_RETURN_IF_ERROR(usable());
  auto at = m_region_at.find(name);
  if (at == m_region_at.end()) return Status(Code::not_found, "unprotect: region '" + name + "' is not protected");
  m_regions.erase(m_regions.begin() + static_cast<std::ptrdiff_t>(at->second));
  m_region_at.clear();  // positions after it moved; unprotect is rare, so rebuild
  for (std::size_t i = 0; i < m_regions.size(); ++i) m_region_at.emplace(m_regions[i].name, i);
  return Status::OK();
}

Status RuntimeImpl::annotate(const std::string& name, const std::string& key, const std::string& value) {
  CKPT_RETURN_IF_ERROR(usable());
  Region* r = find(name);
  if (r == nullptr) return Status(Code::not_found, "annotate: region '" + name + "' is not protected");
  if (key.empty() || key.size() > 255 || value.size() > 65536)
    return Status(Code::invalid_argument, "annotate: key must be 1..255 bytes and value at most 64 KiB");
  for (auto& kv : r->attrs)
    if (kv.first == key) {
      kv.second = value;
      return Status::OK();
    }
  if (r->attrs.size() >= kMaxAttrs) return Status(Code::invalid_argument, "annotate: too many attributes");
  r->attrs.emplace_back(key, value);
  return Status::OK();
}

// ---- capture (application thread) ----------------------------------------------------------------

namespace {
std::uint64_t physical_memory() {
  long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGE_SIZE);
  return pages > 0 && page > 0 ? static_cast<std::uint64_t>(pages) * static_cast<std::uint64_t>(page) : (4ull << 30);
}
}  // namespace

Status RuntimeImpl::ensure_pool(std::uint64_t stream_bytes) {
  const std::uint64_t chunk = m_opts.chunk_bytes;
  std::uint64_t want_chunks;
  if (m_opts.pool_bytes != 0) {
    want_chunks = m_opts.pool_bytes / chunk;
  } else {
    const std::uint64_t cap = std::max<std::uint64_t>(
        2, static_cast<std::uint64_t>(m_opts.pool_max_fraction * static_cast<double>(physical_memory())) / chunk);
    want_chunks = (stream_bytes + chunk - 1) / chunk * static_cast<std::uint64_t>(m_opts.max_in_flight);
    want_chunks = std::min(std::max<std::uint64_t>(want_chunks, 2), cap);
    // A growing application (AMR refining, walkers multiplying) would otherwise pay an allocation at
    // every checkpoint that is a little larger: grow by half again, so growth costs O(log) allocations.
    if (want_chunks > m_pool->chunks() && m_pool->chunks() > 0)
      want_chunks = std::min(want_chunks + want_chunks / 2, cap);
  }
  if (want_chunks <= m_pool->chunks()) return Status::OK();
  // Growing while chunks are lent is safe: new chunks are added, none move.
  return m_pool->reserve(static_cast<std::size_t>(want_chunks));
}

Ticket RuntimeImpl::checkpoint(std::int64_t step, void* stream) {
  const auto t0 = Clock::now();
  auto ticket = std::make_shared<TicketState>();
  ticket->step = step;
  ticket->tracer = m_tracer;
  Span call_span(m_tracer.get(), "ckpt:checkpoint", TraceThread::app, step);
  auto fail = [&](Status s) {
    ticket->finish(std::move(s));
    return Ticket(ticket);
  };
  if (Status s = usable(); !s.ok()) return fail(s);
  if (step < 0)
    return fail(Status(Code::invalid_argument, "checkpoint step must be >= 0, got " + std::to_string(step)));

  // Respect max_in_flight. Every rank waits for the same tickets, so what follows is the same everywhere.
  while (static_cast<int>(m_in_flight.size()) >= m_opts.max_in_flight) {
    auto oldest = m_in_flight.front();
    m_in_flight.pop_front();
    TicketState& ts = *oldest->ticket;
    std::unique_lock<std::mutex> lk(ts.mu);
    const bool seen = ts.observed;
    ts.cv.wait(lk, [&] { return ts.done; });
    if (!ts.status.ok() && !seen) {
      // An earlier failure nobody has looked at: report it instead of taking this step (see ckpt.hpp).
      ts.observed = true;
      return fail(ts.status.with_context("checkpoint " + std::to_string(oldest->step) + " failed; step " +
                                         std::to_string(step) + " was not taken"));
    }
  }

  auto job = std::make_shared<Job>();
  job->ticket = ticket;
  job->step = step;
  job->t0 = t0;
  job->plan =
      plan_stream(m_regions, m_opts.alignment, m_opts.chunk_bytes, static_cast<std::uint32_t>(m_transports.size()));
  job->tmp_dir = m_store->staging_dir(step);
  job->progress.resize(job->plan.blocks.size());
  static const std::uint64_t empty_digest = Hasher().digest();
  for (std::size_t i = 0; i < job->plan.blocks.size(); ++i)
    if (job->plan.blocks[i].length == 0) {  // never seen by the digest thread
      job->progress[i].digest.checksum = empty_digest;
      job->progress[i].finished = true;
    }
  ticket->stats.step = step;
  ticket->stats.bytes = job->plan.payload;

  // Open one writer per transport group (collective for MPI transports: every rank opens every
  // group, in order, even after a failure) and make sure the pool can hold the stream.
  Status s;
  if (m_persistent) s = make_dirs_nofollow(job->tmp_dir);
  if (s.ok()) s = ensure_pool(job->plan.bytes);
  // Collective opens need the same decision on every rank: after a failure anywhere nobody opens
  // (and creates files in a directory that may be wrong, e.g. a planted link). Independent opens
  // need no agreement: a failed rank just does not open.
  const bool collective =
      std::any_of(m_transports.begin(), m_transports.end(), [](const auto& t) { return t->collective_open(); });
  if (collective) s = agree(m_app_comm, s);
  const bool setup_ok = s.ok();  // after this, a failed open() does not stop the other groups' opens
  job->segment_done.assign(job->plan.segments.size(), false);
  job->placements.resize(job->plan.segments.size());
  for (const Segment& seg : job->plan.segments) {
    if (!setup_ok) {  // the job still goes through the flush threads and fails at the commit
      job->writers.push_back(nullptr);
      continue;
    }
    WriteContext ctx;
    ctx.dir = job->tmp_dir;
    ctx.step = step;
    ctx.rank = m_rank;
    ctx.nranks = m_size;
    ctx.ckpt_id = hash64(&m_run_id, sizeof m_run_id) ^ static_cast<std::uint64_t>(step);
    ctx.fsync = m_opts.fsync;
    ctx.plan = &job->plan;
    ctx.group = seg.group;
    ctx.segment_begin = seg.begin;
    ctx.segment_end = seg.end;
    auto w = m_transports[seg.group]->open(ctx);
    if (w.ok()) {
      job->writers.push_back(std::move(w).value());
    } else {
      job->writers.push_back(nullptr);
      if (s.ok()) s = w.status();
    }
  }
  double wait_s = 0;
  Span capture_span(m_tracer.get(), "ckpt:capture", TraceThread::app, step, job->plan.payload);
  if (s.ok()) s = m_device->capture_begin(stream);
  // On any failure so far nothing is captured; the job still goes through the flush threads (so that
  // the writers' collectives and the commit happen on every rank) and fails there.
  if (s.ok()) {
    // Chunk windows: each segment (transport group) is cut into chunk-sized windows of its own.
    const std::uint64_t chunk = m_opts.chunk_bytes;
    std::vector<std::pair<std::uint64_t, std::uint64_t>> windows;
    for (const Segment& seg : job->plan.segments)
      for (std::uint64_t a = seg.begin; a < seg.end; a += chunk) windows.emplace_back(a, std::min(a + chunk, seg.end));
    const std::uint64_t nchunks = windows.size();
    // When the whole stream fits in free chunks (the common case with the auto pool), the chunks are
    // handed over together at the end: the flush thread then does not compete with the copy for
    // memory bandwidth while the application is blocked. Otherwise they stream one by one.
    const bool batch = nchunks <= m_pool->free_chunks();
    std::vector<WorkItem> pending;
    auto hand_over = [&](WorkItem&& it) {
      if (batch)
        pending.push_back(std::move(it));
      else
        m_flush_q.push(std::move(it));
    };
    std::size_t first_block = 0;
    job->flush_start = Clock::now();  // refined below when the chunks are handed over in a batch
    for (std::uint64_t k = 0; k < nchunks && s.ok(); ++k) {
      const std::uint64_t a = windows[k].first, b = windows[k].second;
      const auto tw = Clock::now();
      Chunk* c = m_pool->acquire();
      wait_s += seconds_since(tw);
      if (c == nullptr) {
        s = Status(Code::failed_precondition, "staging pool shut down during capture");
        break;
      }
      std::uint64_t filled = a;  // bytes of the window accounted for (copied or zeroed)
      while (first_block < job->plan.blocks.size() &&
             job->plan.blocks[first_block].offset + job->plan.blocks[first_block].length <= a)
        ++first_block;
      for (std::size_t i = first_block; i < job->plan.blocks.size() && s.ok(); ++i) {
        const BlockPlan& bp = job->plan.blocks[i];
        if (bp.offset >= b) break;
        const std::uint64_t lo = std::max(a, bp.offset), hi = std::min(b, bp.offset + bp.length);
        if (hi <= lo) continue;
        if (lo > filled) std::memset(c->data + (filled - a), 0, lo - filled);  // alignment padding
        s = m_device->copy_to_host(c->data + (lo - a), static_cast<const std::uint8_t*>(bp.src) + (lo - bp.offset),
                                   hi - lo, bp.mem);
        filled = hi;
      }
      if (filled < b) std::memset(c->data + (filled - a), 0, b - filled);
      Result<Fence> f = s.ok() ? m_device->fence() : Result<Fence>(s);
      if (!f.ok()) s = f.status();
      WorkItem item;
      item.job = job;
      item.chunk = c;
      item.offset = a;
      item.length = static_cast<std::size_t>(b - a);
      item.fence = f.ok() ? f.value() : 0;
      item.last = (k + 1 == nchunks) || !s.ok();
      item.error = s;  // the flush thread adopts it and drops the rest of the job
      const bool last = item.last;
      hand_over(std::move(item));
      if (last) break;
    }
    if (!pending.empty()) {
      job->flush_start = Clock::now();
      m_flush_q.push_all(std::move(pending));
    }
    Status e = m_device->capture_end(stream);
    if (s.ok()) s = e;
    if (nchunks == 0 || !e.ok()) {
      WorkItem item;
      item.job = job;
      item.last = true;
      item.error = s;
      m_flush_q.push(std::move(item));
    }
  } else {
    // Nothing reached the flush thread yet; the job still goes through it (commit order = step
    // order) and through the commit, which every rank must run.
    job->flush_start = Clock::now();
    WorkItem item;
    item.job = job;
    item.last = true;
    item.error = s;
    m_flush_q.push(std::move(item));
  }
  {
    std::lock_guard<std::mutex> lk(ticket->mu);
    ticket->stats.blocked_s = seconds_since(t0);
    ticket->stats.capture_wait_s = wait_s;
    ticket->stats.staging_bytes = m_pool->bytes();
  }
  m_in_flight.push_back(job);
  return Ticket(ticket);
}

Status RuntimeImpl::wait_all() {
  if (m_closed) return Status(Code::failed_precondition, "the Runtime is closed");
  Status first;
  while (!m_in_flight.empty()) {
    Status s = Ticket(m_in_flight.front()->ticket).wait();
    if (!s.ok() && first.ok()) first = s.with_context("checkpoint " + std::to_string(m_in_flight.front()->step));
    m_in_flight.pop_front();
  }
  return first;
}

}  // namespace detail
}  // namespace ckpt
