// `ckpt diff`: compare two checkpoints variable by variable. Global arrays are compared element by
// element in the global index space, so A and B may come from different rank counts; per-rank
// (local, scalar) variables are compared rank by rank. Metrics follow FLASH-X's sfocu:
//   magnitude error  mE = sup|a - b| / max(sup|a|, sup|b|, 1e-99)   (Jain et al., eq. (1))
// plus the max absolute difference and the relative L2 norm ||a - b||_2 / max(||a||_2, ||b||_2, 1e-99).
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "ckpt/reader.hpp"
#include "tools/commands.hpp"
#include "tools/json_util.hpp"
#include "tools/output.hpp"
#include "tools/store.hpp"

namespace ckpt::tools {
namespace {

using json = nlohmann::ordered_json;
constexpr long double kTiny = 1e-99L;

/// Running comparison of element pairs. long double holds every i64/u64 exactly (x86 80-bit).
struct Accumulator {
  std::uint64_t compared = 0, differing = 0, nan_mismatch = 0;
  long double max_abs = 0, sup_a = 0, sup_b = 0, ss_diff = 0, ss_a = 0, ss_b = 0;

  void add(long double a, long double b) {
    ++compared;
    const bool na = std::isnan(a), nb = std::isnan(b);
    if (na || nb) {
      if (na != nb) {
        ++nan_mismatch;
        ++differing;
      }
      return;
    }
    if (a != b) {
      ++differing;
      const long double d = std::fabs(a - b);
      max_abs = std::max(max_abs, d);
      ss_diff += d * d;
    }
    sup_a = std::max(sup_a, std::fabs(a));
    sup_b = std::max(sup_b, std::fabs(b));
    ss_a += a * a;
    ss_b += b * b;
  }
  double mag_error() const {
    if (max_abs == 0) return 0;
    if (std::isinf(max_abs)) return INFINITY;
    return static_cast<double>(max_abs / std::max({sup_a, sup_b, kTiny}));
  }
  double rel_l2() const {
    if (ss_diff == 0) return 0;
    return static_cast<double>(std::sqrt(ss_diff) / std::max({std::sqrt(ss_a), std::sqrt(ss_b), kTiny}));
  }
};

template <class TA, class TB>
void compare_run_typed(const std::uint8_t* pa, const std::uint8_t* pb, std::uint64_t n, Accumulator& acc) {
  for (std::uint64_t i = 0; i < n; ++i) {
    TA a;
    TB b;
    std::memcpy(&a, pa + i * sizeof(TA), sizeof(TA));
    std::memcpy(&b, pb + i * sizeof(TB), sizeof(TB));
    acc.add(static_cast<long double>(a), static_cast<long double>(b));
  }
}

/// Compares `n` elements of dtype `ta` at `pa` with `n` of dtype `tb` at `pb`.
void compare_run(DType ta, const std::uint8_t* pa, DType tb, const std::uint8_t* pb, std::uint64_t n,
                 Accumulator& acc) {
  if (ta == DType::bytes || tb == DType::bytes) {  // opaque: equal or not, byte by byte
    for (std::uint64_t i = 0; i < n; ++i) {
      ++acc.compared;
      if (pa[i] != pb[i]) ++acc.differing;
    }
    return;
  }
  visit_dtype(ta, [&](auto a) {
    visit_dtype(tb, [&](auto b) { compare_run_typed<decltype(a), decltype(b)>(pa, pb, n, acc); });
  });
}

/// Outcome for one variable.
struct VarDiff {
  std::string name, kind, dtype;
  std::string result;  ///< equal, differs, only in A, only in B, incompatible, skipped
  std::string note;
  bool compared = false;
  bool fails = false;  ///< counts against --tol
  /// With --key, for a joined array: "key" (its rows matched by the key's values) or why it was compared
  /// row by row instead.
  std::string keyed;
  Accumulator acc;
};

/// The key variable of one side (--key): its values in order and the stored row of each, and the row
/// layout a joined variable must share with it to be matched through it.
struct KeySide {
  std::vector<std::int64_t> keys;                    ///< ascending; equal values adjacent
  std::vector<std::uint64_t> rows;                   ///< rows[i] holds keys[i]
  std::vector<std::array<std::uint64_t, 2>> layout;  ///< (first row, rows) of each block, ascending
  std::string duplicates;                            ///< "107 (2 rows), ..." of the first few
  std::uint64_t nduplicates = 0;                     ///< values held by more than one row
};

/// (first row, rows) of each block of joined variable `v`, ascending.
std::vector<std::array<std::uint64_t, 2>> row_layout(const VariableInfo& v) {
  std::vector<std::array<std::uint64_t, 2>> out;
  for (const BlockInfo& b : v.blocks)
    if (!b.start.empty() && !b.count.empty()) out.push_back({b.start[0], b.count[0]});
  std::sort(out.begin(), out.end());
  return out;
}

/// The values "a, b, c" of the first `max` entries of `v` (", ..." when there are more).
std::string some(const std::vector<std::int64_t>& v, std::size_t max = 5) {
  std::string out;
  for (std::size_t i = 0; i < v.size() && i < max; ++i) out += (i ? ", " : "") + std::to_string(v[i]);
  if (v.size() > max) out += ", ...";
  return out;
}

/// Both sides' keys, matched: the rows of A and B holding each value they share, the values only one
/// side holds, and why matching is impossible (a value held by several rows of one side).
struct KeyMatch {
  std::string name;
  KeySide a, b;
  std::vector<std::pair<std::uint64_t, std::uint64_t>> pairs;  ///< (row of A, row of B) of each common value
  std::vector<std::int64_t> only_a, only_b;
  std::string problem;  ///< non-empty: the key is not unique; no variable is compared through it

