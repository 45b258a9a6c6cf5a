// The step log codec (base/step_log.hpp; docs/format.md "Step log, version 2" and "version 1"), parsed
// from memory: damage in the middle of a log costs that record only, a cut at the end is a torn tail,
// version 1 logs read as they always did. Then the series store on such logs (list, latest).
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "base/format.hpp"
#include "base/hash.hpp"
#include "base/posix_io.hpp"
#include "base/step_log.hpp"
#include "base/store.hpp"
#include "test_util.hpp"

using namespace ckpt;
using namespace ckpt::detail;

namespace {

constexpr std::int64_t kSegment = 3;
constexpr std::uint64_t kLogId = 0x1234abcd5678ef01ull;

/// A valid encoded index of `step` (one rank, one file; `pad` attributes make it longer).
std::vector<std::uint8_t> index_of(std::int64_t step, int pad = 0) {
  Index idx;
  idx.step = step;
  idx.nranks = 1;
  idx.transport = "posix";
  idx.files.push_back({"data.0", 0, 0});
  idx.rank_file = {0};
  for (int i = 0; i < pad; ++i) idx.attrs.emplace_back("k" + std::to_string(i), std::string(i % 7 + 1, 'x'));
  return encode_index(idx);
}

/// A version-2 log of records for `steps` (seq 0, 1, ...), and where each record starts.
struct Built {
  std::vector<std::uint8_t> bytes;
  std::vector<std::size_t> at;  ///< record i's first byte
};
Built build_v2(const std::vector<std::int64_t>& steps) {
  Built b;
  b.bytes = encode_step_log_header(kSegment, kLogId);
  for (std::size_t i = 0; i < steps.size(); ++i) {
    const auto idx = index_of(steps[i], static_cast<int>(i) * 3);
    const auto rec = encode_step_record(kLogId, i, steps[i], idx.data(), idx.size());
    b.at.push_back(b.bytes.size());
    b.bytes.insert(b.bytes.end(), rec.begin(), rec.end());
  }
  return b;
}

StepLog parse(const std::vector<std::uint8_t>& bytes, std::int64_t segment = kSegment) {
  return parse_step_log(MemoryLogBytes(bytes.data(), bytes.size()), segment);
}

/// (step or -1, damaged) of every record, in log order.
std::vector<std::pair<std::int64_t, bool>> summary(const StepLog& log) {
  std::vector<std::pair<std::int64_t, bool>> out;
  for (auto& r : log.records) out.emplace_back(r.step.value_or(-1), r.damaged);
  return out;
}
using S = std::vector<std::pair<std::int64_t, bool>>;

/// The index bytes of complete record `r` decode as `step`'s.
void expect_payload(const std::vector<std::uint8_t>& bytes, const LogRecord& r, std::int64_t step) {
  ASSERT_FALSE(r.damaged);
  ASSERT_LE(r.payload + r.length, bytes.size());
  std::vector<std::uint8_t> idx(bytes.begin() + static_cast<long>(r.payload),
                                bytes.begin() + static_cast<long>(r.payload + r.length));
  auto d = decode_checkpoint_index(idx, "test", step);
  EXPECT_TRUE(d.ok()) << d.status().to_string();
}

}  // namespace

TEST(StepLog, RoundTripsAndAppendsAtTheEnd) {
  const Built b = build_v2({10, 20, 30});
  const StepLog log = parse(b.bytes);
  EXPECT_EQ(log.version, 2u);
  EXPECT_EQ(log.log_id, kLogId);
  EXPECT_EQ(summary(log), (S{{10, false}, {20, false}, {30, false}}));
  EXPECT_EQ(log.end, b.bytes.size());
  EXPECT_EQ(log.next_seq, 3u);
  EXPECT_TRUE(log.torn.empty());
  EXPECT_TRUE(log.notes.empty());
  for (std::size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(log.records[i].begin, b.at[i]);
    EXPECT_EQ(log.records[i].seq, i);
    expect_payload(b.bytes, log.records[i], (static_cast<std::int64_t>(i) + 1) * 10);
  }
  // Every record is a multiple of 8 bytes; so is the header.
  for (auto at : b.at) EXPECT_EQ(at % 8, 0u);
  // An empty log: a header only.
  const StepLog empty = parse(encode_step_log_header(kSegment, kLogId));
  EXPECT_EQ(empty.version, 2u);
  EXPECT_TRUE(empty.records.empty() && empty.torn.empty());
  EXPECT_EQ(empty.end, kStepLogHeaderBytes);
}

