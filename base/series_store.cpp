// The series layout of the checkpoint store (docs/format.md, "Series layout"): every checkpoint of a
// run is appended to the files of a segment, and committed by a checksummed record appended to the
// segment's step log. Also the layout-independent entry points: open_store, load_checkpoint.
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <map>
#include <mutex>
#include <set>

#include "base/bytes.hpp"
#include "base/hash.hpp"
#include "base/step_log.hpp"
#include "base/store.hpp"

namespace ckpt::detail {

// ---- names ---------------------------------------------------------------------------------------

const char* layout_name(Layout l) noexcept { return l == Layout::series ? "series" : "directory"; }

std::optional<std::int64_t> parse_segment_name(const std::string& name, bool* doomed) {
  // "series.<k>[.del]": the same canonical decimal as a step name ("ckpt.<k>"), so parse it as one.
  constexpr std::size_t kPrefix = 7;  // "series."
  if (name.size() <= kPrefix || name.compare(0, kPrefix, "series.") != 0) return std::nullopt;
  auto as_step = parse_step_name("ckpt." + name.substr(kPrefix));
  if (!as_step || (as_step->kind != EntryKind::committed && as_step->kind != EntryKind::doomed)) return std::nullopt;
  if (doomed != nullptr) *doomed = as_step->kind == EntryKind::doomed;
  return as_step->step;
}

std::string segment_name(std::int64_t k) { return "series." + std::to_string(k); }
std::string segment_dir(const std::string& root, std::int64_t k) { return root + "/" + segment_name(k); }

RootContents scan_root(const std::string& root) {
  RootContents c;
  DIR* d = ::opendir(root.c_str());
  if (d == nullptr) return c;
  // Only directories make a root a series or a directory root (a stray file named series.3 or ckpt.5 is
  // neither: it must not turn a root of the other layout unreadable); every series.<k> name, of any
  // type, is skipped by the next segment, whose mkdir would fail on it.
  auto is_dir = [&](const char* name) {
    struct stat st {};
    return ::fstatat(::dirfd(d), name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode);
  };
  while (dirent* e = ::readdir(d)) {
    c.store_entries = c.store_entries || is_store_name(e->d_name);
    if (auto k = parse_segment_name(e->d_name)) {
      c.next_segment = std::max(c.next_segment, *k + 1);
      if (is_dir(e->d_name)) c.series = true;
    } else if (parse_step_name(e->d_name) && is_dir(e->d_name)) {
      c.directories = true;
    }
  }
  ::closedir(d);
  return c;
}

Status check_one_layout(const std::string& root) {
  const RootContents c = scan_root(root);
  if (c.series && c.directories)
    return Status(Code::failed_precondition,
                  root + " holds both checkpoint directories (ckpt.<step>/) and series segments (series.<k>/): a "
                         "root has one layout (docs/format.md, \"One layout per root\"); move one kind to a root of "
                         "its own");
  return Status::OK();
}

namespace {

// ---- the step log (encoded and parsed by base/step_log.cpp) ------------------------------------

const char* const kLogName = "steps";

/// One complete or damaged record of a step log whose step is known.
struct Record {
  std::int64_t step = 0;
  std::uint64_t seq = 0;
  std::uint64_t offset = 0;  ///< of the index bytes in the log (complete records)
  std::uint64_t length = 0;
  bool damaged = false;
  std::string why;  ///< damaged: what did not validate, with its bytes
};

/// One segment as its step log says.
struct Segment {
  std::int64_t number = 0;
  std::string dir;
  std::vector<Record> records;       ///< complete and damaged records of known step, in commit order
  std::vector<std::string> unknown;  ///< damaged records whose step is unknown: why, each
  std::uint64_t end = 0;             ///< where the next record goes (after the last complete or damaged one)
  std::uint64_t next_seq = 0;        ///< the next record's seq
  std::uint32_t version = 0;         ///< the log's version (0: no log, or no valid header)
  std::uint64_t log_id = 0;          ///< version 2
  std::string torn;                  ///< why the bytes after `end` are not a record (empty: there are none)
  std::vector<std::string> notes;    ///< damage that costs no step (StepLog::notes), with the log's path
  bool has_log = false;              ///< the log exists and its header validates
};

using LogSegment = Segment;  // (detail::Segment is a stream's segment: base/layout.hpp)

/// Reads `seg.dir`/steps by the rules of format.md (parse_step_log): complete and damaged records, the
/// torn tail.
void read_log(Segment& seg) {
  const std::string path = seg.dir + "/" + kLogName;
  std::uint64_t size = 0;
  auto fd = open_regular(path, &size);
  if (!fd.ok()) {
    if (fd.status().code() != Code::not_found) seg.torn = fd.status().message();
    return;
  }
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd.value()};
  const StepLog log = parse_step_log(FileLogBytes(fd.value(), size, path), seg.number);
  if (log.version == 0) {
    seg.torn = "the step log " + path + " has no valid header (" + log.bad_header + ")";
    return;
  }
  seg.has_log = true;
  seg.version = log.version;
  seg.log_id = log.log_id;
  seg.end = log.end;
  seg.next_seq = log.next_seq;
  for (const LogRecord& r : log.records) {
    const std::string where = path + ", record " + std::to_string(r.seq) + " (bytes " + std::to_string(r.begin) + ".." +
                              std::to_string(r.end) + ")";
    if (!r.step) {
      seg.unknown.push_back("damaged: " + where + ": " + r.why + "; its step is unknown");
      continue;
    }
    Record rec;
    rec.step = *r.step;
    rec.seq = r.seq;
    rec.offset = r.payload;
    rec.length = r.length;
    rec.damaged = r.damaged;
    if (r.damaged) rec.why = "damaged: the record of step " + std::to_string(*r.step) + " in " + where + ": " + r.why;
    seg.records.push_back(std::move(rec));
  }
  for (const std::string& n : log.notes) seg.notes.push_back(path + ": " + n);
  if (!log.torn.empty())
    seg.torn = "bytes " + std::to_string(log.end) + ".." + std::to_string(log.size) + " of " + path +
               " are not a record (" + log.torn + "): a commit that did not finish";
}

/// Every segment of `root` (series.<k> directories, not .del), by number, each with its log read.
std::map<std::int64_t, LogSegment> read_root_segments(const std::string& root) {
  std::map<std::int64_t, LogSegment> out;
  DIR* d = ::opendir(root.c_str());
  if (d == nullptr) return out;
  while (dirent* e = ::readdir(d)) {
    bool del = false;
    auto k = parse_segment_name(e->d_name, &del);
    if (!k || del) continue;
    LogSegment seg;
    seg.number = *k;
    seg.dir = root + "/" + e->d_name;
    struct stat st {};
    if (::lstat(seg.dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) continue;
    out.emplace(*k, std::move(seg));
  }
  ::closedir(d);
  for (auto& [k, seg] : out) read_log(seg);
  return out;
}

/// The index bytes of record `r` of `seg`'s step log.
Result<std::vector<std::uint8_t>> read_record(const LogSegment& seg, const Record& r) {
  if (r.damaged) return Status(Code::corrupt, r.why);
  const std::string path = seg.dir + "/" + kLogName;
  auto fd = open_regular(path, nullptr);
  if (!fd.ok()) return Status(fd.status().code(), "cannot read the step log " + path + ": " + fd.status().message());
  std::vector<std::uint8_t> bytes(static_cast<std::size_t>(r.length));
  Status s = pread_all(fd.value(), bytes.data(), bytes.size(), r.offset, path);
  ::close(fd.value());
  if (!s.ok()) return s;
  // A record's payload is an index file's bytes: version 1 or 2, never the transfer encoding ranks send.
  if (Status st = check_stored_index_version(bytes.data(), bytes.size()); !st.ok())
    return Status(Code::corrupt,
                  "corrupt checkpoint " + seg.dir + " (step " + std::to_string(r.step) + "): " + st.message());
  return bytes;
}

/// Where the effective record of a step is: segment number and record index.
struct Location {
  std::int64_t segment = 0;
  std::size_t record = 0;
};

class SeriesStore final : public Store {
 public:
  explicit SeriesStore(std::string root) : m_root(std::move(root)) {}
  ~SeriesStore() override {
    if (m_log_fd >= 0) ::close(m_log_fd);
  }

  const std::string& root() const override { return m_root; }
  Layout layout() const override { return Layout::series; }

  std::string checkpoint_dir(std::int64_t step) const override {
    std::lock_guard<std::mutex> lk(m_mu);
    load();
    auto it = m_steps.find(step);
    // A step that is not there: its name, which nothing reads (messages name it).
    return it == m_steps.end() ? m_root + "/" + step_name(step) : segment_dir(m_root, it->second.segment);
  }
  std::string staging_dir(std::int64_t step) const override {
    // The segment is chosen when the checkpoint is opened (SeriesCursor); this names the step only.
    return m_root + "/" + step_name(step, EntryKind::tmp);
  }

  std::vector<std::int64_t> committed_steps() const override {
    std::lock_guard<std::mutex> lk(m_mu);
    load();
    std::vector<std::int64_t> out;
    for (auto it = m_steps.rbegin(); it != m_steps.rend(); ++it) out.push_back(it->first);
    return out;
  }

  Result<std::vector<StepEntry>> list(ListDepth) const override {
    CKPT_RETURN_IF_ERROR(check_directory(m_root));
    CKPT_RETURN_IF_ERROR(check_one_layout(m_root));
    std::lock_guard<std::mutex> lk(m_mu);
    m_loaded = false;  // a listing is always fresh
    load();
    std::vector<StepEntry> out;
    for (auto it = m_steps.rbegin(); it != m_steps.rend(); ++it) {
      StepEntry e;
      e.step = it->first;
      e.name = step_name(e.step);
      e.path = m_root + "/" + e.name;
      auto idx = load_locked(e.step);
      e.complete = idx.ok();
      if (idx.ok())
        e.index = std::move(idx).value();
      else
        e.reason = idx.status().message();
      e.damaged = !idx.ok() && idx.status().code() == Code::corrupt;
      out.push_back(std::move(e));
    }
    // Records a later commit of an older step rolled back, damaged records of unknown step, and torn
    // tails: listed, never read.
    for (auto& [k, seg] : m_segments) {
      for (std::size_t i = 0; i < seg.records.size(); ++i) {
        auto it = m_steps.find(seg.records[i].step);
        if (it != m_steps.end() && it->second.segment == k && it->second.record == i) continue;
        const bool replaced = it != m_steps.end();  // the same step committed again later
        StepEntry e;
        e.step = seg.records[i].step;
        e.name = step_name(e.step) + " (" + segment_name(k) + ")";
        e.path = seg.dir;
        e.kind = EntryKind::abandoned;  // never read (verify skips it)
        e.reason = replaced ? "replaced by a later commit of the same step"
                            : "rolled back: a later commit of an older step abandoned it (" + segment_name(k) + ")";
        out.push_back(std::move(e));
      }
      for (const std::string& why : seg.unknown) {
        StepEntry e;
        e.step = -1;
        e.name = segment_name(k);
        e.path = seg.dir;
        e.damaged = true;
        e.reason = why;
        out.push_back(std::move(e));
      }
      if (!seg.torn.empty()) {
        StepEntry e;
        e.step = seg.records.empty() ? -1 : seg.records.back().step;
        e.name = segment_name(k);
        e.path = seg.dir;
        e.kind = EntryKind::tmp;
        e.reason = seg.torn;
        out.push_back(std::move(e));
      }
    }
    std::stable_sort(out.begin(), out.end(), [](const StepEntry& a, const StepEntry& b) { return a.step > b.step; });
    return out;
  }

  Result<std::vector<std::uint8_t>> read_index(std::int64_t step) const override {
    std::lock_guard<std::mutex> lk(m_mu);
    load();
    return read_locked(step);
  }

  Result<Index> load_index(std::int64_t step) const override {
    std::lock_guard<std::mutex> lk(m_mu);
    load();
    return load_locked(step);
  }

  std::optional<std::int64_t> newest_complete(std::vector<std::string>* skipped) const override {
    std::lock_guard<std::mutex> lk(m_mu);
    load();
    for (auto it = m_steps.rbegin(); it != m_steps.rend(); ++it) {
      auto idx = load_locked(it->first);
      if (idx.ok()) return it->first;
      if (skipped != nullptr) skipped->push_back("step " + std::to_string(it->first) + ": " + idx.status().message());
    }
    return std::nullopt;
  }

  std::optional<std::int64_t> latest_link() const override { return std::nullopt; }  // no link: no directory op

  Status recover() override {
    // A torn tail needs nothing: a run appends to segments of its own, and readers stop at it.
    // Segments retention was removing (renamed .del) are removed now.
    Status first;
    DIR* d = ::opendir(m_root.c_str());
    if (d == nullptr) return Status::OK();
    std::vector<std::string> doomed;
    while (dirent* e = ::readdir(d)) {
      bool del = false;
      if (parse_segment_name(e->d_name, &del) && del) doomed.push_back(m_root + "/" + e->d_name);
    }
    ::closedir(d);
    for (auto& p : doomed) {
      Status s = remove_tree(p);
      if (!s.ok() && first.ok()) first = s;
    }
    return first;
  }

  Status commit(std::int64_t step, const std::string& staged, const std::vector<std::uint8_t>& index,
                bool sync) override {
    std::lock_guard<std::mutex> lk(m_mu);
    load();
    const auto k = parse_segment_name(split_last(staged).second);
    if (!k)
      return Status(Code::internal,
                    "series commit of step " + std::to_string(step) + ": " + staged + " is not a segment directory");
    if (!check_stored_index_version(index.data(), index.size()).ok())  // read_record() would refuse it
      return Status(Code::internal, "series commit of step " + std::to_string(step) +
                                        ": an index with references or pieces in the transfer encoding");
    CKPT_RETURN_IF_ERROR(open_log(*k, sync));
    Segment& seg = m_segments[*k];
    const auto rec = encode_step_record(seg.log_id, seg.next_seq, step, index.data(), index.size());
    Status s = pwrite_all(m_log_fd, rec.data(), rec.size(), seg.end, seg.dir + "/" + kLogName);
    if (s.ok() && sync && ::fdatasync(m_log_fd) != 0) s = errno_status("fdatasync " + seg.dir + "/" + kLogName);
    if (!s.ok()) {
      // Take the partial record back, so that the next commit does not append behind a torn one (a
      // reader stops at the first record that does not validate).
      if (::ftruncate(m_log_fd, static_cast<off_t>(seg.end)) != 0) {
        ::close(m_log_fd);
        m_log_fd = -1;
        m_log_segment = -1;
        m_broken.insert(*k);
      }
      return s;
    }
    Record r;
    r.step = step;
    r.seq = seg.next_seq++;
    r.offset = seg.end + kStepRecordFrameBytes;
    r.length = index.size();
    seg.records.push_back(std::move(r));
    seg.end += rec.size();
    seg.torn.clear();
    apply(*k, seg.records.size() - 1, true);
    return Status::OK();
  }

  void discard(const std::string& staged) override { (void)staged; }  // the segment holds other checkpoints

  Status abandon_newer_than(std::int64_t step, bool sync) override {
    // Nothing to move: a record of `step` hides the newer steps of the segments before it (apply()).
    (void)step;
    (void)sync;
    return Status::OK();
  }

  Status sync() override { return sync_filesystem(m_root); }

  Status retain(int keep, std::int64_t just_committed, std::int64_t durable) override {
    std::lock_guard<std::mutex> lk(m_mu);
    load();
    auto it = m_steps.find(just_committed);
    if (it == m_steps.end()) return Status::OK();
    const std::int64_t current = it->second.segment;
    // The segments that hold a kept step: the step just committed and the newest others, up to `keep`.
    std::set<std::int64_t> needed{current};
    int kept = 1;
    for (auto s = m_steps.rbegin(); s != m_steps.rend() && kept < keep; ++s) {
      if (s->first == just_committed) continue;
      needed.insert(s->second.segment);
      ++kept;
    }
    if (auto d = m_steps.find(durable); d != m_steps.end()) needed.insert(d->second.segment);
    // Whole segments go, older than the one appended to (a newer one may be being written already).
    Status first;
    std::vector<std::int64_t> gone;
    for (auto& [k, seg] : m_segments) {
      if (k >= current || needed.count(k) != 0) continue;
      const std::string doomed = seg.dir + ".del";
      Status s = remove_tree(doomed);
      if (s.ok() && ::rename(seg.dir.c_str(), doomed.c_str()) != 0) s = errno_status("rename " + seg.dir);
      if (s.ok()) s = remove_tree(doomed);
      if (!s.ok() && first.ok()) first = s;
      if (s.ok() || !is_dir(seg.dir)) gone.push_back(k);
    }
    for (auto k : gone) m_segments.erase(k);
    if (!gone.empty()) replay();
    return first;
  }

 private:
  static bool is_dir(const std::string& p) {
    struct stat st {};
    return ::lstat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
  }

  /// Under m_mu: reads every segment's log once (a commit keeps what it read up to date).
  void load() const {
    if (m_loaded) return;
    m_segments = read_root_segments(m_root);
    replay();
    m_loaded = true;
  }

  /// Under m_mu: the steps in force, from every record in commit order (segment, then position).
  void replay() const {
    m_steps.clear();
    for (auto& [k, seg] : m_segments)
      for (std::size_t i = 0; i < seg.records.size(); ++i) apply(k, i, false);
  }

  /// Under m_mu: record `i` of segment `k` takes effect: steps are a timeline, so the newer steps of an
  /// earlier one (a restart from an older step, or an earlier run in this root) leave it.
  void apply(std::int64_t k, std::size_t i, bool say) const {
    const std::int64_t step = m_segments.at(k).records[i].step;
    auto newer = m_steps.upper_bound(step);
    const std::size_t dropped = static_cast<std::size_t>(std::distance(newer, m_steps.end()));
    if (say && dropped > 0)
      std::fprintf(stderr,
                   "ckpt: committing step %lld rolls back %zu newer checkpoint(s) (steps %lld..%lld) of an earlier "
                   "timeline in %s: their records stay in their segments, never read again\n",
                   static_cast<long long>(step), dropped, static_cast<long long>(newer->first),
                   static_cast<long long>(m_steps.rbegin()->first), m_root.c_str());
    m_steps.erase(newer, m_steps.end());
    m_steps[step] = Location{k, i};
  }

  Result<std::vector<std::uint8_t>> read_locked(std::int64_t step) const {
    auto it = m_steps.find(step);
    if (it == m_steps.end())
      return Status(Code::not_found, "no checkpoint of step " + std::to_string(step) + " in " + m_root);
    const Segment& seg = m_segments.at(it->second.segment);
    return read_record(seg, seg.records[it->second.record]);
  }

  Result<Index> load_locked(std::int64_t step) const {
    auto bytes = read_locked(step);
    if (!bytes.ok()) return bytes.status();
    auto it = m_steps.find(step);
    return decode_checkpoint_index(
        bytes.value(), segment_dir(m_root, it->second.segment) + " (step " + std::to_string(step) + ")", step);
  }

  /// Under m_mu: m_log_fd is segment k's step log, created (with its header) when new.
  Status open_log(std::int64_t k, bool sync) {
    if (m_log_segment == k && m_log_fd >= 0) return Status::OK();
    if (m_broken.count(k) != 0)
      return Status(Code::io_error, "the step log of " + segment_dir(m_root, k) +
                                        " could not be repaired after a failed append; later checkpoints of this "
                                        "segment are not committed");
    if (m_log_fd >= 0) ::close(m_log_fd);
    m_log_fd = -1;
    m_log_segment = -1;
    Segment& seg = m_segments[k];
    // A run appends only to segments it started; a log of another version is another build's.
    if (seg.has_log && seg.version != kStepLogVersion)
      return Status(Code::failed_precondition, "the step log of " + segment_dir(m_root, k) + " is version " +
                                                   std::to_string(seg.version) + ": this build appends to version " +
                                                   std::to_string(kStepLogVersion) + " logs only");
    seg.number = k;
    seg.dir = segment_dir(m_root, k);
    const std::string path = seg.dir + "/" + kLogName;
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0666);
    if (fd < 0) return errno_status("open " + path);
    if (!seg.has_log) {
      // New (or without a valid header: nothing in it was ever committed): start it.
      const std::uint64_t log_id = new_step_log_id();
      const auto head = encode_step_log_header(k, log_id);
      Status s = ::ftruncate(fd, 0) == 0 ? Status::OK() : errno_status("truncate " + path);
      if (s.ok()) s = pwrite_all(fd, head.data(), head.size(), 0, path);
      if (s.ok() && sync && ::fdatasync(fd) != 0) s = errno_status("fdatasync " + path);
      // The segment's entry in the root and the log's in the segment: once per segment.
      if (s.ok()) s = fsync_dir(seg.dir, sync);
      if (s.ok()) s = fsync_dir(m_root, sync);
      if (!s.ok()) {
        ::close(fd);
        return s;
      }
      seg.has_log = true;
      seg.version = kStepLogVersion;
      seg.log_id = log_id;
      seg.end = kStepLogHeaderBytes;
      seg.next_seq = 0;
      seg.records.clear();
      seg.unknown.clear();
      seg.torn.clear();
    } else if (::ftruncate(fd, static_cast<off_t>(seg.end)) != 0) {  // drop a torn tail before appending
      Status s = errno_status("truncate " + path);
      ::close(fd);
      return s;
    }
    m_log_fd = fd;
    m_log_segment = k;
    return Status::OK();
  }

  std::string m_root;
  mutable std::mutex m_mu;
  mutable bool m_loaded = false;
  mutable std::map<std::int64_t, Segment> m_segments;  ///< by number
  mutable std::map<std::int64_t, Location> m_steps;    ///< the steps in force
  int m_log_fd = -1;                                   ///< the step log appended to (rank 0)
  std::int64_t m_log_segment = -1;
  std::set<std::int64_t> m_broken;  ///< segments whose log a failed append left torn
};

/// `path` as one step of a series root ("<root>/ckpt.<step>", "<root>/latest"), when it is one.
std::optional<std::pair<std::string, std::optional<std::int64_t>>> series_step_path(const std::string& path) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) == 0) return std::nullopt;  // a real entry: not a name of the series
  auto [root, last] = split_last(path);
  if (!scan_root(root).series) return std::nullopt;
  if (last == kLatestName) return std::make_pair(root, std::optional<std::int64_t>{});
  auto name = parse_step_name(last);
  if (!name || name->kind != EntryKind::committed) return std::nullopt;
  return std::make_pair(root, std::optional<std::int64_t>{name->step});
}

}  // namespace

