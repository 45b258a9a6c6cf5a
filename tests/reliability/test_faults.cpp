// Fault injection (issue 9): ENOSPC and EIO in data writes, data fsync, index write and index fsync,
// injected by the LD_PRELOAD shim libfaultinject.so (faultinject.c) under every persistent byte-file
// transport. After each fault: the checkpoint's wait() fails with a Status naming the errno text and
// the file, no partial directory is left, the previous checkpoint stays the newest loadable one and
// restores bit for bit, the application keeps running, and the next checkpoint succeeds once the
// fault is gone. Must run with LD_PRELOAD=libfaultinject.so (the CMake test does).
#include <dirent.h>
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "ckpt/ckpt.hpp"
#include "test_util.hpp"

using namespace ckpt;
using ckpt::test::all_true;
using ckpt::test::scratch_dir;
using ckpt::test::world_rank;
using ckpt::test::world_size;

namespace {

using ConfigureFn = void (*)(const char*, const char*, const char*, long long, long long);
using HitsFn = long long (*)();

struct Shim {
  ConfigureFn configure = nullptr;
  void (*disarm)() = nullptr;
  HitsFn hits = nullptr;
  Shim() {
    configure = reinterpret_cast<ConfigureFn>(dlsym(RTLD_DEFAULT, "faultinj_configure"));
    disarm = reinterpret_cast<void (*)()>(dlsym(RTLD_DEFAULT, "faultinj_disarm"));
    hits = reinterpret_cast<HitsFn>(dlsym(RTLD_DEFAULT, "faultinj_hits"));
  }
  bool ok() const { return configure && disarm && hits; }
};

long long sum_ll(long long v) {
  long long s = 0;
  MPI_Allreduce(&v, &s, 1, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
  return s;
}
std::vector<std::string> entries(const std::string& dir) {
  std::vector<std::string> out;
  if (DIR* d = ::opendir(dir.c_str())) {
    while (dirent* e = ::readdir(d))
      if (std::strcmp(e->d_name, ".") && std::strcmp(e->d_name, "..")) out.push_back(e->d_name);
    ::closedir(d);
  }
  return out;
}

struct State {
  std::vector<double> u;  // 300 KiB per rank: several chunks of 64 KiB
  std::vector<std::int64_t> loc;
  std::int64_t step = 0;
  std::uint64_t n = 0, lo = 0, global = 0;
  State(int rank, int size) : n(38400), lo(38400ull * rank), global(38400ull * size) {
    u.resize(n);
    loc.resize(100 + rank);
  }
  void fill(std::int64_t s) {
    for (std::uint64_t i = 0; i < n; ++i) u[i] = static_cast<double>(s) * 1e6 + static_cast<double>(lo + i);
    for (std::size_t i = 0; i < loc.size(); ++i) loc[i] = s * 31 + static_cast<std::int64_t>(i);
    step = s;
  }
  bool equals(std::int64_t s) const {
    State r = *this;
    r.fill(s);
    return r.u == u && r.loc == loc && step == s;
  }
  void clobber() {
    std::fill(u.begin(), u.end(), -1.0);
    std::fill(loc.begin(), loc.end(), -1);
    step = -1;
  }
  /// Registers "u" (rows lo.. of a global array) and "loc" (a local array) with `rt`.
  Status protect(Runtime& rt) {
    Status s = rt.protect("u", u.data(), DType::f64, Block{{global}, {lo}, {n}});
    return s.ok() ? rt.protect("loc", loc.data(), DType::i64, {loc.size()}) : s;
  }
};

/// The options every case starts from: `dir`, chunks of 64 KiB (a State's "u" spans several).
Options fault_options(const std::string& dir) {
  Options o = Options::defaults();
  o.dir = dir;
  o.chunk_bytes = 64 * 1024;
  return o;
}

struct Fault {
  const char* what;
  const char* file;  // pattern after "ckpt.<step>.tmp/"
  const char* op;
  const char* err;
  long long after;
  const char* errtext;
  bool rank0_only;  // the index is written by rank 0
};

void run_faults(const std::string& transport) {
  Shim shim;
  ASSERT_TRUE(shim.ok()) << "libfaultinject.so is not preloaded (LD_PRELOAD)";
  const int rank = world_rank();
  const std::string dir = scratch_dir();
  Options o = fault_options(dir);
  o.transport = transport;
  o.fsync = true;
  o.keep = 2;
  Runtime rt(MPI_COMM_WORLD, o);
  ASSERT_TRUE(rt.status().ok()) << rt.status().to_string();
  State st(rank, world_size());
  ASSERT_TRUE(st.protect(rt).ok());
  ASSERT_TRUE(rt.protect_scalar("step", &st.step).ok());

  std::int64_t good = 1;
  st.fill(good);
  ASSERT_TRUE(rt.checkpoint(good).wait().ok());

  const Fault faults[] = {
      {"ENOSPC in data writes after 100 KiB", "", "write", "ENOSPC", 100 * 1024, "No space left on device", false},
      {"ENOSPC on the first data write", "", "write", "ENOSPC", 0, "No space left on device", false},
      {"EIO in data writes", "", "write", "EIO", 200 * 1024, "Input/output error", false},
      {"EIO in fdatasync of the data", "", "sync", "EIO", 0, "Input/output error", false},
      {"ENOSPC writing the index", "index", "write", "ENOSPC", 0, "No space left on device", true},
      {"EIO in fsync of the index", "index", "sync", "EIO", 0, "Input/output error", true},
  };
  int injected = 0;
  for (const Fault& f : faults) {
    SCOPED_TRACE(transport + ": " + f.what);
    const std::int64_t bad = good + 1;
    // Data faults hit the transport's data files only (not the index, which is written last).
    const std::string data_prefix = transport == "posix" ? "data." : transport == "mpiio" ? "coio." : "rbio.";
    const std::string pattern =
        "/ckpt." + std::to_string(bad) + ".tmp/" + (*f.file ? std::string(f.file) : data_prefix);
    if (!f.rank0_only || rank == 0) shim.configure(pattern.c_str(), f.op, f.err, f.after, 0);
    st.fill(bad);
    Status s = rt.checkpoint(bad).wait();
    const long long hits = sum_ll(shim.hits());
    shim.disarm();
    MPI_Barrier(MPI_COMM_WORLD);
    EXPECT_GT(hits, 0) << "the fault was never injected";
    injected += static_cast<int>(hits);
    EXPECT_FALSE(s.ok()) << "checkpoint " << bad << " succeeded despite the fault";
    // The errno text, except through MPI-IO (MPI error classes do not carry errno: then the
    // operation must be named instead); and the file.
    const bool via_mpiio = transport == "mpiio" && !f.rank0_only;
    EXPECT_NE(s.message().find(via_mpiio ? "MPI" : f.errtext), std::string::npos) << "unclear error: " << s.to_string();
    EXPECT_NE(s.message().find(f.rank0_only ? "index" : data_prefix), std::string::npos)
        << "error does not name the file: " << s.to_string();
    // Nothing partial left behind: no ckpt.<bad>.tmp, no ckpt.<bad>.
    if (rank == 0)
      for (auto& e : entries(dir)) EXPECT_NE(e.rfind("ckpt." + std::to_string(bad), 0), 0u) << "left behind: " << e;
    // The previous checkpoint is still the newest and restores bit for bit.
    EXPECT_EQ(ckpt::test::newest_step(rt), good);
    st.clobber();
    auto r = rt.restart();
    EXPECT_TRUE(r.ok() && r.value() == good) << (r.ok() ? "" : r.status().to_string());
    EXPECT_TRUE(all_true(st.equals(good)));
    // The application keeps running; with the fault gone the next checkpoint commits.
    const std::int64_t next = bad + 1;
    st.fill(next);
    Status s2 = rt.checkpoint(next).wait();
    EXPECT_TRUE(s2.ok()) << s2.to_string();
    st.clobber();
    EXPECT_TRUE(rt.restart(next).ok());
    EXPECT_TRUE(all_true(st.equals(next)));
    if (rank == 0) std::printf("[faults %s] %-40s -> %s\n", transport.c_str(), f.what, s.to_string().c_str());
    good = next;
  }
  if (rank == 0)
    std::printf("[faults %s] %zu scenarios, %d faults injected\n", transport.c_str(), std::size(faults), injected);
  EXPECT_TRUE(rt.close().ok());
}

/// `ckpt verify <dir>` (RELTEST_CLI); its exit status, -1 without the tool. `log` gets its output.
int cli_verify(const std::string& dir, std::string* log) {
  const char* cli = std::getenv("RELTEST_CLI");
  if (cli == nullptr) return -1;
  const std::string out = dir + ".verify.log";
  const int rc = std::system((std::string(cli) + " verify " + dir + " >" + out + " 2>&1").c_str());
  if (FILE* f = std::fopen(out.c_str(), "r")) {
    char buf[4096];
    std::size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) log->append(buf, n);
    std::fclose(f);
  }
  ::unlink(out.c_str());
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : 128;
}

}  // namespace