TEST(StepLog, BadHeaderHoldsNoRecord) {
  const Built b = build_v2({1});
  EXPECT_EQ(parse(b.bytes, kSegment + 1).version, 0u) << "a log copied under another segment's name";
  EXPECT_NE(parse(b.bytes, kSegment + 1).bad_header.find("another segment"), std::string::npos);
  for (std::size_t at : {0, 8, 12, 16, 24, 32}) {
    auto bad = b.bytes;
    bad[at] ^= 0x01;
    const StepLog log = parse(bad);
    EXPECT_EQ(log.version, 0u) << "a flip at " << at;
    EXPECT_TRUE(log.records.empty());
    EXPECT_FALSE(log.bad_header.empty());
  }
  std::vector<std::uint8_t> shortlog(b.bytes.begin(), b.bytes.begin() + 20);
  EXPECT_EQ(parse(shortlog).version, 0u);
  // A log id of 0 is not one.
  auto zero_id = encode_step_log_header(kSegment, 0);
  EXPECT_EQ(parse(zero_id).version, 0u);
}

TEST(StepLog, DamagedPayloadInTheMiddleCostsThatStepOnly) {
  const Built b = build_v2({10, 20, 30, 40});
  auto bad = b.bytes;
  bad[b.at[1] + kStepRecordFrameBytes + 5] ^= 0x10;  // a byte of step 20's index
  const StepLog log = parse(bad);
  EXPECT_EQ(summary(log), (S{{10, false}, {20, true}, {30, false}, {40, false}}));
  EXPECT_NE(log.records[1].why.find("payload"), std::string::npos) << log.records[1].why;
  EXPECT_TRUE(log.torn.empty());
  EXPECT_EQ(log.end, bad.size());
  EXPECT_EQ(log.next_seq, 4u);
  expect_payload(bad, log.records[3], 40);
}

TEST(StepLog, DamagedHeaderTakesItsStepFromTheTrailer) {
  const Built b = build_v2({10, 20, 30});
  for (std::size_t off : {0, 9, 17, 25, 33, 41, 49}) {  // magic, log id, seq, step, n, checksums
    auto bad = b.bytes;
    bad[b.at[1] + off] ^= 0x04;
    const StepLog log = parse(bad);
    EXPECT_EQ(summary(log), (S{{10, false}, {20, true}, {30, false}})) << "a flip at header byte " << off;
    EXPECT_TRUE(log.torn.empty());
    expect_payload(bad, log.records[2], 30);
  }
  // Header and trailer both damaged: the record is damaged and its step unknown; 30 still reads.
  auto bad = b.bytes;
  bad[b.at[1] + 30] ^= 0x04;
  bad[b.at[2] - 20] ^= 0x04;  // inside step 20's trailer
  const StepLog log = parse(bad);
  EXPECT_EQ(summary(log), (S{{10, false}, {-1, true}, {30, false}}));
  EXPECT_EQ(log.records[1].seq, 1u);
}

TEST(StepLog, DamagedTrailerIsANoteNotALoss) {
  const Built b = build_v2({10, 20});
  auto bad = b.bytes;
  bad[b.at[1] - 30] ^= 0x01;  // step 10's trailer
  const StepLog log = parse(bad);
  EXPECT_EQ(summary(log), (S{{10, false}, {20, false}}));
  EXPECT_FALSE(log.records[0].trailer_ok);
  ASSERT_EQ(log.notes.size(), 1u);
  EXPECT_NE(log.notes[0].find("trailer"), std::string::npos);
}

