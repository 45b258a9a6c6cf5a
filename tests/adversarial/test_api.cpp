// The adversarial suite, in-process part (issue 14; run at 4 ranks): API misuse, collective
// disagreement, restart friction, hostile directory contents, the directory lock, options.
// Every case starts with the promise it checks; a hang fails through the Watchdog (adv_util.hpp), a
// crash fails the program, a wrong outcome or an unclear error fails an assertion.
// docs/reliability.md has the table of every case.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <numeric>
#include <optional>
#include <thread>
#include <vector>

#include "adv_util.hpp"
#include "base/store.hpp"
#include "ckpt/ckpt.h"

namespace ckpt::adv {
namespace {

// ---- API misuse ------------------------------------------------------------------------------------

// Promise: Runtime(MPI_COMM_NULL) - what MPI_Comm_split gives a rank left out - is an error value,
// not an abort of the job; the ranks in the split communicator checkpoint normally.
TEST_F(Adversarial, CommNullIsAnErrorNotAnAbort) {
  const std::string dir = scratch_dir();
  MPI_Comm sub = MPI_COMM_NULL;
  MPI_Comm_split(MPI_COMM_WORLD, world_rank() == 3 ? MPI_UNDEFINED : 0, world_rank(), &sub);
  {
    Runtime rt(sub, opts(dir));
    if (world_rank() == 3) {
      EXPECT_EQ(rt.status().code(), Code::invalid_argument);
      EXPECT_TRUE(has(rt.status().message(), "MPI_COMM_NULL")) << rt.status().to_string();
      EXPECT_EQ(rt.checkpoint(1).wait().code(), Code::invalid_argument);
    } else {
      ASSERT_TRUE(rt.status().ok()) << rt.status().to_string();
      double x = 1.5;
      ASSERT_TRUE(rt.protect_scalar("x", &x).ok());
      EXPECT_TRUE(rt.checkpoint(1).wait().ok());
    }
  }
  if (sub != MPI_COMM_NULL) MPI_Comm_free(&sub);
  MPI_Barrier(MPI_COMM_WORLD);
}

// Promise: a shape whose size in bytes overflows 64 bits is refused at protect() with
// invalid_argument, not reported later as `internal`.
TEST_F(Adversarial, ShapeWhoseBytesOverflowIsRefused) {
  Runtime rt(MPI_COMM_WORLD, opts(scratch_dir()));
  ASSERT_TRUE(rt.status().ok());
  double x = 0;
  const std::uint64_t big = 1ull << 62;  // elements fit in u64, bytes (x8) do not
  Status s = rt.protect("a", &x, DType::f64, Shape{big});
  EXPECT_EQ(s.code(), Code::invalid_argument) << s.to_string();
  EXPECT_TRUE(has(s.message(), "overflow")) << s.to_string();
  s = rt.protect("b", &x, DType::f64, Block{{big, 4}, {0, 0}, {1, 1}});
  EXPECT_EQ(s.code(), Code::invalid_argument) << s.to_string();
  ASSERT_TRUE(rt.protect_scalar("x", &x).ok());
  EXPECT_TRUE(rt.checkpoint(1).wait().ok());
}

// Promise: extents may be given as any integral type ({n, 3} with an int n compiles without a
// narrowing diagnostic - this file is built with -Werror=narrowing) and round-trip.
TEST_F(Adversarial, IntAndMixedIntegralExtentsAreAccepted) {
  Runtime rt(MPI_COMM_WORLD, opts(scratch_dir()));
  ASSERT_TRUE(rt.status().ok());
  int n = 4;
  short three = 3;
  std::size_t two = 2;
  std::vector<double> a(12), b(8);
  std::iota(a.begin(), a.end(), 1.0);
  std::iota(b.begin(), b.end(), 100.0);
  ASSERT_TRUE(rt.protect("a", a.data(), DType::f64, {n, three}).ok());
  ASSERT_TRUE(rt.protect("b", b.data(), DType::f64, {n, two}).ok());
  std::vector<int> dims{n * 3};
  std::vector<float> c(12, 2.5f);
  ASSERT_TRUE(rt.protect("c", c.data(), DType::f32, dims).ok());
  ASSERT_TRUE(rt.checkpoint(3).wait().ok());
  std::fill(a.begin(), a.end(), 0.0);
  std::fill(b.begin(), b.end(), 0.0);
  auto r = rt.restart();
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(a[11], 12.0);
  EXPECT_EQ(b[7], 107.0);
}

// Promise: a negative extent or start is refused with invalid_argument (not wrapped to 2^64 - 1).
TEST_F(Adversarial, NegativeExtentsAreRefused) {
  Runtime rt(MPI_COMM_WORLD, opts(scratch_dir()));
  double x[4] = {};
  int minus = -2;
  EXPECT_EQ(rt.protect("a", x, DType::f64, {minus, 2}).code(), Code::invalid_argument);
  EXPECT_EQ(rt.protect("b", x, DType::f64, Block{{8}, {minus}, {4}}).code(), Code::invalid_argument);
  ASSERT_TRUE(rt.protect("c", x, DType::f64, {4}).ok());
  EXPECT_EQ(rt.update("c", x, {minus}).code(), Code::invalid_argument);
}

// Promise: a null pointer for a non-empty region, an unknown dtype and a duplicate name are refused.
TEST_F(Adversarial, NullPointerUnknownDtypeDuplicateName) {
  Runtime rt(MPI_COMM_WORLD, opts(scratch_dir()));
  double x[2] = {};
  EXPECT_EQ(rt.protect("a", nullptr, DType::f64, {2}).code(), Code::invalid_argument);
  EXPECT_EQ(rt.protect("a", x, static_cast<DType>(99), {2}).code(), Code::invalid_argument);
  ASSERT_TRUE(rt.protect("a", x, DType::f64, {2}).ok());
  Status s = rt.protect("a", x, DType::f64, {2});
  EXPECT_EQ(s.code(), Code::invalid_argument);
  EXPECT_TRUE(has(s.message(), "already")) << s.to_string();
}

// Promise: names that could escape or collide in the checkpoint ("..", absolute, empty component,
// spaces, too long) are refused with invalid_argument.
TEST_F(Adversarial, HostileRegionNamesAreRefused) {
  Runtime rt(MPI_COMM_WORLD, opts(scratch_dir()));
  double x = 0;
  for (const std::string& name :
       std::vector<std::string>{"", "..", "a/../b", "/abs", "a//b", "a b", "a\nb", std::string(256, 'n'), "a/"})
    EXPECT_EQ(rt.protect(name, &x, DType::f64, Dims{}).code(), Code::invalid_argument) << "name '" << name << "'";
}

// Promise: every call after close() fails with failed_precondition (latest() too: an error, not "no
// checkpoint"); close() is idempotent.
TEST_F(Adversarial, CallsAfterCloseFailClearly) {
  Runtime rt(MPI_COMM_WORLD, opts(scratch_dir()));
  double x = 0;
  ASSERT_TRUE(rt.protect_scalar("x", &x).ok());
  ASSERT_TRUE(rt.close().ok());
  EXPECT_TRUE(rt.close().ok());
  EXPECT_EQ(rt.checkpoint(1).wait().code(), Code::failed_precondition);
  EXPECT_EQ(rt.protect_scalar("y", &x).code(), Code::failed_precondition);
  EXPECT_EQ(rt.restart().status().code(), Code::failed_precondition);
  EXPECT_EQ(rt.latest().status().code(), Code::failed_precondition);
  EXPECT_EQ(Ticket().wait().code(), Code::failed_precondition);
}

// Promise: a checkpoint directory that cannot be listed is an error of latest(), steps() and
// restart() on every rank, never "no checkpoint" (an application would start afresh and, once the
// directory is back, its retention would remove the state it failed to find). Run as root, a
// permission cannot make it unreadable: it is replaced by a regular file, then put back.
TEST_F(Adversarial, UnlistableDirectoryIsAnErrorNotAnEmptyOne) {
  const std::string dir = scratch_dir();
  Runtime rt(MPI_COMM_WORLD, opts(dir));
  double x = world_rank();
  ASSERT_TRUE(rt.protect_scalar("x", &x).ok());
  ASSERT_TRUE(rt.checkpoint(1).wait().ok());
  ASSERT_EQ(ckpt::test::newest_step(rt), 1);
  if (world_rank() == 0) {
    ASSERT_EQ(::rename(dir.c_str(), (dir + ".away").c_str()), 0);
    write_text(dir, "not a directory");
  }
  MPI_Barrier(MPI_COMM_WORLD);
  auto newest = rt.latest();
  EXPECT_EQ(newest.status().code(), Code::invalid_argument) << newest.status().to_string();
  EXPECT_TRUE(has(newest.status().message(), "not a directory")) << newest.status().to_string();
  EXPECT_TRUE(same_on_all_ranks(newest.status()));
  auto steps = rt.steps();
  EXPECT_EQ(steps.status().code(), Code::invalid_argument) << steps.status().to_string();
  auto restored = rt.restart();
  EXPECT_EQ(restored.status().code(), Code::invalid_argument) << restored.status().to_string();
  EXPECT_TRUE(same_on_all_ranks(restored.status()));
  MPI_Barrier(MPI_COMM_WORLD);
  if (world_rank() == 0) {
    ASSERT_EQ(::unlink(dir.c_str()), 0);
    ASSERT_EQ(::rename((dir + ".away").c_str(), dir.c_str()), 0);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  EXPECT_EQ(ckpt::test::newest_step(rt), 1);
  x = -1;
  auto back = rt.restart();
  ASSERT_TRUE(back.ok()) << back.status().to_string();
  EXPECT_EQ(back.value(), 1);
  EXPECT_EQ(x, world_rank());
  EXPECT_TRUE(rt.close().ok());
}

// Promise: update() cannot change a region's kind, and a Block outside its global shape is refused.
TEST_F(Adversarial, UpdateKindChangeAndBlockOutsideGlobal) {
  Runtime rt(MPI_COMM_WORLD, opts(scratch_dir()));
  double x[4] = {};
  ASSERT_TRUE(rt.protect("a", x, DType::f64, {4}).ok());
  EXPECT_EQ(rt.update("a", x, Block{{8}, {0}, {4}}).code(), Code::invalid_argument);
  EXPECT_EQ(rt.protect("g", x, DType::f64, Block{{8}, {6}, {4}}).code(), Code::invalid_argument);
  EXPECT_EQ(rt.protect("h", x, DType::f64, Block{{8, 2}, {0}, {4}}).code(), Code::invalid_argument);
  EXPECT_EQ(rt.update("nope", x, {4}).code(), Code::not_found);
}

// Promise: an unknown transport name fails the Runtime on every rank with the same clear error.
TEST_F(Adversarial, UnknownTransportFailsEveryRankAlike) {
  Options o = opts(scratch_dir());
  o.transport = "carrier-pigeon";
  Runtime rt(MPI_COMM_WORLD, o);
  EXPECT_FALSE(rt.status().ok());
  EXPECT_TRUE(has(rt.status().message(), "carrier-pigeon")) << rt.status().to_string();
  EXPECT_TRUE(same_on_all_ranks(rt.status()));
}

// ---- collective disagreement -------------------------------------------------------------------

// Promise: checkpoint(-1) on one rank while the others call checkpoint(1) does not hang: every rank
// gets the same invalid_argument, and nothing is committed.
TEST_F(Adversarial, BadStepOnOneRankIsAgreed) {
  const std::string dir = scratch_dir();
  Runtime rt(MPI_COMM_WORLD, opts(dir));
  double x = world_rank();
  ASSERT_TRUE(rt.protect_scalar("x", &x).ok());
  Status s = rt.checkpoint(world_rank() == 1 ? -1 : 1).wait();
  EXPECT_EQ(s.code(), Code::invalid_argument) << s.to_string();
  EXPECT_TRUE(has(s.message(), "rank 1") && has(s.message(), ">= 0")) << s.to_string();
  EXPECT_EQ(ckpt::test::newest_step(rt), -1);
  EXPECT_TRUE(rt.checkpoint(2).wait().ok());  // and the Runtime goes on
}

// Promise: ranks passing different steps get the same invalid_argument naming the range; no
// directory holding several steps' data is committed.
TEST_F(Adversarial, DifferentStepsAreRefusedOnEveryRank) {
  const std::string dir = scratch_dir();
  Runtime rt(MPI_COMM_WORLD, opts(dir));
  double x = world_rank();
  ASSERT_TRUE(rt.protect_scalar("x", &x).ok());
  Status s = rt.checkpoint(10 + world_rank()).wait();
  EXPECT_EQ(s.code(), Code::invalid_argument) << s.to_string();
  EXPECT_TRUE(has(s.message(), "different steps")) << s.to_string();
  EXPECT_TRUE(same_on_all_ranks(s));
  EXPECT_EQ(ckpt::test::newest_step(rt), -1);
  if (world_rank() == 0)
    for (int r = 0; r < 4; ++r) EXPECT_FALSE(exists(dir + "/ckpt." + std::to_string(10 + r)));
}

// Promise: checkpoint() does not wait for the other ranks (no collective on the application thread):
// it returns on the other ranks while rank 1 has not called it yet, with on_busy wait and coalesce,
// and the checkpoint commits on every rank once rank 1 catches up.
TEST_F(Adversarial, CheckpointDoesNotWaitForOtherRanks) {
  for (Options::OnBusy on_busy : {Options::OnBusy::wait, Options::OnBusy::coalesce}) {
    Options o = opts(scratch_dir());
    o.on_busy = on_busy;
    Runtime rt(MPI_COMM_WORLD, o);
    double x = world_rank();
    ASSERT_TRUE(rt.protect_scalar("x", &x).ok());
    MPI_Barrier(MPI_COMM_WORLD);
    if (world_rank() == 1) std::this_thread::sleep_for(std::chrono::milliseconds(1000));
    const auto t0 = std::chrono::steady_clock::now();
    Ticket t = rt.checkpoint(3);
    const double blocked = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (world_rank() != 1) EXPECT_LT(blocked, 0.5) << on_busy_name(on_busy) << ": checkpoint() waited for rank 1";
    EXPECT_TRUE(t.wait().ok()) << on_busy_name(on_busy);
    EXPECT_EQ(ckpt::test::newest_step(rt), 3) << on_busy_name(on_busy);
  }
}

// Promise: a rank that calls checkpoint() once more than the others before close() (on_busy wait and
// coalesce, layout directory and series) hangs nobody: close() fails on every rank with the same
// failed_precondition naming the counts, the extra checkpoint's ticket fails with it, nothing of it is
// committed, and the checkpoint every rank made stays.
TEST_F(Adversarial, OneRankCheckpointsOnceMoreBeforeClose) {
  for (int variant = 0; variant < 4; ++variant) {
    const std::string dir = scratch_dir();
    Options o = opts(dir);
    if (variant & 1) o.on_busy = Options::OnBusy::coalesce;
    if (variant & 2) o.layout = Options::Layout::series;
    SCOPED_TRACE("on_busy " + std::string(on_busy_name(o.on_busy)) + (variant & 2 ? ", series" : ", directory"));
    Runtime rt(MPI_COMM_WORLD, o);
    double x = world_rank();
    ASSERT_TRUE(rt.protect_scalar("x", &x).ok());
    ASSERT_TRUE(rt.checkpoint(1).wait().ok());
    Ticket extra = world_rank() == 0 ? rt.checkpoint(2) : Ticket();
    const Status s = rt.close();
    EXPECT_EQ(s.code(), Code::failed_precondition) << s.to_string();
    EXPECT_TRUE(has(s.message(), "different numbers of times (1 to 2)")) << s.to_string();
    EXPECT_TRUE(same_on_all_ranks(s)) << s.to_string();
    if (world_rank() == 0) {
      const Status t = extra.wait();
      EXPECT_TRUE(t.failed() && has(t.message(), "different numbers of times")) << t.to_string();
      EXPECT_EQ(detail::open_store(dir)->committed_steps(), std::vector<std::int64_t>{1});
    }
  }
}

// Promise: the same step twice while the first is in flight (max_in_flight 2) commits both in order;
// the committed one holds the second capture and verifies.
TEST_F(Adversarial, SameStepTwiceInFlightCommitsTheSecond) {
  Options o = opts(scratch_dir());
  o.max_in_flight = 2;
  test::FlushDelay slow(30);
  Runtime rt(MPI_COMM_WORLD, o);
  std::vector<double> v(20000, 1.0);
  ASSERT_TRUE(rt.protect("v", v.data(), DType::f64, {v.size()}).ok());
  Ticket t1 = rt.checkpoint(5);
  std::fill(v.begin(), v.end(), 2.0);
  Ticket t2 = rt.checkpoint(5);
  EXPECT_TRUE(t1.wait().ok()) << t1.wait().to_string();
  EXPECT_TRUE(t2.wait().ok()) << t2.wait().to_string();
  std::fill(v.begin(), v.end(), 0.0);
  ASSERT_TRUE(rt.restart(5).ok());
  EXPECT_EQ(v.front(), 2.0);
  EXPECT_EQ(v.back(), 2.0);
}

// Promise: global blocks that overlap (ghost cells) are never committed: every rank's ticket fails
// with invalid_argument naming the array and "overlap"; an older checkpoint stays the newest.
TEST_F(Adversarial, OverlappingGlobalBlocksAreNotCommitted) {
  Runtime rt(MPI_COMM_WORLD, opts(scratch_dir()));
  const std::uint64_t n = 16, lo = world_rank() * n;
  std::vector<double> v(n + 1, world_rank());  // one ghost cell past the owned box
  ASSERT_TRUE(rt.protect("rho", v.data(), DType::f64, Block{{4 * n + 1}, {lo}, {n + 1}}).ok());
  Status s = rt.checkpoint(1).wait();
  EXPECT_EQ(s.code(), Code::invalid_argument) << s.to_string();
  EXPECT_TRUE(has(s.message(), "overlap") && has(s.message(), "rho")) << s.to_string();
  EXPECT_TRUE(same_on_all_ranks(s));
  EXPECT_EQ(ckpt::test::newest_step(rt), -1);
  // Without the ghost cell (the last rank owns the extra element) it commits and restarts.
  const std::uint64_t mine = world_rank() == 3 ? n + 1 : n;
  ASSERT_TRUE(rt.update("rho", v.data(), Block{{4 * n + 1}, {lo}, {mine}}).ok());
  EXPECT_TRUE(rt.checkpoint(2).wait().ok());
  EXPECT_TRUE(rt.restart().ok());
}

// Promise: a variable registered differently on one rank (dtype) fails the commit on every rank
// with a message naming it; nothing is committed.
TEST_F(Adversarial, VariableRegisteredDifferentlyOnOneRank) {
  Runtime rt(MPI_COMM_WORLD, opts(scratch_dir()));
  std::vector<std::uint8_t> buf(64);
  ASSERT_TRUE(rt.protect("g", buf.data(), world_rank() == 2 ? DType::i64 : DType::f64,
                         Block{{32}, {static_cast<std::uint64_t>(world_rank()) * 8}, {8}})
                  .ok());
  Status s = rt.checkpoint(1).wait();
  EXPECT_FALSE(s.ok());
  EXPECT_TRUE(has(s.message(), "'g'")) << s.to_string();
  EXPECT_TRUE(same_on_all_ranks(s));
  EXPECT_EQ(ckpt::test::newest_step(rt), -1);
}

// ---- restart friction ----------------------------------------------------------------------------

// Promise: when every candidate fails verification, restart() says corrupt (not not_found).
TEST_F(Adversarial, AllCandidatesCorruptIsCorrupt) {
  const std::string dir = scratch_dir();
  Runtime rt(MPI_COMM_WORLD, opts(dir));
  std::vector<double> v(1000, 3.0);
  ASSERT_TRUE(rt.protect("v", v.data(), DType::f64, {v.size()}).ok());
  ASSERT_TRUE(rt.checkpoint(1).wait().ok());
  if (world_rank() == 0) corrupt_first_block(dir + "/ckpt.1");
  MPI_Barrier(MPI_COMM_WORLD);
  auto r = rt.restart();
  EXPECT_EQ(r.status().code(), Code::corrupt) << r.status().to_string();
  EXPECT_TRUE(has(r.status().message(), "checksum")) << r.status().to_string();
}

// Promise: a shape mismatch at restart gives code mismatch and both the stored and the registered
// extents.
TEST_F(Adversarial, MismatchMessageGivesStoredAndRegisteredSizes) {
  const std::string dir = scratch_dir();
  Runtime rt(MPI_COMM_WORLD, opts(dir));
  std::vector<double> v(6, 1.0);
  ASSERT_TRUE(rt.protect("v", v.data(), DType::f64, {2, 3}).ok());
  ASSERT_TRUE(rt.checkpoint(1).wait().ok());
  ASSERT_TRUE(rt.update("v", v.data(), {3, 2}).ok());
  Status s = rt.restart(1);
  EXPECT_EQ(s.code(), Code::mismatch) << s.to_string();
  EXPECT_TRUE(has(s.message(), "[2, 3]") && has(s.message(), "[3, 2]")) << s.to_string();
  auto r = rt.restart();
  EXPECT_EQ(r.status().code(), Code::mismatch) << r.status().to_string();
}

// Promise: restart() that falls back past a damaged newer checkpoint says so in the Result's warning().
TEST_F(Adversarial, FallbackIsReportedToTheCaller) {
  const std::string dir = scratch_dir();
  Options o = opts(dir);
  o.keep = 3;
  Runtime rt(MPI_COMM_WORLD, o);
  std::vector<double> v(1000, 1.0);
  ASSERT_TRUE(rt.protect("v", v.data(), DType::f64, {v.size()}).ok());
  ASSERT_TRUE(rt.checkpoint(1).wait().ok());
  std::fill(v.begin(), v.end(), 2.0);
  ASSERT_TRUE(rt.checkpoint(2).wait().ok());
  if (world_rank() == 0) corrupt_first_block(dir + "/ckpt.2");
  MPI_Barrier(MPI_COMM_WORLD);
  auto r = rt.restart();
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r.value(), 1);
  EXPECT_EQ(v[0], 1.0);
  EXPECT_FALSE(r.warning().ok());
  EXPECT_EQ(r.warning().code(), Code::corrupt) << r.warning().to_string();
  EXPECT_TRUE(has(r.warning().message(), "step 2") || has(r.warning().message(), "ckpt.2")) << r.warning().to_string();
  // No fallback: no warning.
  std::fill(v.begin(), v.end(), 4.0);
  ASSERT_TRUE(rt.checkpoint(4).wait().ok());
  auto r2 = rt.restart();
  ASSERT_TRUE(r2.ok());
  EXPECT_TRUE(r2.warning().ok());
}

// Promise (issue 31, part 5): restart never reports partial data as untouched. Step 2 holds optional
// regions `opt` and `late`, step 1 neither; `late`'s block (restored after `opt`'s) is damaged on rank
// 1. restart() falls back to step 1 and says that `opt` and `late` were left untouched: they must be,
// bit for bit, on every rank (before: `opt` held step 2's rows, scattered before `late`'s checksum
// failed). The non-optional `a` holds step 1's data.
TEST_F(Adversarial, FallbackLeavesSkippedOptionalRegionsUntouched) {
  const std::string dir = scratch_dir();
  Options o = opts(dir);
  o.keep = 3;
  Runtime rt(MPI_COMM_WORLD, o);
  std::vector<double> a(5000, 1.0), opt(5000, 10.0), late(5000, 20.0);
  ASSERT_TRUE(rt.protect("a", a.data(), DType::f64, {a.size()}).ok());
  ASSERT_TRUE(rt.checkpoint(1).wait().ok());
  ASSERT_TRUE(rt.protect("opt", opt.data(), DType::f64, {opt.size()}).ok());
  ASSERT_TRUE(rt.protect("late", late.data(), DType::f64, {late.size()}).ok());
  ASSERT_TRUE(rt.set_optional("opt", true).ok());
  ASSERT_TRUE(rt.set_optional("late", true).ok());
  std::fill(a.begin(), a.end(), 2.0);
  ASSERT_TRUE(rt.checkpoint(2).wait().ok());
  MPI_Barrier(MPI_COMM_WORLD);
  if (world_rank() == 0) corrupt_blocks_of(dir + "/ckpt.2", "late", 1);
  MPI_Barrier(MPI_COMM_WORLD);
  std::fill(a.begin(), a.end(), -1.0);
  std::fill(opt.begin(), opt.end(), -7.0);  // what the application holds now: restart must keep it
  std::fill(late.begin(), late.end(), -8.0);
  auto r = rt.restart();
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r.value(), 1);
  EXPECT_TRUE(has(r.warning().message(), "left untouched")) << r.warning().to_string();
  EXPECT_TRUE(std::all_of(a.begin(), a.end(), [](double x) { return x == 1.0; }));
  EXPECT_TRUE(std::all_of(opt.begin(), opt.end(), [](double x) { return x == -7.0; }))
      << "'opt' was overwritten by the failed restart of step 2: opt[0] = " << opt[0];
  EXPECT_TRUE(std::all_of(late.begin(), late.end(), [](double x) { return x == -8.0; })) << late[0];
  // A restart of step 2 itself still fails on every rank, and the restart of an intact step still
  // fills optional regions it holds.
  EXPECT_EQ(rt.restart(2).code(), Code::corrupt);
  std::fill(opt.begin(), opt.end(), 30.0);
  std::fill(late.begin(), late.end(), 40.0);
  ASSERT_TRUE(rt.checkpoint(3).wait().ok());
  std::fill(opt.begin(), opt.end(), 0.0);
  std::fill(late.begin(), late.end(), 0.0);
  ASSERT_TRUE(rt.restart(3).ok());
  EXPECT_EQ(opt[4999], 30.0);
  EXPECT_EQ(late[0], 40.0);
}

// Promise: a directory without checkpoints gives not_found; a program whose variable is in no
// checkpoint gives mismatch naming it.
TEST_F(Adversarial, EmptyDirIsNotFoundMissingVariableIsMismatch) {
  const std::string dir = scratch_dir();
  Runtime rt(MPI_COMM_WORLD, opts(dir));
  double x = 1, y = 2;
  ASSERT_TRUE(rt.protect_scalar("x", &x).ok());
  EXPECT_EQ(rt.restart().status().code(), Code::not_found);
  ASSERT_TRUE(rt.checkpoint(1).wait().ok());
  ASSERT_TRUE(rt.protect_scalar("y", &y).ok());
  auto r = rt.restart();
  EXPECT_EQ(r.status().code(), Code::mismatch) << r.status().to_string();
  EXPECT_TRUE(has(r.status().message(), "'y'")) << r.status().to_string();
}

// ---- hostile directory contents (runtime) ---------------------------------------------------------

// Promise: junk entries (names that look like checkpoints but are not, a file named like a
// checkpoint, a directory named `latest`) neither stop the Runtime nor a commit, and are left alone.
TEST_F(Adversarial, JunkEntriesAreIgnoredAndLeftAlone) {
  const std::string dir = scratch_dir();
  if (world_rank() == 0) {
    for (const char* d : {"ckpt.", "ckpt.abc", "ckpt.-1", "ckpt.1x", "ckpt.99999999999999999999999", "latest"})
      ::mkdir((dir + "/" + d).c_str(), 0755);
    write_text(dir + "/ckpt.7", "a file, not a directory");
    write_text(dir + "/README", "mine");
  }
  MPI_Barrier(MPI_COMM_WORLD);
  Runtime rt(MPI_COMM_WORLD, opts(dir));
  ASSERT_TRUE(rt.status().ok()) << rt.status().to_string();
  double x = 5;
  ASSERT_TRUE(rt.protect_scalar("x", &x).ok());
  EXPECT_EQ(ckpt::test::newest_step(rt), -1);
  Status s = rt.checkpoint(3).wait();
  EXPECT_TRUE(s.ok()) << s.to_string();
  EXPECT_EQ(ckpt::test::newest_step(rt), 3);
  x = 0;
  auto r = rt.restart();
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(x, 5);
  if (world_rank() == 0) {
    EXPECT_TRUE(exists(dir + "/README"));
    EXPECT_TRUE(exists(dir + "/ckpt.abc"));
    EXPECT_TRUE(exists(dir + "/ckpt.7"));
  }
}

// Promise: a directory where the index file belongs makes that checkpoint invisible to latest() and
// skipped by restart(), with no hang and no crash.
TEST_F(Adversarial, DirectoryWhereTheIndexBelongs) {
  const std::string dir = scratch_dir();
  Runtime rt(MPI_COMM_WORLD, opts(dir));
  double x = 0;
  ASSERT_NO_FATAL_FAILURE(commit_steps(rt, x, {1}));
  if (world_rank() == 0) {
    ::mkdir((dir + "/ckpt.9").c_str(), 0755);
    ::mkdir((dir + "/ckpt.9/index").c_str(), 0755);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  EXPECT_EQ(ckpt::test::newest_step(rt), 1);
  auto r = rt.restart();
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r.value(), 1);
}

// Promise: re-committing a step that exists replaces it: the new data restores, nothing else is lost.
TEST_F(Adversarial, RecommitReplacesTheStep) {
  const std::string dir = scratch_dir();
  Options o = opts(dir);
  o.keep = 1;
  Runtime rt(MPI_COMM_WORLD, o);
  double x = 1;
  ASSERT_TRUE(rt.protect_scalar("x", &x).ok());
  ASSERT_TRUE(rt.checkpoint(4).wait().ok());
  x = 2;
  ASSERT_TRUE(rt.checkpoint(4).wait().ok());
  x = 0;
  auto r = rt.restart();
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(x, 2);
  if (world_rank() == 0) EXPECT_FALSE(exists(dir + "/ckpt.4.old"));
}

// ---- more misuse and damage -------------------------------------------------------------------------

// Promise: a checkpoint with nothing registered commits, and restart() of it succeeds.
TEST_F(Adversarial, EmptyRegistryCheckpointsAndRestarts) {
  Runtime rt(MPI_COMM_WORLD, opts(scratch_dir()));
  EXPECT_TRUE(rt.checkpoint(1).wait().ok());
  auto r = rt.restart();
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r.value(), 1);
}

