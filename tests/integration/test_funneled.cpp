// Funneled MPI calls (Options::mpi_threads): every MPI call ckpt makes comes from the application
// thread. The MPI functions ckpt (and HDF5) use are interposed here (PMPI; the executable exports them,
// so libckpt's calls bind to these) and count the calls made on any other thread. CTest runs this at 4
// ranks with MPI_THREAD_FUNNELED (auto picks funneled) and with MPI_THREAD_MULTIPLE (funneled asked
// for explicitly; the threaded mode shows that the interposition sees ckpt's commit thread).
#include <gtest/gtest.h>
#include <mpi.h>
#include <sys/stat.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "ckpt/ckpt.hpp"
#include "test_util.hpp"

using namespace ckpt;
using ckpt::test::all_true;
using ckpt::test::world_rank;
using ckpt::test::world_size;

namespace {
const std::thread::id g_main_thread = std::this_thread::get_id();  // static init runs on main()'s thread
std::atomic<long> g_off_main{0};
std::mutex g_first_mu;
std::string g_first;  // the first MPI function called off the main thread

void note(const char* fn) {
  if (std::this_thread::get_id() == g_main_thread) return;
  if (g_off_main++ == 0) {
    std::lock_guard<std::mutex> lk(g_first_mu);
    g_first = fn;
  }
}
std::string first_off_main() {
  std::lock_guard<std::mutex> lk(g_first_mu);
  return g_first;
}
}  // namespace

// ---- the interposed MPI functions (Open MPI 4 / MPI-3 signatures) -------------------------------
extern "C" {
int MPI_Allreduce(const void* s, void* r, int n, MPI_Datatype t, MPI_Op op, MPI_Comm c) {
  note("MPI_Allreduce");
  return PMPI_Allreduce(s, r, n, t, op, c);
}
int MPI_Bcast(void* b, int n, MPI_Datatype t, int root, MPI_Comm c) {
  note("MPI_Bcast");
  return PMPI_Bcast(b, n, t, root, c);
}
int MPI_Barrier(MPI_Comm c) {
  note("MPI_Barrier");
  return PMPI_Barrier(c);
}
int MPI_Gather(const void* s, int sn, MPI_Datatype st, void* r, int rn, MPI_Datatype rt, int root, MPI_Comm c) {
  note("MPI_Gather");
  return PMPI_Gather(s, sn, st, r, rn, rt, root, c);
}
int MPI_Gatherv(const void* s, int sn, MPI_Datatype st, void* r, const int* rc, const int* d, MPI_Datatype rt, int root,
                MPI_Comm c) {
  note("MPI_Gatherv");
  return PMPI_Gatherv(s, sn, st, r, rc, d, rt, root, c);
}
int MPI_Allgather(const void* s, int sn, MPI_Datatype st, void* r, int rn, MPI_Datatype rt, MPI_Comm c) {
  note("MPI_Allgather");
  return PMPI_Allgather(s, sn, st, r, rn, rt, c);
}
int MPI_Allgatherv(const void* s, int sn, MPI_Datatype st, void* r, const int* rc, const int* d, MPI_Datatype rt,
                   MPI_Comm c) {
  note("MPI_Allgatherv");
  return PMPI_Allgatherv(s, sn, st, r, rc, d, rt, c);
}
int MPI_Send(const void* b, int n, MPI_Datatype t, int dest, int tag, MPI_Comm c) {
  note("MPI_Send");
  return PMPI_Send(b, n, t, dest, tag, c);
}
int MPI_Recv(void* b, int n, MPI_Datatype t, int src, int tag, MPI_Comm c, MPI_Status* st) {
  note("MPI_Recv");
  return PMPI_Recv(b, n, t, src, tag, c, st);
}
int MPI_Isend(const void* b, int n, MPI_Datatype t, int dest, int tag, MPI_Comm c, MPI_Request* rq) {
  note("MPI_Isend");
  return PMPI_Isend(b, n, t, dest, tag, c, rq);
}
int MPI_Irecv(void* b, int n, MPI_Datatype t, int src, int tag, MPI_Comm c, MPI_Request* rq) {
  note("MPI_Irecv");
  return PMPI_Irecv(b, n, t, src, tag, c, rq);
}
int MPI_Wait(MPI_Request* rq, MPI_Status* st) {
  note("MPI_Wait");
  return PMPI_Wait(rq, st);
}
int MPI_Waitall(int n, MPI_Request* rq, MPI_Status* st) {
  note("MPI_Waitall");
  return PMPI_Waitall(n, rq, st);
}
int MPI_Comm_dup(MPI_Comm c, MPI_Comm* out) {
  note("MPI_Comm_dup");
  return PMPI_Comm_dup(c, out);
}
int MPI_Comm_free(MPI_Comm* c) {
  note("MPI_Comm_free");
  return PMPI_Comm_free(c);
}
int MPI_Comm_rank(MPI_Comm c, int* r) {
  note("MPI_Comm_rank");
  return PMPI_Comm_rank(c, r);
}
int MPI_Comm_size(MPI_Comm c, int* s) {
  note("MPI_Comm_size");
  return PMPI_Comm_size(c, s);
}
int MPI_File_open(MPI_Comm c, const char* name, int mode, MPI_Info info, MPI_File* fh) {
  note("MPI_File_open");
  return PMPI_File_open(c, name, mode, info, fh);
}
int MPI_File_write_at_all(MPI_File fh, MPI_Offset off, const void* b, int n, MPI_Datatype t, MPI_Status* st) {
  note("MPI_File_write_at_all");
  return PMPI_File_write_at_all(fh, off, b, n, t, st);
}
}  // extern "C"