TEST(StepLog, PaddingThatIsNotZeroIsANote) {
  Built b = build_v2({10});
  // Find a payload length that is not a multiple of 8, so that the record has padding.
  std::size_t pad = 0;
  for (int extra = 0; extra < 8 && pad == 0; ++extra) {
    b.bytes = encode_step_log_header(kSegment, kLogId);
    const auto idx = index_of(10, extra);
    const auto rec = encode_step_record(kLogId, 0, 10, idx.data(), idx.size());
    b.bytes.insert(b.bytes.end(), rec.begin(), rec.end());
    pad = (8 - idx.size() % 8) % 8;
  }
  ASSERT_GT(pad, 0u);
  b.bytes[b.bytes.size() - kStepRecordFrameBytes - 1] = 0x5A;  // the last padding byte
  const StepLog log = parse(b.bytes);
  EXPECT_EQ(summary(log), (S{{10, false}}));
  ASSERT_EQ(log.notes.size(), 1u);
  EXPECT_NE(log.notes[0].find("padding"), std::string::npos) << log.notes[0];
}

TEST(StepLog, SeveralDamagedRecordsInARow) {
  const Built b = build_v2({1, 2, 3, 4, 5});
  auto bad = b.bytes;
  // Wipe records 1..3 entirely (headers, payloads, trailers): seq 4 tells that three records were there.
  std::memset(bad.data() + b.at[1], 0xEE, b.at[4] - b.at[1]);
  const StepLog log = parse(bad);
  EXPECT_EQ(summary(log), (S{{1, false}, {-1, true}, {-1, true}, {-1, true}, {5, false}}));
  EXPECT_EQ(log.records[4].seq, 4u);
  // Records 1..3 with their headers gone but their trailers intact: each keeps its step.
  bad = b.bytes;
  for (std::size_t i = 1; i <= 3; ++i) bad[b.at[i] + 3] ^= 0xFF;
  EXPECT_EQ(summary(parse(bad)), (S{{1, false}, {2, true}, {3, true}, {4, true}, {5, false}}));
}

TEST(StepLog, GarbageBetweenRecordsCostsNoStep) {
  const Built b = build_v2({10, 20});
  auto bad = std::vector<std::uint8_t>(b.bytes.begin(), b.bytes.begin() + static_cast<long>(b.at[1]));
  for (int i = 0; i < 24; ++i) bad.push_back(static_cast<std::uint8_t>(0xA0 + i));
  bad.insert(bad.end(), b.bytes.begin() + static_cast<long>(b.at[1]), b.bytes.end());
  const StepLog log = parse(bad);
  EXPECT_EQ(summary(log), (S{{10, false}, {20, false}}));
  ASSERT_EQ(log.notes.size(), 1u);
  EXPECT_NE(log.notes[0].find("between records"), std::string::npos) << log.notes[0];
  expect_payload(bad, log.records[1], 20);
}

TEST(StepLog, TruncatedTailIsTornAtEveryCut) {
  const Built b = build_v2({10, 20});
  for (std::size_t cut = b.at[1]; cut < b.bytes.size(); ++cut) {
    std::vector<std::uint8_t> t(b.bytes.begin(), b.bytes.begin() + static_cast<long>(cut));
    const StepLog log = parse(t);
    ASSERT_EQ(summary(log), (S{{10, false}})) << "cut at " << cut;
    EXPECT_EQ(log.end, b.at[1]);
    EXPECT_EQ(log.torn.empty(), cut == b.at[1]) << "cut at " << cut;
    EXPECT_EQ(log.next_seq, 1u);
  }
  // A record written whole but with zeros where its payload and trailer should be (a crash before
  // the page cache reached the disk): torn, not damaged.
  auto z = b.bytes;
  std::memset(z.data() + b.at[1] + kStepRecordFrameBytes, 0, z.size() - b.at[1] - kStepRecordFrameBytes);
  const StepLog log = parse(z);
  EXPECT_EQ(summary(log), (S{{10, false}}));
  EXPECT_FALSE(log.torn.empty());
  EXPECT_EQ(log.end, b.at[1]);
}

