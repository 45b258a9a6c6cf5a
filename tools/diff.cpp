// `ckpt diff`: compare two checkpoints variable by variable. Global arrays are compared element by
// element in the global index space, so A and B may come from different rank counts; per-rank
// (local, scalar) variables are compared rank by rank. Metrics follow FLASH-X's sfocu:
//   magnitude error  mE = sup|a - b| / max(sup|a|, sup|b|, 1e-99)   (Jain et al., eq. (1))
// plus the max absolute difference and the relative L2 norm ||a - b||_2 / max(||a||_2, ||b||_2, 1e-99).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "tools/commands.hpp"
#include "tools/json_util.hpp"
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
  Accumulator acc;
};

class Differ {
 public:
  Differ(const Checkpoint& a, const Checkpoint& b) : m_a(a), m_b(b), m_ra(a), m_rb(b) {}

  Status compare(const std::string& name, VarDiff& out) {
    const long ia = m_a.index.find_var(name), ib = m_b.index.find_var(name);
    out.name = name;
    if (ia < 0 || ib < 0) {
      const VarRecord& v = ia >= 0 ? m_a.index.vars[ia] : m_b.index.vars[ib];
      out.kind = detail::region_kind_name(v.kind);
      out.dtype = dtype_name(v.dtype);
      out.result = ia >= 0 ? "only in A" : "only in B";
      out.fails = true;
      return Status::OK();
    }
    const VarRecord& va = m_a.index.vars[ia];
    const VarRecord& vb = m_b.index.vars[ib];
    out.kind = detail::region_kind_name(va.kind);
    out.dtype = dtype_name(va.dtype);
    if (va.dtype != vb.dtype) out.dtype += std::string("/") + dtype_name(vb.dtype);
    auto incompatible = [&](const std::string& why) {
      out.result = "incompatible";
      out.note = why;
      out.fails = true;
      return Status::OK();
    };
    if (va.kind != vb.kind)
      return incompatible(std::string("kind ") + detail::region_kind_name(va.kind) + " vs " +
                          detail::region_kind_name(vb.kind));
    if ((va.dtype == DType::bytes) != (vb.dtype == DType::bytes))
      return incompatible(std::string("dtype ") + dtype_name(va.dtype) + " vs " + dtype_name(vb.dtype));
    if (va.ndim != vb.ndim) return incompatible("rank " + std::to_string(va.ndim) + " vs " + std::to_string(vb.ndim));
    if (va.kind == RegionKind::global) {
      if (va.global != vb.global)
        return incompatible("global shape " + shape_to_string(va.global) + " vs " + shape_to_string(vb.global));
      CKPT_RETURN_IF_ERROR(compare_global(static_cast<std::uint32_t>(ia), static_cast<std::uint32_t>(ib), out));
    } else {
      CKPT_RETURN_IF_ERROR(compare_per_rank(static_cast<std::uint32_t>(ia), static_cast<std::uint32_t>(ib), out));
    }
    if (out.result.empty()) {
      out.compared = true;
      out.result = out.acc.differing == 0 && out.note.empty() ? "equal" : "differs";
      if (out.acc.nan_mismatch > 0) out.fails = true;
      if ((va.dtype == DType::bytes) && out.acc.differing > 0) out.fails = true;
    }
    return Status::OK();
  }

 private:
  /// Element by element over the intersections of A's blocks with B's blocks. Holds one block of each
  /// in memory (B's last block is kept, so a B block shared by consecutive A blocks is read once).
  Status compare_global(std::uint32_t ia, std::uint32_t ib, VarDiff& out) {
    const VarRecord& va = m_a.index.vars[ia];
    const VarRecord& vb = m_b.index.vars[ib];
    const std::size_t n = va.ndim, ea = dtype_size(va.dtype), eb = dtype_size(vb.dtype);
    const auto blocks_a = blocks_of(m_a.index, ia), blocks_b = blocks_of(m_b.index, ib);
    std::uint64_t covered = 0, total_a = 0, total_b = 0;
    for (auto* b : blocks_a) total_a += block_elements(*b);
    for (auto* b : blocks_b) total_b += block_elements(*b);
    const BlockRecord* cached_b = nullptr;
    for (auto* ba : blocks_a) {
      if (block_elements(*ba) == 0) continue;
      CKPT_RETURN_IF_ERROR(m_ra.read(*ba, m_buf_a));
      for (auto* bb : blocks_b) {
        Shape lo(n), hi(n);
        bool overlap = block_elements(*bb) > 0;
        for (std::size_t d = 0; d < n && overlap; ++d) {
          lo[d] = std::max(ba->start[d], bb->start[d]);
          hi[d] = std::min(ba->start[d] + ba->count[d], bb->start[d] + bb->count[d]);
          overlap = hi[d] > lo[d];
        }
        if (!overlap) continue;
        if (cached_b != bb) {
          CKPT_RETURN_IF_ERROR(m_rb.read(*bb, m_buf_b));
          cached_b = bb;
        }
        covered += compare_box(lo, hi, *ba, ea, va.dtype, *bb, eb, vb.dtype, out.acc);
      }
    }
    if (covered != total_a || covered != total_b)
      out.note = "coverage differs: " + std::to_string(covered) + " elements in both, " + std::to_string(total_a) +
                 " stored in A, " + std::to_string(total_b) + " in B";
    if (!out.note.empty()) out.fails = true;
    return Status::OK();
  }

