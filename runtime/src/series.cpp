// layout: series: the segment of each checkpoint. See series.hpp.
#include "runtime/src/series.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>

#include <algorithm>
#include <set>

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

std::string mib(std::uint64_t b) {
  char buf[32];
  if (b < (1u << 20))
    std::snprintf(buf, sizeof buf, "%.1f KiB", static_cast<double>(b) / 1024);
  else
    std::snprintf(buf, sizeof buf, "%.1f MiB", static_cast<double>(b) / (1 << 20));
  return buf;
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
  std::uint64_t step_bytes = 0;
  for (const BlockRecord& b : newest->blocks) step_bytes += b.length;
  std::set<std::string> kept;  // segments holding one of the `keep` newest steps
  for (std::size_t i = 0; i < steps.size() && i < static_cast<std::size_t>(keep); ++i)
    kept.insert(store.checkpoint_dir(steps[i]));
  std::uint64_t kept_bytes = 0, other_bytes = 0;
  DIR* d = ::opendir(store.root().c_str());
  if (d == nullptr) return Status::OK();
  while (dirent* e = ::readdir(d)) {
    if (!parse_segment_name(e->d_name)) continue;
    const std::string seg = segment_dir(store.root(), *parse_segment_name(e->d_name));
    (kept.count(seg) ? kept_bytes : other_bytes) += disk_bytes(store.root() + "/" + e->d_name);
  }
  ::closedir(d);
  struct statvfs fs {};
  if (::statvfs(store.root().c_str(), &fs) != 0) return Status::OK();  // nothing to go by
  const std::uint64_t free_bytes = static_cast<std::uint64_t>(fs.f_bavail) * fs.f_frsize;
  const std::uint64_t needed = static_cast<std::uint64_t>(keep) * step_bytes;
  if (free_bytes >= step_bytes && free_bytes + other_bytes >= needed) return Status::OK();
  // The larger deficit: the first checkpoint in the free space, all `keep` in it and the reclaimable.
  const std::uint64_t short_first = step_bytes > free_bytes ? step_bytes - free_bytes : 0;
  const std::uint64_t short_all = needed > free_bytes + other_bytes ? needed - free_bytes - other_bytes : 0;
  return Status(Code::io_error,
                "layout series: " + store.root() + " lacks the space to continue: the segments holding the " +
                    std::to_string(keep) + " kept step(s) (" + mib(kept_bytes) +
                    ") are removed only once a new segment holds keep (" + std::to_string(keep) +
                    ") checkpoints of about " + mib(step_bytes) + " (the size of step " +
                    std::to_string(steps.front()) + "), " + mib(needed) + " in all, the first in the free space (" +
                    mib(free_bytes) + " free, " + mib(other_bytes) +
                    " more once retention removes the segments holding no kept step); free at least " +
                    mib(std::max(short_first, short_all)) +
                    ", lower keep, or use another dir (the Reader and the ckpt tools read this root as it is)");
}

}  // namespace ckpt::detail