// Promise: restart(step) of a step that does not exist is not_found naming the step, on every rank.
TEST_F(Adversarial, RestartOfAMissingStepIsNotFound) {
  Runtime rt(MPI_COMM_WORLD, opts(scratch_dir()));
  double x = 0;
  ASSERT_NO_FATAL_FAILURE(commit_steps(rt, x, {1}));
  for (std::int64_t step : {std::int64_t{42}, std::int64_t{-1}}) {
    Status s = rt.restart(step);
    EXPECT_EQ(s.code(), Code::not_found) << s.to_string();
    EXPECT_TRUE(has(s.message(), std::to_string(step))) << s.to_string();
    EXPECT_TRUE(same_on_all_ranks(s));
  }
}

// Promise: a checkpoint directory that is a plain file fails the Runtime on every rank with an error
// naming it.
TEST_F(Adversarial, CheckpointDirIsAPlainFile) {
  const std::string dir = scratch_dir();
  if (world_rank() == 0) write_text(dir + "/plain", "x");
  MPI_Barrier(MPI_COMM_WORLD);
  Runtime rt(MPI_COMM_WORLD, opts(dir + "/plain"));
  EXPECT_FALSE(rt.status().ok());
  EXPECT_TRUE(has(rt.status().message(), dir + "/plain")) << rt.status().to_string();
  EXPECT_TRUE(same_on_all_ranks(rt.status()));
}