  /// Compares the box [lo, hi) of two blocks held in m_buf_a / m_buf_b, row by row (the last dimension
  /// is contiguous in both). Returns the number of elements compared.
  std::uint64_t compare_box(const Shape& lo, const Shape& hi, const BlockRecord& ba, std::size_t ea, DType ta,
                            const BlockRecord& bb, std::size_t eb, DType tb, Accumulator& acc) {
    const std::size_t n = lo.size();
    if (n == 0) {
      compare_run(ta, m_buf_a.data(), tb, m_buf_b.data(), 1, acc);
      return 1;
    }
    std::vector<std::uint64_t> sa(n, 1), sb(n, 1);  // element strides of each block
    for (std::size_t d = n - 1; d-- > 0;) {
      sa[d] = sa[d + 1] * ba.count[d + 1];
      sb[d] = sb[d + 1] * bb.count[d + 1];
    }
    const std::uint64_t row = hi[n - 1] - lo[n - 1];
    Shape idx = lo;
    std::uint64_t done = 0;
    while (true) {
      std::uint64_t oa = 0, ob = 0;
      for (std::size_t d = 0; d < n; ++d) {
        oa += (idx[d] - ba.start[d]) * sa[d];
        ob += (idx[d] - bb.start[d]) * sb[d];
      }
      compare_run(ta, m_buf_a.data() + oa * ea, tb, m_buf_b.data() + ob * eb, row, acc);
      done += row;
      std::size_t d = n - 1;  // advance the outer index over dimensions [0, n - 1)
      while (d-- > 0) {
        if (++idx[d] < hi[d]) break;
        idx[d] = lo[d];
      }
      if (d == static_cast<std::size_t>(-1)) break;
    }
    return done;
  }

  /// Local arrays and scalars: the block of rank r in A with the block of rank r in B. With different
  /// rank counts only variables that were uniform (equal on every rank) in both are comparable.
  Status compare_per_rank(std::uint32_t ia, std::uint32_t ib, VarDiff& out) {
    const VarRecord& va = m_a.index.vars[ia];
    const VarRecord& vb = m_b.index.vars[ib];
    auto block_of_rank = [](const Index& idx, std::uint32_t v, std::uint32_t r) -> const BlockRecord* {
      for (auto& b : idx.blocks)
        if (b.var == v && b.rank == r) return &b;
      return nullptr;
    };
    std::vector<std::pair<const BlockRecord*, const BlockRecord*>> pairs;
    if (m_a.index.nranks == m_b.index.nranks) {
      for (std::uint32_t r = 0; r < m_a.index.nranks; ++r) {
        const BlockRecord* a = block_of_rank(m_a.index, ia, r);
        const BlockRecord* b = block_of_rank(m_b.index, ib, r);
        if ((a == nullptr) != (b == nullptr)) {
          out.note = "rank " + std::to_string(r) + " stored it only in " + (a ? "A" : "B");
          out.fails = true;
          continue;
        }
        if (a) pairs.emplace_back(a, b);
      }
    } else if (va.uniform && vb.uniform) {
      const BlockRecord* a = block_of_rank(m_a.index, ia, 0);
      const BlockRecord* b = block_of_rank(m_b.index, ib, 0);
      if (a && b) pairs.emplace_back(a, b);
    } else {
      out.result = "skipped";
      out.note = "per-rank values written by " + std::to_string(m_a.index.nranks) + " and " +
                 std::to_string(m_b.index.nranks) + " ranks (not uniform)";
      return Status::OK();
    }
    for (auto& [a, b] : pairs) {
      if (a->count != b->count) {
        out.note = "rank " + std::to_string(a->rank) + ": extents " + shape_to_string(a->count) + " vs " +
                   shape_to_string(b->count);
        out.fails = true;
        continue;
      }
      CKPT_RETURN_IF_ERROR(m_ra.read(*a, m_buf_a));
      CKPT_RETURN_IF_ERROR(m_rb.read(*b, m_buf_b));
      compare_run(va.dtype, m_buf_a.data(), vb.dtype, m_buf_b.data(), block_elements(*a), out.acc);
    }
    return Status::OK();
  }

