// perf/scale: the metadata a checkpoint moves as the rank count grows (issue 33) - exact bytes and MPI
// rounds, counted by interposing MPI (the executable exports PMPI wrappers of every collective and
// point-to-point call libckpt makes), and times, loosely (run oversubscribed on 2 cores).
//
// Every rank registers --locals local arrays (16 f64 of this rank only, different on every rank),
// --globals blocks of global 1-D arrays (16 f64 per rank) and one joined array (rank r holds r % 3 + 1
// rows of 4 f64). Per rank count:
//   commit      one checkpoint (after a warm-up), counted from checkpoint() to its ticket's wait() on
//               every rank, median of --reps: the bytes rank 0 received in that time (gathered reports,
//               reduced values, broadcasts), the largest any other rank received, the collective calls
//               of rank 0 (all of ckpt's threads), and committed_s (Ticket stats)
//   latest      latest() of that Runtime (validation of the newest step: rank 0 alone with format 1; with
//               format 2 rank 0 the root and catalog, every rank its own sub-index): time, collectives
//   restart     a fresh Runtime registering everything, restart(step) N->N: bytes received by the rank
//               that received most and by rank 0 (which also reads the index file: its size is the
//               `index` column), collective calls, time (max over ranks), and the index bytes each rank
//               read or received (Runtime::restart_index_bytes(): the whole index with format 1; with
//               format 2 the root and only the catalog pieces and sub-indices its regions needed)
//   inspect     inspect(step) of that Runtime and the joined array's row count from it (what an application
//               asks before it allocates, as qmc_walkers does): bytes received by rank 0 and by the rank
//               that received most (format 1: the whole index; format 2: the root, and the local arrays'
//               extents that rank 0 read), collective calls, time, and the index bytes each rank read or
//               received (CheckpointReader::index_bytes(): rank 0 also read writer 0's sub-index)
//   restart N->M  the global and joined arrays only, restarted by the first half of the ranks (a
//               sub-communicator): the same figures
// "received" counts what an MPI call delivers into this rank's buffers: a rooted gather's receive
// counts at the root, a broadcast's count off the root, an allreduce's or allgather's result, a
// receive's count. Counting is off outside the measured calls (the program's own barriers).
//
//   mpiexec -n 64 --oversubscribe build/perf/scale --locals 100 --reps 3 --csv /tmp/scale.csv
//   ... --index-format 2: the two-level index (posix: each rank writes its own sub-index)
//   ... --transport T: posix (default), mpiio, hdf5 or rbio (one shared file, as many writers as nodes)
//   ... --ranks-per-writer K: transport rbio with a file per writer and P / K writers (one per node of K
//       ranks): with --index-format 2 each writer writes its group's sub-index
//   ... --fsync 0: no fdatasync (the protocol's cost without the disk's)
//   ... --max-commit-root-kib K --max-commit-other-kib K: exit non-zero when a commit moves more (ctest scale_bytes_64)
//   ... --max-restart-kib K: exit non-zero when a rank's N->N restart reads more index bytes (the same test)
//   ... --max-inspect-kib K: exit non-zero when a rank receives more from inspect() (the same test)
//   python3 perf/model.py --scale /tmp/scale.csv   (the projection to 27,648 and 65,536 ranks)
#include <mpi.h>
#include <sys/stat.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "bench_util.hpp"
#include "ckpt/ckpt.hpp"

using namespace ckpt::bench;

namespace {
std::atomic<bool> g_counting{false};
std::atomic<std::uint64_t> g_bytes{0}, g_collectives{0}, g_messages{0};

std::uint64_t extent_of(MPI_Datatype t) {
  MPI_Aint lb = 0, ext = 0;
  PMPI_Type_get_extent(t, &lb, &ext);
  return static_cast<std::uint64_t>(ext);
}
void got(std::uint64_t n, MPI_Datatype t) {
  if (g_counting.load(std::memory_order_relaxed)) g_bytes += n * extent_of(t);
}
void collective() {
  if (g_counting.load(std::memory_order_relaxed)) ++g_collectives;
}
void message() {
  if (g_counting.load(std::memory_order_relaxed)) ++g_messages;
}
int rank_in(MPI_Comm c) {
  int r = 0;
  PMPI_Comm_rank(c, &r);
  return r;
}
std::uint64_t sum_counts(const int* counts, MPI_Comm c) {
  int n = 0;
  PMPI_Comm_size(c, &n);
  std::uint64_t s = 0;
  for (int i = 0; i < n; ++i) s += static_cast<std::uint64_t>(counts[i]);
  return s;
}
std::uint64_t all_of(int each, MPI_Comm c) {
  int n = 0;
  PMPI_Comm_size(c, &n);
  return static_cast<std::uint64_t>(each) * static_cast<std::uint64_t>(n);
}
}  // namespace