// Promise: annotate() refuses an empty or over-long key, a value over 64 KiB, too many attributes,
// and an unknown region.
TEST_F(Adversarial, AnnotateLimits) {
  Runtime rt(MPI_COMM_WORLD, opts(scratch_dir()));
  double x = 1;
  ASSERT_TRUE(rt.protect_scalar("x", &x).ok());
  EXPECT_EQ(rt.annotate("x", "", "v").code(), Code::invalid_argument);
  EXPECT_EQ(rt.annotate("x", std::string(256, 'k'), "v").code(), Code::invalid_argument);
  EXPECT_EQ(rt.annotate("x", "k", std::string(65537, 'v')).code(), Code::invalid_argument);
  EXPECT_EQ(rt.annotate("nope", "k", "v").code(), Code::not_found);
  Status last;
  for (int i = 0; i < 100000 && last.ok(); ++i) last = rt.annotate("x", "k" + std::to_string(i), "v");
  EXPECT_EQ(last.code(), Code::invalid_argument);
  EXPECT_TRUE(rt.checkpoint(1).wait().ok());
}

// Promise: the failure of a checkpoint nobody waited for is reported by the next checkpoint() (with
// both steps named), never dropped silently.
TEST_F(Adversarial, UnobservedFailureIsReportedByTheNextCheckpoint) {
  Runtime rt(MPI_COMM_WORLD, opts(scratch_dir()));
  const std::uint64_t n = 8, lo = world_rank() * n;
  std::vector<double> v(n + 1, 1.0);
  ASSERT_TRUE(rt.protect("g", v.data(), DType::f64, Block{{4 * n + 1}, {lo}, {n + 1}}).ok());  // overlaps
  rt.checkpoint(1);
  ASSERT_TRUE(rt.update("g", v.data(), Block{{4 * n + 1}, {lo}, {world_rank() == 3 ? n + 1 : n}}).ok());
  Status s = rt.checkpoint(2).wait();
  EXPECT_FALSE(s.ok());
  EXPECT_TRUE(has(s.message(), "checkpoint 1") && has(s.message(), "step 2")) << s.to_string();
  EXPECT_TRUE(rt.checkpoint(3).wait().ok());
}

