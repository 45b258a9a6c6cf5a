// Options: defaults, YAML, environment overrides, and errors that name the key.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <cctype>
#include <fstream>
#include <initializer_list>
#include <string>
#include <vector>

#include "ckpt/options.hpp"
#include "test_util.hpp"

using namespace ckpt;

namespace {
std::string write_yaml(const std::string& dir, const std::string& text) {
  std::string p = dir + "/c.yaml";
  std::ofstream(p) << text;
  return p;
}
}  // namespace

TEST(Options, Defaults) {
  Options o = Options::defaults();
  EXPECT_TRUE(o.error.ok());
  EXPECT_EQ(o.transport, "posix");
  EXPECT_EQ(o.keep, 2);
  EXPECT_EQ(o.max_in_flight, 1);
  EXPECT_FALSE(o.chunk_bytes.has_value()) << "auto: the chunks follow the protected state";
  EXPECT_TRUE(o.fsync);
}

TEST(Options, ParseBytes) {
  EXPECT_EQ(parse_bytes("4096").value(), 4096u);
  EXPECT_EQ(parse_bytes("64M").value(), 64u << 20);
  EXPECT_EQ(parse_bytes("64MiB").value(), 64u << 20);
  EXPECT_EQ(parse_bytes("1g").value(), 1u << 30);
  EXPECT_FALSE(parse_bytes("").ok());
  EXPECT_FALSE(parse_bytes("12X").ok());
  EXPECT_FALSE(parse_bytes("-1").ok());
  EXPECT_FALSE(parse_bytes("99999999999999999999").ok());
  EXPECT_FALSE(parse_bytes("17000000000000000000T").ok());
}

TEST(Options, YamlThenEnvironment) {
  auto dir = test::scratch_dir();
  auto p = write_yaml(dir, "dir: /tmp/x\nkeep: 5\npool_bytes: 64M\nfsync: off\n");
  ::setenv("CKPT_KEEP", "7", 1);
  auto r = Options::try_load(p);
  ::unsetenv("CKPT_KEEP");
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->dir, "/tmp/x");
  EXPECT_EQ(r->keep, 7);  // the environment wins
  EXPECT_EQ(r->pool_bytes, 64u << 20);
  EXPECT_FALSE(r->fsync);
}

// Options as YAML text (ckpt_create_handle_options; the Python package's dict as JSON): file < text < CKPT_*.
TEST(Options, YamlTextBetweenFileAndEnvironment) {
  auto dir = test::scratch_dir();
  auto p = write_yaml(dir, "dir: /tmp/x\nkeep: 5\npool_bytes: 64M\n");
  ::setenv("CKPT_POOL_BYTES", "32M", 1);
  auto r = Options::try_load(p, R"({"keep": 3, "fsync": false, "mpiio_hints": {"cb_nodes": 2}})");
  ::unsetenv("CKPT_POOL_BYTES");
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->dir, "/tmp/x") << "from the file";
  EXPECT_EQ(r->keep, 3) << "the text over the file";
  EXPECT_FALSE(r->fsync);
  EXPECT_EQ(r->mpiio_hints, "cb_nodes=2");
  EXPECT_EQ(r->pool_bytes, 32u << 20) << "the environment over both";
  auto t = Options::try_load("", "transport: \"null\"\n");  // no file: the text alone (a quoted null)
  ASSERT_TRUE(t.ok()) << t.status().to_string();
  EXPECT_EQ(t->transport, "null");
  EXPECT_EQ(t->keep, Options::defaults().keep);
  // Errors name "options" (not a file), the key, and are kept by load() for the Runtime to agree on.
  auto bad = Options::try_load("", R"({"kepp": 3})");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("options: unknown key 'kepp'"), std::string::npos) << bad.status().message();
  EXPECT_FALSE(Options::try_load("", "{\"keep\": 0}").ok()) << "validated";
  EXPECT_FALSE(Options::try_load("", "[1, 2]").ok()) << "not a map";
  EXPECT_FALSE(Options::try_load("", "{\"dir\": ").ok()) << "malformed";
  EXPECT_FALSE(Options::load(p, "{\"keep\": -1}").error.ok());
  EXPECT_EQ(Options::try_load(dir + "/missing.yaml", "{}").status().code(), Code::not_found) << "the file's error";
  // A layer may fix what another one breaks: validated once, after both.
  auto p2 = write_yaml(dir, "pool_bytes: 8K\nchunk_bytes: 8K\n");
  EXPECT_TRUE(Options::try_load(p2, "{\"pool_bytes\": \"16K\"}").ok());
  EXPECT_EQ(Options::try_load("").status().code(), Code::not_found) << "try_load(path) still needs the file";
}

