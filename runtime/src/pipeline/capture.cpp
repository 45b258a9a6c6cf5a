// checkpoint() on the application thread: in-flight window, plan, opens, copy, hand-over.
#include "runtime/src/pipeline/capture.hpp"

#include <algorithm>
#include <cstring>
#include <optional>
#include <utility>

namespace ckpt::detail {

Ticket failed_ticket(std::int64_t step, Status s) {
  auto ticket = std::make_shared<TicketState>();
  ticket->step = step;
  ticket->finish(std::move(s));
  return Ticket(ticket);
}

Status Capture::make_room(std::int64_t step) {
  // Respect max_in_flight, and wait for an earlier checkpoint of the same step (both would write
  // ckpt.<step>.tmp). Every rank waits for the same tickets, so what follows is the same everywhere.
  auto same_step_in_flight = [&] {
    return std::any_of(m_in_flight.begin(), m_in_flight.end(), [&](const auto& j) { return j->step == step; });
  };
  if (m_env.launcher != nullptr) {
    // Coalesce: never wait for room (the launcher replaces what waits); done tickets are forgotten
    // (their outcome is the ticket's: deciding on done-ness here would differ between ranks).
    while (!m_in_flight.empty() && Ticket(m_in_flight.front()->ticket).done()) m_in_flight.pop_front();
    for (const auto& j : m_in_flight)
      if (j->step == step) (void)Ticket(j->ticket).wait();
    return Status::OK();
  }
  while (static_cast<int>(m_in_flight.size()) >= m_opts.max_in_flight || same_step_in_flight()) {
    auto oldest = m_in_flight.front();
    m_in_flight.pop_front();
    TicketState& ts = *oldest->ticket;
    if (auto funnel = m_env.funnel.lock()) funnel->settle(ts);  // funneled: commit it here
    std::unique_lock<std::mutex> lk(ts.mu);
    const bool seen = ts.observed;
    ts.cv.wait(lk, [&] { return ts.done; });
    if (ts.status.failed() && !seen) {
      // An earlier failure nobody has looked at: report it instead of taking this step (see ckpt.hpp).
      ts.observed = true;
      return ts.status.with_context("checkpoint " + std::to_string(oldest->step) + " failed; step " +
                                    std::to_string(step) + " was not taken");
    }
  }
  return Status::OK();
}

std::shared_ptr<Job> Capture::new_job(std::int64_t step, const std::vector<Region>& regions,
                                      std::shared_ptr<TicketState> ticket) const {
  auto job = std::make_shared<Job>();
  job->ticket = std::move(ticket);
  job->step = step;
  job->chunk_bytes = m_env.pool->chunk_bytes();
  const std::uint64_t piece = m_opts.incremental ? m_opts.incremental_piece_bytes : 0;
  job->plan = plan_stream(regions, m_opts.alignment, job->chunk_bytes,
                          static_cast<std::uint32_t>(m_env.transports->size()), piece);
  if (piece > 0)
    init_incremental(job->incremental, job->plan, static_cast<std::uint32_t>(__builtin_ctzll(piece)), job->chunk_bytes);
  job->tmp_dir = m_env.store->staging_dir(step);
  job->digest.progress.resize(job->plan.blocks.size());
  static const std::uint64_t empty_digest = Hasher().digest();
  for (std::size_t i = 0; i < job->plan.blocks.size(); ++i)
    if (job->plan.blocks[i].length == 0) {  // never seen by the digest thread
      job->digest.progress[i].digest.checksum = empty_digest;
      job->digest.progress[i].finished = true;
    }
  job->write.segment_done.assign(job->plan.segments.size(), false);
  job->write.placements.resize(job->plan.segments.size());
  return job;
}

Status Capture::copy_block(const Region& r, const BlockPlan& bp, std::uint8_t* dst, std::uint64_t p0, std::uint64_t n) {
  const std::size_t esize = dtype_size(r.dtype);
  // A region at one pointer is one part, itself (plan_stream builds no parts for it).
  if (!r.pieces) return copy_part(r.ptr, r.count, r.mem_start, r.mem_alloc, esize, bp, dst, p0, n);
  // A scattered region: the first part holding byte p0, then the parts after it (one per piece).
  auto it = std::upper_bound(bp.parts.begin(), bp.parts.end(), p0,
                             [](std::uint64_t x, const MemoryPart& part) { return x < part.offset; });
  if (it != bp.parts.begin()) --it;
  for (; it != bp.parts.end() && it->offset < p0 + n; ++it) {
    const MemoryPart& part = *it;
    const std::uint64_t lo = std::max(p0, part.offset), hi = std::min(p0 + n, part.offset + part.bytes);
    if (hi <= lo) continue;
    CKPT_RETURN_IF_ERROR(copy_part(part.ptr, part.count, part.mem_start, part.mem_alloc, esize, bp, dst + (lo - p0),
                                   lo - part.offset, hi - lo));
  }
  return Status::OK();
}

Status Capture::copy_part(const void* ptr, const Shape& count, const Shape& mem_start, const Shape& mem_alloc,
                          std::size_t esize, const BlockPlan& bp, std::uint8_t* dst, std::uint64_t p0,
                          std::uint64_t n) {
  const MemoryKind mem = bp.mem;
  if (mem_alloc.empty()) return m_env.device->copy_to_host(dst, static_cast<const std::uint8_t*>(ptr) + p0, n, mem);
  if (mem == MemoryKind::host || mem == MemoryKind::host_pinned) {
    // Host memory is copied on this thread by every device (checkpoint() returns with it copied), so the
    // rows are copied here: a ghosted block's rows are short (16 doubles), a call per row is too much.
    // Streaming stores for a block of 64 KiB and more, as a packed one gets (copy_to_staging).
    const auto* src = static_cast<const std::uint8_t*>(ptr);
    const bool stream = bp.length >= (64u << 10);
    Status s = for_each_selection_row(mem_start, count, mem_alloc, esize, p0, n,
                                      [&](std::uint64_t in_memory, std::uint64_t packed, std::uint64_t len) {
                                        if (stream)
                                          stream_to_staging(dst + (packed - p0), src + in_memory, len);
                                        else
                                          std::memcpy(dst + (packed - p0), src + in_memory, len);
                                        return Status::OK();
                                      });
    if (stream) staging_fence();
    return s;
  }
  // Rows at constant strides become one 2D copy (device memory: one cudaMemcpy2DAsync per plane of a
  // 3D box, not one copy per row).
  Device& device = *m_env.device;
  RowBatcher batch([&](const Copy2D& c) { return device.copy_to_host(dst, ptr, c, mem); }, device.max_copy_pitch());
  CKPT_RETURN_IF_ERROR(for_each_selection_row(mem_start, count, mem_alloc, esize, p0, n,
                                              [&](std::uint64_t in_memory, std::uint64_t packed, std::uint64_t len) {
                                                return batch.add(packed - p0, in_memory, len);
                                              }));
  return batch.flush();
}

Status Capture::copy_chunks(const std::shared_ptr<Job>& job, void* stream, double& wait_s,
                            std::vector<WorkItem>* collect) {
  Device& device = *m_env.device;
  StagingPool& pool = *m_env.pool;
  FlushPipeline& flush = *m_env.flush;
  // Chunk windows: each segment (transport group) is cut into chunk-sized windows of its own.
  const std::uint64_t chunk = job->chunk_bytes;
  std::vector<std::pair<std::uint64_t, std::uint64_t>> windows;
  for (const Segment& seg : job->plan.segments)
    for (std::uint64_t a = seg.begin; a < seg.end; a += chunk) windows.emplace_back(a, std::min(a + chunk, seg.end));
  const std::uint64_t nchunks = windows.size();
  // When the whole stream fits in free chunks (the common case with the auto pool), the chunks are
  // handed over together at the end: the flush thread then does not compete with the copy for
  // memory bandwidth while the application is blocked. Otherwise they stream one by one.
  const bool batch = collect != nullptr || nchunks <= pool.free_chunks();
  std::vector<WorkItem> pending;
  Status s;
  std::size_t first_block = 0;
  std::optional<WorkItem> held;     // the last chunk, handed over after capture_end
  job->flush_start = Clock::now();  // refined below when the chunks are handed over in a batch
  for (std::uint64_t k = 0; k < nchunks && s.ok(); ++k) {
    const std::uint64_t a = windows[k].first, b = windows[k].second;
    const auto tw = Clock::now();
    Chunk* c = pool.acquire();
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
      s = copy_block(job->plan.vars[bp.var], bp, c->data + (lo - a), lo - bp.offset, hi - lo);
      filled = hi;
    }
    if (filled < b) std::memset(c->data + (filled - a), 0, b - filled);
    WorkItem item;
    item.job = job;
    item.chunk = c;
    item.offset = a;
    item.length = static_cast<std::size_t>(b - a);
    // A fence also after a failed copy: the copies enqueued before it may still be in flight, and the
    // chunk must not go back to the pool (LIFO: the next checkpoint gets it first) until they land.
    Result<Fence> f = device.fence();
    if (f.ok()) {
      item.fence = f.value();
    } else {
      if (s.ok()) s = f.status();
      // No fence: drain every copy now; if even that fails, the chunk is never reused.
      item.keep_chunk = !device.synchronize().ok();
    }
    item.last = (k + 1 == nchunks) || !s.ok();
    item.error = s;  // the flush thread adopts it and drops the rest of the job
    if (item.last) {
      // Held until capture_end returned: its failure must reach the job before the job can finish.
      held = std::move(item);
      break;
    }
    if (batch)
      pending.push_back(std::move(item));
    else
      flush.push(std::move(item));
  }
  if (!pending.empty() && collect == nullptr) {
    job->flush_start = Clock::now();
    flush.push_all(std::move(pending));
  }
  Status e = device.capture_end(stream);
  if (s.ok()) s = e.with_context("capture_end");
  if (!held) held = FlushPipeline::final_item(job, s);  // no chunk (an empty stream, the pool shut down)
  if (held->error.ok()) held->error = s;
  if (collect != nullptr) {
    for (WorkItem& w : pending) collect->push_back(std::move(w));
    collect->push_back(std::move(*held));
  } else {
    flush.push(std::move(*held));
  }
  return s;
}