  const Checkpoint& m_a;
  const Checkpoint& m_b;
  BlockReader m_ra, m_rb;
  std::vector<std::uint8_t> m_buf_a, m_buf_b;
};

std::string fmt(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

}  // namespace

int run_diff(const DiffArgs& args) {
  auto a = resolve_checkpoint(args.a);
  if (!a.ok()) return fail("diff", a.status().message());
  auto b = resolve_checkpoint(args.b);
  if (!b.ok()) return fail("diff", b.status().message());

  std::vector<std::string> names;
  if (!args.vars.empty()) {
    for (auto& n : args.vars) {
      if (a->index.find_var(n) < 0 && b->index.find_var(n) < 0)
        return fail("diff", "no variable '" + n + "' in " + a->dir + " or " + b->dir);
      names.push_back(n);
    }
  } else {
    std::set<std::string> seen;
    for (auto& v : a->index.vars)
      if (seen.insert(v.name).second) names.push_back(v.name);
    for (auto& v : b->index.vars)
      if (seen.insert(v.name).second) names.push_back(v.name);
  }

  Differ differ(a.value(), b.value());
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
    auto side = [](const Checkpoint& c) {
      return json{
          {"path", c.dir}, {"step", c.index.step}, {"nranks", c.index.nranks}, {"transport", c.index.transport}};
    };
    j["a"] = side(a.value());
    j["b"] = side(b.value());
    j["tol"] = args.has_tol ? json(args.tol) : json(nullptr);
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
    std::printf("%s\n", j.dump(2).c_str());
  } else {
    std::printf("A: %s (step %lld, %u ranks, %s)\n", a->dir.c_str(), static_cast<long long>(a->index.step),
                a->index.nranks, a->index.transport.c_str());
    std::printf("B: %s (step %lld, %u ranks, %s)\n", b->dir.c_str(), static_cast<long long>(b->index.step),
                b->index.nranks, b->index.transport.c_str());
    std::size_t w = 8;
    for (auto& d : results) w = std::max(w, d.name.size());
    std::printf("%-*s  %-6s  %-7s  %10s  %10s  %-12s  %-12s  %-12s  %s\n", static_cast<int>(w), "variable", "kind",
                "dtype", "compared", "differing", "mag_error", "max_abs", "rel_l2", "result");
    std::size_t n_equal = 0, n_diff = 0, n_other = 0;
    for (auto& d : results) {
      std::string result = d.result + (d.note.empty() ? "" : " (" + d.note + ")");
      if (args.has_tol && d.fails) result += "  FAIL";
      if (d.compared) {
        const bool opaque = d.dtype == "bytes";
        std::printf("%-*s  %-6s  %-7s  %10llu  %10llu  %-12s  %-12s  %-12s  %s\n", static_cast<int>(w), d.name.c_str(),
                    d.kind.c_str(), d.dtype.c_str(), static_cast<unsigned long long>(d.acc.compared),
                    static_cast<unsigned long long>(d.acc.differing), opaque ? "-" : fmt(d.acc.mag_error()).c_str(),
                    opaque ? "-" : fmt(static_cast<double>(d.acc.max_abs)).c_str(),
                    opaque ? "-" : fmt(d.acc.rel_l2()).c_str(), result.c_str());
        (d.result == "equal" ? n_equal : n_diff)++;
      } else {
        std::printf("%-*s  %-6s  %-7s  %10s  %10s  %-12s  %-12s  %-12s  %s\n", static_cast<int>(w), d.name.c_str(),
                    d.kind.c_str(), d.dtype.c_str(), "-", "-", "-", "-", "-", result.c_str());
        ++n_other;
      }
    }
    std::printf("%zu equal, %zu differ, %zu not compared", n_equal, n_diff, n_other);
    if (args.has_tol) std::printf("; tolerance %g on the magnitude error: %s", args.tol, pass ? "PASS" : "FAIL");
    std::printf("\n");
  }
  return !args.has_tol || pass ? kExitOk : kExitBad;
}

}  // namespace ckpt::tools
