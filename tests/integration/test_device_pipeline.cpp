// The pipeline against an asynchronous device, on any machine: a fake Device (installed with
// set_device_factory) behaves like a GPU whose copies land only when a fence covering them is waited
// on (or at synchronize / restore_end), reading their source and writing their destination *then*.
// A chunk released or a bounce buffer reused before its copy landed thus shows up as wrong data or as
// a recorded violation, as it would on a GPU -- which is what the review of the CUDA path found
// (issue 13): capture_end failures dropped, chunks released with copies in flight after an error, pool
// growth inside checkpoint(), ckpt threads not bound to the device, restart not ordered on a stream.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "ckpt/ckpt.hpp"
#include "gpu/device.hpp"
#include "test_util.hpp"

using namespace ckpt;
using namespace ckpt::detail;

namespace {

/// What the fake saw; shared with the test (the device itself belongs to the Runtime).
struct Record {
  std::mutex mu;
  std::vector<std::string> violations;
  std::set<std::thread::id> bound;
  std::vector<std::thread::id> waiters;
  std::vector<void*> capture_streams, restore_streams;
  std::size_t allocs = 0;
  std::size_t device_copies_to_host = 0, copies_to_device = 0, bytes_to_device = 0;
  std::thread::id app = std::this_thread::get_id();
  // Failure injection (by the test, before the call).
  int fail_copy_at = -1;  ///< the n-th device copy_to_host (0-based, counted over the device's life) fails
  int fail_fence_at = -1;
  bool fail_capture_end = false;
  bool fail_capture_begin = false;
  void violation(const std::string& v) {
    std::lock_guard<std::mutex> lk(mu);
    violations.push_back(v);
  }
};

/// Device memory of the fake: ordinary host memory that the test registers.
struct DeviceRange {
  const std::uint8_t* p;
  std::size_t n;
};

class FakeGpu final : public Device {
 public:
  FakeGpu(Record& rec, std::vector<DeviceRange> device) : m_rec(rec), m_device(std::move(device)) {}
  ~FakeGpu() override {
    if (!m_pending.empty())
      m_rec.violation("device destroyed with " + std::to_string(m_pending.size()) + " copies in flight");
  }
  const char* name() const override { return "fake-gpu"; }
  Result<MemoryKind> classify(const void* p) const override {
    for (auto& r : m_device)
      if (p >= r.p && p < r.p + r.n) return MemoryKind::device;
    return MemoryKind::host;
  }
  Result<StagingBlock> alloc_staging(std::size_t bytes) override {
    {
      std::lock_guard<std::mutex> lk(m_rec.mu);
      ++m_rec.allocs;
    }
    if (m_capturing) m_rec.violation("staging allocated during a capture (inside checkpoint())");
    auto* p = new std::uint8_t[bytes]();
    return StagingBlock{p, bytes, true, true};
  }
  void free_staging(const StagingBlock& b) override {
    std::lock_guard<std::mutex> lk(m_mu);
    for (auto& c : m_pending)
      if (overlaps(c.dst, c.n, b.ptr, b.bytes)) m_rec.violation("staging freed with a copy into it in flight");
    delete[] static_cast<std::uint8_t*>(b.ptr);
  }
  Status bind_thread() override {
    std::lock_guard<std::mutex> lk(m_rec.mu);
    if (std::this_thread::get_id() == m_rec.app) m_rec.violation("bind_thread on the application thread");
    m_rec.bound.insert(std::this_thread::get_id());
    return Status::OK();
  }
  Status capture_begin(void* stream) override {
    {
      std::lock_guard<std::mutex> lk(m_rec.mu);
      m_rec.capture_streams.push_back(stream);
    }
    if (m_rec.fail_capture_begin)
      return Status(Code::failed_precondition, "fake: the stream is being captured into a CUDA graph");
    m_capturing = true;
    return Status::OK();
  }
  Status copy_to_host(void* dst_base, const void* src_base, const Copy2D& c, MemoryKind kind) override {
    if (kind == MemoryKind::host || kind == MemoryKind::host_pinned) {
      copy_rows(dst_base, src_base, c);
      return Status::OK();
    }
    const int k = m_copies++;
    {
      std::lock_guard<std::mutex> lk(m_rec.mu);
      ++m_rec.device_copies_to_host;
    }
    if (k == m_rec.fail_copy_at) return Status(Code::io_error, "fake: cudaMemcpyAsync failed");
    auto* dst = static_cast<std::uint8_t*>(dst_base) + c.dst;
    const auto* src = static_cast<const std::uint8_t*>(src_base) + c.src;
    for (std::uint64_t row = 0; row < c.height; ++row)  // a 2D copy lands when its fence is reached, as one
      enqueue(dst + row * c.dpitch, src + row * c.spitch, c.width);
    return Status::OK();
  }
  Result<Fence> fence() override {
    if (m_fences++ == m_rec.fail_fence_at) return Status(Code::io_error, "fake: cudaEventRecord failed");
    std::lock_guard<std::mutex> lk(m_mu);
    ++m_next;
    for (auto& c : m_pending)
      if (c.fence == 0) c.fence = m_next;
    return Fence{m_next};
  }
  Status wait(Fence f) override {
    {
      std::lock_guard<std::mutex> lk(m_rec.mu);
      m_rec.waiters.push_back(std::this_thread::get_id());
      if (std::this_thread::get_id() != m_rec.app && !m_rec.bound.count(std::this_thread::get_id()))
        m_rec.violation("wait() on a ckpt thread that was never bound to the device");
    }
    land([&](const Copy& c) { return c.fence != 0 && c.fence <= f; });
    return Status::OK();
  }
  Status capture_end(void*) override {
    m_capturing = false;
    if (m_rec.fail_capture_end) return Status(Code::io_error, "fake: cudaStreamWaitEvent failed in capture_end");
    return Status::OK();
  }
  Status synchronize() override {
    land([](const Copy&) { return true; });
    return Status::OK();
  }
  Status restore_begin(void* stream) override {
    std::lock_guard<std::mutex> lk(m_rec.mu);
    m_rec.restore_streams.push_back(stream);
    return Status::OK();
  }
  Status copy_to_device(void* dst_base, const void* src_base, const Copy2D& c, MemoryKind kind) override {
    if (kind == MemoryKind::host || kind == MemoryKind::host_pinned) {
      copy_rows(dst_base, src_base, c);
      return Status::OK();
    }
    {
      std::lock_guard<std::mutex> lk(m_rec.mu);
      ++m_rec.copies_to_device;
      m_rec.bytes_to_device += c.width * c.height;
    }
    for (std::uint64_t r = 0; r < c.height; ++r)
      enqueue(static_cast<std::uint8_t*>(dst_base) + c.dst + r * c.dpitch,
              static_cast<const std::uint8_t*>(src_base) + c.src + r * c.spitch, c.width);
    return Status::OK();
  }
  Status restore_end(void* stream) override {
    {
      std::lock_guard<std::mutex> lk(m_rec.mu);
      m_rec.restore_streams.push_back(stream);
    }
    land([](const Copy&) { return true; });
    return Status::OK();
  }
  std::uint64_t max_copy_pitch() const override { return UINT64_MAX; }

