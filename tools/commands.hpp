/// \file commands.hpp
/// The subcommands of the `ckpt` tool. Each takes its parsed arguments and returns an exit status
/// (see ExitCode); results go to stdout, diagnostics to stderr. Internal to tools/.
#ifndef CKPT_TOOLS_COMMANDS_HPP
#define CKPT_TOOLS_COMMANDS_HPP

#include <string>
#include <vector>

namespace ckpt::tools {

/// `ckpt ls PATH [-l] [--json]`.
struct LsArgs {
  std::string path;          ///< a checkpoint root or one ckpt.<step> directory
  bool long_format = false;  ///< per-block table (checkpoint) / per-variable lines (root)
  bool json = false;
};
int run_ls(const LsArgs& a);

/// `ckpt verify PATH [--quiet]`.
struct VerifyArgs {
  std::string path;    ///< a root (every committed checkpoint) or one checkpoint
  bool quiet = false;  ///< only bad blocks and the summary
  bool json = false;
};
int run_verify(const VerifyArgs& a);

/// `ckpt diff A B [--tol X] [--var NAME]... [--key NAME] [--json]`.
struct DiffArgs {
  std::string a, b;  ///< checkpoints, or roots (their newest complete checkpoint)
  bool has_tol = false;
  double tol = 0;                 ///< limit of the magnitude error when has_tol
  std::vector<std::string> vars;  ///< only these variables (all when empty)
  std::string key;                ///< joined arrays whose rows line up with this one are compared by its values
  bool json = false;
};
int run_diff(const DiffArgs& a);

/// `ckpt convert PATH -o OUT.h5 [--force]`.
struct ConvertArgs {
  std::string path;
  std::string output;
  bool force = false;  ///< overwrite an existing output file
};
int run_convert(const ConvertArgs& a);

/// Prints "ckpt <cmd>: <message>" on stderr (one line) and returns kExitError.
int fail(const char* cmd, const std::string& message);

}  // namespace ckpt::tools

#endif  // CKPT_TOOLS_COMMANDS_HPP
