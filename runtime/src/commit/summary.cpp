// CommitSummary: a rank's report reduced to what the root index needs, merged pairwise (summary.hpp).
#include "runtime/src/commit/summary.hpp"

#include <algorithm>
#include <cstdlib>
#include <unordered_map>

#include "base/bytes.hpp"
#include "base/hash.hpp"
#include "base/mpi.hpp"

namespace ckpt::detail {
namespace {

constexpr std::uint32_t kSummaryMagic = 0x434b5355;  // "USKC"

std::size_t text_size(const std::vector<std::string>& pieces) {
  std::size_t n = 0;
  for (const auto& p : pieces) n += p.size() + 2;  // "; " between them
  return pieces.empty() ? 0 : n - 2;
}

/// `v` as every rank registers it alike: a joined array's row count (which differs per rank) is 0.
VarRecord without_rows(VarRecord v) {
  if (v.kind == RegionKind::joined && !v.global.empty()) v.global[0] = 0;
  return v;
}

void merge_var(SummaryVar& l, const SummaryVar& r, std::string& overflow) {
  const DType t = l.var.dtype;
  if (r.has_stats) {
    if (!l.has_stats) {
      l.has_stats = true;
      l.min_bits = r.min_bits;
      l.max_bits = r.max_bits;
    } else {
      if (stat_less(t, r.min_bits, l.min_bits)) l.min_bits = r.min_bits;
      if (stat_less(t, l.max_bits, r.max_bits)) l.max_bits = r.max_bits;
    }
  }
  l.n_blocks += r.n_blocks;
  if (__builtin_add_overflow(l.bytes, r.bytes, &l.bytes) && overflow.empty())
    overflow = "the blocks of '" + l.var.name + "' hold more than 2^64 bytes";
  l.same = l.same && r.same && l.first_checksum == r.first_checksum && l.first_count == r.first_count;
  if (l.var.kind == RegionKind::joined && !l.var.global.empty() && !r.var.global.empty() &&
      __builtin_add_overflow(l.var.global[0], r.var.global[0], &l.var.global[0]) && overflow.empty())
    overflow = "joined array '" + l.var.name + "': the row count overflows";
}

void put_shape(ByteWriter& w, const Shape& s) {
  w.put<std::uint32_t>(static_cast<std::uint32_t>(s.size()));
  for (const auto x : s) w.put<std::uint64_t>(x);
}

bool get_shape(ByteReader& r, Shape& s) {
  std::uint32_t n = 0;
  if (!r.count(n, 8, kMaxDims)) return false;
  s.resize(n);
  for (auto& x : s)
    if (!r.get(x)) return false;
  return true;
}

// ---- allreduce_summary: fixed records of kWords u64, merged by a commutative MPI_Op -----------------

constexpr int kWords = 10;
// Word 0 of a record: bit 0 a variable's record (else the header), bits 8-15 the dtype, then flags.
constexpr std::uint64_t kIsVar = 1, kHasStats = 1u << 16, kAmbiguous = 1u << 17, kOverflow = 1u << 18;
// A variable's words: 1 min, 2 max, 3 blocks, 4 bytes, 5/6 min/max of the blocks' checksums, 7/8 min/max of
// the hashes of their extents, 9 joined rows. The header's: 1/2 min/max of the registration hashes,
// 3 failed ranks, 4 the XOR of the draws, 5 the largest slot, 6 the sum of the slots (saturated).

DType dtype_of(const std::uint64_t* w) { return static_cast<DType>((w[0] >> 8) & 0xff); }

/// One of min/max merged without the ranks' order: the strictly smaller (larger) value, and when
/// neither is (equal values with other bits, or a NaN) the merge in rank order could pick either:
/// ambiguous.
void merge_extreme(DType t, std::uint64_t a, std::uint64_t& b, bool want_min, std::uint64_t& flags) {
  const bool a_wins = want_min ? stat_less(t, a, b) : stat_less(t, b, a);
  const bool b_wins = want_min ? stat_less(t, b, a) : stat_less(t, a, b);
  if (a_wins) b = a;
  if (!a_wins && !b_wins && a != b) {
    flags |= kAmbiguous;
    b = std::min(a, b);  // the same on every rank whatever the tree
  }
}

void add_words(std::uint64_t a, std::uint64_t& b, std::uint64_t& flags) {
  if (__builtin_add_overflow(a, b, &b)) flags |= kOverflow;
}

void merge_records(void* in, void* inout, int* len, MPI_Datatype*) {
  const auto* a0 = static_cast<const std::uint64_t*>(in);
  auto* b0 = static_cast<std::uint64_t*>(inout);
  for (int i = 0; i < *len; ++i) {
    const std::uint64_t* a = a0 + static_cast<std::size_t>(i) * kWords;
    std::uint64_t* b = b0 + static_cast<std::size_t>(i) * kWords;
    if ((a[0] & kIsVar) == 0) {  // the header
      b[1] = std::min(a[1], b[1]);
      b[2] = std::max(a[2], b[2]);
      b[3] += a[3];
      b[4] ^= a[4];
      b[5] = std::max(a[5], b[5]);
      if (__builtin_add_overflow(a[6], b[6], &b[6])) b[6] = ~std::uint64_t{0};
      continue;
    }
    std::uint64_t flags = (a[0] | b[0]) & (kAmbiguous | kOverflow);
    const DType t = dtype_of(b);
    if ((a[0] & kHasStats) != 0 && (b[0] & kHasStats) == 0) {
      b[1] = a[1];
      b[2] = a[2];
    } else if ((a[0] & kHasStats) != 0) {
      merge_extreme(t, a[1], b[1], true, flags);
      merge_extreme(t, a[2], b[2], false, flags);
    }
    add_words(a[3], b[3], flags);
    add_words(a[4], b[4], flags);
    b[5] = std::min(a[5], b[5]);
    b[6] = std::max(a[6], b[6]);
    b[7] = std::min(a[7], b[7]);
    b[8] = std::max(a[8], b[8]);
    add_words(a[9], b[9], flags);
    b[0] = (b[0] & ~(kAmbiguous | kOverflow)) | flags | (a[0] & kHasStats);
  }
}

struct RecordOp {
  MPI_Datatype type = MPI_DATATYPE_NULL;
  MPI_Op op = MPI_OP_NULL;
};
/// Made once per process (freed by MPI_Finalize).
const RecordOp& record_op() {
  static const RecordOp r = [] {
    RecordOp o;
    MPI_Type_contiguous(kWords, MPI_UINT64_T, &o.type);
    MPI_Type_commit(&o.type);
    MPI_Op_create(&merge_records, 1, &o.op);
    return o;
  }();
  return r;
}

/// What must be equal on every rank for the allreduce to do: the variables as registered, in order.
std::uint64_t registration_hash(const Index& report) {
  ByteWriter w;
  for (const VarRecord& v : report.vars) put_var_record(w, without_rows(v));
  return hash64(w.bytes().data(), w.bytes().size());
}

}  // namespace

std::optional<AgreedSummary> allreduce_summary(MPI_Comm comm, const Index& report, std::uint64_t draw,
                                               std::optional<std::uint64_t>& count, std::uint64_t slot) {
  int size = 1;
  MPI_Comm_size(comm, &size);
  bool failed = false;
  for (const auto& kv : report.attrs) failed = failed || kv.first == "error";
  const std::size_t nvars = report.vars.size();
  // The records' count must be the same on every rank before they are reduced: the count of the last
  // agreement that held (the same on every rank, set below from reduced values only), else agreed now.
  std::uint64_t records_of_vars = 0;
  bool same_count = false;  // this rank's count is the one every rank sends
  if (count.has_value()) {
    records_of_vars = *count;
    same_count = nvars == *count;  // if not, the header says so and every rank learns the same "no"
  } else {
    std::uint64_t counts[2] = {nvars, ~static_cast<std::uint64_t>(nvars)}, agreed[2] = {0, 0};
    allreduce(counts, agreed, 2, MPI_UINT64_T, MPI_MAX, comm);
    same_count = agreed[0] == nvars && ~agreed[1] == nvars;  // then on every rank
    // With other counts every rank still takes part with a header only, and learns the same "no".
    records_of_vars = same_count ? nvars : 0;
  }
  const std::size_t records = 1 + static_cast<std::size_t>(records_of_vars);
  std::vector<std::uint64_t> mine(records * kWords, 0), all(records * kWords, 0);
  const std::uint64_t h = registration_hash(report);
  mine[1] = h;
  mine[2] = h;
  mine[3] = failed || !same_count ? 1 : 0;
  mine[4] = draw;
  mine[5] = slot;
  mine[6] = slot;
  if (same_count && !failed) {
    for (std::size_t i = 0; i < nvars; ++i) {
      std::uint64_t* w = &mine[(1 + i) * kWords];
      w[0] = kIsVar | (static_cast<std::uint64_t>(report.vars[i].dtype) << 8);
      if (report.vars[i].kind == RegionKind::joined && !report.vars[i].global.empty()) w[9] = report.vars[i].global[0];
    }
    for (const BlockRecord& b : report.blocks) {
      std::uint64_t* w = &mine[(1 + b.var) * kWords];
      if (b.has_stats) {
        w[0] |= kHasStats;
        w[1] = b.min_bits;
        w[2] = b.max_bits;
      }
      w[3] = 1;
      w[4] = b.length;
      w[5] = w[6] = b.checksum;
      w[7] = w[8] = hash64(b.count.data(), b.count.size() * sizeof(b.count[0]));
    }
  }
  const RecordOp& op = record_op();
  allreduce(mine.data(), all.data(), static_cast<int>(records), op.type, op.op, comm);
  // No rank failed or sent another count: every rank's count is records_of_vars, kept for the next
  // agreement (which then needs no count round); else the next one agrees on its count first.
  count = all[3] == 0 ? std::optional<std::uint64_t>(records_of_vars) : std::nullopt;
  if (all[3] != 0 || all[1] != all[2]) return std::nullopt;
  AgreedSummary out;
  out.token = all[4] != 0 ? all[4] : 1;
  out.slot = all[5];
  out.slot_sum = all[6];
  out.summary.vars.resize(nvars);
  for (std::size_t i = 0; i < nvars; ++i) {
    const std::uint64_t* w = &all[(1 + i) * kWords];
    if ((w[0] & (kAmbiguous | kOverflow)) != 0) return std::nullopt;
    SummaryVar& v = out.summary.vars[i];
    v.var = report.vars[i];
    if (v.var.kind == RegionKind::joined && !v.var.global.empty()) v.var.global[0] = w[9];
    v.has_stats = (w[0] & kHasStats) != 0;
    v.min_bits = v.has_stats ? w[1] : 0;
    v.max_bits = v.has_stats ? w[2] : 0;
    v.n_blocks = w[3];
    v.bytes = w[4];
    v.same = w[5] == w[6] && w[7] == w[8];
  }
  return out;
}

bool same_registration(const VarRecord& a, const VarRecord& b) {
  if (a.dtype != b.dtype || a.kind != b.kind || a.ndim != b.ndim) return false;
  if (b.kind == RegionKind::joined)
    return std::equal(a.global.begin() + (a.global.empty() ? 0 : 1), a.global.end(),
                      b.global.begin() + (b.global.empty() ? 0 : 1), b.global.end());
  return a.global == b.global;
}

std::string registered_differently(const std::string& name, std::uint32_t rank) {
  return "variable '" + name + "' is registered differently on rank " + std::to_string(rank) +
         " (dtype, kind, rank or global shape)";
}

void add_failure(std::string& list, std::uint32_t rank, const std::string& message) {
  if (list.size() < kMaxFailureText)
    list += (list.empty() ? "rank " : "; rank ") + std::to_string(rank) + ": " + message;
}

CommitSummary summarize(const Index& report, std::uint32_t rank) {
  CommitSummary s;
  const std::string* error = nullptr;
  int code = static_cast<int>(Code::io_error);  // a failure without its code (as merge_reports())
  for (const auto& kv : report.attrs) {
    if (kv.first == "error") error = &kv.second;
    if (kv.first == "error_code") {
      const int c = std::atoi(kv.second.c_str());
      if (c > 0 && c <= static_cast<int>(Code::internal)) code = c;
    }
  }
  if (error != nullptr) {
    s.failed = 1;
    s.first_code = code;
    s.failures.emplace_back();
    add_failure(s.failures.back(), rank, *error);
    s.agreed = *error;
    return s;
  }
  s.vars.resize(report.vars.size());
  for (std::size_t i = 0; i < report.vars.size(); ++i) {
    s.vars[i].var = report.vars[i];
    s.vars[i].first_rank = rank;
    s.vars[i].first_pos = static_cast<std::uint32_t>(i);
  }
  for (const BlockRecord& b : report.blocks) {
    SummaryVar& v = s.vars.at(b.var);
    v.has_stats = b.has_stats;
    v.min_bits = b.has_stats ? b.min_bits : 0;
    v.max_bits = b.has_stats ? b.max_bits : 0;
    v.n_blocks = 1;
    v.bytes = b.length;
    v.first_checksum = b.checksum;
    v.first_count = b.count;
  }
  return s;
}

void merge_summary(CommitSummary& left, const CommitSummary& right) {
  if (right.failed > 0) {
    if (left.failed == 0) {
      left.first_code = right.first_code;
      left.agreed = right.agreed;
    } else if (left.agreed != right.agreed) {
      left.agreed.clear();
    }
    left.failed += right.failed;
    for (const auto& piece : right.failures)
      if (text_size(left.failures) < kMaxFailureText) left.failures.push_back(piece);
  }
  // The first conflict in rank order: the left's, else the lowest rank among the right's own and
  // those of its variables against the left's.
  bool have_conflict = !left.conflict.empty();
  auto conflict = [&](std::uint32_t rank, std::uint32_t pos, const std::string& what) {
    if (have_conflict && (rank > left.conflict_rank || (rank == left.conflict_rank && pos >= left.conflict_pos)))
      return;
    left.conflict_rank = rank;
    left.conflict_pos = pos;
    left.conflict = what;
    have_conflict = true;
  };
  const bool left_had_conflict = have_conflict;
  if (!left_had_conflict && !right.conflict.empty()) conflict(right.conflict_rank, right.conflict_pos, right.conflict);
  if (left.overflow.empty()) left.overflow = right.overflow;
  std::unordered_map<std::string, std::size_t> at;
  at.reserve(left.vars.size());
  for (std::size_t i = 0; i < left.vars.size(); ++i) at.emplace(left.vars[i].var.name, i);
  for (const SummaryVar& rv : right.vars) {
    auto it = at.find(rv.var.name);
    if (it == at.end()) {
      at.emplace(rv.var.name, left.vars.size());
      left.vars.push_back(rv);
      continue;
    }
    SummaryVar& lv = left.vars[it->second];
    if (!same_registration(lv.var, rv.var)) {
      if (!left_had_conflict) conflict(rv.first_rank, rv.first_pos, registered_differently(rv.var.name, rv.first_rank));
      continue;
    }
    merge_var(lv, rv, left.overflow);
  }
}

std::vector<std::uint8_t> encode_summary(const CommitSummary& s) {
  ByteWriter w;
  w.put<std::uint32_t>(kSummaryMagic);
  w.put<std::uint32_t>(s.failed);
  w.put<std::int32_t>(s.first_code);
  w.put<std::uint32_t>(static_cast<std::uint32_t>(s.failures.size()));
  for (const auto& f : s.failures) w.str(f);
  w.str(s.agreed);
  w.put<std::uint32_t>(s.conflict_rank);
  w.put<std::uint32_t>(s.conflict_pos);
  w.str(s.conflict);
  w.str(s.overflow);
  w.put<std::uint64_t>(s.vars.size());
  for (const SummaryVar& v : s.vars) {
    // A joined array's rows go beside its record, which says 0: summed rows may make a size the
    // record's decoder refuses (summary_status() says so, as version 1 does).
    const bool joined = v.var.kind == RegionKind::joined && !v.var.global.empty();
    put_var_record(w, without_rows(v.var));
    w.put<std::uint64_t>(joined ? v.var.global[0] : 0);
    w.put<std::uint32_t>(v.first_rank);
    w.put<std::uint32_t>(v.first_pos);
    w.put<std::uint8_t>(v.has_stats ? 1 : 0);
    w.put<std::uint8_t>(v.same ? 1 : 0);
    w.put<std::uint64_t>(v.min_bits);
    w.put<std::uint64_t>(v.max_bits);
    w.put<std::uint64_t>(v.n_blocks);
    w.put<std::uint64_t>(v.bytes);
    w.put<std::uint64_t>(v.first_checksum);
    put_shape(w, v.first_count);
  }
  return std::move(w.bytes());
}

Result<CommitSummary> decode_summary(const std::uint8_t* p, std::size_t n) {
  auto bad = [](const std::string& why) { return Status(Code::invalid_argument, "commit summary: " + why); };
  ByteReader r(p, n);
  CommitSummary s;
  std::uint32_t magic = 0, nfail = 0;
  if (!r.get(magic) || magic != kSummaryMagic) return bad("not a summary");
  if (!r.get(s.failed) || !r.get(s.first_code) || !r.count(nfail, 4, 1u << 20)) return bad(r.error());
  s.failures.resize(nfail);
  for (auto& f : s.failures)
    if (!r.str(f)) return bad(r.error());
  std::uint64_t nvars = 0;
  if (!r.str(s.agreed) || !r.get(s.conflict_rank) || !r.get(s.conflict_pos) || !r.str(s.conflict) ||
      !r.str(s.overflow) || !r.count(nvars, 8, 1ull << 32))
    return bad(r.error());
  s.vars.resize(nvars);
  for (SummaryVar& v : s.vars) {
    CKPT_RETURN_IF_ERROR(get_var_record(r, v.var));
    std::uint64_t rows = 0;
    std::uint8_t stats = 0, same = 0;
    if (!r.get(rows)) return bad(r.error());
    if (v.var.kind == RegionKind::joined && !v.var.global.empty()) v.var.global[0] = rows;
    if (!r.get(v.first_rank) || !r.get(v.first_pos) || !r.get(stats) || !r.get(same) || !r.get(v.min_bits) ||
        !r.get(v.max_bits) || !r.get(v.n_blocks) || !r.get(v.bytes) || !r.get(v.first_checksum) ||
        !get_shape(r, v.first_count))
      return bad(r.error());
    v.has_stats = stats != 0;
    v.same = same != 0;
  }
  if (!r.at_end()) return bad("trailing bytes");
  return s;
}

Status summary_status(const CommitSummary& s, std::uint32_t nranks, std::int64_t step) {
  const std::string ckpt = "checkpoint " + std::to_string(step);
  if (s.failed > 0) {
    std::string text;
    for (const auto& f : s.failures) text += (text.empty() ? "" : "; ") + f;
    // A failure every rank reported alike is said once (one rank: it keeps its "rank 0: ").
    if (nranks > 1 && s.failed == nranks && !s.agreed.empty()) text = s.agreed;
    return Status(static_cast<Code>(s.first_code), ckpt + " not committed: " + text);
  }
  if (!s.conflict.empty()) return Status(Code::invalid_argument, ckpt + ": " + s.conflict);
  if (!s.overflow.empty()) return Status(Code::invalid_argument, ckpt + " not committed: " + s.overflow);
  for (const SummaryVar& v : s.vars) {
    if (v.var.kind != RegionKind::joined) continue;
    std::uint64_t bytes = dtype_size(v.var.dtype);
    for (const auto g : v.var.global)
      if (__builtin_mul_overflow(bytes, g, &bytes))
        return Status(Code::invalid_argument,
                      ckpt + " not committed: joined array '" + v.var.name + "': its size in bytes exceeds 2^64");
  }
  return Status::OK();
}

bool summary_uniform(const SummaryVar& v, std::uint32_t nranks) {
  return !has_global_shape(v.var.kind) && v.same && v.n_blocks == nranks;
}

}  // namespace ckpt::detail
