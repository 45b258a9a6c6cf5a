/// \file options.hpp
/// Every tunable of ckpt, in one table (CKPT_OPTIONS below). Each row declares one field of
/// ckpt::Options and carries everything else about it: its group, whether the ranks must agree on it,
/// its default, its allowed values (the parser and range check, in runtime/src/api/options.cpp) and a one-line
/// description. From the table come the struct, the YAML and CKPT_* readers, the range checks, the
/// printing of resolved options (Options::to_yaml, the trace), describe_options() and the tables of
/// docs/options.md (`ckpt options --markdown`; a test fails when they differ). Adding an option is one row.
#ifndef CKPT_RUNTIME_OPTIONS_HPP
#define CKPT_RUNTIME_OPTIONS_HPP

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "ckpt/export.h"
#include "ckpt/status.hpp"

namespace ckpt {

/// What checkpoint() does when max_in_flight checkpoints are in flight ("wait", "coalesce").
enum class OnBusy { wait, coalesce };
/// How checkpoints are stored under `dir` ("directory", "series"; docs/format.md).
enum class Layout { directory, series };
/// Which threads make ckpt's MPI calls ("multiple", "funneled"; unset = auto).
enum class MpiThreads { multiple, funneled };
/// GPU double buffering through a device spare ("off", "on"; unset = auto).
enum class DoubleBuffer { off, on };
/// Protection of the node-local level against the loss of a node ("none", "partner", "xor").
enum class Redundancy { none, partner, xor_parity /* "xor" */ };

/// "auto" is the one spelling of an automatic choice: in files, variables and printed options the word
/// `auto`; in C++ an unset std::optional (std::nullopt), which is what these aliases hold by default.
using AutoBytes = std::optional<std::uint64_t>;
using AutoInt = std::optional<int>;
using AutoText = std::optional<std::string>;
using AutoMpiThreads = std::optional<MpiThreads>;
using AutoDoubleBuffer = std::optional<DoubleBuffer>;
using AutoFraction = std::optional<double>;

// clang-format off
/// The options table. X(group, scope, type, name, default, spec, description):
///   group        docs/options.md's section: storage, staging, durability, series, levels, collective_io,
///                threads, gpu, diagnostics
///   scope        job: equal on every rank (agreed at construction; `dir` as an absolute path);
///                job_set: whether it is set is agreed, its value may differ per node (a node's own path);
///                rank: may differ from rank to rank (a node's CPUs, memory, verbosity)
///   type name default   the field of ckpt::Options (YAML key `name`, variable CKPT_<NAME>)
///   spec         its parser and allowed values (runtime/src/api/options.cpp; never compiled here)
///   description  one line for docs/options.md, `ckpt options` and messages
#define CKPT_OPTIONS(X) \
  X(storage, job, std::string, dir, "ckpt", path(), \
    "checkpoint directory: `ckpt.<step>/` (or `series.<k>/`) and `latest`; relative to the working directory") \
  X(storage, job, std::string, transport, "posix", transport_name(), \
    "I/O method of the default group (`CKPT_TRANSPORT` sets every group's)") \
  X(storage, job, Layout, layout, Layout::directory, one_of(kLayout), \
    "`directory`: a `ckpt.<step>/` per checkpoint, committed by renames; `series`: appended to files opened once") \
  X(storage, job, int, keep, 2, range(1, 1000000), \
    "complete checkpoints kept; older ones are removed after a newer commit (series: whole segments)") \
  X(storage, job, std::uint64_t, alignment, 4096, power_of_two(64, 1ull << 30), \
    "alignment of blocks of at least 64 KiB in data files") \
  X(storage, job, bool, stats, true, boolean(), \
    "per-block min/max of numeric data in the index") \
  X(storage, job, int, index_format, 1, range(1, 2), \
    "1: one index per checkpoint; 2: a root, a catalog and a sub-index per rank (format.md; directory layout)") \
  X(storage, job, bool, incremental, false, boolean(), \
    "write only the pieces changed since the previous checkpoint, refer to the rest (index_format 2, posix)") \
  X(storage, job, std::uint64_t, incremental_piece_bytes, 256 << 10, power_of_two(1 << 16, 1 << 24), \
    "incremental: piece size; blocks of at least one piece are hashed and written piece by piece") \
  X(storage, job, int, incremental_full_every, 10, range(1, 64), \
    "incremental: a full checkpoint (every piece written) every n checkpoints, so that a chain is at most n long") \
  X(staging, rank, AutoBytes, pool_bytes, std::nullopt, auto_or(bytes(8192, 1ull << 50)), \
    "staging pool budget; auto: a whole checkpoint x max_in_flight (+1 with coalesce), capped by pool_max_fraction") \
  X(staging, rank, double, pool_max_fraction, 0.25, fraction(0.9), \
    "cap of the auto pools of a node together, as a fraction of its physical memory") \
  X(staging, job, AutoBytes, chunk_bytes, std::nullopt, auto_or(bytes(4096, 1ull << 32, 4096)), \
    "staging chunk = one write; auto: half the protected state per group, 4 KiB multiple, at most 16 MiB") \
  X(staging, job, int, max_in_flight, 1, range(1, 64), \
    "checkpoints captured but not committed; checkpoint() waits or coalesces beyond") \
  X(staging, job, OnBusy, on_busy, OnBusy::wait, one_of(kOnBusy), \
    "at max_in_flight: `wait` for the oldest commit, or `coalesce`: capture and replace the waiting capture") \
  X(durability, job, bool, fsync, true, boolean(), \
    "fdatasync data, fsync index and directories before a checkpoint counts") \
  X(durability, job, int, durable_every_ms, 0, range(0, 86400000), \
    "0: every commit synced before its ticket completes; N: visible at once, synced at most every N ms") \
  X(durability, rank, bool, direct_io, true, boolean(), \
    "posix: write 4 KiB-aligned pieces with O_DIRECT from the staging chunks (page cache elsewhere)") \
  X(series, job, std::uint64_t, segment_bytes, 1ull << 30, bytes(4096, UINT64_MAX), \
    "layout series: a new segment starts when one rank's data file would grow past this") \
  X(series, job, int, segment_steps, 0, range(0, 1000000000), \
    "layout series: a new segment starts after this many checkpoints; 0 = no limit") \
  X(levels, job_set, std::string, local_dir, "", text(), \
    "node-local directory (NVMe, RAM disk): commit there first, drain to `dir` in the background; empty = off") \
  X(levels, job, int, drain_every, 1, range(0, 1000000), \
    "with local_dir: drain every n-th locally complete checkpoint to `dir`; 0 = never") \
  X(levels, job, AutoInt, ranks_per_node, std::nullopt, auto_or(range(1, 1 << 24)), \
    "with local_dir: n makes rank r a member of node r/n (`<local_dir>/node<k>`); auto: the nodes MPI reports") \
  X(levels, job, Redundancy, redundancy, Redundancy::none, one_of(kRedundancy), \
    "with local_dir: `partner` copies each rank's files to the next node, `xor` keeps parity per node group") \
  X(levels, job, int, xor_group, 4, range(2, 1 << 16), \
    "redundancy xor: nodes per parity group; the last group takes the nodes left over") \
  X(levels, job, AutoInt, keep_global, std::nullopt, auto_or(range(1, 1000000)), \
    "with local_dir: complete checkpoints kept in `dir` (the drained level); auto: as keep") \
  X(collective_io, job, int, mpiio_files, 1, range(1, 1 << 24), \
    "mpiio: files per checkpoint; ranks are split into that many contiguous groups") \
  X(collective_io, job, std::string, mpiio_hints, "", mpiio_hints(), \
    "MPI-IO hints of mpiio and rbio files, `key=value,...` (a map in YAML)") \
  X(collective_io, job, AutoInt, rbio_writers, std::nullopt, auto_or(range(1, 1 << 24)), \
    "rbio: writer ranks; auto: one per node (ranks sharing a host name)") \
  X(collective_io, job, int, rbio_files, 0, range(0, 1), \
    "rbio: 0 = one file per writer, 1 = one shared file") \
  X(collective_io, job, int, open_token, 0, range(0, 1 << 24), \
    "at most this many ranks open files at the same time (a round-robin token); 0 = no token") \
  X(threads, job, AutoMpiThreads, mpi_threads, std::nullopt, auto_or(one_of(kMpiThreads)), \
    "which threads call MPI: `multiple` (ckpt's own; needs MPI_THREAD_MULTIPLE), `funneled`; auto: by the level") \
  X(threads, rank, AutoInt, thread_slice_us, std::nullopt, auto_or(slice_us()), \
    "scheduler slice of ckpt's threads (EEVDF); 0: the kernel's; auto: 100 us with on_busy wait, else 0") \
  X(threads, rank, AutoText, thread_cpus, std::nullopt, auto_or(cpu_list()), \
    "CPUs of ckpt's threads: `all`, `inherit` or a list like 8-15; auto: the node's CPUs no rank is bound to") \
  X(threads, rank, AutoFraction, background_cpu, std::nullopt, auto_or(cpu_budget()), \
    "on_busy coalesce: share of one core ckpt's threads may use on average (captures wait beyond); off; auto: see docs") \
  X(gpu, rank, AutoDoubleBuffer, gpu_double_buffer, DoubleBuffer::off, auto_or(one_of(kDoubleBuffer)), \
    "copy D2D into a device spare, release the application's stream, then D2H; auto: the spare follows use") \
  X(gpu, rank, AutoBytes, gpu_spare_bytes, std::nullopt, auto_or(bytes(1, 1ull << 50)), \
    "gpu_double_buffer on: the spare's size (needed); auto: cap of the auto spare, device memory / 16") \
  X(diagnostics, rank, int, verbose, 0, range(0, 2), \
    "messages on stderr: 0 quiet, 1 one line per commit/restart on rank 0, 2 more") \
  X(diagnostics, job_set, std::string, trace, "", text(), \
    "directory for the trace: at close() rank 0 writes trace.json and summary.json; empty = off")
// clang-format on

/// Options of a Runtime. Plain value type; not thread-safe to mutate while a Runtime reads it
/// (the Runtime keeps its own copy, so changing an Options after construction has no effect).
/// Each field is a row of CKPT_OPTIONS above (its description there and in docs/options.md).
struct CKPT_API Options {
  /// Defaults, then CKPT_* environment overrides. A bad value is recorded in `error` (a Runtime built
  /// from it reports that error) rather than thrown.
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

