/// \file options.hpp
/// Every tunable of ckpt in one typed struct. Parsed and validated in one place (options.cpp);
/// the table in docs/options.md documents each field, its YAML key and its CKPT_* variable.
#ifndef CKPT_RUNTIME_OPTIONS_HPP
#define CKPT_RUNTIME_OPTIONS_HPP

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "ckpt/export.h"
#include "ckpt/status.hpp"

namespace ckpt {

/// Options of a Runtime. Plain value type; not thread-safe to mutate while a Runtime reads it
/// (the Runtime keeps its own copy, so changing an Options after construction has no effect).
struct CKPT_API Options {
  /// Defaults, then CKPT_* environment overrides. A bad variable is recorded in `error`
  /// (a Runtime built from it reports that error) rather than thrown.
  Options();

  /// Defaults only; the environment is not read.
  static Options defaults();

  /// Defaults, then the YAML file at `path`, then CKPT_* environment overrides.
  /// Errors (missing file, unknown key, bad value) are recorded in `error`; see try_load().
  static Options load(const std::string& path);

  /// As load(), but the error is returned instead of stored.
  static Result<Options> try_load(const std::string& path);

  /// Defaults, then the YAML file at `path` (none when `path` is empty), then `yaml`: the text of a
  /// YAML map with the keys of a config file (JSON is YAML too; a language binding's dictionary of
  /// options, e.g. the Python package's), then CKPT_* environment overrides. Errors name the file, or
  /// "options" for `yaml`; they are recorded in `error` (see try_load()).
  static Options load(const std::string& path, const std::string& yaml);
  /// As load(path, yaml), but the error is returned instead of stored.
  static Result<Options> try_load(const std::string& path, const std::string& yaml);

  /// Applies CKPT_* variables from the environment on top of this object. A bad value of a known
  /// variable is an error naming it. An unknown CKPT_* name (a site's CKPT_ROOT, a misspelling) is not:
  /// it is recorded in `warnings` with the nearest known name, and the Runtime prints it on rank 0.
  Status apply_env();

  /// Checks ranges and consistency (e.g. chunk_bytes > 0, keep >= 1). Called by Runtime too.
  Status validate() const;