TEST(Options, UnknownKeyIsNamed) {
  auto dir = test::scratch_dir();
  auto r = Options::try_load(write_yaml(dir, "kepp: 3\n"));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("'kepp'"), std::string::npos) << r.status().message();
  EXPECT_NE(r.status().message().find("keep"), std::string::npos) << "lists the known keys";
  Options o = Options::load(dir + "/c.yaml");
  EXPECT_FALSE(o.error.ok()) << "load() keeps the error for the Runtime";
}

TEST(Options, BadValueIsNamedWithAllowedValues) {
  auto dir = test::scratch_dir();
  auto r = Options::try_load(write_yaml(dir, "max_in_flight: zero\n"));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("max_in_flight"), std::string::npos);
  EXPECT_NE(r.status().message().find("allowed"), std::string::npos);
  EXPECT_FALSE(Options::try_load(write_yaml(dir, "chunk_bytes: 5000\n")).ok()) << "not a multiple of 4K";
  EXPECT_FALSE(Options::try_load(write_yaml(dir, "pool_bytes: 8K\nchunk_bytes: 8K\n")).ok()) << "pool < 2 chunks";
  EXPECT_FALSE(Options::try_load(write_yaml(dir, "pool_bytes: 4K\n")).ok()) << "pool < 2 chunks of the auto size";
  for (const char* spelling : {"auto", "0"}) {  // 0: the spelling of auto in files of earlier runs
    auto auto_chunk = Options::try_load(write_yaml(dir, std::string("chunk_bytes: ") + spelling + "\npool_bytes: 8K\n"));
    ASSERT_TRUE(auto_chunk.ok()) << auto_chunk.status().to_string();
    EXPECT_FALSE(auto_chunk.value().chunk_bytes.has_value()) << spelling;
  }
  Options zero = Options::defaults();
  zero.chunk_bytes = 0;  // in C++ auto is std::nullopt; 0 bytes is not a chunk
  EXPECT_EQ(zero.validate().code(), Code::invalid_argument);
  EXPECT_FALSE(Options::try_load(write_yaml(dir, "- a\n- b\n")).ok()) << "not a map";
  EXPECT_EQ(Options::try_load(dir + "/missing.yaml").status().code(), Code::not_found);
}

TEST(Options, EnvironmentErrors) {
  ::setenv("CKPT_FSYNC", "maybe", 1);
  Options o;
  ::unsetenv("CKPT_FSYNC");
  EXPECT_FALSE(o.error.ok());
  EXPECT_NE(o.error.message().find("CKPT_FSYNC"), std::string::npos) << o.error.message();
  // Unknown CKPT_* names are a site's or a user's own (CKPT_ROOT, CKPT_PREFIX) or misspellings: a
  // warning naming them, never an error; a misspelling gets the nearest known name.
  ::setenv("CKPT_ROOT", "/opt/ckpt", 1);
  ::setenv("CKPT_KEPE", "3", 1);
  Options u;
  ::unsetenv("CKPT_ROOT");
  ::unsetenv("CKPT_KEPE");
  EXPECT_TRUE(u.error.ok()) << u.error.to_string();
  EXPECT_EQ(u.keep, Options::defaults().keep) << "a misspelt variable sets nothing";
  ASSERT_EQ(u.warnings.size(), 2u);
  std::string all = u.warnings[0] + "\n" + u.warnings[1];
  EXPECT_NE(all.find("CKPT_ROOT ignored"), std::string::npos) << all;
  EXPECT_NE(all.find("CKPT_KEPE ignored (did you mean CKPT_KEEP?)"), std::string::npos) << all;
  EXPECT_EQ(all.find("did you mean CKPT_DIR"), std::string::npos) << "CKPT_ROOT is no misspelling: " << all;
  // The Python package's variable is not the runtime's, and not even a warning for it.
  ::setenv("CKPT_LIBRARY", "/opt/ckpt/lib/libckpt.so", 1);
  Options py;
  ::unsetenv("CKPT_LIBRARY");
  EXPECT_TRUE(py.error.ok()) << py.error.to_string();
  EXPECT_TRUE(py.warnings.empty());
}

