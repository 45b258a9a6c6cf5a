// The flush threads: digest (hash, min/max) and write (transports' writers). See docs/design.md.
#include "runtime/src/pipeline/flush.hpp"

#include <algorithm>
#include <chrono>
#include <string>

#include "base/mpi.hpp"
#include "base/posix_io.hpp"
#include "runtime/src/pipeline/threads.hpp"

namespace ckpt::detail {

bool opens_on_app_thread(const std::vector<std::unique_ptr<Transport>>& transports, bool funneled) {
  return std::any_of(transports.begin(), transports.end(),
                     [&](const auto& t) { return t->synchronous() || (funneled && t->collective_open()); });
}

std::vector<BlockDigest> segment_digests(const Job& job, std::size_t segment) {
  std::vector<BlockDigest> digests(job.digest.progress.size());
  for (std::size_t b = 0; b < job.digest.progress.size(); ++b)
    if (job.plan.segment_of_var(static_cast<std::uint32_t>(b)) == segment) digests[b] = job.digest.progress[b].digest;
  return digests;
}

Status agree_on_job(MPI_Comm comm, std::int64_t step, const Status& local, std::uint64_t* ready, bool* roll) {
  if (comm == MPI_COMM_NULL) return local;
  long long v[5] = {local.ok() ? 0 : 1, static_cast<long long>(step), -static_cast<long long>(step),
                    ready != nullptr ? -static_cast<long long>(*ready) : 0, roll != nullptr && *roll ? 1 : 0};
  long long r[5] = {0, 0, 0, 0, 0};
  allreduce(v, r, 5, MPI_LONG_LONG, MPI_MAX, comm);
  if (ready != nullptr) *ready = static_cast<std::uint64_t>(-r[3]);
  if (roll != nullptr) *roll = r[4] != 0;
  if (r[0] != 0) return agree(comm, local);  // the lowest failing rank's Status, on every rank
  if (r[1] != -r[2])
    return Status(Code::invalid_argument, "checkpoint(): the ranks passed different steps (from " +
                                              std::to_string(-r[2]) + " to " + std::to_string(r[1]) +
                                              "); every rank must pass the same step. Nothing was written");
  return Status::OK();
}

Status open_writers(const OpenEnv& env, Job& job, Status setup) {
  const auto& transports = *env.transports;
  job.write.opened = true;
  // Before any file-system work: a refused argument on one rank, or ranks that passed different steps
  // (whose staging directories differ), fail the checkpoint on every rank and nothing is created.
  // Funneled, checkpoint() made that agreement: `setup` may then be this rank's own failure (the pool),
  // and the agreement below (collective opens) is made whatever it is.
  // layout series: the segment is part of the agreement (a rank whose file is full rolls every rank).
  bool roll = env.series != nullptr && env.series->wants_roll(job.plan.bytes);
  Status s = env.agreed_before ? std::move(setup)
                               : agree_on_job(env.comm, job.step, setup, nullptr, env.series ? &roll : nullptr);
  const bool agreed = env.agreed_before || s.ok();  // the same on every rank
  if (env.series != nullptr && !env.agreed_before && s.ok()) job.tmp_dir = env.series->place(roll, job.plan.bytes);
  if (s.ok() && env.persistent) s = make_dirs_nofollow(job.tmp_dir);
  // Collective opens need the same decision on every rank: after a failure anywhere nobody opens
  // (and creates files in a directory that may be wrong, e.g. a planted link). Independent opens
  // need no agreement: a failed rank just does not open.
  const bool collective =
      std::any_of(transports.begin(), transports.end(), [](const auto& t) { return t->collective_open(); });
  if (collective && agreed) s = agree(env.comm, s);
  const bool setup_ok = s.ok();  // after this, a failed open() does not stop the other groups' opens
  for (const Segment& seg : job.plan.segments) {
    if (!setup_ok) {  // the job still goes through the flush threads and fails at the commit
      job.write.writers.push_back(nullptr);
      continue;
    }
    WriteContext ctx;
    ctx.dir = job.tmp_dir;
    ctx.step = job.step;
    ctx.rank = env.rank;
    ctx.nranks = env.size;
    ctx.ckpt_id = checkpoint_id(env.run_id, job.step);
    ctx.fsync = env.fsync;
    ctx.writeback = env.writeback;
    ctx.plan = &job.plan;
    ctx.group = seg.group;
    ctx.segment_begin = seg.begin;
    ctx.segment_end = seg.end;
    ctx.write_bytes = job.chunk_bytes;
    auto w = transports[seg.group]->open(ctx);
    if (w.ok()) {
      job.write.writers.push_back(std::move(w).value());
    } else {
      job.write.writers.push_back(nullptr);
      if (s.ok()) s = w.status();
    }
  }
  return s;
}

FlushPipeline::FlushPipeline(const FlushConfig& cfg, const OpenEnv& open, Device& device, StagingPool& pool,
                             Committer& committer, Tracer* tracer, const Chain* chain)
    : m_cfg(cfg),
      m_open(open),
      m_device(device),
      m_pool(pool),
      m_committer(committer),
      m_tracer(tracer),
      m_chain(chain) {
  m_digest_thread = std::thread([this] {
    start_ckpt_thread("ckpt digest", "ckpt flush: digest", m_cfg.threads);
    digest_loop();
  });
  m_write_thread = std::thread([this] {
    start_ckpt_thread("ckpt write", "ckpt flush: write", m_cfg.threads);
    set_sleeping_waits(true);
    write_loop();
  });
}

FlushPipeline::~FlushPipeline() { close(); }

void FlushPipeline::close() {
  m_flush_q.close();
  if (m_digest_thread.joinable()) m_digest_thread.join();
  m_write_q.close();
  if (m_write_thread.joinable()) m_write_thread.join();
  free_comm(m_open.comm);
}

WorkItem FlushPipeline::final_item(const std::shared_ptr<Job>& job, const Status& error) {
  WorkItem item;
  item.job = job;
  item.last = true;
  item.error = error;
  return item;
}

// ---- flush: digest thread, then write thread ------------------------------------------------------
// Two stages so that hashing chunk k+1 overlaps the write of chunk k. Both see a job's chunks in
// stream order (FIFO queues), which the streaming checksums need.

void FlushPipeline::digest_loop() {
  // Bound once, never restored: a thread without a device of its own would otherwise get GPU 0's.
  const Status bound = m_device.bind_thread();
  WorkItem item;
  while (m_flush_q.pop(item)) {
    if (!bound.ok() && item.error.ok()) item.error = bound.with_context("binding the flush thread to the device");
    digest_item(item, bound);
    m_write_q.push(std::move(item));
    item = WorkItem();
  }
}

void FlushPipeline::write_loop() {
  WorkItem item;
  while (m_write_q.pop(item)) {
    write_item(item);
    item = WorkItem();  // drop the job reference now, not at the next pop
  }
}

void FlushPipeline::digest_item(WorkItem& item, const Status& bound) {
  if (item.chunk == nullptr) return;
  // Always, also after an error: the chunk goes back to the pool after this, and a copy still in
  // flight would land in the next checkpoint's data. An unbound thread does not wait (its device call
  // would create a context on GPU 0): the chunk is retired instead.
  Status s = bound.ok() ? m_device.wait(item.fence) : bound;
  if (!s.ok()) item.keep_chunk = true;
  if (!item.error.ok()) return;
  Job& j = *item.job;
  Span span(m_tracer, "ckpt:digest", TraceThread::digest, j.step, item.length);
  IncrementalJob& inc = j.incremental;
  if (inc.on && !inc.started)  // what this checkpoint compares with: the chain's newest committed one
    begin_incremental(inc, m_chain != nullptr ? m_chain->previous(j.step, m_incremental_started++) : nullptr);
  // Checksums and statistics of the blocks in this window, in stream order.
  const std::uint64_t a = item.offset, b = item.offset + item.length;
  while (s.ok() && j.digest.next_block < j.plan.blocks.size()) {
    const BlockPlan& bp = j.plan.blocks[j.digest.next_block];
    BlockProgress& pr = j.digest.progress[j.digest.next_block];
    if (pr.finished) {
      ++j.digest.next_block;
      continue;
    }
    if (bp.offset >= b) break;
    if (!j.digest.block_open) {
      j.digest.hasher.reset();
      const DType dt = j.plan.vars[j.digest.next_block].dtype;
      if (m_cfg.stats && dtype_has_stats(dt))
        j.digest.minmax.emplace(dt);
      else
        j.digest.minmax.reset();
      j.digest.block_open = true;
      inc.hasher.reset();
    }
    // Incremental: the block's pieces, each hashed (XXH3-128) in the same pass and compared with the same
    // piece of the previous checkpoint of the chain (a block of another length is new); a probing
    // checkpoint hashes and compares its sample only (one piece in kProbeStride), and writes every piece.
    const std::size_t bi = j.digest.next_block;
    const bool pieced = inc.on && !inc.hashes[bi].empty();
    const ChainTable* against = inc.probing() ? inc.probed.get() : inc.previous.get();
    const std::vector<ChainPiece>* before = nullptr;
    if (pieced && against != nullptr)
      if (auto f = against->blocks.find(j.plan.vars[bi].name);
          f != against->blocks.end() && f->second.first == bp.length)
        before = &f->second.second;
    const std::uint64_t lo = std::max(a, bp.offset), hi = std::min(b, bp.offset + bp.length);
    // Hash and min/max in one pass over 64 KiB pieces: the second reader finds the piece in cache,
    // so the digest reads the chunk from memory once, not twice (the flush competes with the
    // application for memory bandwidth). Pieces start at multiples of 64 KiB from `lo`, which is a
    // whole number of elements into the block.
    constexpr std::uint64_t kPiece = 64 * 1024;
    for (std::uint64_t x = lo; x < hi; x += kPiece) {
      const std::uint8_t* p = item.chunk->data + (x - a);
      const std::size_t n = static_cast<std::size_t>(std::min(kPiece, hi - x));
      j.digest.hasher.update(p, n);
      if (j.digest.minmax) j.digest.minmax->update(p, n);
      if (!pieced) continue;
      const std::uint64_t end = x + n - bp.offset;  // in the block; 64 KiB steps meet every piece end
      const std::size_t k = static_cast<std::size_t>((end - 1) >> inc.piece_log2);
      if (!inc.hashes_piece(bi, k)) continue;
      inc.hasher.update(p, n);
      if (end % inc.piece_bytes() != 0 && end != bp.length) continue;
      inc.hashes[bi][k] = inc.hasher.digest();
      const bool compared = before != nullptr && (*before)[k].known;
      const bool same = compared && (*before)[k].hash == inc.hashes[bi][k];
      inc.compared += compared ? 1 : 0;
      inc.unchanged += same ? 1 : 0;
      if (!inc.probing()) inc.reused[bi][k] = same ? 1 : 0;
      inc.hasher.reset();
    }
    if (bp.offset + bp.length > b) break;  // continues in the next chunk
    pr.digest.checksum = j.digest.hasher.digest();
    if (j.digest.minmax && j.digest.minmax->valid()) {
      pr.digest.has_stats = true;
      pr.digest.min_bits = j.digest.minmax->min_bits();
      pr.digest.max_bits = j.digest.minmax->max_bits();
    }
    pr.finished = true;
    j.digest.block_open = false;
    ++j.digest.next_block;
  }
  item.error = s;
}

void FlushPipeline::start_segments(Job& j, std::size_t upto) {
  while (j.write.next_start <= upto && j.write.next_start < j.plan.segments.size()) {
    if (auto& w = j.write.writers[j.write.next_start]) {
      Status s = w->start();  // also after an error: starts may be collective
      if (!s.ok() && j.write.error.ok()) j.write.error = s;
    }
    ++j.write.next_start;
  }
}

void FlushPipeline::close_segments(Job& j, std::uint64_t offset, bool all) {
  while (j.write.next_segment < j.plan.segments.size()) {
    const std::size_t i = j.write.next_segment;
    if (!all && j.plan.segments[i].end > offset) break;
    start_segments(j, i);
    Span span(m_tracer, "ckpt:fsync", TraceThread::write, j.step);
    if (auto& w = j.write.writers[i]) {
      if (j.write.error.ok()) {
        // Only this segment's blocks: the digest thread may still be working on later segments'
        // blocks (reading those was a data race, found by TSan in transports_4).
        auto p = w->finish(segment_digests(j, i));
        if (p.ok())
          j.write.placements[i] = p.value();
        else
          j.write.error = p.status();
      } else {
        w->abort();
      }
      w.reset();
    } else if (j.write.error.ok()) {
      j.write.error = Status(Code::internal, "segment without a writer");
    }
    j.write.segment_done[i] = true;
    ++j.write.next_segment;
  }
}

void FlushPipeline::write_item(WorkItem& item) {
  Job& j = *item.job;
  auto give_back = [&] {
    if (item.keep_chunk)
      m_pool.retire(item.chunk);
    else
      m_pool.release(item.chunk);
  };
  if (j.write.handed_over) {  // cannot happen: the last item is handed over after capture_end (kept as a guard)
    if (item.chunk != nullptr) give_back();
    return;
  }
  if (!j.write.opened) {
    // The staging directory, the setup agreement and the opens, here and not on the application
    // thread: checkpoint() costs its copy. A capture failure in the first item is the
    // setup's: with collective opens nobody opens then.
    Span span(m_tracer, "ckpt:open", TraceThread::write, j.step);
    Status s = open_writers(m_open, j, item.error);
    if (!s.ok() && j.write.error.ok()) j.write.error = s;
  }
  if (!item.error.ok() && j.write.error.ok()) j.write.error = item.error;
  if (item.chunk != nullptr) {
    // Segments wholly before this chunk are complete: finish them first, in order on every rank, so
    // that collective writers (mpiio) and writer ranks (rbio) see the same sequence everywhere.
    close_segments(j, item.offset, false);
    const std::size_t si = j.plan.segment_of(item.offset);
    start_segments(j, si);
    if (j.write.error.ok()) {
      Span span(m_tracer, "ckpt:write", TraceThread::write, j.step, item.length);
      if (m_cfg.flush_delay_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(m_cfg.flush_delay_ms));
      const Segment& seg = j.plan.segments[si];
      Status s = j.write.writers[si] ? Status::OK() : Status(Code::internal, "chunk for a segment without a writer");
      // Incremental: only the pieces that changed (and no padding); otherwise the whole chunk.
      for (const auto& [lo, hi] : dirty_ranges(j.incremental, j.plan, item.offset, item.offset + item.length)) {
        if (!s.ok()) break;
        s = j.write.writers[si]->write(lo - seg.begin, item.chunk->data + (lo - item.offset), hi - lo);
        j.write.stream_bytes += hi - lo;
      }
      if (!s.ok()) j.write.error = s;
    }
    give_back();
    close_segments(j, item.offset + item.length, false);
  }
  if (!item.last) return;
  close_segments(j, 0, true);
  std::uint64_t written = 0;
  if (j.incremental.on) {  // the data files have holes where reused pieces would be: what was written
    written = j.write.stream_bytes;
    for (auto& p : j.write.placements) written += p.base_offset;  // the data headers
  } else {
    for (auto& p : j.write.placements) written += p.file_bytes - std::min(p.appended_at, p.file_bytes);
  }
  {
    std::lock_guard<std::mutex> lk(j.ticket->mu);
    j.ticket->stats.flush_s = seconds_since(j.flush_start);
    j.ticket->stats.durable_s = seconds_since(j.t0);
    j.ticket->stats.bytes_written = written;
  }
  j.write.handed_over = true;
  m_committer.submit(item.job);
}

}  // namespace ckpt::detail