  /// Checks every field against its row's allowed values, then the rules between options
  /// (e.g. pool_bytes holds two chunks, layout series without local_dir). Called by Runtime too.
  Status validate() const;

  /// Every option as YAML `key: value` lines in table order, in the spelling files take (`auto` for an
  /// unset automatic choice), groups included: Options::load() of it gives these options back.
  std::string to_yaml() const;

  // The enums under their former names (ckpt::Options::OnBusy::wait ...), for code written before they
  // moved to namespace ckpt.
  using OnBusy = ckpt::OnBusy;
  using Layout = ckpt::Layout;
  using MpiThreads = ckpt::MpiThreads;
  using DoubleBuffer = ckpt::DoubleBuffer;
  using Redundancy = ckpt::Redundancy;

#define CKPT_IMPL_OPTION_FIELD(group, scope, type, name, def, spec, doc) type name = def;
  CKPT_OPTIONS(CKPT_IMPL_OPTION_FIELD)
#undef CKPT_IMPL_OPTION_FIELD

  /// A group of variables with its own transport (YAML only): variables whose name matches one of
  /// `match` (shell globs, e.g. "walkers/*") go through `transport`; others use `transport` above.
  /// CKPT_TRANSPORT overrides the transport of every group. Job-wide.
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

/// One row of the options table, for tools and documentation (`ckpt options`).
struct OptionDescription {
  std::string group;          ///< storage, staging, durability, series, levels, collective_io, threads, gpu, ...
  std::string key;            ///< YAML key and field name
  std::string variable;       ///< CKPT_<KEY>
  std::string scope;          ///< job, job_set or rank (see CKPT_OPTIONS)
  std::string default_value;  ///< in the spelling files take
  std::string allowed;        ///< the values the parser accepts
  std::string description;    ///< one line
};

/// Every option, in table order (the test knobs are not options and are not listed).
CKPT_API std::vector<OptionDescription> describe_options();

/// docs/options.md's generated part: one Markdown table per group, from describe_options().
CKPT_API std::string options_markdown();

/// Parses a byte count such as "4096", "64M", "64MiB", "1G", "512k" (binary multiples).
CKPT_API Result<std::uint64_t> parse_bytes(const std::string& text);

/// Parses on_busy's spelling in files and CKPT_* variables: "wait" or "coalesce".
CKPT_API Result<OnBusy> parse_on_busy(const std::string& text);
/// The spelling of an on_busy value ("wait", "coalesce"), as parse_on_busy() reads it.
CKPT_API const char* on_busy_name(OnBusy v) noexcept;

/// Parses layout's spelling in files and CKPT_* variables: "directory" or "series".
CKPT_API Result<Layout> parse_layout(const std::string& text);

/// Parses gpu_double_buffer's spelling in files and CKPT_* variables: "off", "on" or "auto" (unset).
CKPT_API Result<AutoDoubleBuffer> parse_double_buffer(const std::string& text);

}  // namespace ckpt

#endif  // CKPT_RUNTIME_OPTIONS_HPP
