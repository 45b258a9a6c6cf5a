// `ckpt ls`: what is in a checkpoint root or in one checkpoint, from the index only (no data read); of a
// version-2 checkpoint (without -l or --json), from its root index only.
#include <sys/stat.h>

#include <algorithm>
#include <cstdio>
#include <ctime>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/index_v2.hpp"
#include "tools/commands.hpp"
#include "tools/json_util.hpp"
#include "tools/output.hpp"
#include "tools/store.hpp"

namespace ckpt::tools {
namespace {

using json = nlohmann::ordered_json;

std::string utc_time(double unix_s) {
  const std::time_t t = static_cast<std::time_t>(unix_s);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

/// Blocks of one variable (IndexLookup: one pass over the index for all variables, not one per variable).
using Blocks = std::vector<const BlockRecord*>;
std::vector<Blocks> blocks_by_var(const Index& idx, const detail::IndexLookup& lookup) {
  std::vector<Blocks> out(idx.vars.size());
  for (std::uint32_t v = 0; v < idx.vars.size(); ++v)
    for (const std::uint32_t i : lookup.blocks(v)) out[v].push_back(&idx.blocks[i]);
  return out;
}

std::uint64_t bytes_of(const Blocks& blocks) {
  std::uint64_t n = 0;
  for (auto* b : blocks) n += b->length;
  return n;
}

/// Incremental checkpoints: the payload bytes of `b` that its pieces refer to in earlier checkpoints.
std::uint64_t referred_bytes(const BlockRecord& b) {
  std::uint64_t n = 0;
  const std::uint64_t p = b.pieced() ? std::uint64_t{1} << b.piece_log2 : 0;
  for (std::size_t i = 0; i < b.pieces.size(); ++i)
    if (b.pieces[i].ref != 0) n += std::min<std::uint64_t>(p, b.length - i * p);
  return n;
}

/// The steps the pieces of `idx` refer to, ascending, as text ("3, 5").
std::string referred_steps(const Index& idx) {
  std::vector<std::int64_t> steps;
  for (const auto& f : idx.refs)
    if (std::find(steps.begin(), steps.end(), f.step) == steps.end()) steps.push_back(f.step);
  std::sort(steps.begin(), steps.end());
  std::string out;
  for (auto s : steps) out += (out.empty() ? "" : ", ") + std::to_string(s);
  return out;
}

/// A stored min/max for people: f32 with the 9 digits that round-trip a float, the rest as stored.
std::string stat_human(DType t, std::uint64_t bits) {
  if (t != DType::f32) return detail::stat_to_string(t, bits);
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.9g", detail::stat_to_double(t, bits));
  return buf;
}

std::string stat_text(DType t, const VarStats& st, bool want_max) {
  if (!st.valid) return "-";
  return stat_human(t, want_max ? st.max_bits : st.min_bits);
}

json block_json(const Index& idx, const BlockRecord& b) {
  json j;
  j["rank"] = b.rank;
  j["file"] = idx.files[b.file].name;
  j["offset"] = b.offset;
  j["bytes"] = b.length;
  j["start"] = b.start;
  j["count"] = b.count;
  j["min"] = b.has_stats ? stat_json(idx.vars[b.var].dtype, b.min_bits) : json(nullptr);
  j["max"] = b.has_stats ? stat_json(idx.vars[b.var].dtype, b.max_bits) : json(nullptr);
  j["checksum"] = hex64(b.checksum);
  if (b.pieced()) {
    j["piece_bytes"] = std::uint64_t{1} << b.piece_log2;
    j["pieces"] = b.pieces.size();
    j["bytes_referred"] = referred_bytes(b);
  }
  return j;
}

json checkpoint_json(const Checkpoint& c, bool with_blocks) {
  const Index& idx = c.index;
  json j;
  j["path"] = c.dir;
  j["data_dir"] = c.data_dir;
  j["step"] = idx.step;
  j["nranks"] = idx.nranks;
  j["transport"] = idx.transport;
  j["ckpt_id"] = hex64(idx.ckpt_id);
  j["created_unix"] = idx.created_unix;
  j["created"] = utc_time(idx.created_unix);
  j["bytes"] = idx.payload_bytes();
  std::uint64_t referred = 0;
  for (const auto& b : idx.blocks) referred += referred_bytes(b);
  j["bytes_referred"] = referred;  // incremental: of `bytes`, what earlier checkpoints store
  json refs = json::array();
  for (const auto& f : idx.refs) refs.push_back({{"step", f.step}, {"file", f.name}, {"ckpt_id", hex64(f.ckpt_id)}});
  j["refs"] = refs;
  j["attrs"] = attrs_json(idx.attrs);
  json files = json::array();
  for (auto& f : idx.files) files.push_back({{"name", f.name}, {"writer", f.writer}, {"bytes", f.bytes}});
  j["files"] = files;
  json writers = json::array();
  for (auto f : idx.rank_file) writers.push_back(idx.files[f].name);
  j["rank_files"] = writers;
  json vars = json::array();
  const detail::IndexLookup lookup(idx);
  const auto by_var = blocks_by_var(idx, lookup);
  for (std::uint32_t v = 0; v < idx.vars.size(); ++v) {
    const VarRecord& r = idx.vars[v];
    const VarStats st = var_stats(idx, v, lookup.blocks(v));
    const auto& blocks = by_var[v];
    json jv;
    jv["name"] = r.name;
    jv["dtype"] = dtype_name(r.dtype);
    jv["kind"] = detail::region_kind_name(r.kind);
    jv["uniform"] = r.uniform;
    jv["ndim"] = r.ndim;
    jv["shape"] = detail::has_global_shape(r.kind) ? json(r.global) : json(nullptr);
    jv["blocks"] = blocks.size();
    jv["bytes"] = bytes_of(blocks);
    jv["min"] = st.valid ? stat_json(r.dtype, st.min_bits) : json(nullptr);
    jv["max"] = st.valid ? stat_json(r.dtype, st.max_bits) : json(nullptr);
    jv["attrs"] = attrs_json(r.attrs);
    if (with_blocks) {
      json jb = json::array();
      for (auto* b : blocks) jb.push_back(block_json(idx, *b));
      jv["block_list"] = jb;
    }
    vars.push_back(jv);
  }
  j["variables"] = vars;
  return j;
}

/// Shape column: the global (or joined) shape, or the local extents of rank 0's block ("local [3]").
std::string shape_text(const VarRecord& r, const Blocks& blocks) {
  if (detail::has_global_shape(r.kind)) return shape_to_string(r.global);
  if (r.kind == RegionKind::scalar) return "-";
  bool same = true;
  for (auto* b : blocks) same = same && b->count == blocks.front()->count;
  if (blocks.empty()) return "-";
  return same ? "per rank " + shape_to_string(blocks.front()->count) : "per rank (varies)";
}

int ls_checkpoint(const std::string& path, const LsArgs& a) {
  auto c = open_checkpoint(path);
  if (!c.ok()) return fail("ls", c.status().message());
  const Index& idx = c->index;
  if (a.json) {
    print_json(checkpoint_json(c.value(), a.long_format));
    return kExitOk;
  }
  say("checkpoint %s: step %lld, %u ranks, transport %s, created %s\n", c->dir, static_cast<long long>(idx.step),
      idx.nranks, idx.transport, utc_time(idx.created_unix));
  say("  %zu variables, %zu blocks, %s of data in %zu files, id %s\n", idx.vars.size(), idx.blocks.size(),
      human_bytes(idx.payload_bytes()), idx.files.size(), hex64(idx.ckpt_id));
  if (!idx.refs.empty()) {
    std::uint64_t referred = 0;
    for (const auto& b : idx.blocks) referred += referred_bytes(b);
    say("  incremental: %s stored here, %s referred to in steps %s\n", human_bytes(idx.payload_bytes() - referred),
        human_bytes(referred), referred_steps(idx));
  }
  if (c->data_dir != c->dir) say("  data in %s\n", c->data_dir);  // a series step's segment
  for (auto& kv : idx.attrs) say("  attribute %s = %s\n", kv.first, kv.second);
  // Writers: which file each rank's stream went to; compact when every rank has its own file.
  say("  files:");
  for (auto& f : idx.files) say(" %s (writer %u, %s)", f.name, f.writer, human_bytes(f.bytes));
  say("\n");
  if (a.long_format) {
    say("  ranks -> files:");
    for (std::size_t r = 0; r < idx.rank_file.size(); ++r) say(" %zu:%s", r, idx.files[idx.rank_file[r]].name);
    say("\n");
  }
  std::size_t w = 8;
  for (auto& v : idx.vars) w = std::max(w, v.name.size());
  say("\n%-*s  %-5s  %-7s  %-20s  %6s  %10s  %-24s  %-24s\n", static_cast<int>(w), "variable", "dtype", "kind", "shape",
      "blocks", "bytes", "min", "max");
  const detail::IndexLookup lookup(idx);
  const auto by_var = blocks_by_var(idx, lookup);
  for (std::uint32_t v = 0; v < idx.vars.size(); ++v) {
    const VarRecord& r = idx.vars[v];
    const auto& blocks = by_var[v];
    const VarStats st = var_stats(idx, v, lookup.blocks(v));
    std::string kind = detail::region_kind_name(r.kind);
    if (r.uniform) kind += "*";
    say("%-*s  %-5s  %-7s  %-20s  %6zu  %10s  %-24s  %s\n", static_cast<int>(w), r.name, dtype_name(r.dtype), kind,
        shape_text(r, blocks), blocks.size(), human_bytes(bytes_of(blocks)), stat_text(r.dtype, st, false),
        stat_text(r.dtype, st, true));
    for (auto& kv : r.attrs) say("    attribute %s = %s\n", kv.first, kv.second);
    if (!a.long_format) continue;
    say("    %5s  %-14s  %12s  %12s  %-16s  %-16s  %-22s  %-22s  %s\n", "rank", "file", "offset", "bytes", "start",
        "count", "min", "max", "checksum");
    for (auto* b : blocks) {
      say("    %5u  %-14s  %12llu  %12llu  %-16s  %-16s  %-22s  %-22s  %s\n", b->rank, idx.files[b->file].name,
          static_cast<unsigned long long>(b->offset), static_cast<unsigned long long>(b->length),
          shape_to_string(b->start), shape_to_string(b->count), b->has_stats ? stat_human(r.dtype, b->min_bits) : "-",
          b->has_stats ? stat_human(r.dtype, b->max_bits) : "-", hex64(b->checksum));
      if (b->pieced())
        say("           %zu pieces of %s, %s of them referred to\n", b->pieces.size(),
            human_bytes(std::uint64_t{1} << b->piece_log2), human_bytes(referred_bytes(*b)));
    }
  }
  bool any_uniform = false;
  for (auto& v : idx.vars) any_uniform = any_uniform || v.uniform;
  if (any_uniform) say("\n* uniform: every rank stored the same value (restarts on any rank count)\n");
  return kExitOk;
}

/// `ckpt ls` of a version-2 checkpoint directory (without -l and --json): what its root index says, which
/// is O(variables), after the root and its catalog are checked (check_committed) - no sub-index is read
/// (docs/format.md, "Version 2 index: two levels"; `ckpt ls -l` and `ckpt verify` read them all). nullopt when `path`
/// is no such directory (a version-1 index, a series step, a name ls_checkpoint() refuses): the whole index is read
/// then, and its errors said.
std::optional<int> ls_from_root(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) return std::nullopt;
  const auto name = detail::parse_step_name(detail::split_last(path).second);
  if (name && name->kind == EntryKind::tmp) return std::nullopt;
  auto bytes = detail::read_root_file(path);
  if (!bytes.ok() || detail::index_header_version(bytes->data(), bytes->size()) != detail::kIndexV2Version)
    return std::nullopt;
  // The root against the step of its name and its catalog (the hash chain that names every sub-index):
  // what can be checked without the sub-indices.
  if (Status st =
          detail::check_committed(path, bytes.value(), name ? std::optional<std::int64_t>(name->step) : std::nullopt);
      !st.ok())
    return fail("ls", st.message());
  auto root = detail::decode_root_index(bytes->data(), bytes->size());  // checked above
  if (!root.ok()) return fail("ls", root.status().message());
  const detail::RootIndex& r = root.value();
  std::uint64_t blocks = 0, bytes_total = 0;
  for (const detail::Var2& v : r.vars) blocks += v.n_blocks, bytes_total += v.bytes;
  say("checkpoint %s: step %lld, %u ranks, transport %s, created %s\n", path, static_cast<long long>(r.step), r.nranks,
      r.transport, utc_time(r.created_unix));
  say("  %zu variables, %llu blocks, %s of data, %u sub-indices, id %s\n", r.vars.size(),
      static_cast<unsigned long long>(blocks), human_bytes(bytes_total), r.writers, hex64(r.ckpt_id));
  if (!r.refs.empty()) {
    std::string steps;
    for (const auto& ref : r.refs) steps += (steps.empty() ? "" : ", ") + std::to_string(ref.step);
    say("  incremental: refers to steps %s (chain from step %lld; `ckpt ls -l` says how much)\n", steps,
        static_cast<long long>(r.base_step));
  }
  say("  (the root index only: `ckpt ls -l` lists files and blocks, `ckpt verify` checks them)\n");
  for (auto& kv : r.attrs) say("  attribute %s = %s\n", kv.first, kv.second);
  std::size_t w = 8;
  for (auto& v : r.vars) w = std::max(w, v.var.name.size());
  say("\n%-*s  %-5s  %-7s  %-20s  %6s  %10s  %-24s  %-24s\n", static_cast<int>(w), "variable", "dtype", "kind", "shape",
      "blocks", "bytes", "min", "max");
  bool any_uniform = false;
  for (const detail::Var2& v : r.vars) {
    const VarRecord& rec = v.var;
    std::string kind = detail::region_kind_name(rec.kind);
    if (rec.uniform) kind += "*";
    any_uniform = any_uniform || rec.uniform;
    const std::string shape = detail::has_global_shape(rec.kind)                  ? shape_to_string(rec.global)
                              : rec.kind == RegionKind::scalar || v.n_blocks == 0 ? "-"
                                                                                  : "per rank";
    say("%-*s  %-5s  %-7s  %-20s  %6llu  %10s  %-24s  %s\n", static_cast<int>(w), rec.name, dtype_name(rec.dtype), kind,
        shape, static_cast<unsigned long long>(v.n_blocks), human_bytes(v.bytes),
        v.has_stats ? stat_human(rec.dtype, v.min_bits) : "-", v.has_stats ? stat_human(rec.dtype, v.max_bits) : "-");
    for (auto& kv : rec.attrs) say("    attribute %s = %s\n", kv.first, kv.second);
  }
  if (any_uniform) say("\n* uniform: every rank stored the same value (restarts on any rank count)\n");
  return kExitOk;
}

/// What the plain root listing says of a complete step: from its index, or from a version-2 root alone.
struct StepSummary {
  std::uint32_t nranks = 0;
  std::size_t vars = 0;
  std::uint64_t bytes = 0;
  std::string transport;
  double created_unix = 0;
};

/// A version-2 step listed with ListDepth::roots: its root as the listing read it (and checked it against
/// the catalog), decoded for the summary.
Result<StepSummary> summary_from_root(const std::vector<std::uint8_t>& bytes) {
  auto root = detail::decode_root_index(bytes.data(), bytes.size());
  if (!root.ok()) return root.status();
  StepSummary out{root->nranks, root->vars.size(), 0, root->transport, root->created_unix};
  for (const detail::Var2& v : root->vars) out.bytes += v.bytes;
  return out;
}

int ls_root(const std::string& path, const LsArgs& a) {
  const auto store = detail::open_store(path);
  // The plain listing checks a two-level index by its root and catalog (O(steps), not O(steps x ranks));
  // -l and --json read every sub-index, as verify does.
  const bool roots = !a.long_format && !a.json;
  auto steps = store->list(roots ? detail::ListDepth::roots : detail::ListDepth::whole);
  if (!steps.ok()) return fail("ls", steps.status().message());
  // `latest` is the newest complete checkpoint, as latest() and restart() see it: the link is only a
  // hint (it may name an incomplete directory, dangle, or point outside the root).
  std::optional<std::int64_t> latest;
  for (auto& s : steps.value())
    if (s.complete) {
      latest = s.step;
      break;
    }
  if (a.json) {
    json j;
    j["path"] = path;
    j["latest"] = latest ? json(*latest) : json(nullptr);
    json arr = json::array();
    for (auto& s : steps.value()) {
      json e;
      e["step"] = s.step;
      e["name"] = s.name;
      e["complete"] = s.complete;
      e["reason"] = s.complete ? json(nullptr) : json(s.reason);
      e["damaged"] = s.damaged;
      if (s.complete) {
        e["nranks"] = s.index->nranks;
        e["variables"] = s.index->vars.size();
        e["bytes"] = s.index->payload_bytes();
        e["transport"] = s.index->transport;
        e["created_unix"] = s.index->created_unix;
      }
      arr.push_back(e);
    }
    j["steps"] = arr;
    print_json(j);
    return kExitOk;
  }
  std::size_t complete = 0, damaged = 0;
  for (auto& s : steps.value()) {
    complete += s.complete ? 1 : 0;
    damaged += s.damaged ? 1 : 0;
  }
  say("%s: %zu complete, %zu incomplete", path, complete, steps->size() - complete);
  if (damaged > 0) say(" (%zu damaged)", damaged);
  if (latest) say(", latest -> ckpt.%lld", static_cast<long long>(*latest));
  say("\n");
  if (steps->empty()) return kExitOk;
  int w = 16;  // the entry names: a series' abandoned records are longer ("ckpt.20 (series.0)")
  for (auto& s : steps.value()) w = std::max(w, static_cast<int>(s.name.size()));
  say("%-12s  %-*s  %-10s  %5s  %4s  %10s  %-10s  %s\n", "step", w, "directory", "state", "ranks", "vars", "bytes",
      "transport", "created / reason");
  bool unchecked = false;
  for (auto& s : steps.value()) {
    if (s.complete) {
      StepSummary sum;
      if (s.subindices_unchecked()) {
        auto got = summary_from_root(s.unchecked_root);
        if (!got.ok()) return fail("ls", got.status().message());
        sum = std::move(got).value();
        unchecked = true;
      } else {
        sum = {s.index->nranks, s.index->vars.size(), s.index->payload_bytes(), s.index->transport,
               s.index->created_unix};
      }
      say("%-12lld  %-*s  %-10s  %5u  %4zu  %10s  %-10s  %s\n", static_cast<long long>(s.step), w, s.name,
          s.subindices_unchecked() ? "complete+" : "complete", sum.nranks, sum.vars, human_bytes(sum.bytes),
          sum.transport, utc_time(sum.created_unix));
      if (a.long_format)
        for (auto& v : s.index->vars)
          say("    %-30s %-5s %s\n", v.name, dtype_name(v.dtype), detail::region_kind_name(v.kind));
    } else {
      say("%-12lld  %-*s  %-10s  %5s  %4s  %10s  %-10s  %s\n", static_cast<long long>(s.step), w, s.name,
          s.damaged ? "damaged" : "incomplete", "-", "-", "-", "-", s.reason);
    }
  }
  if (unchecked)
    say("\n+ two-level index: its root and catalog checked; `ckpt ls -l` or `ckpt verify` reads its sub-indices\n");
  return kExitOk;
}

}  // namespace

int run_ls(const LsArgs& a) {
  Status s = names_checkpoint(a.path) ? Status::OK() : check_directory(a.path);  // a series step is a name
  if (!s.ok()) return fail("ls", s.message());
  if (!names_checkpoint(a.path)) return ls_root(a.path, a);
  if (!a.long_format && !a.json)
    if (auto done = ls_from_root(a.path)) return *done;
  return ls_checkpoint(a.path, a);
}

}  // namespace ckpt::tools