// Promise: Ticket::wait() from another thread than the one that called checkpoint() works.
TEST_F(Adversarial, TicketWaitedFromAnotherThread) {
  Options o = opts(scratch_dir());
  test::FlushDelay slow(20);
  Runtime rt(MPI_COMM_WORLD, o);
  std::vector<double> v(50000, 1.0);
  ASSERT_TRUE(rt.protect("v", v.data(), DType::f64, {v.size()}).ok());
  Ticket t = rt.checkpoint(1);
  Status got;
  std::thread waiter([&] { got = t.wait(); });
  waiter.join();
  EXPECT_TRUE(got.ok()) << got.to_string();
  EXPECT_TRUE(t.done());
}

// Promise: a Runtime that failed to start returns its error from every call, never crashes.
TEST_F(Adversarial, FailedRuntimeReturnsItsErrorEverywhere) {
  Options o = opts(scratch_dir());
  o.keep = 0;
  Runtime rt(MPI_COMM_WORLD, o);
  ASSERT_FALSE(rt.status().ok());
  double x = 0;
  EXPECT_EQ(rt.protect_scalar("x", &x).code(), Code::invalid_argument);
  EXPECT_EQ(rt.checkpoint(1).wait().code(), Code::invalid_argument);
  EXPECT_EQ(rt.restart().status().code(), Code::invalid_argument);
  EXPECT_EQ(rt.latest().status().code(), Code::invalid_argument);  // its error, not "no checkpoint"
  EXPECT_EQ(rt.steps().status().code(), Code::invalid_argument);
}

