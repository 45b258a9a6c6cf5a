// base/mpi: the collectives every layer uses, with blocking waits (application thread) and with
// sleeping waits (background threads, set_sleeping_waits): the same results either way, and a thread
// with sleeping waits does not burn its core while a peer rank is late.
#include <mpi.h>
#include <time.h>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "base/mpi.hpp"

using namespace ckpt;
using namespace ckpt::detail;

// Which collectives base/mpi called: the executable's definitions stand in for libmpi's (as perf/scale's
// do), count, and call the PMPI entry points.
namespace {
std::atomic<int> g_gathers{0}, g_allgathers{0}, g_gathervs{0};
}  // namespace
extern "C" {
int MPI_Gather(const void* s, int sn, MPI_Datatype st, void* r, int rn, MPI_Datatype rt, int root, MPI_Comm c) {
  ++g_gathers;
  return PMPI_Gather(s, sn, st, r, rn, rt, root, c);
}
int MPI_Igather(const void* s, int sn, MPI_Datatype st, void* r, int rn, MPI_Datatype rt, int root, MPI_Comm c,
                MPI_Request* q) {
  ++g_gathers;
  return PMPI_Igather(s, sn, st, r, rn, rt, root, c, q);
}
int MPI_Gatherv(const void* s, int sn, MPI_Datatype st, void* r, const int* rn, const int* d, MPI_Datatype rt, int root,
                MPI_Comm c) {
  ++g_gathervs;
  return PMPI_Gatherv(s, sn, st, r, rn, d, rt, root, c);
}
int MPI_Igatherv(const void* s, int sn, MPI_Datatype st, void* r, const int* rn, const int* d, MPI_Datatype rt, int root,
                 MPI_Comm c, MPI_Request* q) {
  ++g_gathervs;
  return PMPI_Igatherv(s, sn, st, r, rn, d, rt, root, c, q);
}
int MPI_Allgather(const void* s, int sn, MPI_Datatype st, void* r, int rn, MPI_Datatype rt, MPI_Comm c) {
  ++g_allgathers;
  return PMPI_Allgather(s, sn, st, r, rn, rt, c);
}
int MPI_Iallgather(const void* s, int sn, MPI_Datatype st, void* r, int rn, MPI_Datatype rt, MPI_Comm c,
                   MPI_Request* q) {
  ++g_allgathers;
  return PMPI_Iallgather(s, sn, st, r, rn, rt, c, q);
}
}

