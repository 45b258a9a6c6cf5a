// DirLock: flock() on <dir>/.lock; the holder's pid and host are written into the file for the message.
#include "runtime/src/commit/dir_lock.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <dirent.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <optional>

#include "base/hash.hpp"
#include "base/posix_io.hpp"
#include "base/store.hpp"

namespace ckpt::detail {

Status DirLock::acquire(const std::string& dir, std::uint64_t token) {
  release();
  const std::string path = dir + "/" + kLockName;
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0644);
  if (fd < 0) {
    const int e = errno;
    return Status(Code::io_error, "cannot open the directory lock " + path + ": " + std::strerror(e) +
                                      (e == ELOOP ? " (it is a symbolic link)" : ""));
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return Status(Code::io_error, "the directory lock " + path + " is not a regular file");
  }
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    const int e = errno;
    char holder[256] = {};
    const ssize_t n = ::pread(fd, holder, sizeof holder - 1, 0);
    ::close(fd);
    if (e != EWOULDBLOCK) return Status(Code::io_error, "cannot lock " + path + ": " + std::strerror(e));
    std::string who = n > 0 ? std::string(holder, static_cast<std::size_t>(n)) : std::string("unknown");
    while (!who.empty() && (who.back() == '\n' || who.back() == '\0')) who.pop_back();
    return Status(Code::failed_precondition, "checkpoint directory " + dir +
                                                 " is in use by another live job or Runtime (" + who + "; lock file " +
                                                 path + "): give each job a directory of its own");
  }
  char host[128] = {};
  ::gethostname(host, sizeof host - 1);
  const std::string me =
      "pid " + std::to_string(::getpid()) + " on host " + host + " run " + std::to_string(token) + "\n";
  // The text names the holder for a job that finds the lock held, and proves to the other ranks that
  // they see this very directory: synced, so that another node's client reads it (NFS: close-to-open).
  const bool written = ::ftruncate(fd, 0) == 0 && ::pwrite(fd, me.data(), me.size(), 0) == static_cast<ssize_t>(me.size()) &&
                       ::fsync(fd) == 0;
  if (!written) {
    const int e = errno;
    ::close(fd);
    return Status(Code::io_error, "cannot write the directory lock " + path + ": " + std::strerror(e));
  }
  m_fd = fd;
  m_text = me;
  return Status::OK();
}

Status same_directory(const std::string& dir, const std::string& text) {
  const std::string path = dir + "/.lock";
  const std::string advice =
      ": option 'dir' must name one directory on a file system every rank shares (for storage on each node, "
      "use local_dir)";
  const int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0)
    return Status(Code::failed_precondition, "the checkpoint directory " + dir +
                                                 " that rank 0 created is not visible here (" + path + ": " +
                                                 std::strerror(errno) + ")" + advice);
  char buf[512] = {};
  const ssize_t n = ::pread(fd, buf, sizeof buf - 1, 0);
  ::close(fd);
  if (n < 0 || std::string(buf, static_cast<std::size_t>(n)) != text)
    return Status(Code::failed_precondition,
                  "the checkpoint directory " + dir + " is not the one rank 0 created: " + path + " holds another job's lock" +
                      advice);
  return Status::OK();
}

void DirLock::release() {
  if (m_fd < 0) return;
  ::flock(m_fd, LOCK_UN);
  ::close(m_fd);
  m_fd = -1;
  m_text.clear();
}