  /// Checkpoint directory; holds ckpt.<step>/ directories and the `latest` link. [CKPT_DIR]
  std::string dir = "ckpt";
  /// Transport name: posix, null (mpiio, rbio, hdf5, hdf5-sync when built). [CKPT_TRANSPORT]
  std::string transport = "posix";
  /// Staging pool budget in bytes; 0 = auto (one whole checkpoint x max_in_flight, one more with
  /// on_busy = coalesce, capped at this rank's share of pool_max_fraction of the node's memory). Reserved when the
  /// Runtime is made (a fixed budget) or as regions are protected (auto), not inside checkpoint(). [CKPT_POOL_BYTES,
  /// accepts 64M, 1G, 512KiB]
  std::uint64_t pool_bytes = 0;
  /// Cap of the auto pools of all ranks of a node together, as a fraction of the node's physical memory,
  /// in (0, 0.9]; each rank gets 1/(ranks on the node) of it. [CKPT_POOL_MAX_FRACTION]
  double pool_max_fraction = 0.25;
  /// Size of one staging chunk and of one write, bytes; 0 = auto: the chunks follow the protected state
  /// (half of it, rounded up to 4 KiB, at most 16 MiB; half of a fixed pool_bytes), so that a small
  /// state gets a small pool. [CKPT_CHUNK_BYTES]
  std::uint64_t chunk_bytes = 0;
  /// Checkpoints that may be captured but not yet committed; checkpoint() waits beyond this.
  /// 1 = double buffering (the application's data + one staged copy). [CKPT_MAX_IN_FLIGHT]
  int max_in_flight = 1;
  /// What checkpoint() does when max_in_flight checkpoints are in flight: wait for the oldest to
  /// commit, or coalesce: capture anyway (into a spare set of chunks) and replace the capture that
  /// waits to be flushed, whose ticket ends with Code::superseded (not a failure). Spelled "wait" and
  /// "coalesce" in files and variables (parse_on_busy). [CKPT_ON_BUSY]
  enum class OnBusy { wait, coalesce };
  OnBusy on_busy = OnBusy::wait;
  /// How checkpoints are stored under `dir` (docs/format.md): "directory", one directory per
  /// checkpoint committed by renames; "series", every checkpoint of a run appended to files opened once
  /// (one per rank and segment) and committed by a checksummed record appended to the segment's step
  /// log: no directory operation per checkpoint. series needs the posix transport, no transport groups
  /// and no local_dir. [CKPT_LAYOUT]
  enum class Layout { directory, series };
  Layout layout = Layout::directory;
  /// series: a new segment (series.<k>/) starts when one rank's data file would grow past this
  /// many bytes (at least one checkpoint per segment). [CKPT_SEGMENT_BYTES]
  std::uint64_t segment_bytes = 1ull << 30;
  /// series: a new segment starts after this many checkpoints; 0 = no limit. [CKPT_SEGMENT_STEPS]
  int segment_steps = 0;
  /// Complete checkpoints kept on disk; older ones are removed after a newer commit. With layout
  /// series, whole segments are removed: at least `keep` are kept. [CKPT_KEEP]
  int keep = 2;
  /// fdatasync data and fsync index and directories before a checkpoint counts. [CKPT_FSYNC]
  bool fsync = true;
  /// With fsync: 0 = every commit is fsynced before its ticket completes. N > 0 = a commit is visible at
  /// once (it survives a crash of the processes) and the checkpoint directory is fsynced at most every
  /// N ms (then it survives a crash of the node); CheckpointStats::synced says which. close() syncs
  /// what is left. [CKPT_DURABLE_EVERY_MS]
  int durable_every_ms = 0;
  /// posix transport: write checkpoint data with O_DIRECT, from the staging chunks straight to the
  /// device (no copy into the page cache, no dirty pages for the kernel to write back while the
  /// application computes), wherever address, offset and length are multiples of 4 KiB; the rest,
  /// and file systems that refuse O_DIRECT (tmpfs), go through the page cache. [CKPT_DIRECT_IO]
  bool direct_io = true;
  /// Scheduler slice (microseconds) ckpt's own threads ask Linux for (sched_setattr's sched_runtime,
  /// EEVDF, kernel >= 6.12; older kernels ignore it): a woken ckpt thread (a digest, a write, a poll of
  /// an agreement) then runs at once for its short piece of work instead of after the computing
  /// thread's slice of a few ms. 0 = the kernel's default slice; -1 (`auto`, the default) = 100 us with
  /// on_busy wait (the application waits for the pipeline: finishing it sooner is its gain, and every
  /// checkpoint is written either way) and 0 with coalesce (a faster pipeline writes more of the
  /// checkpoints it is offered, and that CPU is the compute's). docs/performance.md. [CKPT_THREAD_SLICE_US]
  int thread_slice_us = -1;
  /// CPUs ckpt's own threads run on: "auto" = the node's CPUs that no rank is bound to, when
  /// mpiexec/srun left some (the threads then use idle cores instead of the application's), else the
  /// application thread's binding; "all" = every CPU the process's cpuset allows; "inherit" = the
  /// application thread's binding, as threads normally get; or a list such as "8-15" (cores set aside
  /// for I/O; a list naming a CPU outside the process's cpuset fails the Runtime's construction with
  /// invalid_argument). [CKPT_THREAD_CPUS]
  std::string thread_cpus = "auto";
  /// Alignment in bytes of blocks of at least 64 KiB in data files (power of two). [CKPT_ALIGNMENT]
  std::uint64_t alignment = 4096;
  /// Compute per-block min/max of numeric data into the index. [CKPT_STATS]
  bool stats = true;
  /// Messages on stderr: 0 quiet, 1 one line per commit/restart on rank 0, 2 more. [CKPT_VERBOSE]
  int verbose = 0;
  /// CUDA: device-side double buffering (copy D2D into a spare device buffer, release the application's
  /// stream, then D2H from the spare): "off", "on" (spare of gpu_spare_bytes, which must be > 0) or
  /// "auto" (the spare follows the device bytes of the last captures, at most gpu_spare_bytes, or 1/16
  /// of the device's memory when that is 0). Data that does not fit the spare goes straight D2H. Off by
  /// default until verified on a GPU. [CKPT_GPU_DOUBLE_BUFFER]
  enum class DoubleBuffer { off, on, automatic /* "auto" */ };
  DoubleBuffer gpu_double_buffer = DoubleBuffer::off;
  /// CUDA: spare buffer size for gpu_double_buffer = on; the cap of the spare for auto (0: device
  /// memory / 16). [CKPT_GPU_SPARE_BYTES]
  std::uint64_t gpu_spare_bytes = 0;
  /// Directory for the runtime's trace: at close(), rank 0 writes trace.json (Chrome trace of every
  /// rank's threads), summary.json (per-checkpoint I/O summary) and prints the summary table on
  /// stderr. Empty = off. [CKPT_TRACE]
  std::string trace;
  /// Testing aid: the flush thread sleeps this many ms before each chunk write. [CKPT_FLUSH_DELAY_MS]
  int flush_delay_ms = 0;
  /// Which threads make ckpt's MPI calls. "multiple": the commit runs on a background thread and the
  /// write thread calls MPI (mpiio, rbio, hdf5); needs MPI_THREAD_MULTIPLE. "funneled": every MPI call
  /// of ckpt is made on the application thread, inside checkpoint(), Ticket::wait(), poll(),
  /// wait_all(), restart(), latest() and close() (a commit then waits for one of them; transports whose
  /// writers call MPI are refused). "auto": multiple when MPI_Query_thread says MPI_THREAD_MULTIPLE,
  /// funneled otherwise. [CKPT_MPI_THREADS]
  enum class MpiThreads { automatic /* "auto" */, multiple, funneled };
  MpiThreads mpi_threads = MpiThreads::automatic;