 private:
  struct Copy {
    void* dst;
    const void* src;
    std::size_t n;
    Fence fence = 0;  ///< 0: no fence covers it yet
  };
  static bool overlaps(const void* a, std::size_t an, const void* b, std::size_t bn) {
    auto x = reinterpret_cast<std::uintptr_t>(a), y = reinterpret_cast<std::uintptr_t>(b);
    return x < y + bn && y < x + an;
  }
  void enqueue(void* dst, const void* src, std::size_t n) {
    std::lock_guard<std::mutex> lk(m_mu);
    for (auto& c : m_pending)
      if (overlaps(c.dst, c.n, dst, n)) m_rec.violation("a copy into memory that an earlier copy still writes");
    m_pending.push_back(Copy{dst, src, n});
  }
  /// Lands the pending copies selected by `which`: the source is read now, as a DMA engine would.
  template <class F>
  void land(F which) {
    std::lock_guard<std::mutex> lk(m_mu);
    auto it = m_pending.begin();
    while (it != m_pending.end()) {
      if (which(*it)) {
        std::memmove(it->dst, it->src, it->n);
        it = m_pending.erase(it);
      } else {
        ++it;
      }
    }
  }

  Record& m_rec;
  std::vector<DeviceRange> m_device;
  std::mutex m_mu;
  std::vector<Copy> m_pending;
  Fence m_next = 0;
  int m_copies = 0, m_fences = 0;
  bool m_capturing = false;
};

class DevicePipeline : public ::testing::Test {
 protected:
  static constexpr std::size_t kN = 300'000;  // 2.4 MB of doubles: ~10 chunks of 256 KiB
  void SetUp() override {
    dev.resize(kN);
    for (std::size_t i = 0; i < kN; ++i) dev[i] = 0.25 * static_cast<double>(i);
    set_device_factory([this](const DeviceConfig&) -> Result<std::unique_ptr<Device>> {
      return std::unique_ptr<Device>(std::make_unique<FakeGpu>(
          rec,
          std::vector<DeviceRange>{{reinterpret_cast<const std::uint8_t*>(dev.data()), dev.size() * sizeof(double)}}));
    });
  }
  void TearDown() override { set_device_factory(nullptr); }
  Options options() {
    Options o = Options::defaults();
    o.dir = ckpt::test::scratch_dir();
    o.fsync = false;
    o.chunk_bytes = 256 << 10;
    return o;
  }
  void expect_clean() {
    std::lock_guard<std::mutex> lk(rec.mu);
    EXPECT_TRUE(rec.violations.empty()) << rec.violations.size() << " violations, first: " << rec.violations[0];
  }
  std::size_t bad_values(double base) const {
    std::size_t bad = 0;
    for (std::size_t i = 0; i < kN; ++i) bad += dev[i] != base + 0.25 * static_cast<double>(i);
    return bad;
  }
  Record rec;
  std::vector<double> dev;  ///< the fake's device memory
};

}  // namespace

