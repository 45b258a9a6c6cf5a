// GPU-path decisions that need no GPU (gpu/plan.hpp): the order and messages of the stream checks of
// capture and restart, where double buffering puts each device copy, how the automatic spare is sized,
// and how restart rows become 2D copies. These run on every machine; the same code runs on the GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "gpu/device.hpp"
#include "gpu/plan.hpp"

using namespace ckpt;
using namespace ckpt::detail;

namespace {

/// Answers like a CUDA runtime would, records the questions in order, and fails the n-th on request.
class FakeProbe final : public StreamProbe {
 public:
  int current = 0;
  int stream_dev = 0;
  bool capturing = false;
  int fail_at = -1;  ///< 0-based index of the question that returns an error
  std::vector<std::string> asked;

  Result<int> current_device() override {
    if (fails("current_device")) return Status(Code::io_error, "probe");
    return current;
  }
  bool is_default_stream(void* s) const override { return s == nullptr; }
  Result<int> stream_device(void*) override {
    if (fails("stream_device")) return Status(Code::io_error, "probe");
    return stream_dev;
  }
  Result<bool> is_capturing(void*) override {
    if (fails("is_capturing")) return Status(Code::io_error, "probe");
    return capturing;
  }

 private:
  bool fails(const char* what) {
    asked.emplace_back(what);
    return static_cast<int>(asked.size()) - 1 == fail_at;
  }
};

void* const kStream = reinterpret_cast<void*>(0x1234);

}  // namespace

TEST(StreamChecks, AllPassOnTheRuntimesDeviceInOrder) {
  FakeProbe p;
  p.current = p.stream_dev = 2;
  EXPECT_TRUE(check_app_stream(2, kStream, p, "checkpoint").ok());
  EXPECT_EQ(p.asked, (std::vector<std::string>{"current_device", "is_capturing", "stream_device"}));
}

TEST(StreamChecks, DefaultStreamHasNoDeviceOfItsOwnToAsk) {
  FakeProbe p;
  EXPECT_TRUE(check_app_stream(0, nullptr, p, "checkpoint").ok());
  EXPECT_EQ(p.asked, (std::vector<std::string>{"current_device", "is_capturing"}));
}

