// The step log of a series segment: encode and parse (docs/format.md, "Step log, version 2" and
// "Step log, version 1"). See step_log.hpp.
#include "base/step_log.hpp"

#include <algorithm>
#include <cstring>
#include <map>

#include "base/bytes.hpp"
#include "base/hash.hpp"
#include "base/posix_io.hpp"

namespace ckpt::detail {

namespace {

constexpr char kLogMagic[8] = {'C', 'K', 'P', 'T', 'S', 'E', 'R', 'I'};
constexpr char kHeadMagic[8] = {'C', 'K', 'P', 'T', 'R', 'E', 'C', '2'};
constexpr char kTrailMagic[8] = {'C', 'K', 'P', 'T', 'T', 'R', 'L', '2'};
constexpr char kV1RecordMagic[8] = {'C', 'K', 'P', 'T', 'S', 'T', 'E', 'P'};
constexpr std::size_t kV1LogHeaderBytes = 32;
constexpr std::size_t kV1RecordHeaderBytes = 40;
constexpr std::uint64_t kFrame = kStepRecordFrameBytes;
// Resynchronisation reads the log in windows of this size (plus one frame, so that a frame that
// straddles two windows is seen whole).
constexpr std::uint64_t kScanWindow = 1u << 20;
// A payload's checksum is computed in pieces of this size (a payload may be up to 4 GiB).
constexpr std::size_t kHashPiece = 1u << 20;

std::uint64_t pad8(std::uint64_t n) { return (n + 7) & ~std::uint64_t{7}; }

template <class T>
T load_le(const std::uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

/// A record's header or trailer (the same 56 bytes but for the magic) whose checksum holds.
struct Frame {
  std::uint64_t seq = 0;
  std::int64_t step = 0;
  std::uint64_t n = 0;
  std::uint64_t payload_hash = 0;
};

/// The frame at `b` (56 bytes) if it is a valid one of `magic` in log `log_id` (format.md: "valid
/// header", "valid trailer"). No field of a frame whose checksum fails is looked at.
std::optional<Frame> parse_frame(const std::uint8_t* b, const char (&magic)[8], std::uint64_t log_id) {
  if (std::memcmp(b, magic, 8) != 0 || hash64(b, 48) != load_le<std::uint64_t>(b + 48)) return std::nullopt;
  if (load_le<std::uint64_t>(b + 8) != log_id) return std::nullopt;
  Frame f;
  f.seq = load_le<std::uint64_t>(b + 16);
  f.step = load_le<std::int64_t>(b + 24);
  f.n = load_le<std::uint64_t>(b + 32);
  f.payload_hash = load_le<std::uint64_t>(b + 40);
  if (f.seq >= (1ull << 63) || f.step < 0 || f.n > kMaxStepPayload) return std::nullopt;
  return f;
}

bool frames_match(const Frame& h, const Frame& t) {
  return h.seq == t.seq && h.step == t.step && h.n == t.n && h.payload_hash == t.payload_hash;
}

void encode_frame(ByteWriter& w, const char (&magic)[8], std::uint64_t log_id, std::uint64_t seq, std::int64_t step,
                  std::uint64_t n, std::uint64_t payload_hash) {
  const std::size_t at = w.bytes().size();
  w.raw(magic, 8);
  w.put<std::uint64_t>(log_id);
  w.put<std::uint64_t>(seq);
  w.put<std::int64_t>(step);
  w.put<std::uint64_t>(n);
  w.put<std::uint64_t>(payload_hash);
  w.put<std::uint64_t>(hash64(w.bytes().data() + at, 48));
}

/// XXH3-64 of bytes [offset, offset + n) of the log, read in pieces. Empty on a read error.
std::optional<std::uint64_t> hash_range(const LogBytes& in, std::uint64_t offset, std::uint64_t n) {
  Hasher h;
  std::vector<std::uint8_t> buf(static_cast<std::size_t>(std::min<std::uint64_t>(n, kHashPiece)));
  for (std::uint64_t done = 0; done < n;) {
    const std::size_t k = static_cast<std::size_t>(std::min<std::uint64_t>(n - done, kHashPiece));
    if (!in.read(offset + done, buf.data(), k).ok()) return std::nullopt;
    h.update(buf.data(), k);
    done += k;
  }
  return h.digest();
}

std::string range(std::uint64_t a, std::uint64_t b) { return "bytes " + std::to_string(a) + ".." + std::to_string(b); }

void parse_v1(const LogBytes& in, StepLog& log) {
  const std::uint64_t size = log.size;
  std::uint64_t pos = kV1LogHeaderBytes;
  std::uint8_t head[kV1RecordHeaderBytes];
  std::uint64_t seq = 0;
  while (pos < size) {
    if (size - pos < kV1RecordHeaderBytes || !in.read(pos, head, sizeof head).ok()) {
      log.torn = "a short record header";
      break;
    }
    if (std::memcmp(head, kV1RecordMagic, 8) != 0 || hash64(head, 32) != load_le<std::uint64_t>(head + 32)) {
      log.torn = "its header does not validate";
      break;
    }
    LogRecord r;
    r.seq = seq;
    r.step = load_le<std::int64_t>(head + 8);
    r.length = load_le<std::uint64_t>(head + 16);
    r.begin = pos;
    r.payload = pos + kV1RecordHeaderBytes;
    if (*r.step < 0 || r.length > kMaxStepPayload || r.length > size - r.payload) {
      log.torn = "its index is cut off";
      break;
    }
    auto digest = hash_range(in, r.payload, r.length);
    if (!digest || *digest != load_le<std::uint64_t>(head + 24)) {
      log.torn = "its index does not match its checksum";
      break;
    }
    // A log may end inside its last record's padding (nobody reads the padding).
    r.end = pad8(r.payload + r.length);
    pos = std::min<std::uint64_t>(size, r.end);
    log.records.push_back(std::move(r));
    ++seq;
  }
  log.end = log.records.empty() ? kV1LogHeaderBytes : log.records.back().end;
  log.next_seq = seq;
}

/// What resynchronisation found from p (format.md, "Reading", step 2).
struct Scan {
  std::optional<std::uint64_t> next;                      ///< offset of G
  std::optional<Frame> next_frame;                        ///< G
  std::vector<std::pair<std::uint64_t, Frame>> trailers;  ///< valid trailers with seq >= e, by offset
  bool read_error = false;
};

Scan resync(const LogBytes& in, std::uint64_t p, bool skip_p, std::uint64_t e, std::uint64_t log_id,
            std::uint64_t size) {
  Scan sc;
  std::vector<std::uint8_t> win;
  std::uint64_t q = skip_p ? p + 8 : p;
  while (q + kFrame <= size) {
    const std::uint64_t w_end = std::min(size, q + kScanWindow + kFrame);
    win.resize(static_cast<std::size_t>(w_end - q));
    if (!in.read(q, win.data(), win.size()).ok()) {
      sc.read_error = true;
      return sc;
    }
    for (std::uint64_t off = 0; off + kFrame <= win.size(); off += 8) {
      const std::uint8_t* b = win.data() + off;
      if (b[0] != 'C') continue;  // both magics start with 'C': most offsets end here
      if (auto g = parse_frame(b, kHeadMagic, log_id); g && g->seq >= e) {
        sc.next = q + off;
        sc.next_frame = g;
        return sc;
      }
      if (auto t = parse_frame(b, kTrailMagic, log_id); t && t->seq >= e) sc.trailers.emplace_back(q + off, *t);
    }
    // The next window starts at the first offset this one did not try.
    q += (win.size() - kFrame) / 8 * 8 + 8;
  }
  return sc;
}

void parse_v2(const LogBytes& in, StepLog& log) {
  const std::uint64_t size = log.size;
  std::uint64_t p = kStepLogHeaderBytes;
  std::uint64_t e = 0;
  std::uint8_t fb[kFrame];
  while (p < size) {
    // 1. In place: a valid header of the expected seq whose record fits.
    std::optional<Frame> h;
    if (size - p >= kFrame) {
      if (!in.read(p, fb, kFrame).ok()) {
        log.torn = "it cannot be read";
        break;
      }
      h = parse_frame(fb, kHeadMagic, log.log_id);
    }
    const bool at_p = h && h->seq == e;  // a header of this very record (whatever follows)
    std::string why;
    if (at_p) {
      const std::uint64_t total = 2 * kFrame + pad8(h->n);
      if (total <= size - p) {
        LogRecord r;
        r.seq = e;
        r.step = h->step;
        r.begin = p;
        r.end = p + total;
        r.payload = p + kFrame;
        r.length = h->n;
        std::optional<Frame> t;
        if (in.read(p + kFrame + pad8(h->n), fb, kFrame).ok()) t = parse_frame(fb, kTrailMagic, log.log_id);
        r.trailer_ok = t && frames_match(*h, *t);
        auto digest = hash_range(in, r.payload, r.length);
        // The padding: zeros that nobody reads; a flip there costs nothing but is damage all the same.
        std::uint8_t pad[8] = {};
        const std::size_t npad = static_cast<std::size_t>(pad8(h->n) - h->n);
        if (npad > 0 && in.read(r.payload + r.length, pad, npad).ok() &&
            std::any_of(pad, pad + npad, [](std::uint8_t c) { return c != 0; }))
          log.notes.push_back("the padding of record " + std::to_string(e) + " (step " + std::to_string(h->step) +
                              ", " + range(r.payload + r.length, r.payload + pad8(h->n)) + ") is not zero");
        if (digest && *digest == h->payload_hash) {
          if (!r.trailer_ok)
            log.notes.push_back("the trailer of record " + std::to_string(e) + " (step " + std::to_string(h->step) +
                                ", " + range(r.begin, r.end) + ") is damaged; its header and payload hold");
          log.records.push_back(std::move(r));
          p = log.records.back().end;
          ++e;
          continue;
        }
        if (r.trailer_ok) {
          r.damaged = true;
          r.why = digest ? "its payload does not match its checksum" : "its payload cannot be read";
          log.records.push_back(std::move(r));
          p = log.records.back().end;
          ++e;
          continue;
        }
        why = digest ? "its payload does not match its checksum" : "its payload cannot be read";
      } else {
        why = "its record is cut off";
      }
    } else {
      why = size - p < kFrame ? "a short record header" : "its header does not validate";
    }
    // 2. Resynchronise on the next valid header of this seq or a later one.
    Scan sc = resync(in, p, at_p, e, log.log_id, size);
    if (sc.read_error) {
      log.torn = "it cannot be read";
      break;
    }
    const std::uint64_t stop = sc.next.value_or(size);
    // The trailers wholly before G (a crafted one overlapping G is not one).
    std::vector<std::pair<std::uint64_t, Frame>> trailers;
    for (auto& t : sc.trailers)
      if (t.first + kFrame <= stop) trailers.push_back(t);
    std::uint64_t last = 0;  // the seq after the last damaged record
    std::uint64_t stretch_end = stop;
    if (sc.next) {
      last = sc.next_frame->seq;
    } else if (!trailers.empty()) {
      last = trailers.back().second.seq + 1;
      stretch_end = trailers.back().first + kFrame;
    } else {
      log.torn = why;
      break;
    }
    if (last == e) log.notes.push_back(range(p, stretch_end) + " between records are not a record (" + why + ")");
    // The step of each damaged record: its own header's (seq e at p), else its last trailer's.
    std::map<std::uint64_t, std::int64_t> trailer_step;
    for (auto& t : trailers) trailer_step[t.second.seq] = t.second.step;
    // Each record takes at least 2 frames: a seq that claims more records than the stretch can hold
    // (lost bytes, or a forgery) is listed as one damaged stretch, never as billions of records.
    const std::uint64_t fit = std::max<std::uint64_t>(1, (stretch_end - p) / (2 * kFrame));
    const std::string claim =
        " (" + range(p, stretch_end) + " hold records " + std::to_string(e) + ".." + std::to_string(last - 1) + ")";
    if (last - e > fit) {
      LogRecord r;
      r.seq = e;
      r.damaged = true;
      r.trailer_ok = false;
      r.begin = p;
      r.end = stretch_end;
      r.why = why + claim + ": more records than fit in those bytes";
      log.records.push_back(std::move(r));
    } else {
      for (std::uint64_t s = e; s < last; ++s) {
        LogRecord r;
        r.seq = s;
        r.damaged = true;
        r.trailer_ok = false;
        r.begin = p;
        r.end = stretch_end;
        if (s == e && at_p) {
          r.step = h->step;
        } else if (auto it = trailer_step.find(s); it != trailer_step.end()) {
          r.step = it->second;
        }
        r.why = (s == e ? why : std::string("its bytes are lost")) + claim;
        log.records.push_back(std::move(r));
      }
    }
    e = last;
    p = stretch_end;
    if (!sc.next) {
      if (p < size) log.torn = "bytes after the trailer of record " + std::to_string(last - 1) + " are not a record";
      break;
    }
  }
  log.end = p;  // every record read fits in the file: p <= size
  log.next_seq = e;
}

}  // namespace

Status MemoryLogBytes::read(std::uint64_t offset, void* out, std::size_t n) const {
  if (offset > m_n || n > m_n - offset)
    return Status(Code::corrupt,
                  "read of " + range(offset, offset + n) + " past the log's end (" + std::to_string(m_n) + ")");
  if (n > 0) std::memcpy(out, m_p + offset, n);
  return Status::OK();
}

Status FileLogBytes::read(std::uint64_t offset, void* out, std::size_t n) const {
  if (offset > m_size || n > m_size - offset)
    return Status(Code::corrupt, "read of " + range(offset, offset + n) + " past the end of " + m_path);
  return pread_all(m_fd, out, n, offset, m_path);
}

StepLog parse_step_log(const LogBytes& in, std::int64_t segment) {
  StepLog log;
  log.size = in.size();
  std::uint8_t head[kStepLogHeaderBytes] = {};
  const std::size_t have = static_cast<std::size_t>(std::min<std::uint64_t>(log.size, kStepLogHeaderBytes));
  auto bad = [&](const std::string& why) {
    log.version = 0;
    log.bad_header = why;
    log.end = 0;
    return log;
  };
  if (log.size < kV1LogHeaderBytes) return bad("it is too short for a header");
  if (!in.read(0, head, have).ok()) return bad("it cannot be read");
  if (std::memcmp(head, kLogMagic, 8) != 0) return bad("it does not start with CKPTSERI");
  const std::uint32_t version = load_le<std::uint32_t>(head + 8);
  if (version == 1) {
    if (hash64(head, 24) != load_le<std::uint64_t>(head + 24)) return bad("its header checksum fails");
    if (load_le<std::uint32_t>(head + 12) != 0) return bad("its header has flags this build does not know");
    if (load_le<std::int64_t>(head + 16) != segment) return bad("its header names another segment");
    log.version = 1;
    parse_v1(in, log);
    return log;
  }
  if (version != kStepLogVersion) return bad("its version " + std::to_string(version) + " is not one this build reads");
  if (log.size < kStepLogHeaderBytes) return bad("it is too short for a header");
  if (hash64(head, 32) != load_le<std::uint64_t>(head + 32)) return bad("its header checksum fails");
  if (load_le<std::uint32_t>(head + 12) != 0) return bad("its header has flags this build does not know");
  if (load_le<std::int64_t>(head + 16) != segment) return bad("its header names another segment");
  log.log_id = load_le<std::uint64_t>(head + 24);
  if (log.log_id == 0) return bad("its log id is 0");
  log.version = 2;
  parse_v2(in, log);
  return log;
}

std::vector<std::uint8_t> encode_step_log_header(std::int64_t segment, std::uint64_t log_id) {
  ByteWriter w;
  w.raw(kLogMagic, 8);
  w.put<std::uint32_t>(kStepLogVersion);
  w.put<std::uint32_t>(0);
  w.put<std::int64_t>(segment);
  w.put<std::uint64_t>(log_id);
  w.put<std::uint64_t>(hash64(w.bytes().data(), w.bytes().size()));
  return std::move(w.bytes());
}

std::vector<std::uint8_t> encode_step_record(std::uint64_t log_id, std::uint64_t seq, std::int64_t step,
                                             const std::uint8_t* payload, std::size_t n) {
  const std::uint64_t ph = hash64(payload, n);
  ByteWriter w;
  encode_frame(w, kHeadMagic, log_id, seq, step, n, ph);
  w.raw(payload, n);
  w.bytes().resize(static_cast<std::size_t>(kFrame + pad8(n)), 0);
  encode_frame(w, kTrailMagic, log_id, seq, step, n, ph);
  return std::move(w.bytes());
}

std::uint64_t new_step_log_id() {
  const std::uint64_t id = random64();  // not a secret, only distinct
  return id == 0 ? 1 : id;
}

std::vector<std::uint8_t> encode_step_log_header_v1(std::int64_t segment) {
  ByteWriter w;
  w.raw(kLogMagic, 8);
  w.put<std::uint32_t>(1);
  w.put<std::uint32_t>(0);
  w.put<std::int64_t>(segment);
  w.put<std::uint64_t>(hash64(w.bytes().data(), w.bytes().size()));
  return std::move(w.bytes());
}

std::vector<std::uint8_t> encode_step_record_v1(std::int64_t step, const std::uint8_t* payload, std::size_t n) {
  ByteWriter w;
  w.raw(kV1RecordMagic, 8);
  w.put<std::int64_t>(step);
  w.put<std::uint64_t>(n);
  w.put<std::uint64_t>(hash64(payload, n));
  w.put<std::uint64_t>(hash64(w.bytes().data(), w.bytes().size()));
  w.raw(payload, n);
  w.bytes().resize(static_cast<std::size_t>(pad8(w.bytes().size())), 0);
  return std::move(w.bytes());
}

}  // namespace ckpt::detail