// Promise: a checkpoint directory whose index names another step (a copied ckpt.1 planted as ckpt.9)
// is not taken for step 9: latest() skips it and restart() falls back, saying so.
TEST_F(Adversarial, IndexOfAnotherStepIsSkipped) {
  const std::string dir = scratch_dir();
  Runtime rt(MPI_COMM_WORLD, opts(dir));
  double x = 0;
  ASSERT_NO_FATAL_FAILURE(commit_steps(rt, x, {1}));
  if (world_rank() == 0) {
    ::mkdir((dir + "/ckpt.9").c_str(), 0755);
    for (const char* f : {"index", "data.0", "data.1", "data.2", "data.3"}) {
      auto b = detail::read_file(dir + "/ckpt.1/" + f, 1u << 30);
      if (b.ok()) ASSERT_TRUE(detail::write_file(dir + "/ckpt.9/" + f, b->data(), b->size(), false).ok());
    }
  }
  MPI_Barrier(MPI_COMM_WORLD);
  EXPECT_EQ(ckpt::test::newest_step(rt), 1);
  auto r = rt.restart();
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r.value(), 1);
  EXPECT_FALSE(r.warning().ok());
}

// Promise: a truncated index makes its checkpoint invisible; restart falls back with a corrupt warning.
TEST_F(Adversarial, TruncatedIndexIsSkipped) {
  const std::string dir = scratch_dir();
  Options o = opts(dir);
  o.keep = 3;
  Runtime rt(MPI_COMM_WORLD, o);
  double x = 0;
  ASSERT_NO_FATAL_FAILURE(commit_steps(rt, x, {1, 2}));
  if (world_rank() == 0) ASSERT_EQ(::truncate((dir + "/ckpt.2/index").c_str(), 10), 0);
  MPI_Barrier(MPI_COMM_WORLD);
  EXPECT_EQ(ckpt::test::newest_step(rt), 1);
  auto r = rt.restart();
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r.value(), 1);
  EXPECT_EQ(x, 1);
  EXPECT_EQ(r.warning().code(), Code::corrupt) << r.warning().to_string();
}

