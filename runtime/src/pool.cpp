#include "runtime/src/pool.hpp"

#include <unistd.h>

#include <algorithm>

namespace ckpt::detail {

StagingPool::StagingPool(Device& device, std::size_t chunk_bytes) : m_device(device), m_chunk_bytes(chunk_bytes) {}

StagingPool::~StagingPool() {
  for (auto& b : m_blocks) m_device.free_staging(b);
}

Status StagingPool::reserve(std::size_t chunks) {
  std::unique_lock<std::mutex> lk(m_mu);

  const std::size_t have = m_free.size() + m_lent;
  if (chunks <= have) return Status::OK();
  const std::size_t add = chunks - have;
  lk.unlock();  // allocation and touching can take a while; chunks are added atomically below
  auto block = m_device.alloc_staging(add * m_chunk_bytes);
  if (!block.ok()) return block.status().with_context("staging pool");
  lk.lock();
  m_blocks.push_back(block.value());
  auto chunks_arr = std::make_unique<Chunk[]>(add);
  auto* base = static_cast<std::uint8_t*>(block.value().ptr);
  for (std::size_t i = 0; i < add; ++i) {
    chunks_arr[i] = Chunk{base + i * m_chunk_bytes, m_chunk_bytes};
    m_free.push_back(&chunks_arr[i]);
  }
  m_storage.push_back(std::move(chunks_arr));
  lk.unlock();
  m_cv.notify_all();
  return Status::OK();
}

Chunk* StagingPool::acquire() {
  std::unique_lock<std::mutex> lk(m_mu);
  m_cv.wait(lk, [&] { return m_down || !m_free.empty(); });
  if (m_down) return nullptr;
  Chunk* c = m_free.back();
  m_free.pop_back();
  ++m_lent;
  if (m_lent > m_high) m_high = m_lent;
  return c;
}

void StagingPool::release(Chunk* c) {
  {
    std::lock_guard<std::mutex> lk(m_mu);
    m_free.push_back(c);
    --m_lent;
  }
  m_cv.notify_one();
}

void StagingPool::shutdown() {
  {
    std::lock_guard<std::mutex> lk(m_mu);
    m_down = true;
  }
  m_cv.notify_all();
}

std::size_t StagingPool::chunks() const {
  std::lock_guard<std::mutex> lk(m_mu);
  return m_free.size() + m_lent;
}
std::size_t StagingPool::free_chunks() const {
  std::lock_guard<std::mutex> lk(m_mu);
  return m_free.size();
}
std::size_t StagingPool::high_water() const {
  std::lock_guard<std::mutex> lk(m_mu);
  return m_high;
}
bool StagingPool::locked() const {
  std::lock_guard<std::mutex> lk(m_mu);
  for (auto& b : m_blocks)
    if (!b.locked) return false;
  return true;
}

std::uint64_t physical_memory() {
  long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGE_SIZE);
  return pages > 0 && page > 0 ? static_cast<std::uint64_t>(pages) * static_cast<std::uint64_t>(page) : (4ull << 30);
}

Status reserve_for_stream(StagingPool& pool, const Options& opts, std::uint64_t stream_bytes) {
  const std::uint64_t chunk = opts.chunk_bytes;
  std::uint64_t want_chunks;
  if (opts.pool_bytes != 0) {
    want_chunks = opts.pool_bytes / chunk;
  } else {
    const std::uint64_t cap = std::max<std::uint64_t>(
        2, static_cast<std::uint64_t>(opts.pool_max_fraction * static_cast<double>(physical_memory())) / chunk);
    want_chunks = (stream_bytes + chunk - 1) / chunk * static_cast<std::uint64_t>(opts.max_in_flight);
    want_chunks = std::min(std::max<std::uint64_t>(want_chunks, 2), cap);
    // A growing application (AMR refining, walkers multiplying) would otherwise pay an allocation at
    // every checkpoint that is a little larger: grow by half again, so growth costs O(log) allocations.
    if (want_chunks > pool.chunks() && pool.chunks() > 0) want_chunks = std::min(want_chunks + want_chunks / 2, cap);
  }
  if (want_chunks <= pool.chunks()) return Status::OK();
  // Growing while chunks are lent is safe: new chunks are added, none move.
  return pool.reserve(static_cast<std::size_t>(want_chunks));
}

}  // namespace ckpt::detail