TEST_F(DevicePipeline, RoundTripThroughAnAsynchronousDevice) {
  void* const stream = reinterpret_cast<void*>(0xabc);
  {
    Runtime rt(MPI_COMM_WORLD, options());
    ASSERT_TRUE(rt.status().ok()) << rt.status().to_string();
    ASSERT_TRUE(rt.protect("dev", dev.data(), DType::f64, {kN}).ok());
    Ticket t = rt.checkpoint(1, stream);
    ASSERT_TRUE(t.wait().ok()) << t.wait().to_string();
    std::fill(dev.begin(), dev.end(), -1.0);
    Status s = rt.restart(1, stream);
    ASSERT_TRUE(s.ok()) << s.to_string();
  }
  EXPECT_EQ(bad_values(0), 0u);
  expect_clean();
  std::lock_guard<std::mutex> lk(rec.mu);
  EXPECT_EQ(rec.capture_streams, std::vector<void*>{stream});
  EXPECT_EQ(rec.restore_streams, (std::vector<void*>{stream, stream})) << "restore_begin and restore_end";
  EXPECT_GT(rec.device_copies_to_host, 5u);
}

TEST_F(DevicePipeline, CkptThreadsAreBoundBeforeWaitingAndTheAppThreadNever) {
  {
    Runtime rt(MPI_COMM_WORLD, options());
    ASSERT_TRUE(rt.protect("dev", dev.data(), DType::f64, {kN}).ok());
    ASSERT_TRUE(rt.checkpoint(1).wait().ok());
  }
  expect_clean();  // "wait() on a ckpt thread that was never bound" / "bind_thread on the application thread"
  std::lock_guard<std::mutex> lk(rec.mu);
  EXPECT_FALSE(rec.bound.empty());
  EXPECT_FALSE(rec.waiters.empty());
}

TEST_F(DevicePipeline, ACaptureEndFailureFailsTheCheckpoint) {
  Runtime rt(MPI_COMM_WORLD, options());
  ASSERT_TRUE(rt.protect("dev", dev.data(), DType::f64, {kN}).ok());
  rec.fail_capture_end = true;  // the application's stream could not be ordered after the copies
  Status s = rt.checkpoint(1).wait();
  EXPECT_FALSE(s.ok()) << "the checkpoint was committed although its capture failed";
  EXPECT_NE(s.message().find("capture_end"), std::string::npos) << s.to_string();
  EXPECT_EQ(s.code(), Code::io_error) << s.to_string();  // the fake's capture_end code, kept
  EXPECT_EQ(ckpt::test::newest_step(rt), -1);
  rec.fail_capture_end = false;
  ASSERT_TRUE(rt.checkpoint(2).wait().ok());
  EXPECT_EQ(ckpt::test::newest_step(rt), 2);
  ASSERT_TRUE(rt.close().ok());
  expect_clean();
}

