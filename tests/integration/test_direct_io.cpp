// Option direct_io (issue 15): the posix transport writes checkpoint data with O_DIRECT from the
// staging chunks. Checked at 2 ranks, in both layouts, on and off: restarts bit for bit with stream
// lengths that are no multiple of 4 KiB and with an alignment (64) that rules O_DIRECT out, and the
// data pages of a checkpoint written with direct_io do not stay in the page cache (they went around it).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <string>
#include <vector>

#include "base/posix_io.hpp"
#include "ckpt/ckpt.hpp"
#include "test_util.hpp"

using namespace ckpt;
using ckpt::test::all_true;
using ckpt::test::resident_pages;
using ckpt::test::scratch_dir;
using ckpt::test::world_rank;

namespace {

/// A state of two regions whose stream is no multiple of 4 KiB: bytes and doubles, per rank and step.
struct State {
  std::vector<std::uint8_t> bytes = std::vector<std::uint8_t>(1000003);
  std::vector<double> values = std::vector<double>(300001);
  void fill(std::int64_t step) {  // in place: the registered memory stays where it is
    const int r = world_rank();
    for (std::size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<std::uint8_t>(i * 7 + step * 13 + r);
    for (std::size_t i = 0; i < values.size(); ++i) values[i] = static_cast<double>(step) * 1e7 + r * 1e6 + i;
  }
  bool holds(std::int64_t step) const {
    State want;
    want.fill(step);
    return bytes == want.bytes && values == want.values;
  }
};

/// Three checkpoints, then a restart of each (newest first), bit for bit.
void round_trip(const Options& o) {
  Runtime rt(MPI_COMM_WORLD, o);
  ASSERT_TRUE(rt.status().ok()) << rt.status().to_string();
  State s;
  ASSERT_TRUE(rt.protect("bytes", s.bytes.data(), DType::u8, {s.bytes.size()}).ok());
  ASSERT_TRUE(rt.protect("values", s.values.data(), DType::f64, {s.values.size()}).ok());
  for (std::int64_t step = 0; step < 3; ++step) {
    s.fill(step);
    Ticket t = rt.checkpoint(step);
    ASSERT_TRUE(t.wait().ok()) << t.wait().to_string();
  }
  for (std::int64_t step = 2; step >= 0; --step) {
    s.fill(99);
    Status r = rt.restart(step);
    ASSERT_TRUE(r.ok()) << r.to_string();
    EXPECT_TRUE(all_true(s.holds(step))) << "step " << step;
  }
  ASSERT_TRUE(rt.close().ok());
}

Options opts(const std::string& dir, bool direct, bool series) {
  Options o = Options::defaults();
  o.dir = dir;
  o.keep = 10;
  o.direct_io = direct;
  if (series) o.layout = Options::Layout::series;
  return o;
}

}  // namespace

TEST(DirectIo, RoundTripsInBothLayoutsOnAndOff) {
  for (bool series : {false, true})
    for (bool direct : {true, false}) {
      SCOPED_TRACE(std::string(series ? "series" : "directory") + (direct ? ", direct_io" : ", page cache"));
      round_trip(opts(scratch_dir(std::string(series ? ".series" : ".dir") + (direct ? ".direct" : ".cached")), direct,
                      series));
    }
}

TEST(DirectIo, AnAlignmentBelow4KiBFallsBackToThePageCache) {
  Options o = opts(scratch_dir(), true, false);
  o.alignment = 64;  // the data starts at offset 64 + header: no O_DIRECT write is possible
  round_trip(o);
}

TEST(DirectIo, DataPagesGoAroundThePageCache) {
  const std::string dir = scratch_dir();
  {
    const std::string probe = dir + "/probe." + std::to_string(world_rank());
    const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT, 0644);
    ASSERT_GE(fd, 0);
    ::close(fd);
    const int dfd = ckpt::detail::open_direct(probe);
    const bool supported = dfd >= 0;
    if (supported) ::close(dfd);
    ::unlink(probe.c_str());
    if (!all_true(supported)) GTEST_SKIP() << "the file system of " << dir << " refuses O_DIRECT (tmpfs?)";
  }
  for (bool direct : {true, false}) {
    Options o = opts(dir + (direct ? "/direct" : "/cached"), direct, false);
    Runtime rt(MPI_COMM_WORLD, o);
    ASSERT_TRUE(rt.status().ok()) << rt.status().to_string();
    std::vector<double> v(1 << 20, 1.0 + world_rank());  // 8 MiB
    ASSERT_TRUE(rt.protect("v", v.data(), DType::f64, {v.size()}).ok());
    ASSERT_TRUE(rt.checkpoint(1).wait().ok());
    std::size_t pages = 0;
    const std::size_t resident = resident_pages(o.dir + "/ckpt.1/data." + std::to_string(world_rank()), &pages);
    ASSERT_GE(pages, 2048u);
    // With direct_io only the header's page and a partial last page go through the page cache (a few
    // more are tolerated); without it the pages stay cached after the fdatasync (most of them).
    if (direct)
      EXPECT_LE(resident, pages / 16) << "of " << pages << " pages";
    else
      EXPECT_GE(resident, pages / 2) << "of " << pages << " pages";
    ASSERT_TRUE(rt.close().ok());
  }
}