namespace {
constexpr std::uint64_t kRows = 37, kCols = 5;

bool dir_exists(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

int thread_level() {
  int provided = 0;
  MPI_Query_thread(&provided);
  return provided;
}

Options funneled_options(const std::string& dir, const std::string& transport = "posix") {
  Options o = Options::defaults();
  o.dir = dir;
  o.transport = transport;
  o.mpi_threads = Options::MpiThreads::funneled;
  return o;
}

/// This rank's rows of a global [kRows, kCols] array at `step`, an uneven row split.
struct Field {
  std::uint64_t r0 = 0, nr = 0;
  std::vector<double> v;
  Field() {
    const int rank = world_rank(), size = world_size();
    r0 = kRows * static_cast<std::uint64_t>(rank) / static_cast<std::uint64_t>(size);
    nr = kRows * static_cast<std::uint64_t>(rank + 1) / static_cast<std::uint64_t>(size) - r0;
    v.assign(nr * kCols, 0);
  }
  static double value(std::int64_t step, std::uint64_t i, std::uint64_t j) {
    return static_cast<double>(step) * 1e4 + static_cast<double>(i) * 10 + static_cast<double>(j);
  }
  void fill(std::int64_t step) {
    for (std::uint64_t i = 0; i < nr; ++i)
      for (std::uint64_t j = 0; j < kCols; ++j) v[i * kCols + j] = value(step, r0 + i, j);
  }
  bool holds(std::int64_t step) const {
    for (std::uint64_t i = 0; i < nr; ++i)
      for (std::uint64_t j = 0; j < kCols; ++j)
        if (v[i * kCols + j] != value(step, r0 + i, j)) return false;
    return true;
  }
  Block block() const { return Block{{kRows, kCols}, {r0, 0}, {nr, kCols}}; }
};

/// Checkpoints steps 1..n (max_in_flight of them in flight), waits, restarts from `n` and from 1.
void round_trip(Options o, int n) {
  Field f;
  Runtime rt(MPI_COMM_WORLD, o);
  ASSERT_TRUE(rt.status().ok()) << rt.status().to_string();
  ASSERT_TRUE(rt.funneled());
  ASSERT_TRUE(rt.protect("field", f.v.data(), DType::f64, f.block()).ok());
  std::vector<Ticket> tickets;
  for (int s = 1; s <= n; ++s) {
    f.fill(s);
    tickets.push_back(rt.checkpoint(s));
  }
  for (const Ticket& t : tickets) {
    Status s = t.wait();
    ASSERT_TRUE(s.ok()) << s.to_string();
  }
  std::fill(f.v.begin(), f.v.end(), -1.0);
  Status s = rt.restart(n);
  ASSERT_TRUE(s.ok()) << s.to_string();
  EXPECT_TRUE(all_true(f.holds(n)));
  EXPECT_EQ(ckpt::test::newest_step(rt), n);
  EXPECT_TRUE(rt.close().ok());
}
}  // namespace

TEST(Funneled, AutoFollowsTheThreadLevel) {
  Options o = Options::defaults();
  o.dir = ckpt::test::scratch_dir();
  ASSERT_FALSE(o.mpi_threads.has_value()) << "auto";
  Runtime rt(MPI_COMM_WORLD, o);
  ASSERT_TRUE(rt.status().ok()) << rt.status().to_string();
  EXPECT_EQ(rt.funneled(), thread_level() < MPI_THREAD_MULTIPLE);
}

TEST(Funneled, CheckpointsCommitAndRestartWithNoMpiCallOffTheApplicationThread) {
  const long before = g_off_main.load();
  Options o = funneled_options(ckpt::test::scratch_dir());
  o.max_in_flight = 3;
  o.keep = 10;
  round_trip(o, 5);
  EXPECT_EQ(g_off_main.load(), before) << "first: " << first_off_main();
}

TEST(Funneled, ACheckpointCommitsOnlyAtACollectiveCall) {
  const long before = g_off_main.load();
  const std::string dir = ckpt::test::scratch_dir();
  Options o = funneled_options(dir);
  o.max_in_flight = 2;
  Field f;
  Runtime rt(MPI_COMM_WORLD, o);
  ASSERT_TRUE(rt.status().ok()) << rt.status().to_string();
  ASSERT_TRUE(rt.protect("field", f.v.data(), DType::f64, f.block()).ok());
  f.fill(1);
  Ticket t1 = rt.checkpoint(1);
  // The data is written by the flush threads meanwhile, but nobody commits: no MPI off this thread.
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_FALSE(t1.done());
  EXPECT_FALSE(dir_exists(dir + "/ckpt.1"));
  // poll() commits what every rank has written; done() is the same on every rank after each poll,
  // so every rank calls poll() as often.
  int polls = 0;
  while (!t1.done() && polls < 10000) {
    ASSERT_TRUE(rt.poll().ok());
    ++polls;
    if (!t1.done()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_TRUE(t1.done());
  EXPECT_TRUE(t1.wait().ok());
  EXPECT_TRUE(dir_exists(dir + "/ckpt.1"));
  // The in-flight window: with max_in_flight 2, checkpoint(4) finds 2 and 3 in flight and commits 2
  // before it captures (whether 2 or 3 committed earlier, inside checkpoint(3), depends on timing).
  Ticket t[5];
  for (int s = 2; s <= 4; ++s) {
    f.fill(s);
    t[s] = rt.checkpoint(s);
  }
  EXPECT_TRUE(t[2].done());
  EXPECT_TRUE(t[2].wait().ok());
  // close() commits the rest.
  EXPECT_TRUE(rt.close().ok());
  for (int s = 3; s <= 4; ++s) {
    EXPECT_TRUE(t[s].done());
    EXPECT_TRUE(t[s].wait().ok());
  }
  EXPECT_TRUE(dir_exists(dir + "/ckpt.4"));
  EXPECT_EQ(g_off_main.load(), before) << "first: " << first_off_main();
}

TEST(Funneled, RestartAndLatestCommitWhatIsInFlight) {
  const std::string dir = ckpt::test::scratch_dir();
  Field f;
  Runtime rt(MPI_COMM_WORLD, funneled_options(dir));
  ASSERT_TRUE(rt.protect("field", f.v.data(), DType::f64, f.block()).ok());
  f.fill(7);
  Ticket t = rt.checkpoint(7);
  std::fill(f.v.begin(), f.v.end(), 0.0);
  Status s = rt.restart(7);  // waits for 7's data and commits it, on this thread
  ASSERT_TRUE(s.ok()) << s.to_string();
  EXPECT_TRUE(t.done());
  EXPECT_TRUE(all_true(f.holds(7)));
}

TEST(Funneled, OpenTokenAndHdf5SyncRunOnTheApplicationThread) {
  const long before = g_off_main.load();
  Options o = funneled_options(ckpt::test::scratch_dir("-token"));
  o.open_token = 1;  // posix passes a token round robin at open: on this thread when funneled
  o.max_in_flight = 2;
  round_trip(o, 3);
#if CKPTTEST_HAVE_HDF5
  round_trip(funneled_options(ckpt::test::scratch_dir("-h5sync"), "hdf5-sync"), 2);
#endif
  EXPECT_EQ(g_off_main.load(), before) << "first: " << first_off_main();
}

TEST(Funneled, TransportsWhoseWritersCallMpiAreRefusedByName) {
  std::vector<std::string> refused = {"mpiio", "rbio"};
#if CKPTTEST_HAVE_HDF5
  refused.push_back("hdf5");
#endif
  for (const std::string& t : refused) {
    Runtime rt(MPI_COMM_WORLD, funneled_options(ckpt::test::scratch_dir("-" + t), t));
    EXPECT_EQ(rt.status().code(), Code::failed_precondition) << rt.status().to_string();
    EXPECT_NE(rt.status().message().find("'" + t + "'"), std::string::npos) << rt.status().message();
    EXPECT_NE(rt.status().message().find("funneled"), std::string::npos) << rt.status().message();
    EXPECT_EQ(rt.checkpoint(1).wait().code(), Code::failed_precondition);
  }
}

TEST(Funneled, MultipleDemandedWithoutThreadMultipleIsAClearError) {
  if (thread_level() == MPI_THREAD_MULTIPLE) GTEST_SKIP() << "MPI gave MPI_THREAD_MULTIPLE here";
  Options o = Options::defaults();
  o.dir = ckpt::test::scratch_dir();
  o.mpi_threads = Options::MpiThreads::multiple;
  Runtime rt(MPI_COMM_WORLD, o);
  EXPECT_EQ(rt.status().code(), Code::unavailable);
  EXPECT_NE(rt.status().message().find("MPI_THREAD_MULTIPLE"), std::string::npos) << rt.status().message();
  EXPECT_NE(rt.status().message().find("funneled"), std::string::npos) << rt.status().message();
}

// The check above would pass with an interposition that sees nothing: in the threaded mode the
// commit thread's collectives must be seen.
TEST(Funneled, TheInterpositionSeesTheCommitThreadInThreadedMode) {
  if (thread_level() != MPI_THREAD_MULTIPLE) GTEST_SKIP() << "needs MPI_THREAD_MULTIPLE";
  const long before = g_off_main.load();
  Options o = Options::defaults();
  o.dir = ckpt::test::scratch_dir();
  o.mpi_threads = Options::MpiThreads::multiple;
  Field f;
  Runtime rt(MPI_COMM_WORLD, o);
  ASSERT_TRUE(rt.status().ok()) << rt.status().to_string();
  EXPECT_FALSE(rt.funneled());
  ASSERT_TRUE(rt.protect("field", f.v.data(), DType::f64, f.block()).ok());
  ASSERT_TRUE(rt.checkpoint(1).wait().ok());
  EXPECT_GT(g_off_main.load(), before);
  EXPECT_FALSE(first_off_main().empty());
}

TEST(Funneled, TheNodeLevelIsRefused) {
  Options o = funneled_options(ckpt::test::scratch_dir());
  o.local_dir = o.dir + "/node";  // its drain thread calls MPI
  Runtime rt(MPI_COMM_WORLD, o);
  EXPECT_EQ(rt.status().code(), Code::failed_precondition) << rt.status().to_string();
  EXPECT_NE(rt.status().message().find("local_dir"), std::string::npos) << rt.status().message();
}

TEST(Funneled, CoalesceIsRefusedNamingTheWayOut) {
  // on_busy coalesce agrees on its launcher thread which capture to flush (MPI): refused funneled.
  Options o = funneled_options(ckpt::test::scratch_dir());
  o.on_busy = Options::OnBusy::coalesce;
  Runtime rt(MPI_COMM_WORLD, o);
  EXPECT_EQ(rt.status().code(), Code::failed_precondition) << rt.status().to_string();
  for (const char* word : {"on_busy", "'wait'", "MPI_THREAD_MULTIPLE", "funneled"})
    EXPECT_NE(rt.status().message().find(word), std::string::npos) << word << ": " << rt.status().message();
}

TEST(Funneled, RefusedCheckpointsFailAlikeOnEveryRankWithNoMpiCallOffTheApplicationThread) {
  // The ranks agree on the step in checkpoint() here (threaded: on the write thread, which then skips
  // it funneled). A rank passing another step, or a negative one, fails every rank's ticket with the
  // same error; nothing is written; the next checkpoint works.
  const long before = g_off_main.load();
  const std::string dir = ckpt::test::scratch_dir();
  Field f;
  Runtime rt(MPI_COMM_WORLD, funneled_options(dir));
  ASSERT_TRUE(rt.status().ok()) << rt.status().to_string();
  ASSERT_TRUE(rt.protect("field", f.v.data(), DType::f64, f.block()).ok());
  const int last = world_size() - 1;
  Status differ = rt.checkpoint(world_rank() == last ? 6 : 5).wait();
  EXPECT_EQ(differ.code(), Code::invalid_argument) << differ.to_string();
  EXPECT_NE(differ.message().find("different steps"), std::string::npos) << differ.message();
  Status negative = rt.checkpoint(world_rank() == last ? -1 : 5).wait();
  EXPECT_EQ(negative.code(), Code::invalid_argument) << negative.to_string();
  EXPECT_NE(negative.message().find(">= 0"), std::string::npos) << negative.message();
  EXPECT_FALSE(dir_exists(dir + "/ckpt.5"));
  EXPECT_FALSE(dir_exists(dir + "/ckpt.6"));
  f.fill(5);
  Status ok = rt.checkpoint(5).wait();
  ASSERT_TRUE(ok.ok()) << ok.to_string();
  EXPECT_TRUE(dir_exists(dir + "/ckpt.5"));
  EXPECT_TRUE(rt.close().ok());
  EXPECT_EQ(g_off_main.load(), before) << "first: " << first_off_main();
}

TEST(Funneled, DurableEveryMsSyncsOnTheApplicationThread) {
  // durable_every_ms: the commit's periodic sync (rank 0's broadcast, the agreed Store::sync) is part
  // of the commit, made here.
  const long before = g_off_main.load();
  Options o = funneled_options(ckpt::test::scratch_dir());
  o.durable_every_ms = 1;
  o.keep = 10;
  Field f;
  Runtime rt(MPI_COMM_WORLD, o);
  ASSERT_TRUE(rt.status().ok()) << rt.status().to_string();
  ASSERT_TRUE(rt.protect("field", f.v.data(), DType::f64, f.block()).ok());
  bool synced = false;
  for (int s = 1; s <= 3; ++s) {
    f.fill(s);
    Ticket t = rt.checkpoint(s);
    std::this_thread::sleep_for(std::chrono::milliseconds(5));  // the period is over at the commit
    ASSERT_TRUE(t.wait().ok());
    synced = synced || t.stats().synced;
  }
  EXPECT_TRUE(all_true(synced));
  EXPECT_TRUE(rt.close().ok());
  EXPECT_EQ(g_off_main.load(), before) << "first: " << first_off_main();
}
