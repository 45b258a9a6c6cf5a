// The escaping of each output kind of the tool (output.hpp; docs/cli.md, "Bytes in names and annotations").
#include "tools/output.hpp"

#include "base/utf8.hpp"

namespace ckpt::tools {
namespace {

void append_hex(std::string& out, const char* form, unsigned value) {
  char buf[8];
  std::snprintf(buf, sizeof buf, form, value);
  out += buf;
}

/// C0 controls, DEL and the C1 controls: never passed to a terminal as they are.
bool is_control(char32_t cp) { return cp < 0x20 || (cp >= 0x7f && cp <= 0x9f); }

void json_string(std::string_view s, std::string& out) {
  out += '"';
  char32_t cp = 0;
  for (std::size_t i = 0; i < s.size();) {
    const std::size_t n = detail::utf8_char(s, i, cp);
    if (n == 0) {
      append_hex(out, "\\udc%02x", static_cast<unsigned char>(s[i++]));
      continue;
    }
    switch (cp) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      case '\r': out += "\\r"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default:
        if (is_control(cp))
          append_hex(out, "\\u%04x", static_cast<unsigned>(cp));
        else
          out.append(s, i, n);
    }
    i += n;
  }
  out += '"';
}

/// nlohmann's dump(2) layout, with strings (keys too) through json_string().
void dump(const nlohmann::ordered_json& j, std::size_t indent, std::string& out) {
  const bool object = j.is_object();
  if (!object && !j.is_array()) {
    if (j.is_string())
      json_string(j.get_ref<const std::string&>(), out);
    else
      out += j.dump();  // numbers, booleans, null: never text
    return;
  }
  if (j.empty()) {
    out += object ? "{}" : "[]";
    return;
  }
  out += object ? "{\n" : "[\n";
  bool first = true;
  for (auto it = j.begin(); it != j.end(); ++it) {
    if (!first) out += ",\n";
    first = false;
    out.append(indent + 2, ' ');
    if (object) {
      json_string(it.key(), out);
      out += ": ";
    }
    dump(it.value(), indent + 2, out);
  }
  out += '\n';
  out.append(indent, ' ');
  out += object ? '}' : ']';
}

}  // namespace

std::string shown(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  char32_t cp = 0;
  for (std::size_t i = 0; i < s.size();) {
    std::size_t n = detail::utf8_char(s, i, cp);
    if (n == 0 || is_control(cp)) {
      for (const std::size_t end = i + (n == 0 ? 1 : n); i < end; ++i)
        append_hex(out, "\\x%02x", static_cast<unsigned char>(s[i]));
      continue;
    }
    if (cp == '\\')
      out += "\\\\";
    else
      out.append(s, i, n);
    i += n;
  }
  return out;
}

std::string json_text(const nlohmann::ordered_json& value) {
  std::string out;
  dump(value, 0, out);
  return out;
}

void print_json(const nlohmann::ordered_json& value) {
  const std::string text = json_text(value);
  std::fwrite(text.data(), 1, text.size(), stdout);
  std::fputc('\n', stdout);
}

}  // namespace ckpt::tools
