// Security of what ckpt writes (issue 9): files and directories are created with the process umask
// (mode 0666/0777 & ~umask, never wider), and links planted in the checkpoint directory are never
// followed: `latest` and `latest.tmp` are replaced, not written through, and a temporary checkpoint
// directory that is a symbolic link makes the checkpoint fail instead of writing elsewhere.
// (Names in an index that would leave the checkpoint directory are rejected by decode_index:
// tests/unit/test_format.cpp; names given to protect(): tests/integration/test_roundtrip.cpp.)
#include <dirent.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

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

Options opts(const std::string& dir, const std::string& transport) {
  Options o = Options::defaults();
  o.dir = dir;
  o.transport = transport;
  o.keep = 3;
  return o;
}

/// Every entry under `dir` (recursively), with lstat's mode.
void walk(const std::string& dir, std::vector<std::pair<std::string, mode_t>>& out) {
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return;
  while (dirent* e = ::readdir(d)) {
    if (!std::strcmp(e->d_name, ".") || !std::strcmp(e->d_name, "..")) continue;
    const std::string p = dir + "/" + e->d_name;
    struct stat st {};
    if (::lstat(p.c_str(), &st) != 0) continue;
    out.emplace_back(p, st.st_mode);
    if (S_ISDIR(st.st_mode)) walk(p, out);
  }
  ::closedir(d);
}

std::string slurp_text(const std::string& path) {
  auto b = detail::read_file(path, 1 << 20);
  return b.ok() ? std::string(b->begin(), b->end()) : std::string("<unreadable>");
}

class Security : public ::testing::TestWithParam<std::string> {};

TEST_P(Security, FilesFollowTheUmask) {
  const mode_t old = ::umask(027);
  const std::string dir = scratch_dir("-" + GetParam());
  {
    Runtime rt(MPI_COMM_WORLD, opts(dir + "/run", GetParam()));
    ASSERT_TRUE(all_true(rt.status().ok())) << rt.status().to_string();
    std::vector<double> x(1000, world_rank());
    ASSERT_TRUE(
        rt.protect("x", x.data(), DType::f64, Block{{1000ull * world_size()}, {1000ull * world_rank()}, {1000}}).ok());
    ASSERT_TRUE(rt.checkpoint(1).wait().ok());
    EXPECT_TRUE(rt.close().ok());
  }
  ::umask(old);
  if (world_rank() == 0) {
    std::vector<std::pair<std::string, mode_t>> all;
    walk(dir + "/run", all);
    EXPECT_GE(all.size(), 3u);  // ckpt.1, its index and at least one data file
    for (auto& [path, mode] : all) {
      if (S_ISLNK(mode)) continue;  // `latest`: a link's own mode is not used
      EXPECT_EQ(mode & 027, 0u) << path << " has mode " << std::oct << (mode & 0777) << " despite umask 027";
    }
  }
}

TEST_P(Security, PlantedLinksAreNotFollowed) {
  const std::string dir = scratch_dir("-" + GetParam());
  const std::string run = dir + "/run", victim = dir + "/victim";
  if (world_rank() == 0) {
    ASSERT_TRUE(detail::make_dirs(run).ok());
    ASSERT_TRUE(detail::make_dirs(victim + "/dir").ok());
    ASSERT_TRUE(detail::make_dirs(victim + "/keep").ok());
    ASSERT_TRUE(detail::write_file(victim + "/file", "precious", 8, false).ok());
    ASSERT_TRUE(detail::write_file(victim + "/keep/file", "precious", 8, false).ok());
    // `latest` points at a directory outside, `latest.tmp` at a file outside, and ckpt.7.tmp (what a
    // dead run leaves, removed when a Runtime starts) at a directory outside.
    ASSERT_EQ(::symlink((victim + "/dir").c_str(), (run + "/latest").c_str()), 0);
    ASSERT_EQ(::symlink((victim + "/file").c_str(), (run + "/latest.tmp").c_str()), 0);
    ASSERT_EQ(::symlink((victim + "/keep").c_str(), (run + "/ckpt.7.tmp").c_str()), 0);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  Runtime rt(MPI_COMM_WORLD, opts(run, GetParam()));
  ASSERT_TRUE(all_true(rt.status().ok())) << rt.status().to_string();
  std::vector<double> x(1000, 1.5 + world_rank());
  ASSERT_TRUE(
      rt.protect("x", x.data(), DType::f64, Block{{1000ull * world_size()}, {1000ull * world_rank()}, {1000}}).ok());

  ASSERT_TRUE(rt.checkpoint(1).wait().ok());
  // The next temporary directory is planted as a link to a directory outside.
  if (world_rank() == 0) EXPECT_EQ(::symlink((victim + "/dir").c_str(), (run + "/ckpt.2.tmp").c_str()), 0);
  MPI_Barrier(MPI_COMM_WORLD);
  Status s2 = rt.checkpoint(2).wait();
  EXPECT_FALSE(s2.ok()) << "checkpoint 2 wrote through the planted link ckpt.2.tmp";
  EXPECT_NE(s2.message().find("symbolic link"), std::string::npos) << s2.to_string();
  EXPECT_EQ(ckpt::test::newest_step(rt), 1);

  if (world_rank() == 0) {
    EXPECT_EQ(slurp_text(victim + "/file"), "precious");
    EXPECT_EQ(slurp_text(victim + "/keep/file"), "precious") << "removing the stale ckpt.7.tmp followed the link";
    struct stat st {};
    EXPECT_NE(::lstat((run + "/ckpt.7.tmp").c_str(), &st), 0) << "the stale link ckpt.7.tmp was not removed";
    std::vector<std::pair<std::string, mode_t>> in_victim;
    walk(victim + "/dir", in_victim);
    EXPECT_TRUE(in_victim.empty()) << "something was written into the directory a planted link points at: "
                                   << in_victim.front().first;
    char target[256] = {};
    const ssize_t n = ::readlink((run + "/latest").c_str(), target, sizeof target - 1);
    EXPECT_GT(n, 0);
    EXPECT_STREQ(target, "ckpt.1") << "`latest` must be a new link to the checkpoint";
  }
  // With the planted link gone the next checkpoint commits.
  if (world_rank() == 0) ::unlink((run + "/ckpt.2.tmp").c_str());
  MPI_Barrier(MPI_COMM_WORLD);
  EXPECT_TRUE(rt.checkpoint(3).wait().ok());
  EXPECT_TRUE(rt.close().ok());
}

INSTANTIATE_TEST_SUITE_P(Transports, Security, ::testing::Values("posix", "mpiio", "rbio"));

}  // namespace