// The interposed calls: count, then forward to the MPI library.
extern "C" {
int MPI_Allreduce(const void* s, void* r, int n, MPI_Datatype t, MPI_Op op, MPI_Comm c) {
  collective(), got(n, t);
  return PMPI_Allreduce(s, r, n, t, op, c);
}
int MPI_Iallreduce(const void* s, void* r, int n, MPI_Datatype t, MPI_Op op, MPI_Comm c, MPI_Request* q) {
  collective(), got(n, t);
  return PMPI_Iallreduce(s, r, n, t, op, c, q);
}
int MPI_Bcast(void* b, int n, MPI_Datatype t, int root, MPI_Comm c) {
  collective();
  if (rank_in(c) != root) got(n, t);
  return PMPI_Bcast(b, n, t, root, c);
}
int MPI_Ibcast(void* b, int n, MPI_Datatype t, int root, MPI_Comm c, MPI_Request* q) {
  collective();
  if (rank_in(c) != root) got(n, t);
  return PMPI_Ibcast(b, n, t, root, c, q);
}
int MPI_Gather(const void* s, int sn, MPI_Datatype st, void* r, int rn, MPI_Datatype rt, int root, MPI_Comm c) {
  collective();
  if (rank_in(c) == root) got(all_of(rn, c), rt);
  return PMPI_Gather(s, sn, st, r, rn, rt, root, c);
}
int MPI_Igather(const void* s, int sn, MPI_Datatype st, void* r, int rn, MPI_Datatype rt, int root, MPI_Comm c,
                MPI_Request* q) {
  collective();
  if (rank_in(c) == root) got(all_of(rn, c), rt);
  return PMPI_Igather(s, sn, st, r, rn, rt, root, c, q);
}
int MPI_Gatherv(const void* s, int sn, MPI_Datatype st, void* r, const int* rc, const int* d, MPI_Datatype rt, int root,
                MPI_Comm c) {
  collective();
  if (rank_in(c) == root) got(sum_counts(rc, c), rt);
  return PMPI_Gatherv(s, sn, st, r, rc, d, rt, root, c);
}
int MPI_Igatherv(const void* s, int sn, MPI_Datatype st, void* r, const int* rc, const int* d, MPI_Datatype rt,
                 int root, MPI_Comm c, MPI_Request* q) {
  collective();
  if (rank_in(c) == root) got(sum_counts(rc, c), rt);
  return PMPI_Igatherv(s, sn, st, r, rc, d, rt, root, c, q);
}
int MPI_Allgather(const void* s, int sn, MPI_Datatype st, void* r, int rn, MPI_Datatype rt, MPI_Comm c) {
  collective(), got(all_of(rn, c), rt);
  return PMPI_Allgather(s, sn, st, r, rn, rt, c);
}
int MPI_Iallgather(const void* s, int sn, MPI_Datatype st, void* r, int rn, MPI_Datatype rt, MPI_Comm c,
                   MPI_Request* q) {
  collective(), got(all_of(rn, c), rt);
  return PMPI_Iallgather(s, sn, st, r, rn, rt, c, q);
}
int MPI_Allgatherv(const void* s, int sn, MPI_Datatype st, void* r, const int* rc, const int* d, MPI_Datatype rt,
                   MPI_Comm c) {
  collective(), got(sum_counts(rc, c), rt);
  return PMPI_Allgatherv(s, sn, st, r, rc, d, rt, c);
}
int MPI_Alltoall(const void* s, int sn, MPI_Datatype st, void* r, int rn, MPI_Datatype rt, MPI_Comm c) {
  collective(), got(all_of(rn, c), rt);
  return PMPI_Alltoall(s, sn, st, r, rn, rt, c);
}
int MPI_Alltoallv(const void* s, const int* sc, const int* sd, MPI_Datatype st, void* r, const int* rc, const int* rd,
                  MPI_Datatype rt, MPI_Comm c) {
  collective(), got(sum_counts(rc, c), rt);
  return PMPI_Alltoallv(s, sc, sd, st, r, rc, rd, rt, c);
}
int MPI_Exscan(const void* s, void* r, int n, MPI_Datatype t, MPI_Op op, MPI_Comm c) {
  collective(), got(n, t);
  return PMPI_Exscan(s, r, n, t, op, c);
}
int MPI_Barrier(MPI_Comm c) {
  collective();
  return PMPI_Barrier(c);
}
int MPI_Ibarrier(MPI_Comm c, MPI_Request* q) {
  collective();
  return PMPI_Ibarrier(c, q);
}
int MPI_Recv(void* b, int n, MPI_Datatype t, int src, int tag, MPI_Comm c, MPI_Status* st) {
  message();
  MPI_Status mine;
  const int rc = PMPI_Recv(b, n, t, src, tag, c, st == MPI_STATUS_IGNORE ? &mine : st);
  int count = 0;
  PMPI_Get_count(st == MPI_STATUS_IGNORE ? &mine : st, t, &count);
  got(static_cast<std::uint64_t>(count), t);
  return rc;
}
int MPI_Irecv(void* b, int n, MPI_Datatype t, int src, int tag, MPI_Comm c, MPI_Request* q) {
  message(), got(n, t);  // the posted size: an upper bound of what arrives
  return PMPI_Irecv(b, n, t, src, tag, c, q);
}
}

