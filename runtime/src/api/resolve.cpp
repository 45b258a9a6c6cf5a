// The resolve step: Options -> Resolved, the rules between options, the agreement across ranks.
#include "runtime/src/api/resolve.hpp"

#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstring>

#include "runtime/src/pipeline/flush.hpp"
#include "runtime/src/api/option_table.hpp"

namespace ckpt::detail {

namespace {

const char* thread_level_name(int level) {
  switch (level) {
    case MPI_THREAD_SINGLE: return "MPI_THREAD_SINGLE";
    case MPI_THREAD_FUNNELED: return "MPI_THREAD_FUNNELED";
    case MPI_THREAD_SERIALIZED: return "MPI_THREAD_SERIALIZED";
    case MPI_THREAD_MULTIPLE: return "MPI_THREAD_MULTIPLE";
  }
  return "unknown";
}

/// `p` made absolute against the working directory (lexically: it need not exist yet).
Result<std::string> absolute(const std::string& p) {
  if (p.empty() || p[0] == '/') return p;
  std::string cwd(PATH_MAX, '\0');
  if (::getcwd(cwd.data(), cwd.size()) == nullptr)
    return Status(Code::io_error, std::string("cannot read the working directory: ") + std::strerror(errno));
  cwd.resize(std::strlen(cwd.c_str()));
  std::string rel = p;
  while (rel.rfind("./", 0) == 0) rel.erase(0, 2);
  return cwd + (cwd == "/" ? "" : "/") + (rel == "." ? "" : rel);
}

ThreadPolicy thread_policy(const Options& o) {
  ThreadPolicy t;
  // auto: slices where the application waits for the pipeline (wait), not where a faster pipeline
  // would only write more of the checkpoints coalesce offers it (measured, docs/performance.md).
  t.slice_us = o.thread_slice_us ? *o.thread_slice_us : o.on_busy == OnBusy::wait ? 100 : 0;
  t.slice_auto = !o.thread_slice_us;
  if (!o.thread_cpus) {
    t.where = ThreadPolicy::Cpus::spare;  // resolved by the Runtime (spare_cpus, collective)
  } else if (*o.thread_cpus == "all") {
    t.where = ThreadPolicy::Cpus::all;
  } else if (*o.thread_cpus != "inherit") {
    auto cpus = parse_cpu_list("thread_cpus", *o.thread_cpus);  // valid: validate() checked it
    if (cpus.ok()) {
      t.where = ThreadPolicy::Cpus::list;
      t.cpus = std::move(cpus).value();
    }
  }
  return t;
}

DeviceConfig device_config(const Options& o) {
  DeviceConfig dev;
  if (!o.gpu_double_buffer)
    dev.double_buffer = DeviceConfig::DoubleBuffer::automatic;
  else
    dev.double_buffer =
        *o.gpu_double_buffer == DoubleBuffer::on ? DeviceConfig::DoubleBuffer::on : DeviceConfig::DoubleBuffer::off;
  dev.spare_bytes = static_cast<std::size_t>(o.gpu_spare_bytes.value_or(0));
  return dev;
}

}  // namespace

TransportConfig transport_config(const Options& o) {
  TransportConfig c;
  c.alignment = o.alignment;
  c.chunk_bytes = io_piece_bytes(o);
  c.open_token = o.open_token;
  c.mpiio_files = o.mpiio_files;
  c.rbio_writers = o.rbio_writers.value_or(0);
  c.rbio_files = o.rbio_files;
  c.append = o.layout == Options::Layout::series;
  c.direct_io = o.direct_io;
  auto hints = parse_mpiio_hints(o.mpiio_hints);  // valid: validate() checked them
  if (hints.ok()) c.mpiio_hints = std::move(hints).value();
  return c;
}

Result<Resolved> resolve(const Options& o, const ResolveEnv& env) {
  CKPT_RETURN_IF_ERROR(o.error);
  CKPT_RETURN_IF_ERROR(o.validate());
  Resolved r;
  r.options = o;
  // One root for every rank, whatever its working directory: the ranks agree on the absolute path.
  auto dir = absolute(o.dir);
  if (!dir.ok()) return dir.status().with_context("option 'dir'");
  r.options.dir = std::move(dir).value();
  auto local = absolute(o.local_dir);
  if (!local.ok()) return local.status().with_context("option 'local_dir'");
  r.options.local_dir = std::move(local).value();
  if (!r.options.local_dir.empty() && r.options.local_dir == r.options.dir)
    return Status(Code::invalid_argument, "option 'local_dir' must differ from 'dir' (" + r.options.dir + ")");
  r.series = o.layout == Options::Layout::series;
  r.levels = !o.local_dir.empty();
  r.mpi_thread_level = env.mpi_thread_level;
  // Funneled: ckpt's threads make no MPI call (its commit and collective opens run on the application
  // thread), so any thread level works; MPI_THREAD_SINGLE too, as no other thread calls MPI.
  r.funneled = o.mpi_threads == MpiThreads::funneled ||
               (!o.mpi_threads && env.mpi_thread_level < MPI_THREAD_MULTIPLE);
  if (!r.funneled && env.mpi_thread_level < MPI_THREAD_MULTIPLE)
    return Status(Code::unavailable,
                  std::string("mpi_threads is 'multiple': ckpt runs its commit on a background thread and needs "
                              "MPI_THREAD_MULTIPLE, but MPI was initialised with ") +
                      thread_level_name(env.mpi_thread_level) +
                      "; call MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided) or set mpi_threads "
                      "to 'funneled' or 'auto'");
  // Touching a pool larger than the machine gets the job OOM-killed: a clear error instead.
  if (o.pool_bytes && env.physical_memory != 0 && *o.pool_bytes > env.physical_memory)
    return Status(Code::invalid_argument, "option 'pool_bytes' (" + std::to_string(*o.pool_bytes) +
                                              ") exceeds the physical memory of this node (" +
                                              std::to_string(env.physical_memory) + " bytes)");
  if (r.series && (!o.groups.empty() || o.transport != "posix"))
    return Status(Code::invalid_argument,
                  "option 'layout': series appends each rank's checkpoints to a file of its own and needs the "
                  "posix transport without transport groups (transport is '" +
                      o.transport + "'" + (o.groups.empty() ? "" : ", with groups") +
                      "); use layout directory for the others");
  // Incremental checkpoints: this build writes them where every rank writes its own file and sub-index
  // (docs/format.md, "Version 2 index: incremental references"; the other layouts and transports next).
  if (o.incremental) {
    std::string why;
    if (o.index_format != 2) why = "index_format 2 (the references are version-2 records)";
    if (why.empty() && (r.series || r.levels)) why = "layout directory and no local_dir";
    if (why.empty() && (o.transport != "posix" || !o.groups.empty()))
      why = "the posix transport without transport groups (transport is '" + o.transport + "')";
    if (why.empty() && r.funneled)
      why =
          "ckpt's own threads calling MPI (mpi_threads multiple: each checkpoint waits for the previous "
          "one's commit on a thread of ckpt's, which funneled mode runs on the application thread)";
    if (why.empty() && o.pool_bytes && *o.pool_bytes < 2 * o.incremental_piece_bytes)
      why = "a pool_bytes of at least two pieces (2 x " + std::to_string(o.incremental_piece_bytes) + ")";
    if (why.empty() && o.chunk_bytes && *o.chunk_bytes % o.incremental_piece_bytes != 0)
      why = "chunk_bytes a multiple of incremental_piece_bytes (" + std::to_string(o.incremental_piece_bytes) + ")";
    if (!why.empty())
      return Status(Code::invalid_argument, "option 'incremental': this build writes incremental checkpoints with " +
                                                why + "; set incremental off or change the option");
  }
  // The version-2 index is written by rank 0 into a checkpoint directory of the one (global) level:
  // format.md places it in the series files and node directories too, but this build does not yet.
  if (o.index_format == 2 && (r.series || r.levels))
    return Status(Code::invalid_argument, std::string("option 'index_format': 2 is written with layout directory "
                                                      "and no local_dir (this build); here ") +
                                              (r.series ? "layout is 'series'" : "local_dir is set") +
                                              ": use index_format 1");
  r.threads = thread_policy(o);
  // thread_cpus: a list naming CPUs outside this rank's cpuset (ranks' cpusets may differ).
  CKPT_RETURN_IF_ERROR(check_cpus(r.threads));
  r.transport = transport_config(r.options);
  r.device = device_config(o);
  r.flush_delay_ms = test_knob_ms("CKPT_TEST_FLUSH_DELAY_MS");
  return r;
}

std::string Resolved::describe() const {
  std::string d = options.to_yaml();
  d += std::string("# resolved: layout ") + (series ? "series" : "directory") + ", node-local level " +
       (levels ? "on" : "off") + ", MPI calls " + (funneled ? "funneled through the application thread" : "on ckpt's threads") +
       " (" + thread_level_name(mpi_thread_level) + "), thread slice " + std::to_string(threads.slice_us) + " us\n";
  if (flush_delay_ms > 0) d += "# test knob CKPT_TEST_FLUSH_DELAY_MS=" + std::to_string(flush_delay_ms) + "\n";
  return d;
}

Status agree_options(MPI_Comm comm, const Options& o) {
  std::vector<NamedValue> values;
  for (const auto& row : option_rows()) {
    if (row.scope == OptionScope::rank) continue;
    std::string v = row.get(o);
    if (row.scope == OptionScope::job_set) v = v.empty() ? "(not set)" : "(set)";
    values.push_back({"option '" + std::string(row.key) + "'", std::move(v)});
  }
  std::string groups;
  for (const auto& g : o.groups) {
    groups += g.name + " -> " + g.transport + " [";
    for (const auto& m : g.match) groups += m + " ";
    groups += "] ";
  }
  values.push_back({"option 'groups'", groups});
  return agree_equal(comm, values,
                     "the ranks' options differ (job-wide options must be equal on every rank: give every rank the "
                     "same options file and CKPT_* variables, docs/options.md)");
}

Status check_transports(const Resolved& r, const std::vector<std::unique_ptr<Transport>>& transports) {
  const Options& o = r.options;
  // A transport that writes inside checkpoint() cannot leave a capture waiting to be replaced.
  if (o.on_busy == OnBusy::coalesce && opens_on_app_thread(transports, r.funneled))
    return Status(Code::invalid_argument,
                  "option 'on_busy': coalesce needs an asynchronous transport (hdf5-sync writes inside "
                  "checkpoint())");
  if (r.levels)
    for (auto& t : transports)
      if (t->synchronous())
        return Status(Code::invalid_argument, std::string("option 'local_dir': transport '") + t->name() +
                                                  "' writes inside checkpoint() and cannot drain from the node level");
  if (!r.funneled) return Status::OK();
  // What needs MPI on a thread of ckpt's own cannot run funneled: said at construction, naming the way out.
  const std::string why = std::string("ckpt's MPI calls are funneled through the application thread (mpi_threads '") +
                          (o.mpi_threads ? "funneled" : "auto") + "', MPI initialised with " +
                          thread_level_name(r.mpi_thread_level) + ")";
  for (const auto& t : transports)
    if (t->writes_with_mpi())
      return Status(Code::failed_precondition,
                    std::string("transport '") + t->name() + "' calls MPI on ckpt's write thread, but " + why +
                        ": use posix or hdf5-sync, or MPI_Init_thread with MPI_THREAD_MULTIPLE");
  if (r.levels)
    return Status(Code::failed_precondition,
                  "option local_dir: the node-local level drains on a thread of its own that calls MPI, but " + why +
                      ": leave local_dir empty or initialise MPI with MPI_THREAD_MULTIPLE");
  if (o.on_busy == OnBusy::coalesce)
    return Status(Code::failed_precondition,
                  "option on_busy 'coalesce': a launcher thread of its own agrees with the other ranks (MPI) which "
                  "capture to flush, but " +
                      why + ": use on_busy 'wait', or initialise MPI with MPI_THREAD_MULTIPLE");
  return Status::OK();
}

}  // namespace ckpt::detail
