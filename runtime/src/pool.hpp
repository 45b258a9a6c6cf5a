// The staging pool: a fixed budget of equal chunks, allocated and touched once (internal).
#ifndef CKPT_RUNTIME_POOL_HPP
#define CKPT_RUNTIME_POOL_HPP

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "ckpt/options.hpp"
#include "gpu/device.hpp"

namespace ckpt::detail {

/// One staging chunk. Owned by the pool; lent to one party at a time (see docs/design.md).
struct Chunk {
  std::uint8_t* data = nullptr;
  std::size_t bytes = 0;
};

/// Thread-safety: all methods are safe to call from any thread.
class StagingPool {
 public:
  /// `device` allocates the memory and must outlive the pool.
  StagingPool(Device& device, std::size_t chunk_bytes);
  ~StagingPool();
  StagingPool(const StagingPool&) = delete;
  StagingPool& operator=(const StagingPool&) = delete;

  /// Grows the pool to at least `chunks` chunks (never shrinks). Allocation and first touch happen here.
  Status reserve(std::size_t chunks);
  /// Takes a free chunk, blocking while none is free. Returns nullptr after shutdown().
  Chunk* acquire();
  /// Gives a chunk back and wakes one waiter.
  void release(Chunk* c);
  /// Wakes every waiter; later acquire() calls return nullptr.
  void shutdown();

  std::size_t chunk_bytes() const { return m_chunk_bytes; }
  std::size_t chunks() const;
  std::size_t free_chunks() const;
  std::size_t bytes() const { return chunks() * m_chunk_bytes; }
  /// Most chunks lent out at the same time since construction.
  std::size_t high_water() const;
  /// Whether every chunk is page-locked.
  bool locked() const;

 private:
  Device& m_device;
  const std::size_t m_chunk_bytes;
  mutable std::mutex m_mu;
  std::condition_variable m_cv;
  std::vector<StagingBlock> m_blocks;

  std::vector<Chunk*> m_free;
  std::vector<std::unique_ptr<Chunk[]>> m_storage;
  std::size_t m_lent = 0, m_high = 0;
  bool m_down = false;
};

/// Grows `pool` so that it can hold what a stream of `stream_bytes` needs under the options' budget
/// (pool_bytes, or max_in_flight streams capped at pool_max_fraction of memory; growth by half again).
Status reserve_for_stream(StagingPool& pool, const Options& opts, std::uint64_t stream_bytes);

/// Bytes of physical memory of this node (4 GiB when unknown).
std::uint64_t physical_memory();

}  // namespace ckpt::detail

#endif  // CKPT_RUNTIME_POOL_HPP