namespace {

[[noreturn]] void fail(const std::string& what) { abort_job("scale", what); }

struct Args {
  int locals = 100, globals = 0, reps = 3, index_format = 1, fsync = 1;
  int ranks_per_writer = 0;  ///< > 0: rbio, P / ranks_per_writer writers, a file each
  std::string transport = "posix";
  double max_root_kib = 0, max_other_kib = 0;  ///< > 0: fail when a commit moves more (the scale test)
  double max_restart_kib = 0;                  ///< > 0: fail when a rank's N->N restart reads more index bytes
  double max_inspect_kib = 0;                  ///< > 0: fail when a rank receives more from inspect()
  std::string dir = "/tmp/ckpt-scale", csv;
};

/// The state of one rank: what it registers.
struct State {
  std::vector<std::vector<double>> locals, globals;
  std::vector<double> rows;
  std::uint64_t nrows = 0;
  std::uint64_t first_row = 0;  // of this rank's rows in the joined array
  /// `salt` 0: the values checkpointed; other: values a restart must overwrite.
  State(const Args& a, int rank, double salt) {
    for (int i = 0; i < a.locals; ++i) locals.emplace_back(16, rank * 1000.0 + i + salt);
    for (int i = 0; i < a.globals; ++i) globals.emplace_back(16, rank * 1000.0 - i + salt);
    nrows = static_cast<std::uint64_t>(rank % 3 + 1);
    for (int q = 0; q < rank; ++q) first_row += static_cast<std::uint64_t>(q % 3 + 1);
    rows.assign(nrows * 4, rank + 0.5 + salt);
  }
};

std::string var_name(const char* kind, int i) {
  char b[32];
  std::snprintf(b, sizeof b, "%s/%06d", kind, i);
  return b;
}

void protect_all(ckpt::Runtime& rt, State& st, bool locals, int rank, int size) {
  if (locals)
    for (std::size_t i = 0; i < st.locals.size(); ++i)
      if (auto s = rt.protect(var_name("l", static_cast<int>(i)), st.locals[i].data(), ckpt::DType::f64, {16});
          !s.ok())
        fail(s.to_string());
  const std::uint64_t r = static_cast<std::uint64_t>(rank), n = static_cast<std::uint64_t>(size);
  for (std::size_t i = 0; i < st.globals.size(); ++i)
    if (auto s = rt.protect(var_name("g", static_cast<int>(i)), st.globals[i].data(), ckpt::DType::f64,
                            ckpt::Block{{16 * n}, {16 * r}, {16}});
        !s.ok())
      fail(s.to_string());
  if (auto s = rt.protect("rows", st.rows.data(), ckpt::DType::f64, ckpt::Joined{{st.nrows, 4}, st.first_row}); !s.ok())
    fail(s.to_string());
}

/// What one measured call moved on this rank.
struct Count {
  std::uint64_t bytes = 0, collectives = 0, messages = 0;
  double s = 0;
};
template <class F>
Count counted(F&& f) {
  g_bytes = 0, g_collectives = 0, g_messages = 0;
  g_counting = true;
  const auto t0 = Clock::now();
  f();
  Count c;
  c.s = since(t0);
  g_counting = false;
  c.bytes = g_bytes, c.collectives = g_collectives, c.messages = g_messages;
  return c;
}

/// A figure of rank 0 and the largest over the other ranks (0 with one rank).
struct Spread {
  std::uint64_t root = 0, others = 0;
};
Spread spread(std::uint64_t v, MPI_Comm comm) {
  int rank = 0;
  PMPI_Comm_rank(comm, &rank);
  std::uint64_t mine = rank == 0 ? 0 : v, others = 0, root = rank == 0 ? v : 0, r0 = 0;
  PMPI_Allreduce(&mine, &others, 1, MPI_UINT64_T, MPI_MAX, comm);
  PMPI_Allreduce(&root, &r0, 1, MPI_UINT64_T, MPI_MAX, comm);
  return {r0, others};
}
double max_s(double v, MPI_Comm comm) {
  double m = 0;
  PMPI_Allreduce(&v, &m, 1, MPI_DOUBLE, MPI_MAX, comm);
  return m;
}

}  // namespace

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  const int rank = world_rank();
  int size = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  Args a;
  parse_options(
      argc, argv,
      "--locals --globals --reps --dir --csv --index-format --fsync --max-commit-root-kib --max-commit-other-kib "
      "--max-restart-kib --max-inspect-kib --ranks-per-writer --transport",
      [&](const std::string& k, const std::string& v) {
        if (k == "--locals")
          a.locals = std::atoi(v.c_str());
        else if (k == "--globals")
          a.globals = std::atoi(v.c_str());
        else if (k == "--reps")
          a.reps = positive_option(k, v, fail);
        else if (k == "--dir")
          a.dir = v;
        else if (k == "--csv")
          a.csv = v;
        else if (k == "--index-format")
          a.index_format = std::atoi(v.c_str());
        else if (k == "--fsync")
          a.fsync = std::atoi(v.c_str());
        else if (k == "--max-commit-root-kib")
          a.max_root_kib = std::atof(v.c_str());
        else if (k == "--max-commit-other-kib")
          a.max_other_kib = std::atof(v.c_str());
        else if (k == "--max-restart-kib")
          a.max_restart_kib = std::atof(v.c_str());
        else if (k == "--max-inspect-kib")
          a.max_inspect_kib = std::atof(v.c_str());
        else if (k == "--ranks-per-writer")
          a.ranks_per_writer = std::atoi(v.c_str());
        else if (k == "--transport")
          a.transport = v;
        else
          return false;
        return true;
      },
      fail);
  if (a.locals < 0 || a.globals < 0) fail("--locals and --globals must be >= 0");
  if (a.index_format != 1 && a.index_format != 2) fail("--index-format must be 1 or 2");
  if (a.ranks_per_writer < 0) fail("--ranks-per-writer must be >= 0");
  if (rank == 0) {
    std::filesystem::remove_all(a.dir);
    if (auto e = make_dir(a.dir); !e.empty()) fail(e);
  }
  PMPI_Barrier(MPI_COMM_WORLD);
  ckpt::Options o = ckpt::Options::defaults();
  o.dir = a.dir;
  o.keep = 1000;
  o.index_format = a.index_format;
  o.fsync = a.fsync != 0;
  o.transport = a.transport;
  if (a.transport == "rbio") o.rbio_files = 1;  // one shared file; --ranks-per-writer: a file per writer
  if (a.ranks_per_writer > 0) {
    o.transport = a.transport = "rbio";
    o.rbio_files = 0;
    o.rbio_writers = (size + a.ranks_per_writer - 1) / a.ranks_per_writer;
  }

  // ---- commit: rank 0's receive per checkpoint ----
  State st(a, rank, 0);
  std::vector<Count> commits;
  std::vector<double> committed;
  std::int64_t last = 0;
  {
    ckpt::Runtime rt(MPI_COMM_WORLD, o);
    if (!rt.status().ok()) fail(rt.status().to_string());
    protect_all(rt, st, true, rank, size);
    for (int k = 0; k <= a.reps; ++k) {
      PMPI_Barrier(MPI_COMM_WORLD);
      ckpt::Ticket t;
      const Count c = counted([&] {
        t = rt.checkpoint(k + 1);
        if (auto s = t.wait(); !s.ok()) fail("checkpoint: " + s.to_string());
      });
      last = k + 1;
      if (k == 0) continue;  // warm-up
      commits.push_back(c);
      committed.push_back(t.stats().committed_s);
    }
  }
  // The median checkpoint by rank 0's received bytes (they hardly vary).
  std::sort(commits.begin(), commits.end(), [](const Count& x, const Count& y) { return x.bytes < y.bytes; });
  const Count& mid = commits[commits.size() / 2];
  const Spread commit_bytes = spread(mid.bytes, MPI_COMM_WORLD);
  const Spread commit_coll = spread(mid.collectives, MPI_COMM_WORLD);
  const double commit_s = max_s(median(committed), MPI_COMM_WORLD);
  std::uint64_t index_bytes = 0, catalog_bytes = 0;  // version 2: the root, and its catalog
  if (rank == 0) {
    struct stat sb {};
    const std::string d = a.dir + "/ckpt." + std::to_string(last);
    if (::stat((d + "/index").c_str(), &sb) == 0) index_bytes = static_cast<std::uint64_t>(sb.st_size);
    if (::stat((d + "/catalog").c_str(), &sb) == 0) catalog_bytes = static_cast<std::uint64_t>(sb.st_size);
  }
  PMPI_Bcast(&index_bytes, 1, MPI_UINT64_T, 0, MPI_COMM_WORLD);
  PMPI_Bcast(&catalog_bytes, 1, MPI_UINT64_T, 0, MPI_COMM_WORLD);

  // ---- restart N->N ----
  State back(a, rank, 0.25);  // other values: the restart must bring them back
  Count nn, newest, ins;
  std::uint64_t ins_read = 0;  // index bytes inspect() read or received on this rank
  std::uint64_t nn_read = 0;  // index bytes this rank read or received
  {
    ckpt::Runtime rt(MPI_COMM_WORLD, o);
    protect_all(rt, back, true, rank, size);
    PMPI_Barrier(MPI_COMM_WORLD);
    newest = counted([&] {
      auto l = rt.latest();
      if (!l.ok() || !l.value() || *l.value() != last) fail("latest(): not step " + std::to_string(last));
    });
    PMPI_Barrier(MPI_COMM_WORLD);
    nn = counted([&] {
      if (auto s = rt.restart(last); !s.ok()) fail("restart N->N: " + s.to_string());
    });
    if (back.locals != st.locals || back.globals != st.globals || back.rows != st.rows) fail("restart N->N: wrong data");
    nn_read = rt.restart_index_bytes();
    std::uint64_t total_rows = 0;
    for (int q = 0; q < size; ++q) total_rows += static_cast<std::uint64_t>(q % 3 + 1);
    PMPI_Barrier(MPI_COMM_WORLD);
    ins = counted([&] {
      auto c = rt.inspect(last);
      if (!c.ok()) fail("inspect: " + c.status().to_string());
      ins_read = c.value().index_bytes();
      auto v = c.value().variable("rows");
      if (!v.ok() || v->shape.empty() || v->shape[0] != total_rows) fail("inspect: not the joined array's rows");
    });
  }
  const Spread ins_bytes = spread(ins.bytes, MPI_COMM_WORLD), ins_coll = spread(ins.collectives, MPI_COMM_WORLD);
  const double ins_s = max_s(ins.s, MPI_COMM_WORLD);
  const Spread ins_index = spread(ins_read, MPI_COMM_WORLD);
  const Spread nn_bytes = spread(nn.bytes, MPI_COMM_WORLD), nn_coll = spread(nn.collectives, MPI_COMM_WORLD);
  const double nn_s = max_s(nn.s, MPI_COMM_WORLD);
  const Spread nn_index = spread(nn_read, MPI_COMM_WORLD);
  const double latest_s = max_s(newest.s, MPI_COMM_WORLD);
  const Spread latest_coll = spread(newest.collectives, MPI_COMM_WORLD);

  // ---- restart N->M: the global and joined arrays, on the first half of the ranks ----
  const int half = std::max(1, size / 2);
  MPI_Comm sub = MPI_COMM_NULL;
  PMPI_Comm_split(MPI_COMM_WORLD, rank < half ? 0 : MPI_UNDEFINED, rank, &sub);
  Spread nm_bytes{}, nm_coll{}, nm_index{};
  double nm_s = 0;
  if (sub != MPI_COMM_NULL) {
    const std::uint64_t n = static_cast<std::uint64_t>(half), r = static_cast<std::uint64_t>(rank);
    const std::uint64_t per = 16 * static_cast<std::uint64_t>(size);
    const std::uint64_t g0 = per * r / n, g1 = per * (r + 1) / n;
    std::vector<std::vector<double>> g(static_cast<std::size_t>(a.globals), std::vector<double>(g1 - g0));
    Count c;
    {
      ckpt::Runtime rt(sub, o);
      for (int i = 0; i < a.globals; ++i)
        if (auto s = rt.protect(var_name("g", i), g[static_cast<std::size_t>(i)].data(), ckpt::DType::f64,
                                ckpt::Block{{per}, {g0}, {g1 - g0}});
            !s.ok())
          fail(s.to_string());
      auto jr = rt.joined_rows(last, "rows");
      if (!jr.ok()) fail(jr.status().to_string());
      std::vector<double> rows(jr->count() * 4);
      if (auto s = rt.protect("rows", rows.data(), ckpt::DType::f64, ckpt::Joined{{jr->count(), 4}, std::nullopt}); !s.ok())
        fail(s.to_string());
      PMPI_Barrier(sub);
      c = counted([&] {
        if (auto s = rt.restart(last); !s.ok()) fail("restart N->M: " + s.to_string());
      });
      nm_index = spread(rt.restart_index_bytes(), sub);
    }
    nm_bytes = spread(c.bytes, sub), nm_coll = spread(c.collectives, sub);
    nm_s = max_s(c.s, sub);
    PMPI_Comm_free(&sub);
  }
  if (rank == 0) {
    std::printf(
        "scale: %d rank(s), %d local + %d global arrays per rank + 1 joined array; %d checkpoint(s); "
        "index format %d; %s\n",
        size, a.locals, a.globals, a.reps, a.index_format,
        a.ranks_per_writer > 0 ? ("rbio, " + std::to_string(a.ranks_per_writer) + " ranks a writer").c_str()
                               : a.transport.c_str());
    std::printf("%-24s %12s %12s %12s %10s\n", "", "rank 0 KiB", "others KiB", "collectives", "ms");
    std::printf("%-24s %12.1f %12s %12s %10s\n", "index file", index_bytes / 1024.0, "-", "-", "-");
    if (a.index_format == 2)
      std::printf("%-24s %12.1f %12s %12s %10s\n", "catalog", catalog_bytes / 1024.0, "-", "-", "-");
    std::printf("%-24s %12.1f %12.1f %12llu %10.1f\n", "commit (received)", commit_bytes.root / 1024.0,
                commit_bytes.others / 1024.0, static_cast<unsigned long long>(commit_coll.root), commit_s * 1e3);
    std::printf("%-24s %12s %12s %12llu %10.1f\n", "latest()", "-", "-",
                static_cast<unsigned long long>(latest_coll.root), latest_s * 1e3);
    std::printf("%-24s %12.1f %12.1f %12llu %10.1f\n", "restart N->N (received)", nn_bytes.root / 1024.0,
                nn_bytes.others / 1024.0, static_cast<unsigned long long>(nn_coll.root), nn_s * 1e3);
    std::printf("%-24s %12.1f %12.1f %12llu %10.1f\n", "inspect (received)", ins_bytes.root / 1024.0,
                ins_bytes.others / 1024.0, static_cast<unsigned long long>(ins_coll.root), ins_s * 1e3);
    std::printf("%-24s %12.1f %12.1f %12llu %10.1f\n", ("restart N->" + std::to_string(half)).c_str(),
                nm_bytes.root / 1024.0, nm_bytes.others / 1024.0, static_cast<unsigned long long>(nm_coll.root),
                nm_s * 1e3);
    std::printf("%-24s %12.1f %12.1f %12s %10s\n", "N->N index read", nn_index.root / 1024.0, nn_index.others / 1024.0,
                "-", "-");
    std::printf("%-24s %12.1f %12.1f %12s %10s\n", ("N->" + std::to_string(half) + " index read").c_str(),
                nm_index.root / 1024.0, nm_index.others / 1024.0, "-", "-");
    std::printf("%-24s %12.1f %12.1f %12s %10s\n", "inspect index read", ins_index.root / 1024.0,
                ins_index.others / 1024.0, "-", "-");
    if (!a.csv.empty()) {
      const bool fresh = !std::filesystem::exists(a.csv);
      FILE* f = std::fopen(a.csv.c_str(), "a");
      if (f == nullptr) fail("cannot write " + a.csv);
      if (fresh)
        std::fprintf(
            f,
            "ranks,locals,globals,index_bytes,commit_root_bytes,commit_other_bytes,commit_collectives,commit_ms,"
            "nn_root_bytes,nn_other_bytes,nn_collectives,nn_ms,nm_ranks,nm_root_bytes,nm_other_bytes,"
            "nm_collectives,nm_ms,index_format,catalog_bytes,nn_index_root_bytes,nn_index_other_bytes,"
            "nm_index_root_bytes,nm_index_other_bytes,latest_ms,latest_collectives,inspect_root_bytes,"
            "inspect_other_bytes,inspect_collectives,inspect_ms,inspect_index_root_bytes,inspect_index_other_bytes,"
            "ranks_per_writer,transport\n");
      std::fprintf(f,
                   "%d,%d,%d,%llu,%llu,%llu,%llu,%.3f,%llu,%llu,%llu,%.3f,%d,%llu,%llu,%llu,%.3f,%d,%llu,%llu,%llu,%"
                   "llu,%llu,%.3f,%llu,%llu,%llu,%llu,%.3f,%llu,%llu,%d,%s\n",
                   size, a.locals, a.globals, static_cast<unsigned long long>(index_bytes),
                   static_cast<unsigned long long>(commit_bytes.root),
                   static_cast<unsigned long long>(commit_bytes.others),
                   static_cast<unsigned long long>(commit_coll.root), commit_s * 1e3,
                   static_cast<unsigned long long>(nn_bytes.root), static_cast<unsigned long long>(nn_bytes.others),
                   static_cast<unsigned long long>(nn_coll.root), nn_s * 1e3, half,
                   static_cast<unsigned long long>(nm_bytes.root), static_cast<unsigned long long>(nm_bytes.others),
                   static_cast<unsigned long long>(nm_coll.root), nm_s * 1e3, a.index_format,
                   static_cast<unsigned long long>(catalog_bytes), static_cast<unsigned long long>(nn_index.root),
                   static_cast<unsigned long long>(nn_index.others), static_cast<unsigned long long>(nm_index.root),
                   static_cast<unsigned long long>(nm_index.others), latest_s * 1e3,
                   static_cast<unsigned long long>(latest_coll.root), static_cast<unsigned long long>(ins_bytes.root),
                   static_cast<unsigned long long>(ins_bytes.others), static_cast<unsigned long long>(ins_coll.root),
                   ins_s * 1e3, static_cast<unsigned long long>(ins_index.root),
                   static_cast<unsigned long long>(ins_index.others), a.ranks_per_writer, a.transport.c_str());
      std::fclose(f);
    }
  }
  // The bounds (ctest scale_bytes_64): what rank 0 and the other ranks receive per commit, and the index
  // bytes a rank reads at an N->N restart.
  if (a.max_restart_kib > 0 && std::max(nn_index.root, nn_index.others) / 1024.0 > a.max_restart_kib)
    fail("restart N->N: a rank read " + std::to_string(std::max(nn_index.root, nn_index.others) / 1024.0) +
         " KiB of index, above the bound of " + std::to_string(a.max_restart_kib) + " KiB");
  if (a.max_inspect_kib > 0 && std::max(ins_bytes.root, ins_bytes.others) / 1024.0 > a.max_inspect_kib)
    fail("inspect: a rank received " + std::to_string(std::max(ins_bytes.root, ins_bytes.others) / 1024.0) +
         " KiB, above the bound of " + std::to_string(a.max_inspect_kib) + " KiB");
  if (a.max_root_kib > 0 && commit_bytes.root / 1024.0 > a.max_root_kib)
    fail("commit: rank 0 received " + std::to_string(commit_bytes.root / 1024.0) + " KiB, above the bound of " +
         std::to_string(a.max_root_kib) + " KiB");
  if (a.max_other_kib > 0 && commit_bytes.others / 1024.0 > a.max_other_kib)
    fail("commit: a rank received " + std::to_string(commit_bytes.others / 1024.0) + " KiB, above the bound of " +
         std::to_string(a.max_other_kib) + " KiB");
  if (rank == 0) {
    std::error_code ec;  // never throws: a leftover directory is no reason to fail the run
    std::filesystem::remove_all(a.dir, ec);
  }
  PMPI_Barrier(MPI_COMM_WORLD);
  MPI_Finalize();
  return 0;
}