/// Options loaded from a YAML file setting `key` to `value`, which must load and validate.
Options loads(const std::string& dir, const std::string& key, const std::string& value) {
  auto r = Options::try_load(write_yaml(dir, key + ": " + value + "\n"));
  EXPECT_TRUE(r.ok()) << key << ": " << value << ": " << r.status().to_string();
  if (!r.ok()) return Options::defaults();
  EXPECT_TRUE(r->validate().ok()) << key << ": " << value;
  return std::move(r).value();
}

/// Each of `bad` as `key`'s value (a YAML string) is refused, naming the key.
void expect_refused(const std::string& dir, const std::string& key, std::initializer_list<const char*> bad) {
  for (const char* b : bad) {
    auto r = Options::try_load(write_yaml(dir, key + ": \"" + b + "\"\n"));
    ASSERT_FALSE(r.ok()) << key << ": " << b;
    EXPECT_NE(r.status().message().find(key), std::string::npos) << r.status().message();
  }
}

/// Options as the environment makes them with `var` = `value` (unset again after).
Options from_env(const char* var, const char* value) {
  ::setenv(var, value, 1);
  Options o;
  ::unsetenv(var);
  return o;
}

TEST(Options, ThreadSlice) {
  auto dir = test::scratch_dir();
  EXPECT_FALSE(Options::defaults().thread_slice_us.has_value()) << "auto";
  for (const char* good : {"0", "100", "250", "100000", "auto"})
    EXPECT_EQ(loads(dir, "thread_slice_us", good).thread_slice_us,
              std::string(good) == "auto" ? AutoInt() : AutoInt(std::stoi(good)));
  expect_refused(dir, "thread_slice_us", {"-1", "1", "99", "100001", "fast", "Auto"});  // the kernel's: 0.1-100 ms
  const Options e = from_env("CKPT_THREAD_SLICE_US", "300");
  ASSERT_TRUE(e.error.ok()) << e.error.to_string();
  EXPECT_EQ(e.thread_slice_us, 300);
  Options o = Options::defaults();
  o.thread_slice_us = 50;
  EXPECT_EQ(o.validate().code(), Code::invalid_argument) << "set in code, checked by validate()";
  o.thread_slice_us = -1;
  EXPECT_EQ(o.validate().code(), Code::invalid_argument) << "auto is an unset optional, not -1";
}

TEST(Options, BackgroundCpu) {
  auto dir = test::scratch_dir();
  EXPECT_FALSE(Options::defaults().background_cpu.has_value()) << "auto";
  const std::vector<std::pair<const char*, AutoFraction>> good = {{"auto", AutoFraction()}, {"off", 0.0}, {"0", 0.0},
                                                                  {"0.01", 0.01},           {"0.1", 0.1}, {"1", 1.0}};
  for (const auto& [text, want] : good) EXPECT_EQ(loads(dir, "background_cpu", text).background_cpu, want) << text;
  expect_refused(dir, "background_cpu", {"-0.1", "0.005", "1.5", "10%", "Off", ""});
  const Options e = from_env("CKPT_BACKGROUND_CPU", "0.25");
  ASSERT_TRUE(e.error.ok()) << e.error.to_string();
  EXPECT_EQ(e.background_cpu, 0.25);
  Options o = Options::defaults();
  o.background_cpu = 2.0;
  EXPECT_EQ(o.validate().code(), Code::invalid_argument) << "set in code, checked by validate()";
  // The spelling round trip: off, not 0; auto once.
  o.background_cpu = 0.0;
  EXPECT_NE(o.to_yaml().find("background_cpu: off\n"), std::string::npos) << o.to_yaml();
}