TEST_F(DevicePipeline, ACopyFailureMidCaptureLetsNoCopyLandInAReusedChunk) {
  Runtime rt(MPI_COMM_WORLD, options());
  // Ten regions of 240 KB in 256 KiB chunks: most chunks take two copies, so the failing copy 5 finds
  // copy 4 into the same chunk still in flight.
  for (int i = 0; i < 10; ++i)
    ASSERT_TRUE(rt.protect("dev" + std::to_string(i), dev.data() + i * (kN / 10), DType::f64, {kN / 10}).ok());
  rec.fail_copy_at = 5;
  EXPECT_FALSE(rt.checkpoint(1).wait().ok());
  for (auto& x : dev) x += 1000.0;  // different data for the next checkpoint
  ASSERT_TRUE(rt.checkpoint(2).wait().ok());
  std::fill(dev.begin(), dev.end(), -1.0);
  ASSERT_TRUE(rt.restart(2).ok());
  EXPECT_EQ(bad_values(1000.0), 0u) << "a stale copy of checkpoint 1 landed in a chunk of checkpoint 2";
  ASSERT_TRUE(rt.close().ok());
  expect_clean();
}

TEST_F(DevicePipeline, AFenceFailureStillDrainsTheCopiesBeforeTheChunkIsReused) {
  Runtime rt(MPI_COMM_WORLD, options());
  ASSERT_TRUE(rt.protect("dev", dev.data(), DType::f64, {kN}).ok());
  rec.fail_fence_at = 2;
  EXPECT_FALSE(rt.checkpoint(1).wait().ok());
  for (auto& x : dev) x += 500.0;
  ASSERT_TRUE(rt.checkpoint(2).wait().ok());
  std::fill(dev.begin(), dev.end(), -1.0);
  ASSERT_TRUE(rt.restart(2).ok());
  EXPECT_EQ(bad_values(500.0), 0u);
  ASSERT_TRUE(rt.close().ok());
  expect_clean();
}

TEST_F(DevicePipeline, ARejectedStreamFailsTheCheckpointAndTheNextOneWorks) {
  Runtime rt(MPI_COMM_WORLD, options());
  ASSERT_TRUE(rt.protect("dev", dev.data(), DType::f64, {kN}).ok());
  rec.fail_capture_begin = true;
  Status s = rt.checkpoint(1).wait();
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.code(), Code::failed_precondition) << "the device's code, not the commit's io_error: " << s.to_string();
  // The device's message, whichever way it reached the ticket (the capture's own failure, or the
  // write thread's agreement on it, which names the rank).
  EXPECT_NE(s.message().find("fake: the stream is being captured"), std::string::npos) << s.to_string();
  rec.fail_capture_begin = false;
  ASSERT_TRUE(rt.checkpoint(2).wait().ok());
  ASSERT_TRUE(rt.close().ok());
  expect_clean();
}

TEST_F(DevicePipeline, StagingIsReservedOutsideCheckpoint) {
  Runtime rt(MPI_COMM_WORLD, options());
  ASSERT_TRUE(rt.protect("dev", dev.data(), DType::f64, {kN}).ok());
  std::size_t before = 0;
  {
    std::lock_guard<std::mutex> lk(rec.mu);
    before = rec.allocs;
  }
  EXPECT_GT(before, 0u) << "protect() reserves the staging pool";
  for (int step = 1; step <= 3; ++step) ASSERT_TRUE(rt.checkpoint(step).wait().ok());
  {
    std::lock_guard<std::mutex> lk(rec.mu);
    EXPECT_EQ(rec.allocs, before) << "checkpoint() allocated staging memory";
  }
  ASSERT_TRUE(rt.close().ok());
  expect_clean();
}

TEST_F(DevicePipeline, RestartBatchesRowsAndOverlapsReadsWithCopies) {
  // A 2-D Block restart: the box is a strided window of the stored block, so each piece of it must be
  // one 2-D copy, not one copy per row; small chunks force many bounce pieces (two bounce chunks in
  // turn: a bounce reused before its copies landed gives wrong data with this device).
  constexpr std::uint64_t rows = 600, cols = 500;
  ASSERT_LE(rows * cols, kN);
  Options o = options();
  o.chunk_bytes = 64 << 10;
  Block b{{rows, cols}, {0, 0}, {rows, cols}};
  {
    Runtime rt(MPI_COMM_WORLD, o);
    ASSERT_TRUE(rt.protect("a", dev.data(), DType::f64, b).ok());
    ASSERT_TRUE(rt.checkpoint(1).wait().ok());
  }
  std::vector<double> want(dev.begin(), dev.begin() + rows * cols);
  std::fill(dev.begin(), dev.end(), -1.0);
  {
    Runtime rt(MPI_COMM_WORLD, o);
    // Restart only a window: rows 100..399, columns 50..449, into a compact (300 x 400) array.
    Block w{{rows, cols}, {100, 50}, {300, 400}};
    ASSERT_TRUE(rt.protect("a", dev.data(), DType::f64, w).ok());
    ASSERT_TRUE(rt.restart(1).ok());
  }
  std::size_t bad = 0;
  for (std::uint64_t r = 0; r < 300; ++r)
    for (std::uint64_t c = 0; c < 400; ++c) bad += dev[r * 400 + c] != want[(r + 100) * cols + (c + 50)];
  EXPECT_EQ(bad, 0u);
  expect_clean();
  std::lock_guard<std::mutex> lk(rec.mu);
  EXPECT_EQ(rec.bytes_to_device, 300u * 400u * sizeof(double));
  EXPECT_LT(rec.copies_to_device, 300u / 4) << "rows were not batched into 2-D copies";
}

