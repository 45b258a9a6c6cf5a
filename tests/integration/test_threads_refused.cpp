// The kernel refusing ckpt's thread settings (options thread_cpus and thread_slice_us; a seccomp
// filter here, as a container's can be): checkpoints still work, and the refusal is said once per
// process on stderr - on rank 0, and on every rank with verbose >= 1 (runtime/src/pipeline/threads.hpp).
// A process of its own: a seccomp filter cannot be taken back.
#include <gtest/gtest.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/prctl.h>
#include <sys/syscall.h>

#include <cerrno>
#include <cstddef>
#include <string>
#include <vector>

#include "ckpt/ckpt.hpp"
#include "test_util.hpp"

using namespace ckpt;
using ckpt::test::all_true;
using ckpt::test::scratch_dir;

namespace {

/// Makes sched_setaffinity and sched_setattr fail with EPERM for this thread and those it starts.
bool refuse_scheduler_calls() {
  sock_filter f[] = {
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_sched_setaffinity, 2, 0),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_sched_setattr, 1, 0),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (EPERM & SECCOMP_RET_DATA)),
  };
  sock_fprog prog{static_cast<unsigned short>(sizeof f / sizeof f[0]), f};
  return prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0 && prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) == 0;
}

/// What a Runtime (by default thread_cpus all, a slice of 250 us) said on stderr while it checkpointed
/// twice and closed.
std::string stderr_of_a_runtime(const std::string& dir, int verbose, int slice_us = 250,
                                const std::string& cpus = "all") {
  Options o = Options::defaults();
  o.dir = dir;
  o.thread_cpus = cpus == "auto" ? AutoText() : AutoText(cpus);
  o.thread_slice_us = slice_us < 0 ? AutoInt() : AutoInt(slice_us);  // -1: auto
  o.verbose = verbose;
  testing::internal::CaptureStderr();
  {
    Runtime rt(MPI_COMM_WORLD, o);
    EXPECT_TRUE(rt.status().ok()) << rt.status().to_string();
    std::vector<double> x(4096, 1.0);
    EXPECT_TRUE(rt.protect("x", x.data(), DType::f64, {x.size()}).ok());
    for (std::int64_t step : {1, 2}) EXPECT_TRUE(rt.checkpoint(step).wait().ok()) << "step " << step;
    EXPECT_TRUE(rt.close().ok());
  }
  return testing::internal::GetCapturedStderr();
}

std::size_t count(const std::string& text, const std::string& what) {
  std::size_t n = 0;
  for (std::size_t p = text.find(what); p != std::string::npos; p = text.find(what, p + 1)) ++n;
  return n;
}

const char* const kCpus = "ckpt: thread_cpus: the kernel refused to run ckpt's threads on every CPU of the process";
const char* const kSlice = "ckpt: thread_slice_us: the kernel refused a slice of 250 us (sched_setattr)";

}  // namespace

TEST(ThreadsRefused, CheckpointsWorkAndTheRefusalIsSaidOnce) {
  if (!all_true(refuse_scheduler_calls())) GTEST_SKIP() << "no seccomp filter can be installed here";
  const bool rank0 = ckpt::test::world_rank() == 0;
  // thread_slice_us auto (on_busy wait: 100 us) is not the user's request: its refusal is not said, on
  // any rank (first, so that the once-per-process lines below are still to come).
  std::string err = stderr_of_a_runtime(scratch_dir("/auto"), 1, -1, "inherit");
  EXPECT_EQ(count(err, "thread_slice_us"), 0u) << err;
  // verbose 0: rank 0 says each refusal once (several threads were refused), the others nothing.
  err = stderr_of_a_runtime(scratch_dir("/quiet"), 0);
  EXPECT_EQ(count(err, kCpus), rank0 ? 1u : 0u) << err;
  EXPECT_EQ(count(err, kSlice), rank0 ? 1u : 0u) << err;
  if (rank0)
    EXPECT_NE(err.find(" (Operation not permitted); ckpt's threads keep the setting they inherited"), std::string::npos)
        << err;
  // verbose 1: every rank says it, once per process - rank 0 has already.
  err = stderr_of_a_runtime(scratch_dir("/verbose"), 1);
  EXPECT_EQ(count(err, kCpus), rank0 ? 0u : 1u) << err;
  EXPECT_EQ(count(err, kSlice), rank0 ? 0u : 1u) << err;
}
