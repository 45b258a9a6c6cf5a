// The one place where options are read: the rows of CKPT_OPTIONS (ckpt/options.hpp) become a table of
// parsers, printers and range checks here, which the YAML and CKPT_* readers, validate(), to_yaml(),
// describe_options() and the agreement across ranks (runtime/src/api/resolve.cpp) all use.
#include "ckpt/options.hpp"

#include "runtime/src/api/resolve.hpp"
#include "runtime/src/api/option_table.hpp"

#include <fcntl.h>
#include <sched.h>
#include <sys/stat.h>
#include <unistd.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

extern char** environ;

namespace ckpt {
namespace detail {
namespace {

Status bad_value(const std::string& key, const std::string& value, const std::string& allowed) {
  return Status(Code::invalid_argument, "option '" + key + "': bad value '" + value + "' (allowed: " + allowed + ")");
}

bool parse_integer(const std::string& v, long long* out) {
  char* end = nullptr;
  errno = 0;
  const long long x = std::strtoll(v.c_str(), &end, 10);
  if (v.empty() || *end != '\0' || errno != 0) return false;
  *out = x;
  return true;
}

/// "64M" for 64 MiB: the largest binary unit that divides the value, as parse_bytes reads it.
std::string print_bytes(std::uint64_t v) {
  static const char* const units[] = {"T", "G", "M", "K"};
  for (int i = 0; i < 4; ++i) {
    const int shift = 40 - 10 * i;
    if (v != 0 && v % (std::uint64_t{1} << shift) == 0) return std::to_string(v >> shift) + units[i];
  }
  return std::to_string(v);
}

// ---- option specs: how a row's text becomes its value -----------------------------------------------
// Each spec has value_type, parse(text) -> Result (the message says what is allowed), print(value) in the
// spelling parse reads, valid(value) for a value set in code, and allowed() for messages and the docs.

template <class E>
struct Named {
  const char* name;
  E value;
};

const Named<OnBusy> kOnBusy[] = {{"wait", OnBusy::wait}, {"coalesce", OnBusy::coalesce}};
const Named<Layout> kLayout[] = {{"directory", Layout::directory}, {"series", Layout::series}};
const Named<DoubleBuffer> kDoubleBuffer[] = {{"off", DoubleBuffer::off}, {"on", DoubleBuffer::on}};
const Named<MpiThreads> kMpiThreads[] = {{"multiple", MpiThreads::multiple}, {"funneled", MpiThreads::funneled}};
const Named<Redundancy> kRedundancy[] = {
    {"none", Redundancy::none}, {"partner", Redundancy::partner}, {"xor", Redundancy::xor_parity}};
const Named<const char*> kRomioCbWrite[] = {{"enable", "enable"}, {"disable", "disable"}, {"automatic", "automatic"}};

template <class E, std::size_t N>
std::string named_list(const Named<E> (&table)[N], const char* sep = ", ", const char* last = ", ") {
  std::string s;
  for (std::size_t i = 0; i < N; ++i) s += std::string(i == 0 ? "" : i + 1 == N ? last : sep) + table[i].name;
  return s;
}

template <class E, std::size_t N>
struct OneOf {
  using value_type = E;
  const Named<E> (&table)[N];
  Result<E> parse(const std::string& t) const {
    for (const auto& n : table)
      if (t == n.name) return n.value;
    return Status(Code::invalid_argument, "'" + t + "' is not " + named_list(table, ", ", " or "));
  }
  std::string print(E v) const {
    for (const auto& n : table)
      if (n.value == v) return n.name;
    return "?" + std::to_string(static_cast<int>(v));
  }
  bool valid(E v) const { return print(v)[0] != '?'; }
  std::string allowed() const { return named_list(table); }
};
template <class E, std::size_t N>
OneOf<E, N> one_of(const Named<E> (&table)[N]) {
  return {table};
}

struct Boolean {
  using value_type = bool;
  Result<bool> parse(const std::string& t) const {
    std::string l;
    for (char c : t) l += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (l == "1" || l == "true" || l == "on" || l == "yes") return true;
    if (l == "0" || l == "false" || l == "off" || l == "no") return false;
    return Status(Code::invalid_argument, "not a boolean");
  }
  std::string print(bool v) const { return v ? "true" : "false"; }
  bool valid(bool) const { return true; }
  std::string allowed() const { return "true/false, on/off, yes/no, 1/0"; }
};
Boolean boolean() { return {}; }

struct IntRange {
  using value_type = int;
  long long lo, hi;
  Result<int> parse(const std::string& t) const {
    long long x = 0;
    if (!parse_integer(t, &x) || x < lo || x > hi) return Status(Code::invalid_argument, "out of range");
    return static_cast<int>(x);
  }
  std::string print(int v) const { return std::to_string(v); }
  bool valid(int v) const { return v >= lo && v <= hi; }
  std::string allowed() const { return std::to_string(lo) + ".." + std::to_string(hi); }
};
IntRange range(long long lo, long long hi) { return {lo, hi}; }

/// thread_slice_us: 0 (the kernel's default) or 100..100000.
struct SliceUs {
  using value_type = int;
  Result<int> parse(const std::string& t) const {
    long long x = 0;
    if (!parse_integer(t, &x) || !valid(x)) return Status(Code::invalid_argument, "out of range");
    return static_cast<int>(x);
  }
  std::string print(int v) const { return std::to_string(v); }
  bool valid(long long v) const { return v == 0 || (v >= 100 && v <= 100000); }
  std::string allowed() const { return "0 (the kernel's default) or 100..100000"; }
};
SliceUs slice_us() { return {}; }

struct Bytes {
  using value_type = std::uint64_t;
  std::uint64_t lo, hi, multiple;
  bool pow2;
  Result<std::uint64_t> parse(const std::string& t) const {
    auto b = parse_bytes(t);
    if (!b.ok()) return b.status();
    if (!valid(b.value())) return Status(Code::invalid_argument, "out of range");
    return b.value();
  }
  std::string print(std::uint64_t v) const { return print_bytes(v); }
  bool valid(std::uint64_t v) const {
    return v >= lo && v <= hi && v % multiple == 0 && (!pow2 || (v & (v - 1)) == 0);
  }
  std::string allowed() const {
    std::string s = pow2 ? "a power of two " : "a byte count ";
    s += print_bytes(lo) + ".." + (hi == UINT64_MAX ? std::string("") : print_bytes(hi));
    if (multiple > 1) s += ", a multiple of " + print_bytes(multiple);
    return s + " (K, M, G, T: binary units)";
  }
};
Bytes bytes(std::uint64_t lo, std::uint64_t hi, std::uint64_t multiple = 1) { return {lo, hi, multiple, false}; }
Bytes power_of_two(std::uint64_t lo, std::uint64_t hi) { return {lo, hi, 1, true}; }

/// The whole of `t` as a number (strtod, nothing left over), or nothing; and a number as options print it.
std::optional<double> parse_number(const std::string& t) {
  char* end = nullptr;
  const double x = std::strtod(t.c_str(), &end);
  if (t.empty() || *end != '\0') return std::nullopt;
  return x;
}
std::string print_number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

struct Fraction {
  using value_type = double;
  double max;
  Result<double> parse(const std::string& t) const {
    const auto x = parse_number(t);
    if (!x || !valid(*x)) return Status(Code::invalid_argument, "out of range");
    return *x;
  }
  std::string print(double v) const { return print_number(v); }
  bool valid(double v) const { return v > 0 && v <= max; }
  std::string allowed() const { return "a number in (0, " + print(max) + "]"; }
};
Fraction fraction(double max) { return {max}; }

/// background_cpu: off (or 0: no budget) or a share of one core in [0.01, 1].
struct CpuBudget {
  using value_type = double;
  Result<double> parse(const std::string& t) const {
    if (t == "off") return 0.0;
    const auto x = parse_number(t);
    if (!x || !valid(*x)) return Status(Code::invalid_argument, "out of range");
    return *x;
  }
  std::string print(double v) const { return v == 0 ? "off" : print_number(v); }
  bool valid(double v) const { return v == 0 || (v >= 0.01 && v <= 1); }
  std::string allowed() const { return "off (or 0: no limit), or a share of one core in [0.01, 1]"; }
};
CpuBudget cpu_budget() { return {}; }

/// Free text; `nonempty` for a path that must be given. A NUL byte is refused: the path would end there.
struct Text {
  using value_type = std::string;
  bool nonempty;
  const char* what;
  Result<std::string> parse(const std::string& t) const {
    if (!valid(t)) return Status(Code::invalid_argument, "not allowed");
    return t;
  }
  std::string print(const std::string& v) const { return v; }
  bool valid(const std::string& v) const { return (!nonempty || !v.empty()) && v.find('\0') == std::string::npos; }
  std::string allowed() const { return what; }
};
Text path() { return {true, "a non-empty path"}; }
Text text() { return {false, "a path, or empty (off)"}; }
Text transport_name() { return {true, "posix, mpiio, rbio, hdf5, hdf5-sync, null"}; }

struct Hints {
  using value_type = std::string;
  Result<std::string> parse(const std::string& t) const {
    auto h = parse_mpiio_hints(t);
    if (!h.ok()) return h.status();
    return t;
  }
  std::string print(const std::string& v) const { return v; }
  bool valid(const std::string& v) const { return parse_mpiio_hints(v).ok(); }
  std::string allowed() const {
    return "key=value,... of cb_buffer_size, striping_unit (byte counts), cb_nodes, striping_factor (1..16777216), "
           "romio_cb_write (" +
           named_list(kRomioCbWrite, "/", "/") + ")";
  }
};
Hints mpiio_hints() { return {}; }

struct CpuList {
  using value_type = std::string;
  Result<std::string> parse(const std::string& t) const {
    if (t == "all" || t == "inherit") return t;
    auto c = parse_cpu_list("thread_cpus", t);
    if (!c.ok()) return c.status();
    return t;
  }
  std::string print(const std::string& v) const { return v; }
  bool valid(const std::string& v) const { return parse(v).ok(); }
  std::string allowed() const { return "all, inherit, or CPUs like 0-3,8 (each below " + std::to_string(CPU_SETSIZE) + ")"; }
};
CpuList cpu_list() { return {}; }

/// An automatic choice: `auto` <-> an unset optional. The plain 0 that meant auto before auto was
/// spelled out is still read as auto where 0 is not a value of the inner spec (files of older runs).
template <class Inner>
struct AutoOr {
  using value_type = std::optional<typename Inner::value_type>;
  Inner inner;
  Result<value_type> parse(const std::string& t) const {
    if (t == "auto") return value_type{};
    auto v = inner.parse(t);
    if (v.ok()) return value_type{std::move(v).value()};
    if (t == "0") return value_type{};  // the former spelling of auto
    return Status(Code::invalid_argument, "'" + t + "' is not one of: " + allowed());
  }
  std::string print(const value_type& v) const { return v ? inner.print(*v) : "auto"; }
  bool valid(const value_type& v) const { return !v || inner.valid(*v); }
  std::string allowed() const { return "auto, " + inner.allowed(); }
};
template <class Inner>
AutoOr<Inner> auto_or(Inner inner) {
  return {inner};
}

// ---- the table --------------------------------------------------------------------------------------

template <class Spec, class T>
OptionRow make_row(const char* group, OptionScope scope, const char* key, const char* doc, T Options::*member,
                   const T& def, Spec spec) {
  static_assert(std::is_same<typename Spec::value_type, T>::value, "a spec must parse its field's type");
  OptionRow r;
  r.group = group;
  r.scope = scope;
  r.key = key;
  r.doc = doc;
  r.allowed = spec.allowed();
  r.default_text = spec.print(def);
  r.set = [spec, member, key](Options& o, const std::string& t) -> Status {
    auto v = spec.parse(t);
    if (!v.ok()) return bad_value(key, t, spec.allowed());
    o.*member = std::move(v).value();
    return Status::OK();
  };
  r.get = [spec, member](const Options& o) { return spec.print(o.*member); };
  r.check = [spec, member, key](const Options& o) -> Status {
    if (spec.valid(o.*member)) return Status::OK();
    return Status(Code::invalid_argument,
                  "option '" + std::string(key) + "' is " + spec.print(o.*member) + " (allowed: " + spec.allowed() + ")");
  };
  return r;
}

}  // namespace

const char* scope_name(OptionScope s) {
  switch (s) {
    case OptionScope::job: return "job";
    case OptionScope::job_set: return "job_set";
    case OptionScope::rank: return "rank";
  }
  return "?";
}

const std::vector<OptionRow>& option_rows() {
  static const std::vector<OptionRow> rows = [] {
    std::vector<OptionRow> r;
#define CKPT_IMPL_OPTION_ROW(group, scope, type, name, def, spec, doc) \
  r.push_back(make_row(#group, OptionScope::scope, #name, doc, &Options::name, type(def), spec));
    CKPT_OPTIONS(CKPT_IMPL_OPTION_ROW)
#undef CKPT_IMPL_OPTION_ROW
    return r;
  }();
  return rows;
}

const OptionRow* find_option(const std::string& key) {
  for (auto& r : option_rows())
    if (key == r.key) return &r;
  return nullptr;
}

std::string env_name(const std::string& key) {
  std::string s = "CKPT_";
  for (char c : key) s += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

// ---- test knobs: CKPT_TEST_* variables, read by the Runtime, never fields of Options -------------------

const std::vector<TestKnob>& test_knobs() {
  static const std::vector<TestKnob> k = {
      {"CKPT_TEST_FLUSH_DELAY_MS", "the flush thread sleeps this many ms before each chunk write (0..600000)"},
  };
  return k;
}

int test_knob_ms(const char* name) {
  const char* v = std::getenv(name);
  long long x = 0;
  if (v == nullptr || !parse_integer(v, &x) || x < 0 || x > 600000) return 0;
  return static_cast<int>(x);
}

Result<Attributes> parse_mpiio_hints(const std::string& v) {
  // Values are checked here: ROMIO divides by cb_nodes (0 is SIGFPE) and indexes with it (-5 is
  // SIGSEGV), so nothing unchecked may reach MPI_Info_set. Byte counts may carry a unit ("16M"),
  // which ROMIO would read as 16: they leave here in bytes.
  const std::string allowed =
      "key=value,... with cb_buffer_size and striping_unit byte counts (like 16M), cb_nodes and "
      "striping_factor from 1 to 16777216, romio_cb_write " +
      named_list(kRomioCbWrite, "/", "/");
  Attributes out;
  std::size_t p = 0;
  while (p < v.size()) {
    std::size_t e = v.find(',', p);
    if (e == std::string::npos) e = v.size();
    const std::string kv = v.substr(p, e - p);
    const std::size_t eq = kv.find('=');
    if (eq == std::string::npos || eq + 1 >= kv.size()) return bad_value("mpiio_hints", v, allowed);
    const std::string k = kv.substr(0, eq);
    std::string val = kv.substr(eq + 1);
    for (auto& seen : out)
      if (seen.first == k) return bad_value("mpiio_hints", v, "each key at most once; " + allowed);
    bool good = false;
    long long x = 0;
    if (k == "cb_buffer_size" || k == "striping_unit") {
      auto b = parse_bytes(val);
      good = b.ok() && b.value() >= 1 && b.value() <= (1ull << 31) - 1;  // MPI_Info values are int
      if (good) val = std::to_string(b.value());
    } else if (k == "cb_nodes" || k == "striping_factor") {
      good = parse_integer(val, &x) && x >= 1 && x <= (1 << 24);
    } else if (k == "romio_cb_write") {
      for (const auto& n : kRomioCbWrite) good = good || val == n.name;
    }
    if (!good) return bad_value("mpiio_hints", v, allowed + "; '" + kv + "' is not");
    out.emplace_back(k, val);
    p = e + 1;
  }
  return out;
}

Result<std::vector<int>> parse_cpu_list(const std::string& key, const std::string& v) {
  const std::string allowed =
      "auto, all, inherit, or CPU numbers and ranges such as 0-3,8 (each below " + std::to_string(CPU_SETSIZE) + ")";
  std::vector<int> cpus;
  std::size_t p = 0;
  while (p <= v.size()) {
    std::size_t e = v.find(',', p);
    if (e == std::string::npos) e = v.size();
    const std::string item = v.substr(p, e - p);
    const std::size_t dash = item.find('-');
    long long lo = 0, hi = 0;
    const bool good = parse_integer(item.substr(0, dash), &lo) &&
                      (dash == std::string::npos ? (hi = lo, true) : parse_integer(item.substr(dash + 1), &hi));
    if (item.empty() || !good || lo < 0 || hi < lo || hi >= CPU_SETSIZE) return bad_value(key, v, allowed);
    for (auto c = lo; c <= hi; ++c) cpus.push_back(static_cast<int>(c));
    p = e + 1;
  }
  return cpus;
}

}  // namespace detail

using detail::option_rows;

namespace {

/// Levenshtein distance between a and b (short names: the quadratic table is nothing).
std::size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diag = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

/// The nearest of `known` to `name`, when it is near enough to be a misspelling; else empty.
std::string nearest(const std::string& name, const std::vector<std::string>& known) {
  std::string best;
  std::size_t best_d = SIZE_MAX;
  for (const auto& k : known) {
    const std::size_t d = edit_distance(name, k);
    if (d < best_d) best_d = d, best = k;
  }
  // A misspelling is a few edits away; CKPT_ROOT is not "CKPT_DIR misspelt".
  return best_d <= std::max<std::size_t>(2, name.size() / 5) ? best : std::string();
}

std::vector<std::string> known_variables() {
  std::vector<std::string> v;
  for (auto& r : option_rows()) v.push_back(detail::env_name(r.key));
  return v;
}

std::string known_keys() {
  std::string s;
  for (auto& r : option_rows()) s += (s.empty() ? "" : ", ") + std::string(r.key);
  return s + ", groups";
}

Status parse_groups(Options& o, const YAML::Node& node) {
  if (!node.IsSequence()) return Status(Code::invalid_argument, "'groups' must be a list of {name, match, transport}");
  for (const auto& g : node) {
    if (!g.IsMap())
      return Status(Code::invalid_argument, "each entry of 'groups' must be a map with name, match, transport");
    Options::Group grp;
    for (auto it = g.begin(); it != g.end(); ++it) {
      const std::string k = it->first.as<std::string>("");
      if (k == "name" && it->second.IsScalar())
        grp.name = it->second.Scalar();
      else if (k == "transport" && it->second.IsScalar())
        grp.transport = it->second.Scalar();
      else if (k == "match" && it->second.IsScalar())
        grp.match.push_back(it->second.Scalar());
      else if (k == "match" && it->second.IsSequence()) {
        const YAML::Node matches = it->second;  // a copy: `it->second` lives in a temporary proxy
        for (const auto& m : matches) grp.match.push_back(m.as<std::string>(""));
      } else
        return Status(Code::invalid_argument,
                      "groups: unknown or malformed key '" + k + "' (known: name, match, transport)");
    }
    if (grp.name.empty() || grp.transport.empty() || grp.match.empty())
      return Status(Code::invalid_argument,
                    "groups: every group needs a name, a transport and at least one match pattern");
    for (auto& other : o.groups)
      if (other.name == grp.name)
        return Status(Code::invalid_argument, "groups: group '" + grp.name + "' is defined twice");
    o.groups.push_back(std::move(grp));
  }
  return Status();
}

/// A YAML scalar for `s`: double-quoted with escapes when plain would not read back as the same text.
std::string yaml_scalar(const std::string& s) {
  const auto control = [](char c) {
    const auto u = static_cast<unsigned char>(c);
    return u < 0x20 || u == 0x7f;
  };
  if (std::none_of(s.begin(), s.end(), control)) {
    YAML::Emitter e;
    e << s;
    return e.c_str();
  }
  // yaml-cpp's emitter writes control characters as they are, and a reader drops a trailing line break
  // (fuzz_options: "dir: \rx\r" read back as "\rx"): double-quoted, control characters escaped. Bytes
  // from 0x80 stay as they are (a path need not be UTF-8; \x escapes would read back as code points).
  std::string q = "\"";
  for (const char c : s) {
    if (c == '"' || c == '\\') {
      q += '\\';
      q += c;
    } else if (control(c)) {
      char hex[8];
      std::snprintf(hex, sizeof hex, "\\x%02x", static_cast<unsigned>(static_cast<unsigned char>(c)));
      q += hex;
    } else {
      q += c;
    }
  }
  return q + "\"";
}

}  // namespace

Result<OnBusy> parse_on_busy(const std::string& text) { return detail::one_of(detail::kOnBusy).parse(text); }
const char* on_busy_name(OnBusy v) noexcept { return v == OnBusy::coalesce ? "coalesce" : "wait"; }
Result<Layout> parse_layout(const std::string& text) { return detail::one_of(detail::kLayout).parse(text); }
Result<AutoDoubleBuffer> parse_double_buffer(const std::string& text) {
  return detail::auto_or(detail::one_of(detail::kDoubleBuffer)).parse(text);
}

Result<std::uint64_t> parse_bytes(const std::string& text) {
  if (text.empty()) return Status(Code::invalid_argument, "empty byte count");
  std::size_t i = 0;
  std::uint64_t v = 0;
  while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i]))) {
    if (v > (UINT64_MAX - 9) / 10) return Status(Code::invalid_argument, "byte count '" + text + "' too large");
    v = v * 10 + static_cast<std::uint64_t>(text[i] - '0');
    ++i;
  }
  if (i == 0) return Status(Code::invalid_argument, "byte count '" + text + "' does not start with a number");
  std::string unit;
  for (; i < text.size(); ++i) unit += static_cast<char>(std::tolower(static_cast<unsigned char>(text[i])));
  int shift = -1;
  if (unit.empty() || unit == "b")
    shift = 0;
  else if (unit == "k" || unit == "kb" || unit == "kib")
    shift = 10;
  else if (unit == "m" || unit == "mb" || unit == "mib")
    shift = 20;
  else if (unit == "g" || unit == "gb" || unit == "gib")
    shift = 30;
  else if (unit == "t" || unit == "tb" || unit == "tib")
    shift = 40;
  if (shift < 0) return Status(Code::invalid_argument, "byte count '" + text + "': unknown unit (use K, M, G, T)");
  if (shift > 0 && v > (UINT64_MAX >> shift))
    return Status(Code::invalid_argument, "byte count '" + text + "' too large");
  return v << shift;
}