namespace {

constexpr std::uint64_t kMaxMarkerBytes = 64 << 10;

std::string hex16(std::uint64_t v) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

/// 16 lowercase hex digits at `text[pos]`, or nothing.
std::optional<std::uint64_t> parse_hex16(const std::string& text, std::size_t pos) {
  if (text.size() < pos + 16) return std::nullopt;
  std::uint64_t v = 0;
  for (std::size_t i = pos; i < pos + 16; ++i) {
    const char c = text[i];
    const int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
    if (d < 0) return std::nullopt;
    v = v << 4 | static_cast<std::uint64_t>(d);
  }
  return v;
}

/// Creates `path` holding `text`, whole or not at all (a crash must not leave a torn marker, which
/// would be refused as damaged from then on): written to `<path>.tmp` (O_NOFOLLOW, fsynced), then
/// hard-linked to `path`, which fails when `path` exists (`*existed` is set: another creator won, the
/// caller reads its file); a file system without hard links gets a rename. The directory is fsynced.
Status create_marker(const std::string& dir, const std::string& path, const std::string& text, bool* existed) {
  *existed = false;
  const std::string tmp = path + ".tmp";
  Status s = write_file(tmp, text.data(), text.size(), true);
  if (!s.ok()) return s;
  if (::link(tmp.c_str(), path.c_str()) != 0) {
    const int e = errno;
    if (e == EEXIST) {
      *existed = true;
      ::unlink(tmp.c_str());
      return Status(Code::failed_precondition, path + " exists");
    }
    if (e != EPERM && e != EOPNOTSUPP && e != ENOSYS) return errno_status("link " + tmp + " to " + path);
    if (::rename(tmp.c_str(), path.c_str()) != 0) return errno_status("rename " + tmp + " to " + path);
  } else if (::unlink(tmp.c_str()) != 0) {
    return errno_status("remove " + tmp);
  }
  return fsync_dir(dir, true);
}

/// The text of a marker file: not_found when there is none; failed_precondition when it is a link,
/// not a regular file or too long (`what` names it in the message).
Result<std::string> read_marker(const std::string& path, const std::string& what) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) return Status(Code::not_found, path + " does not exist");
    return errno_status("stat " + path);
  }
  if (!S_ISREG(st.st_mode))
    return Status(Code::failed_precondition, what + " " + path + " is not a regular file (" +
                                                 (S_ISLNK(st.st_mode) ? "a symbolic link" : "another kind of entry") +
                                                 "); not followed");
  auto bytes = read_file(path, kMaxMarkerBytes);
  if (!bytes.ok())
    return Status(Code::failed_precondition, what + " " + path + " cannot be read: " + bytes.status().message());
  return std::string(bytes->begin(), bytes->end());
}

/// The id of a one-line marker that is exactly `<prefix><16 hex digits>\n`, or nothing.
std::optional<std::uint64_t> parse_id_line(const std::string& t, const std::string& prefix) {
  if (t.size() != prefix.size() + 17 || t.compare(0, prefix.size(), prefix) != 0 || t.back() != '\n')
    return std::nullopt;
  return parse_hex16(t, prefix.size());
}

/// Replaces the marker `path` in `dir` by `text`: `<path>.tmp` (O_NOFOLLOW, fsynced when `sync`),
/// renamed over it, the directory fsynced - whole or the old one after a crash.
Status replace_marker(const std::string& dir, const std::string& path, const std::string& text, bool sync) {
  const std::string tmp = path + ".tmp";
  Status s = write_file(tmp, text.data(), text.size(), sync);
  if (s.ok() && ::rename(tmp.c_str(), path.c_str()) != 0) s = errno_status("rename " + tmp + " to " + path);
  if (s.ok()) s = fsync_dir(dir, sync);
  return s;
}

}  // namespace

Result<std::uint64_t> root_id(const std::string& dir, bool* created) {
  *created = false;
  const std::string path = dir + "/" + kRootIdName;
  const std::string prefix = "ckpt root ";
  for (int attempt = 0; attempt < 2; ++attempt) {
    auto text = read_marker(path, "the root's identity");
    if (text.ok()) {
      auto id = parse_id_line(text.value(), prefix);
      if (!id)
        return Status(
            Code::failed_precondition,
            "the root's identity " + path +
                " is damaged (not 'ckpt root <16 hex digits>'): the node-local "
                "directories cannot be matched to this root; restore the file, or remove it and the node-local "
                "directories made with this root");
      return *id;
    }
    if (text.status().code() != Code::not_found) return text.status();
    std::uint64_t id = 0;
    while (id == 0) id = random64();
    bool existed = false;
    Status s = create_marker(dir, path, prefix + hex16(id) + "\n", &existed);
    if (s.ok()) *created = true;
    if (s.ok()) return id;
    if (!existed) return s.with_context("the root's identity");
  }
  return Status(Code::io_error, "cannot create or read the root's identity " + path);
}