Ticket Capture::checkpoint(std::int64_t step, void* stream, const std::vector<Region>& regions, const Status& local) {
  const auto t0 = Clock::now();
  auto ticket = std::make_shared<TicketState>();
  ticket->step = step;
  ticket->tracer = m_env.tracer;
  ticket->funnel = m_env.funnel;
  Span call_span(m_env.tracer.get(), "ckpt:checkpoint", TraceThread::app, step);
  auto fail = [&](Status s) {
    ticket->finish(std::move(s));
    return Ticket(ticket);
  };
  // The arguments (and `local`, this rank's failure to locate its regions) are checked here and agreed on
  // the write thread (agree_on_job, with the step), before anything touches the file system: no
  // collective on this thread. A refused checkpoint still goes through the pipeline on this rank, with
  // nothing captured, so that it fails alike on every rank. Funneled (no MPI call off this thread), the
  // agreement is made here instead, and carries the count of checkpoints this rank has written, so
  // that those every rank has written commit here.
  Status arg = local;
  std::uint64_t total = 0;
  for (const Region& r : regions)
    if (__builtin_add_overflow(total, r.bytes(), &total))
      arg = Status(Code::invalid_argument, "the protected regions together exceed 2^64 bytes");
  if (step < 0) arg = Status(Code::invalid_argument, "checkpoint step must be >= 0, got " + std::to_string(step));
  SeriesCursor* series = m_env.open.series;
  bool roll = false;  // layout series, funneled: whether this checkpoint starts a new segment
  const bool funneled_agreement = !m_env.funnel.expired();
  if (auto funnel = m_env.funnel.lock()) {
    std::uint64_t ready = funnel->ready();
    roll = series != nullptr && series->wants_roll(total);
    // The same on every rank now.
    arg = agree_on_job(m_env.open.comm, step, arg, &ready, series != nullptr ? &roll : nullptr);
    for (std::uint64_t i = 0; i < ready; ++i) funnel->commit_next();
  }
  if (Status s = make_room(step); !s.ok()) return fail(s);

  auto job = new_job(step, arg.ok() ? regions : std::vector<Region>{}, ticket);
  if (series != nullptr && funneled_agreement && arg.ok()) job->tmp_dir = series->place(roll, job->plan.bytes);
  job->t0 = t0;
  ticket->stats.step = step;
  ticket->stats.bytes = job->plan.payload;
  // The pool grows here only when the regions grew past what protect()/update() reserved.
  Status s = arg.ok() ? reserve_for_stream(*m_env.pool, m_opts, job->plan.bytes) : arg;
  if (opens_on_app_thread(*m_env.transports, m_env.funneled)) {
    Span open_span(m_env.tracer.get(), "ckpt:open", TraceThread::app, step);
    s = open_writers(m_env.open, *job, s);
  }
  double wait_s = 0;
  Span capture_span(m_env.tracer.get(), "ckpt:capture", TraceThread::app, step, job->plan.payload);
  if (m_env.launcher != nullptr) {
    coalesce(job, s, stream, wait_s);
  } else {
    if (s.ok()) s = m_env.device->capture_begin(stream);
    if (s.ok()) {
      (void)copy_chunks(job, stream, wait_s);  // a failure travels with the job
    } else {
      // Nothing is captured; the job still goes through the flush threads (so that the writers'
      // collectives and the commit happen on every rank) and fails there.
      job->flush_start = Clock::now();
      m_env.flush->fail(job, s);
    }
  }
  capture_span.end();
  {
    std::lock_guard<std::mutex> lk(ticket->mu);
    ticket->stats.blocked_s = seconds_since(t0);
    ticket->stats.capture_wait_s = wait_s;
    ticket->stats.staging_bytes = m_env.pool->bytes();
    ticket->stats.staging_pinned_bytes = m_env.pool->pinned_bytes();
  }
  m_in_flight.push_back(job);
  ++m_seq;
  return Ticket(ticket);
}

