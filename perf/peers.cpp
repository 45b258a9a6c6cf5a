// perf/peers: ckpt against the I/O libraries an application would otherwise call, on the same data.
// Every rank owns a contiguous slice (--bytes per rank) of a 1-D f64 global array whose values are a
// function of the global index. Each round writes it once with every method below, one after the
// other, and records for each rank
//   blocked: how long the application thread is held (it may overwrite its data afterwards), and
//   durable: from the start until the checkpoint is on disk (fsync'ed) and usable,
// then the maximum over ranks. Rounds are interleaved (all methods, all methods, ...) because disk
// figures on shared machines are noisy; the first round is a warm-up (library initialisation, ckpt's
// staging pool) and is not reported. Medians over --reps rounds.
//
//  hdf5-c-collective  the papers' baseline, written as an application would: plain C parallel HDF5
//                     (MPI-IO driver), one dataset, a hyperslab per rank, one collective H5Dwrite,
//                     H5Fflush (HDF5 calls MPI_File_sync) and H5Fclose. blocked = H5Fcreate..H5Fclose;
//                     durable adds an fsync of the file and its directory on rank 0.
//  adios2-bp5         ADIOS2's BP5 engine. The only ADIOS2 here is the PyPI wheel, a serial build
//                     without MPI, so every rank writes its slice (global shape, own offset) to an
//                     output of its own, <dir>/adios2/peer.bp.<rank>: Open, BeginStep, Put (deferred),
//                     EndStep, Close. BP5 writes synchronously in EndStep/Close, so blocked =
//                     Open..Close; durable adds an fsync of every file of the .bp directory and of
//                     the directories. Without ADIOS2 at build time the row says "not available".
//  ckpt-*             a ckpt Runtime with transport posix (async), hdf5 (async) or hdf5-sync (the
//                     papers' pattern inside ckpt), fsync on: blocked = Ticket stats blocked_s,
//                     durable = committed_s (data durable and the index committed: restartable).
// Other ckpt options come from CKPT_* variables (transport, fsync, keep and dir are set here).
// Output: a table on rank 0's stdout and CSV rows method,ranks,bytes_per_rank,rep,blocked_s,durable_s.
// Any failure is reported on stderr and aborts with a non-zero exit status.
//
//   mpiexec -n 4 build/perf/peers --bytes 64M --reps 3 --dir /tmp/ckpt-peers --csv results/peers.csv
#include <dirent.h>
#include <fcntl.h>
#include <hdf5.h>
#include <mpi.h>
#include <unistd.h>

#ifdef CKPT_HAVE_ADIOS2
#include <adios2.h>
#endif

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "bench_util.hpp"
#include "ckpt/ckpt.hpp"

using namespace ckpt::bench;  // since, median, max_over_ranks, ...