  /// Loads `name` from one side through the reader (its checks: joined, integer, one value per row).
  static Status load(CheckpointReader& r, const std::string& name, const char* side, KeySide& out) {
    auto info = r.variable(name);
    if (!info.ok())
      return Status(Code::not_found,
                    std::string("--key: no variable '") + name + "' in " + side + " (" + r.path() + ")");
    auto rows = r.rows_by_key(name, &out.keys, /*allow_duplicates=*/true);
    if (!rows.ok()) return Status(rows.status().code(), std::string("--key: ") + side + ": " + rows.status().message());
    out.rows = std::move(rows).value();
    out.layout = row_layout(info.value());
    for (std::size_t i = 1; i < out.keys.size(); ++i) {
      if (out.keys[i] != out.keys[i - 1] || (i >= 2 && out.keys[i - 1] == out.keys[i - 2])) continue;
      std::size_t n = 2;
      while (i + n - 1 < out.keys.size() && out.keys[i + n - 1] == out.keys[i]) ++n;
      if (++out.nduplicates <= 5)
        out.duplicates +=
            (out.duplicates.empty() ? "" : ", ") + std::to_string(out.keys[i]) + " (" + std::to_string(n) + " rows)";
    }
    if (out.nduplicates > 5) out.duplicates += ", ...";
    return Status::OK();
  }

  Status build(CheckpointReader& ra, CheckpointReader& rb, const std::string& key) {
    name = key;
    CKPT_RETURN_IF_ERROR(load(ra, key, "A", a));
    CKPT_RETURN_IF_ERROR(load(rb, key, "B", b));
    for (auto [side, ks] : {std::pair<const char*, const KeySide*>{"A", &a}, {"B", &b}})
      if (ks->nduplicates > 0)
        problem += std::string(problem.empty() ? "" : "; ") + "key '" + key + "' is not unique in " + side + ": " +
                   std::to_string(ks->nduplicates) + " value(s) held by more than one row: " + ks->duplicates;
    if (!problem.empty()) return Status::OK();
    std::size_t i = 0, j = 0;
    while (i < a.keys.size() || j < b.keys.size()) {
      if (j == b.keys.size() || (i < a.keys.size() && a.keys[i] < b.keys[j])) {
        only_a.push_back(a.keys[i++]);
      } else if (i == a.keys.size() || b.keys[j] < a.keys[i]) {
        only_b.push_back(b.keys[j++]);
      } else {
        pairs.emplace_back(a.rows[i++], b.rows[j++]);
      }
    }
    return Status::OK();
  }
  bool complete() const { return problem.empty() && only_a.empty() && only_b.empty(); }
  /// One line: how the keys matched.
  std::string summary() const {
    if (!problem.empty()) return problem;
    std::string s = "key '" + name + "': " + std::to_string(pairs.size()) + " value(s) in both";
    if (!only_a.empty()) s += ", " + std::to_string(only_a.size()) + " only in A (" + some(only_a) + ")";
    if (!only_b.empty()) s += ", " + std::to_string(only_b.size()) + " only in B (" + some(only_b) + ")";
    return s;
  }
};

/// Reads through the public Reader (one implementation of reading: a box touches only the blocks that
/// intersect it, every block read is verified). Works from the readers' variable descriptions alone.
class Differ {
 public:
  /// `key`: the matched key of --key, or null.
  Differ(CheckpointReader& a, CheckpointReader& b, const KeyMatch* key = nullptr) : m_ra(a), m_rb(b), m_key(key) {}