// ---- the directory lock -----------------------------------------------------------------------------

// Promise: a second Runtime (job) on a directory in use fails with failed_precondition naming the
// holder and the lock file; the first one is untouched; once it is closed the directory is free.
TEST_F(Adversarial, SecondRuntimeOnABusyDirectoryIsRefused) {
  const std::string dir = scratch_dir();
  Runtime a(MPI_COMM_WORLD, opts(dir));
  ASSERT_TRUE(a.status().ok());
  double x = 1;
  ASSERT_TRUE(a.protect_scalar("x", &x).ok());
  ASSERT_TRUE(a.checkpoint(1).wait().ok());
  {
    Runtime b(MPI_COMM_WORLD, opts(dir));
    EXPECT_EQ(b.status().code(), Code::failed_precondition) << b.status().to_string();
    EXPECT_TRUE(has(b.status().message(), "in use") && has(b.status().message(), ".lock")) << b.status().to_string();
    EXPECT_TRUE(same_on_all_ranks(b.status()));
  }
  EXPECT_TRUE(a.checkpoint(2).wait().ok());
  ASSERT_TRUE(a.close().ok());
  Runtime c(MPI_COMM_WORLD, opts(dir));
  EXPECT_TRUE(c.status().ok()) << c.status().to_string();
  EXPECT_EQ(ckpt::test::newest_step(c), 2);
}

// Promise: a lock file planted as a symbolic link is not followed: a clear io_error, no file created
// at the link's target.
TEST_F(Adversarial, LockFileSymlinkIsNotFollowed) {
  const std::string dir = scratch_dir();
  if (world_rank() == 0) ::symlink((dir + "/victim").c_str(), (dir + "/.lock").c_str());
  MPI_Barrier(MPI_COMM_WORLD);
  Runtime rt(MPI_COMM_WORLD, opts(dir));
  EXPECT_EQ(rt.status().code(), Code::io_error) << rt.status().to_string();
  EXPECT_TRUE(has(rt.status().message(), ".lock")) << rt.status().to_string();
  if (world_rank() == 0) EXPECT_FALSE(exists(dir + "/victim"));
}

// ---- options -----------------------------------------------------------------------------------------

// Promise: MPI-IO hint values that crash MPI (cb_nodes=0: SIGFPE, -5: SIGSEGV) or make no sense are
// refused by the options with invalid_argument naming the hint - from a file, the environment or code.
TEST_F(Adversarial, MpiioHintValuesAreValidated) {
  const std::string dir = scratch_dir();
  for (const char* bad :
       {"cb_nodes=0", "cb_nodes=-5", "cb_nodes=abc", "cb_buffer_size=0", "cb_buffer_size=-1", "striping_factor=0",
        "striping_unit=99999999999", "romio_cb_write=maybe", "cb_nodes=", "=4", "cb_nodes=1,cb_nodes=2", "bogus=1"}) {
    Options o = opts(dir);
    o.transport = "mpiio";
    o.mpiio_hints = bad;
    EXPECT_EQ(o.validate().code(), Code::invalid_argument) << bad;
    Runtime rt(MPI_COMM_WORLD, o);
    EXPECT_EQ(rt.status().code(), Code::invalid_argument) << bad << ": " << rt.status().to_string();
    EXPECT_TRUE(has(rt.status().message(), "mpiio_hints")) << rt.status().to_string();
  }
  // Good values, byte counts with units included, work.
  Options o = opts(dir);
  o.transport = "mpiio";
  o.mpiio_hints = "cb_nodes=2,cb_buffer_size=1M,romio_cb_write=enable";
  Runtime rt(MPI_COMM_WORLD, o);
  ASSERT_TRUE(rt.status().ok()) << rt.status().to_string();
  double x = 1;
  ASSERT_TRUE(rt.protect_scalar("x", &x).ok());
  EXPECT_TRUE(rt.checkpoint(1).wait().ok());
}

// Promise: Options::load() of a directory, a FIFO, a missing file, malformed YAML or nested values
// returns an error value (no exception, no hang) naming the file.
TEST_F(Adversarial, OptionsLoadOfHostileFiles) {
  const std::string dir = scratch_dir();
  if (world_rank() == 0) {
    ::mkfifo((dir + "/fifo.yaml").c_str(), 0644);
    write_text(dir + "/bad.yaml", "keep: [1, 2\n");
    write_text(dir + "/nested.yaml", "keep: {a: 1}\n");
    write_text(dir + "/list.yaml", "- keep\n- 2\n");
    write_text(dir + "/hints.yaml", "mpiio_hints: {cb_nodes: 0}\n");
    write_text(dir + "/keymap.yaml", "? [a, b]\n: 1\n");
  }
  MPI_Barrier(MPI_COMM_WORLD);
  struct Case {
    std::string file;
    Code code;
  };
  for (const Case& c :
       {Case{dir, Code::invalid_argument}, Case{dir + "/fifo.yaml", Code::invalid_argument},
        Case{dir + "/missing.yaml", Code::not_found}, Case{dir + "/bad.yaml", Code::invalid_argument},
        Case{dir + "/nested.yaml", Code::invalid_argument}, Case{dir + "/list.yaml", Code::invalid_argument},
        Case{dir + "/hints.yaml", Code::invalid_argument}, Case{dir + "/keymap.yaml", Code::invalid_argument}}) {
    Options o = Options::load(c.file);
    EXPECT_EQ(o.error.code(), c.code) << c.file << ": " << o.error.to_string();
    EXPECT_TRUE(has(o.error.message(), c.file)) << o.error.to_string();
  }
}

// ---- ranks that disagree (issue 31, part 1) ----------------------------------------------------------