TEST(StepLog, DamagedLastRecordWithItsTrailerIsDamagedNotTorn) {
  const Built b = build_v2({10, 20});
  auto bad = b.bytes;
  bad[b.at[1] + kStepRecordFrameBytes + 2] ^= 0x80;
  const StepLog log = parse(bad);
  EXPECT_EQ(summary(log), (S{{10, false}, {20, true}}));
  EXPECT_TRUE(log.torn.empty());
  EXPECT_EQ(log.end, bad.size());
  // Only the trailer of the damaged stretch survives and then junk: damaged up to it, torn after.
  bad[b.at[1] + 1] ^= 0x80;  // the header too
  bad.insert(bad.end(), {1, 2, 3, 4, 5, 6, 7, 8, 9});
  const StepLog l2 = parse(bad);
  EXPECT_EQ(summary(l2), (S{{10, false}, {20, true}}));
  EXPECT_EQ(l2.end, b.bytes.size());
  EXPECT_FALSE(l2.torn.empty());
}

TEST(StepLog, ForgedRecordsAreNotTaken) {
  const Built b = build_v2({10, 20});
  // A record of another log (its id differs) spliced in: junk, not a record.
  const auto idx = index_of(15);
  const auto other = encode_step_record(kLogId ^ 1, 1, 15, idx.data(), idx.size());
  auto bad = std::vector<std::uint8_t>(b.bytes.begin(), b.bytes.begin() + static_cast<long>(b.at[1]));
  bad.insert(bad.end(), other.begin(), other.end());
  bad.insert(bad.end(), b.bytes.begin() + static_cast<long>(b.at[1]), b.bytes.end());
  StepLog log = parse(bad);
  EXPECT_EQ(summary(log), (S{{10, false}, {20, false}}));
  // A header whose fields were edited (step 20 -> 99) without its checksum: not a valid header; the
  // trailer still names step 20, so the record is damaged, of step 20.
  bad = b.bytes;
  const std::int64_t forged = 99;
  std::memcpy(bad.data() + b.at[1] + 24, &forged, 8);
  log = parse(bad);
  EXPECT_EQ(summary(log), (S{{10, false}, {20, true}}));
  // A forged record with a correct header checksum but a payload checksum that does not hold, and
  // a trailer that does not match: nothing after it, so a torn tail; nothing of it is read.
  bad = std::vector<std::uint8_t>(b.bytes.begin(), b.bytes.begin() + static_cast<long>(b.at[1]));
  auto fake = encode_step_record(kLogId, 1, 50, idx.data(), idx.size());
  fake[kStepRecordFrameBytes + 3] ^= 1;  // its payload
  fake[fake.size() - 40] ^= 1;           // its trailer's seq
  bad.insert(bad.end(), fake.begin(), fake.end());
  log = parse(bad);
  EXPECT_EQ(summary(log), (S{{10, false}}));
  EXPECT_FALSE(log.torn.empty());
  // A huge length in a valid header (checksum recomputed): cut off, never allocated.
  bad = b.bytes;
  const std::uint64_t huge = 1ull << 32;
  std::memcpy(bad.data() + b.at[1] + 32, &huge, 8);
  const std::uint64_t h = hash64(bad.data() + b.at[1], 48);
  std::memcpy(bad.data() + b.at[1] + 48, &h, 8);
  log = parse(bad);
  ASSERT_EQ(log.records.size(), 2u);
  EXPECT_TRUE(log.records[1].damaged);  // its trailer (step 20) proves it was committed
  // A trailer forged with seq 2^64 - 1 (checksum recomputed) behind a damaged header: seq >= 2^63 is
  // not a valid frame, so nothing proves the record was committed: a torn tail, and the next seq
  // stays 1 (never wraps around).
  bad = b.bytes;
  bad[b.at[1] + 2] ^= 1;  // step 20's header
  const std::size_t tr = bad.size() - kStepRecordFrameBytes;
  const std::uint64_t max_seq = ~0ull;
  std::memcpy(bad.data() + tr + 16, &max_seq, 8);
  const std::uint64_t th = hash64(bad.data() + tr, 48);
  std::memcpy(bad.data() + tr + 48, &th, 8);
  log = parse(bad);
  EXPECT_EQ(summary(log), (S{{10, false}}));
  EXPECT_FALSE(log.torn.empty());
  EXPECT_EQ(log.next_seq, 1u);
}

