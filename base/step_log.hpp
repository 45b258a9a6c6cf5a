// The step log of a series segment (internal): encode and parse, versions 1 and 2. Byte layout and
// the reading rule in docs/format.md ("Step log, version 2", "Step log, version 1"). The store
// (base/series_store.cpp) reads and appends logs through these; the unit tests and the fuzzer call
// parse_step_log() on bytes in memory.
#ifndef CKPT_BASE_STEP_LOG_HPP
#define CKPT_BASE_STEP_LOG_HPP

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "ckpt/status.hpp"

namespace ckpt::detail {

constexpr std::uint32_t kStepLogVersion = 2;       ///< what this build writes (it reads 1 and 2)
constexpr std::size_t kStepLogHeaderBytes = 40;    ///< version 2 (version 1: 32)
constexpr std::size_t kStepRecordFrameBytes = 56;  ///< a version-2 record's header, and its trailer
constexpr std::uint64_t kMaxStepPayload = 1ull << 32;

/// Where a log's bytes come from: a file, or memory (tests, the fuzzer).
class LogBytes {
 public:
  virtual ~LogBytes() = default;
  virtual std::uint64_t size() const = 0;
  /// Reads exactly `n` bytes at `offset` (within size()).
  virtual Status read(std::uint64_t offset, void* out, std::size_t n) const = 0;
};

/// A log in memory. Does not copy: `p` must outlive it.
class MemoryLogBytes final : public LogBytes {
 public:
  MemoryLogBytes(const std::uint8_t* p, std::size_t n) : m_p(p), m_n(n) {}
  std::uint64_t size() const override { return m_n; }
  Status read(std::uint64_t offset, void* out, std::size_t n) const override;

 private:
  const std::uint8_t* m_p;
  std::size_t m_n;
};

/// A log file open for reading (`fd` is not owned; `size` as fstat said).
class FileLogBytes final : public LogBytes {
 public:
  FileLogBytes(int fd, std::uint64_t size, std::string path) : m_fd(fd), m_size(size), m_path(std::move(path)) {}
  std::uint64_t size() const override { return m_size; }
  Status read(std::uint64_t offset, void* out, std::size_t n) const override;

 private:
  int m_fd;
  std::uint64_t m_size;
  std::string m_path;
};

/// One record of a log: complete (its payload, an index, is at [payload, payload + length)) or
/// damaged (it was committed - a later record or its own trailer proves it - but does not validate).
struct LogRecord {
  std::uint64_t seq = 0;             ///< version 2: its sequence number; version 1: its position
  std::optional<std::int64_t> step;  ///< empty: damaged, and its header and trailer are both damaged
  bool damaged = false;
  std::string why;                        ///< damaged: what did not validate
  std::uint64_t begin = 0, end = 0;       ///< its bytes in the log (a damaged stretch: the stretch's)
  std::uint64_t payload = 0, length = 0;  ///< complete records
  bool trailer_ok = true;                 ///< version 2, complete: whether its trailer validates and matches
};

/// A log as parse_step_log() read it.
struct StepLog {
  std::uint32_t version = 0;       ///< 1 or 2; 0 when the header does not validate
  std::uint64_t log_id = 0;        ///< version 2: the id every record repeats
  std::string bad_header;          ///< why the header does not validate (empty when it does)
  std::vector<LogRecord> records;  ///< complete and damaged records, in log order
  std::uint64_t size = 0;          ///< the log's size as read
  std::uint64_t end = 0;           ///< where the next record goes: after the last complete or damaged record
                                   ///< (version 1: padded to 8 bytes, up to 7 past `size`; never appended to)
  std::uint64_t next_seq = 0;      ///< the seq of the next record (version 2)
  std::string torn;                ///< why bytes [end, size) are not a record: a torn tail (empty: there are none)
  std::vector<std::string> notes;  ///< damage that costs no step (a damaged trailer, bytes between records)
};

/// Reads a step log of segment `segment` by the rules of docs/format.md: version 1 stops at the first
/// record that does not hold; version 2 finds records again after a damaged one. Never throws; a
/// read error ends the log there (a torn tail naming the error).
StepLog parse_step_log(const LogBytes& in, std::int64_t segment);

/// A version-2 log's header, and one record of it (header, payload, zeros, trailer).
std::vector<std::uint8_t> encode_step_log_header(std::int64_t segment, std::uint64_t log_id);
std::vector<std::uint8_t> encode_step_record(std::uint64_t log_id, std::uint64_t seq, std::int64_t step,
                                             const std::uint8_t* payload, std::size_t n);
/// A fresh log id: random, never 0.
std::uint64_t new_step_log_id();

/// Version 1, as builds before version 2 wrote it. This build never writes a version-1 log; the tests
/// make them with these to check that they stay readable.
std::vector<std::uint8_t> encode_step_log_header_v1(std::int64_t segment);
std::vector<std::uint8_t> encode_step_record_v1(std::int64_t step, const std::uint8_t* payload, std::size_t n);

}  // namespace ckpt::detail

#endif  // CKPT_BASE_STEP_LOG_HPP