// Promise: a job-wide option set on one rank only (an environment variable not forwarded to a remote
// node) fails the Runtime's construction on every rank with invalid_argument naming the option and two
// ranks' values - never a torn commit (different roots, layouts) and never a hang (mismatched
// collectives: mpi_threads, coalesce, local_dir, open_token, durable_every_ms).
TEST_F(Adversarial, JobWideOptionsThatDifferAcrossRanksAreRefused) {
  const std::string dir = scratch_dir();
  struct Case {
    const char* key;
    std::function<void(Options&)> set;  // applied on rank 1 only
    const char* rank1;                  // rank 1's value as the message spells it
  };
  const Case cases[] = {
      {"layout", [](Options& o) { o.layout = Layout::series; }, "series"},
      {"on_busy", [](Options& o) { o.on_busy = OnBusy::coalesce; }, "coalesce"},
      {"mpi_threads", [](Options& o) { o.mpi_threads = MpiThreads::funneled; }, "funneled"},
      {"local_dir", [&](Options& o) { o.local_dir = dir + "/local"; }, "(set)"},
      {"open_token", [](Options& o) { o.open_token = 2; }, "2"},
      {"durable_every_ms", [](Options& o) { o.durable_every_ms = 100; }, "100"},
      {"transport", [](Options& o) { o.transport = "null"; }, "null"},
      {"keep", [](Options& o) { o.keep = 5; }, "5"},
      {"dir", [&](Options& o) { o.dir = dir + "/elsewhere"; }, "/elsewhere"},
      {"groups",
       [](Options& o) {
         o.groups.push_back({"w", {"w/*"}, "posix"});
       },
       "w -> posix"},
      // Which ranks write the two-level index's sub-indices (issue 33) follows from these.
      {"index_format", [](Options& o) { o.index_format = 2; }, "2"},
      {"rbio_writers", [](Options& o) { o.rbio_writers = 2; }, "2"},
      {"rbio_files", [](Options& o) { o.rbio_files = 1; }, "1"},
      {"mpiio_files", [](Options& o) { o.mpiio_files = 2; }, "2"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.key);
    Options o = opts(dir + "/" + c.key);
    if (world_rank() == 1) c.set(o);
    Runtime rt(MPI_COMM_WORLD, o);
    const Status s = rt.status();
    EXPECT_EQ(s.code(), Code::invalid_argument) << s.to_string();
    EXPECT_TRUE(has(s.message(), std::string("option '") + c.key + "' differs across ranks")) << s.to_string();
    EXPECT_TRUE(has(s.message(), "rank 0 has '") && has(s.message(), "rank 1 has '") && has(s.message(), c.rank1))
        << s.to_string();
    EXPECT_TRUE(same_on_all_ranks(s));
    EXPECT_EQ(rt.checkpoint(1).wait().code(), Code::invalid_argument) << "every call reports it";
  }
  // Per-rank options may differ: verbosity, a node's CPUs and pool, O_DIRECT, the CPU budget (the agreement
  // takes the longest wait: tests/integration/test_coalesce.cpp).
  Options o = opts(dir + "/per-rank");
  if (world_rank() == 1) {
    o.verbose = 1;
    o.thread_cpus = "inherit";
    o.pool_bytes = 1 << 20;
    o.direct_io = false;
    o.background_cpu = 0.5;
  }
  Runtime rt(MPI_COMM_WORLD, o);
  ASSERT_TRUE(rt.status().ok()) << rt.status().to_string();
  double x = world_rank();
  ASSERT_TRUE(rt.protect_scalar("x", &x).ok());
  EXPECT_TRUE(rt.checkpoint(1).wait().ok());
}

// Promise: the default relative `dir` with a different working directory per rank (mpiexec --wdir a :
// --wdir b) is refused on every rank naming the two absolute paths: before, each rank wrote its data
// into its own root and the commit held only data.0.
TEST_F(Adversarial, RelativeDirWithDifferentWorkingDirectoriesIsRefused) {
  const std::string base = scratch_dir();
  const std::string mine = base + "/wd" + std::to_string(world_rank());
  ASSERT_EQ(::mkdir(mine.c_str(), 0755), 0);
  char old[4096];
  ASSERT_NE(::getcwd(old, sizeof old), nullptr);
  ASSERT_EQ(::chdir(mine.c_str()), 0);
  Status s;
  {
    Runtime rt(MPI_COMM_WORLD, opts("ckpt"));
    s = rt.status();
  }
  ASSERT_EQ(::chdir(old), 0);
  EXPECT_EQ(s.code(), Code::invalid_argument) << s.to_string();
  EXPECT_TRUE(has(s.message(), "option 'dir' differs across ranks") && has(s.message(), base + "/wd0/ckpt") &&
              has(s.message(), base + "/wd1/ckpt"))
      << s.to_string();
  EXPECT_TRUE(same_on_all_ranks(s));
}

// Promise: equal absolute paths that name different directories on different ranks (another node's
// /tmp, a per-node mount; here /proc/self/cwd with a working directory per rank) are found out: rank 0's
// token in <dir>/.lock is read back by every rank, and a rank that does not find it fails the
// construction on every rank. Nothing is checkpointed into roots of their own.
TEST_F(Adversarial, SamePathButAnotherDirectoryIsFoundOut) {
  const std::string base = scratch_dir();
  const std::string mine = base + "/wd" + std::to_string(world_rank());
  ASSERT_EQ(::mkdir(mine.c_str(), 0755), 0);
  char old[4096];
  ASSERT_NE(::getcwd(old, sizeof old), nullptr);
  ASSERT_EQ(::chdir(mine.c_str()), 0);
  Status s;
  {
    Runtime rt(MPI_COMM_WORLD, opts("/proc/self/cwd/ckpt"));
    s = rt.status();
  }
  ASSERT_EQ(::chdir(old), 0);
  EXPECT_EQ(s.code(), Code::failed_precondition) << s.to_string();
  EXPECT_TRUE(has(s.message(), "rank 1: the checkpoint directory /proc/self/cwd/ckpt that rank 0 created is not "
                               "visible here"))
      << s.to_string();
  EXPECT_TRUE(same_on_all_ranks(s));
}

// Promise: collective calls whose arguments differ across ranks - restart(2) on rank 0, restart(3) on
// the others; joined_rows of another step or name; inspect(step) - return the same invalid_argument on
// every rank naming the argument and two ranks' values (before: MPI_ERR_TRUNCATE killed the job). The
// Runtime stays usable.
TEST_F(Adversarial, CollectiveArgumentsThatDifferAreRefused) {
  Runtime rt(MPI_COMM_WORLD, opts(scratch_dir()));
  ASSERT_TRUE(rt.status().ok());
  std::vector<double> v(100, world_rank());
  ASSERT_TRUE(rt.protect("v", v.data(), DType::f64, {v.size()}).ok());
  ASSERT_TRUE(rt.checkpoint(2).wait().ok());
  ASSERT_TRUE(rt.checkpoint(3).wait().ok());
  const std::int64_t step = world_rank() == 0 ? 2 : 3;
  Status s = rt.restart(step);
  EXPECT_EQ(s.code(), Code::invalid_argument) << s.to_string();
  EXPECT_TRUE(has(s.message(), "restart(step)") && has(s.message(), "the step differs across ranks: rank 0 has '2', "
                                                                    "rank 1 has '3'"))
      << s.to_string();
  EXPECT_TRUE(same_on_all_ranks(s));
  auto r = rt.inspect(step);
  EXPECT_EQ(r.status().code(), Code::invalid_argument) << r.status().to_string();
  auto j = rt.joined_rows(3, world_rank() == 2 ? "w" : "v");
  EXPECT_EQ(j.status().code(), Code::invalid_argument) << j.status().to_string();
  EXPECT_TRUE(has(j.status().message(), "the name differs across ranks: rank 0 has 'v', rank 2 has 'w'"))
      << j.status().to_string();
  EXPECT_TRUE(rt.restart(2).ok()) << "the same call with the same argument still works";
}

