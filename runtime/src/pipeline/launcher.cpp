// on_busy = coalesce: the capture that waits, and the launcher thread's agreement. See launcher.hpp.
#include "runtime/src/pipeline/launcher.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <string>
#include <utility>

#include "base/mpi.hpp"
#include "runtime/src/pipeline/threads.hpp"

namespace ckpt::detail {

namespace {
/// The budget's burst: the bucket holds at most this much wall time's worth of it (50 ms: at 0.1 of a core
/// 5 ms of CPU, a few checkpoints' worth), so that a quiet stretch does not buy a long burst later.
constexpr double kBurstSeconds = 0.05;
}  // namespace

Launcher::Launcher(MPI_Comm comm, int max_in_flight, ThreadPolicy threads, Device& device, FlushPipeline& flush,
                   StagingPool& pool)
    : m_comm(comm),
      m_max_in_flight(max_in_flight),
      m_budget(threads.meter ? threads.cpu_budget : 0),
      m_meter(threads.meter),
      m_device(device),
      m_flush(flush),
      m_pool(pool) {
  if (m_budget > 0) {
    m_credit_s = m_budget * kBurstSeconds;
    m_cpu_last_s = m_meter->seconds();
    m_budget_last = Clock::now();
  }
  m_reclaimer = std::thread([this, threads] { reclaim_loop(threads); });
  m_thread = std::thread([this, threads = std::move(threads)] {
    start_ckpt_thread("ckpt launch", "ckpt launch", threads);
    set_sleeping_waits(true);
    loop();
  });
}

Launcher::~Launcher() { close(); }

void Launcher::close() {
  {
    std::lock_guard<std::mutex> lk(m_mu);
    m_closing = true;
  }
  m_cv.notify_all();
  if (m_thread.joinable()) m_thread.join();
  {
    std::lock_guard<std::mutex> lk(m_mu);
    if (m_waiting) {
      drop(*m_waiting);
      m_waiting.reset();
    }
  }
  m_reclaim.close();  // the reclaim thread ends once every dropped chunk is back
  if (m_reclaimer.joinable()) m_reclaimer.join();
  free_comm(m_comm);
}

void Launcher::reclaim_loop(const ThreadPolicy& threads) {
  start_ckpt_thread("ckpt reclaim", "ckpt reclaim", threads);
  const Status bound = m_device.bind_thread();
  WorkItem item;
  while (m_reclaim.pop(item)) {
    // A chunk goes back once the copy into it landed; one whose landing cannot be confirmed is retired
    // (also when this thread could not be bound: its wait would create a context on GPU 0).
    if (item.keep_chunk || !bound.ok() || !m_device.wait(item.fence).ok())
      m_pool.retire(item.chunk);
    else
      m_pool.release(item.chunk);
    item = WorkItem();
  }
}

void Launcher::drop(PendingCapture& p) {
  // The copies into the chunks may still be in flight: waiting for them here, on the application
  // thread (supersede_waiting, submit) under m_mu, cost a whole D2H per superseded capture.
  for (WorkItem& item : p.items)
    if (item.chunk != nullptr) m_reclaim.push(std::move(item));
  p.items.clear();
  p.job->ticket->finish(Status(Code::superseded, "checkpoint " + std::to_string(p.job->step) +
                                                     " was superseded by a newer one before it was flushed"));
  if (p.streams) {
    m_verdict_seq = p.seq;
    m_has_verdict = true;
    m_verdict_launched = false;
    m_app_cv.notify_all();
  }
}

void Launcher::launch(PendingCapture& p) {
  ++m_in_flight;
  p.job->flush_start = Clock::now();
  if (p.streams) {
    m_verdict_seq = p.seq;
    m_has_verdict = true;
    m_verdict_launched = true;
    m_app_cv.notify_all();
    return;
  }
  m_flush.push_all(std::move(p.items));
}

void Launcher::supersede_waiting() {
  std::lock_guard<std::mutex> lk(m_mu);
  if (m_waiting && !m_waiting->streams) {
    drop(*m_waiting);
    m_waiting.reset();
  }
}

bool Launcher::submit(PendingCapture p) {
  const bool streams = p.streams;
  const std::uint64_t seq = p.seq;
  std::unique_lock<std::mutex> lk(m_mu);
  if (m_waiting) drop(*m_waiting);
  m_waiting = std::move(p);
  lk.unlock();
  m_cv.notify_all();
  if (!streams) return true;
  lk.lock();
  m_app_cv.wait(lk, [&] { return m_has_verdict && m_verdict_seq == seq; });
  m_has_verdict = false;
  return m_verdict_launched;
}

void Launcher::hurry(bool on) {
  {
    std::lock_guard<std::mutex> lk(m_mu);
    m_hurry = on;
  }
  m_cv.notify_all();
}

long long Launcher::budget_wait_us() {
  if (m_budget <= 0) return 0;
  const auto now = Clock::now();
  const double cpu = m_meter->seconds();
  m_credit_s += m_budget * std::chrono::duration<double>(now - m_budget_last).count() - (cpu - m_cpu_last_s);
  m_credit_s = std::min(m_credit_s, m_budget * kBurstSeconds);
  m_budget_last = now;
  m_cpu_last_s = cpu;
  return m_credit_s >= 0 ? 0 : static_cast<long long>(std::ceil(-m_credit_s / m_budget * 1e6));
}

void Launcher::finished() {
  {
    std::lock_guard<std::mutex> lk(m_mu);
    --m_in_flight;
  }
  m_cv.notify_all();
}

void Launcher::loop() {
  std::unique_lock<std::mutex> lk(m_mu);
  for (;;) {
    m_cv.wait(lk, [&] { return m_closing || (m_in_flight < m_max_in_flight && m_waiting); });
    if (m_closing) return;  // after wait_all on every rank: nothing waits anywhere
    if (!m_hurry && !m_waiting->streams && Clock::now() < m_not_before) {  // the CPU budget (background_cpu)
      // A streaming capture's application waits in checkpoint(): it ends the budget's wait too.
      m_cv.wait_until(lk, m_not_before, [&] { return m_closing || m_hurry || (m_waiting && m_waiting->streams); });
      continue;
    }
    PendingCapture mine = std::move(*m_waiting);  // claimed: the application can no longer replace it
    m_waiting.reset();
    for (;;) {
      // Every rank proposes the capture it holds; equal proposals launch. The same number of rounds
      // on every rank: the loop's exit depends on the allreduce's result alone.
      // With a CPU budget each rank also says how long its threads are over it: the longest wait decides.
      const bool hurry = m_hurry;
      lk.unlock();
      const long long over_us = budget_wait_us();  // a streaming capture's application waits: no budget wait
      long long v[3] = {static_cast<long long>(mine.seq), -static_cast<long long>(mine.seq),
                        hurry || mine.streams ? 0 : over_us},
                r[3] = {0, 0, 0};
      allreduce(v, r, 3, MPI_LONG_LONG, MPI_MAX, m_comm);
      lk.lock();
      const auto newest = static_cast<std::uint64_t>(r[0]), oldest = static_cast<std::uint64_t>(-r[1]);
      if (newest == oldest) {
        launch(mine);
        // Some rank's threads are over their budget: no rank claims the next capture before they are back
        // within it (the same wait on every rank, from the same agreement; a rank in wait_all does not wait).
        m_not_before = Clock::now() + std::chrono::microseconds(r[2]);
        break;
      }
      if (mine.seq == newest) continue;  // the others catch up to it
      // Behind: `newest` was captured elsewhere, so this rank's application captures it too (the
      // calls are collective). Drop what is older, wait for it (or a newer one) and propose again.
      drop(mine);
      for (;;) {
        if (m_closing) return;  // ranks disagree on the number of checkpoints: nothing can launch
        if (m_waiting) {
          if (m_waiting->seq >= newest) break;
          drop(*m_waiting);  // older than what every rank will launch (also wakes a streaming one)
          m_waiting.reset();
        }
        m_cv.wait(lk);
      }
      mine = std::move(*m_waiting);
      m_waiting.reset();
    }
  }
}

}  // namespace ckpt::detail