void Capture::coalesce(const std::shared_ptr<Job>& job, Status setup, void* stream, double& wait_s) {
  Launcher& launcher = *m_env.launcher;
  launcher.supersede_waiting();  // its chunks are this capture's room
  PendingCapture p;
  p.job = job;
  p.seq = m_seq;
  // The capture waits with all its chunks next to max_in_flight checkpoints in flight; a stream that
  // does not fit the pool like that streams through it once launched, as on_busy = wait does.
  std::uint64_t nchunks = 0;
  for (const Segment& seg : job->plan.segments)
    nchunks += (seg.end - seg.begin + job->chunk_bytes - 1) / job->chunk_bytes;
  p.streams = setup.ok() && nchunks * static_cast<std::uint64_t>(m_opts.max_in_flight + 1) > m_env.pool->chunks();
  if (!p.streams) {
    if (setup.ok()) setup = m_env.device->capture_begin(stream);
    if (setup.ok())
      (void)copy_chunks(job, stream, wait_s, &p.items);  // a failure travels with the job
    else
      p.items.push_back(FlushPipeline::final_item(job, setup));
    (void)launcher.submit(std::move(p));
    return;
  }
  const auto tw = Clock::now();
  const bool launched = launcher.submit(std::move(p));
  wait_s += seconds_since(tw);
  if (!launched) return;  // superseded while it waited: its ticket says so
  Status s = m_env.device->capture_begin(stream);
  if (s.ok())
    (void)copy_chunks(job, stream, wait_s);
  else
    m_env.flush->fail(job, s);
}

Status Capture::wait_all() {
  Status first;
  if (m_env.launcher != nullptr) m_env.launcher->hurry(true);  // the application waits: no CPU budget wait
  while (!m_in_flight.empty()) {
    Status s = Ticket(m_in_flight.front()->ticket).wait();
    if (s.failed() && first.ok()) first = s.with_context("checkpoint " + std::to_string(m_in_flight.front()->step));
    m_in_flight.pop_front();
  }
  if (m_env.launcher != nullptr) m_env.launcher->hurry(false);
  return first;
}

}  // namespace ckpt::detail