Options Options::defaults() { return Options(0); }

Options::Options() { error = apply_env(); }
Options::Options(int /*no_env*/) {}

Status Options::apply_env() {
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    std::string kv = *e;
    if (kv.rfind("CKPT_", 0) != 0) continue;
    auto eq = kv.find('=');
    std::string name = kv.substr(0, eq), value = eq == std::string::npos ? "" : kv.substr(eq + 1);
    // Variables of other parts of ckpt (docs/options.md): the Python package's CKPT_LIBRARY is set in the
    // environment of a job that also runs an application; the test knobs are read by the Runtime.
    bool other = name == "CKPT_LIBRARY";
    for (auto& k : detail::test_knobs()) other = other || name == k.variable;
    if (other) continue;
    const detail::OptionRow* row = nullptr;
    for (auto& r : option_rows())
      if (detail::env_name(r.key) == name) row = &r;
    if (row == nullptr) {
      // A site module or a shell may define CKPT_ROOT or CKPT_PREFIX for its own purposes: never fatal.
      const std::string guess = nearest(name, known_variables());
      const std::string w = "unknown environment variable " + name + " ignored" +
                            (guess.empty() ? " (ckpt's variables are listed in docs/options.md)"
                                           : " (did you mean " + guess + "?)");
      if (std::find(warnings.begin(), warnings.end(), w) == warnings.end()) warnings.push_back(w);
      continue;
    }
    Status s = row->set(*this, value);
    if (!s.ok()) return s.with_context(name);
    if (name == "CKPT_TRANSPORT")  // "handy for benchmarks and tests": one transport for every group
      for (auto& g : groups) g.transport = value;
  }
  return validate();
}

