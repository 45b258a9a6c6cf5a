// The `ckpt` command line: ls, verify, diff, convert, options, report. See docs/cli.md (exit statuses: one line on error).
#include <CLI/CLI.hpp>

#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "ckpt/ckpt.hpp"
#include "ckpt/config.hpp"
#include "tools/commands.hpp"
#include "tools/output.hpp"
#include "tools/store.hpp"

namespace ckpt::tools {

int fail(const char* cmd, const std::string& message) {
  std::fprintf(stderr, "%s: %s\n", *cmd ? ("ckpt " + std::string(cmd)).c_str() : "ckpt", shown(message).c_str());
  return kExitError;
}

}  // namespace ckpt::tools

namespace {

/// --tol: a finite number >= 0 (CLI::NonNegativeNumber lets "nan" through, and NaN fails every comparison).
std::string check_tolerance(const std::string& s) {
  char* end = nullptr;
  const double v = s.empty() ? NAN : std::strtod(s.c_str(), &end);
  if (s.empty() || *end != '\0' || !std::isfinite(v) || v < 0) return "must be a finite number >= 0, not '" + s + "'";
  return "";
}

}  // namespace

int main(int argc, char** argv) {
  using namespace ckpt::tools;
  CLI::App app{"ckpt: inspect, verify, compare and convert checkpoints written by the ckpt runtime"};
  app.set_version_flag("--version", std::string("ckpt ") + ckpt::version());
  app.require_subcommand(1);

  LsArgs ls;
  auto* c_ls = app.add_subcommand("ls", "List the steps of a checkpoint root, or the variables of one checkpoint");
  c_ls->add_option("PATH", ls.path, "checkpoint root (holds ckpt.<step>/) or one ckpt.<step> directory")->required();
  c_ls->add_flag("-l,--long", ls.long_format, "one line per block (checkpoint) / per variable (root)");
  c_ls->add_flag("--json", ls.json, "machine-readable output");

  VerifyArgs verify;
  auto* c_verify = app.add_subcommand("verify", "Read every block and check every checksum (exit 0 good, 1 bad)");
  c_verify->add_option("PATH", verify.path, "one checkpoint, or a root (every committed checkpoint)")->required();
  c_verify->add_flag("-q,--quiet", verify.quiet, "print only problems and the summary");
  c_verify->add_flag("--json", verify.json, "machine-readable output");

  DiffArgs diff;
  auto* c_diff =
      app.add_subcommand("diff", "Compare two checkpoints variable by variable (global arrays across rank counts)");
  c_diff->add_option("A", diff.a, "first checkpoint (or root: its newest complete checkpoint)")->required();
  c_diff->add_option("B", diff.b, "second checkpoint (or root)")->required();
  auto* tol = c_diff->add_option("--tol", diff.tol, "fail (exit 1) if a variable's magnitude error exceeds this");
  tol->check(CLI::Validator(check_tolerance, "TOL >= 0"));
  c_diff->add_option("--var", diff.vars, "compare only this variable (repeatable: --var a --var b)")
      ->allow_extra_args(false);  // `--var x A B`: one name per --var, A and B stay positional
  c_diff->add_flag("--json", diff.json, "machine-readable output");

  ConvertArgs convert;
  auto* c_convert = app.add_subcommand("convert", "Write one checkpoint as one HDF5 file");
  c_convert->add_option("PATH", convert.path, "one checkpoint, or a root (its newest complete checkpoint)")->required();
  c_convert->add_option("-o,--output", convert.output, "the HDF5 file to write")->required();
  c_convert->add_flag("-f,--force", convert.force, "overwrite the output file if it exists");

  std::string options_config;
  bool options_markdown = false;
  auto* c_options = app.add_subcommand(
      "options", "Print the options a Runtime would be given here (defaults < --config FILE < CKPT_* variables) as YAML");
  c_options->add_option("--config", options_config, "a YAML options file, as Options::load reads it");
  c_options->add_flag("--markdown", options_markdown, "print the table of every option (docs/options.md) instead");

  std::string report_run, report_out, report_nvtx;
  auto* c_report = app.add_subcommand(
      "report",
      "PNG plots (timeline, bandwidth, per-rank I/O time) of a run traced with CKPT_TRACE, and/or the same "
      "timeline from an NVTX capture (tests/trace/nvtx_record.cpp)");
  c_report->add_option("RUN", report_run, "the CKPT_TRACE directory of the run");
  c_report->add_option("--nvtx", report_nvtx, "directory of nvtx.<rank>.tsv files of the same run");
  c_report->add_option("--out", report_out, "directory for the PNGs (default: RUN, else the --nvtx directory)");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == static_cast<int>(CLI::ExitCodes::Success)) return app.exit(e);  // --help, --version
    // A usage error is one line naming the subcommand, as every other error (CLI11 would add a second).
    std::string cmd;
    for (const CLI::App* sub : {c_ls, c_verify, c_diff, c_convert, c_report})
      if (argc > 1 && sub->get_name() == argv[1]) cmd = sub->get_name();
    return fail(cmd.c_str(), e.what());
  }
  diff.has_tol = tol->count() > 0;
  // A segment of a series root (or a file in one) is neither a root nor a checkpoint: name the root.
  for (auto [cmd, path] : {std::pair<const char*, const std::string*>{"ls", c_ls->parsed() ? &ls.path : nullptr},
                           {"verify", c_verify->parsed() ? &verify.path : nullptr},
                           {"diff", c_diff->parsed() ? &diff.a : nullptr},
                           {"diff", c_diff->parsed() ? &diff.b : nullptr},
                           {"convert", c_convert->parsed() ? &convert.path : nullptr}})
    if (path != nullptr)
      if (auto e = segment_path_error(*path)) return fail(cmd, *e);
  if (c_ls->parsed()) return run_ls(ls);
  if (c_verify->parsed()) return run_verify(verify);
  if (c_diff->parsed()) return run_diff(diff);
  if (c_convert->parsed()) return run_convert(convert);
  if (c_options->parsed()) {
    if (options_markdown) {
      std::fputs(ckpt::options_markdown().c_str(), stdout);
      return kExitOk;
    }
    ckpt::Options o = options_config.empty() ? ckpt::Options() : ckpt::Options::load(options_config);
    for (const auto& w : o.warnings) std::fprintf(stderr, "ckpt options: warning: %s\n", w.c_str());
    if (!o.error.ok()) return fail("options", o.error.to_string());
    std::fputs(o.to_yaml().c_str(), stdout);
    return kExitOk;
  }
  if (c_report->parsed()) {
    if (report_run.empty() && report_nvtx.empty())
      return fail("report", "give RUN (a CKPT_TRACE directory), --nvtx, or both");
    // The plots are matplotlib's: run the script installed beside the tool (or in the source tree).
    for (const char* script : {CKPT_REPORT_SCRIPT_INSTALLED, CKPT_REPORT_SCRIPT_SOURCE}) {
      if (::access(script, R_OK) != 0) continue;
      std::vector<const char*> args{"python3", script};
      if (!report_run.empty()) args.push_back(report_run.c_str());
      if (!report_nvtx.empty()) {
        args.push_back("--nvtx");
        args.push_back(report_nvtx.c_str());
      }
      if (!report_out.empty()) {
        args.push_back("--out");
        args.push_back(report_out.c_str());
      }
      args.push_back(nullptr);
      ::execvp("python3", const_cast<char* const*>(args.data()));
      return fail("report", std::string("cannot run python3: ") + std::strerror(errno));
    }
    return fail("report", "ckpt_report.py not found (looked in " CKPT_REPORT_SCRIPT_INSTALLED
                          " and " CKPT_REPORT_SCRIPT_SOURCE ")");
  }
  return kExitError;
}
