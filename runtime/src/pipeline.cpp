// The background half of the pipeline: the flush thread (hash, write, fdatasync) and the commit
// thread (agreement, index, rename, `latest`, retention). See docs/design.md.
#include <algorithm>
#include <cstdio>
#include <ctime>
#include <map>

#include "base/posix_io.hpp"
#include "runtime/src/runtime_impl.hpp"

namespace ckpt::detail {

// ---- flush: digest thread, then write thread ------------------------------------------------------
// Two stages so that hashing chunk k+1 overlaps the write of chunk k. Both see a job's chunks in
// stream order (FIFO queues), which the streaming checksums need.

void RuntimeImpl::digest_loop() {
  WorkItem item;
  while (m_flush_q.pop(item)) {
    digest_item(item);
    m_write_q.push(std::move(item));
    item = WorkItem();
  }
}

void RuntimeImpl::write_loop() {
  WorkItem item;
  while (m_write_q.pop(item)) {
    write_item(item);
    item = WorkItem();  // drop the job reference now, not at the next pop
  }
}

void RuntimeImpl::digest_item(WorkItem& item) {
  if (item.chunk == nullptr || !item.error.ok()) return;
  Job& j = *item.job;
  Span span(m_tracer.get(), "ckpt:digest", TraceThread::digest, j.step, item.length);
  Status s = m_device->wait(item.fence);
  // Checksums and statistics of the blocks in this window, in stream order.
  const std::uint64_t a = item.offset, b = item.offset + item.length;
  while (s.ok() && j.next_block < j.plan.blocks.size()) {
    const BlockPlan& bp = j.plan.blocks[j.next_block];
    BlockProgress& pr = j.progress[j.next_block];
    if (pr.finished) {
      ++j.next_block;
      continue;
    }
    if (bp.offset >= b) break;
    if (!j.block_open) {
      j.hasher.reset();
      const DType dt = j.plan.vars[j.next_block].dtype;
      if (m_opts.stats && dtype_has_stats(dt))
        j.minmax.emplace(dt);
      else
        j.minmax.reset();
      j.block_open = true;
    }
    const std::uint64_t lo = std::max(a, bp.offset), hi = std::min(b, bp.offset + bp.length);
    // Hash and min/max in one pass over 64 KiB pieces: the second reader finds the piece in cache,
    // so the digest reads the chunk from memory once, not twice (the flush competes with the
    // application for memory bandwidth). Pieces start at multiples of 64 KiB from `lo`, which is a
    // whole number of elements into the block.
    constexpr std::uint64_t kPiece = 64 * 1024;
    for (std::uint64_t x = lo; x < hi; x += kPiece) {
      const std::uint8_t* p = item.chunk->data + (x - a);
      const std::size_t n = static_cast<std::size_t>(std::min(kPiece, hi - x));
      j.hasher.update(p, n);
      if (j.minmax) j.minmax->update(p, n);
    }
    if (bp.offset + bp.length > b) break;  // continues in the next chunk
    pr.digest.checksum = j.hasher.digest();
    if (j.minmax && j.minmax->valid()) {
      pr.digest.has_stats = true;
      pr.digest.min_bits = j.minmax->min_bits();
      pr.digest.max_bits = j.minmax->max_bits();
    }
    pr.finished = true;
    j.block_open = false;
    ++j.next_block;
  }
  item.error = s;
}

void RuntimeImpl::start_segments(Job& j, std::size_t upto) {
  while (j.next_start <= upto && j.next_start < j.plan.segments.size()) {
    if (auto& w = j.writers[j.next_start]) {
      Status s = w->start();  // also after an error: starts may be collective
      if (!s.ok() && j.error.ok()) j.error = s;
    }
    ++j.next_start;
  }
}

void RuntimeImpl::close_segments(Job& j, std::uint64_t offset, bool all) {
  while (j.next_segment < j.plan.segments.size()) {
    const std::size_t i = j.next_segment;
    if (!all && j.plan.segments[i].end > offset) break;
    start_segments(j, i);
    Span span(m_tracer.get(), "ckpt:fsync", TraceThread::write, j.step);
    if (auto& w = j.writers[i]) {
      if (j.error.ok()) {
        // Only this segment's blocks: the digest thread may still be working on later segments'
        // blocks (reading those was a data race, found by TSan in transports_4).
        std::vector<BlockDigest> digests(j.progress.size());
        for (std::size_t b = 0; b < j.progress.size(); ++b)
          if (j.plan.segment_of_var(static_cast<std::uint32_t>(b)) == i) digests[b] = j.progress[b].digest;
        auto p = w->finish(digests);
        if (p.ok())
          j.placements[i] = p.value();
        else
          j.error = p.status();
      } else {
        w->abort();
      }
      w.reset();
    } else if (j.error.ok()) {
      j.error = Status(Code::internal, "segment without a writer");
    }
    j.segment_done[i] = true;
    ++j.next_segment;
  }
}

void RuntimeImpl::write_item(WorkItem& item) {
  Job& j = *item.job;
  if (j.handed_over) {  // a late item of a job already finished (capture_end failed after the last chunk)
    if (item.chunk != nullptr) m_pool->release(item.chunk);
    return;
  }
  if (!item.error.ok() && j.error.ok()) j.error = item.error;
  if (item.chunk != nullptr) {
    // Segments wholly before this chunk are complete: finish them first, in order on every rank, so
    // that collective writers (mpiio) and writer ranks (rbio) see the same sequence everywhere.
    close_segments(j, item.offset, false);
    const std::size_t si = j.plan.segment_of(item.offset);
    start_segments(j, si);
    if (j.error.ok()) {
      Span span(m_tracer.get(), "ckpt:write", TraceThread::write, j.step, item.length);
      if (m_opts.flush_delay_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(m_opts.flush_delay_ms));
      const Segment& seg = j.plan.segments[si];
      Status s = j.writers[si] ? j.writers[si]->write(item.offset - seg.begin, item.chunk->data, item.length)
                               : Status(Code::internal, "chunk for a segment without a writer");
      if (!s.ok()) j.error = s;
    }
    m_pool->release(item.chunk);
    close_segments(j, item.offset + item.length, false);
  }
  if (!item.last) return;
  close_segments(j, 0, true);
  std::uint64_t written = 0;
  for (auto& p : j.placements) written += p.file_bytes;
  {
    std::lock_guard<std::mutex> lk(j.ticket->mu);
    j.ticket->stats.flush_s = seconds_since(j.flush_start);
    j.ticket->stats.durable_s = seconds_since(j.t0);
    j.ticket->stats.bytes_written = written;
  }
  j.handed_over = true;
  m_commit_q.push(item.job);
}

// ---- commit thread -------------------------------------------------------------------------------

void RuntimeImpl::commit_loop() {
  std::shared_ptr<Job> job;
  while (m_commit_q.pop(job)) {
    Span span(m_tracer.get(), "ckpt:commit", TraceThread::commit, job->step);
    Status s = commit(*job);
    span.end();
    {
      std::lock_guard<std::mutex> lk(job->ticket->mu);
      job->ticket->stats.committed_s = seconds_since(job->t0);
    }
    if (m_opts.verbose >= 1 && m_rank == 0) {
      const auto st = Ticket(job->ticket).stats();
      if (s.ok())
        std::fprintf(
            stderr,
            "ckpt: step %lld committed: %.1f MiB on rank 0, blocked %.2f ms, durable %.3f s, committed %.3f s\n",
            static_cast<long long>(job->step), static_cast<double>(st.bytes) / (1 << 20), st.blocked_s * 1e3,
            st.durable_s, st.committed_s);
      else
        std::fprintf(stderr, "ckpt: step %lld failed: %s\n", static_cast<long long>(job->step), s.to_string().c_str());
    }
    job->ticket->finish(s);
    {
      std::lock_guard<std::mutex> lk(m_history_mu);
      CheckpointRecord rec = m_rank == 0 ? m_root_last : CheckpointRecord{};
      rec.stats = Ticket(job->ticket).stats();
      rec.ok = s.ok();
      m_history.push_back(std::move(rec));
      m_root_last = CheckpointRecord{};
    }
    job.reset();
  }
}

Status RuntimeImpl::commit(Job& job) {
  // This rank's report: its variables and block records, or its error. Encoded with the index codec.
  Index rep;
  rep.step = job.step;
  rep.nranks = static_cast<std::uint32_t>(m_size);
  rep.transport = transport_names();
  rep.rank_file.assign(static_cast<std::size_t>(m_size), 0);
  if (!job.error.ok()) {
    rep.attrs.emplace_back("error", job.error.to_string());
    rep.files.push_back({"none", static_cast<std::uint32_t>(m_rank), 0});  // keeps the writer map valid
  } else {
    // One file record per segment; blocks of non-persistent groups (null) are not recorded.
    std::vector<std::uint32_t> seg_file(job.plan.segments.size(), 0);
    for (std::size_t g = 0; g < job.plan.segments.size(); ++g) {
      const Placement& pl = job.placements[g];
      seg_file[g] = static_cast<std::uint32_t>(rep.files.size());
      rep.files.push_back({pl.file.empty() ? "none" : pl.file, static_cast<std::uint32_t>(pl.writer), pl.file_bytes});
      for (auto& kv : pl.attrs) rep.attrs.push_back(kv);
    }
    for (std::uint32_t i = 0; i < job.plan.vars.size(); ++i) {
      const Region& r = job.plan.vars[i];
      const std::size_t g = job.plan.segment_of_var(i);
      if (!m_transports[job.plan.segments[g].group]->persistent()) continue;
      const BlockPlan& bp = job.plan.blocks[i];
      const BlockProgress& pr = job.progress[i];
      VarRecord v;
      v.name = r.name;
      v.dtype = r.dtype;
      v.kind = r.kind;
      v.ndim = static_cast<std::uint32_t>(r.count.size());
      if (r.kind == RegionKind::global) v.global = r.global;
      v.attrs = r.attrs;
      rep.vars.push_back(std::move(v));
      BlockRecord b;
      b.var = static_cast<std::uint32_t>(rep.vars.size() - 1);
      b.rank = static_cast<std::uint32_t>(m_rank);
      b.file = seg_file[g];
      const Placement& pl = job.placements[g];
      b.offset =
          pl.block_offsets.empty() ? pl.base_offset + (bp.offset - job.plan.segments[g].begin) : pl.block_offsets.at(i);
      b.length = bp.length;
      b.start = r.kind == RegionKind::global ? r.start : Shape(r.count.size(), 0);
      b.count = r.count;
      b.checksum = pr.digest.checksum;
      b.has_stats = pr.digest.has_stats;
      b.min_bits = pr.digest.min_bits;
      b.max_bits = pr.digest.max_bits;
      rep.blocks.push_back(std::move(b));
    }
  }
  std::vector<std::uint8_t> mine = encode_index(rep);

  // Gather every report on rank 0: this is also the agreement that all ranks succeeded.
  const auto reports = gatherv_bytes(m_commit_comm, mine, 0);
  Status outcome;
  if (m_rank == 0) {
    outcome = commit_on_root(job, reports);
    if (!outcome.ok() && m_persistent) remove_tree(job.tmp_dir);
  }
  outcome = bcast_status(m_commit_comm, outcome, 0);                           // everybody learns the outcome
  if (outcome.ok() && m_rank == 0 && m_persistent) apply_retention(job.step);  // off the other ranks' path
  return outcome;
}

Status RuntimeImpl::commit_on_root(Job& job, const std::vector<std::vector<std::uint8_t>>& reports) {
  Index idx;
  idx.step = job.step;
  idx.nranks = static_cast<std::uint32_t>(m_size);
  idx.ckpt_id = hash64(&m_run_id, sizeof m_run_id) ^ static_cast<std::uint64_t>(job.step);
  idx.created_unix = static_cast<double>(std::time(nullptr));
  idx.transport = transport_names();
  idx.attrs.emplace_back("ckpt_version", version());
  idx.rank_file.assign(static_cast<std::size_t>(m_size), 0);

  std::string failures;
  Code first_code = Code::ok;
  std::vector<Index> reps;
  reps.reserve(reports.size());
  for (int r = 0; r < m_size; ++r) {
    auto d = decode_index(reports[static_cast<std::size_t>(r)].data(), reports[static_cast<std::size_t>(r)].size());
    if (!d.ok()) return Status(Code::internal, "report of rank " + std::to_string(r) + ": " + d.status().message());
    if (r == 0)
      for (auto& kv : d->attrs)
        if (kv.first != "error") idx.attrs.push_back(kv);
    for (auto& kv : d->attrs)
      if (kv.first == "error") {
        if (failures.size() < 2000)
          failures += (failures.empty() ? "" : "; ") + std::string("rank ") + std::to_string(r) + ": " + kv.second;
        if (first_code == Code::ok) first_code = Code::io_error;
      }
    reps.push_back(std::move(d).value());
  }
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
        const VarRecord& have = idx.vars[it->second];
        if (have.dtype != v.dtype || have.kind != v.kind || have.ndim != v.ndim || have.global != v.global)
          return Status(Code::invalid_argument, "checkpoint " + std::to_string(job.step) + ": variable '" + v.name +
                                                    "' is registered differently on rank " + std::to_string(r) +
                                                    " (dtype, kind, rank or global shape)");
      }
      vmap.push_back(it->second);
    }
    for (auto b : rep.blocks) {
      b.var = vmap.at(b.var);
      b.file = fmap.at(b.file);
      idx.blocks.push_back(std::move(b));
    }
  }
  // Scalars and local arrays equal on every rank are `uniform`: they restart on any rank count.
  for (std::uint32_t v = 0; v < idx.vars.size(); ++v) {
    if (idx.vars[v].kind == RegionKind::global) continue;
    int n = 0;
    bool same = true;
    const BlockRecord* first = nullptr;
    for (auto& b : idx.blocks) {
      if (b.var != v) continue;
      ++n;
      if (first == nullptr)
        first = &b;
      else if (b.checksum != first->checksum || b.count != first->count)
        same = false;
    }
    idx.vars[v].uniform = same && n == m_size;
  }
  if (!m_persistent) return Status::OK();

  // Make it durable and visible: index, renames, directory fsyncs, `latest` (retention runs after the
  // outcome is sent).
  m_root_last.files = static_cast<int>(idx.files.size());
  m_root_last.attrs = idx.attrs;
  return m_store->commit(job.step, encode_index(idx), m_opts.fsync);
}

void RuntimeImpl::apply_retention(std::int64_t just_committed) {
  Status st = m_store->retain(m_opts.keep, just_committed);
  if (!st.ok() && m_opts.verbose >= 1) std::fprintf(stderr, "ckpt: retention: %s\n", st.to_string().c_str());
}

}  // namespace ckpt::detail

namespace ckpt::detail {
std::string RuntimeImpl::transport_names() const {
  std::string n;
  for (auto& t : m_transports)
    if (n.find(t->name()) == std::string::npos) n += (n.empty() ? "" : "+") + std::string(t->name());
  return n;
}
}  // namespace ckpt::detail