namespace {

int rank_of(MPI_Comm c) {
  int r = 0;
  MPI_Comm_rank(c, &r);
  return r;
}
int size_of(MPI_Comm c) {
  int n = 0;
  MPI_Comm_size(c, &n);
  return n;
}

/// Runs `f` on a new thread with sleeping waits on (as ckpt's background threads do), or here.
template <class F>
void on_thread(bool sleeping, F&& f) {
  if (!sleeping) {
    f();
    return;
  }
  std::thread t([&] {
    set_sleeping_waits(true);
    f();
  });
  t.join();
}

double thread_cpu_s() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

class MpiHelpers : public ::testing::TestWithParam<bool> {
 protected:
  void SetUp() override { MPI_Comm_dup(MPI_COMM_WORLD, &m_comm); }
  void TearDown() override { MPI_Comm_free(&m_comm); }
  MPI_Comm m_comm = MPI_COMM_NULL;
};

/// Rank r's bytes in the gather tests: r * `per` bytes of value r + 1 (rank 0 sends nothing).
std::vector<std::uint8_t> bytes_of(int r, std::size_t per) {
  return std::vector<std::uint8_t>(static_cast<std::size_t>(r) * per, static_cast<std::uint8_t>(r + 1));
}

/// What a gather of bytes_of() to `root` must give: nothing off the root, every rank's bytes in order at it.
void expect_gathered(const std::vector<std::vector<std::uint8_t>>& got, MPI_Comm c, int root, std::size_t per,
                     const std::string& what) {
  const int n = size_of(c);
  if (rank_of(c) != root) {
    EXPECT_TRUE(got.empty()) << what;
    return;
  }
  ASSERT_EQ(got.size(), static_cast<std::size_t>(n)) << what;
  for (int r = 0; r < n; ++r)
    EXPECT_EQ(got[static_cast<std::size_t>(r)], bytes_of(r, per)) << "from rank " << r << " at root " << root << what;
}

TEST_P(MpiHelpers, GathervBytesAnyLengthsAnyRoot) {
  const int me = rank_of(m_comm), n = size_of(m_comm);
  const std::vector<std::uint8_t> mine = bytes_of(me, 3);
  for (int root = 0; root < n; ++root) {
    std::vector<std::vector<std::uint8_t>> got;
    const int gathervs = g_gathervs;
    on_thread(GetParam(), [&] { got = gatherv_bytes(m_comm, mine, root); });
    EXPECT_EQ(g_gathervs - gathervs, 1);
    expect_gathered(got, m_comm, root, 3, "");
  }
  // More than an int count in all goes point to point, in pieces: the same result (the limit lowered so
  // that a few bytes take that path; rank r > 1 sends more than it).
  set_gatherv_limit_for_tests(4);
  for (int root = 0; root < n; ++root) {
    std::vector<std::vector<std::uint8_t>> got;
    const int gathervs = g_gathervs;
    on_thread(GetParam(), [&] { got = gatherv_bytes(m_comm, mine, root); });
    EXPECT_EQ(g_gathervs, gathervs) << "no MPI_Gatherv on the point-to-point path";
    expect_gathered(got, m_comm, root, 3, ", point to point");
  }
  set_gatherv_limit_for_tests(0);
  std::vector<std::vector<std::uint8_t>> all;
  on_thread(GetParam(), [&] { all = allgatherv_bytes(m_comm, mine); });
  ASSERT_EQ(all.size(), static_cast<std::size_t>(n));
  EXPECT_EQ(all[static_cast<std::size_t>(n - 1)].size(), static_cast<std::size_t>(n - 1) * 3);
}

// gather_slots: one gather of fixed slots (one MPI_Gather, no round of lengths); bytes longer than a slot
// (rank r > 1 here: 16 bytes fit) follow point to point; the same result as gatherv_bytes at every root. A
// slot too small for its length word, or too large for an int count, is gatherv_bytes (lengths first).
TEST_P(MpiHelpers, GatherSlotsFitOrFollowPointToPoint) {
  const int n = size_of(m_comm);
  const std::vector<std::uint8_t> mine = bytes_of(rank_of(m_comm), 9);
  for (const std::uint64_t slot : {std::uint64_t{24}, std::uint64_t{4}, std::uint64_t{1} << 40})
    for (int root = 0; root < n; ++root) {
      std::vector<std::vector<std::uint8_t>> got;
      const int gathers = g_gathers, allgathers = g_allgathers;
      on_thread(GetParam(), [&] { got = gather_slots(m_comm, mine, slot, root); });
      const bool slots = slot == 24;
      EXPECT_EQ(g_gathers - gathers, slots ? 1 : 0) << "slot " << slot;
      EXPECT_EQ(g_allgathers - allgathers, slots ? 0 : 1) << "slot " << slot;
      expect_gathered(got, m_comm, root, 9, ", slot " + std::to_string(slot));
    }
}

// reduce_bytes: a merge that concatenates gives rank 0 every rank's bytes in rank order (the tree hands
// merge runs of consecutive ranks, the lower left), each rank sending once; on sub-communicators of
// every size from 1 to the job's (the tree's shape depends on it).
TEST_P(MpiHelpers, ReduceBytesMergesInRankOrder) {
  const int n = size_of(m_comm);
  for (int k = 1; k <= n; ++k) {
    MPI_Comm sub = MPI_COMM_NULL;
    MPI_Comm_split(m_comm, rank_of(m_comm) < k ? 0 : MPI_UNDEFINED, 0, &sub);
    if (sub == MPI_COMM_NULL) continue;
    const int me = rank_of(sub);
    // Rank r brings r + 1 bytes of value r (rank 0 one byte 0).
    std::vector<std::uint8_t> mine(static_cast<std::size_t>(me) + 1, static_cast<std::uint8_t>(me));
    int merges = 0;
    std::vector<std::uint8_t> got;
    on_thread(GetParam(), [&] {
      got = reduce_bytes(sub, mine, [&merges](std::vector<std::uint8_t> left, const std::vector<std::uint8_t>& right) {
        ++merges;
        left.insert(left.end(), right.begin(), right.end());
        return left;
      });
    });
    if (me == 0) {
      std::vector<std::uint8_t> want;
      for (int r = 0; r < k; ++r)
        want.insert(want.end(), static_cast<std::size_t>(r) + 1, static_cast<std::uint8_t>(r));
      EXPECT_EQ(got, want) << k << " ranks";
    } else {
      EXPECT_TRUE(got.empty());
    }
    int total = 0;  // every rank but 0 is merged in exactly once
    MPI_Allreduce(&merges, &total, 1, MPI_INT, MPI_SUM, sub);
    EXPECT_EQ(total, k - 1) << k << " ranks";
    MPI_Comm_free(&sub);
  }
}

TEST_P(MpiHelpers, BcastStatusCarriesCodeAndMessage) {
  const int me = rank_of(m_comm), n = size_of(m_comm);
  const int root = n - 1;
  Status ok, err;
  on_thread(GetParam(), [&] {
    ok = bcast_status(m_comm, Status::OK(), root);
    // Only the root's Status counts; the others pass something else.
    err = bcast_status(m_comm, me == root ? Status(Code::io_error, "disk full on the root") : Status::OK(), root);
  });
  EXPECT_TRUE(ok.ok());
  EXPECT_EQ(err.code(), Code::io_error);
  EXPECT_EQ(err.message(), "disk full on the root");
}

TEST_P(MpiHelpers, AgreeNamesTheLowestFailingRank) {
  const int me = rank_of(m_comm), n = size_of(m_comm);
  Status none, some;
  on_thread(GetParam(), [&] {
    none = agree(m_comm, Status::OK());
    some = agree(m_comm, me >= n / 2 ? Status(Code::invalid_argument, "bad " + std::to_string(me)) : Status::OK());
  });
  EXPECT_TRUE(none.ok());
  EXPECT_EQ(some.code(), Code::invalid_argument);
  EXPECT_EQ(some.message(), "rank " + std::to_string(n / 2) + ": bad " + std::to_string(n / 2));
}

TEST_P(MpiHelpers, AllreduceAndBcast) {
  const int me = rank_of(m_comm), n = size_of(m_comm);
  long long v[2] = {me, -me}, r[2] = {0, 0};
  int b = me == 0 ? 42 : -1;
  on_thread(GetParam(), [&] {
    allreduce(v, r, 2, MPI_LONG_LONG, MPI_MAX, m_comm);
    bcast(&b, 1, MPI_INT, 0, m_comm);
  });
  EXPECT_EQ(r[0], n - 1);
  EXPECT_EQ(r[1], 0);
  EXPECT_EQ(b, 42);
}

// exscan_sum over every sub-communicator size 1..P (the first k ranks), several values per rank, twice in
// a row on one communicator (the rounds of one call must not take the messages of the next), against the
// prefix sums computed here; rank 0 gets 0 and a sum wraps.
TEST_P(MpiHelpers, ExscanSumIsTheExclusivePrefixSum) {
  const int me = rank_of(m_comm), n = size_of(m_comm);
  for (int k = 1; k <= n; ++k) {
    MPI_Comm sub = MPI_COMM_NULL;
    MPI_Comm_split(m_comm, me < k ? 0 : MPI_UNDEFINED, me, &sub);
    if (sub == MPI_COMM_NULL) continue;
    auto value = [](int r, int i, int call) {
      return i == 2 ? ~std::uint64_t{0} - static_cast<std::uint64_t>(r)  // wraps
                    : static_cast<std::uint64_t>((r + 1) * (i + 3) + 1000 * call);
    };
    for (int call = 0; call < 2; ++call) {
      std::uint64_t in[3], out[3] = {7, 7, 7};
      for (int i = 0; i < 3; ++i) in[i] = value(me, i, call);
      on_thread(GetParam(), [&] { exscan_sum(in, out, 3, sub); });
      for (int i = 0; i < 3; ++i) {
        std::uint64_t want = 0;
        for (int r = 0; r < me; ++r) want += value(r, i, call);
        EXPECT_EQ(out[i], want) << "size " << k << " rank " << me << " value " << i << " call " << call;
      }
    }
    MPI_Comm_free(&sub);
  }
}

INSTANTIATE_TEST_SUITE_P(Waits, MpiHelpers, ::testing::Values(false, true),
                         [](const auto& info) { return info.param ? "sleeping" : "blocking"; });

TEST(MpiSleepingWaits, ALatePeerCostsLittleCpu) {
  // Rank 0 joins the allreduce 300 ms late. A thread with sleeping waits spends that time asleep:
  // its CPU time stays far below the wait (a blocking MPI_Allreduce polls the whole time).
  if (!sleeping_waits_available()) GTEST_SKIP() << "a ThreadSanitizer build keeps blocking waits (base/mpi.cpp)";
  MPI_Comm comm = MPI_COMM_NULL;
  MPI_Comm_dup(MPI_COMM_WORLD, &comm);
  const int me = rank_of(comm);
  double cpu = 0, wall = 0;
  int sum = 0;
  std::thread t([&] {
    set_sleeping_waits(true);
    if (me == 0) std::this_thread::sleep_for(std::chrono::milliseconds(300));
    const double c0 = thread_cpu_s();
    const auto w0 = std::chrono::steady_clock::now();
    const int one = 1;
    allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, comm);
    cpu = thread_cpu_s() - c0;
    wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - w0).count();
  });
  t.join();
  MPI_Comm_free(&comm);
  EXPECT_EQ(sum, size_of(MPI_COMM_WORLD));
  if (me != 0) {
    EXPECT_GT(wall, 0.2) << "the peer was late by 300 ms";
    // Asleep: ~5-7% of the wait here (2 cores, loaded). Polling: 3 ranks' threads on 2 cores take
    // ~2/3 of a core each on a quiet machine; 0.4 leaves room for sanitizers' slower MPI_Test.
    EXPECT_LT(cpu, 0.4 * wall) << "cpu " << cpu << " s while waiting " << wall << " s";
  }
}

}  // namespace