TEST(Options, ThreadCpus) {
  auto dir = test::scratch_dir();
  EXPECT_FALSE(Options::defaults().thread_cpus.has_value()) << "auto";
  for (const char* good : {"auto", "all", "inherit", "0", "0-3", "0-3,8,10-11", "1023"}) {
    auto r = Options::try_load(write_yaml(dir, std::string("thread_cpus: \"") + good + "\"\n"));
    ASSERT_TRUE(r.ok()) << good << ": " << r.status().to_string();
    EXPECT_EQ(r->thread_cpus, std::string(good) == "auto" ? AutoText() : AutoText(good));
  }
  for (const char* bad : {"", "any", "3-1", "-1", "0,", ",0", "1024", "0-1024", "a-b", "0--2"}) {
    auto r = Options::try_load(write_yaml(dir, std::string("thread_cpus: \"") + bad + "\"\n"));
    ASSERT_FALSE(r.ok()) << "'" << bad << "'";
    EXPECT_NE(r.status().message().find("thread_cpus"), std::string::npos) << r.status().message();
  }
  for (const char* beyond : {"1024", "0-1024", "4,99999"}) {  // beyond a cpu_set_t: said, with the limit
    auto r = Options::try_load(write_yaml(dir, std::string("thread_cpus: \"") + beyond + "\"\n"));
    ASSERT_FALSE(r.ok()) << beyond;
    EXPECT_NE(r.status().message().find("each below 1024"), std::string::npos) << r.status().message();
  }
  Options o = Options::defaults();
  o.thread_cpus = "0-x";
  EXPECT_EQ(o.validate().code(), Code::invalid_argument) << "set in code, checked by validate()";
}

TEST(Options, DoubleBufferOnNeedsASpareSize) {
  Options o = Options::defaults();
  o.gpu_double_buffer = DoubleBuffer::on;  // with gpu_spare_bytes auto this used to mean "off", silently
  Status s = o.validate();
  EXPECT_EQ(s.code(), Code::invalid_argument);
  EXPECT_NE(s.message().find("gpu_spare_bytes"), std::string::npos) << s.message();
  o.gpu_spare_bytes = 1 << 30;
  EXPECT_TRUE(o.validate().ok());
  o.gpu_double_buffer = std::nullopt;  // auto's cap may be auto: 1/16 of the device
  o.gpu_spare_bytes = std::nullopt;
  EXPECT_TRUE(o.validate().ok());
}

TEST(Options, DoubleBufferSpellings) {
  ::setenv("CKPT_GPU_DOUBLE_BUFFER", "auto", 1);
  Options a;
  EXPECT_TRUE(a.error.ok()) << a.error.message();
  EXPECT_FALSE(a.gpu_double_buffer.has_value()) << "auto";
  ::setenv("CKPT_GPU_DOUBLE_BUFFER", "automatic", 1);  // the C++ name is not a spelling
  Options b;
  ::unsetenv("CKPT_GPU_DOUBLE_BUFFER");
  EXPECT_EQ(b.error.code(), Code::invalid_argument);
  EXPECT_NE(b.error.message().find("auto, off, on"), std::string::npos) << b.error.message();
  EXPECT_EQ(*parse_double_buffer("on"), DoubleBuffer::on);
  EXPECT_EQ(*parse_double_buffer("off"), DoubleBuffer::off);
  EXPECT_FALSE(parse_double_buffer("auto")->has_value());
  EXPECT_FALSE(parse_double_buffer("ON").ok());
}