  Status compare(const std::string& name, VarDiff& out) {
    auto ia = m_ra.variable(name);
    auto ib = m_rb.variable(name);
    out.name = name;
    if (!ia.ok() || !ib.ok()) {
      const VariableInfo& v = ia.ok() ? ia.value() : ib.value();
      out.kind = var_kind_name(v.kind);
      out.dtype = dtype_name(v.dtype);
      out.result = ia.ok() ? "only in A" : "only in B";
      out.fails = true;
      return Status::OK();
    }
    const VariableInfo& va = ia.value();
    const VariableInfo& vb = ib.value();
    out.kind = var_kind_name(va.kind);
    out.dtype = dtype_name(va.dtype);
    if (va.dtype != vb.dtype) out.dtype += std::string("/") + dtype_name(vb.dtype);
    auto incompatible = [&](const std::string& why) {
      out.result = "incompatible";
      out.note = why;
      out.fails = true;
      return Status::OK();
    };
    if (va.kind != vb.kind)
      return incompatible(std::string("kind ") + var_kind_name(va.kind) + " vs " + var_kind_name(vb.kind));
    if ((va.dtype == DType::bytes) != (vb.dtype == DType::bytes))
      return incompatible(std::string("dtype ") + dtype_name(va.dtype) + " vs " + dtype_name(vb.dtype));
    const std::size_t nda = ndim(va), ndb = ndim(vb);
    if (nda != ndb) return incompatible("rank " + std::to_string(nda) + " vs " + std::to_string(ndb));
    if (m_key != nullptr && va.kind == VarKind::joined) {
      if (row_layout(va) == m_key->a.layout && row_layout(vb) == m_key->b.layout) {
        out.keyed = "key";
        if (!m_key->problem.empty()) return incompatible(m_key->problem);
        if (Shape(va.shape.begin() + 1, va.shape.end()) != Shape(vb.shape.begin() + 1, vb.shape.end()))
          return incompatible("row shape " + shape_to_string(Shape(va.shape.begin() + 1, va.shape.end())) + " vs " +
                              shape_to_string(Shape(vb.shape.begin() + 1, vb.shape.end())));
        CKPT_RETURN_IF_ERROR(compare_keyed(va, vb, out));
        if (!m_key->complete()) {
          out.note = m_key->summary();
          out.fails = true;
        }
        finish(va, out);
        return Status::OK();
      }
      out.keyed = "rows not those of key '" + m_key->name + "': by position";
    }
    if (has_global_shape(va.kind)) {
      if (va.shape != vb.shape)
        return incompatible("global shape " + shape_to_string(va.shape) + " vs " + shape_to_string(vb.shape));
      CKPT_RETURN_IF_ERROR(compare_global(va, vb, out));
    } else {
      CKPT_RETURN_IF_ERROR(compare_per_rank(va, vb, out));
    }
    finish(va, out);
    return Status::OK();
  }

 private:
  /// A compared variable's verdict from what the comparison counted (unless it already has one).
  static void finish(const VariableInfo& va, VarDiff& out) {
    if (!out.result.empty()) return;
    out.compared = true;
    out.result = out.acc.differing == 0 && out.note.empty() ? "equal" : "differs";
    if (out.acc.nan_mismatch > 0) out.fails = true;
    if (va.dtype == DType::bytes && out.acc.differing > 0) out.fails = true;
  }

  /// Dimensions of a variable: its global (or joined) shape's, or its blocks' (a local array may have no
  /// block).
  static std::size_t ndim(const VariableInfo& v) {
    if (has_global_shape(v.kind) || v.blocks.empty()) return v.shape.size();
    return v.blocks.front().count.size();
  }

