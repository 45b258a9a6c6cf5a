/// \file output.hpp
/// What the `ckpt` tool writes, one escaping per output kind (docs/cli.md, "Bytes in names and
/// annotations"). Names, paths, annotations and messages are bytes - an index may hold any - so every
/// subcommand prints text through say() and fail() and JSON through print_json(), never raw: no byte
/// reaches a terminal that could start an escape sequence, and no output aborts on bytes that are not
/// UTF-8 (nlohmann::json's dump throws on them). Internal to tools/.
#ifndef CKPT_TOOLS_OUTPUT_HPP
#define CKPT_TOOLS_OUTPUT_HPP

#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>

namespace ckpt::tools {

/// Text outputs (tables, messages): the bytes of every printable UTF-8 character as they are, a
/// backslash as `\\`, and every other byte - C0 controls (newline, tab, ESC...), DEL, the bytes of a C1
/// control (U+0080..U+009F), bytes that are not well-formed UTF-8 - as `\xNN`. Unambiguous: the bytes
/// can be recovered from the text.
std::string shown(std::string_view bytes);

/// JSON outputs: `value` as one document, indented by 2, in which a string's well-formed UTF-8
/// characters are themselves, except `"`, `\`, C0 controls, DEL and C1 controls, which are JSON escapes
/// (`\n`, `\u001b`, `\u009b`, ...), and a byte that is not UTF-8, 0xNN, is `\udcNN` (a lone surrogate:
/// Python's json.loads gives the str that `.encode("utf-8", "surrogateescape")` turns back into the
/// bytes, the convention of os.fsdecode and of the Python package). Numbers as nlohmann::json writes them.
std::string json_text(const nlohmann::ordered_json& value);
/// json_text(value) and a newline on stdout.
void print_json(const nlohmann::ordered_json& value);

namespace output_detail {
struct Held {
  std::string text;
};
template <class T>
auto hold(const T& v) {
  if constexpr (std::is_convertible_v<const T&, std::string_view>)
    return Held{shown(std::string_view(v))};
  else
    return v;
}
template <class T>
auto pass(const T& v) {
  if constexpr (std::is_same_v<T, Held>)
    return v.text.c_str();
  else
    return v;
}
}  // namespace output_detail

/// std::printf(fmt, args...) on stdout with every string argument (std::string, const char*) shown(): how
/// a subcommand prints text. `fmt` is the subcommand's own literal.
template <class... A>
void say(const char* fmt, const A&... args) {
  if constexpr (sizeof...(A) == 0) {
    std::fputs(fmt, stdout);
  } else {
    const std::tuple<decltype(output_detail::hold(args))...> held(output_detail::hold(args)...);
    std::apply([fmt](const auto&... h) { std::printf(fmt, output_detail::pass(h)...); }, held);
  }
}

}  // namespace ckpt::tools

#endif  // CKPT_TOOLS_OUTPUT_HPP
