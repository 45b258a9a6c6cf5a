// layout: series: the segment of each checkpoint. See series.hpp.
#include "runtime/src/commit/series.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>

#include <algorithm>
#include <map>

#include "base/format.hpp"
#include "base/store.hpp"

namespace ckpt::detail {

namespace {
/// What a checkpoint adds to a rank's data file: its stream from an aligned offset.
std::uint64_t appended(std::uint64_t bytes, std::uint64_t alignment) {
  return (bytes + alignment - 1) / alignment * alignment;
}

/// Bytes the regular files directly in `dir` occupy on disk.
std::uint64_t disk_bytes(const std::string& dir) {
  std::uint64_t n = 0;
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return 0;
  while (dirent* e = ::readdir(d)) {
    struct stat st {};
    if (::fstatat(::dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode))
      n += static_cast<std::uint64_t>(st.st_blocks) * 512;
  }
  ::closedir(d);
  return n;
}

}  // namespace

bool SeriesCursor::wants_roll(std::uint64_t bytes) const {
  if (m_steps == 0) return false;  // at least one checkpoint per segment
  if (m_max_steps > 0 && m_steps >= m_max_steps) return true;
  return m_bytes + appended(bytes, m_alignment) > m_max_bytes;
}

std::string SeriesCursor::place(bool roll, std::uint64_t bytes) {
  if (roll && m_steps > 0) {
    ++m_segment;
    m_bytes = 0;
    m_steps = 0;
  }
  if (m_steps == 0) m_bytes = std::max<std::uint64_t>(m_alignment, kDataHeaderBytes);  // the file's header
  m_bytes += appended(bytes, m_alignment);
  ++m_steps;
  return segment_dir(m_root, m_segment);
}

Status check_series_space(const Store& store, int keep) {
  const std::vector<std::int64_t> steps = store.committed_steps();  // newest first
  if (keep <= 0 || steps.empty()) return Status::OK();
  auto newest = store.load_index(steps.front());
  if (!newest.ok()) return Status::OK();  // a damaged newest step: restart says so; no estimate here
  const std::uint64_t step_bytes = newest->payload_bytes();
  struct statvfs fs {};
  if (::statvfs(store.root().c_str(), &fs) != 0 || fs.f_blocks == 0) return Status::OK();  // nothing to go by
  const std::uint64_t free_bytes = static_cast<std::uint64_t>(fs.f_bavail) * fs.f_frsize;
  // Every segment's bytes on disk, and how many of the kept old steps each holds.
  std::map<std::string, std::uint64_t> bytes;
  std::map<std::string, std::size_t> kept_in;
  DIR* d = ::opendir(store.root().c_str());
  if (d == nullptr) return Status::OK();
  while (dirent* e = ::readdir(d)) {
    bool doomed = false;  // series.<k>.del: removed by recovery already
    auto k = parse_segment_name(e->d_name, &doomed);
    if (k && !doomed) bytes[segment_dir(store.root(), *k)] += disk_bytes(store.root() + "/" + e->d_name);
  }
  ::closedir(d);
  const std::size_t kept = std::min(steps.size(), static_cast<std::size_t>(keep));
  for (std::size_t k = 0; k < kept; ++k) ++kept_in[store.checkpoint_dir(steps[k])];
  std::uint64_t freed = 0;  // what retention has removed once the run committed i steps
  for (auto& [seg, b] : bytes)
    if (!kept_in.count(seg)) freed += b;  // holds no kept step: goes at the first commit
  // Commit i + 1 of the run needs its bytes beside the i before it: in the free space and the segments
  // retention removed after commit i (none before the first). With keep > the steps present, all of
  // them stay kept: the run grows as in any layout (the user asked to keep them), only the first
  // commit is checked.
  const std::size_t commits = static_cast<std::size_t>(keep) <= steps.size() ? kept : 1;
  std::size_t drop = kept;  // old steps still kept: the `drop` newest
  for (std::size_t i = 0; i < commits; ++i) {
    if (i > 0 && drop > 0) {  // commit i pushed the oldest kept old step out
      const std::string seg = store.checkpoint_dir(steps[--drop]);
      if (--kept_in[seg] == 0) freed += bytes[seg];
    }
    const std::uint64_t have = free_bytes + (i > 0 ? freed : 0), need = (i + 1) * step_bytes;
    if (need <= have) continue;
    return Status(
        Code::io_error,
        "layout series: " + store.root() + " lacks the space to continue: a segment goes only as a whole, once " +
            "none of the " + std::to_string(kept) + " kept step(s) is in it, so a run's checkpoint " +
            std::to_string(i + 1) + " (about " + human_bytes(step_bytes) + " each, the size of step " +
            std::to_string(steps.front()) + ") needs " + human_bytes(need) + " beside them, and there are " + human_bytes(have) +
            " (" + human_bytes(free_bytes) + " free" + (i > 0 ? ", " + human_bytes(freed) + " removed by retention by then" : "") +
            "); free at least " + human_bytes(need - have) +
            ", lower keep, or use another dir (the Reader and the ckpt tools read this root as it is; set "
            "segment_steps so that a few segments fit the disk)");
  }
  return Status::OK();
}

}  // namespace ckpt::detail