std::unique_ptr<Store> make_series_store(const std::string& root) { return std::make_unique<SeriesStore>(root); }

std::vector<SegmentLog> read_segments(const std::string& root) {
  std::vector<SegmentLog> out;
  for (auto& [k, seg] : read_root_segments(root)) {
    SegmentLog log;
    log.number = k;
    log.dir = seg.dir;
    log.torn = !seg.torn.empty();
    log.notes = seg.notes;
    for (const Record& r : seg.records) {
      SegmentRecord rec;
      rec.step = r.step;
      auto bytes = read_record(seg, r);
      auto idx = bytes.ok() ? decode_checkpoint_index(bytes.value(), seg.dir + " (step " + std::to_string(r.step) + ")",
                                                      r.step)
                            : Result<Index>(bytes.status());
      if (idx.ok())
        rec.index = std::move(idx).value();
      else
        rec.error = idx.status().message();
      log.records.push_back(std::move(rec));
    }
    out.push_back(std::move(log));
  }
  return out;
}

std::unique_ptr<Store> open_store(const std::string& root) {
  return scan_root(root).series ? make_series_store(root) : make_directory_store(root);
}

bool names_checkpoint(const std::string& path) {
  if (series_step_path(path)) return true;
  return is_checkpoint_dir(path) && !scan_root(path).series;
}

