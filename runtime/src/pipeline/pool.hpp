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
#include "runtime/src/api/resolve.hpp"

namespace ckpt::detail {

/// One staging chunk. Owned by the pool; lent to one party at a time (see docs/design.md).
struct Chunk {
  std::uint8_t* data = nullptr;
  std::size_t bytes = 0;
};

/// Largest staging allocation: pinning many GiB in one call fails where pieces succeed, and takes the
/// driver's lock for seconds.
constexpr std::size_t kMaxStagingPiece = std::size_t{1} << 30;

/// How `chunks` chunks of `chunk_bytes` are allocated: chunks per piece, each piece at most
/// `max_piece` bytes (at least one chunk), so that no chunk straddles two allocations.
std::vector<std::size_t> staging_pieces(std::size_t chunks, std::size_t chunk_bytes,
                                        std::size_t max_piece = kMaxStagingPiece);

/// Chunks the auto pool wants for a stream of `stream_bytes`: one stream per checkpoint in flight, at
/// least 2, grown by half again over `have` (so a growing application pays O(log) allocations),
/// capped at `fraction` of the node's `node_memory` shared by the `ranks_on_node` ranks there.
std::uint64_t auto_pool_chunks(std::uint64_t stream_bytes, std::uint64_t chunk_bytes, int max_in_flight,
                               std::uint64_t have, std::uint64_t node_memory, double fraction, int ranks_on_node);

/// The auto chunk size (chunk_bytes = 0) for a stream of at most `stream_bound` bytes in `groups`
/// transport groups: the stream in 2 x groups chunks, rounded up to 4 KiB, from 4 KiB to kMaxAutoChunk.
/// One stream then takes at most 1.5x its bytes of staging (exactly its bytes, rounded up to pages,
/// with one group), instead of two chunks of 16 MiB for a state of some KiB.
std::uint64_t auto_chunk_bytes(std::uint64_t stream_bound, std::size_t groups);

/// The chunk size a Runtime starts with: chunk_bytes when set; with chunk_bytes = 0, half of a fixed
/// pool_bytes (at most kMaxAutoChunk), or 4 KiB until regions are protected (see reserve_for_regions).
std::uint64_t initial_chunk_bytes(const Options& opts);
/// `chunk_bytes`, with option incremental rounded up to a multiple of incremental_piece_bytes (so that no
/// piece of a block straddles two chunks: the plan aligns pieced blocks to the piece size).
std::uint64_t incremental_chunk(const Options& opts, std::uint64_t chunk_bytes);

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
  /// Frees every chunk and makes later chunks `chunk_bytes` long, when no chunk is lent or retired (a
  /// stream being captured, written or restored keeps the size it was planned with); returns whether
  /// the chunks now have that size. The caller reserve()s again.
  bool rechunk(std::size_t chunk_bytes);
  /// Takes a free chunk, blocking while none is free. Returns nullptr after shutdown().
  Chunk* acquire();
  /// Gives a chunk back and wakes one waiter.
  void release(Chunk* c);
  /// Takes a lent chunk out of service for good: a copy into it may still be in flight (its fence
  /// could not be waited on), so it must never be handed out again. Its memory is freed with the pool;
  /// chunks() no longer counts it, so reserve() replaces it.
  void retire(Chunk* c);
  /// Wakes every waiter; later acquire() calls return nullptr.
  void shutdown();

  std::size_t chunks() const;
  std::size_t free_chunks() const;
  std::size_t bytes() const;
  /// Size of every chunk; changes only through rechunk().
  std::size_t chunk_bytes() const;
  /// Most chunks lent out at the same time since construction.
  std::size_t high_water() const;
  /// Bytes of the pool the GPU can DMA to (StagingBlock::pinned); < bytes() means the device fell
  /// back to pageable memory for some chunks and their copies are synchronous.
  std::size_t pinned_bytes() const;
  /// Ranks sharing this node's memory (the auto pool's cap is their share); set once, before use.
  void set_ranks_on_node(int n) { m_ranks_on_node = n < 1 ? 1 : n; }
  int ranks_on_node() const { return m_ranks_on_node; }

 private:
  Device& m_device;
  mutable std::mutex m_mu;
  std::size_t m_chunk_bytes;
  std::condition_variable m_cv;
  std::vector<StagingBlock> m_blocks;

  std::vector<Chunk*> m_free;
  std::vector<std::unique_ptr<Chunk[]>> m_storage;
  std::size_t m_lent = 0, m_high = 0, m_retired = 0;
  int m_ranks_on_node = 1;
  bool m_down = false;
};

/// Whole checkpoints the auto pool holds: max_in_flight, and one more for the capture that waits with
/// on_busy = coalesce.
int streams_in_pool(const Options& opts);

/// Grows `pool` so that it can hold what a stream of `stream_bytes` needs under the options' budget
/// (pool_bytes, or max_in_flight streams capped at this rank's share of pool_max_fraction of the
/// node's memory; growth by half again; see auto_pool_chunks). Keeps the pool's chunk size.
Status reserve_for_stream(StagingPool& pool, const Options& opts, std::uint64_t stream_bytes);

/// Where reserve_for_regions is called from: how far the chunk size may follow the state.
enum class Resize : std::uint8_t {
  protect,     ///< protect(): re-chunk to the exact size whenever it differs
  update,      ///< update() (every step in some applications): only when off by more than 2x up or 4x down
  checkpoint,  ///< inside checkpoint() (regions with a Source): see reserve_for_regions
};

/// Sizes `pool` for the protected regions (`stream_bound`, Registry::stream_bound, in `groups` transport
/// groups). With chunk_bytes = 0 and an auto pool, the chunks follow the state (auto_chunk_bytes) as
/// `when` allows. Re-chunking frees the pool's memory and allocates it again (pinning again what it
/// held: seconds at 16 GiB), so inside checkpoint() it happens only while the pool holds no more than
/// one chunk of the new size (a Source that was empty or tiny when protected); otherwise the pool grows
/// by pieces in its present chunk size, keeping what it holds. Nothing is re-chunked while chunks are
/// lent (checkpoints in flight). Then the pool is reserved for one stream of the regions.
Status reserve_for_regions(StagingPool& pool, const Options& opts, std::uint64_t stream_bound, std::size_t groups,
                           Resize when);

/// Bytes of physical memory of this node (4 GiB when unknown).
std::uint64_t physical_memory();

}  // namespace ckpt::detail

#endif  // CKPT_RUNTIME_POOL_HPP