// Promise: degenerate option values set in code are refused by validate() and by the Runtime with
// invalid_argument naming the option; a pool larger than the machine is an error, not an OOM kill.
TEST_F(Adversarial, DegenerateOptionValues) {
  const std::string dir = scratch_dir();
  auto check = [&](const char* what, auto&& set) {
    Options o = opts(dir);
    set(o);
    Runtime rt(MPI_COMM_WORLD, o);
    EXPECT_EQ(rt.status().code(), Code::invalid_argument) << what << ": " << rt.status().to_string();
  };
  check("keep 0", [](Options& o) { o.keep = 0; });
  check("chunk 100", [](Options& o) { o.chunk_bytes = 100; });
  check("max_in_flight 0", [](Options& o) { o.max_in_flight = 0; });
  check("max_in_flight 1000", [](Options& o) { o.max_in_flight = 1000; });
  check("alignment 3", [](Options& o) { o.alignment = 3; });
  check("dir empty", [](Options& o) { o.dir.clear(); });
  check("fraction nan", [](Options& o) { o.pool_max_fraction = std::nan(""); });
  check("fraction 5", [](Options& o) { o.pool_max_fraction = 5; });
  check("pool 1 chunk", [](Options& o) {
    o.chunk_bytes = 64 << 10;
    o.pool_bytes = o.chunk_bytes;
  });
  check("pool 1 auto chunk", [](Options& o) { o.pool_bytes = 4096; });
  check("mpiio_files 0", [](Options& o) { o.mpiio_files = 0; });
  check("pool 1 PiB", [](Options& o) { o.pool_bytes = 1ull << 50; });
  Options o = opts(dir);
  o.pool_bytes = 1ull << 50;
  Runtime rt(MPI_COMM_WORLD, o);
  EXPECT_TRUE(has(rt.status().message(), "pool_bytes") && has(rt.status().message(), "physical memory"))
      << rt.status().to_string();
}

// Promise: a bad value of a CKPT_* variable is an error naming the variable; an unknown name is a
// warning naming it (issue 30: a site's CKPT_ROOT must not stop every ckpt application).
TEST_F(Adversarial, BadEnvironmentVariables) {
  ::setenv("CKPT_KEEEP", "2", 1);
  Options a;
  ::unsetenv("CKPT_KEEEP");
  EXPECT_TRUE(a.error.ok()) << a.error.to_string();
  ASSERT_EQ(a.warnings.size(), 1u);
  EXPECT_TRUE(has(a.warnings[0], "CKPT_KEEEP") && has(a.warnings[0], "CKPT_KEEP")) << a.warnings[0];
  ::setenv("CKPT_MPIIO_HINTS", "cb_nodes=0", 1);
  Options b;
  ::unsetenv("CKPT_MPIIO_HINTS");
  EXPECT_EQ(b.error.code(), Code::invalid_argument);
  EXPECT_TRUE(has(b.error.message(), "CKPT_MPIIO_HINTS")) << b.error.to_string();
  ::setenv("CKPT_CHUNK_BYTES", "12345678901234567890123", 1);
  Options c;
  ::unsetenv("CKPT_CHUNK_BYTES");
  EXPECT_EQ(c.error.code(), Code::invalid_argument);
}

// ---- integers the C API passes on (issue 31, 6) ------------------------------------------------------

// Promise: an integer the C API takes and the C++ API would misread is an error naming it: first_row of a
// joined array other than a row (>= 0) or CKPT_BALANCED, and an extent, start or global extent of 2^63 or
// more (a negative number cast to uint64_t) - never a silent balanced split, never a region of ~2^64
// bytes that the next checkpoint would read.
TEST_F(Adversarial, CApiRefusesNegativeIntegers) {
  const std::string dir = scratch_dir(), yaml = dir + ".yaml";
  if (world_rank() == 0) {
    std::ofstream(yaml) << "dir: " << dir << "\nfsync: false\n";
  }
  MPI_Barrier(MPI_COMM_WORLD);
  MPI_Comm comm = MPI_COMM_WORLD;
  ckpt_runtime* rt = nullptr;
  ASSERT_EQ(ckpt_create_handle(&comm, sizeof comm, yaml.c_str(), &rt), CKPT_OK) << ckpt_last_error();
  auto refused = [&](int rc, const char* names) {
    EXPECT_EQ(rc, CKPT_INVALID_ARGUMENT) << names;
    EXPECT_TRUE(has(ckpt_error_message(rt), names)) << ckpt_error_message(rt);
  };
  double rows[4] = {0, 1, 2, 3};
  const std::uint64_t jdims[2] = {2, 2};
  refused(ckpt_protect_joined(rt, "j", rows, CKPT_F64, 2, jdims, -2), "first_row");
  refused(ckpt_protect_joined(rt, "j", rows, CKPT_F64, 2, jdims, std::numeric_limits<std::int64_t>::min()),
          "first_row");
  ASSERT_EQ(ckpt_protect_joined(rt, "j", rows, CKPT_F64, 2, jdims, CKPT_BALANCED), CKPT_OK);
  refused(ckpt_update_joined(rt, "j", rows, 2, jdims, -3), "first_row");
  std::uint8_t byte = 0;
  const std::uint64_t minus5[1] = {static_cast<std::uint64_t>(std::int64_t{-5})}, four[1] = {4}, zero[1] = {0},
                      one[1] = {1};
  refused(ckpt_protect(rt, "wrapped", &byte, CKPT_U8, 1, minus5), "dims[0]");
  refused(ckpt_protect_block(rt, "wrapped", &byte, CKPT_U8, 1, minus5, zero, one), "global[0]");
  refused(ckpt_protect_block(rt, "wrapped", &byte, CKPT_U8, 1, four, minus5, one), "start[0]");
  refused(ckpt_protect_block(rt, "wrapped", &byte, CKPT_U8, 1, four, zero, minus5), "count[0]");
  refused(ckpt_update(rt, "j", &byte, 1, minus5), "dims[0]");
  // Nothing of it was registered: a checkpoint holds the joined array only, and restarts.
  EXPECT_EQ(ckpt_checkpoint(rt, 1, nullptr, nullptr), CKPT_OK) << ckpt_error_message(rt);
  EXPECT_EQ(ckpt_wait_all(rt), CKPT_OK) << ckpt_error_message(rt);
  EXPECT_EQ(ckpt_restart_step(rt, 1), CKPT_OK) << ckpt_error_message(rt);
  EXPECT_EQ(ckpt_close(rt), CKPT_OK) << ckpt_error_message(rt);
  ckpt_free(rt);
}

}  // namespace
}  // namespace ckpt::adv
