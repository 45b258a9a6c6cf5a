// runtime/src/dir_lock: the root's timeline record (`.timeline`) and a node directory's run label
// (`.run`), docs/format.md "Node-local level": which node steps later runs rolled back.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>

#include "base/posix_io.hpp"
#include "runtime/src/commit/dir_lock.hpp"
#include "test_util.hpp"

using namespace ckpt::detail;
using ckpt::test::scratch_dir;

namespace {

constexpr std::uint64_t A = 0xa1, B = 0xb2, C = 0xc3;

std::string bound(std::uint64_t run) {
  char b[64];
  std::snprintf(b, sizeof b, "run %016llx bound\n", static_cast<unsigned long long>(run));
  return b;
}
std::string from(std::uint64_t run, long long step) {
  char b[64];
  std::snprintf(b, sizeof b, "run %016llx from %lld\n", static_cast<unsigned long long>(run), step);
  return b;
}
std::string slurp(const std::string& path) {
  auto b = read_file(path, 1 << 20);
  return b.ok() ? std::string(b->begin(), b->end()) : "<" + b.status().to_string() + ">";
}

}  // namespace

TEST(Timeline, NodeStepsOfEarlierRunsAreAbandonedFromTheLowestLaterStart) {
  EXPECT_EQ(abandoned_from("", A), std::nullopt);  // no record: nothing is known to be rolled back
  EXPECT_EQ(abandoned_from(bound(A) + from(A, 1), A), std::nullopt);  // the label's own starts do not count
  // A labelled the node; B (no levels) began a timeline at 3, C at 5: A's steps 3.. belong to neither.
  const std::string t = bound(A) + from(A, 1) + from(B, 3) + bound(C) + from(C, 5);
  EXPECT_EQ(abandoned_from(t, A), 3);
  EXPECT_EQ(abandoned_from(t, C), std::nullopt);  // C is the newest label
  // Lines before the label's `bound` line are older than the node's steps.
  EXPECT_EQ(abandoned_from(from(B, 2) + bound(A) + from(C, 7), A), 7);
  // No label (an earlier build's node directory), or one the record does not hold: older than every line.
  EXPECT_EQ(abandoned_from(from(B, 2) + bound(A) + from(C, 7), std::nullopt), 2);
  EXPECT_EQ(abandoned_from(from(B, 2) + bound(A) + from(C, 7), 0x99), 2);
  EXPECT_EQ(abandoned_from(bound(A), std::nullopt), std::nullopt);
}

TEST(Timeline, EveryStepNumberIsRead) {
  // 19 digits (steps up to INT64_MAX, e.g. nanosecond times): a line, not damage (which would count
  // as a roll-back to 0 and abandon every node step).
  EXPECT_EQ(abandoned_from(bound(A) + from(A, INT64_MAX) + from(B, 1000000000000000001LL), A), 1000000000000000001LL);
  EXPECT_EQ(abandoned_from(bound(A) + from(A, INT64_MAX), A), std::nullopt);
  EXPECT_EQ(abandoned_from(bound(A) + from(B, 0), A), 0);
  // Beyond INT64_MAX, a leading zero, a sign: damaged.
  EXPECT_EQ(abandoned_from(bound(A) + "run 00000000000000b2 from 9223372036854775808\n", A), 0);
  EXPECT_EQ(abandoned_from(bound(A) + from(B, 9) + "run 00000000000000b2 from 07\n", A), 0);
  EXPECT_EQ(abandoned_from(bound(A) + from(B, 9) + "run 00000000000000b2 from -1\n", A), 0);
}

TEST(Timeline, DamageCountsAsARollBackToStepZeroATornLastLineAsNothing) {
  const std::string t = bound(A) + from(A, 4);
  EXPECT_EQ(abandoned_from(t + "run 00000000000000b2 from 1x\n", A), 0);  // damaged after the label
  EXPECT_EQ(abandoned_from(t + "garbage\n", A), 0);
  EXPECT_EQ(abandoned_from("garbage\n" + t, A), std::nullopt);  // before it: older than the node's steps
  EXPECT_EQ(abandoned_from(t + "run 00000000000000b2 fro", A), std::nullopt);  // torn: announced nothing
  EXPECT_EQ(abandoned_from(t + from(B, 9) + "run 00000000000000c3 from 2", A), 9);
}

TEST(Timeline, AppendsWhatItAnnouncesAndCutsATornLine) {
  const std::string dir = scratch_dir();
  {
    Timeline tl(dir, A, true);
    auto text = tl.bind();
    ASSERT_TRUE(text.ok()) << text.status().to_string();
    EXPECT_EQ(text.value(), bound(A));
    ASSERT_TRUE(tl.before_commit(5).ok());
    ASSERT_TRUE(tl.before_commit(6).ok());  // along the timeline: nothing
    ASSERT_TRUE(tl.before_commit(5).ok());  // a re-commit of its start: nothing
    ASSERT_TRUE(tl.before_commit(2).ok());  // a roll-back below it: a new start
  }
  EXPECT_EQ(slurp(dir + "/.timeline"), bound(A) + from(A, 5) + from(A, 2));
  // A run that died in its append left a line without its newline: the next append cuts it off.
  {
    const std::string torn = slurp(dir + "/.timeline") + "run 00000000000000b2 fr";
    ASSERT_TRUE(write_file(dir + "/.timeline", torn.data(), torn.size(), false).ok());
    Timeline tl(dir, C, false);
    ASSERT_TRUE(tl.before_commit(3).ok());
  }
  EXPECT_EQ(slurp(dir + "/.timeline"), bound(A) + from(A, 5) + from(A, 2) + from(C, 3));
}

TEST(Timeline, NodeLabelIsWrittenWholeAndReadBack) {
  const std::string dir = scratch_dir();
  auto none = node_label(dir);
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(none.value(), std::nullopt);
  ASSERT_TRUE(label_node_dir(dir, B, true).ok());
  EXPECT_EQ(slurp(dir + "/.run"), "ckpt run 00000000000000b2\n");
  EXPECT_EQ(node_label(dir).value(), B);
  const std::string bad = "ckpt run 00000000000000zz\n";  // damaged: taken for no label
  ASSERT_TRUE(write_file(dir + "/.run", bad.data(), bad.size(), false).ok());
  EXPECT_EQ(node_label(dir).value(), std::nullopt);
}
