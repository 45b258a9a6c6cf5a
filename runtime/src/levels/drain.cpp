// The drain thread: node-local checkpoint -> configured transports -> `dir`. See docs/design.md, "Levels".
#include "runtime/src/levels/drain.hpp"

#include <algorithm>
#include <cstdio>
#include <vector>

#include "base/mpi.hpp"
#include "base/posix_io.hpp"
#include "runtime/src/pipeline/threads.hpp"

namespace ckpt::detail {

Drainer::Drainer(const DrainConfig& cfg, const OpenEnv& open, Store& local, const Store& global_store,
                 Committer& global)
    : m_cfg(cfg), m_open(open), m_local(local), m_global_store(global_store), m_global(global) {
  m_thread = std::thread([this] {
    start_ckpt_thread("ckpt drain", "ckpt drain", m_cfg.threads);
    set_sleeping_waits(true);
    loop();
  });
}

Drainer::~Drainer() { close(); }

void Drainer::close() {
  m_queue.close();
  if (m_thread.joinable()) m_thread.join();
  free_comm(m_open.comm);
}

void Drainer::submit(std::shared_ptr<Job> job) {
  {
    std::lock_guard<std::mutex> lk(m_mu);
    ++m_pending;
  }
  m_queue.push(std::move(job));
}

Status Drainer::commit_spilled(std::shared_ptr<Job> job) {
  job->spill_done = std::make_shared<TicketState>();
  Ticket done(job->spill_done);
  submit(std::move(job));
  return done.wait();
}

Status Drainer::wait_idle(bool take) {
  std::unique_lock<std::mutex> lk(m_mu);
  m_cv.wait(lk, [&] { return m_pending == 0; });
  Status s = m_error;
  if (take) m_error = Status::OK();
  return s;
}

void Drainer::loop() {
  std::shared_ptr<Job> job;
  while (m_queue.pop(job)) {
    Status s;
    if (job->spilled) {
      // Not on the node level: its files are in `dir`'s staging directory already; the commit thread
      // waits for the outcome (the application's ticket reports it).
      auto g = global_job(*job);
      g->write = std::move(job->write);
      g->write.handed_over = true;
      Ticket t(g->ticket);
      m_global.submit(std::move(g));
      job->spill_done->finish(t.wait());
      job.reset();
      std::lock_guard<std::mutex> lk(m_mu);
      --m_pending;
      m_cv.notify_all();
      continue;
    }
    ++m_count;  // the same on every rank: the local outcome was agreed
    if (m_cfg.drain_every > 0 && m_count % static_cast<std::uint64_t>(m_cfg.drain_every) == 0) s = drain(*job);
    // Retention of the node level here, after the drain: a checkpoint is never removed locally while
    // it is being read.
    if (m_cfg.node_leader && m_cfg.keep > 0) (void)m_local.retain(m_cfg.keep, job->step);
    job.reset();
    {
      std::lock_guard<std::mutex> lk(m_mu);
      if (!s.ok() && m_error.ok()) m_error = s;
      --m_pending;
    }
    m_cv.notify_all();
  }
}

std::shared_ptr<Job> Drainer::global_job(const Job& local) const {
  auto g = std::make_shared<Job>();
  g->ticket = std::make_shared<TicketState>();
  g->ticket->step = local.step;
  g->ticket->stats = Ticket(local.ticket).stats();
  g->step = local.step;
  g->plan = local.plan;
  g->tmp_dir = m_global_store.staging_dir(local.step);
  g->t0 = local.t0;
  g->flush_start = Clock::now();
  g->digest.progress = local.digest.progress;  // the checksums the digest thread computed
  return g;
}

Status Drainer::drain(const Job& local) {
  auto g = global_job(local);
  const std::size_t nseg = g->plan.segments.size();
  g->write.segment_done.assign(nseg, false);
  g->write.placements.resize(nseg);

  // The write thread's sequence (open every segment, then per segment: start, windows, finish), so
  // that collective transports and writer ranks see the same calls on every rank.
  g->chunk_bytes = m_cfg.chunk_bytes;  // the windows below
  g->write.error = open_writers(m_open, *g, Status::OK());
  FileReader files(m_local.checkpoint_dir(local.step));
  std::vector<std::uint8_t> buf;
  for (std::size_t i = 0; i < nseg; ++i) {
    auto& w = g->write.writers[i];
    if (w) {
      Status st = w->start();  // also after an error: starts may be collective
      if (!st.ok() && g->write.error.ok()) g->write.error = st;
    }
    const Segment& seg = g->plan.segments[i];
    const Placement& from = local.write.placements[i];
    for (std::uint64_t x = seg.begin; x < seg.end && g->write.error.ok(); x += m_cfg.chunk_bytes) {
      const std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(m_cfg.chunk_bytes, seg.end - x));
      buf.resize(std::max(buf.size(), n));
      Status st = files.read(from.file, from.base_offset + (x - seg.begin), buf.data(), n);
      if (st.ok()) st = w ? w->write(x - seg.begin, buf.data(), n) : Status(Code::internal, "segment without a writer");
      if (!st.ok()) g->write.error = st.with_context("draining step " + std::to_string(local.step));
    }
    if (w) {
      if (g->write.error.ok()) {
        auto p = w->finish(segment_digests(*g, i));
        if (p.ok())
          g->write.placements[i] = p.value();
        else
          g->write.error = p.status();
      } else {
        w->abort();
      }
      w.reset();
    }
    g->write.segment_done[i] = true;
  }
  std::uint64_t written = 0;
  for (auto& p : g->write.placements) written += p.file_bytes;
  {
    std::lock_guard<std::mutex> lk(g->ticket->mu);
    g->ticket->stats.flush_s = seconds_since(g->flush_start);
    g->ticket->stats.durable_s = seconds_since(g->t0);
    g->ticket->stats.bytes_written = written;
  }
  g->write.handed_over = true;
  Ticket t(g->ticket);
  m_global.submit(std::move(g));
  return t.wait();  // one drain at a time: the next one starts after this commit in `dir`
}

}  // namespace ckpt::detail
