// The one place where options are read: YAML files and CKPT_* variables, validated into Options.
#include "ckpt/options.hpp"

#include "runtime/src/config.hpp"

#include <fcntl.h>
#include <sched.h>
#include <sys/stat.h>
#include <unistd.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <climits>
#include <cstdint>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

extern char** environ;

namespace ckpt {
namespace {

using Setter = std::function<Status(Options&, const std::string&)>;

struct Field {
  const char* key;  // YAML key; the variable is CKPT_<KEY upper-cased>
  Setter set;
};

Status bad_value(const std::string& key, const std::string& value, const std::string& allowed) {
  return Status(Code::invalid_argument, "option '" + key + "': bad value '" + value + "' (allowed: " + allowed + ")");
}

Result<long long> parse_int(const std::string& key, const std::string& v) {
  char* end = nullptr;
  errno = 0;
  long long x = std::strtoll(v.c_str(), &end, 10);
  if (v.empty() || *end != '\0' || errno != 0) return bad_value(key, v, "an integer");
  return x;
}

Result<bool> parse_bool(const std::string& key, const std::string& v) {
  std::string l;
  for (char c : v) l += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (l == "1" || l == "true" || l == "on" || l == "yes") return true;
  if (l == "0" || l == "false" || l == "off" || l == "no") return false;
  return bad_value(key, v, "true/false, on/off, yes/no, 1/0");
}

// ---- options with a fixed set of spellings ---------------------------------------------------------
// One table per option (spelling -> value, in the order messages list them); parse_named() reads a
// value, named_list() writes the accepted spellings into every message about them.

template <class E>
struct Named {
  const char* name;
  E value;
};

const Named<Options::OnBusy> kOnBusy[] = {{"wait", Options::OnBusy::wait}, {"coalesce", Options::OnBusy::coalesce}};
const Named<Options::Layout> kLayout[] = {{"directory", Options::Layout::directory},
                                          {"series", Options::Layout::series}};
const Named<Options::DoubleBuffer> kDoubleBuffer[] = {
    {"off", Options::DoubleBuffer::off}, {"on", Options::DoubleBuffer::on}, {"auto", Options::DoubleBuffer::automatic}};
const Named<Options::MpiThreads> kMpiThreads[] = {{"auto", Options::MpiThreads::automatic},
                                                  {"multiple", Options::MpiThreads::multiple},
                                                  {"funneled", Options::MpiThreads::funneled}};
const Named<const char*> kRedundancy[] = {{"none", "none"}, {"partner", "partner"}, {"xor", "xor"}};
const Named<const char*> kRomioCbWrite[] = {{"enable", "enable"}, {"disable", "disable"}, {"automatic", "automatic"}};

/// The spellings of `table` in order, joined by `sep` and the last one by `last` ("a, b or c").
template <class E, std::size_t N>
std::string named_list(const Named<E> (&table)[N], const char* sep = ", ", const char* last = ", ") {
  std::string s;
  for (std::size_t i = 0; i < N; ++i) s += std::string(i == 0 ? "" : i + 1 == N ? last : sep) + table[i].name;
  return s;
}

/// The entry of `table` spelled `text` exactly (case matters), or null.
template <class E, std::size_t N>
const Named<E>* find_named(const Named<E> (&table)[N], const std::string& text) {
  for (const auto& n : table)
    if (text == n.name) return &n;
  return nullptr;
}

/// The value `text` spells, or invalid_argument "'<text>' is not a, b or c".
template <class E, std::size_t N>
Result<E> parse_named(const Named<E> (&table)[N], const std::string& text) {
  if (const Named<E>* n = find_named(table, text)) return n->value;
  return Status(Code::invalid_argument, "'" + text + "' is not " + named_list(table, ", ", " or "));
}

/// Whether `value` is one of `table`'s (an enum set in code from an integer may be none).
template <class E, std::size_t N>
bool is_named(const Named<E> (&table)[N], E value) {
  for (const auto& n : table)
    if (n.value == value) return true;
  return false;
}

/// The option `key` whose member is set from `table`: "option '<key>': bad value '<v>' (allowed: a, b, c)".
template <class M, class E, std::size_t N>
Field named_field(const char* key, const Named<E> (&table)[N], M Options::*member) {
  return {key, [key, &table, member](Options& o, const std::string& v) -> Status {
            const Named<E>* n = find_named(table, v);
            if (n == nullptr) return bad_value(key, v, named_list(table));
            o.*member = n->value;
            return Status();
          }};
}

/// The boolean option `key` (parse_bool's spellings).
Field bool_field(const char* key, bool Options::*member) {
  return {key, [key, member](Options& o, const std::string& v) -> Status {
            auto b = parse_bool(key, v);
            if (!b.ok()) return b.status();
            o.*member = b.value();
            return Status();
          }};
}

const std::vector<Field>& fields() {
  static const std::vector<Field> f = {
      {"dir",
       [](Options& o, const std::string& v) -> Status {
         if (v.empty()) return bad_value("dir", v, "a non-empty path");
         o.dir = v;
         return Status();
       }},
      {"transport",
       [](Options& o, const std::string& v) -> Status {
         if (v.empty()) return bad_value("transport", v, "posix, mpiio, rbio, hdf5, hdf5-sync, null");
         o.transport = v;  // checked against the registry when the Runtime is built
         return Status();
       }},
      named_field("gpu_double_buffer", kDoubleBuffer, &Options::gpu_double_buffer),
      named_field("mpi_threads", kMpiThreads, &Options::mpi_threads),
      {"gpu_spare_bytes",
       [](Options& o, const std::string& v) -> Status {
         auto b = parse_bytes(v);
         if (!b.ok()) return bad_value("gpu_spare_bytes", v, "a byte count like 4G");
         o.gpu_spare_bytes = b.value();
         return Status();
       }},
      {"trace",
       [](Options& o, const std::string& v) -> Status {
         o.trace = v;
         return Status();
       }},
      {"rbio_writers",
       [](Options& o, const std::string& v) -> Status {
         auto x = parse_int("rbio_writers", v);
         if (!x.ok() || x.value() < 0 || x.value() > (1 << 24))
           return bad_value("rbio_writers", v, "0 (one per node) or a positive count");
         o.rbio_writers = static_cast<int>(x.value());
         return Status();
       }},
      {"rbio_files",
       [](Options& o, const std::string& v) -> Status {
         auto x = parse_int("rbio_files", v);
         if (!x.ok() || (x.value() != 0 && x.value() != 1))
           return bad_value("rbio_files", v, "0 (one per writer) or 1 (shared)");
         o.rbio_files = static_cast<int>(x.value());
         return Status();
       }},
      {"mpiio_files",
       [](Options& o, const std::string& v) -> Status {
         auto x = parse_int("mpiio_files", v);
         if (!x.ok() || x.value() < 1 || x.value() > (1 << 24)) return bad_value("mpiio_files", v, "a positive count");
         o.mpiio_files = static_cast<int>(x.value());
         return Status();
       }},
      {"mpiio_hints",
       [](Options& o, const std::string& v) -> Status {
         CKPT_RETURN_IF_ERROR(detail::parse_mpiio_hints(v).status());
         o.mpiio_hints = v;
         return Status();
       }},
      {"open_token",
       [](Options& o, const std::string& v) -> Status {
         auto x = parse_int("open_token", v);
         if (!x.ok() || x.value() < 0 || x.value() > (1 << 24))
           return bad_value("open_token", v, "0 (off) or a positive count");
         o.open_token = static_cast<int>(x.value());
         return Status();
       }},
      {"local_dir",
       [](Options& o, const std::string& v) -> Status {
         o.local_dir = v;  // empty = no node-local level
         return Status();
       }},
      {"drain_every",
       [](Options& o, const std::string& v) -> Status {
         auto x = parse_int("drain_every", v);
         if (!x.ok() || x.value() < 0 || x.value() > 1000000)
           return bad_value("drain_every", v, "0 (never), 1 (every checkpoint) or n (every n-th)");
         o.drain_every = static_cast<int>(x.value());
         return Status();
       }},
      named_field("redundancy", kRedundancy, &Options::redundancy),
      {"xor_group",
       [](Options& o, const std::string& v) -> Status {
         auto x = parse_int("xor_group", v);
         if (!x.ok() || x.value() < 2 || x.value() > (1 << 16))
           return bad_value("xor_group", v, "nodes per parity group, >= 2");
         o.xor_group = static_cast<int>(x.value());
         return Status();
       }},
      {"keep_global",
       [](Options& o, const std::string& v) -> Status {
         auto x = parse_int("keep_global", v);
         if (!x.ok() || x.value() < 0 || x.value() > 1000000)
           return bad_value("keep_global", v, "0 (as keep) or an integer >= 1");
         o.keep_global = static_cast<int>(x.value());
         return Status();
       }},
      {"ranks_per_node",
       [](Options& o, const std::string& v) -> Status {
         auto x = parse_int("ranks_per_node", v);
         if (!x.ok() || x.value() < 0 || x.value() > (1 << 24))
           return bad_value("ranks_per_node", v, "0 (detect) or a positive count");
         o.ranks_per_node = static_cast<int>(x.value());
         return Status();
       }},
      {"pool_bytes",
       [](Options& o, const std::string& v) -> Status {
         auto b = parse_bytes(v);
         if (!b.ok()) return bad_value("pool_bytes", v, "0 (auto) or a byte count like 256M, 1G");
         o.pool_bytes = b.value();
         return Status();
       }},
      {"pool_max_fraction",
       [](Options& o, const std::string& v) -> Status {
         char* end = nullptr;
         double x = std::strtod(v.c_str(), &end);
         if (v.empty() || *end != '\0' || !(x > 0 && x <= 0.9))
           return bad_value("pool_max_fraction", v, "a number in (0, 0.9]");
         o.pool_max_fraction = x;
         return Status();
       }},
      {"chunk_bytes",
       [](Options& o, const std::string& v) -> Status {
         auto b = parse_bytes(v);
         if (!b.ok() || (b.value() != 0 && (b.value() < 4096 || b.value() > (1ull << 32) || b.value() % 4096 != 0)))
           return bad_value("chunk_bytes", v, "0 (auto) or a multiple of 4K from 4K to 4G, like 16M");
         o.chunk_bytes = b.value();
         return Status();
       }},
      {"max_in_flight",
       [](Options& o, const std::string& v) -> Status {
         auto x = parse_int("max_in_flight", v);
         if (!x.ok() || x.value() < 1 || x.value() > 64)
           return bad_value("max_in_flight", v, "an integer from 1 to 64");
         o.max_in_flight = static_cast<int>(x.value());
         return Status();
       }},
      named_field("on_busy", kOnBusy, &Options::on_busy),
      named_field("layout", kLayout, &Options::layout),
      {"segment_bytes",
       [](Options& o, const std::string& v) -> Status {
         auto b = parse_bytes(v);
         if (!b.ok() || b.value() < 4096) return bad_value("segment_bytes", v, "a byte count >= 4K, like 1G");
         o.segment_bytes = b.value();
         return Status();
       }},
      {"segment_steps",
       [](Options& o, const std::string& v) -> Status {
         auto x = parse_int("segment_steps", v);
         if (!x.ok() || x.value() < 0 || x.value() > 1000000000)
           return bad_value("segment_steps", v, "0 (no limit) or an integer >= 1");
         o.segment_steps = static_cast<int>(x.value());
         return Status();
       }},
      {"keep",
       [](Options& o, const std::string& v) -> Status {
         auto x = parse_int("keep", v);
         if (!x.ok() || x.value() < 1 || x.value() > 1000000) return bad_value("keep", v, "an integer >= 1");
         o.keep = static_cast<int>(x.value());
         return Status();
       }},
      bool_field("fsync", &Options::fsync),
      bool_field("direct_io", &Options::direct_io),
      {"alignment",
       [](Options& o, const std::string& v) -> Status {
         auto b = parse_bytes(v);
         if (!b.ok() || b.value() < 64 || (b.value() & (b.value() - 1)) != 0 || b.value() > (1ull << 30))
           return bad_value("alignment", v, "a power of two from 64 to 1G, like 4K");
         o.alignment = b.value();
         return Status();
       }},
      bool_field("stats", &Options::stats),
      {"verbose",
       [](Options& o, const std::string& v) -> Status {
         auto x = parse_int("verbose", v);
         if (!x.ok() || x.value() < 0 || x.value() > 2) return bad_value("verbose", v, "0, 1 or 2");
         o.verbose = static_cast<int>(x.value());
         return Status();
       }},
      {"durable_every_ms",
       [](Options& o, const std::string& v) -> Status {
         auto x = parse_int("durable_every_ms", v);
         if (!x.ok() || x.value() < 0 || x.value() > 86400000)
           return bad_value("durable_every_ms", v, "0 (every commit fsynced) to 86400000 ms");
         o.durable_every_ms = static_cast<int>(x.value());
         return Status();
       }},
      {"thread_slice_us",
       [](Options& o, const std::string& v) -> Status {
         if (v == "auto") {
           o.thread_slice_us = -1;
           return Status();
         }
         auto x = parse_int("thread_slice_us", v);
         if (!x.ok() || (x.value() != 0 && (x.value() < 100 || x.value() > 100000)))
           return bad_value("thread_slice_us", v, "auto, 0 (the kernel's default) or 100 to 100000 us");
         o.thread_slice_us = static_cast<int>(x.value());
         return Status();
       }},
      {"thread_cpus",
       [](Options& o, const std::string& v) -> Status {
         if (v != "auto" && v != "all" && v != "inherit")
           CKPT_RETURN_IF_ERROR(detail::parse_cpu_list("thread_cpus", v).status());
         o.thread_cpus = v;
         return Status();
       }},
      {"flush_delay_ms",
       [](Options& o, const std::string& v) -> Status {
         auto x = parse_int("flush_delay_ms", v);
         if (!x.ok() || x.value() < 0 || x.value() > 600000) return bad_value("flush_delay_ms", v, "0 to 600000");
         o.flush_delay_ms = static_cast<int>(x.value());
         return Status();
       }},
  };
  return f;
}

std::string env_name(const char* key) {
  std::string s = "CKPT_";
  for (const char* p = key; *p; ++p) s += static_cast<char>(std::toupper(static_cast<unsigned char>(*p)));
  return s;
}

std::string known_keys() {
  std::string s;
  for (auto& f : fields()) s += (s.empty() ? "" : ", ") + std::string(f.key);
  return s + ", groups";
}

const Field* find_field(const std::string& key) {
  for (auto& f : fields())
    if (key == f.key) return &f;
  return nullptr;
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

}  // namespace

namespace detail {

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
    if (k == "cb_buffer_size" || k == "striping_unit") {
      auto b = parse_bytes(val);
      good = b.ok() && b.value() >= 1 && b.value() <= (1ull << 31) - 1;  // MPI_Info values are int
      if (good) val = std::to_string(b.value());
    } else if (k == "cb_nodes" || k == "striping_factor") {
      auto x = parse_int(k, val);
      good = x.ok() && x.value() >= 1 && x.value() <= (1 << 24);
    } else if (k == "romio_cb_write") {
      good = find_named(kRomioCbWrite, val) != nullptr;
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
    auto lo = parse_int(key, item.substr(0, dash));
    auto hi = dash == std::string::npos ? lo : parse_int(key, item.substr(dash + 1));
    if (item.empty() || !lo.ok() || !hi.ok() || lo.value() < 0 || hi.value() < lo.value() || hi.value() >= CPU_SETSIZE)
      return bad_value(key, v, allowed);
    for (auto c = lo.value(); c <= hi.value(); ++c) cpus.push_back(static_cast<int>(c));
    p = e + 1;
  }
  return cpus;
}

ThreadPolicy thread_policy(const Options& o) {
  ThreadPolicy t;
  // auto: slices where the application waits for the pipeline (wait), not where a faster pipeline
  // would only write more of the checkpoints coalesce offers it (measured, docs/performance.md).
  t.slice_us = o.thread_slice_us >= 0 ? o.thread_slice_us : o.on_busy == Options::OnBusy::wait ? 100 : 0;
  t.slice_auto = o.thread_slice_us < 0;
  if (o.thread_cpus == "auto") {
    t.where = ThreadPolicy::Cpus::spare;  // resolved by the Runtime (spare_cpus, collective)
  } else if (o.thread_cpus == "all") {
    t.where = ThreadPolicy::Cpus::all;
  } else if (o.thread_cpus != "inherit") {
    auto cpus = parse_cpu_list("thread_cpus", o.thread_cpus);  // valid: Options::validate() checked it
    if (cpus.ok()) {
      t.where = ThreadPolicy::Cpus::list;
      t.cpus = std::move(cpus).value();
    }
  }
  return t;
}

TransportConfig transport_config(const Options& o) {
  TransportConfig c;
  c.alignment = o.alignment;
  c.chunk_bytes = io_piece_bytes(o);
  c.open_token = o.open_token;
  c.mpiio_files = o.mpiio_files;
  c.rbio_writers = o.rbio_writers;
  c.rbio_files = o.rbio_files;
  c.append = o.layout == Options::Layout::series;
  c.direct_io = o.direct_io;
  auto hints = parse_mpiio_hints(o.mpiio_hints);  // valid: Options::validate() checked them
  if (hints.ok()) c.mpiio_hints = std::move(hints).value();
  return c;
}

CudaDeviceConfig device_config(const Options& o) {
  CudaDeviceConfig dev;
  switch (o.gpu_double_buffer) {
    case Options::DoubleBuffer::off: dev.double_buffer = CudaDeviceConfig::DoubleBuffer::off; break;
    case Options::DoubleBuffer::on: dev.double_buffer = CudaDeviceConfig::DoubleBuffer::on; break;
    case Options::DoubleBuffer::automatic: dev.double_buffer = CudaDeviceConfig::DoubleBuffer::automatic; break;
  }
  dev.spare_bytes = static_cast<std::size_t>(o.gpu_spare_bytes);
  return dev;
}

}  // namespace detail

Result<Options::OnBusy> parse_on_busy(const std::string& text) { return parse_named(kOnBusy, text); }

const char* on_busy_name(Options::OnBusy v) noexcept {
  for (const auto& n : kOnBusy)
    if (n.value == v) return n.name;
  return "?";
}

Result<Options::Layout> parse_layout(const std::string& text) { return parse_named(kLayout, text); }

Result<Options::DoubleBuffer> parse_double_buffer(const std::string& text) { return parse_named(kDoubleBuffer, text); }

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

Options Options::defaults() {
  Options o = Options(0);
  return o;
}

Options::Options() { error = apply_env(); }
Options::Options(int /*no_env*/) {}

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

/// The warning for an unknown variable `name`: the nearest known one when it looks like a misspelling.
std::string unknown_variable(const std::string& name) {
  std::string best;
  std::size_t best_d = SIZE_MAX;
  for (auto& f : fields()) {
    const std::size_t d = edit_distance(name, env_name(f.key));
    if (d < best_d) best_d = d, best = env_name(f.key);
  }
  std::string w = "unknown environment variable " + name + " ignored";
  // A misspelling is a few edits away; CKPT_ROOT is not "CKPT_DIR misspelt", say only what is known.
  if (best_d <= std::max<std::size_t>(2, name.size() / 5)) return w + " (did you mean " + best + "?)";
  return w + " (ckpt's variables are listed in docs/options.md)";
}
}  // namespace