  /// Box by box over the blocks of the side with fewer blocks (the coarser decomposition): each box is
  /// read from both sides, so every block of the coarse side is read once and a block of the other side
  /// once per coarse box it straddles. A box the other side does not store whole is not compared; the
  /// coverage note says so.
  Status compare_global(const VariableInfo& va, const VariableInfo& vb, VarDiff& out) {
    std::uint64_t covered = 0, total_a = 0, total_b = 0;
    for (const BlockInfo& b : va.blocks) total_a += shape_elements(b.count);
    for (const BlockInfo& b : vb.blocks) total_b += shape_elements(b.count);
    const bool boxes_of_a = va.blocks.size() <= vb.blocks.size();
    for (const BlockInfo& box : boxes_of_a ? va.blocks : vb.blocks) {
      const std::uint64_t n = shape_elements(box.count);
      if (n == 0) continue;
      // The side the box comes from stores it whole; the other may not (mismatch: not compared). Buffers
      // are sized from what the readers checked against the files, never from a block's claim.
      auto na = m_ra.box_bytes(va.name, box.start, box.count);
      if (na.status().code() == Code::mismatch && !boxes_of_a) continue;
      if (!na.ok()) return na.status();
      auto nb = m_rb.box_bytes(vb.name, box.start, box.count);
      if (nb.status().code() == Code::mismatch && boxes_of_a) continue;
      if (!nb.ok()) return nb.status();
      m_buf_a.resize(na.value());
      m_buf_b.resize(nb.value());
      CKPT_RETURN_IF_ERROR(m_ra.read(va.name, box.start, box.count, m_buf_a.data(), m_buf_a.size()));
      CKPT_RETURN_IF_ERROR(m_rb.read(vb.name, box.start, box.count, m_buf_b.data(), m_buf_b.size()));
      compare_run(va.dtype, m_buf_a.data(), vb.dtype, m_buf_b.data(), n, out.acc);
      covered += n;
    }
    if (covered != total_a || covered != total_b)
      out.note = "coverage differs: " + std::to_string(covered) + " elements in both, " + std::to_string(total_a) +
                 " stored in A, " + std::to_string(total_b) + " in B";
    if (!out.note.empty()) out.fails = true;
    return Status::OK();
  }

  /// Joined arrays whose rows line up with the key's on both sides: row by row through the matched
  /// key values (each side read whole once, after the reader checked its blocks against the files).
  Status compare_keyed(const VariableInfo& va, const VariableInfo& vb, VarDiff& out) {
    const Shape zeros(va.shape.size(), 0);
    auto na = m_ra.box_bytes(va.name, zeros, va.shape);
    if (!na.ok()) return na.status();
    auto nb = m_rb.box_bytes(vb.name, zeros, vb.shape);
    if (!nb.ok()) return nb.status();
    m_buf_a.resize(na.value());
    m_buf_b.resize(nb.value());
    CKPT_RETURN_IF_ERROR(m_ra.read(va.name, m_buf_a.data(), m_buf_a.size()));
    CKPT_RETURN_IF_ERROR(m_rb.read(vb.name, m_buf_b.data(), m_buf_b.size()));
    std::uint64_t row_elems = 1;
    for (std::size_t d = 1; d < va.shape.size(); ++d) row_elems *= va.shape[d];
    const std::uint64_t row_a = row_elems * dtype_size(va.dtype), row_b = row_elems * dtype_size(vb.dtype);
    for (auto [ra, rb] : m_key->pairs) {
      if ((ra + 1) * row_a > m_buf_a.size() || (rb + 1) * row_b > m_buf_b.size())
        return Status(Code::corrupt, "'" + va.name + "': fewer rows stored than key '" + m_key->name + "' has");
      compare_run(va.dtype, m_buf_a.data() + ra * row_a, vb.dtype, m_buf_b.data() + rb * row_b, row_elems, out.acc);
    }
    return Status::OK();
  }

  /// The block rank `r` wrote of `v`, or null. Blocks of per-rank variables are few per rank (one).
  static const BlockInfo* block_of_rank(const std::vector<const BlockInfo*>& by_rank, std::uint32_t r) {
    return r < by_rank.size() ? by_rank[r] : nullptr;
  }
  static std::vector<const BlockInfo*> index_by_rank(const VariableInfo& v, std::uint32_t nranks) {
    std::vector<const BlockInfo*> out(nranks, nullptr);
    for (const BlockInfo& b : v.blocks)
      if (b.rank < nranks) out[b.rank] = &b;
    return out;
  }