Status Options::validate() const {
  // Each field within its row's allowed values (also when set in code, not through text).
  for (auto& r : option_rows()) CKPT_RETURN_IF_ERROR(r.check(*this));
  // The rules between options.
  const std::uint64_t chunk = chunk_bytes.value_or(4096);
  if (pool_bytes && *pool_bytes < 2 * chunk)
    return Status(Code::invalid_argument, "option 'pool_bytes' (" + std::to_string(*pool_bytes) +
                                              ") must hold at least two chunks of chunk_bytes (" +
                                              std::to_string(chunk) + ")");
  if (layout == Layout::series && !local_dir.empty())
    return Status(Code::invalid_argument,
                  "option 'layout': series does not work with local_dir (the node level and its drain copy "
                  "checkpoint directories); use layout directory with local_dir");
  if (!local_dir.empty() && local_dir == dir)
    return Status(Code::invalid_argument, "option 'local_dir' must differ from 'dir' (" + dir + ")");
  if (gpu_double_buffer == DoubleBuffer::on && !gpu_spare_bytes)
    return Status(Code::invalid_argument,
                  "option 'gpu_double_buffer' is 'on' but 'gpu_spare_bytes' is auto: give the spare buffer's size "
                  "(e.g. 4G), or use 'auto' or 'off'");
  for (const auto& g : groups)
    if (g.name.empty() || g.transport.empty() || g.match.empty())
      return Status(Code::invalid_argument, "groups: every group needs a name, a transport and a match pattern");
  return Status();
}