TEST(StepLog, SeqGapsAndRepeats) {
  const Built b = build_v2({10, 20, 30});
  // Record 1's bytes removed whole: record 2 (seq 2) says one record is missing.
  std::vector<std::uint8_t> gap(b.bytes.begin(), b.bytes.begin() + static_cast<long>(b.at[1]));
  gap.insert(gap.end(), b.bytes.begin() + static_cast<long>(b.at[2]), b.bytes.end());
  EXPECT_EQ(summary(parse(gap)), (S{{10, false}, {-1, true}, {30, false}}));
  // Record 0 repeated after itself (a replay): the copy has an old seq: junk, costs no step.
  std::vector<std::uint8_t> rep(b.bytes.begin(), b.bytes.begin() + static_cast<long>(b.at[1]));
  rep.insert(rep.end(), b.bytes.begin() + static_cast<long>(b.at[0]), b.bytes.begin() + static_cast<long>(b.at[1]));
  rep.insert(rep.end(), b.bytes.begin() + static_cast<long>(b.at[1]), b.bytes.end());
  const StepLog log = parse(rep);
  EXPECT_EQ(summary(log), (S{{10, false}, {20, false}, {30, false}}));
  EXPECT_EQ(log.notes.size(), 1u);
  // A header forged with a huge seq (checksum recomputed): the records it claims do not fit in the
  // bytes before it, so they are one damaged entry, never 10^12 of them.
  auto forged = b.bytes;
  const std::uint64_t huge = 1000000000000ull;
  std::memcpy(forged.data() + b.at[1] + 16, &huge, 8);
  const std::uint64_t h = hash64(forged.data() + b.at[1], 48);
  std::memcpy(forged.data() + b.at[1] + 48, &h, 8);
  const StepLog f = parse(forged);
  ASSERT_EQ(f.records.size(), 3u);
  EXPECT_EQ(summary(f), (S{{10, false}, {-1, true}, {20, false}}));
  EXPECT_EQ(f.next_seq, huge + 1);
  EXPECT_FALSE(f.torn.empty()) << "record 2 (seq 2 < the forged seq) is not read after it";
}