namespace {

/// Reports `what` on stderr and ends every rank with a non-zero status.
[[noreturn]] void fail(const std::string& what) { abort_job("peers", what); }
void mpi_check(int rc, const char* call) {
  if (rc != MPI_SUCCESS) fail(std::string(call) + " failed");
}
/// HDF5 calls return a negative value on failure.
template <class T>
T h5_check(T rc, const char* call) {
  if (rc < 0) fail(std::string(call) + " failed");
  return rc;
}

/// This rank's part of the global array.
struct Slice {
  std::vector<double> data;
  std::uint64_t start = 0, global = 0;
};
Slice make_slice(std::uint64_t bytes, int rank, int size) {
  Slice s;
  const std::uint64_t n = bytes / sizeof(double);
  s.data.resize(n);
  s.start = n * static_cast<std::uint64_t>(rank);
  s.global = n * static_cast<std::uint64_t>(size);
  for (std::uint64_t i = 0; i < n; ++i) s.data[i] = 0.5 * static_cast<double>(s.start + i);
  return s;
}

/// One write of one method on this rank, in seconds from the start after a barrier.
struct Sample {
  double blocked_s = 0, durable_s = 0;
};

// ---- hdf5-c-collective ----------------------------------------------------------------------------

void hdf5_write(const Slice& s, const std::string& path) {
  hid_t fapl = h5_check(H5Pcreate(H5P_FILE_ACCESS), "H5Pcreate(file access)");
  h5_check(H5Pset_fapl_mpio(fapl, MPI_COMM_WORLD, MPI_INFO_NULL), "H5Pset_fapl_mpio");
  hid_t file = h5_check(H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, fapl), "H5Fcreate");
  h5_check(H5Pclose(fapl), "H5Pclose");
  const hsize_t global = s.global, start = s.start, count = s.data.size();
  hid_t fspace = h5_check(H5Screate_simple(1, &global, nullptr), "H5Screate_simple(file)");
  hid_t dset = h5_check(H5Dcreate2(file, "/field", H5T_NATIVE_DOUBLE, fspace, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT),
                        "H5Dcreate2");
  h5_check(H5Sselect_hyperslab(fspace, H5S_SELECT_SET, &start, nullptr, &count, nullptr), "H5Sselect_hyperslab");
  hid_t mspace = h5_check(H5Screate_simple(1, &count, nullptr), "H5Screate_simple(memory)");
  hid_t dxpl = h5_check(H5Pcreate(H5P_DATASET_XFER), "H5Pcreate(transfer)");
  h5_check(H5Pset_dxpl_mpio(dxpl, H5FD_MPIO_COLLECTIVE), "H5Pset_dxpl_mpio");
  h5_check(H5Dwrite(dset, H5T_NATIVE_DOUBLE, mspace, fspace, dxpl, s.data.data()), "H5Dwrite");
  h5_check(H5Pclose(dxpl), "H5Pclose");
  h5_check(H5Sclose(mspace), "H5Sclose");
  h5_check(H5Sclose(fspace), "H5Sclose");
  h5_check(H5Dclose(dset), "H5Dclose");
  h5_check(H5Fflush(file, H5F_SCOPE_GLOBAL), "H5Fflush");
  h5_check(H5Fclose(file), "H5Fclose");
}