TEST(Options, MpiThreadsSpellings) {
  EXPECT_FALSE(Options::defaults().mpi_threads.has_value()) << "auto";
  ::setenv("CKPT_MPI_THREADS", "funneled", 1);
  Options a;
  ::unsetenv("CKPT_MPI_THREADS");
  EXPECT_TRUE(a.error.ok()) << a.error.message();
  EXPECT_EQ(a.mpi_threads, Options::MpiThreads::funneled);
  ::setenv("CKPT_MPI_THREADS", "MPI_THREAD_FUNNELED", 1);  // the MPI constant is not a spelling
  Options b;
  ::unsetenv("CKPT_MPI_THREADS");
  EXPECT_EQ(b.error.code(), Code::invalid_argument);
  EXPECT_NE(b.error.message().find("auto, multiple, funneled"), std::string::npos) << b.error.message();
  const std::string dir = ckpt::test::scratch_dir();
  auto r = Options::try_load(write_yaml(dir, "mpi_threads: multiple\n"));
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->mpi_threads, MpiThreads::multiple);
}

TEST(Options, OnBusySpellings) {
  ::setenv("CKPT_ON_BUSY", "coalesce", 1);
  Options a;
  EXPECT_TRUE(a.error.ok()) << a.error.message();
  EXPECT_EQ(a.on_busy, Options::OnBusy::coalesce);
  ::setenv("CKPT_ON_BUSY", "drop", 1);
  Options b;
  ::unsetenv("CKPT_ON_BUSY");
  EXPECT_EQ(b.error.code(), Code::invalid_argument);
  EXPECT_NE(b.error.message().find("wait, coalesce"), std::string::npos) << b.error.message();
  auto dir = test::scratch_dir();
  auto y = Options::try_load(write_yaml(dir, "on_busy: coalesce\n"));
  ASSERT_TRUE(y.ok()) << y.status().to_string();
  EXPECT_EQ(y.value().on_busy, Options::OnBusy::coalesce);
  EXPECT_EQ(Options::defaults().on_busy, Options::OnBusy::wait);
  EXPECT_FALSE(Options::try_load(write_yaml(dir, "on_busy: Coalesce\n")).ok());
  for (auto v : {Options::OnBusy::wait, Options::OnBusy::coalesce}) EXPECT_EQ(*parse_on_busy(on_busy_name(v)), v);
}

// Every option with a fixed set of spellings (one table each in options.cpp): a bad value, in a file
// and in a variable, is refused naming the option and listing every accepted spelling in order; each
// listed spelling is accepted; the public parse_*() list them too.
TEST(Options, EveryEnumOptionListsItsSpellings) {
  struct Case {
    const char* key;
    const char* env;
    std::vector<const char*> spellings;
  };
  const Case cases[] = {
      {"on_busy", "CKPT_ON_BUSY", {"wait", "coalesce"}},
      {"layout", "CKPT_LAYOUT", {"directory", "series"}},
      {"gpu_double_buffer", "CKPT_GPU_DOUBLE_BUFFER", {"auto", "off", "on"}},
      {"mpi_threads", "CKPT_MPI_THREADS", {"auto", "multiple", "funneled"}},
      {"redundancy", "CKPT_REDUNDANCY", {"none", "partner", "xor"}},
  };
  const std::string dir = test::scratch_dir();
  for (const Case& c : cases) {
    SCOPED_TRACE(c.key);
    std::string list;
    for (const char* s : c.spellings) list += (list.empty() ? "" : ", ") + std::string(s);
    const std::string want = "option '" + std::string(c.key) + "': bad value 'bogus' (allowed: " + list + ")";
    auto y = Options::try_load(write_yaml(dir, std::string(c.key) + ": bogus\n"));
    ASSERT_FALSE(y.ok());
    EXPECT_EQ(y.status().code(), Code::invalid_argument);
    EXPECT_NE(y.status().message().find(want), std::string::npos) << y.status().message();
    ::setenv(c.env, "bogus", 1);
    Options e;
    ::unsetenv(c.env);
    EXPECT_EQ(e.error.code(), Code::invalid_argument);
    EXPECT_NE(e.error.message().find(want), std::string::npos) << e.error.message();
    EXPECT_NE(e.error.message().find(c.env), std::string::npos) << e.error.message();
    // Each spelling is accepted (case matters: the upper-cased one is not).
    for (const char* s : c.spellings) {
      const std::string extra = std::string(c.key) == "gpu_double_buffer" ? "gpu_spare_bytes: 1M\n" : "";
      auto ok = Options::try_load(write_yaml(dir, std::string(c.key) + ": " + s + "\n" + extra));
      EXPECT_TRUE(ok.ok()) << s << ": " << ok.status().to_string();
      std::string upper = s;
      for (auto& ch : upper) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
      EXPECT_FALSE(Options::try_load(write_yaml(dir, std::string(c.key) + ": " + upper + "\n")).ok()) << upper;
    }
  }
  // The public parsers: "'<text>' is not a, b or c".
  EXPECT_EQ(parse_on_busy("drop").status().message(), "'drop' is not wait or coalesce");
  EXPECT_EQ(parse_layout("tree").status().message(), "'tree' is not directory or series");
  EXPECT_EQ(parse_double_buffer("ON").status().message(), "'ON' is not one of: auto, off, on");
  EXPECT_EQ(*parse_layout("directory"), Options::Layout::directory);
  // A value set in code from an integer is refused by validate(), which lists the spellings too.
  Options o = Options::defaults();
  o.dir = dir;
  o.layout = static_cast<Options::Layout>(7);
  EXPECT_EQ(o.validate().message(), "option 'layout' is ?7 (allowed: directory, series)");
  o = Options::defaults();
  o.dir = dir;
  o.redundancy = static_cast<Redundancy>(9);
  EXPECT_EQ(o.validate().message(), "option 'redundancy' is ?9 (allowed: none, partner, xor)");
}