// layout series (docs/format.md, "Series layout"): a checkpoint that fails on one rank (EIO after
// 100 KiB of its stream) leaves that rank's segment file where it was - its bytes cut off - and a
// shorter next checkpoint goes where it went; on the other rank the failed checkpoint's finished stream
// stays unreferenced between two committed ones. `ckpt verify` of the root (which checks the bytes
// between the committed streams) must pass: nothing of the failed checkpoint lies where zeros are due.
TEST(Faults, PosixSeriesFailedCheckpoint) {
  Shim shim;
  ASSERT_TRUE(shim.ok()) << "libfaultinject.so is not preloaded (LD_PRELOAD)";
  const int rank = world_rank();
  const std::string dir = scratch_dir();
  Options o = fault_options(dir);
  o.layout = Options::Layout::series;
  o.fsync = false;
  o.keep = 100;
  // The shim marks a file when it is opened (the segment's data file: at the first checkpoint).
  const char* pattern = "/series.0/data.";
  if (rank == 1) shim.configure(pattern, "write", "EIO", 1LL << 40, 0);
  Runtime rt(MPI_COMM_WORLD, o);
  ASSERT_TRUE(rt.status().ok()) << rt.status().to_string();
  State st(rank, world_size());
  ASSERT_TRUE(st.protect(rt).ok());
  st.fill(1);
  ASSERT_TRUE(all_true(rt.checkpoint(1).wait().ok()));
  if (rank == 1) shim.configure(pattern, "write", "EIO", 100 * 1024, 0);
  st.fill(2);
  Status s2 = rt.checkpoint(2).wait();
  const long long hits = sum_ll(shim.hits());
  shim.disarm();
  EXPECT_GT(hits, 0) << "the fault was never injected";
  EXPECT_FALSE(s2.ok()) << "checkpoint 2 succeeded despite the fault";
  // Shorter checkpoints from now on (a 1000-element u): the failed one's bytes would lie past their end.
  ASSERT_TRUE(rt.unprotect("u").ok());
  const std::uint64_t small = 1000;
  ASSERT_TRUE(rt.protect("u", st.u.data(), DType::f64, Block{{small * world_size()}, {small * rank}, {small}}).ok());
  for (std::int64_t step : {3, 4}) {
    st.fill(step);
    Status s = rt.checkpoint(step).wait();
    EXPECT_TRUE(s.ok()) << s.to_string();
  }
  EXPECT_TRUE(rt.close().ok());
  MPI_Barrier(MPI_COMM_WORLD);
  std::string log;
  const int rc = rank == 0 ? cli_verify(dir, &log) : 0;
  EXPECT_TRUE(all_true(rc == 0 || rc == -1)) << "ckpt verify " << dir << " (exit " << rc << "):\n" << log;
  if (rank == 0 && rc == -1) std::printf("RELTEST_CLI not set: ckpt verify not run\n");
  if (rank == 0)
    std::printf("[faults series] checkpoint 2: %s; ckpt verify of the root: exit %d\n", s2.to_string().c_str(), rc);
}