Status Options::apply_env() {
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    std::string kv = *e;
    if (kv.rfind("CKPT_", 0) != 0) continue;
    auto eq = kv.find('=');
    std::string name = kv.substr(0, eq), value = eq == std::string::npos ? "" : kv.substr(eq + 1);
    // Variables of other parts of ckpt (docs/options.md): the Python package's CKPT_LIBRARY is set in the
    // environment of a job that also runs an application.
    if (name == "CKPT_LIBRARY") continue;
    const Field* found = nullptr;
    for (auto& f : fields())
      if (env_name(f.key) == name) found = &f;
    if (found == nullptr) {
      // A site module or a shell may define CKPT_ROOT or CKPT_PREFIX for its own purposes: never fatal.
      const std::string w = unknown_variable(name);
      if (std::find(warnings.begin(), warnings.end(), w) == warnings.end()) warnings.push_back(w);
      continue;
    }
    Status s = found->set(*this, value);
    if (!s.ok()) return s.with_context(name);
    if (name == "CKPT_TRANSPORT")  // "handy for benchmarks and tests": one transport for every group
      for (auto& g : groups) g.transport = value;
  }
  return validate();
}

Status Options::validate() const {
  if (dir.empty()) return Status(Code::invalid_argument, "option 'dir' is empty");
  if (chunk_bytes != 0 && (chunk_bytes < 4096 || chunk_bytes % 4096 != 0))
    return Status(Code::invalid_argument, "option 'chunk_bytes' must be 0 (auto) or a multiple of 4096");
  if (pool_bytes != 0 && pool_bytes < 2 * (chunk_bytes != 0 ? chunk_bytes : 4096))
    return Status(Code::invalid_argument, "option 'pool_bytes' (" + std::to_string(pool_bytes) +
                                              ") must hold at least two chunks of chunk_bytes (" +
                                              std::to_string(chunk_bytes != 0 ? chunk_bytes : 4096) + ")");
  if (!is_named(kOnBusy, on_busy))  // set in code from an integer
    return Status(Code::invalid_argument, "option 'on_busy' must be " + named_list(kOnBusy, ", ", " or ") + ", got " +
                                              std::to_string(static_cast<int>(on_busy)));
  if (max_in_flight < 1) return Status(Code::invalid_argument, "option 'max_in_flight' must be >= 1");
  if (keep < 1) return Status(Code::invalid_argument, "option 'keep' must be >= 1");
  if (!is_named(kLayout, layout))  // set in code from an integer
    return Status(Code::invalid_argument, "option 'layout' must be " + named_list(kLayout, ", ", " or "));
  if (segment_bytes < 4096 || segment_steps < 0)
    return Status(Code::invalid_argument, "option 'segment_bytes' must be >= 4096 and 'segment_steps' >= 0");
  if (layout == Layout::series && !local_dir.empty())
    return Status(Code::invalid_argument,
                  "option 'layout': series does not work with local_dir (the node level and its drain copy "
                  "checkpoint directories); use layout directory with local_dir");
  if (alignment == 0 || (alignment & (alignment - 1)) != 0)
    return Status(Code::invalid_argument, "option 'alignment' must be a power of two");
  if (!mpiio_hints.empty()) {  // also when set in code, not through a file or the environment
    Options scratch = *this;
    CKPT_RETURN_IF_ERROR(find_field("mpiio_hints")->set(scratch, mpiio_hints));
  }
  if (max_in_flight > 64) return Status(Code::invalid_argument, "option 'max_in_flight' must be <= 64");
  {  // also when set in code: the field's own check
    Options scratch = *this;
    CKPT_RETURN_IF_ERROR(find_field("thread_cpus")->set(scratch, thread_cpus));
  }
  if (thread_slice_us != -1 && thread_slice_us != 0 && (thread_slice_us < 100 || thread_slice_us > 100000))
    return Status(Code::invalid_argument, "option 'thread_slice_us' must be -1 (auto), 0 or in [100, 100000]");
  if (durable_every_ms < 0 || durable_every_ms > 86400000)
    return Status(Code::invalid_argument, "option 'durable_every_ms' must be in [0, 86400000]");
  if (mpiio_files < 1 || rbio_writers < 0 || open_token < 0 || flush_delay_ms < 0 || verbose < 0)
    return Status(
        Code::invalid_argument,
        "options mpiio_files (>= 1), rbio_writers, open_token, flush_delay_ms and verbose (>= 0) out of range");
  if (drain_every < 0 || ranks_per_node < 0)
    return Status(Code::invalid_argument, "options drain_every and ranks_per_node must be >= 0");
  if (find_named(kRedundancy, redundancy) == nullptr)
    return Status(Code::invalid_argument, "option 'redundancy' must be " + named_list(kRedundancy, ", ", " or "));
  if (xor_group < 2) return Status(Code::invalid_argument, "option 'xor_group' must be >= 2");
  if (keep_global < 0) return Status(Code::invalid_argument, "option 'keep_global' must be >= 0 (0: as keep)");
  if (!local_dir.empty() && local_dir == dir)
    return Status(Code::invalid_argument, "option 'local_dir' must differ from 'dir' (" + dir + ")");
  if (!(pool_max_fraction > 0 && pool_max_fraction <= 0.9))
    return Status(Code::invalid_argument, "option 'pool_max_fraction' must be in (0, 0.9]");
  if (gpu_double_buffer == DoubleBuffer::on && gpu_spare_bytes == 0)
    return Status(Code::invalid_argument,
                  "option 'gpu_double_buffer' is 'on' but 'gpu_spare_bytes' is 0: give the spare buffer's size "
                  "(e.g. 4G), or use 'auto' or 'off'");
  return Status();
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
  if (!root.IsMap()) return Status(Code::invalid_argument, origin + ": top level must be a map of options");
  for (auto it = root.begin(); it != root.end(); ++it) {
    const std::string key = it->first.IsScalar() ? it->first.Scalar() : std::string("<not a string>");
    if (key == "groups") {
      CKPT_RETURN_IF_ERROR(parse_groups(o, it->second).with_context(origin));
      continue;
    }
    if (key == "mpiio_hints" && it->second.IsMap()) {  // also accepted as a map
      std::string flat;
      for (auto h = it->second.begin(); h != it->second.end(); ++h) {
        if (!h->first.IsScalar() || !h->second.IsScalar())
          return Status(Code::invalid_argument, origin + ": mpiio_hints entries must be key: value");
        flat += (flat.empty() ? "" : ",") + h->first.Scalar() + "=" + h->second.Scalar();
      }
      CKPT_RETURN_IF_ERROR(find_field("mpiio_hints")->set(o, flat).with_context(origin));
      continue;
    }
    const Field* f = find_field(key);
    if (f == nullptr)
      return Status(Code::invalid_argument, origin + ": unknown key '" + key + "' (known: " + known_keys() + ")");
    if (!it->second.IsScalar())
      return Status(Code::invalid_argument, origin + ": key '" + key + "' needs a single value");
    Status s = f->set(o, it->second.Scalar());
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