// The table (CKPT_OPTIONS): every option reads back what it prints, in files and in variables, and
// to_yaml() of any options is a file that loads as the same options.
TEST(OptionsTable, ToYamlRoundTrips) {
  const std::string dir = test::scratch_dir();
  Options o = Options::defaults();
  o.dir = "/scratch/run: 1";  // YAML's special characters quoted
  o.pool_bytes = 3ull << 30;
  o.chunk_bytes = 8 << 20;
  o.on_busy = OnBusy::coalesce;
  o.thread_cpus = "0-3,8";
  o.mpi_threads = MpiThreads::funneled;
  o.redundancy = Redundancy::xor_parity;
  o.local_dir = "/local";
  o.gpu_double_buffer = std::nullopt;
  o.mpiio_hints = "cb_nodes=2,romio_cb_write=enable";
  o.pool_max_fraction = 0.125;
  o.groups.push_back({"walkers", {"walkers/*", "w[0-9]"}, "mpiio"});
  ASSERT_TRUE(o.validate().ok()) << o.validate().to_string();
  const std::string y = o.to_yaml();
  std::ofstream(dir + "/round.yaml") << y;
  auto back = Options::try_load(dir + "/round.yaml");
  ASSERT_TRUE(back.ok()) << back.status().to_string() << "\n" << y;
  EXPECT_EQ(back->to_yaml(), y);
  EXPECT_EQ(back->dir, o.dir);
  EXPECT_EQ(back->pool_bytes, o.pool_bytes);
  EXPECT_EQ(back->thread_cpus, o.thread_cpus);
  EXPECT_FALSE(back->thread_slice_us.has_value());
  EXPECT_EQ(back->redundancy, Redundancy::xor_parity);
  ASSERT_EQ(back->groups.size(), 1u);
  EXPECT_EQ(back->groups[0].match, o.groups[0].match);
  EXPECT_NE(y.find("pool_bytes: 3G\n"), std::string::npos) << y;
  EXPECT_NE(y.find("thread_slice_us: auto\n"), std::string::npos) << "one spelling of auto: " << y;
  // Control characters (a trailing carriage return, which a YAML reader drops from a plain scalar),
  // quotes, backslashes and bytes that are not UTF-8 read back as they were (fuzz_options found the first).
  o.dir =
      "\r"
      "kpt"
      "\xc0"
      "a\"d\\"
      "\x01"
      "\x7f"
      "\r";
  o.local_dir = "tab\there";
  ASSERT_TRUE(o.validate().ok()) << o.validate().to_string();
  const std::string z = o.to_yaml();
  std::ofstream(dir + "/control.yaml") << z;
  back = Options::try_load(dir + "/control.yaml");
  ASSERT_TRUE(back.ok()) << back.status().to_string() << "\n" << z;
  EXPECT_EQ(back->dir, o.dir);
  EXPECT_EQ(back->local_dir, o.local_dir);
  EXPECT_EQ(back->to_yaml(), z);
}