Status bind_node_dir(const std::string& node_dir, std::uint64_t id, const std::string& root, bool created) {
  struct stat st {};
  if (::lstat(node_dir.c_str(), &st) != 0) return errno_status("stat node-local directory " + node_dir);
  if (!S_ISDIR(st.st_mode))
    return Status(Code::failed_precondition,
                  "the node-local directory " + node_dir + " is " +
                      (S_ISLNK(st.st_mode) ? "a symbolic link" : "not a directory") +
                      ": not followed, nothing is written through it (remove it, or give the job another local_dir)");
  const std::string path = node_dir + "/" + kOwnerName;
  const std::string prefix = "ckpt node of root ";
  const std::string way_out = ": it is not read as this job's state and is left as it is; remove " + node_dir +
                              " (after saving what it holds) or give this job another local_dir";
  auto text = read_marker(path, "the node-local directory's owner");
  if (text.ok()) {
    const std::string& t = text.value();
    auto owner = t.compare(0, prefix.size(), prefix) == 0 && t.size() > prefix.size() + 17 &&
                         t[prefix.size() + 16] == ' ' && t.back() == '\n'
                     ? parse_hex16(t, prefix.size())
                     : std::nullopt;
    if (!owner)
      return Status(Code::failed_precondition, "the node-local directory " + node_dir + " has a damaged " + kOwnerName +
                                                   " (not 'ckpt node of root <id> <path>')" + way_out);
    if (*owner == id) return Status::OK();
    const std::string other = t.substr(prefix.size() + 17, t.size() - prefix.size() - 18);
    if (created && other == root)  // this root at this path lost its `.root`: its nodes are still its own
      return replace_marker(node_dir, path, prefix + hex16(id) + " " + root + "\n", true)
          .with_context("binding the node-local directory to its root");
    return Status(Code::failed_precondition, "the node-local directory " + node_dir + " belongs to the root " + other +
                                                 " (root id " + hex16(*owner) + "), not to this job's root " + root +
                                                 " (root id " + hex16(id) + ")" + way_out);
  }
  if (text.status().code() != Code::not_found) return text.status();
  // No owner: a directory holding checkpoints was made by an earlier build or planted.
  DIR* d = ::opendir(node_dir.c_str());
  if (d == nullptr) return errno_status("open directory " + node_dir);
  std::string found;
  while (dirent* e = ::readdir(d))
    if (parse_step_name(e->d_name)) {
      found = e->d_name;
      break;
    }
  ::closedir(d);
  if (!found.empty())
    return Status(Code::failed_precondition, "the node-local directory " + node_dir + " holds " + found + " but no " +
                                                 kOwnerName +
                                                 " naming its root (made by an earlier "
                                                 "version of ckpt, or planted)" +
                                                 way_out);
  bool existed = false;
  Status s = create_marker(node_dir, path, prefix + hex16(id) + " " + root + "\n", &existed);
  if (existed) return bind_node_dir(node_dir, id, root, created);  // written meanwhile: check it
  return s.with_context("binding the node-local directory to its root");
}

}  // namespace ckpt::detail

