#include "runtime/src/pipeline/pool.hpp"

#include <unistd.h>

#include <algorithm>

namespace ckpt::detail {

std::vector<std::size_t> staging_pieces(std::size_t chunks, std::size_t chunk_bytes, std::size_t max_piece) {
  const std::size_t per = std::max<std::size_t>(1, chunk_bytes == 0 ? 1 : max_piece / chunk_bytes);
  std::vector<std::size_t> pieces;
  for (std::size_t left = chunks; left > 0; left -= std::min(left, per)) pieces.push_back(std::min(left, per));
  return pieces;
}

std::uint64_t auto_pool_chunks(std::uint64_t stream_bytes, std::uint64_t chunk_bytes, int max_in_flight,
                               std::uint64_t have, std::uint64_t node_memory, double fraction, int ranks_on_node) {
  const std::uint64_t share =
      static_cast<std::uint64_t>(fraction * static_cast<double>(node_memory)) / std::max(1, ranks_on_node);
  const std::uint64_t cap = std::max<std::uint64_t>(2, share / chunk_bytes);
  std::uint64_t want = (stream_bytes + chunk_bytes - 1) / chunk_bytes * static_cast<std::uint64_t>(max_in_flight);
  want = std::min(std::max<std::uint64_t>(want, 2), cap);
  // A growing application (AMR refining, walkers multiplying) would otherwise pay an allocation at
  // every checkpoint that is a little larger: grow by half again, so growth costs O(log) allocations.
  if (want > have && have > 0) want = std::min(want + want / 2, cap);
  return want;
}

std::uint64_t auto_chunk_bytes(std::uint64_t stream_bound, std::size_t groups) {
  const std::uint64_t parts = 2 * std::max<std::uint64_t>(1, groups);
  const std::uint64_t c = (stream_bound + parts - 1) / parts;
  return std::min(kMaxAutoChunk, std::max<std::uint64_t>(4096, (c + 4095) / 4096 * 4096));
}

std::uint64_t initial_chunk_bytes(const Options& opts) {
  if (opts.chunk_bytes) return *opts.chunk_bytes;
  if (opts.pool_bytes && opts.incremental)  // two chunks of whole pieces (resolve checks the pool holds two pieces)
    return std::max(opts.incremental_piece_bytes, std::min(kMaxAutoChunk, *opts.pool_bytes / 2) /
                                                      opts.incremental_piece_bytes * opts.incremental_piece_bytes);
  if (opts.pool_bytes)
    return std::min(kMaxAutoChunk, std::max<std::uint64_t>(4096, *opts.pool_bytes / 2 / 4096 * 4096));
  return incremental_chunk(opts, 4096);
}

std::uint64_t incremental_chunk(const Options& opts, std::uint64_t chunk_bytes) {
  if (!opts.incremental) return chunk_bytes;
  const std::uint64_t p = opts.incremental_piece_bytes;
  return (chunk_bytes + p - 1) / p * p;
}

StagingPool::StagingPool(Device& device, std::size_t chunk_bytes) : m_device(device), m_chunk_bytes(chunk_bytes) {}

StagingPool::~StagingPool() {
  for (auto& b : m_blocks) m_device.free_staging(b);
}

Status StagingPool::reserve(std::size_t chunks) {
  std::unique_lock<std::mutex> lk(m_mu);

  const std::size_t have = m_free.size() + m_lent;  // retired chunks are replaced
  if (chunks <= have) return Status::OK();
  const std::size_t add = chunks - have;
  // rechunk() is called on the thread that reserves (the application's), never while chunks are lent.
  const std::size_t chunk_bytes = m_chunk_bytes;
  lk.unlock();  // allocation and touching can take a while; chunks are added atomically below
  std::vector<StagingBlock> blocks;
  for (std::size_t n : staging_pieces(add, chunk_bytes)) {
    auto block = m_device.alloc_staging(n * chunk_bytes);
    if (!block.ok()) {
      for (auto& b : blocks) m_device.free_staging(b);
      return block.status().with_context("staging pool");
    }
    blocks.push_back(block.value());
  }
  lk.lock();
  auto chunks_arr = std::make_unique<Chunk[]>(add);
  std::size_t i = 0;
  for (const StagingBlock& b : blocks) {
    m_blocks.push_back(b);
    auto* base = static_cast<std::uint8_t*>(b.ptr);
    for (std::size_t k = 0; k < b.bytes / chunk_bytes; ++k, ++i) {
      chunks_arr[i] = Chunk{base + k * chunk_bytes, chunk_bytes};
      m_free.push_back(&chunks_arr[i]);
    }
  }
  m_storage.push_back(std::move(chunks_arr));
  lk.unlock();
  m_cv.notify_all();
  return Status::OK();
}

bool StagingPool::rechunk(std::size_t chunk_bytes) {
  std::lock_guard<std::mutex> lk(m_mu);
  if (chunk_bytes == m_chunk_bytes) return true;
  if (m_lent > 0 || m_retired > 0) return false;  // a retired chunk's block may still be written by a copy
  for (auto& b : m_blocks) m_device.free_staging(b);
  m_blocks.clear();
  m_free.clear();
  m_storage.clear();
  m_chunk_bytes = chunk_bytes;
  return true;
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

void StagingPool::retire(Chunk*) {
  std::lock_guard<std::mutex> lk(m_mu);
  --m_lent;
  ++m_retired;
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
std::size_t StagingPool::bytes() const {
  std::lock_guard<std::mutex> lk(m_mu);
  return (m_free.size() + m_lent) * m_chunk_bytes;
}
std::size_t StagingPool::chunk_bytes() const {
  std::lock_guard<std::mutex> lk(m_mu);
  return m_chunk_bytes;
}
std::size_t StagingPool::free_chunks() const {
  std::lock_guard<std::mutex> lk(m_mu);
  return m_free.size();
}
std::size_t StagingPool::high_water() const {
  std::lock_guard<std::mutex> lk(m_mu);
  return m_high;
}
std::size_t StagingPool::pinned_bytes() const {
  std::lock_guard<std::mutex> lk(m_mu);
  std::size_t n = 0;
  for (auto& b : m_blocks)
    if (b.pinned) n += b.bytes;
  return n;
}

std::uint64_t physical_memory() {
  long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGE_SIZE);
  return pages > 0 && page > 0 ? static_cast<std::uint64_t>(pages) * static_cast<std::uint64_t>(page) : (4ull << 30);
}

int streams_in_pool(const Options& opts) {
  return opts.max_in_flight + (opts.on_busy == Options::OnBusy::coalesce ? 1 : 0);
}

Status reserve_for_stream(StagingPool& pool, const Options& opts, std::uint64_t stream_bytes) {
  const std::uint64_t chunk = pool.chunk_bytes();
  const std::uint64_t want_chunks =
      opts.pool_bytes ? *opts.pool_bytes / chunk
                           : auto_pool_chunks(stream_bytes, chunk, streams_in_pool(opts), pool.chunks(),
                                              physical_memory(), opts.pool_max_fraction, pool.ranks_on_node());
  if (want_chunks <= pool.chunks()) return Status::OK();
  // Growing while chunks are lent is safe: new chunks are added, none move.
  return pool.reserve(static_cast<std::size_t>(want_chunks));
}

Status reserve_for_regions(StagingPool& pool, const Options& opts, std::uint64_t stream_bound, std::size_t groups,
                           Resize when) {
  if (!opts.chunk_bytes && !opts.pool_bytes) {
    const std::uint64_t want = incremental_chunk(opts, auto_chunk_bytes(stream_bound, groups)),
                        have = pool.chunk_bytes();
    bool rechunk = false;
    switch (when) {
      case Resize::protect: rechunk = want != have; break;
      case Resize::update: rechunk = want > 2 * have || want < have / 4; break;
      case Resize::checkpoint: rechunk = want > 2 * have && pool.bytes() <= want; break;
    }
    if (rechunk) (void)pool.rechunk(want);
  }
  // Each group's segment starts at a chunk boundary: a stream of `stream_bound` bytes in `groups`
  // segments takes at most ceil(stream_bound / chunk) + groups - 1 chunks.
  const std::uint64_t chunk = pool.chunk_bytes();
  return reserve_for_stream(pool, opts, stream_bound + (groups > 0 ? groups - 1 : 0) * chunk);
}

}  // namespace ckpt::detail