TEST(OptionsTable, EveryRowIsDescribedAndReadFromItsVariable) {
  const auto rows = describe_options();
  ASSERT_GE(rows.size(), 30u);
  const std::string defaults = Options::defaults().to_yaml();
  for (const auto& r : rows) {
    SCOPED_TRACE(r.key);
    EXPECT_EQ(r.variable.rfind("CKPT_", 0), 0u);
    EXPECT_TRUE(r.scope == "job" || r.scope == "job_set" || r.scope == "rank") << r.scope;
    EXPECT_FALSE(r.description.empty());
    EXPECT_FALSE(r.allowed.empty());
    EXPECT_NE(defaults.find(r.key + ": "), std::string::npos) << "to_yaml prints every option";
    // The default, spelled as files take it, set through the variable: no error, same text back.
    ::setenv(r.variable.c_str(), r.default_value.c_str(), 1);
    Options e;
    ::unsetenv(r.variable.c_str());
    if (r.default_value.empty()) continue;  // an empty variable is the empty default: nothing to compare
    EXPECT_TRUE(e.error.ok()) << e.error.to_string();
    EXPECT_EQ(e.to_yaml(), defaults);
  }
}

TEST(OptionsTable, KeySetTwiceOrANulInAPathIsAnError) {
  const std::string dir = test::scratch_dir();
  auto twice = Options::try_load(write_yaml(dir, "keep: 3\nkeep: 4\n"));
  ASSERT_FALSE(twice.ok());
  EXPECT_NE(twice.status().message().find("key 'keep' is set twice"), std::string::npos) << twice.status().message();
  Options o = Options::defaults();
  o.dir = std::string("/tmp/a\0b", 8);
  EXPECT_EQ(o.validate().code(), Code::invalid_argument);
  auto near = Options::try_load(write_yaml(dir, "chunk_byte: 1M\n"));
  ASSERT_FALSE(near.ok());
  EXPECT_NE(near.status().message().find("did you mean 'chunk_bytes'?"), std::string::npos) << near.status().message();
}

TEST(OptionsTable, TestKnobsAreNotOptions) {
  ::setenv("CKPT_TEST_FLUSH_DELAY_MS", "5", 1);
  Options o;
  ::unsetenv("CKPT_TEST_FLUSH_DELAY_MS");
  EXPECT_TRUE(o.error.ok()) << o.error.to_string();
  EXPECT_TRUE(o.warnings.empty()) << "a known knob, not an unknown variable";
  EXPECT_EQ(Options::defaults().to_yaml(), o.to_yaml()) << "not a field of Options";
  const std::string md = options_markdown();
  EXPECT_NE(md.find("CKPT_TEST_FLUSH_DELAY_MS"), std::string::npos);
}

// YAML's null (`key:`, `~`, `null`) loses the text: an empty value where the option takes one, else an
// error saying to quote the word (`transport: null` meant the null transport).
TEST(OptionsTable, YamlNullIsEmptyOrAClearError) {
  const std::string dir = test::scratch_dir();
  auto off = Options::try_load(write_yaml(dir, "trace: ~\nlocal_dir:\n"));
  ASSERT_TRUE(off.ok()) << off.status().to_string();
  EXPECT_TRUE(off->trace.empty() && off->local_dir.empty());
  auto bare = Options::try_load(write_yaml(dir, "transport: null\n"));
  ASSERT_FALSE(bare.ok());
  EXPECT_NE(bare.status().message().find("transport: \"null\""), std::string::npos) << bare.status().message();
  auto quoted = Options::try_load(write_yaml(dir, "transport: \"null\"\n"));
  ASSERT_TRUE(quoted.ok()) << quoted.status().to_string();
  EXPECT_EQ(quoted->transport, "null");
}