// The two-level index (index_format 2): a sub-index that cannot be written (ENOSPC on index.1) fails the
// checkpoint on every rank, with its whole message, and the next checkpoint commits and restores. posix,
// mpiio, hdf5 and rbio with one shared file: rank 1 writes index.1 - the writers' reports are gathered in
// slots as large as the largest report without an error, so this one follows point to point (base/mpi
// gather_slots); were rank 0 writing every sub-index (the transport not allowing it), the fault would never
// fire. rbio with 2 writers and a file each: the writer of the second group (rank ceil(P / 2)) writes its
// group's index.1 from its ranks' parts and reports its failure.
TEST(Faults, TwoLevelSubIndexWriteFails) {
  Shim shim;
  ASSERT_TRUE(shim.ok()) << "libfaultinject.so is not preloaded (LD_PRELOAD)";
  const int rank = world_rank();
  if (world_size() < 2) GTEST_SKIP() << "needs 2 ranks";
  std::vector<std::string> transports = {"posix", "mpiio", "rbio", "rbio-shared"};
#if CKPTTEST_HAVE_HDF5
  transports.push_back("hdf5");
#endif
  for (const std::string& name : transports) {
    SCOPED_TRACE(name);
    const std::string transport = name == "rbio-shared" ? "rbio" : name;
    const int writer = name == "rbio" ? (world_size() + 1) / 2 : 1;  // the rank that writes index.1
    const std::string dir = scratch_dir("-" + name);
    Options o = fault_options(dir);
    o.index_format = 2;
    o.transport = transport;
    o.rbio_writers = 2;
    o.rbio_files = name == "rbio-shared" ? 1 : 0;
    Runtime rt(MPI_COMM_WORLD, o);
    ASSERT_TRUE(rt.status().ok()) << rt.status().to_string();
    State st(rank, world_size());
    ASSERT_TRUE(st.protect(rt).ok());
    ASSERT_TRUE(rt.protect_scalar("step", &st.step).ok());
    st.fill(1);
    ASSERT_TRUE(rt.checkpoint(1).wait().ok());
    if (rank == writer) shim.configure("/ckpt.2.tmp/index.1", "write", "ENOSPC", 0, 0);
    st.fill(2);
    Status s2 = rt.checkpoint(2).wait();
    const long long hits = sum_ll(shim.hits());
    shim.disarm();
    EXPECT_GT(hits, 0) << "the fault was never injected";
    EXPECT_FALSE(s2.ok()) << "checkpoint 2 committed without sub-index 1";
    for (const std::string part :
         {"rank " + std::to_string(writer), std::string("index.1"), std::string("No space left on device")})
      EXPECT_NE(s2.message().find(part), std::string::npos) << "no '" << part << "' in: " << s2.to_string();
    st.fill(3);
    Status s3 = rt.checkpoint(3).wait();
    EXPECT_TRUE(s3.ok()) << s3.to_string();
    st.clobber();
    EXPECT_TRUE(rt.restart(3).ok());
    EXPECT_TRUE(all_true(st.equals(3)));
    if (rank == 0) std::printf("[faults two-level %s] checkpoint 2: %s\n", name.c_str(), s2.to_string().c_str());
    EXPECT_TRUE(rt.close().ok());
  }
}