std::string Options::to_yaml() const {
  std::string y;
  for (auto& r : option_rows()) y += std::string(r.key) + ": " + yaml_scalar(r.get(*this)) + "\n";
  if (!groups.empty()) {
    y += "groups:\n";
    for (const auto& g : groups) {
      y += "  - name: " + yaml_scalar(g.name) + "\n    transport: " + yaml_scalar(g.transport) + "\n    match:\n";
      for (const auto& m : g.match) y += "      - " + yaml_scalar(m) + "\n";
    }
  }
  return y;
}

std::vector<OptionDescription> describe_options() {
  std::vector<OptionDescription> d;
  for (auto& r : option_rows())
    d.push_back({r.group, r.key, detail::env_name(r.key), detail::scope_name(r.scope), r.default_text, r.allowed,
                 r.doc});
  return d;
}

std::string options_markdown() {
  // One table per group, in table order; `|` inside a cell escaped.
  auto cell = [](const std::string& s) {
    std::string o;
    for (char c : s) o += c == '|' ? std::string("\\|") : std::string(1, c);
    return o;
  };
  std::string md, group;
  for (const auto& o : describe_options()) {
    if (o.group != group) {
      group = o.group;
      md += (md.empty() ? "" : "\n") + std::string("### ") + group + "\n\n";
      md += "| key | variable | scope | default | allowed | meaning |\n|---|---|---|---|---|---|\n";
    }
    const std::string def = o.default_value.empty() ? "(empty)" : "`" + cell(o.default_value) + "`";
    md += "| `" + o.key + "` | `" + o.variable + "` | " + o.scope + " | " + def + " | " +
          cell(o.allowed) + " | " + cell(o.description) + " |\n";
  }
  md += "\n### test knobs (variables only, not options)\n\n| variable | meaning |\n|---|---|\n";
  for (auto& k : detail::test_knobs()) md += "| `" + std::string(k.variable) + "` | " + cell(k.doc) + " |\n";
  return md;
}

