// The resolve step (internal): Options -> the Runtime's immutable settings. Every rule between options,
// and between options and what this rank runs on (MPI's thread level, the node's memory, the cpuset,
// the transports the options name), is checked here and only here; the job-wide options are agreed
// across ranks here; the components get typed settings made here, never all of Options.
#ifndef CKPT_RUNTIME_SRC_RESOLVE_HPP
#define CKPT_RUNTIME_SRC_RESOLVE_HPP

#include <mpi.h>

#include <memory>
#include <string>
#include <vector>

#include "base/layout.hpp"
#include "base/mpi.hpp"
#include "ckpt/options.hpp"
#include "gpu/device.hpp"
#include "runtime/src/pipeline/threads.hpp"
#include "transports/transport.hpp"

namespace ckpt::detail {

/// Largest chunk the auto chunk size picks (chunk_bytes auto; see auto_chunk_bytes in pool.hpp), and
/// the piece the transports and the drain read and write in when chunk_bytes is auto.
constexpr std::uint64_t kMaxAutoChunk = std::uint64_t{16} << 20;
/// The piece size of transports and the drain: chunk_bytes, or kMaxAutoChunk when it is auto.
inline std::uint64_t io_piece_bytes(const Options& o) { return o.chunk_bytes.value_or(kMaxAutoChunk); }

/// Checks "key=value,..." MPI-IO hints and returns them as pairs, byte counts in bytes
/// (invalid_argument naming the option otherwise).
Result<Attributes> parse_mpiio_hints(const std::string& text);
/// Checks a CPU list ("0-3,8,10-11") and returns the CPUs (invalid_argument naming `key` otherwise).
Result<std::vector<int>> parse_cpu_list(const std::string& key, const std::string& text);

/// What resolve() reads of the rank it runs on.
struct ResolveEnv {
  int mpi_thread_level = MPI_THREAD_SINGLE;  ///< MPI_Query_thread
  std::uint64_t physical_memory = 0;         ///< of this node, bytes
};

/// The Runtime's settings, made once at construction and never changed after.
struct Resolved {
  Options options;        ///< validated; `dir` and `local_dir` absolute
  bool series = false;    ///< layout series
  bool levels = false;    ///< local_dir set: a node-local level drained to `dir`
  bool funneled = false;  ///< every MPI call of ckpt on the application thread (mpi_threads)
  ThreadPolicy threads;   ///< thread_cpus auto still `spare`: resolved collectively per node
  TransportConfig transport;
  DeviceConfig device;
  int flush_delay_ms = 0;  ///< test knob CKPT_TEST_FLUSH_DELAY_MS
  int mpi_thread_level = MPI_THREAD_SINGLE;  ///< as MPI_Query_thread said

  /// The options as YAML (Options::to_yaml) and what was derived from them, as comment lines: what
  /// verbose prints at construction and the trace records.
  std::string describe() const;
};

/// This rank's settings from `o` (its error, its fields' ranges, the rules between them, and against
/// `env`), or the first rule it breaks, naming the options.
Result<Resolved> resolve(const Options& o, const ResolveEnv& env);

/// Collective over `comm`: the ranks agree on every job-wide option (scope job: the value; job_set:
/// whether it is set; and the transport groups). invalid_argument on every rank otherwise, naming the
/// option and two ranks' values.
Status agree_options(MPI_Comm comm, const Options& resolved_options);

/// The rules between the options and the transports they made (known once the transports exist):
/// coalesce needs a transport that writes on ckpt's threads, funneled MPI calls need transports whose
/// writers make none, a node-local level needs asynchronous transports.
Status check_transports(const Resolved& r, const std::vector<std::unique_ptr<Transport>>& transports);

/// The transports' settings from resolved options.
TransportConfig transport_config(const Options& o);

}  // namespace ckpt::detail

#endif  // CKPT_RUNTIME_SRC_RESOLVE_HPP