  /// rbio: number of writer ranks ng; 0 = one per node (ranks sharing a host name). [CKPT_RBIO_WRITERS]
  int rbio_writers = 0;
  /// rbio: files per checkpoint; 0 = one per writer (nf = ng), 1 = one shared file. [CKPT_RBIO_FILES]
  int rbio_files = 0;
  /// mpiio (coIO): files per checkpoint nf; ranks are split into nf contiguous groups. [CKPT_MPIIO_FILES]
  int mpiio_files = 1;
  /// MPI-IO hints for mpiio and rbio files, "key=value,key=value" (cb_buffer_size, cb_nodes,
  /// romio_cb_write, striping_factor, striping_unit). In YAML also a map. [CKPT_MPIIO_HINTS]
  std::string mpiio_hints;
  /// Round-robin token on file open (as ADIOS's MPI method): at most this many ranks open files at the same time;
  /// 0 = no token. [CKPT_OPEN_TOKEN]
  int open_token = 0;

  /// Node-local directory (NVMe, RAM disk): when set, every checkpoint is committed there first (per
  /// node, posix files), then drained in the background to `dir` (see drain_every). Empty = off, every
  /// checkpoint goes to `dir` only. See docs/design.md, "Levels". [CKPT_LOCAL_DIR]
  std::string local_dir;
  /// With local_dir: drain every n-th locally complete checkpoint to `dir` through the configured
  /// transport; 0 = never, 1 = all. [CKPT_DRAIN_EVERY]
  int drain_every = 1;
  /// With local_dir: ranks per node; n > 0 makes rank r a member of node r / n, whose local directory is
  /// `<local_dir>/node<k>` (one machine simulates several nodes); 0 = the nodes MPI reports
  /// (MPI_Comm_split_type SHARED), each using `local_dir` itself. [CKPT_RANKS_PER_NODE]
  int ranks_per_node = 0;
  /// With local_dir: protection of the node level against the loss of a node: "none", or "partner"
  /// (each rank's files are also copied, over MPI, to the same rank of the next node, node (k+1) mod
  /// nodes; a lost node is rebuilt from that copy at restart), or "xor" (the nodes of a group of
  /// `xor_group` store XOR parity of each other's files; one lost node per group is rebuilt from it).
  /// [CKPT_REDUNDANCY]
  std::string redundancy = "none";
  /// With redundancy "xor": nodes per parity group (>= 2); the last group takes the nodes left over.
  /// [CKPT_XOR_GROUP]
  int xor_group = 4;
  /// With local_dir: complete checkpoints kept in `dir` (the drained level); 0 = `keep`.
  /// [CKPT_KEEP_GLOBAL]
  int keep_global = 0;

  /// A group of variables with its own transport (YAML only): variables whose name matches one of
  /// `match` (shell globs, e.g. "walkers/*") go through `transport`; others use `transport` above.
  /// CKPT_TRANSPORT overrides the transport of every group.
  struct Group {
    std::string name;
    std::vector<std::string> match;
    std::string transport;
  };
  std::vector<Group> groups;

  /// Non-ok when construction from the environment or a file failed.
  Status error;
  /// Messages about the environment that are not errors (unknown CKPT_* variables), one per line; a
  /// Runtime built from these options prints them once on rank 0 ("ckpt: warning: ...").
  std::vector<std::string> warnings;

 private:
  explicit Options(int no_env);
};

/// Parses a byte count such as "4096", "64M", "64MiB", "1G", "512k" (binary multiples).
CKPT_API Result<std::uint64_t> parse_bytes(const std::string& text);

/// Parses on_busy's spelling in files and CKPT_* variables: "wait" or "coalesce".
CKPT_API Result<Options::OnBusy> parse_on_busy(const std::string& text);
/// The spelling of an on_busy value ("wait", "coalesce"), as parse_on_busy() reads it.
CKPT_API const char* on_busy_name(Options::OnBusy v) noexcept;

/// Parses layout's spelling in files and CKPT_* variables: "directory" or "series".
CKPT_API Result<Options::Layout> parse_layout(const std::string& text);

/// Parses gpu_double_buffer's spelling in files and CKPT_* variables: "off", "on" or "auto".
CKPT_API Result<Options::DoubleBuffer> parse_double_buffer(const std::string& text);

}  // namespace ckpt

#endif  // CKPT_RUNTIME_OPTIONS_HPP