namespace {
/// The text of a config file: a regular file of at most 16 MiB (a directory, a FIFO or a device
/// is refused with a clear error instead of an exception or a hang).
Result<std::string> read_config(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    const int e = errno;
    return Status(e == ENOENT ? Code::not_found : Code::io_error,
                  "config file " + path + " cannot be opened: " + std::strerror(e));
  }
  struct stat st {};
  std::string text;
  Status s;
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode))
    s = Status(Code::invalid_argument, "config file " + path + " is not a regular file");
  else if (st.st_size > (16 << 20))
    s = Status(Code::invalid_argument, "config file " + path + " is larger than 16 MiB");
  char buf[65536];
  while (s.ok()) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) s = Status(Code::io_error, "config file " + path + ": read: " + std::strerror(errno));
    if (n <= 0) break;
    text.append(buf, static_cast<std::size_t>(n));
    if (text.size() > (16u << 20)) s = Status(Code::invalid_argument, "config file " + path + " is larger than 16 MiB");
  }
  ::close(fd);
  if (!s.ok()) return s;
  return text;
}

Status apply_yaml(Options& o, const YAML::Node& root, const std::string& origin) {
  if (!root || root.IsNull()) return Status();
  if (!root.IsMap())
    return Status(Code::invalid_argument, origin + ": top level must be a map of options");
  std::vector<std::string> seen;
  for (auto it = root.begin(); it != root.end(); ++it) {
    const std::string key = it->first.IsScalar() ? it->first.Scalar() : std::string("<not a string>");
    // A key given twice: which one wins would be the parser's accident.
    if (std::find(seen.begin(), seen.end(), key) != seen.end())
      return Status(Code::invalid_argument, origin + ": key '" + key + "' is set twice");
    seen.push_back(key);
    if (key == "groups") {
      CKPT_RETURN_IF_ERROR(parse_groups(o, it->second).with_context(origin));
      continue;
    }
    const detail::OptionRow* row = detail::find_option(key);
    if (row == nullptr) {
      std::vector<std::string> keys;
      for (auto& r : option_rows()) keys.push_back(r.key);
      const std::string guess = nearest(key, keys);
      return Status(Code::invalid_argument, origin + ": unknown key '" + key + "'" +
                                                (guess.empty() ? "" : " (did you mean '" + guess + "'?)") +
                                                " (known: " + known_keys() + ")");
    }
    if (key == "mpiio_hints" && it->second.IsMap()) {  // also accepted as a map
      std::string flat;
      for (auto h = it->second.begin(); h != it->second.end(); ++h) {
        if (!h->first.IsScalar() || !h->second.IsScalar())
          return Status(Code::invalid_argument, origin + ": mpiio_hints entries must be key: value");
        flat += (flat.empty() ? "" : ",") + h->first.Scalar() + "=" + h->second.Scalar();
      }
      CKPT_RETURN_IF_ERROR(row->set(o, flat).with_context(origin));
      continue;
    }
    if (it->second.IsNull()) {
      // `key:`, `key: ~` and `key: null` are all YAML's null (the text is gone): the empty value where
      // an option takes one (local_dir, trace: off), else an error that says how to write the word.
      Status s = row->set(o, "");
      if (s.ok()) continue;
      return Status(Code::invalid_argument, origin + ": key '" + key +
                                                "' has no value (YAML reads null and ~ as no value; quote a value "
                                                "that is the word: " +
                                                key + ": \"null\")");
    }
    if (!it->second.IsScalar())
      return Status(Code::invalid_argument, origin + ": key '" + key + "' needs a single value");
    Status s = row->set(o, it->second.Scalar());
    if (!s.ok()) return s.with_context(origin);
  }
  return Status();
}

