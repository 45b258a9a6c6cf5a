// The options table made executable (internal): one OptionRow per row of CKPT_OPTIONS
// (ckpt/options.hpp), built in runtime/src/api/options.cpp. The readers (YAML, CKPT_*), validate(), the
// printing of options and the agreement of the ranks on the job-wide ones (resolve.cpp) go through it.
#ifndef CKPT_RUNTIME_SRC_OPTION_TABLE_HPP
#define CKPT_RUNTIME_SRC_OPTION_TABLE_HPP

#include <functional>
#include <string>
#include <vector>

#include "ckpt/options.hpp"

namespace ckpt::detail {

/// Whether the ranks must agree on an option (the `scope` column of CKPT_OPTIONS).
enum class OptionScope {
  job,      ///< the value, on every rank
  job_set,  ///< whether it is set (non-empty); the value may differ per node
  rank,     ///< nothing: may differ from rank to rank
};
const char* scope_name(OptionScope s);

struct OptionRow {
  const char* group;
  OptionScope scope;
  const char* key;  ///< YAML key and field name; the variable is env_name(key)
  const char* doc;
  std::string allowed;       ///< what the parser accepts, for messages and docs
  std::string default_text;  ///< the default, in the spelling files take
  std::function<Status(Options&, const std::string&)> set;  ///< parses text into the field (range-checked)
  std::function<std::string(const Options&)> get;           ///< the field in the spelling files take
  std::function<Status(const Options&)> check;              ///< the field within its allowed values
};

/// Every row, in table order.
const std::vector<OptionRow>& option_rows();
/// The row of `key`, or null.
const OptionRow* find_option(const std::string& key);
/// CKPT_<KEY upper-cased>.
std::string env_name(const std::string& key);

/// A test knob: a CKPT_TEST_* variable the Runtime reads (never a field of Options, never in YAML).
struct TestKnob {
  const char* variable;
  const char* doc;
};
const std::vector<TestKnob>& test_knobs();
/// A knob's value in ms (0 when unset or not a number in 0..600000).
int test_knob_ms(const char* variable);

}  // namespace ckpt::detail

#endif  // CKPT_RUNTIME_SRC_OPTION_TABLE_HPP