  /// Local arrays and scalars: the block of rank r in A with the block of rank r in B. With different
  /// rank counts only variables that were uniform (equal on every rank) in both are comparable.
  Status compare_per_rank(const VariableInfo& va, const VariableInfo& vb, VarDiff& out) {
    const auto na = static_cast<std::uint32_t>(m_ra.nranks()), nb = static_cast<std::uint32_t>(m_rb.nranks());
    const auto ra = index_by_rank(va, na), rb = index_by_rank(vb, nb);
    std::vector<std::pair<const BlockInfo*, const BlockInfo*>> pairs;
    if (na == nb) {
      for (std::uint32_t r = 0; r < na; ++r) {
        const BlockInfo* a = block_of_rank(ra, r);
        const BlockInfo* b = block_of_rank(rb, r);
        if ((a == nullptr) != (b == nullptr)) {
          out.note = "rank " + std::to_string(r) + " stored it only in " + (a ? "A" : "B");
          out.fails = true;
          continue;
        }
        if (a) pairs.emplace_back(a, b);
      }
    } else if (va.uniform && vb.uniform) {
      const BlockInfo* a = block_of_rank(ra, 0);
      const BlockInfo* b = block_of_rank(rb, 0);
      if (a && b) pairs.emplace_back(a, b);
    } else {
      out.result = "skipped";
      out.note =
          "per-rank values written by " + std::to_string(na) + " and " + std::to_string(nb) + " ranks (not uniform)";
      return Status::OK();
    }
    for (auto& [a, b] : pairs) {
      if (a->count != b->count) {
        out.note = "rank " + std::to_string(a->rank) + ": extents " + shape_to_string(a->count) + " vs " +
                   shape_to_string(b->count);
        out.fails = true;
        continue;
      }
      auto na = m_ra.rank_bytes(va.name, a->rank);
      if (!na.ok()) return na.status();
      auto nb = m_rb.rank_bytes(vb.name, b->rank);
      if (!nb.ok()) return nb.status();
      m_buf_a.resize(na.value());
      m_buf_b.resize(nb.value());
      CKPT_RETURN_IF_ERROR(m_ra.read_rank(va.name, a->rank, m_buf_a.data(), m_buf_a.size()));
      CKPT_RETURN_IF_ERROR(m_rb.read_rank(vb.name, b->rank, m_buf_b.data(), m_buf_b.size()));
      compare_run(va.dtype, m_buf_a.data(), vb.dtype, m_buf_b.data(), shape_elements(a->count), out.acc);
    }
    return Status::OK();
  }