Result<CheckpointRef> load_checkpoint(const std::string& path) {
  if (auto s = series_step_path(path)) {
    CKPT_RETURN_IF_ERROR(check_one_layout(s->first));  // a name in a root of both layouts means nothing sure
    auto store = make_series_store(s->first);
    std::optional<std::int64_t> step = s->second;
    if (!step) step = store->newest_complete();
    if (!step) return Status(Code::not_found, "no complete checkpoint in " + s->first + " (for " + path + ")");
    auto idx = store->load_index(*step);
    if (!idx.ok() && idx.status().code() == Code::not_found) {
      // A step whose record a crash tore is not there: say where the torn records are.
      std::string torn;
      if (auto entries = store->list(); entries.ok())
        for (const StepEntry& e : entries.value())
          if (e.kind == EntryKind::tmp) torn += "; " + e.name + ": " + e.reason;
      if (!torn.empty()) return Status(Code::not_found, idx.status().message() + torn);
    }
    if (!idx.ok()) return idx.status();
    return CheckpointRef{path, store->checkpoint_dir(*step), std::move(idx).value()};
  }
  auto idx = load_checkpoint_dir(path);
  if (!idx.ok()) return idx.status();
  return CheckpointRef{path, path, std::move(idx).value()};
}

}  // namespace ckpt::detail
