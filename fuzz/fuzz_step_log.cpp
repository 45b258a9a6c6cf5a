// libFuzzer target: the step-log parser (parse_step_log, docs/format.md "Step log"), versions 1 and 2.
// The input is a log of segment 0. Checked beyond "no crash": every record lies inside the input and
// after the previous one, the log's end is within it, and re-encoding the complete version-2 records
// with the log's id gives a log that parses to the same steps with nothing damaged or torn.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <vector>

#include "base/step_log.hpp"

using namespace ckpt::detail;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const StepLog log = parse_step_log(MemoryLogBytes(data, size), 0);
  if (log.version == 0) return 0;
  // A version-1 log may end inside its last record's padding: its end, the padded one, up to 7 bytes past
  // the input (no build appends to a version-1 log, base/series_store.cpp).
  if (log.end > size + (log.version == 1 ? 7 : 0)) std::abort();
  // Records in log order (the damaged records of one stretch share its bytes).
  std::uint64_t prev_begin = 0;
  for (const LogRecord& r : log.records) {
    if (r.begin < prev_begin || r.end < r.begin || r.end > size + (log.version == 1 ? 7 : 0)) std::abort();
    if (!r.damaged && (r.payload < r.begin || r.payload + r.length > size || !r.step)) std::abort();
    prev_begin = r.begin;
  }
  if (log.version != 2) return 0;
  std::vector<std::uint8_t> again = encode_step_log_header(0, log.log_id);
  std::vector<std::int64_t> steps;
  std::uint64_t seq = 0;
  for (const LogRecord& r : log.records) {
    if (r.damaged) continue;
    const auto rec =
        encode_step_record(log.log_id, seq++, *r.step, data + r.payload, static_cast<std::size_t>(r.length));
    again.insert(again.end(), rec.begin(), rec.end());
    steps.push_back(*r.step);
  }
  const StepLog back = parse_step_log(MemoryLogBytes(again.data(), again.size()), 0);
  if (back.version != 2 || !back.torn.empty() || !back.notes.empty() || back.records.size() != steps.size())
    std::abort();
  for (std::size_t i = 0; i < steps.size(); ++i)
    if (back.records[i].damaged || back.records[i].step != steps[i]) std::abort();
  return 0;
}