  CheckpointReader& m_ra;
  CheckpointReader& m_rb;
  const KeyMatch* m_key;
  std::vector<std::uint8_t> m_buf_a, m_buf_b;
};

std::string fmt(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

}  // namespace

int run_diff(const DiffArgs& args) {
  auto a = open_reader(args.a);
  if (!a.ok()) return fail("diff", a.status().message());
  auto b = open_reader(args.b);
  if (!b.ok()) return fail("diff", b.status().message());

  std::vector<std::string> names;
  if (!args.vars.empty()) {
    for (auto& n : args.vars) {
      if (!a->variable(n).ok() && !b->variable(n).ok())
        return fail("diff", "no variable '" + n + "' in " + a->path() + " or " + b->path());
      names.push_back(n);
    }
  } else {
    std::set<std::string> seen;
    for (auto& v : a->variables())
      if (seen.insert(v.name).second) names.push_back(v.name);
    for (auto& v : b->variables())
      if (seen.insert(v.name).second) names.push_back(v.name);
  }

  KeyMatch key;
  if (!args.key.empty()) {
    Status s = key.build(a.value(), b.value(), args.key);  // a key that cannot be one: bad input (exit 2)
    if (!s.ok()) return fail("diff", s.message());
  }
  Differ differ(a.value(), b.value(), args.key.empty() ? nullptr : &key);
  std::vector<VarDiff> results;
  for (auto& n : names) {
    VarDiff d;
    Status s = differ.compare(n, d);
    if (!s.ok()) return fail("diff", s.message());
    if (args.has_tol && d.compared && !(d.acc.mag_error() <= args.tol)) d.fails = true;
    results.push_back(std::move(d));
  }
  bool pass = true;
  for (auto& d : results) pass = pass && !d.fails;

  if (args.json) {
    json j;
    auto side = [](const CheckpointReader& c) {
      return json{{"path", c.path()}, {"step", c.step()}, {"nranks", c.nranks()}, {"transport", c.transport()}};
    };
    j["a"] = side(a.value());
    j["b"] = side(b.value());
    j["tol"] = args.has_tol ? json(args.tol) : json(nullptr);
    if (args.key.empty()) {
      j["key"] = nullptr;
    } else {
      json k{{"name", key.name},        {"in_both", key.pairs.size()},          {"only_in_a", key.only_a},
             {"only_in_b", key.only_b}, {"duplicates_in_a", key.a.nduplicates}, {"duplicates_in_b", key.b.nduplicates}};
      k["problem"] = key.problem.empty() ? json(nullptr) : json(key.problem);
      j["key"] = k;
    }
    j["pass"] = pass;
    json vars = json::array();
    for (auto& d : results) {
      json v;
      v["name"] = d.name;
      v["kind"] = d.kind;
      v["dtype"] = d.dtype;
      v["result"] = d.result;
      v["note"] = d.note.empty() ? json(nullptr) : json(d.note);
      v["fails"] = d.fails;
      if (!args.key.empty()) v["by_key"] = d.keyed == "key";
      if (d.compared) {
        v["compared"] = d.acc.compared;
        v["differing"] = d.acc.differing;
        v["nan_mismatch"] = d.acc.nan_mismatch;
        v["mag_error"] = num_json(d.acc.mag_error());
        v["max_abs"] = num_json(static_cast<double>(d.acc.max_abs));
        v["rel_l2"] = num_json(d.acc.rel_l2());
        v["sup_a"] = num_json(static_cast<double>(d.acc.sup_a));
        v["sup_b"] = num_json(static_cast<double>(d.acc.sup_b));
      }
      vars.push_back(v);
    }
    j["variables"] = vars;
    print_json(j);
  } else {
    say("A: %s (step %lld, %d ranks, %s)\n", a->path(), static_cast<long long>(a->step()), a->nranks(), a->transport());
    say("B: %s (step %lld, %d ranks, %s)\n", b->path(), static_cast<long long>(b->step()), b->nranks(), b->transport());
    if (!args.key.empty()) say("%s\n", key.summary());
    std::size_t w = 8;
    for (auto& d : results) w = std::max(w, d.name.size());
    say("%-*s  %-6s  %-7s  %10s  %10s  %-12s  %-12s  %-12s  %s\n", static_cast<int>(w), "variable", "kind", "dtype",
        "compared", "differing", "mag_error", "max_abs", "rel_l2", "result");
    std::size_t n_equal = 0, n_diff = 0, n_other = 0;
    for (auto& d : results) {
      std::string result = d.result + (d.note.empty() ? "" : " (" + d.note + ")");
      if (!d.keyed.empty()) result += d.keyed == "key" ? " [by key]" : " [" + d.keyed + "]";
      if (args.has_tol && d.fails) result += "  FAIL";
      if (d.compared) {
        const bool opaque = d.dtype == "bytes";
        say("%-*s  %-6s  %-7s  %10llu  %10llu  %-12s  %-12s  %-12s  %s\n", static_cast<int>(w), d.name, d.kind, d.dtype,
            static_cast<unsigned long long>(d.acc.compared), static_cast<unsigned long long>(d.acc.differing),
            opaque ? "-" : fmt(d.acc.mag_error()), opaque ? "-" : fmt(static_cast<double>(d.acc.max_abs)),
            opaque ? "-" : fmt(d.acc.rel_l2()), result);
        (d.result == "equal" ? n_equal : n_diff)++;
      } else {
        say("%-*s  %-6s  %-7s  %10s  %10s  %-12s  %-12s  %-12s  %s\n", static_cast<int>(w), d.name, d.kind, d.dtype,
            "-", "-", "-", "-", "-", result);
        ++n_other;
      }
    }
    say("%zu equal, %zu differ, %zu not compared", n_equal, n_diff, n_other);
    if (args.has_tol) say("; tolerance %g on the magnitude error: %s", args.tol, pass ? "PASS" : "FAIL");
    say("\n");
  }
  return !args.has_tol || pass ? kExitOk : kExitBad;
}

}  // namespace ckpt::tools
