// Checkpoints on disk as the tool sees them: roots, steps, validated indexes, verified block reads.
#include "tools/store.hpp"

#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>

#include "base/posix_io.hpp"

namespace ckpt::tools {
namespace {

constexpr std::uint64_t kMaxIndexBytes = 1ull << 32;

std::string base_name(std::string path) {
  while (path.size() > 1 && path.back() == '/') path.pop_back();
  const auto slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

bool file_exists(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0;
}

double now_s() {
  using namespace std::chrono;
  return duration<double>(steady_clock::now().time_since_epoch()).count();
}

}  // namespace

bool parse_step_name(const std::string& name, std::int64_t& step, std::string& suffix) {
  if (name.rfind("ckpt.", 0) != 0) return false;
  std::string rest = name.substr(5);
  suffix.clear();
  const auto dot = rest.find('.');
  if (dot != std::string::npos) {
    suffix = rest.substr(dot + 1);
    rest = rest.substr(0, dot);
    if (suffix != "tmp" && suffix != "old") return false;
  }
  if (rest.empty() || rest.size() > 18 || rest.find_first_not_of("0123456789") != std::string::npos) return false;
  step = std::stoll(rest);
  return true;
}

bool is_checkpoint_dir(const std::string& path) {
  std::int64_t step = 0;
  std::string suffix;
  const std::string name = base_name(path);
  return file_exists(path + "/index") || parse_step_name(name, step, suffix) || name == "latest";
}

Status check_directory(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return detail::errno_status(path);
  if (!S_ISDIR(st.st_mode)) return Status(Code::invalid_argument, path + " is not a directory");
  return Status::OK();
}

Result<std::vector<StepEntry>> list_steps(const std::string& root) {
  CKPT_RETURN_IF_ERROR(check_directory(root));
  DIR* d = ::opendir(root.c_str());
  if (d == nullptr) return detail::errno_status("open directory " + root);
  std::vector<StepEntry> out;
  while (dirent* e = ::readdir(d)) {
    StepEntry s;
    s.name = e->d_name;
    if (!parse_step_name(s.name, s.step, s.suffix)) continue;
    s.path = root + "/" + s.name;
    if (check_directory(s.path).ok()) out.push_back(std::move(s));
  }
  ::closedir(d);
  auto rank = [](const std::string& suffix) { return suffix.empty() ? 0 : suffix == "old" ? 1 : 2; };
  std::sort(out.begin(), out.end(), [&](const StepEntry& a, const StepEntry& b) {
    return a.step != b.step ? a.step > b.step : rank(a.suffix) < rank(b.suffix);
  });
  for (auto& s : out) {
    if (s.suffix == "tmp") {
      s.reason = "never committed (" + s.name + ")";
      continue;
    }
    auto c = open_checkpoint(s.path);
    if (!c.ok()) {
      s.reason = c.status().message();
      continue;
    }
    if (s.suffix == "old") {
      s.reason = "being replaced by a newer commit of the same step";
      continue;
    }
    s.complete = true;
    s.index = std::move(c.value().index);
  }
  return out;
}

std::optional<std::int64_t> latest_link_step(const std::string& root) {
  char buf[4096];
  const ssize_t n = ::readlink((root + "/latest").c_str(), buf, sizeof buf - 1);
  if (n <= 0) return std::nullopt;
  std::int64_t step = 0;
  std::string suffix;
  if (!parse_step_name(base_name(std::string(buf, static_cast<std::size_t>(n))), step, suffix) || !suffix.empty())
    return std::nullopt;
  return step;
}

Result<Checkpoint> open_checkpoint(const std::string& dir) {
  CKPT_RETURN_IF_ERROR(check_directory(dir));
  std::int64_t step = 0;
  std::string suffix;
  const bool named = parse_step_name(base_name(dir), step, suffix);
  if (named && suffix == "tmp")
    return Status(Code::failed_precondition, "incomplete checkpoint " + dir + ": it was never committed (.tmp)");
  auto bytes = detail::read_file(dir + "/index", kMaxIndexBytes);
  if (!bytes.ok()) {
    if (bytes.status().code() == Code::not_found)
      return Status(Code::failed_precondition,
                    "incomplete checkpoint " + dir + ": no index (the commit did not finish)");
    return Status(bytes.status().code(), "cannot read the index of " + dir + ": " + bytes.status().message());
  }
  auto idx = detail::decode_index(bytes->data(), bytes->size());
  if (!idx.ok()) return Status(Code::corrupt, "corrupt checkpoint " + dir + ": " + idx.status().message());
  if (named && idx->step != step)
    return Status(Code::corrupt,
                  "corrupt checkpoint " + dir + ": its index describes step " + std::to_string(idx->step));
  return Checkpoint{dir, std::move(idx).value()};
}

Result<Checkpoint> resolve_checkpoint(const std::string& path) {
  CKPT_RETURN_IF_ERROR(check_directory(path));
  if (is_checkpoint_dir(path)) return open_checkpoint(path);
  auto steps = list_steps(path);
  if (!steps.ok()) return steps.status();
  for (auto& s : steps.value())
    if (s.complete) return Checkpoint{s.path, std::move(*s.index)};
  return Status(Code::not_found, "no complete checkpoint in " + path);
}

// ---- blocks -------------------------------------------------------------------------------------

BlockReader::BlockReader(const Checkpoint& ckpt, std::size_t piece_bytes)
    : m_ckpt(ckpt), m_reader(ckpt.dir), m_piece_bytes(std::max<std::size_t>(16, piece_bytes / 16 * 16)) {}

std::string BlockReader::where(const BlockRecord& b) const {
  return "variable '" + m_ckpt.index.vars[b.var].name + "', block of rank " + std::to_string(b.rank) + " (" +
         m_ckpt.dir + "/" + m_ckpt.index.files[b.file].name + " at offset " + std::to_string(b.offset) + ", " +
         std::to_string(b.length) + " bytes)";
}

Status BlockReader::stream(const BlockRecord& b, const PieceFn& fn) {
  detail::Hasher h;
  const std::string& file = m_ckpt.index.files[b.file].name;
  if (m_piece.empty()) m_piece.resize(m_piece_bytes);  // allocated on first use: read() needs none
  for (std::uint64_t p0 = 0; p0 < b.length;) {
    const std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(b.length - p0, m_piece.size()));
    Status s = m_reader.read(file, b.offset + p0, m_piece.data(), n);
    if (!s.ok()) return Status(s.code(), where(b) + ": " + s.message());
    h.update(m_piece.data(), n);
    CKPT_RETURN_IF_ERROR(fn(m_piece.data(), n, p0));
    p0 += n;
  }
  if (h.digest() != b.checksum) return Status(Code::corrupt, "checksum mismatch in " + where(b));
  return Status::OK();
}

Status BlockReader::read(const BlockRecord& b, std::vector<std::uint8_t>& out) {
  out.resize(static_cast<std::size_t>(b.length));
  const std::string& file = m_ckpt.index.files[b.file].name;
  Status s = b.length == 0 ? Status::OK() : m_reader.read(file, b.offset, out.data(), out.size());
  if (!s.ok()) return Status(s.code(), where(b) + ": " + s.message());
  if (detail::hash64(out.data(), out.size()) != b.checksum)
    return Status(Code::corrupt, "checksum mismatch in " + where(b));
  return Status::OK();
}

// ---- small helpers ----------------------------------------------------------------------------------

std::uint64_t shape_elements(const Shape& s) {
  std::uint64_t n = 1;
  for (auto e : s) n *= e;
  return n;
}

std::uint64_t block_elements(const BlockRecord& b) { return shape_elements(b.count); }

std::string shape_to_string(const Shape& s) {
  std::string out = "[";
  for (std::size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

std::string human_bytes(std::uint64_t n) {
  if (n < 1024) return std::to_string(n) + " B";
  const char* units[] = {"KiB", "MiB", "GiB", "TiB", "PiB"};
  double v = static_cast<double>(n) / 1024;
  int u = 0;
  while (v >= 1024 && u < 4) {
    v /= 1024;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f %s", v, units[u]);
  return buf;
}

std::vector<const BlockRecord*> blocks_of(const Index& idx, std::uint32_t var) {
  std::vector<const BlockRecord*> out;
  for (auto& b : idx.blocks)
    if (b.var == var) out.push_back(&b);
  return out;
}

VarStats var_stats(const Index& idx, std::uint32_t var) {
  VarStats st;
  const DType t = idx.vars[var].dtype;
  // Compare in the stored class (i64, u64 or f64) so that 64-bit integers keep every bit.
  auto less = [t](std::uint64_t a, std::uint64_t b) {
    switch (t) {
      case DType::f32:
      case DType::f64: return detail::stat_to_double(t, a) < detail::stat_to_double(t, b);
      case DType::i8:
      case DType::i16:
      case DType::i32:
      case DType::i64: return static_cast<std::int64_t>(a) < static_cast<std::int64_t>(b);
      default: return a < b;
    }
  };
  for (auto& b : idx.blocks) {
    if (b.var != var || !b.has_stats) continue;
    if (!st.valid) {
      st.valid = true;
      st.min_bits = b.min_bits;
      st.max_bits = b.max_bits;
      continue;
    }
    if (less(b.min_bits, st.min_bits)) st.min_bits = b.min_bits;
    if (less(st.max_bits, b.max_bits)) st.max_bits = b.max_bits;
  }
  return st;
}

// ---- progress -------------------------------------------------------------------------------------

Progress::Progress(std::string label, std::uint64_t total)
    : m_label(std::move(label)), m_total(total), m_enabled(::isatty(STDERR_FILENO) == 1 && total > 0) {}

Progress::~Progress() { finish(); }

void Progress::add(std::uint64_t n) {
  m_done += n;
  if (!m_enabled) return;
  const double t = now_s();
  if (t - m_last_draw < 0.1 && m_done < m_total) return;
  m_last_draw = t;
  draw();
}

void Progress::draw() {
  constexpr int kWidth = 30;
  const double f = m_total ? std::min(1.0, static_cast<double>(m_done) / static_cast<double>(m_total)) : 1.0;
  const int fill = static_cast<int>(f * kWidth);
  std::string bar(static_cast<std::size_t>(fill), '#');
  bar.append(static_cast<std::size_t>(kWidth - fill), '.');
  std::fprintf(stderr, "\r%s [%s] %3d%% %s / %s ", m_label.c_str(), bar.c_str(), static_cast<int>(f * 100),
               human_bytes(m_done).c_str(), human_bytes(m_total).c_str());
  std::fflush(stderr);
}

void Progress::finish() {
  if (!m_enabled) return;
  m_enabled = false;
  std::fprintf(stderr, "\r\033[K");  // erase the bar's line
  std::fflush(stderr);
}

}  // namespace ckpt::tools