/// Applies the YAML map `text` on top of `o`; `origin` ("config file <path>", "options") names it in errors.
Status apply_yaml_text(Options& o, const std::string& text, const std::string& origin) {
  // yaml-cpp reports malformed input (and some conversions) by throwing: nothing may escape.
  try {
    return apply_yaml(o, YAML::Load(text), origin);
  } catch (const YAML::Exception& e) {
    return Status(Code::invalid_argument, origin + ": " + e.what());
  } catch (const std::exception& e) {
    return Status(Code::invalid_argument, origin + ": " + e.what());
  }
}

/// Defaults < the file at *path (none when path is null) < the YAML map `yaml` (none when empty) < CKPT_*.
Result<Options> load_layers(const std::string* path, const std::string& yaml) {
  Options o = Options::defaults();
  std::string origin;
  if (path != nullptr) {
    auto text = read_config(*path);
    if (!text.ok()) return text.status();
    origin = "config file " + *path;
    CKPT_RETURN_IF_ERROR(apply_yaml_text(o, text.value(), origin));
  }
  if (!yaml.empty()) {
    CKPT_RETURN_IF_ERROR(apply_yaml_text(o, yaml, "options"));
    origin += origin.empty() ? "options" : " and options";
  }
  if (!origin.empty()) CKPT_RETURN_IF_ERROR(o.validate().with_context(origin));
  CKPT_RETURN_IF_ERROR(o.apply_env());
  return o;
}

/// The options of `r`, or the defaults with r's error recorded.
Options or_error(Result<Options> r) {
  if (r.ok()) return std::move(r).value();
  Options o = Options::defaults();
  o.error = r.status();
  return o;
}
}  // namespace

Result<Options> Options::try_load(const std::string& path) { return load_layers(&path, ""); }

Result<Options> Options::try_load(const std::string& path, const std::string& yaml) {
  return load_layers(path.empty() ? nullptr : &path, yaml);
}

Options Options::load(const std::string& path) { return or_error(try_load(path)); }

Options Options::load(const std::string& path, const std::string& yaml) { return or_error(try_load(path, yaml)); }

}  // namespace ckpt