namespace ckpt::detail {

namespace {

/// A line of the timeline record: `run <id> bound` or `run <id> from <step>` (docs/format.md).
struct TimelineLine {
  std::uint64_t run = 0;
  std::optional<std::int64_t> from;  ///< nothing: a `bound` line
};

std::optional<TimelineLine> parse_timeline_line(const std::string& l) {
  const std::string run = "run ";
  if (l.compare(0, run.size(), run) != 0 || l.size() < run.size() + 17 || l[run.size() + 16] != ' ')
    return std::nullopt;
  auto id = parse_hex16(l, run.size());
  if (!id) return std::nullopt;
  const std::string rest = l.substr(run.size() + 17);
  if (rest == "bound") return TimelineLine{*id, std::nullopt};
  // A step as step_name() writes it (any of 0..INT64_MAX: 19 digits at most, no leading zero).
  auto step = parse_step_name("ckpt." + rest.substr(5));
  if (rest.compare(0, 5, "from ") != 0 || !step || step->kind != EntryKind::committed) return std::nullopt;
  return TimelineLine{*id, step->step};
}

constexpr std::uint64_t kMaxTimelineBytes = 64ull << 20;  // ~1.5 M lines: one or two per run

}  // namespace

Timeline::Timeline(std::string dir, std::uint64_t run, bool sync)
    : m_path(std::move(dir) + "/" + kTimelineName), m_run(run), m_sync(sync) {}

Status Timeline::append(const std::string& line) {
  const int fd = ::open(m_path.c_str(), O_RDWR | O_CREAT | O_APPEND | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd < 0)
    return Status(Code::io_error, "cannot open the root's timeline record " + m_path + ": " + std::strerror(errno) +
                                      (errno == ELOOP ? " (it is a symbolic link)" : ""));
  struct stat st {};
  Status s = ::fstat(fd, &st) == 0 ? Status::OK() : errno_status("stat " + m_path);
  if (s.ok() && !S_ISREG(st.st_mode)) s = Status(Code::failed_precondition, m_path + " is not a regular file");
  // A run that died while it appended left a line without its newline: it announced nothing (the
  // append is synced before what it announces), so it is cut off rather than run into this line.
  char last = '\n';
  if (s.ok() && st.st_size > 0) s = pread_all(fd, &last, 1, static_cast<std::uint64_t>(st.st_size - 1), m_path);
  if (s.ok() && last != '\n') {
    std::vector<char> all(static_cast<std::size_t>(st.st_size));
    s = pread_all(fd, all.data(), all.size(), 0, m_path);
    std::size_t keep = all.size();
    while (keep > 0 && all[keep - 1] != '\n') --keep;
    if (s.ok() && ::ftruncate(fd, static_cast<off_t>(keep)) != 0) s = errno_status("truncate " + m_path);
  }
  if (s.ok()) {
    const ssize_t n = ::write(fd, line.data(), line.size());  // one line of < 100 bytes: whole or error
    if (n < 0) s = errno_status("append to " + m_path);
    else if (static_cast<std::size_t>(n) != line.size())
      s = Status(Code::io_error, "append to " + m_path + ": short write (" + std::to_string(n) + " bytes)");
  }
  if (s.ok() && m_sync && ::fdatasync(fd) != 0) s = errno_status("fdatasync " + m_path);
  ::close(fd);
  if (s.ok() && st.st_size == 0) s = fsync_dir(m_path.substr(0, m_path.rfind('/')), m_sync);  // a new file
  return s.with_context("the root's timeline record");
}

Result<std::string> Timeline::bind() {
  std::lock_guard<std::mutex> lk(m_mu);
  CKPT_RETURN_IF_ERROR(append("run " + hex16(m_run) + " bound\n"));
  auto bytes = read_file(m_path, kMaxTimelineBytes);
  if (!bytes.ok()) return bytes.status().with_context("the root's timeline record");
  return std::string(bytes->begin(), bytes->end());
}

Status Timeline::before_commit(std::int64_t step) {
  std::lock_guard<std::mutex> lk(m_mu);
  if (m_lowest && *m_lowest <= step) return Status::OK();
  CKPT_RETURN_IF_ERROR(append("run " + hex16(m_run) + " from " + std::to_string(step) + "\n"));
  m_lowest = step;
  return Status::OK();
}

std::optional<std::int64_t> abandoned_from(const std::string& timeline, std::optional<std::uint64_t> label) {
  std::vector<std::optional<TimelineLine>> lines;  // nothing: a damaged line
  for (std::size_t at = 0; at < timeline.size();) {
    const std::size_t nl = timeline.find('\n', at);
    if (nl == std::string::npos) break;  // a torn last line announced nothing (Timeline::append)
    lines.push_back(parse_timeline_line(timeline.substr(at, nl - at)));
    at = nl + 1;
  }
  std::size_t first = 0;  // lines after the label's `bound` line
  if (label)
    for (std::size_t i = lines.size(); i-- > 0;)
      if (lines[i] && lines[i]->run == *label && !lines[i]->from) {
        first = i + 1;
        break;
      }
  std::optional<std::int64_t> from;
  for (std::size_t i = first; i < lines.size(); ++i) {
    const auto& l = lines[i];
    if (l && (!l->from || (label && l->run == *label))) continue;  // not a timeline another run began
    const std::int64_t step = l ? *l->from : 0;                      // damaged: could have begun one anywhere
    if (!from || step < *from) from = step;
  }
  return from;
}

Result<std::optional<std::uint64_t>> node_label(const std::string& node_dir) {
  auto text = read_marker(node_dir + "/" + kNodeRunName, "the node-local directory's run label");
  if (!text.ok())
    return text.status().code() == Code::not_found ? Result<std::optional<std::uint64_t>>(std::nullopt)
                                                   : Result<std::optional<std::uint64_t>>(text.status());
  return parse_id_line(text.value(), "ckpt run ");
}

Status label_node_dir(const std::string& node_dir, std::uint64_t run, bool sync) {
  return replace_marker(node_dir, node_dir + "/" + kNodeRunName, "ckpt run " + hex16(run) + "\n", sync)
      .with_context("labelling the node-local directory with this run");
}

}  // namespace ckpt::detail