TEST(StepLog, Version1ReadsAsBeforeAndStopsAtTheFirstBadRecord) {
  std::vector<std::uint8_t> v1 = encode_step_log_header_v1(kSegment);
  std::vector<std::size_t> at;
  for (std::int64_t s : {10, 20, 30}) {
    const auto idx = index_of(s, static_cast<int>(s / 10));
    const auto rec = encode_step_record_v1(s, idx.data(), idx.size());
    at.push_back(v1.size());
    v1.insert(v1.end(), rec.begin(), rec.end());
  }
  StepLog log = parse(v1);
  EXPECT_EQ(log.version, 1u);
  EXPECT_EQ(summary(log), (S{{10, false}, {20, false}, {30, false}}));
  EXPECT_TRUE(log.torn.empty());
  expect_payload(v1, log.records[1], 20);
  // A flip in the middle record: version 1 cannot resynchronise; the rest is a torn tail.
  auto bad = v1;
  bad[at[1] + 45] ^= 0x01;
  log = parse(bad);
  EXPECT_EQ(summary(log), (S{{10, false}}));
  EXPECT_FALSE(log.torn.empty());
  EXPECT_EQ(log.end, at[1]);
  // A version-1 log whose last record ends inside its padding still holds that record.
  auto cut = v1;
  const auto idx = index_of(40);
  const auto rec = encode_step_record_v1(40, idx.data(), idx.size());
  cut.insert(cut.end(), rec.begin(), rec.end());
  const std::size_t unpadded = cut.size() - rec.size() + 40 + idx.size();
  if (unpadded < cut.size()) {
    cut.resize(unpadded);
    EXPECT_EQ(parse(cut).records.size(), 4u);
  }
  // Version 1 header of another segment, and an unknown version.
  EXPECT_EQ(parse(v1, kSegment + 1).version, 0u);
  auto v3 = v1;
  v3[8] = 3;
  EXPECT_EQ(parse(v3).version, 0u);
}

TEST(StepLog, FileBytesReadLikeMemory) {
  const std::string dir = test::scratch_dir();
  const Built b = build_v2({10, 20});
  auto bad = b.bytes;
  bad[b.at[0] + kStepRecordFrameBytes + 1] ^= 0x02;
  const std::string path = dir + "/steps";
  ASSERT_TRUE(write_file(path, bad.data(), bad.size(), false).ok());
  std::uint64_t size = 0;
  auto fd = open_regular(path, &size);
  ASSERT_TRUE(fd.ok());
  const StepLog log = parse_step_log(FileLogBytes(fd.value(), size, path), kSegment);
  ::close(fd.value());
  EXPECT_EQ(summary(log), (S{{10, true}, {20, false}}));
}

// ---- the series store on damaged logs -----------------------------------------------------------

namespace {
void series_commit(Store& s, std::int64_t k, std::int64_t step) {
  ASSERT_TRUE(make_dirs(segment_dir(s.root(), k)).ok());
  ASSERT_TRUE(s.commit(step, segment_dir(s.root(), k), index_of(step), true).ok()) << step;
}
std::vector<std::uint8_t> slurp(const std::string& p) {
  auto b = read_file(p, 1 << 24);
  return b.ok() ? *b : std::vector<std::uint8_t>{};
}
}  // namespace

TEST(SeriesStoreDamage, AFlippedBitInAMiddleRecordCostsThatStepOnly) {
  const std::string root = test::scratch_dir();
  {
    auto store = make_series_store(root);
    for (std::int64_t s = 1; s <= 3; ++s) series_commit(*store, 0, s);
  }
  const std::string log = root + "/series.0/steps";
  auto bytes = slurp(log);
  const StepLog parsed = parse_step_log(MemoryLogBytes(bytes.data(), bytes.size()), 0);
  ASSERT_EQ(parsed.records.size(), 3u);
  bytes[parsed.records[1].payload + parsed.records[1].length / 2] ^= 0x08;  // step 2's index
  ASSERT_TRUE(write_file(log, bytes.data(), bytes.size(), false).ok());

  auto s = open_store(root);
  EXPECT_EQ(s->newest_complete(), 3) << "the intact step after the damaged one is the latest";
  EXPECT_TRUE(s->load_index(3).ok());
  EXPECT_TRUE(s->load_index(1).ok());
  auto two = s->load_index(2);
  ASSERT_FALSE(two.ok());
  EXPECT_EQ(two.status().code(), Code::corrupt);
  EXPECT_NE(two.status().message().find("damaged"), std::string::npos) << two.status().message();
  auto l = s->list();
  ASSERT_TRUE(l.ok());
  bool listed = false;
  for (auto& e : *l) {
    if (e.step != 2) continue;
    listed = true;
    EXPECT_FALSE(e.complete);
    EXPECT_TRUE(e.damaged);
    EXPECT_EQ(e.kind, EntryKind::committed);
    EXPECT_EQ(e.reason.find("did not finish"), std::string::npos) << e.reason;
  }
  EXPECT_TRUE(listed);
  for (auto& e : *l) EXPECT_NE(e.kind, EntryKind::tmp) << "nothing is torn: " << e.name << ": " << e.reason;
  // restart(2)'s fall-back order: 3 is the latest; with 3 gone too the next is 1, not 2.
  std::vector<std::string> skipped;
  bytes[parsed.records[2].payload + 1] ^= 0x08;
  ASSERT_TRUE(write_file(log, bytes.data(), bytes.size(), false).ok());
  EXPECT_EQ(open_store(root)->newest_complete(&skipped), 1);
  EXPECT_EQ(skipped.size(), 2u);
}

