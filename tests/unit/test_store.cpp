// The checkpoint store: entry names, listing, start-up recovery, commit, retention, index loading.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "base/index_v2.hpp"
#include "base/store.hpp"
#include "test_util.hpp"

using namespace ckpt;
using namespace ckpt::detail;

namespace {

constexpr std::int64_t kMax = INT64_MAX;

/// A valid encoded index of `step` (one rank, one file, no variables).
std::vector<std::uint8_t> index_of(std::int64_t step) {
  Index idx;
  idx.step = step;
  idx.nranks = 1;
  idx.transport = "posix";
  idx.files.push_back({"data.0", 0, 0});
  idx.rank_file = {0};
  return encode_index(idx);
}

bool is_dir(const std::string& p) {
  struct stat st {};
  return ::lstat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

/// `root`/`name` as a directory, with a valid index of `step` when `index` is set.
void make_entry(const std::string& root, const std::string& name, std::int64_t step, bool index) {
  ASSERT_TRUE(make_dirs(root + "/" + name).ok());
  if (index) {
    const auto b = index_of(step);
    ASSERT_TRUE(write_file(root + "/" + name + "/index", b.data(), b.size(), false).ok());
  }
}

/// A marker file, so that a test can tell which version of a step survived.
void mark(const std::string& dir, const std::string& what) {
  ASSERT_TRUE(write_file(dir + "/marker", what.data(), what.size(), false).ok());
}
std::string marker(const std::string& dir) {
  auto b = read_file(dir + "/marker", 1024);
  return b.ok() ? std::string(b->begin(), b->end()) : std::string("(none)");
}

}  // namespace

TEST(StoreNames, Parse) {
  auto n = parse_step_name("ckpt.20");
  ASSERT_TRUE(n);
  EXPECT_EQ(n->step, 20);
  EXPECT_EQ(n->kind, EntryKind::committed);
  EXPECT_EQ(parse_step_name("ckpt.0")->step, 0);
  EXPECT_EQ(parse_step_name("ckpt.7.tmp")->kind, EntryKind::tmp);
  EXPECT_EQ(parse_step_name("ckpt.7.old")->kind, EntryKind::old);
  EXPECT_EQ(parse_step_name("ckpt.7.del")->kind, EntryKind::doomed);
  EXPECT_EQ(parse_step_name("ckpt.7.abandoned")->kind, EntryKind::abandoned);
  for (const char* bad : {"ckpt.", "ckpt", "ckpt.x", "ckpt.-1", "ckpt.+1", "ckpt.020", "ckpt.00", "ckpt.7.bak",
                          "ckpt.7.", "ckpt.7.tmp.old", "ckpt.1e3", "ckpt. 1", "latest", "xckpt.1", "ckpt.7tmp"})
    EXPECT_FALSE(parse_step_name(bad)) << bad;
}

TEST(StoreNames, WholeI64Range) {
  // 19 digits: every step up to 2^63 - 1, and nothing above (no exception, no wrap).
  EXPECT_EQ(parse_step_name("ckpt.1000000000000000000")->step, 1000000000000000000LL);
  EXPECT_EQ(parse_step_name("ckpt.9223372036854775807")->step, kMax);
  EXPECT_EQ(parse_step_name("ckpt.9223372036854775807.old")->step, kMax);
  EXPECT_FALSE(parse_step_name("ckpt.9223372036854775808"));
  EXPECT_FALSE(parse_step_name("ckpt.9999999999999999999"));
  EXPECT_FALSE(parse_step_name("ckpt.18446744073709551616"));  // 2^64
  EXPECT_FALSE(parse_step_name("ckpt.10000000000000000000"));  // 20 digits
  for (std::int64_t s : {std::int64_t{0}, std::int64_t{1}, std::int64_t{20}, kMax}) {
    for (auto k : {EntryKind::committed, EntryKind::tmp, EntryKind::old, EntryKind::doomed, EntryKind::abandoned}) {
      auto p = parse_step_name(step_name(s, k));
      ASSERT_TRUE(p) << step_name(s, k);
      EXPECT_EQ(p->step, s);
      EXPECT_EQ(p->kind, k);
    }
  }
}

TEST(Store, ListingAndCompleteness) {
  const std::string root = test::scratch_dir();
  make_entry(root, "ckpt.10", 10, true);
  make_entry(root, "ckpt.20", 20, false);  // committed name, no index
  make_entry(root, "ckpt.30.tmp", 30, true);
  make_entry(root, "ckpt.5", 6, true);     // index of another step
  make_entry(root, "ckpt.020", 20, true);  // not a canonical name: not a checkpoint
  make_entry(root, "ckpt.1000000000000000000", 1000000000000000000LL, true);
  ASSERT_TRUE(write_file(root + "/ckpt.40", "x", 1, false).ok());  // a file, not a directory
  auto store = make_directory_store(root);
  EXPECT_EQ(store->committed_steps(), (std::vector<std::int64_t>{1000000000000000000LL, 20, 10, 5}));
  auto list = store->list();
  ASSERT_TRUE(list.ok()) << list.status().to_string();
  ASSERT_EQ(list->size(), 5u);
  EXPECT_EQ((*list)[0].step, 1000000000000000000LL);
  EXPECT_TRUE((*list)[0].complete);
  EXPECT_EQ((*list)[1].name, "ckpt.30.tmp");
  EXPECT_FALSE((*list)[1].complete);
  EXPECT_NE((*list)[1].reason.find("never committed"), std::string::npos);
  EXPECT_EQ((*list)[2].name, "ckpt.20");
  EXPECT_NE((*list)[2].reason.find("no index"), std::string::npos) << (*list)[2].reason;
  EXPECT_TRUE((*list)[3].complete);
  EXPECT_EQ((*list)[3].index->step, 10);
  EXPECT_NE((*list)[4].reason.find("describes step 6"), std::string::npos) << (*list)[4].reason;
  EXPECT_EQ(store->newest_complete(), 1000000000000000000LL);
  EXPECT_EQ(store->load_index(20).status().code(), Code::not_found);
  EXPECT_EQ(store->load_index(5).status().code(), Code::corrupt);
  EXPECT_EQ(store->load_index(99).status().code(), Code::not_found);
  EXPECT_FALSE(make_directory_store(root + "/ckpt.40")->list().ok());
}

TEST(Store, IndexMustBeARegularFile) {
  const std::string root = test::scratch_dir();
  make_entry(root, "ckpt.1", 1, false);
  make_entry(root, "ckpt.2", 2, false);
  make_entry(root, "ckpt.3", 3, true);
  // A FIFO named index must not block the reader (nobody ever opens its write end).
  ASSERT_EQ(::mkfifo((root + "/ckpt.1/index").c_str(), 0600), 0);
  // A link named index must not be followed.
  ASSERT_EQ(::symlink((root + "/ckpt.3/index").c_str(), (root + "/ckpt.2/index").c_str()), 0);
  auto store = make_directory_store(root);
  EXPECT_EQ(store->load_index(1).status().code(), Code::corrupt) << store->load_index(1).status().to_string();
  EXPECT_EQ(store->load_index(2).status().code(), Code::corrupt) << store->load_index(2).status().to_string();
  EXPECT_EQ(store->newest_complete(), 3);
  // The same for data files read through the block reader.
  FileReader files(root + "/ckpt.1");
  char c = 0;
  EXPECT_FALSE(files.read("index", 0, &c, 1).ok());
}

TEST(Store, CommitAndRecommit) {
  const std::string root = test::scratch_dir();
  auto store = make_directory_store(root);
  ASSERT_TRUE(make_dirs(store->staging_dir(7)).ok());
  mark(store->staging_dir(7), "first");
  ASSERT_TRUE(store->commit(7, store->staging_dir(7), index_of(7), true).ok());
  EXPECT_FALSE(is_dir(store->staging_dir(7)));
  EXPECT_EQ(marker(store->checkpoint_dir(7)), "first");
  EXPECT_EQ(store->latest_link(), 7);
  // The same step again: the new version replaces the old, no .old is left.
  ASSERT_TRUE(make_dirs(store->staging_dir(7)).ok());
  mark(store->staging_dir(7), "second");
  ASSERT_TRUE(store->commit(7, store->staging_dir(7), index_of(7), true).ok());
  EXPECT_EQ(marker(store->checkpoint_dir(7)), "second");
  EXPECT_FALSE(is_dir(root + "/ckpt.7.old"));
  EXPECT_TRUE(store->load_index(7).ok());
  // The largest step commits and is found.
  ASSERT_TRUE(make_dirs(store->staging_dir(kMax)).ok());
  ASSERT_TRUE(store->commit(kMax, store->staging_dir(kMax), index_of(kMax), false).ok());
  EXPECT_EQ(store->newest_complete(), kMax);
  EXPECT_EQ(store->latest_link(), kMax);
}

TEST(Store, CommitOfAnOlderStepAbandonsTheNewerTimeline) {
  const std::string root = test::scratch_dir();
  for (std::int64_t s : {10, 11, 12}) make_entry(root, "ckpt." + std::to_string(s), s, true);
  make_entry(root, "ckpt.13", 13, false);           // incomplete: abandoned too
  make_entry(root, "ckpt.12.abandoned", 12, true);  // an earlier roll-back's: replaced
  mark(root + "/ckpt.12.abandoned", "older");
  make_entry(root, "ckpt.14.tmp", 14, false);  // not committed: left alone
  make_entry(root, "ckpt.15.old", 15, true);   // would be renamed back at start-up: abandoned
  make_entry(root, "ckpt.12.old", 12, true);   // beside its committed twin: removed
  auto store = make_directory_store(root);
  ASSERT_TRUE(make_dirs(store->staging_dir(11)).ok());
  mark(store->staging_dir(11), "new");
  ASSERT_TRUE(store->commit(11, store->staging_dir(11), index_of(11), true).ok());
  EXPECT_EQ(store->committed_steps(), (std::vector<std::int64_t>{11, 10}));
  EXPECT_EQ(marker(root + "/ckpt.11"), "new");
  EXPECT_TRUE(is_dir(root + "/ckpt.12.abandoned"));
  EXPECT_EQ(marker(root + "/ckpt.12.abandoned"), "(none)");
  EXPECT_TRUE(is_dir(root + "/ckpt.13.abandoned"));
  EXPECT_TRUE(is_dir(root + "/ckpt.14.tmp"));
  EXPECT_TRUE(is_dir(root + "/ckpt.15.abandoned"));
  EXPECT_FALSE(is_dir(root + "/ckpt.15.old"));
  EXPECT_FALSE(is_dir(root + "/ckpt.12.old"));
  EXPECT_EQ(store->newest_complete(), 11);
  // Listed, never complete; recovery keeps them; retention removes those the timeline has reached.
  auto l = store->list();
  ASSERT_TRUE(l.ok());
  int abandoned = 0;
  for (auto& e : l.value())
    if (e.kind == EntryKind::abandoned) {
      ++abandoned;
      EXPECT_FALSE(e.complete);
      EXPECT_NE(e.reason.find("rolled back"), std::string::npos) << e.reason;
    }
  EXPECT_EQ(abandoned, 3);
  ASSERT_TRUE(store->recover().ok());
  EXPECT_TRUE(is_dir(root + "/ckpt.12.abandoned"));
  ASSERT_TRUE(store->retain(5, 12).ok());
  EXPECT_FALSE(is_dir(root + "/ckpt.12.abandoned"));
  EXPECT_TRUE(is_dir(root + "/ckpt.13.abandoned"));
}

TEST(Store, RecoveryAfterACommitDiedBetweenItsRenames) {
  const std::string root = test::scratch_dir();
  // Step 7 was moved aside (ckpt.7 -> ckpt.7.old) and the run died before ckpt.7.tmp took its name.
  make_entry(root, "ckpt.7.old", 7, true);
  mark(root + "/ckpt.7.old", "committed");
  make_entry(root, "ckpt.7.tmp", 7, true);
  // Step 8 finished both renames but died before removing its .old.
  make_entry(root, "ckpt.8", 8, true);
  mark(root + "/ckpt.8", "new");
  make_entry(root, "ckpt.8.old", 8, true);
  // Step 9's committed name has no index (damaged): its .old is the only good copy and is kept.
  make_entry(root, "ckpt.9", 9, false);
  make_entry(root, "ckpt.9.old", 9, true);
  // Leftovers of a retention and of a checkpoint that never committed.
  make_entry(root, "ckpt.3.del", 3, true);
  make_entry(root, "ckpt.12.tmp", 12, false);
  auto store = make_directory_store(root);
  ASSERT_TRUE(store->recover().ok());
  EXPECT_EQ(marker(root + "/ckpt.7"), "committed");
  EXPECT_FALSE(is_dir(root + "/ckpt.7.old"));
  EXPECT_FALSE(is_dir(root + "/ckpt.7.tmp"));
  EXPECT_EQ(marker(root + "/ckpt.8"), "new");
  EXPECT_FALSE(is_dir(root + "/ckpt.8.old"));
  EXPECT_TRUE(is_dir(root + "/ckpt.9"));
  EXPECT_TRUE(is_dir(root + "/ckpt.9.old"));
  EXPECT_FALSE(is_dir(root + "/ckpt.3.del"));
  EXPECT_FALSE(is_dir(root + "/ckpt.12.tmp"));
  EXPECT_EQ(store->newest_complete(), 8);
  // Nothing changes on a second recovery.
  ASSERT_TRUE(store->recover().ok());
  EXPECT_EQ(store->committed_steps(), (std::vector<std::int64_t>{9, 8, 7}));
}

TEST(Store, RetentionCountsCompleteCheckpointsOnly) {
  const std::string root = test::scratch_dir();
  for (std::int64_t s : {1, 2, 3, 4}) make_entry(root, "ckpt." + std::to_string(s), s, true);
  make_entry(root, "ckpt.5", 5, false);     // incomplete, newest: neither counted nor removed
  make_entry(root, "ckpt.0.del", 0, true);  // a retention that died
  auto store = make_directory_store(root);
  ASSERT_TRUE(store->retain(2, 4).ok());
  EXPECT_EQ(store->committed_steps(), (std::vector<std::int64_t>{5, 4, 3}));
  EXPECT_FALSE(is_dir(root + "/ckpt.0.del"));
  EXPECT_FALSE(is_dir(root + "/ckpt.1.del"));
  EXPECT_FALSE(is_dir(root + "/ckpt.2.del"));
  // An incomplete checkpoint older than the kept ones is removed.
  make_entry(root, "ckpt.1", 1, false);
  ASSERT_TRUE(store->retain(1, 4).ok());
  EXPECT_EQ(store->committed_steps(), (std::vector<std::int64_t>{5, 4}));
  // The step just committed is kept even when newer ones exist.
  make_entry(root, "ckpt.2", 2, true);
  ASSERT_TRUE(store->retain(1, 2).ok());
  EXPECT_EQ(store->committed_steps(), (std::vector<std::int64_t>{5, 4, 2}));
}

// Retention reads a kept step whole (with a version-2 index, every sub-index) once per store, not at every
// commit: a step the store committed itself, or read whole before, counts without being read again.
TEST(Store, RetentionReadsAKeptStepOncePerStore) {
  const std::string root = test::scratch_dir();
  for (std::int64_t s : {1, 2, 3}) make_entry(root, "ckpt." + std::to_string(s), s, true);
  auto store = make_directory_store(root);
  auto commit = [&](std::int64_t step) {
    ASSERT_TRUE(make_dirs(store->staging_dir(step)).ok());
    ASSERT_TRUE(store->commit(step, store->staging_dir(step), index_of(step), false).ok());
  };
  ASSERT_NO_FATAL_FAILURE(commit(4));
  ASSERT_TRUE(store->retain(3, 4).ok());  // reads 3 and 2 whole
  EXPECT_EQ(store->committed_steps(), (std::vector<std::int64_t>{4, 3, 2}));
  // Behind the store's back, step 3 loses its index: the store does not read it again and still counts it
  // (reading it at every commit would leave it, not counted, and remove nothing).
  ASSERT_EQ(::unlink((root + "/ckpt.3/index").c_str()), 0);
  ASSERT_NO_FATAL_FAILURE(commit(5));
  ASSERT_TRUE(store->retain(3, 5).ok());
  EXPECT_EQ(store->committed_steps(), (std::vector<std::int64_t>{5, 4, 3}));
  // Another store (the next run) reads what it has not committed: 3 is incomplete and not counted.
  for (std::int64_t s : {1, 2}) make_entry(root, "ckpt." + std::to_string(s), s, true);
  ASSERT_TRUE(make_directory_store(root)->retain(3, 5).ok());
  EXPECT_EQ(store->committed_steps(), (std::vector<std::int64_t>{5, 4, 3, 2}));
}

// What retention remembers of a step is forgotten when the step is committed again: a re-commit of step 5
// that refers to nothing lets step 2, which the first version of 5 referred to, go.
TEST(Store, RetentionForgetsWhatARecommittedStepReferredTo) {
  const std::string root = test::scratch_dir();
  for (std::int64_t s : {1, 2, 3, 4}) make_entry(root, "ckpt." + std::to_string(s), s, true);
  auto store = make_directory_store(root);
  auto commit = [&](std::int64_t step, const std::vector<std::uint8_t>& index) {
    ASSERT_TRUE(make_dirs(store->staging_dir(step)).ok());
    ASSERT_TRUE(store->commit(step, store->staging_dir(step), index, false).ok());
  };
  // A version-2 root of step 5 that refers to step 2 (retention reads its root only: 5 is the store's own).
  RootIndex r;
  r.step = 5;
  r.nranks = 1;
  r.ckpt_id = 5;
  r.token = 1;
  r.writers = 1;
  r.catalog_length = catalog_directories_offset(1, WriterRule::per_rank, 1) + kObjectFooterBytes;
  r.base_step = 2;
  r.refs.push_back(RefSummary{0, 2, 2});
  ASSERT_NO_FATAL_FAILURE(commit(5, encode_root_index(r)));
  ASSERT_TRUE(store->retain(2, 5).ok());  // 5 and 4, and 2 for 5's pieces
  EXPECT_EQ(store->committed_steps(), (std::vector<std::int64_t>{5, 4, 2}));
  ASSERT_NO_FATAL_FAILURE(commit(5, index_of(5)));  // again, a version-1 index: no references
  ASSERT_TRUE(store->retain(2, 5).ok());
  EXPECT_EQ(store->committed_steps(), (std::vector<std::int64_t>{5, 4}));
}

// ---- the series layout ---------------------------------------------------------------------------

namespace {
/// Commits `step` into segment `k` of the series store (its directory made as the runtime does).
void series_commit(Store& s, std::int64_t k, std::int64_t step) {
  ASSERT_TRUE(make_dirs(segment_dir(s.root(), k)).ok());
  ASSERT_TRUE(s.commit(step, segment_dir(s.root(), k), index_of(step), true).ok()) << step;
}
std::uint64_t file_size(const std::string& p) {
  struct stat st {};
  return ::stat(p.c_str(), &st) == 0 ? static_cast<std::uint64_t>(st.st_size) : 0;
}
}  // namespace

TEST(PosixIo, SplitLast) {
  using P = std::pair<std::string, std::string>;
  EXPECT_EQ(split_last("run/ckpt.3"), P("run", "ckpt.3"));
  EXPECT_EQ(split_last("a/b/ckpt.3//"), P("a/b", "ckpt.3"));
  EXPECT_EQ(split_last("ckpt.3"), P(".", "ckpt.3"));
  EXPECT_EQ(split_last("/ckpt.3"), P("/", "ckpt.3"));
  EXPECT_EQ(split_last("/"), P("/", ""));
  EXPECT_EQ(split_last(""), P(".", ""));
  // The directory layout's name checks use it: a trailing slash does not hide a step's name.
  EXPECT_TRUE(is_checkpoint_dir("no/such/root/ckpt.12/"));
  EXPECT_FALSE(is_checkpoint_dir("no/such/root/ckpt.012/"));
}

TEST(SeriesNames, Segments) {
  bool doomed = true;
  EXPECT_EQ(parse_segment_name("series.0", &doomed), 0);
  EXPECT_FALSE(doomed);
  EXPECT_EQ(parse_segment_name("series.12.del", &doomed), 12);
  EXPECT_TRUE(doomed);
  for (const char* bad : {"series.", "series", "series.03", "series.-1", "series.1.tmp", "series.x", "ckpt.1"})
    EXPECT_FALSE(parse_segment_name(bad)) << bad;
  EXPECT_EQ(segment_name(7), "series.7");
}

TEST(SeriesStore, CommitListReadAndNames) {
  const std::string root = test::scratch_dir();
  auto store = make_series_store(root);
  series_commit(*store, 0, 1);
  series_commit(*store, 0, 2);
  series_commit(*store, 1, 3);
  EXPECT_EQ(store->committed_steps(), (std::vector<std::int64_t>{3, 2, 1}));
  EXPECT_EQ(store->checkpoint_dir(2), root + "/series.0");
  EXPECT_EQ(store->checkpoint_dir(3), root + "/series.1");
  EXPECT_EQ(store->newest_complete(), 3);
  EXPECT_EQ(store->load_index(2)->step, 2);
  EXPECT_EQ(store->load_index(9).status().code(), Code::not_found);
  EXPECT_FALSE(store->latest_link());  // no link: a commit makes no directory operation
  // Another process sees the same (a fresh store reads the logs).
  auto other = open_store(root);
  EXPECT_EQ(other->committed_steps(), (std::vector<std::int64_t>{3, 2, 1}));
  auto l = other->list();
  ASSERT_TRUE(l.ok());
  ASSERT_EQ(l->size(), 3u);
  EXPECT_TRUE((*l)[0].complete);
  EXPECT_EQ((*l)[0].name, "ckpt.3");
  // A series step is named like a checkpoint directory; the root's name is a root.
  EXPECT_TRUE(names_checkpoint(root + "/ckpt.2"));
  EXPECT_TRUE(names_checkpoint(root + "/latest"));
  EXPECT_FALSE(names_checkpoint(root));
  auto c = load_checkpoint(root + "/ckpt.2");
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_EQ(c->index.step, 2);
  EXPECT_EQ(c->data_dir, root + "/series.0");
  EXPECT_EQ(load_checkpoint(root + "/latest")->index.step, 3);
  EXPECT_EQ(load_checkpoint(root + "/ckpt.9").status().code(), Code::not_found);
  // What a root holds.
  const RootContents rc = scan_root(root);
  EXPECT_TRUE(rc.series);
  EXPECT_FALSE(rc.directories);
  EXPECT_EQ(rc.next_segment, 2);
}

TEST(SeriesStore, LaterRecordsWinAndRollBackHidesTheNewerTimeline) {
  const std::string root = test::scratch_dir();
  auto store = make_series_store(root);
  for (std::int64_t s = 1; s <= 5; ++s) series_commit(*store, 0, s);
  // A new run restarted from step 2 commits 3: steps 4 and 5 of the old timeline are gone for good.
  series_commit(*store, 1, 3);
  EXPECT_EQ(store->committed_steps(), (std::vector<std::int64_t>{3, 2, 1}));
  EXPECT_EQ(store->checkpoint_dir(3), root + "/series.1");
  auto fresh = open_store(root);
  EXPECT_EQ(fresh->committed_steps(), (std::vector<std::int64_t>{3, 2, 1}));
  EXPECT_EQ(fresh->newest_complete(), 3);
  auto l = fresh->list();
  ASSERT_TRUE(l.ok());
  int abandoned = 0;
  for (auto& e : *l)
    if (e.kind == EntryKind::abandoned) ++abandoned;
  EXPECT_EQ(abandoned, 3);  // 3 (replaced), 4 and 5 (rolled back) of series.0
}

TEST(SeriesStore, TornTailIsSkippedAndTruncatedBeforeTheNextAppend) {
  const std::string root = test::scratch_dir();
  const std::string log = root + "/series.0/steps";
  std::uint64_t first_end = 0;  // where step 2's record starts
  {
    auto store = make_series_store(root);
    series_commit(*store, 0, 1);
    first_end = file_size(log);
    series_commit(*store, 0, 2);
  }
  const std::uint64_t good = file_size(log);
  auto bytes = read_file(log, 1 << 20);
  ASSERT_TRUE(bytes.ok());
  // Every cut into the last record leaves step 1 only: into its trailer, its index, its header
  // (a version-2 record ends with its trailer: no cut keeps it).
  bool lost = false;
  std::uint64_t cuts = 0;
  for (std::uint64_t cut = good - 1; cut >= first_end; --cut) {
    ASSERT_TRUE(write_file(log, bytes->data(), static_cast<std::size_t>(cut), false).ok());
    const auto steps = open_store(root)->committed_steps();
    if (steps == std::vector<std::int64_t>{2, 1}) {
      EXPECT_FALSE(lost) << "cut at " << cut << ": a shorter cut lost step 2, this one keeps it";
      EXPECT_GT(cut, good - 8) << "cut at " << cut << " keeps a record whose index is cut off";
    } else {
      EXPECT_EQ(steps, (std::vector<std::int64_t>{1})) << "cut at " << cut;
      lost = true;
      ++cuts;
    }
  }
  EXPECT_TRUE(lost);
  EXPECT_GE(cuts, good - first_end - 7);
  // A scribbled byte in the last record's index and one in its trailer (no trailer proves that its
  // commit finished): skipped as torn, listed with the reason. (Its index alone: damaged, not torn;
  // test_step_log.cpp.)
  std::vector<std::uint8_t> bad = *bytes;
  bad[static_cast<std::size_t>(first_end) + 56 + 1] ^= 0x40;
  bad[bad.size() - 9] ^= 0x40;
  ASSERT_TRUE(write_file(log, bad.data(), bad.size(), false).ok());
  auto s = open_store(root);
  EXPECT_EQ(s->committed_steps(), (std::vector<std::int64_t>{1}));
  auto l = s->list();
  ASSERT_TRUE(l.ok());
  bool torn_listed = false;
  for (auto& e : *l) torn_listed = torn_listed || (e.kind == EntryKind::tmp && !e.reason.empty());
  EXPECT_TRUE(torn_listed);
  // Appending to that segment again (the same store would, after a failed append) drops the torn bytes first.
  series_commit(*s, 0, 7);
  EXPECT_EQ(open_store(root)->committed_steps(), (std::vector<std::int64_t>{7, 1}));
  EXPECT_LT(file_size(log), good + 200);
}

TEST(SeriesStore, RetentionRemovesWholeSegmentsOlderThanTheCurrentOne) {
  const std::string root = test::scratch_dir();
  auto store = make_series_store(root);
  std::int64_t step = 0;
  for (std::int64_t k = 0; k < 4; ++k)
    for (int i = 0; i < 3; ++i) series_commit(*store, k, ++step);  // segments of 3 steps: 1-3, 4-6, 7-9, 10-12
  // keep 4: steps 12, 11, 10, 9 -> segments 3 and 2 stay; 0 and 1 go.
  ASSERT_TRUE(store->retain(4, 12).ok());
  EXPECT_FALSE(is_dir(root + "/series.0"));
  EXPECT_FALSE(is_dir(root + "/series.1"));
  EXPECT_TRUE(is_dir(root + "/series.2"));
  EXPECT_EQ(open_store(root)->committed_steps(), (std::vector<std::int64_t>{12, 11, 10, 9, 8, 7}));
  // A segment newer than the one committed to (being written already) is never removed.
  ASSERT_TRUE(make_dirs(root + "/series.9").ok());
  ASSERT_TRUE(store->retain(1, 12).ok());
  EXPECT_TRUE(is_dir(root + "/series.9"));
  EXPECT_FALSE(is_dir(root + "/series.2"));
  // A .del left by a retention that died goes at recovery.
  ASSERT_TRUE(make_dirs(root + "/series.1.del/x").ok());
  ASSERT_TRUE(open_store(root)->recover().ok());
  EXPECT_FALSE(is_dir(root + "/series.1.del"));
}

TEST(SeriesStore, LogOfAnotherSegmentOrWithoutHeaderIsNotRead) {
  const std::string root = test::scratch_dir();
  {
    auto store = make_series_store(root);
    series_commit(*store, 0, 1);
  }
  // The log copied into another segment's directory names segment 0: it does not validate there.
  ASSERT_TRUE(make_dirs(root + "/series.5").ok());
  ASSERT_TRUE(copy_file(root + "/series.0/steps", root + "/series.5/steps", true, false).ok());
  auto s = open_store(root);
  EXPECT_EQ(s->committed_steps(), (std::vector<std::int64_t>{1}));
  EXPECT_EQ(s->checkpoint_dir(1), root + "/series.0");
  // A FIFO named steps: listed as unreadable, never blocks.
  ASSERT_TRUE(make_dirs(root + "/series.6").ok());
  ASSERT_EQ(::mkfifo((root + "/series.6/steps").c_str(), 0600), 0);
  EXPECT_EQ(open_store(root)->committed_steps(), (std::vector<std::int64_t>{1}));
}