TEST(StreamChecks, CurrentDeviceChangedAfterTheRuntimeWasMade) {
  FakeProbe p;
  p.current = 1;  // the application called cudaSetDevice(1) after building the Runtime on 0
  Status s = check_app_stream(0, nullptr, p, "checkpoint");
  EXPECT_EQ(s.code(), Code::failed_precondition);
  EXPECT_NE(s.message().find("current CUDA device is 1"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("cudaSetDevice(0)"), std::string::npos) << s.message();
  EXPECT_EQ(p.asked.size(), 1u) << "nothing else may be asked about a stream of another device";
}

TEST(StreamChecks, StreamOfAnotherDevice) {
  FakeProbe p;
  p.stream_dev = 3;
  Status s = check_app_stream(0, kStream, p, "restart");
  EXPECT_EQ(s.code(), Code::failed_precondition);
  EXPECT_NE(s.message().find("restart: the stream belongs to CUDA device 3"), std::string::npos) << s.message();
  EXPECT_EQ(p.asked, (std::vector<std::string>{"current_device", "is_capturing", "stream_device"}));
}

TEST(StreamChecks, GraphCapturedStreamIsRejected) {
  for (void* stream : {static_cast<void*>(nullptr), kStream}) {
    FakeProbe p;
    p.capturing = true;
    Status s = check_app_stream(0, stream, p, "checkpoint");
    EXPECT_EQ(s.code(), Code::failed_precondition);
    EXPECT_NE(s.message().find("captured into a CUDA graph"), std::string::npos) << s.message();
    // Nothing else is asked about a stream in a capture (issue 32: a capture may refuse other queries).
    EXPECT_EQ(p.asked, (std::vector<std::string>{"current_device", "is_capturing"}));
  }
}

TEST(StreamChecks, ProbeErrorsStopTheChecksAndAreReturned) {
  for (int k = 0; k < 3; ++k) {
    FakeProbe p;
    p.fail_at = k;
    Status s = check_app_stream(0, kStream, p, "checkpoint");
    EXPECT_EQ(s.code(), Code::io_error) << k;
    EXPECT_EQ(p.asked.size(), static_cast<std::size_t>(k + 1)) << "question " << k << " failed; later ones asked";
  }
}

TEST(DoubleBufferPlan, CopiesThatDoNotFitOverflowAloneNotTheWholeCapture) {
  DoubleBufferPlan plan;
  plan.begin(1000);
  SparePlace a = plan.place(600);
  EXPECT_TRUE(a.spare);
  EXPECT_EQ(a.offset, 0u);
  SparePlace b = plan.place(600);  // 256-aligned offset 768: 768 + 600 > 1000
  EXPECT_FALSE(b.spare);
  SparePlace c = plan.place(100);  // still fits after the overflow
  EXPECT_TRUE(c.spare);
  EXPECT_EQ(c.offset, 768u);
  EXPECT_EQ(c.offset % DoubleBufferPlan::kAlign, 0u);
  EXPECT_TRUE(plan.used_spare());
  EXPECT_EQ(plan.overflow_bytes(), 600u);
  EXPECT_EQ(plan.device_bytes(), 768u + 768u + 256u);
}

TEST(DoubleBufferPlan, NoSpareMeansEverythingDirectAndHostOnlyMeansNothing) {
  DoubleBufferPlan plan;
  plan.begin(0);
  EXPECT_FALSE(plan.any_device());  // a host-only capture: the application's stream is not touched
  EXPECT_FALSE(plan.place(1).spare);
  EXPECT_TRUE(plan.any_device());
  EXPECT_FALSE(plan.used_spare());
  plan.begin(4096);  // a new capture forgets the last one
  EXPECT_FALSE(plan.any_device());
  EXPECT_EQ(plan.overflow_bytes(), 0u);
}

TEST(DoubleBufferPlan, ExactFitAndHugeCopiesDoNotWrap) {
  DoubleBufferPlan plan;
  plan.begin(512);
  EXPECT_TRUE(plan.place(512).spare);
  EXPECT_FALSE(plan.place(1).spare);
  plan.begin(512);
  EXPECT_FALSE(plan.place(~std::size_t{0} - 8).spare);
}

TEST(SpareSizer, GrowsToTheNeedUpToTheCapAndShrinksWhenCapturesShrink) {
  SpareSizer z(1000, 2);
  EXPECT_EQ(z.observe(300, 0), 300u);      // grows to the need
  EXPECT_EQ(z.observe(5000, 300), 1000u);  // never beyond the cap: the rest overflows D2H
  EXPECT_EQ(z.observe(100, 1000), 1000u);  // the window still holds 5000
  EXPECT_EQ(z.observe(100, 1000), 100u);   // two small captures: shrink, memory back to the app
  EXPECT_EQ(z.observe(80, 100), 100u);     // within half: keep (no churn)
}

TEST(SpareSizer, AFailedAllocationLowersTheCap) {
  SpareSizer z(1 << 20);
  EXPECT_EQ(z.observe(1 << 20, 0), 1u << 20);
  z.failed(1 << 20);
  EXPECT_EQ(z.cap(), 1u << 19);
  EXPECT_EQ(z.observe(1 << 20, 0), 1u << 19);
}

namespace {
std::vector<Copy2D> batch(const std::vector<std::vector<std::uint64_t>>& rows, std::uint64_t max_pitch = UINT64_MAX) {
  std::vector<Copy2D> out;
  RowBatcher b(
      [&](const Copy2D& c) {
        out.push_back(c);
        return Status::OK();
      },
      max_pitch);
  for (auto& r : rows) EXPECT_TRUE(b.add(r[0], r[1], r[2]).ok());
  EXPECT_TRUE(b.flush().ok());
  return out;
}
}  // namespace

TEST(RowBatcher, ContiguousRowsBecomeOneCopy) {
  auto c = batch({{0, 100, 8}, {8, 108, 8}, {16, 116, 8}});
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].dst, 0u);
  EXPECT_EQ(c[0].src, 100u);
  EXPECT_EQ(c[0].width, 24u);
  EXPECT_EQ(c[0].height, 1u);
}

TEST(RowBatcher, StridedRowsBecomeOne2DCopy) {
  // A 3-row box of 16 bytes out of rows of 64 (destination) and 40 (source) bytes.
  auto c = batch({{8, 0, 16}, {72, 40, 16}, {136, 80, 16}});
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].height, 3u);
  EXPECT_EQ(c[0].dpitch, 64u);
  EXPECT_EQ(c[0].spitch, 40u);
  EXPECT_EQ(c[0].width, 16u);
}

TEST(RowBatcher, PatternBreaksStartNewBatchesAndTheResultIsExact) {
  // Rows of a 3-D box: two planes of 3 rows; the jump between planes breaks the 2D pattern.
  std::vector<std::vector<std::uint64_t>> rows;
  for (std::uint64_t z = 0; z < 2; ++z)
    for (std::uint64_t y = 0; y < 3; ++y) rows.push_back({z * 1000 + y * 50, z * 96 + y * 32, 32});
  rows.push_back({5000, 500, 7});  // a different width
  auto c = batch(rows);
  ASSERT_EQ(c.size(), 3u);
  EXPECT_EQ(c[0].height, 3u);
  EXPECT_EQ(c[1].height, 3u);
  EXPECT_EQ(c[1].dst, 1000u);
  EXPECT_EQ(c[2].width, 7u);
  // Performing the batches moves exactly the bytes of the rows.
  std::vector<std::uint8_t> src(600), want(6000, 0), got(6000, 0);
  for (std::size_t i = 0; i < src.size(); ++i) src[i] = static_cast<std::uint8_t>(i * 7 + 1);
  for (auto& r : rows) std::memcpy(want.data() + r[0], src.data() + r[1], r[2]);
  for (auto& b : c) copy_rows(got.data(), src.data(), b);
  EXPECT_EQ(got, want);
}

