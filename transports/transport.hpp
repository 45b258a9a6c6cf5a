/// \file transport.hpp
/// Where a rank's checkpoint stream goes (internal). One Transport per I/O
/// method, made by name through the registry in registry.cpp. See docs/adding-a-transport.md.
#ifndef CKPT_TRANSPORTS_TRANSPORT_HPP
#define CKPT_TRANSPORTS_TRANSPORT_HPP

#include <mpi.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "base/format.hpp"
#include "base/layout.hpp"
#include "ckpt/status.hpp"
#include "ckpt/types.hpp"

namespace ckpt::detail {

/// What a writer needs to know about the checkpoint it writes. Built by the thread that opens.
struct WriteContext {
  std::string dir;  ///< the checkpoint's temporary directory (ckpt.<step>.tmp), exists
  std::int64_t step = 0;
  int rank = 0;
  int nranks = 1;
  std::uint64_t ckpt_id = 0;  ///< same on every rank
  bool fsync = true;
  /// Start the write-back of each write at once (posix: sync_file_range), so that the disk works while
  /// the rest is written and the sync - finish()'s fdatasync, or the periodic one of durable_every_ms -
  /// waits only for what is still in flight. Set when the Runtime will sync this data (option fsync).
  bool writeback = false;
  const StreamPlan* plan = nullptr;  ///< this rank's stream; valid until finish()/abort() returns
  std::uint32_t group = 0;           ///< transport group; its part of the stream is [begin, end)
  std::uint64_t segment_begin = 0, segment_end = 0;
  /// The length of every write() of this segment but the last (the pipeline's staging chunk, the
  /// drain's piece): a writer that makes one collective call per write() (mpiio) counts its calls with it.
  /// A per-rank value (the auto chunk follows each rank's state): such writers agree on the count.
  std::uint64_t write_bytes = 0;
  /// Bytes of this writer's part of the stream (write() offsets are relative to segment_begin).
  std::uint64_t bytes() const { return segment_end - segment_begin; }
  /// "<prefix>.<k>" for group 0, "g<group>.<prefix>.<k>" otherwise: file names unique per group.
  std::string file_name(const std::string& prefix, int k) const {
    return (group == 0 ? std::string() : "g" + std::to_string(group) + ".") + prefix + "." + std::to_string(k);
  }
  /// file_name() with this checkpoint's id in it: "<prefix>.<id>.<k>", for files opened with
  /// MPI_File_open. Open MPI 4.1's OMPIO names a POSIX semaphore after the file's base name
  /// (sharedfp/sm, /dev/shm/sem.OMPIO_<name>); a job killed inside MPI_File_open leaves it taken, and
  /// every later open of a file with that base name - on any path, by any job - waits forever.
  /// With the id in the name no later checkpoint has the same base name.
  std::string unique_file_name(const std::string& prefix, int k) const {
    char id[17];
    std::snprintf(id, sizeof id, "%016llx", static_cast<unsigned long long>(ckpt_id));
    return file_name(prefix + "." + id, k);
  }
};

/// The encoded data-file header of a file written by rank `writer` for this checkpoint.
inline std::vector<std::uint8_t> encode_header_for(const WriteContext& ctx, int writer, std::uint64_t data_offset) {
  DataHeader h;
  h.step = ctx.step;
  h.writer = static_cast<std::uint32_t>(writer);
  h.nranks = static_cast<std::uint32_t>(ctx.nranks);
  h.ckpt_id = ctx.ckpt_id;
  h.data_offset = data_offset;
  return encode_data_header(h);
}

/// A transport's settings: the few options transports read, typed, made from Options by the runtime
/// (transport_config() in runtime/src/api/resolve.cpp), so that a transport never sees the rest.
struct TransportConfig {
  std::uint64_t alignment = 4096;       ///< blocks of >= 64 KiB start at a multiple (power of two)
  std::uint64_t chunk_bytes = 4 << 20;  ///< staging chunk size (mpiio writes in pieces of it)
  int open_token = 0;                   ///< posix: at most this many ranks open files at once; 0 = no token
  int mpiio_files = 1;                  ///< mpiio: files per checkpoint
  int rbio_writers = 0;                 ///< rbio: writer ranks; 0 = one per node
  int rbio_files = 0;                   ///< rbio: 0 = one file per writer, 1 = one shared file
  Attributes mpiio_hints;               ///< MPI-IO hints (mpiio, rbio): validated key/value pairs, byte counts in bytes
  /// layout series (posix only): every checkpoint is appended to this rank's file of the segment
  /// (WriteContext::dir), kept open from one checkpoint to the next.
  bool append = false;
  /// posix: write the data with O_DIRECT where address, offset and length allow (option direct_io).
  bool direct_io = false;
};

/// What a transport may use from the Runtime, given once at construction (collective).
struct TransportEnv {
  MPI_Comm comm = MPI_COMM_NULL;  ///< the Runtime's communicator; a transport dups what it needs
  int rank = 0;
  int size = 1;
};

/// Checksum and statistics of one block, computed by the flush threads before finish().
struct BlockDigest {
  std::uint64_t checksum = 0;
  bool has_stats = false;
  std::uint64_t min_bits = 0, max_bits = 0;
};

/// Where a rank's stream ended up: stream byte x is at byte `base_offset + x` of `file` - or, for
/// transports that place each block on its own (HDF5), at `block_offsets[var]`.
struct Placement {
  Placement() = default;
  Placement(std::string f, int w, std::uint64_t base, std::uint64_t bytes)
      : file(std::move(f)), writer(w), base_offset(base), file_bytes(bytes) {}
  std::string file;  ///< name relative to the checkpoint directory
  int writer = 0;    ///< rank that wrote it
  std::uint64_t base_offset = 0;
  std::uint64_t file_bytes = 0;              ///< size of the file this rank wrote (0 if another rank owns it)
  /// The size the index records for `file` where file_bytes is 0 but this rank knows it (mpiio: agreed at
  /// the open; hdf5: rank 0's stat after the close, broadcast; rbio's shared file: the writers' allreduce,
  /// broadcast to their groups), so that every rank reports the same record (Transport::index_writer);
  /// 0: file_bytes.
  std::uint64_t record_bytes = 0;
  std::uint64_t appended_at = 0;             ///< layout series: where this checkpoint's bytes begin in the file
  Attributes attrs;                          ///< facts worth recording in the index (e.g. MPI-IO hints in effect)
  std::vector<std::uint64_t> block_offsets;  ///< per plan variable: file offset of its block; empty = linear
  /// The node level (runtime/src/levels/spill.hpp): the node's disk was full, so this file went to the
  /// staging directory of `dir` instead.
  bool spilled = false;
};

/// Writes one rank's stream of one checkpoint. Created by Transport::open(), then used by the
/// flush thread only: write() calls come in increasing offset order, then finish() or abort().
class Writer {
 public:
  virtual ~Writer() = default;
  /// Called by the flush thread on every rank, in segment order, before the first write() (also when
  /// this rank has nothing to write): the place for collective set-up that must not run on the
  /// application thread.
  virtual Status start() { return Status::OK(); }
  /// Writes `n` bytes of this writer's part of the stream at `offset` (relative to segment_begin).
  virtual Status write(std::uint64_t offset, const void* data, std::size_t n) = 0;
  /// Makes the data durable (fdatasync when ctx.fsync) and closes; returns where it went.
  /// `digests` has one entry per plan variable (valid for the variables of this writer's segment).
  virtual Result<Placement> finish(const std::vector<BlockDigest>& digests) = 0;
  /// Drops what was written (closes and removes partial files).
  virtual void abort() = 0;
};

/// An I/O method.
class Transport {
 public:
  virtual ~Transport() = default;
  virtual const char* name() const = 0;
  /// Opens this rank's writer for one checkpoint, on the flush (write) thread - on the application
  /// thread, inside checkpoint(), when synchronous().
  virtual Result<std::unique_ptr<Writer>> open(const WriteContext& ctx) = 0;
  /// Whether checkpoints written by this transport reach the disk (false for null).
  virtual bool persistent() const { return true; }
  /// Whether open() is collective (MPI-IO, rbIO, HDF5). The runtime then agrees on the checkpoint's
  /// setup (temporary directory, staging pool) before opening, so that after a failure on any rank no
  /// rank creates files and every rank skips open() together.
  virtual bool collective_open() const { return false; }
  /// Whether open() writes the whole checkpoint (hdf5-sync, the papers' blocking baseline): the
  /// runtime then opens on the application thread, inside checkpoint().
  virtual bool synchronous() const { return false; }
  /// Whether its writers call MPI after open() (start(), write(), finish() on the write thread: mpiio,
  /// rbio, hdf5). Such a transport cannot run when ckpt's MPI calls are funneled through the
  /// application thread (Options::mpi_threads).
  virtual bool writes_with_mpi() const { return false; }
  /// Checks a region of this transport's group when it is protected or updated (or located, for a
  /// Source), so that a constraint of the transport fails there, naming the variable, and not at the
  /// commit. Every region by default.
  virtual Status check_region(const Region& r) const {
    (void)r;
    return Status::OK();
  }
  /// The two-level index (index_format 2): which rank may write the sub-index that holds this rank's
  /// blocks. kOwnFiles: the file records this rank reports are whole - every rank that lists a file
  /// reports the same record (name, writer, size): its own files (posix), or a shared file whose size
  /// every rank of it reports (mpiio, hdf5, rbio with one file: Placement::record_bytes) - so any writer
  /// that holds the rank will do, the rank itself as a rule; a rank number: every file this rank's
  /// blocks go to is written by that rank, for its group of ranks alone, and only that rank knows its
  /// size (rbio with a file per writer); kSharedFiles (the default, for a transport that promises
  /// neither): rank 0 merges every rank's records and writes every sub-index.
  static constexpr int kOwnFiles = -1, kSharedFiles = -2;
  virtual int index_writer() const { return kSharedFiles; }
};

/// Makes the transport called `name`. Known names that were not built answer `unavailable` with the
/// reason; unknown names answer `invalid_argument` listing the known ones.
/// Collective over env.comm (transports may split or dup it).
Result<std::unique_ptr<Transport>> make_transport(const std::string& name, const TransportConfig& config,
                                                  const TransportEnv& env);

}  // namespace ckpt::detail

#endif  // CKPT_TRANSPORTS_TRANSPORT_HPP