TEST_F(DevicePipeline, AMemorySelectionIsCapturedInTwoDCopiesAndRestoredIntoItsBox) {
  // The 480 x 400 interior at (60, 50) of a 600 x 500 allocation in device memory: each chunk piece of
  // it is one 2-D copy (the fake lands them only when their fence is reached, so a chunk handed over
  // before its copies landed would be written with stale data), and restart writes the box only.
  constexpr std::uint64_t rows = 600, cols = 500, r0 = 60, c0 = 50, br = 480, bc = 400;
  ASSERT_LE(rows * cols, kN);
  Options o = options();
  o.chunk_bytes = 64 << 10;
  const MemorySelection sel{{r0, c0}, {rows, cols}};
  {
    Runtime rt(MPI_COMM_WORLD, o);
    ASSERT_TRUE(rt.protect("a", dev.data(), DType::f64, {br, bc}).ok());
    ASSERT_TRUE(rt.set_memory_selection("a", sel).ok());
    Status s = rt.checkpoint(1).wait();
    ASSERT_TRUE(s.ok()) << s.to_string();
    std::lock_guard<std::mutex> lk(rec.mu);
    EXPECT_LT(rec.device_copies_to_host, br / 4) << "rows were not batched into 2-D copies";
  }
  std::fill(dev.begin(), dev.end(), -1.0);
  {
    Runtime rt(MPI_COMM_WORLD, o);
    ASSERT_TRUE(rt.protect("a", dev.data(), DType::f64, {br, bc}).ok());
    ASSERT_TRUE(rt.set_memory_selection("a", sel).ok());
    Status s = rt.restart(1);
    ASSERT_TRUE(s.ok()) << s.to_string();
  }
  std::size_t bad_box = 0, bad_ghost = 0;
  for (std::uint64_t r = 0; r < rows; ++r)
    for (std::uint64_t c = 0; c < cols; ++c) {
      const double got = dev[r * cols + c];
      if (r >= r0 && r < r0 + br && c >= c0 && c < c0 + bc)
        bad_box += got != 0.25 * static_cast<double>(r * cols + c);
      else
        bad_ghost += got != -1.0;
    }
  EXPECT_EQ(bad_box, 0u);
  EXPECT_EQ(bad_ghost, 0u) << "restart wrote outside the box";
  expect_clean();
  std::lock_guard<std::mutex> lk(rec.mu);
  EXPECT_EQ(rec.bytes_to_device, br * bc * sizeof(double));
  EXPECT_LT(rec.copies_to_device, br / 4) << "restart rows were not batched into 2-D copies";
}

TEST(DeviceStart, AGpuThatFailsToStartIsAnErrorNotTheHostDevice) {
  set_device_factory([](const DeviceConfig&) -> Result<std::unique_ptr<Device>> {
    return Status(Code::io_error, "CUDA device 0: cudaStreamCreateWithFlags failed: cudaErrorDevicesUnavailable");
  });
  Options o = Options::defaults();
  o.dir = ckpt::test::scratch_dir();
  Runtime rt(MPI_COMM_WORLD, o);
  set_device_factory(nullptr);
  EXPECT_EQ(rt.status().code(), Code::io_error) << rt.status().to_string();
  EXPECT_NE(rt.status().message().find("cudaErrorDevicesUnavailable"), std::string::npos);
  double x = 1;
  EXPECT_FALSE(rt.protect_scalar("x", &x).ok());
  EXPECT_FALSE(rt.checkpoint(1).wait().ok());
}