TEST(RowBatcher, BackwardsOrOverlappingRowsAreNotMerged) {
  auto c = batch({{100, 100, 16}, {90, 116, 16}});  // destination goes backwards
  EXPECT_EQ(c.size(), 2u);
  c = batch({{0, 0, 16}, {8, 32, 16}});  // destination pitch < width
  EXPECT_EQ(c.size(), 2u);
}

TEST(RowBatcher, NoPitchAboveTheDevicesLimit) {
  // Issue 32, defect 3: f64 [4][32768][8192] in blocks of [4][32768 / k][8192] restored on one rank:
  // one row per plane, 2 GiB apart in the destination. cudaMemcpy2DAsync refuses a pitch above the
  // device's limit (2^31 - 1 on current GPUs): such rows are copies of their own.
  const std::uint64_t plane = std::uint64_t{32768} * 8192 * 8, row = plane / 256;
  std::vector<std::vector<std::uint64_t>> rows;
  for (std::uint64_t z = 0; z < 4; ++z) rows.push_back({z * plane, z * row, row});
  const std::uint64_t limit = (std::uint64_t{1} << 31) - 1;
  auto c = batch(rows, limit);
  ASSERT_EQ(c.size(), 4u);
  for (std::size_t i = 0; i < c.size(); ++i) {
    EXPECT_EQ(c[i].height, 1u);
    EXPECT_EQ(c[i].dst, i * plane);
    EXPECT_EQ(c[i].width, row);
  }
  c = batch(rows, plane);  // a limit that allows it: one 2D copy, as before
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].dpitch, plane);
  // The source pitch is capped too; a pitch equal to the limit is allowed.
  c = batch({{0, 0, 16}, {32, 4096, 16}, {64, 8192, 16}}, 4095);
  EXPECT_EQ(c.size(), 3u);
  c = batch({{0, 0, 16}, {32, 4096, 16}, {64, 8192, 16}}, 4096);
  EXPECT_EQ(c.size(), 1u);
}

TEST(DefaultDevice, WithoutAGpuTheHostDeviceOtherwiseTheError) {
  // This build or machine has no GPU: the default device is the host device, and an installed factory
  // that fails decides instead (the Runtime surfaces that in status(); see test_device_pipeline).
  auto d = make_default_device();
  if (d.ok() && std::string(d.value()->name()) != "host") GTEST_SKIP() << "a GPU is present";
  ASSERT_TRUE(d.ok()) << d.status().to_string();
  EXPECT_STREQ(d.value()->name(), "host");
  set_device_factory([](const DeviceConfig&) -> Result<std::unique_ptr<Device>> {
    return Status(Code::io_error, "cudaStreamCreateWithFlags failed");
  });
  auto r = make_runtime_device(DeviceConfig{});
  set_device_factory(nullptr);
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::io_error);
  auto back = make_runtime_device(DeviceConfig{});
  ASSERT_TRUE(back.ok());
  EXPECT_STREQ(back.value()->name(), "host");
}

// The host device's copy into staging (streaming stores from 64 KiB on x86-64): the same bytes as
// memcpy for every alignment of source and destination and every length around the thresholds, and
// nothing written outside [dst, dst + n).
TEST(HostDevice, CopyToStagingIsMemcpyForEveryAlignment) {
  const std::size_t max = (64u << 10) * 3 + 200;
  std::vector<unsigned char> src(max + 64), dst(max + 128), want(max + 128);
  for (std::size_t i = 0; i < src.size(); ++i) src[i] = static_cast<unsigned char>(i * 37 + (i >> 8));
  const std::size_t lengths[] = {
      0, 1, 63, 64, (64u << 10) - 1, 64u << 10, (64u << 10) + 1, (64u << 10) + 63, (64u << 10) * 3 + 17};
  for (std::size_t n : lengths)
    for (std::size_t so : {0, 1, 8, 15})
      for (std::size_t d_off : {0, 1, 7, 16, 33}) {
        std::fill(dst.begin(), dst.end(), 0xA5);
        want = dst;
        std::memcpy(want.data() + d_off, src.data() + so, n);
        ckpt::detail::copy_to_staging(dst.data() + d_off, src.data() + so, n);
        ASSERT_EQ(dst, want) << "n " << n << " source offset " << so << " destination offset " << d_off;
      }
}