/// HDF5 here is not thread-safe: this runs only while no ckpt checkpoint is in flight (each is waited).
Sample run_hdf5(const Slice& s, const std::string& dir) {
  const std::string path = dir + "/peer.h5";
  mpi_check(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier");
  const auto t0 = Clock::now();
  hdf5_write(s, path);  // collective
  Sample out;
  out.blocked_s = since(t0);
  if (world_rank() == 0) {
    if (!fsync_path(path) || !fsync_path(dir)) fail("fsync " + path + " or " + dir + " failed");
  }
  out.durable_s = since(t0);
  mpi_check(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier");
  if (world_rank() == 0) std::filesystem::remove(path);  // untimed: every round creates a new file
  return out;
}

// ---- adios2-bp5 -----------------------------------------------------------------------------------

#ifdef CKPT_HAVE_ADIOS2

/// One serial ADIOS2 BP5 output per rank (the wheel has no MPI).
class Adios2Peer {
 public:
  explicit Adios2Peer(const Slice& s) : m_slice(s), m_io(m_adios.DeclareIO("peers")) {
    m_io.SetEngine("BP5");
    m_var = m_io.DefineVariable<double>("field", {s.global}, {s.start}, {s.data.size()}, adios2::ConstantDims);
  }
  Sample run(const std::string& dir) {
    const std::string path = dir + "/peer.bp." + std::to_string(world_rank());
    mpi_check(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier");
    const auto t0 = Clock::now();
    adios2::Engine e = m_io.Open(path, adios2::Mode::Write);
    e.BeginStep();
    e.Put(m_var, m_slice.data.data(), adios2::Mode::Deferred);
    e.EndStep();
    e.Close();
    Sample out;
    out.blocked_s = since(t0);
    if (const std::string bad = fsync_tree(path); !bad.empty()) fail("fsync " + bad + " failed");
    out.durable_s = since(t0);
    std::filesystem::remove_all(path);  // untimed: every round creates a new output
    return out;
  }

 private:
  const Slice& m_slice;
  adios2::ADIOS m_adios;
  adios2::IO m_io;
  adios2::Variable<double> m_var;
};

Sample run_adios2(Adios2Peer& peer, const std::string& dir) {
  try {
    return peer.run(dir);
  } catch (const std::exception& e) {
    fail(std::string("ADIOS2: ") + e.what());
  }
}
#endif

// ---- ckpt -----------------------------------------------------------------------------------------

std::unique_ptr<ckpt::Runtime> make_runtime(const ckpt::Options& base, const std::string& transport,
                                            const std::string& dir, Slice& s) {
  ckpt::Options o = base;
  o.transport = transport;
  o.fsync = true;
  o.keep = 1;
  o.dir = dir;
  auto rt = std::make_unique<ckpt::Runtime>(MPI_COMM_WORLD, o);
  if (!rt->status().ok()) fail("ckpt " + transport + ": " + rt->status().to_string());
  ckpt::Status st =
      rt->protect("field", s.data.data(), ckpt::DType::f64, ckpt::Block{{s.global}, {s.start}, {s.data.size()}});
  if (!st.ok()) fail("ckpt protect: " + st.to_string());
  return rt;
}

Sample run_ckpt(ckpt::Runtime& rt, std::int64_t step) {
  mpi_check(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier");
  ckpt::Ticket t = rt.checkpoint(step);
  ckpt::Status s = t.wait();
  if (!s.ok()) fail("ckpt " + rt.options().transport + " checkpoint: " + s.to_string());
  const ckpt::CheckpointStats st = t.stats();
  return {st.blocked_s, st.committed_s};
}

// ---- driver -----------------------------------------------------------------------------------------

struct Args {
  std::uint64_t bytes = 64ull << 20;
  int reps = 3;
  std::string dir = "/tmp/ckpt-peers", csv;
};
Args parse_args(int argc, char** argv) {
  Args a;
  parse_options(
      argc, argv, "--bytes, --reps, --dir, --csv",
      [&](const std::string& k, const std::string& v) {
        if (k == "--bytes")
          a.bytes = f64_bytes_option(k, v, fail);
        else if (k == "--reps")
          a.reps = positive_option(k, v, fail);
        else if (k == "--dir")
          a.dir = v;
        else if (k == "--csv")
          a.csv = v;
        else
          return false;
        return true;
      },
      fail);
  return a;
}

/// A method: how one round runs on this rank (empty: not built), and the rounds' maxima over ranks.
struct Method {
  std::string name;
  std::function<Sample(int round)> run;
  std::vector<Sample> rounds;  ///< maxima over ranks, warm-up excluded
};

Sample max_over_ranks(Sample s) {
  double v[2] = {s.blocked_s, s.durable_s}, m[2];
  mpi_check(MPI_Allreduce(v, m, 2, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD), "MPI_Allreduce");
  return {m[0], m[1]};
}

void print_table(const std::vector<Method>& methods, int size, std::uint64_t bytes) {
  auto med = [](const Method& m, double Sample::*f) {
    std::vector<double> v;
    for (const Sample& s : m.rounds) v.push_back(s.*f);
    return median(v);
  };
  const double base = med(methods.front(), &Sample::blocked_s);
  std::printf("%-20s %6s %9s %12s %12s %15s\n", "method", "ranks", "MiB/rank", "blocked ms", "durable ms",
              "blocked/hdf5-c");
  for (const Method& m : methods) {
    if (!m.run) {
      std::printf("adios2: not available (pip install adios2)\n");
      continue;
    }
    const double b = med(m, &Sample::blocked_s);
    std::printf("%-20s %6d %9.1f %12.2f %12.2f %15.3f\n", m.name.c_str(), size, static_cast<double>(bytes) / (1 << 20),
                b * 1e3, med(m, &Sample::durable_s) * 1e3, b / base);
  }
}

void write_csv(const std::string& path, const std::vector<Method>& methods, int size, std::uint64_t bytes) {
  std::FILE* f = std::fopen(path.c_str(), "w");
  if (!f) fail("cannot write " + path);
  std::fprintf(f, "method,ranks,bytes_per_rank,rep,blocked_s,durable_s\n");
  for (const Method& m : methods)
    for (std::size_t r = 0; r < m.rounds.size(); ++r)
      std::fprintf(f, "%s,%d,%llu,%zu,%.6f,%.6f\n", m.name.c_str(), size, static_cast<unsigned long long>(bytes), r,
                   m.rounds[r].blocked_s, m.rounds[r].durable_s);
  if (std::fclose(f) != 0) fail("writing " + path + " failed");
}

/// Removes what a run wrote under `dir` (the directory itself stays).
void remove_outputs(const std::string& dir) {
  std::error_code ec;
  for (const char* sub : {"hdf5-c", "adios2", "ckpt-posix", "ckpt-hdf5", "ckpt-hdf5-sync"})
    std::filesystem::remove_all(dir + "/" + sub, ec);
}

}  // namespace

int main(int argc, char** argv) {
  int provided = 0;
  if (MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided) != MPI_SUCCESS) {
    std::fprintf(stderr, "peers: MPI_Init_thread failed\n");
    return 1;
  }
  int rank = 0, size = 1;
  mpi_check(MPI_Comm_rank(MPI_COMM_WORLD, &rank), "MPI_Comm_rank");
  mpi_check(MPI_Comm_size(MPI_COMM_WORLD, &size), "MPI_Comm_size");
  const Args args = parse_args(argc, argv);
  ckpt::Options base;  // defaults + CKPT_* (e.g. CKPT_CHUNK_BYTES, CKPT_TRACE)
  if (!base.error.ok()) fail(base.error.to_string());

  Slice slice = make_slice(args.bytes, rank, size);
  const std::string h5dir = args.dir + "/hdf5-c", bpdir = args.dir + "/adios2";
  if (rank == 0) {
    if (const std::string e = make_dir(h5dir); !e.empty()) fail(e);
    if (const std::string e = make_dir(bpdir); !e.empty()) fail(e);
  }
  mpi_check(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier");

  std::vector<Method> methods;
  methods.push_back({"hdf5-c-collective", [&](int) { return run_hdf5(slice, h5dir); }, {}});
#ifdef CKPT_HAVE_ADIOS2
  Adios2Peer adios2_peer(slice);
  methods.push_back({"adios2-bp5", [&](int) { return run_adios2(adios2_peer, bpdir); }, {}});
#else
  methods.push_back({"adios2-bp5", nullptr, {}});
#endif
  std::vector<std::unique_ptr<ckpt::Runtime>> runtimes;
  for (const char* t : {"posix", "hdf5", "hdf5-sync"}) {
    runtimes.push_back(make_runtime(base, t, args.dir + "/ckpt-" + t, slice));
    ckpt::Runtime& rt = *runtimes.back();
    const std::string name = std::string("ckpt-") + t + (std::string(t) == "hdf5-sync" ? "" : "-async");
    methods.push_back({name, [&rt](int round) { return run_ckpt(rt, round); }, {}});
  }

  for (int round = 0; round <= args.reps; ++round)  // round 0: warm-up
    for (Method& m : methods) {
      if (!m.run) continue;
      const Sample s = max_over_ranks(m.run(round));
      if (round > 0) m.rounds.push_back(s);
    }

  for (auto& rt : runtimes) {
    ckpt::Status s = rt->close();
    if (!s.ok()) fail("ckpt close: " + s.to_string());
  }
  runtimes.clear();
  if (rank == 0) {
    print_table(methods, size, args.bytes);
    if (!args.csv.empty()) write_csv(args.csv, methods, size, args.bytes);
  }
  mpi_check(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier");
  if (rank == 0) remove_outputs(args.dir);
  MPI_Finalize();
  return 0;
}