TEST(SeriesStoreDamage, ADamagedRecordOfUnknownStepIsListedAndTakesNoEffect) {
  const std::string root = test::scratch_dir();
  {
    auto store = make_series_store(root);
    for (std::int64_t s = 1; s <= 3; ++s) series_commit(*store, 0, s);
  }
  const std::string log = root + "/series.0/steps";
  auto bytes = slurp(log);
  const StepLog parsed = parse_step_log(MemoryLogBytes(bytes.data(), bytes.size()), 0);
  ASSERT_EQ(parsed.records.size(), 3u);
  bytes[parsed.records[1].begin + 20] ^= 0x01;  // step 2's header
  bytes[parsed.records[1].end - 20] ^= 0x01;    // and its trailer
  ASSERT_TRUE(write_file(log, bytes.data(), bytes.size(), false).ok());
  auto s = open_store(root);
  EXPECT_EQ(s->committed_steps(), (std::vector<std::int64_t>{3, 1}));
  auto l = s->list();
  ASSERT_TRUE(l.ok());
  int unknown = 0;
  for (auto& e : *l)
    if (e.step == -1 && e.damaged) {
      ++unknown;
      EXPECT_NE(e.reason.find("unknown"), std::string::npos) << e.reason;
    }
  EXPECT_EQ(unknown, 1);
}

TEST(SeriesStoreDamage, Version1SegmentsStayReadableAndAreNeverAppendedTo) {
  const std::string root = test::scratch_dir();
  ASSERT_TRUE(make_dirs(root + "/series.0").ok());
  std::vector<std::uint8_t> v1 = encode_step_log_header_v1(0);
  for (std::int64_t s : {5, 6}) {
    const auto idx = index_of(s);
    const auto rec = encode_step_record_v1(s, idx.data(), idx.size());
    v1.insert(v1.end(), rec.begin(), rec.end());
  }
  ASSERT_TRUE(write_file(root + "/series.0/steps", v1.data(), v1.size(), false).ok());
  auto s = open_store(root);
  EXPECT_EQ(s->committed_steps(), (std::vector<std::int64_t>{6, 5}));
  EXPECT_TRUE(s->load_index(6).ok());
  // A build that writes version 2 refuses to append to it (a run appends to its own segments only).
  Status st = s->commit(7, root + "/series.0", index_of(7), false);
  EXPECT_EQ(st.code(), Code::failed_precondition) << st.to_string();
  // ... and a new segment beside it gets a version-2 log; both read together.
  series_commit(*s, 1, 7);
  auto fresh = open_store(root);
  EXPECT_EQ(fresh->committed_steps(), (std::vector<std::int64_t>{7, 6, 5}));
  auto bytes = slurp(root + "/series.1/steps");
  EXPECT_EQ(parse_step_log(MemoryLogBytes(bytes.data(), bytes.size()), 1).version, 2u);
}
