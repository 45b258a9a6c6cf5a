// Checkpoints on disk as the tool sees them: roots, steps, validated indexes, verified block reads.
#include "tools/store.hpp"

#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <tuple>

#include "tools/output.hpp"

namespace ckpt::tools {
namespace {

double now_s() {
  using namespace std::chrono;
  return duration<double>(steady_clock::now().time_since_epoch()).count();
}

}  // namespace

Result<Checkpoint> open_checkpoint(const std::string& dir) {
  auto c = detail::load_checkpoint(dir);
  if (!c.ok()) return c.status();
  return Checkpoint{dir, c->data_dir, std::move(c->index)};
}

std::optional<std::string> segment_path_error(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return std::nullopt;  // not there: the subcommand says so
  // The segment directory itself, or a file in it (data.<rank>, steps).
  auto [parent, last] = detail::split_last(path);
  std::string what = " is segment ";
  if (!S_ISDIR(st.st_mode)) {
    std::tie(parent, last) = detail::split_last(parent);
    what = " is a file of segment ";
  }
  auto k = detail::parse_segment_name(last);
  if (!k || !detail::scan_root(parent).series) return std::nullopt;
  return path + what + std::to_string(*k) + " of the series root " + parent + "; give the root";
}

Result<CheckpointReader> open_reader(const std::string& path) {
  auto r = Reader::open(path);
  if (!r.ok()) return r.status();
  return r->latest();
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
  std::fprintf(stderr, "\r%s [%s] %3d%% %s / %s ", shown(m_label).c_str(), bar.c_str(), static_cast<int>(f * 100),
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
