// `ckpt verify`: read every block of a checkpoint through the public Reader (its checksum and the
// index statistics), check every data-file header and padding; name each bad block.
#include <sys/stat.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "base/posix_io.hpp"
#include "base/store.hpp"
#include "tools/commands.hpp"
#include "tools/json_util.hpp"
#include "tools/output.hpp"
#include "tools/store.hpp"

namespace ckpt::tools {
namespace {

using json = nlohmann::ordered_json;

/// One problem found in a checkpoint.
struct Problem {
  std::string variable;  ///< empty for a file-level problem
  long rank = -1;
  std::string file;
  std::uint64_t offset = 0, bytes = 0;
  std::string error;
};

/// Outcome of verifying one checkpoint directory.
struct Report {
  std::string path;
  std::int64_t step = -1;
  std::string fatal;  ///< set when the index itself could not be used
  std::size_t blocks = 0, files = 0;
  std::uint64_t bytes = 0;
  std::vector<Problem> problems;
  std::vector<std::string> notes;
  bool segment = false;  ///< a series segment's data files (verify_segment), not one checkpoint
  bool ok() const { return fatal.empty() && problems.empty(); }
};

/// What a file that is not a regular one is, for a message.
std::string file_kind(mode_t mode) {
  if (S_ISLNK(mode)) return "a symbolic link";
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISSOCK(mode)) return "a socket";
  return "a device";
}

/// Counts the bytes of [lo, hi) of `name` that are not zero into `nonzero`; `first` gets the offset of
/// the first one counted (when `nonzero` was 0).
Status count_nonzero(detail::FileReader& reader, const std::string& name, std::uint64_t lo, std::uint64_t hi,
                     std::vector<std::uint8_t>& buf, std::uint64_t& nonzero, std::uint64_t& first) {
  for (std::uint64_t p = lo; p < hi;) {
    const std::uint64_t n = std::min<std::uint64_t>(hi - p, 1 << 20);
    buf.resize(n);
    CKPT_RETURN_IF_ERROR(reader.read(name, p, buf.data(), n));
    for (std::uint64_t i = 0; i < n; ++i)
      if (buf[i] != 0 && nonzero++ == 0) first = p + i;
    p += n;
  }
  return Status::OK();
}

/// Every byte of a ckpt data file that is neither header nor block - header padding, gaps between
/// blocks, alignment between streams, the tail - is written as zero (format.md) and read by nobody:
/// a change there is invisible to restart, so verify reads those bytes and reports any that is not zero.
/// `used`: the [begin, end) byte ranges of the file's blocks, header first. Only [lo, size) is looked
/// at: a series file holds other checkpoints before this one's stream (lo = where it starts, size = where
/// it ends).
using Ranges = std::vector<std::pair<std::uint64_t, std::uint64_t>>;
template <class Bad>
void check_padding(detail::FileReader& reader, const std::string& name, const std::string& path, std::uint64_t lo,
                   std::uint64_t size, Ranges& used, const Bad& bad) {
  std::sort(used.begin(), used.end());
  std::vector<std::uint8_t> buf;
  std::uint64_t pos = lo, nonzero = 0, first = 0;
  auto scan = [&](std::uint64_t lo, std::uint64_t hi) {
    return count_nonzero(reader, name, lo, hi, buf, nonzero, first);
  };
  for (auto& u : used) {
    if (u.first > pos) {
      Status s = scan(pos, std::min(u.first, size));
      if (!s.ok()) return bad("data file " + path + ": " + s.message());
    }
    pos = std::max(pos, u.second);
  }
  if (pos < size) {
    Status s = scan(pos, size);
    if (!s.ok()) return bad("data file " + path + ": " + s.message());
  }
  if (nonzero > 0)
    bad("data file " + path + ": " + std::to_string(nonzero) +
        " byte(s) of padding outside the header and the blocks "
        "are not zero (first at offset " +
        std::to_string(first) + ")");
}

/// Checks the data files: present, not shorter than the index says, and (ckpt data files) a header
/// that is intact and belongs to this checkpoint.
void check_files(const Checkpoint& c, Report& rep) {
  const Index& idx = c.index;
  std::vector<bool> used(idx.files.size(), false);
  std::vector<std::uint64_t> end(idx.files.size(), 0);  // where the file's last block ends
  // The byte ranges of each file, in one pass over the blocks (a scan of every block per file would be
  // quadratic in the rank count: posix writes a file per rank).
  // layout series: a file holds every checkpoint of its segment; this one's stream is [start, end).
  bool series = false;
  for (auto& kv : idx.attrs) series = series || (kv.first == "layout" && kv.second == "series");
  std::vector<Ranges> ranges(idx.files.size(), series ? Ranges{} : Ranges{{0, detail::kDataHeaderBytes}});
  std::vector<std::uint64_t> start(idx.files.size(), UINT64_MAX);
  auto add = [&](std::uint32_t f, std::uint64_t lo, std::uint64_t hi) {
    start[f] = std::min(start[f], lo);
    end[f] = std::max(end[f], hi);
    ranges[f].emplace_back(lo, hi);
  };
  for (auto& b : idx.blocks) {
    used[b.file] = true;
    // An empty block (a rank without rows) has no bytes: where it points need not exist. A pieced block's
    // bytes in its file are its stored pieces (the others are an earlier checkpoint's).
    if (b.pieced()) {
      for (std::size_t i = 0; i < b.pieces.size(); ++i)
        if (b.pieces[i].ref == 0) add(b.file, b.pieces[i].offset, b.pieces[i].offset + detail::piece_bytes(b, i));
    } else if (b.length > 0) {
      add(b.file, b.offset, b.offset + b.length);
    }
  }
  for (std::size_t f = 0; f < idx.files.size(); ++f) {
    const FileRecord& fr = idx.files[f];
    if (!used[f] && fr.bytes == 0) continue;  // a placeholder of a non-persistent transport group
    ++rep.files;
    const std::string path = c.data_dir + "/" + fr.name;
    auto bad = [&](const std::string& why) {
      rep.problems.push_back({"", static_cast<long>(fr.writer), fr.name, 0, 0, why});
    };
    struct stat st {};
    if (::lstat(path.c_str(), &st) != 0) {
      bad("data file " + path + " is missing");
      continue;
    }
    // A planted link or FIFO is never read (open_regular): say what it is rather than a size it lacks.
    if (!S_ISREG(st.st_mode)) {
      bad("data file " + path + " is not a regular file (" + file_kind(st.st_mode) + ")");
      continue;
    }
    const std::uint64_t size = static_cast<std::uint64_t>(st.st_size);
    // Only the blocks' bytes must be there: a shared file's recorded size may include trailing
    // alignment padding that nobody wrote.
    if (size < end[f]) {
      bad("data file " + path + " is truncated (" + std::to_string(size) + " bytes; its blocks end at " +
          std::to_string(end[f]) + ")");
      continue;
    }
    if (size < fr.bytes)
      rep.notes.push_back("data file " + fr.name + " has " + std::to_string(size) + " bytes, the index records " +
                          std::to_string(fr.bytes) + " (all its blocks are present)");
    detail::FileReader reader(c.data_dir);
    std::vector<std::uint8_t> head(detail::kDataHeaderBytes);
    Status s = size < head.size() ? Status(Code::corrupt, "shorter than a data header")
                                  : reader.read(fr.name, 0, head.data(), head.size());
    if (!s.ok()) {
      bad("data file " + path + ": " + s.message());
      continue;
    }
    // The hdf5 transports write plain HDF5 files (the index locates each block inside them).
    static const std::uint8_t kHdf5Magic[8] = {0x89, 'H', 'D', 'F', '\r', '\n', 0x1a, '\n'};
    if (std::equal(kHdf5Magic, kHdf5Magic + 8, head.begin())) continue;
    auto h = detail::decode_data_header(head.data(), head.size());
    if (!h.ok()) {
      bad("data file " + path + ": " + h.status().message());
      continue;
    }
    // A series file's header is its segment's first checkpoint's, of the same run (the id of a
    // checkpoint is the run's id XOR its step).
    const bool other = series ? h->step > idx.step || h->nranks != idx.nranks ||
                                    (h->ckpt_id ^ static_cast<std::uint64_t>(h->step)) !=
                                        (idx.ckpt_id ^ static_cast<std::uint64_t>(idx.step))
                              : h->step != idx.step || h->nranks != idx.nranks || h->ckpt_id != idx.ckpt_id;
    if (other)
      bad("data file " + path + " belongs to another checkpoint (header: step " + std::to_string(h->step) + ", " +
          std::to_string(h->nranks) + " ranks, id " + hex64(h->ckpt_id) + "; index: step " + std::to_string(idx.step) +
          ", " + std::to_string(idx.nranks) + " ranks, id " + hex64(idx.ckpt_id) + ")");
    else if (h->writer != fr.writer)
      rep.notes.push_back("data file " + fr.name + ": header names writer " + std::to_string(h->writer) +
                          ", the index " + std::to_string(fr.writer));
    if (!series)
      check_padding(reader, fr.name, path, 0, size, ranges[f], bad);
    else if (start[f] < end[f])
      check_padding(reader, fr.name, path, start[f], end[f], ranges[f], bad);
  }
}

/// layout series: the bytes of a segment's data files that no step's stream covers and that nothing
/// ever writes (docs/format.md, "Series layout": the header's padding, and from each committed stream's
/// end to the next multiple of the alignment) must be zero. Streams lie in a data file in the order of
/// their records in the step log - every complete record, in force or not (a rolled-back or replaced
/// step's stream is still where its record says). Not checkable, so not looked at: from that multiple
/// of the alignment to the start of the next record's stream (a checkpoint that was written but never
/// committed may lie there), and from it to the end of the file after the last complete record (a
/// torn record's stream, or one never committed). Problems and notes go to `rep`. With `only`, the
/// bytes of one step: the header's padding of the files of record `only` and the bytes after its
/// streams (verify of one step of a series); without, those of every record, each file counted in
/// rep.files.
void check_segment_bytes(const detail::SegmentLog& seg, std::optional<std::size_t> only, Report& rep) {
  // Each data file's streams, in record order: record number and [start, end); nullopt for a record
  // whose index does not decode (where its stream lies is unknown: the gaps around it are not checked).
  using Stream = std::optional<std::pair<std::uint64_t, std::uint64_t>>;
  struct Entry {
    std::size_t record;
    std::int64_t step;
    Stream stream;
  };
  std::map<std::string, std::vector<Entry>> streams;
  std::map<std::string, std::uint32_t> writer;
  for (std::size_t i = 0; i < seg.records.size(); ++i) {
    const detail::SegmentRecord& r = seg.records[i];
    if (!r.index) {
      for (auto& [name, list] : streams) list.push_back({i, r.step, std::nullopt});
      if (!only || *only + 1 == i)
        rep.notes.push_back("the record of step " + std::to_string(r.step) + " does not decode (" + r.error +
                            "): the bytes around its streams are not checked");
      continue;
    }
    const Index& idx = *r.index;
    std::vector<std::pair<std::uint64_t, std::uint64_t>> span(idx.files.size(), {UINT64_MAX, 0});
    for (auto& b : idx.blocks)
      if (b.length > 0)
        span[b.file] = {std::min(span[b.file].first, b.offset), std::max(span[b.file].second, b.offset + b.length)};
    for (std::size_t f = 0; f < idx.files.size(); ++f) {
      const FileRecord& fr = idx.files[f];
      if (fr.name == "none") continue;  // a non-persistent transport group
      // No block bytes: an empty stream where the file ended (its `bytes`).
      const std::uint64_t end = std::max(fr.bytes, span[f].second);
      const std::uint64_t start = span[f].second > 0 ? span[f].first : end;
      streams[fr.name].push_back({i, r.step, std::make_pair(start, end)});
      writer[fr.name] = fr.writer;
    }
  }
  std::vector<std::uint8_t> buf;
  detail::FileReader reader(seg.dir);
  for (auto& [name, list] : streams) {
    // One step: only the files its record names.
    if (only && std::none_of(list.begin(), list.end(), [&](const Entry& e) { return e.record == *only && e.stream; }))
      continue;
    const std::string path = seg.dir + "/" + name;
    auto bad = [&](const std::string& why) {
      rep.problems.push_back({"", static_cast<long>(writer[name]), name, 0, 0, why});
    };
    if (!only) ++rep.files;
    struct stat st {};
    if (::lstat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;  // the steps' own checks say so
    const std::uint64_t size = static_cast<std::uint64_t>(st.st_size);
    std::vector<std::uint8_t> head(detail::kDataHeaderBytes);
    if (size < head.size() || !reader.read(name, 0, head.data(), head.size()).ok()) continue;
    auto h = detail::decode_data_header(head.data(), head.size());
    if (!h.ok()) continue;                       // a header that does not decode: the steps' own checks say so
    const std::uint64_t align = h->data_offset;  // the alignment (at least the header's size, a power of two)
    if (align < detail::kDataHeaderBytes || (align & (align - 1)) != 0) {
      bad("data file " + path + ": its header's data offset " + std::to_string(align) + " is not a power of two");
      continue;
    }
    auto up = [&](std::uint64_t x) { return x > UINT64_MAX - align ? x : (x + align - 1) / align * align; };
    // Ranges that must be zero, each with what it is.
    std::vector<std::tuple<std::uint64_t, std::uint64_t, std::string>> zero;
    zero.emplace_back(detail::kDataHeaderBytes, align, "of the data header's padding");
    auto after = [&](std::uint64_t end, std::uint64_t limit, const Entry& e) {
      if (!only || e.record == *only)
        zero.emplace_back(end, limit,
                          "after the stream of step " + std::to_string(e.step) + ", before the next aligned offset");
    };
    std::optional<std::uint64_t> prev = align;  // where the previous stream ended
    const Entry* prev_entry = nullptr;
    for (const Entry& e : list) {
      if (e.stream && prev && e.stream->first >= *prev && prev_entry)
        after(*prev, std::min(up(*prev), e.stream->first), *prev_entry);
      // (A stream that begins before the previous one's end - an index no writer made - moves nothing back.)
      prev = e.stream ? std::optional<std::uint64_t>(std::max(prev.value_or(0), e.stream->second)) : std::nullopt;
      prev_entry = &e;
    }
    if (prev && prev_entry) after(*prev, up(*prev), *prev_entry);
    for (auto& [lo, hi0, what] : zero) {
      const std::uint64_t hi = std::min(hi0, size);
      if (lo >= hi) continue;
      std::uint64_t nonzero = 0, first = 0;
      Status s = count_nonzero(reader, name, lo, hi, buf, nonzero, first);
      if (!s.ok())
        bad("data file " + path + ": " + s.message());
      else if (nonzero > 0)
        bad("data file " + path + ": " + std::to_string(nonzero) + " byte(s) " + what + " (bytes " +
            std::to_string(lo) + ".." + std::to_string(hi) + ") are not zero (first at offset " +
            std::to_string(first) + ")");
    }
  }
}

/// A series segment's bytes between the streams (check_segment_bytes), as a report of its own.
Report verify_segment(const detail::SegmentLog& seg) {
  Report rep;
  rep.path = seg.dir;
  rep.segment = true;
  // Damage in the step log that costs no step is damage all the same: reported, exit 1.
  for (const std::string& n : seg.notes) rep.problems.push_back({"", -1, "steps", 0, 0, n});
  check_segment_bytes(seg, std::nullopt, rep);
  return rep;
}

/// One step of a series named by itself (`<root>/ckpt.<step>`): the bytes between the streams that its
/// record answers for (the header padding of its files, the bytes after its streams), as verify of the
/// root checks them in its segment.
void check_step_segment(const Checkpoint& c, Report& rep) {
  const auto k = detail::parse_segment_name(detail::split_last(c.data_dir).second);
  if (!k) return;
  for (const detail::SegmentLog& seg : detail::read_segments(detail::split_last(c.data_dir).first)) {
    if (seg.number != *k) continue;
    // The record in force is the segment's last one of the step (a later one of the step replaces it).
    for (std::size_t i = seg.records.size(); i-- > 0;)
      if (seg.records[i].step == c.index.step) return check_segment_bytes(seg, i, rep);
  }
}

/// Verifies the checkpoint `dir` names. `alone`: it was named by itself, not found under a root (a
/// series step then also answers for its bytes between the streams, which a root's segments report).
Report verify_one(const std::string& dir, Progress* outer, bool alone) {
  Report rep;
  rep.path = dir;
  auto c = open_checkpoint(dir);
  if (!c.ok()) {
    rep.fatal = c.status().message();
    return rep;
  }
  rep.step = c->index.step;
  rep.blocks = c->index.blocks.size();
  for (auto& b : c->index.blocks) rep.bytes += b.length;
  check_files(c.value(), rep);
  if (alone && c->data_dir != c->dir) check_step_segment(c.value(), rep);
  // The blocks: read through the public Reader, which checks each one's checksum and min/max.
  auto reader = open_reader(dir);
  if (!reader.ok()) {
    rep.fatal = reader.status().message();
    return rep;
  }
  Progress local("verify " + dir, outer ? 0 : rep.bytes);
  Progress& bar = outer ? *outer : local;
  (void)reader.value().verify([&](const VariableInfo& v, const BlockInfo& b, const Status& s) {
    bar.add(b.bytes);
    if (!s.ok()) rep.problems.push_back({v.name, static_cast<long>(b.rank), b.file, b.offset, b.bytes, s.message()});
  });
  // Coverage of global and joined arrays (not an error: an application may leave parts of an array out).
  for (const VariableInfo& v : reader->variables()) {
    if (!has_global_shape(v.kind)) continue;
    std::uint64_t n = 0;
    for (const BlockInfo& b : v.blocks) n += shape_elements(b.count);
    if (n != shape_elements(v.shape))
      rep.notes.push_back("variable '" + v.name + "': its blocks hold " + std::to_string(n) +
                          " elements, the global shape " + std::to_string(shape_elements(v.shape)));
  }
  return rep;
}

json report_json(const Report& r) {
  json j;
  j["path"] = r.path;
  j["step"] = r.step;
  j["ok"] = r.ok();
  j["error"] = r.fatal.empty() ? json(nullptr) : json(r.fatal);
  j["blocks"] = r.blocks;
  j["files"] = r.files;
  j["bytes"] = r.bytes;
  json probs = json::array();
  for (auto& p : r.problems)
    probs.push_back({{"variable", p.variable.empty() ? json(nullptr) : json(p.variable)},
                     {"rank", p.rank},
                     {"file", p.file},
                     {"offset", p.offset},
                     {"bytes", p.bytes},
                     {"error", p.error}});
  j["problems"] = probs;
  j["notes"] = r.notes;
  return j;
}

void print_report(const Report& r, bool quiet) {
  if (!r.fatal.empty()) {
    say("BAD  %s\n", r.fatal);
    return;
  }
  for (auto& p : r.problems) say("BAD  %s\n", p.error);
  if (!quiet)
    for (auto& n : r.notes) say("note %s\n", n);
  if (r.segment && r.ok())
    say("%s: OK (segment: the bytes between the streams of %zu data files)\n", r.path, r.files);
  else if (r.segment)
    say("%s: FAILED (segment: %zu problem(s) in the bytes between the streams of %zu data files)\n", r.path,
        r.problems.size(), r.files);
  else if (r.ok())
    say("%s: OK (step %lld: %zu blocks in %zu files, %s verified)\n", r.path, static_cast<long long>(r.step), r.blocks,
        r.files, human_bytes(r.bytes));
  else
    say("%s: FAILED (step %lld: %zu problem(s); %zu blocks in %zu files)\n", r.path, static_cast<long long>(r.step),
        r.problems.size(), r.blocks, r.files);
}

}  // namespace

int run_verify(const VerifyArgs& a) {
  Status s = names_checkpoint(a.path) ? Status::OK() : check_directory(a.path);  // a series step is a name
  if (!s.ok()) return fail("verify", s.message());
  std::vector<Report> reports, segments;
  std::vector<std::string> skipped;
  if (names_checkpoint(a.path)) {
    Report r = verify_one(a.path, nullptr, true);
    // An index that cannot be used is an unusable checkpoint (exit 2), not bad data in a usable one.
    if (!r.fatal.empty()) return fail("verify", r.fatal);
    reports.push_back(std::move(r));
  } else {
    auto steps = detail::open_store(a.path)->list();
    if (!steps.ok()) return fail("verify", steps.status().message());
    std::uint64_t total = 0;
    for (auto& e : steps.value())
      if (e.complete)
        for (auto& b : e.index->blocks) total += b.length;
    Progress bar("verify " + a.path, total);
    for (auto& e : steps.value()) {
      if (e.kind == EntryKind::tmp || e.kind == EntryKind::doomed || e.kind == EntryKind::abandoned) {
        skipped.push_back(e.name + ": " + e.reason);
        continue;
      }
      if (e.damaged && e.step < 0) {
        // A series step-log record whose step is unknown: nothing to open, and a failure to report.
        Report r;
        r.path = e.path;
        r.step = e.step;
        r.fatal = e.reason;
        reports.push_back(std::move(r));
        continue;
      }
      reports.push_back(verify_one(e.path, &bar, false));
    }
    bar.finish();
    if (reports.empty()) return fail("verify", "no committed checkpoint in " + a.path);
    // A series root: also the bytes of each segment's data files that lie between the steps' streams.
    if (detail::scan_root(a.path).series)
      for (const detail::SegmentLog& seg : detail::read_segments(a.path))
        if (!seg.records.empty()) segments.push_back(verify_segment(seg));
  }
  bool ok = true;
  for (auto& r : reports) ok = ok && r.ok();
  for (auto& r : segments) ok = ok && r.ok();
  if (a.json) {
    json j;
    j["ok"] = ok;
    json arr = json::array();
    for (auto& r : reports) arr.push_back(report_json(r));
    j["checkpoints"] = arr;
    json segs = json::array();
    for (auto& r : segments) {
      json sj = report_json(r);
      sj.erase("step");
      sj.erase("blocks");
      sj.erase("bytes");
      sj.erase("error");
      segs.push_back(std::move(sj));
    }
    j["segments"] = segs;
    j["skipped"] = skipped;
    print_json(j);
  } else {
    for (auto& sk : skipped)
      if (!a.quiet) say("skip %s\n", sk);
    for (auto& r : reports) print_report(r, a.quiet);
    for (auto& r : segments) print_report(r, a.quiet);
  }
  return ok ? kExitOk : kExitBad;
}

}  // namespace ckpt::tools