// Incremental checkpoints (issue 36): a commit that fails (ENOSPC writing the catalog on rank 0)
// ends the chain. The checkpoint after it refers to nothing - a failed commit may have rolled newer steps
// back first, so nothing it compared against is sure to be kept - and restores bit for bit with every
// older step removed; the steps before the failure still restore through their references.
TEST(Faults, PosixIncrementalFailedCommit) {
  Shim shim;
  ASSERT_TRUE(shim.ok()) << "libfaultinject.so is not preloaded (LD_PRELOAD)";
  const int rank = world_rank();
  const std::string dir = scratch_dir();
  Options o = fault_options(dir);
  o.index_format = 2;
  o.incremental = true;
  o.incremental_piece_bytes = 64 * 1024;
  o.keep = 100;
  Runtime rt(MPI_COMM_WORLD, o);
  ASSERT_TRUE(rt.status().ok()) << rt.status().to_string();
  // 1 MiB per rank: 16 pieces; a step changes the first 100 values only (one piece of 16).
  std::vector<double> u(1 << 17);
  std::int64_t step = 0;
  auto fill = [&](std::int64_t s) {
    for (std::size_t i = 0; i < u.size(); ++i) u[i] = (i < 100 ? static_cast<double>(s) : 0.5) * 1e6 + i + rank;
    step = s;
  };
  auto restores = [&](std::int64_t s) {
    std::fill(u.begin(), u.end(), -1.0);
    step = -1;
    Status r = rt.restart(s);
    const std::vector<double> got = u;
    const std::int64_t got_step = step;
    fill(s);  // what was captured
    return all_true(r.ok() && got == u && got_step == s);
  };
  ASSERT_TRUE(rt.protect("u", u.data(), DType::f64, {u.size()}).ok());
  ASSERT_TRUE(rt.protect_scalar("step", &step).ok());
  for (std::int64_t s : {1, 2}) {
    fill(s);
    ASSERT_TRUE(rt.checkpoint(s).wait().ok());
  }
  if (rank == 0) shim.configure("/ckpt.3.tmp/catalog", "write", "ENOSPC", 0, 0);
  fill(3);
  Status s3 = rt.checkpoint(3).wait();
  const long long hits = sum_ll(shim.hits());
  shim.disarm();
  EXPECT_GT(hits, 0) << "the fault was never injected";
  EXPECT_FALSE(s3.ok()) << "checkpoint 3 committed despite the fault";
  fill(4);
  ASSERT_TRUE(rt.checkpoint(4).wait().ok());
  EXPECT_TRUE(restores(2)) << "step 2 (refers to step 1) after the failed commit";
  // Step 4 started a new chain: it restores without steps 1 and 2.
  MPI_Barrier(MPI_COMM_WORLD);
  if (rank == 0)
    for (const char* old : {"/ckpt.1", "/ckpt.2"}) EXPECT_TRUE(ckpt::detail::remove_tree(dir + old).ok());
  MPI_Barrier(MPI_COMM_WORLD);
  EXPECT_TRUE(restores(4)) << "step 4 needs a step from before the failed commit";
  std::string log;
  const int rc = rank == 0 ? cli_verify(dir, &log) : 0;
  EXPECT_TRUE(all_true(rc == 0 || rc == -1)) << "ckpt verify " << dir << " (exit " << rc << "):\n" << log;
  if (rank == 0) std::printf("[faults incremental] checkpoint 3: %s; step 4 restores alone\n", s3.to_string().c_str());
  EXPECT_TRUE(rt.close().ok());
}

TEST(Faults, Posix) { run_faults("posix"); }
TEST(Faults, Mpiio) { run_faults("mpiio"); }
TEST(Faults, Rbio) { run_faults("rbio"); }
