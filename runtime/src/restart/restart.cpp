// latest() and restart: read the index, intersect boxes, stream stored blocks through a staging chunk,
// verify checksums, fill the regions (host or device).
#include "runtime/src/restart/restart.hpp"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <iterator>
#include <map>
#include <memory>
#include <unordered_map>

#include "base/box.hpp"
#include "base/bytes.hpp"
#include "base/mpi.hpp"
#include "gpu/plan.hpp"

namespace ckpt::detail {

namespace {

/// Rank 0's list of steps, on every rank of `comm`.
void bcast_steps(MPI_Comm comm, std::vector<long long>& steps) {
  int n = static_cast<int>(steps.size());
  MPI_Bcast(&n, 1, MPI_INT, 0, comm);
  steps.resize(static_cast<std::size_t>(n));
  MPI_Bcast(steps.data(), n, MPI_LONG_LONG, 0, comm);
}

}  // namespace

std::vector<Restorer::LocalCandidate> Restorer::local_candidates() {
  if (m_local == nullptr) return {};
  // A node leader's report: its node, then the complete steps of its node directory.
  ByteWriter mine;
  if (m_layout.leader()) {
    std::vector<std::int64_t> steps;
    auto entries = m_local->list();
    if (entries.ok())
      for (auto& e : entries.value())
        if (e.complete) steps.push_back(e.step);
    mine.put<std::int32_t>(m_layout.node);
    mine.put<std::uint64_t>(steps.size());
    for (auto st : steps) mine.put<std::int64_t>(st);
  }
  const auto reports = gatherv_bytes(m_app_comm, mine.bytes(), 0);
  ByteWriter out;  // rank 0: count, then per candidate (newest first) its step and lost nodes
  if (m_rank == 0) {
    const int n = m_layout.nodes();
    std::vector<std::vector<std::int64_t>> have(static_cast<std::size_t>(n));  // per node, sorted
    std::vector<std::int64_t> all;
    for (auto& r : reports) {
      if (r.empty()) continue;  // not a node leader
      ByteReader in(r.data(), r.size());
      std::int32_t node = 0;
      std::uint64_t count = 0;
      in.get(node);
      in.get(count);
      if (node < 0 || node >= n) continue;
      auto& h = have[static_cast<std::size_t>(node)];
      for (std::uint64_t i = 0; i < count && in.left() >= sizeof(std::int64_t); ++i) {
        std::int64_t st = 0;
        in.get(st);
        h.push_back(st);
        all.push_back(st);
      }
      std::sort(h.begin(), h.end());
    }
    std::sort(all.rbegin(), all.rend());
    all.erase(std::unique(all.begin(), all.end()), all.end());
    std::vector<LocalCandidate> cands;
    for (auto st : all) {
      LocalCandidate c;
      c.step = st;
      auto holds = [&](int k) { return std::binary_search(have[k].begin(), have[k].end(), st); };
      for (int k = 0; k < n; ++k)
        if (!holds(k)) c.lost.push_back(k);
      if (c.lost.empty() || rebuildable(c.lost)) cands.push_back(std::move(c));
    }
    out.put<std::uint64_t>(cands.size());
    for (auto& c : cands) {
      out.put<std::int64_t>(c.step);
      out.put<std::uint32_t>(static_cast<std::uint32_t>(c.lost.size()));
      for (int k : c.lost) out.put<std::int32_t>(k);
    }
  }
  bcast_bytes(m_app_comm, out.bytes(), 0);
  ByteReader in(out.bytes().data(), out.bytes().size());
  std::uint64_t count = 0;
  in.get(count);
  std::vector<LocalCandidate> cands;
  for (std::uint64_t i = 0; i < count && in.error().empty(); ++i) {
    LocalCandidate c;
    std::uint32_t lost = 0;
    in.get(c.step);
    in.get(lost);
    for (std::uint32_t j = 0; j < lost && in.error().empty(); ++j) {
      std::int32_t k = 0;
      in.get(k);
      c.lost.push_back(k);
    }
    cands.push_back(std::move(c));
  }
  return cands;
}

bool Restorer::rebuildable(const std::vector<int>& lost) const {
  const int n = m_layout.nodes();
  auto is_lost = [&](int k) { return std::find(lost.begin(), lost.end(), k) != lost.end(); };
  if (n < 2 || lost.empty()) return false;
  for (int k : lost) {
    if (m_opts.redundancy == Redundancy::partner) {
      // A lost node comes back from the partner copy on the next node, which must hold the step.
      if (is_lost((k + 1) % n)) return false;
    } else if (m_opts.redundancy == Redundancy::xor_parity) {
      // From the parity of its group: every other node of the group must hold the step.
      const int group = xor_group_of(n, m_opts.xor_group, k);
      for (int other = 0; other < n; ++other)
        if (other != k && xor_group_of(n, m_opts.xor_group, other) == group && is_lost(other)) return false;
    } else {
      return false;
    }
  }
  return true;
}

std::vector<int> Restorer::damaged_nodes() {
  std::vector<int> flags(static_cast<std::size_t>(m_size), 0);
  int mine = m_mine.code() == Code::corrupt ? 1 : 0;
  MPI_Allgather(&mine, 1, MPI_INT, flags.data(), 1, MPI_INT, m_app_comm);
  std::vector<int> nodes;
  for (int k = 0; k < m_layout.nodes(); ++k)
    for (int r : m_layout.ranks[static_cast<std::size_t>(k)])
      if (flags[static_cast<std::size_t>(r)] != 0) {
        nodes.push_back(k);
        break;
      }
  return nodes;
}

Status Restorer::rebuild(const LocalCandidate& c) {
  const int n = m_layout.nodes(), me = m_layout.node;
  auto lost = [&](int k) { return std::find(c.lost.begin(), c.lost.end(), k) != c.lost.end(); };
  // The index comes from the first node that holds the step.
  int src = 0;
  while (lost(src)) ++src;
  const int root = m_layout.ranks[static_cast<std::size_t>(src)][0];
  std::vector<std::uint8_t> bytes;
  Status s;
  if (m_rank == root) {
    auto b = m_local->read_index(c.step);
    if (b.ok())
      bytes = std::move(b).value();
    else
      s = b.status();
  }
  s = bcast_status(m_app_comm, s, root);
  if (!s.ok()) return s.with_context("rebuilding step " + std::to_string(c.step) + " from " + redundancy_source());
  bcast_bytes(m_app_comm, bytes, root);
  auto idx = decode_checkpoint_index(bytes, m_local->checkpoint_dir(c.step), c.step);
  if (!idx.ok()) return idx.status();
  // The files rank r wrote: every file its blocks are in, and its default group's.
  auto files_of = [&](int r) {
    std::vector<std::string> names;
    auto add = [&](std::uint32_t f) {
      if (f < idx->files.size() && idx->files[f].name != "none" &&
          std::find(names.begin(), names.end(), idx->files[f].name) == names.end())
        names.push_back(idx->files[f].name);
    };
    if (static_cast<std::size_t>(r) < idx->rank_file.size()) add(idx->rank_file[static_cast<std::size_t>(r)]);
    for (auto& b : idx->blocks)
      if (b.rank == static_cast<std::uint32_t>(r)) add(b.file);
    return names;
  };
  const int next = (me + 1) % n, prev = (me + n - 1) % n;
  const std::string have = m_local->checkpoint_dir(c.step), staging = m_local->staging_dir(c.step);
  Status mine;
  auto note = [&](const Status& st) {
    if (!st.ok() && mine.ok()) mine = st;
  };
  // 0. A lost node's leader clears what a failed attempt left, before any rank of its node writes.
  s = agree(m_app_comm, lost(me) && m_layout.leader() ? remove_tree(staging) : Status::OK());
  if (!s.ok()) return s.with_context("rebuilding step " + std::to_string(c.step) + " from " + redundancy_source());
  if (m_opts.redundancy == Redundancy::xor_parity) {
    // 1-2. In a group that lost a node, the others send what its files and its parity are made of.
    const XorGroup g = make_xor_group(m_layout, m_opts.xor_group);
    int lost_member = -1;
    for (std::size_t m = 0; m < g.nodes.size(); ++m)
      if (lost(g.nodes[m])) lost_member = static_cast<int>(m);
    if (lost_member >= 0) note(xor_rebuild(m_app_comm, g, lost_member, have, staging, m_opts.fsync));
  } else {
    // 1. A lost node's own files, from the partner copy on the next node.
    if (lost(me)) {
      note(exchange_files(m_app_comm, MPI_PROC_NULL, "", {}, m_layout.peer(next), staging, m_opts.fsync));
    } else if (lost(prev)) {
      const int to = m_layout.peer(prev);
      note(exchange_files(m_app_comm, to, have + "/partner", files_of(to), MPI_PROC_NULL, "", m_opts.fsync));
    }
    // 2. The partner copy a lost node held (of the previous node's files), so that it is protected again.
    if (lost(me)) {
      note(exchange_files(m_app_comm, MPI_PROC_NULL, "", {}, m_layout.peer(prev), staging + "/partner", m_opts.fsync));
    } else if (lost(next)) {
      note(exchange_files(m_app_comm, m_layout.peer(next), have, files_of(m_rank), MPI_PROC_NULL, "", m_opts.fsync));
    }
  }
  s = agree(m_app_comm, mine);
  // 3. The lost nodes' leaders commit the step with the same index, rolling none of their newer steps
  // back: this restart may fail, or end without a commit (Store::commit_rebuilt()).
  if (s.ok())
    s = agree(m_app_comm,
              lost(me) && m_layout.leader() ? m_local->commit_rebuilt(c.step, bytes, m_opts.fsync) : Status::OK());
  if (!s.ok() && lost(me) && m_layout.leader()) remove_tree(staging);
  if (m_opts.verbose >= 1 && m_rank == 0)
    std::fprintf(stderr, "ckpt: rebuilding step %lld on %zu lost node(s) from %s: %s\n", static_cast<long long>(c.step),
                 c.lost.size(), redundancy_source(), s.to_string().c_str());
  return s.with_context("rebuilding step " + std::to_string(c.step) + " from " + redundancy_source());
}

Status Restorer::listable() const {
  if (!m_persistent) return Status::OK();
  return check_listable(m_store.root()).with_context("listing the checkpoints of " + m_opts.dir);
}

Result<std::optional<std::int64_t>> Restorer::latest() {
  const auto local = local_candidates();
  long long found = local.empty() ? -1 : static_cast<long long>(local.front().step);
  Status s;
  if (m_rank == 0) s = listable();
  s = bcast_status(m_app_comm, s, 0);
  if (!s.ok()) return s;
  if (m_persistent)
    if (auto n = newest_validated()) found = std::max<long long>(found, *n);
  if (found < 0) return std::optional<std::int64_t>();
  return std::optional<std::int64_t>(static_cast<std::int64_t>(found));
}

std::optional<std::int64_t> Restorer::newest_validated() {
  auto skip = [&](std::int64_t step, const std::string& why) {
    if (m_rank == 0 && m_opts.verbose >= 1)
      std::fprintf(stderr, "ckpt: latest(): skipping step %lld: %s\n", static_cast<long long>(step), why.c_str());
  };
  if (m_store.layout() == Layout::series) {  // rank 0 validates alone (its store has read the step logs)
    long long n = -1;
    if (m_rank == 0) {
      std::vector<std::string> skipped;
      if (auto s = m_store.newest_complete(&skipped)) n = *s;
      if (m_opts.verbose >= 1)
        for (auto& why : skipped) std::fprintf(stderr, "ckpt: latest(): skipping %s\n", why.c_str());
    }
    MPI_Bcast(&n, 1, MPI_LONG_LONG, 0, m_app_comm);
    return n < 0 ? std::nullopt : std::optional<std::int64_t>(n);
  }
  std::vector<long long> steps;
  if (m_rank == 0)
    for (const std::int64_t step : m_store.committed_steps()) steps.push_back(step);
  bcast_steps(m_app_comm, steps);
  for (const long long step : steps) {
    const Status st = validate_step(step);
    if (st.ok()) return step;
    skip(step, st.message());
  }
  return std::nullopt;
}

Status Restorer::validate_step(std::int64_t step) {
  // Rank 0 checks what needs no rank's records (check_committed: a one-level index whole, a two-level
  // one's root against its catalog) and sends a two-level root; then every rank checks the sub-indices
  // of its writers (w = rank, rank + P, ...) against the catalog: one agreement a step, O(W / P) reads a
  // rank, not O(W) on rank 0.
  const std::string dir = m_store.checkpoint_dir(step);
  Result<std::vector<std::uint8_t>> root = std::vector<std::uint8_t>{};
  if (m_rank == 0) {
    root = read_root_file(dir);
    const Status st = root.ok() ? check_committed(dir, root.value(), step) : root.status();
    if (!st.ok())
      root = st;
    else if (index_header_version(root->data(), root->size()) != kIndexV2Version)
      root = std::vector<std::uint8_t>{};  // one-level: validated whole
  }
  auto got = bcast_result(m_app_comm, std::move(root), 0);
  if (!got.ok()) return got.status();
  if (got->empty()) return Status::OK();
  return check_subindices_collective(m_app_comm, dir, got.value(), step);
}

Result<std::vector<std::int64_t>> Restorer::candidate_steps(bool validated) {
  const auto local = local_candidates();  // collective
  // The directory layout's steps are validated by every rank together (validate_step(): rank 0 the roots,
  // each rank its writers' sub-indices), not by rank 0 reading every sub-index of every step; the series
  // layout's by rank 0 (its store has read the step logs).
  const bool spread = validated && m_persistent && m_store.layout() != Layout::series;
  std::vector<long long> steps;
  Status s;
  if (m_rank == 0) {
    s = listable();  // an unreadable root is not an empty one
    if (s.ok() && m_persistent && validated && !spread) {
      auto entries = m_store.list();  // loads and validates each committed step's index
      s = entries.status().with_context("listing the checkpoints of " + m_opts.dir);
      if (entries.ok())
        for (const StepEntry& e : entries.value())
          if (e.complete) steps.push_back(e.step);
    } else if (s.ok() && m_persistent) {
      for (auto st : m_store.committed_steps()) steps.push_back(st);
    }
    for (auto& c : local) steps.push_back(c.step);
    std::sort(steps.begin(), steps.end());
    steps.erase(std::unique(steps.begin(), steps.end()), steps.end());
  }
  s = bcast_status(m_app_comm, s, 0);
  bcast_steps(m_app_comm, steps);
  if (!s.ok()) return s;
  std::vector<std::int64_t> out;
  for (const long long step : steps) {  // the same list and the same node-level candidates on every rank
    const bool at_node =
        std::any_of(local.begin(), local.end(), [&](const LocalCandidate& c) { return c.step == step; });
    if (!spread || at_node || validate_step(step).ok()) out.push_back(step);
  }
  return out;
}

Result<StepIndex> Restorer::read_index_collective(std::int64_t step, const Store& store, bool lazy) {
  // Rank 0 reads; everybody gets the bytes (one read of the file system, not np) and validates them.
  Result<std::vector<std::uint8_t>> mine = std::vector<std::uint8_t>{};
  // A series step's segment comes from rank 0, whose store has read the logs (the others' stores
  // would each read them); a directory's path is every rank's own (with levels: its node's).
  const bool from_root = store.layout() == Layout::series;
  // Lazily only from `dir`'s directories: a node directory is read whole (the levels' restart may rebuild it).
  lazy = lazy && !from_root && &store == &m_store;
  std::vector<std::uint8_t> dir;
  if (m_rank == 0 && from_root) {
    const std::string d = store.checkpoint_dir(step);
    dir.assign(d.begin(), d.end());
  }
  if (m_rank == 0) {
    mine = lazy ? read_root_file(store.checkpoint_dir(step)) : store.read_index(step);
    if (!mine.ok() && mine.status().code() == Code::not_found)
      mine = Status(Code::not_found, "checkpoint " + std::to_string(step) + " not found in " + store.root() + " (" +
                                         mine.status().message() + ")");
  }
  if (from_root) bcast_bytes(m_app_comm, dir, 0);
  auto bytes = bcast_result(m_app_comm, std::move(mine), 0);
  if (!bytes.ok()) return bytes.status();
  StepIndex out;
  out.dir = from_root ? std::string(dir.begin(), dir.end()) : store.checkpoint_dir(step);
  if (lazy && index_header_version(bytes->data(), bytes->size()) == kIndexV2Version) {
    auto partial = PartialIndex::open_v2(out.dir, bytes.value(), step);
    if (!partial.ok()) return partial.status();
    out.index = std::move(partial).value();
    return out;
  }
  auto idx = decode_checkpoint_index(bytes.value(), out.dir, step);
  if (!idx.ok()) return idx.status();
  out.index = PartialIndex(std::move(idx).value(), bytes->size());
  return out;
}

Status Restorer::joined_row_extents_fit(const VarRecord& v, const Region& r) {
  for (std::size_t d = 1; d < r.count.size(); ++d)
    if (v.global[d] != r.count[d])
      return Status(Code::mismatch, "stored rows of extents " +
                                        shape_text(Shape(v.global.begin() + 1, v.global.end())) + ", registered " +
                                        shape_text(Shape(r.count.begin() + 1, r.count.end())));
  return Status::OK();
}

Result<std::uint64_t> Restorer::joined_first_row(const VarRecord& v, const Region& r) const {
  const auto rows_text = [](std::uint64_t a, std::uint64_t b) {
    return "rows [" + std::to_string(a) + ", " + std::to_string(b) + ")";
  };
  CKPT_RETURN_IF_ERROR(joined_row_extents_fit(v, r));
  const std::uint64_t total = v.global[0], n = r.count[0];
  if (r.first_row == kBalancedRows) {
    const JoinedRows share = balanced_rows(total, m_rank, m_size);
    if (share.count() != n)
      return Status(Code::mismatch, std::to_string(n) + " rows registered on rank " + std::to_string(m_rank) +
                                        ", but its share of the balanced split of the " + std::to_string(total) +
                                        " stored rows is " + rows_text(share.begin, share.end) +
                                        (r.pieces ? " (allocate what joined_rows() says, or ask for the rows by "
                                                    "set_restart_keys or set_restart_rows)"
                                                  : " (allocate what joined_rows() says, or give Joined::first_row)"));
    return share.begin;
  }
  if (r.first_row > total || n > total - r.first_row)
    return Status(Code::mismatch, rows_text(r.first_row, r.first_row + n) + " registered on rank " +
                                      std::to_string(m_rank) + ", but the checkpoint holds " + std::to_string(total) +
                                      " rows");
  return r.first_row;
}

Result<std::vector<RowRun>> Restorer::joined_runs(const VarRecord& v, const Region& r) const {
  std::vector<RowRun> runs;
  if (!r.restart_rows) {
    auto first = joined_first_row(v, r);
    if (!first.ok()) return first.status();
    if (r.count[0] > 0) runs.push_back(RowRun{0, first.value(), r.count[0]});
    return runs;
  }
  CKPT_RETURN_IF_ERROR(joined_row_extents_fit(v, r));
  const std::vector<std::uint64_t>& rows = r.restart_rows->values;
  if (rows.size() != r.count[0])
    return Status(Code::mismatch, std::to_string(r.count[0]) + " rows registered on rank " + std::to_string(m_rank) +
                                      ", but " + std::to_string(rows.size()) + " restart rows asked for");
  const std::uint64_t total = v.global[0];
  for (std::size_t i = 0; i < rows.size(); ++i) {
    if (rows[i] >= total)
      return Status(Code::mismatch, "restart row " + std::to_string(rows[i]) + " asked for on rank " +
                                        std::to_string(m_rank) + ", but the checkpoint holds " + std::to_string(total) +
                                        " rows");
    if (!runs.empty() && runs.back().src + runs.back().len == rows[i])
      ++runs.back().len;
    else
      runs.push_back(RowRun{i, rows[i], 1});
  }
  return runs;
}

namespace {
/// The rank that resolves key `k` (splitmix64's finaliser spreads consecutive ids over the ranks).
int key_owner(std::uint64_t k, int size) {
  k ^= k >> 30;
  k *= 0xbf58476d1ce4e5b9ull;
  k ^= k >> 27;
  k *= 0x94d049bb133111ebull;
  k ^= k >> 31;
  return static_cast<int>(k % static_cast<std::uint64_t>(size));
}
constexpr std::uint64_t kNoRow = ~std::uint64_t{0};
}  // namespace

Result<std::vector<std::pair<std::string, std::vector<std::uint64_t>>>> Restorer::resolve_keys(
    PartialIndex& partial, const std::vector<Region>& regions, BlockReader& reader, Bounces& bounces,
    const Status& local, Status& mine) {
  mine = local;
  const Index& idx = partial.index();
  const IndexLookup& look = partial.lookup();
  std::vector<std::pair<std::string, std::vector<std::uint64_t>>> out;
  // The regions restarted by key, grouped by key column. Every rank must resolve the same ones (the
  // routing is collective): checked first, one allreduce (also when there are none).
  std::map<std::string, std::vector<const Region*>> by_key;
  for (const Region& r : regions) {
    if (!r.restart_rows || r.restart_rows->key.empty() || (r.optional && look.var(r.name) < 0)) continue;
    by_key[r.restart_rows->key].push_back(&r);
  }
  // Named in an order of their own: ranks may register the regions in different orders (the routing
  // below depends only on the key columns, in by_key's order).
  std::string plan;
  for (const auto& [key, users] : by_key) {
    std::vector<std::string> names;
    for (const Region* r : users) names.push_back(r->name);
    std::sort(names.begin(), names.end());
    for (const std::string& name : names) plan += name + " by " + key + "; ";
  }
  CKPT_RETURN_IF_ERROR(agree_equal(m_app_comm, {{"the regions restarted by key (set_restart_keys)", plan}}, "restart"));
  for (const auto& [key, users] : by_key) {
    // What the index says is the same on every rank: these refusals are too.
    const std::string what = "key '" + key + "'";
    const long ki = look.var(key);
    if (ki < 0) return Status(Code::not_found, what + " is not in checkpoint " + std::to_string(idx.step));
    const VarRecord& kv = idx.vars[static_cast<std::size_t>(ki)];
    if (kv.kind != RegionKind::joined || !is_integer_dtype(kv.dtype) || kv.global.size() > 2 ||
        (kv.global.size() == 2 && kv.global[1] != 1))
      return Status(Code::invalid_argument, what + " of checkpoint " + std::to_string(idx.step) + " is a " +
                                                region_kind_name(kv.kind) + " " + dtype_name(kv.dtype) + " array " +
                                                shape_text(kv.global) +
                                                "; a key is a joined integer array of one value per row");
    const std::uint64_t total = kv.global[0];
    for (const Region* r : users) {
      const long vi = look.var(r->name);
      if (vi < 0)
        return Status(Code::not_found, "variable '" + r->name + "' is not in checkpoint " + std::to_string(idx.step));
      const VarRecord& v = idx.vars[static_cast<std::size_t>(vi)];
      if (v.kind != RegionKind::joined || v.global[0] != total)
        return Status(Code::mismatch, "variable '" + r->name + "' of checkpoint " + std::to_string(idx.step) + " has " +
                                          (v.kind == RegionKind::joined ? std::to_string(v.global[0]) + " rows"
                                                                        : std::string("no rows")) +
                                          ", its " + what + " " + std::to_string(total) + ": not a key of it");
    }
    // This rank's share of the key column, read (and verified) like any joined region.
    const JoinedRows share = balanced_rows(total, m_rank, m_size);
    const std::size_t esize = dtype_size(kv.dtype);
    std::vector<std::uint8_t> column(static_cast<std::size_t>(share.count()) * esize);
    Status st = local;
    if (st.ok()) {
      Region col;
      col.name = key;
      col.ptr = column.data();
      col.dtype = kv.dtype;
      col.kind = RegionKind::joined;
      col.count = kv.global;
      col.count[0] = share.count();
      col.first_row = share.begin;
      st = restore_region(partial, col, reader, bounces);
      for (const Fence f : bounces.fence)  // the column is read here, on the host, at once
        if (st.ok()) st = m_device.wait(f);
    }
    // Its (key, row) pairs go to the keys' owners; the requests (key, position) too.
    std::vector<std::vector<std::uint64_t>> pairs(static_cast<std::size_t>(m_size)), asks = pairs;
    for (std::uint64_t i = 0; st.ok() && i < share.count(); ++i) {
      std::int64_t k = 0;
      if (!widen_integer(column.data() + i * esize, kv.dtype, k)) {
        st = Status(Code::invalid_argument, what + ": stored row " + std::to_string(share.begin + i) +
                                                " holds a value beyond the keys ckpt looks up (up to 2^63 - 1)");
        break;  // nothing of this rank is routed: the failure is agreed before any all-to-all
      }
      auto& to = pairs[static_cast<std::size_t>(key_owner(static_cast<std::uint64_t>(k), m_size))];
      to.push_back(static_cast<std::uint64_t>(k));
      to.push_back(share.begin + i);
    }
    std::uint64_t position = 0;
    for (const Region* r : users)
      for (const std::uint64_t k : r->restart_rows->values) {
        auto& to = asks[static_cast<std::size_t>(key_owner(k, m_size))];
        to.push_back(k);
        to.push_back(position++);
      }
    if (mine.ok()) mine = st;  // a damaged block of the key column is this rank's own (damaged_nodes())
    CKPT_RETURN_IF_ERROR(agree(m_app_comm, st));
    auto held = alltoallv_u64(m_app_comm, pairs);
    if (!held.ok()) return held.status().with_context(what);
    auto asked = alltoallv_u64(m_app_comm, asks);
    if (!asked.ok()) return asked.status().with_context(what);
    // The owner's answers: the row of each key asked for. A key held by two rows fails when it is
    // asked for (which row would it be?); one held by no row fails on the rank that asked.
    std::unordered_map<std::uint64_t, std::uint64_t> row_of, second_row_of;
    for (const auto& from : held.value())
      for (std::size_t j = 0; j + 1 < from.size(); j += 2) {
        auto [it, fresh] = row_of.emplace(from[j], from[j + 1]);
        if (!fresh) second_row_of.emplace(from[j], std::max(it->second, from[j + 1]));
        if (!fresh) it->second = std::min(it->second, from[j + 1]);
      }
    std::vector<std::vector<std::uint64_t>> answers(static_cast<std::size_t>(m_size));
    for (std::size_t from = 0; from < asked->size(); ++from) {
      const auto& a = asked.value()[from];
      for (std::size_t j = 0; j + 1 < a.size(); j += 2) {
        auto it = row_of.find(a[j]);
        answers[from].push_back(a[j + 1]);
        answers[from].push_back(it == row_of.end() ? kNoRow : it->second);
        auto dup = second_row_of.find(a[j]);
        if (dup != second_row_of.end() && st.ok())
          st = Status(Code::invalid_argument,
                      what + " is not unique: value " + std::to_string(static_cast<std::int64_t>(a[j])) +
                          " (asked for by rank " + std::to_string(from) + ") is held by stored rows " +
                          std::to_string(it->second) + " and " + std::to_string(dup->second));
      }
    }
    CKPT_RETURN_IF_ERROR(agree(m_app_comm, st));
    auto got = alltoallv_u64(m_app_comm, answers);
    if (!got.ok()) return got.status().with_context(what);
    std::vector<std::uint64_t> rows(static_cast<std::size_t>(position), kNoRow);
    for (const auto& from : got.value())
      for (std::size_t j = 0; j + 1 < from.size(); j += 2)
        if (from[j] < rows.size()) rows[static_cast<std::size_t>(from[j])] = from[j + 1];
    std::size_t at = 0;
    for (const Region* r : users) {
      std::vector<std::uint64_t> mine(rows.begin() + static_cast<std::ptrdiff_t>(at),
                                      rows.begin() + static_cast<std::ptrdiff_t>(at + r->restart_rows->values.size()));
      for (std::size_t i = 0; i < mine.size() && st.ok(); ++i)
        if (mine[i] == kNoRow)
          st = Status(Code::not_found, "region '" + r->name + "': no stored row of " + what + " holds " +
                                           std::to_string(static_cast<std::int64_t>(r->restart_rows->values[i])) +
                                           " (asked for as row " + std::to_string(i) + " on rank " +
                                           std::to_string(m_rank) + ")");
      at += mine.size();
      out.emplace_back(r->name, std::move(mine));
    }
    CKPT_RETURN_IF_ERROR(agree(m_app_comm, st));
  }
  return out;
}

Result<JoinedRows> Restorer::joined_rows(std::int64_t step, const std::string& name, Capture& capture) {
  (void)capture.wait_all();  // the step asked for may be in flight
  // Wherever restart(step) looks: the node level first (every node holds the whole index; a step may
  // never have been drained), then `dir`. Both reads are collective, so every rank takes the same path.
  Result<StepIndex> idx = Status(Code::not_found, "no node-local level");
  if (m_local != nullptr) idx = read_index_collective(step, *m_local);
  if (!idx.ok()) idx = read_index_collective(step, m_store, true);  // the root has the row count
  if (!idx.ok()) return idx.status();
  const Index& index = idx->index.index();
  const long vi = index.find_var(name);
  if (vi < 0) return Status(Code::not_found, "variable '" + name + "' is not in checkpoint " + std::to_string(step));
  const VarRecord& v = index.vars[static_cast<std::size_t>(vi)];
  if (v.kind != RegionKind::joined)
    return Status(Code::mismatch, "variable '" + name + "' of checkpoint " + std::to_string(step) + " is a " +
                                      region_kind_name(v.kind) + " region, not a joined array");
  return balanced_rows(v.global[0], m_rank, m_size);
}

Status Restorer::restore_region(PartialIndex& partial, const Region& r, BlockReader& reader, Bounces& bounces) {
  const Index& idx = partial.index();
  const IndexLookup& look = partial.lookup();  // both grow when partial.cover() reads sub-indices
  const long vi = look.var(r.name);
  if (vi < 0)
    return Status(Code::not_found, "variable '" + r.name + "' is not in checkpoint " + std::to_string(idx.step));
  const VarRecord& v = idx.vars[static_cast<std::size_t>(vi)];
  auto mismatch = [&](const std::string& why) {
    return Status(Code::mismatch, "variable '" + r.name + "' of checkpoint " + std::to_string(idx.step) + ": " + why);
  };
  if (v.dtype != r.dtype)
    return mismatch(std::string("stored as ") + dtype_name(v.dtype) + ", registered as " + dtype_name(r.dtype));
  const bool want_global = has_global_shape(r.kind);
  if ((want_global || has_global_shape(v.kind)) && v.kind != r.kind)
    return mismatch(std::string("stored as a ") + region_kind_name(v.kind) + " region, registered as " +
                    region_kind_name(r.kind));
  if (v.ndim != r.count.size())
    return mismatch("stored with " + std::to_string(v.ndim) + " dimensions, registered with " +
                    std::to_string(r.count.size()) + " " + shape_text(r.count));
  // Where each stored block's elements land: boxes (lo, hi) of it in the stored array's coordinates,
  // each with the origin of the destination (the stored coordinates of the region's first element; with
  // a memory selection, of the allocation's: origin - mem_start. Unsigned arithmetic wraps, and
  // RowWalker's offsets, sums of (index - origin) * stride, come out right modulo 2^64).
  // A scattered region has one part per piece: a target lies in one part (`part`, into memory_parts).
  struct Target {
    Shape lo, hi, origin;
    std::size_t part = 0;
  };
  const std::vector<MemoryPart> parts = memory_parts(r);
  const auto selection_origin = [&](Shape origin, std::size_t part) {
    if (!parts[part].packed())
      for (std::size_t d = 0; d < origin.size(); ++d) origin[d] -= parts[part].mem_start[d];
    return origin;
  };
  // The blocks that meet the region: read first when the index is partial (the directory says whose).
  Result<std::vector<RowRun>> runs = std::vector<RowRun>{};
  if (r.kind == RegionKind::joined) {
    runs = joined_runs(v, r);
    if (!runs.ok()) return mismatch(runs.status().message());
    if (!partial.whole()) {
      std::vector<std::pair<std::uint64_t, std::uint64_t>> rows;
      rows.reserve(runs->size());
      for (const RowRun& run : runs.value()) rows.emplace_back(run.src, run.len);
      CKPT_RETURN_IF_ERROR(partial.cover_rows(static_cast<std::uint32_t>(vi), rows));
    }
  } else if (want_global) {
    if (v.global != r.global)
      return mismatch("stored global shape " + shape_text(v.global) + ", registered " + shape_text(r.global));
    CKPT_RETURN_IF_ERROR(partial.cover(static_cast<std::uint32_t>(vi), {{r.start, r.count}}));
  }
  const std::vector<std::uint32_t>& blocks = look.blocks(vi);
  std::vector<std::vector<Target>> targets(blocks.size());  // per block of the variable
  if (r.kind == RegionKind::joined) {
    // Runs of consecutive stored rows that land in consecutive rows here, cut at the blocks' bounds.
    std::vector<std::pair<std::uint64_t, std::size_t>> starts;  // (first stored row, position in blocks)
    for (std::size_t k = 0; k < blocks.size(); ++k) starts.emplace_back(idx.blocks[blocks[k]].start[0], k);
    std::sort(starts.begin(), starts.end());
    // A run is cut at the parts' bounds too (a scattered region's pieces).
    struct PartRun {
      std::uint64_t src, dst, len;
      std::size_t part;
    };
    std::vector<PartRun> cut;
    for (const RowRun& run : runs.value()) {
      auto p = std::upper_bound(parts.begin(), parts.end(), run.dst,
                                [](std::uint64_t x, const MemoryPart& part) { return x < part.first_row; });
      if (p != parts.begin()) --p;
      for (; p != parts.end() && p->first_row < run.dst + run.len; ++p) {
        const std::uint64_t lo = std::max(run.dst, p->first_row),
                            hi = std::min(run.dst + run.len, p->first_row + p->count[0]);
        if (lo < hi)
          cut.push_back(PartRun{run.src + (lo - run.dst), lo, hi - lo, static_cast<std::size_t>(p - parts.begin())});
      }
    }
    Shape origin(r.count.size(), 0);
    for (const PartRun& run : cut) {
      auto k = std::upper_bound(starts.begin(), starts.end(), std::make_pair(run.src, ~std::size_t{0}));
      if (k != starts.begin()) --k;
      origin[0] = run.src - (run.dst - parts[run.part].first_row);  // the stored row landing in the part's row 0
      for (; k != starts.end() && k->first < run.src + run.len; ++k) {
        const BlockRecord& b = idx.blocks[blocks[k->second]];
        const std::uint64_t lo0 = std::max(run.src, b.start[0]),
                            hi0 = std::min(run.src + run.len, b.start[0] + b.count[0]);
        if (lo0 >= hi0) continue;
        Target t{Shape(r.count.size(), 0), parts[run.part].count, selection_origin(origin, run.part), run.part};
        t.lo[0] = lo0;
        t.hi[0] = hi0;
        targets[k->second].push_back(std::move(t));
      }
    }
  } else if (want_global) {
    for (std::size_t k = 0; k < blocks.size(); ++k) {
      const BlockRecord& b = idx.blocks[blocks[k]];
      Target t{Shape(r.count.size()), Shape(r.count.size()), selection_origin(r.start, 0)};
      if (intersect_boxes(r.start, r.count, b.start, b.count, t.lo, t.hi)) targets[k].push_back(std::move(t));
    }
  } else {
    // The block of the same rank; a uniform value may come from any rank.
    const bool same_ranks = idx.nranks == static_cast<std::uint32_t>(m_size);
    for (std::size_t k = 0; k < blocks.size(); ++k) {
      const BlockRecord& b = idx.blocks[blocks[k]];
      if (same_ranks ? b.rank != static_cast<std::uint32_t>(m_rank) : !(v.uniform && b.rank == 0)) continue;
      if (b.count != r.count)
        return mismatch("stored extents " + shape_text(b.count) + " (rank " + std::to_string(b.rank) +
                        "), registered " + shape_text(r.count) + " on rank " + std::to_string(m_rank));
      targets[k].push_back(Target{Shape(r.count.size(), 0), r.count, selection_origin(Shape(r.count.size(), 0), 0)});
      break;
    }
  }

  const std::size_t esize = dtype_size(r.dtype);
  std::uint64_t copied_elems = 0;

  for (std::size_t k = 0; k < blocks.size(); ++k) {
    if (targets[k].empty()) continue;  // nothing of this block lands here: not read
    const BlockRecord& b = idx.blocks[blocks[k]];
    std::vector<RowWalker> walkers;
    for (const Target& t : targets[k]) {
      const MemoryPart& part = parts[t.part];
      walkers.emplace_back(t.lo, t.hi, b.start, b.count, t.origin, part.packed() ? part.count : part.mem_alloc, esize);
      std::uint64_t elems = 1;
      for (std::size_t d = 0; d < t.lo.size(); ++d) elems *= t.hi[d] - t.lo[d];
      copied_elems += elems;
    }
    // Stream the whole stored block (to verify it), copying the rows of the intersection as they pass.
    // Pieces alternate between the two bounce chunks: reading piece k overlaps the copies of piece k-1.
    int cur = 0;  // the bounce chunk of the piece being read
    auto next_bounce = [&]() -> Result<std::uint8_t*> {
      cur = bounces.next;
      bounces.next ^= 1;
      CKPT_RETURN_IF_ERROR(m_device.wait(bounces.fence[cur]));  // its last piece's copies have landed
      return bounces.chunk[cur]->data;
    };
    CKPT_RETURN_IF_ERROR(reader.stream(
        b, bounces.chunk[0]->bytes, next_bounce,
        [&](const std::uint8_t* piece, std::size_t n, std::uint64_t p0) -> Status {
          // Rows at constant strides become one 2D copy (device memory: one cudaMemcpy2DAsync, not one
          // copy per row).
          // The targets of one part share a batch (a scattered region's pieces are allocations of their own).
          for (std::size_t i = 0; i < walkers.size();) {
            void* base = parts[targets[k][i].part].ptr;
            RowBatcher batch([&](const Copy2D& c) { return m_device.copy_to_device(base, piece, c, r.mem); },
                             m_device.max_copy_pitch());
            for (; i < walkers.size() && parts[targets[k][i].part].ptr == base; ++i)
              CKPT_RETURN_IF_ERROR(walkers[i].scatter_piece(
                  p0, n,
                  [&](std::uint64_t dst, std::uint64_t src, std::uint64_t len) { return batch.add(dst, src, len); }));
            CKPT_RETURN_IF_ERROR(batch.flush());
          }
          auto f = m_device.fence();  // the bounce chunk is read into again after this fence
          CKPT_RETURN_IF_ERROR(f.status());
          bounces.fence[cur] = f.value();
          return Status::OK();
        }));
  }
  const std::uint64_t want = r.elements();
  if (copied_elems != want) {
    if (!want_global && copied_elems == 0) {
      if (idx.nranks != static_cast<std::uint32_t>(m_size))
        return mismatch("it was written by " + std::to_string(idx.nranks) +
                        " ranks and differs per rank, so it cannot "
                        "be restored on " +
                        std::to_string(m_size) + " ranks (declare it as a Block of a global array)");
      return mismatch("no block was stored for rank " + std::to_string(m_rank));
    }
    return mismatch("the checkpoint covers " + std::to_string(copied_elems) + " of the " + std::to_string(want) +
                    " elements of this rank's box");
  }
  return Status::OK();
}

Status Restorer::copy_packed(const Region& r, const std::uint8_t* from, std::size_t n) {
  const std::size_t esize = dtype_size(r.dtype);
  for (const MemoryPart& part : memory_parts(r)) {
    if (part.offset >= n) break;
    const std::uint64_t len = std::min<std::uint64_t>(part.bytes, n - part.offset);
    if (part.packed()) {
      CKPT_RETURN_IF_ERROR(m_device.copy_to_device(part.ptr, from + part.offset, len, r.mem));
      continue;
    }
    RowBatcher batch([&](const Copy2D& c) { return m_device.copy_to_device(part.ptr, from + part.offset, c, r.mem); },
                     m_device.max_copy_pitch());
    CKPT_RETURN_IF_ERROR(for_each_selection_row(part.mem_start, part.count, part.mem_alloc, esize, 0, len,
                                                [&](std::uint64_t in_memory, std::uint64_t packed, std::uint64_t l) {
                                                  return batch.add(in_memory, packed, l);
                                                }));
    CKPT_RETURN_IF_ERROR(batch.flush());
  }
  return Status::OK();
}

std::optional<Shape> Restorer::stored_extents(const Index& idx, const IndexLookup& look, const Region& r) const {
  const long vi = look.var(r.name);
  if (vi < 0) return std::nullopt;
  const VarRecord& v = idx.vars[static_cast<std::size_t>(vi)];
  if (v.kind == RegionKind::joined) {
    if (r.kind != RegionKind::joined) return std::nullopt;  // restore_region() names the mismatch
    Shape count = v.global;
    count[0] = r.restart_rows ? r.restart_rows->values.size() : balanced_rows(v.global[0], m_rank, m_size).count();
    return count;
  }
  if (has_global_shape(v.kind) || r.kind == RegionKind::joined) return std::nullopt;
  // A local array: the block of the same rank, or of rank 0 for a value every rank stored the same.
  const bool same_ranks = idx.nranks == static_cast<std::uint32_t>(m_size);
  for (const std::uint32_t bi : look.blocks(vi)) {
    const BlockRecord& b = idx.blocks[bi];
    if (same_ranks ? b.rank == static_cast<std::uint32_t>(m_rank) : v.uniform && b.rank == 0) return b.count;
  }
  return std::nullopt;
}

Status Restorer::restart(std::int64_t step, void* stream, Registry& registry, Capture& capture) {
  Span span(m_tracer, "ckpt:restart", TraceThread::app, step);
  Status pending = capture.wait_all();  // a restart does not race with our own commits
  (void)pending;
  // The cheapest level that has the step: every node's directory, else `dir` (docs/design.md, "Levels").
  // A node that lost the step is rebuilt from its partner's copy first (docs/design.md, "Levels").
  const auto local = local_candidates();
  auto c = std::find_if(local.begin(), local.end(), [&](const LocalCandidate& x) { return x.step == step; });
  Status from_local;
  if (c != local.end()) {
    LocalCandidate want = *c;
    if (!want.lost.empty()) from_local = rebuild(want);
    if (from_local.ok()) from_local = restart_from(step, stream, registry, *m_local);
    if (from_local.code() == Code::corrupt && m_opts.redundancy != Redundancy::none) {
      // A damaged file costs no step while its copy or parity is intact: the nodes whose files failed
      // their checksums are rebuilt as if lost (their step is committed again), then read again.
      for (int k : damaged_nodes())
        if (std::find(want.lost.begin(), want.lost.end(), k) == want.lost.end()) want.lost.push_back(k);
      if (want.lost.size() > c->lost.size() && rebuildable(want.lost)) {
        if (m_opts.verbose >= 1 && m_rank == 0)
          std::fprintf(stderr, "ckpt: restart: step %lld damaged on %zu node(s), rebuilding from %s\n",
                       static_cast<long long>(step), want.lost.size() - c->lost.size(), redundancy_source());
        from_local = rebuild(want);
        if (from_local.ok()) from_local = restart_from(step, stream, registry, *m_local);
      }
    }
    if (from_local.ok()) {
      m_level = want.lost.empty() ? "local" : m_opts.redundancy == Redundancy::partner ? "partner" : "xor";
      return from_local;
    }
  }
  Status s = restart_from(step, stream, registry, m_store);
  if (s.ok()) {
    m_level = "global";
    return s;
  }
  if (!from_local.ok())  // the local copy failed and `dir` has no usable one either
    return s.code() == Code::not_found
               ? from_local
               : Status(s.code(), "node-local level: " + from_local.message() + "; drained level: " + s.message());
  return s;
}

Status Restorer::restart_from(std::int64_t step, void* stream, Registry& registry, const Store& store) {
  const char* level = &store == m_local ? "local" : "global";
  m_skipped.clear();
  m_mine = Status::OK();
  m_index_bytes = 0;
  auto found = read_index_collective(step, store, true);
  if (!found.ok()) {
    if (m_rank == 0) m_mine = found.status();  // rank 0 read it (from its node's copy with levels)
    return found.status().with_context("restart from step " + std::to_string(step));
  }
  PartialIndex& partial = found.value().index;
  const Index& index = partial.index();
  const IndexLookup& look = partial.lookup();  // both grow as restore_region() reads sub-indices

  // A partial index: this rank's sub-index (its local arrays and, N->N, usually its boxes), or on another
  // rank count rank 0's, whose blocks give the values every rank stored the same.
  const bool same_ranks = index.nranks == static_cast<std::uint32_t>(m_size);
  bool uniform = false;
  for (const VarRecord& v : index.vars) uniform |= v.uniform;
  Status local = same_ranks ? partial.load_rank(static_cast<std::uint32_t>(m_rank))
                            : (uniform ? partial.load_rank(0) : Status::OK());
  // Regions registered with a Source: where they are now, resized to what this checkpoint holds.
  if (local.ok()) local = registry.locate_sources();
  if (local.ok()) local = registry.fit_sources([&](const Region& r) { return stored_extents(index, look, r); });
  const std::vector<Region>& regions = registry.regions();
  std::uint64_t bytes = 0;
  for (auto& r : regions) bytes += r.bytes();
  if (local.ok()) local = reserve_for_stream(m_pool, m_opts, bytes);
  // Optional regions are restored into host memory of their own first and copied into place only once
  // every rank has read and verified the whole step: when the step then fails and the restart falls
  // back to one that does not hold them, they are untouched, as the fall-back says. (The other regions
  // are written in place, in one pass: the step that succeeds rewrites every element of them.)
  std::vector<std::vector<std::uint8_t>> shadows;
  Status verified = Status::OK();
  bool began = false;
  Bounces bounces;
  if (local.ok()) local = m_device.restore_begin(stream);
  BlockReader reader(found->dir, index);
  if (local.ok()) {
    began = true;
    bounces.chunk[0] = m_pool.acquire();
    bounces.chunk[1] = m_pool.acquire();
  }
  // Collective, every rank: the rows of the regions restarted by key (an agreed failure).
  Status mine_keys;  // this rank's own outcome of resolve_keys, before agreement (m_mine)
  auto keyed = resolve_keys(partial, regions, reader, bounces, local, mine_keys);
  if (!keyed.ok()) local = verified = keyed.status();  // agreed already: no rank agrees on it again
  if (local.ok()) {
    for (auto& registered : regions) {
      const Region* use = &registered;
      Region with_rows;  // a keyed region with its rows found: restored as if given by index
      for (auto& [name, rows] : keyed.value())
        if (name == registered.name) {
          with_rows = registered;
          with_rows.restart_rows = std::make_shared<const RestartRows>(RestartRows{std::string(), std::move(rows)});
          use = &with_rows;
        }
      const Region& r = *use;
      if (r.optional && look.var(r.name) < 0) {  // a variable added after this checkpoint was written
        m_skipped.push_back(r.name);
        continue;
      }
      if (!r.optional) {
        local = restore_region(partial, r, reader, bounces);
      } else {
        shadows.emplace_back(static_cast<std::size_t>(r.bytes()));
        Region into = r;
        into.ptr = shadows.back().data();
        into.mem = MemoryKind::host;
        into.mem_start.clear();  // the shadow holds the box (the pieces' rows) packed
        into.mem_alloc.clear();
        into.pieces.reset();
        local = restore_region(partial, into, reader, bounces);
      }
      if (!local.ok()) break;
    }
  }
  if (!shadows.empty()) {
    verified = agree(m_app_comm, local);
    std::size_t k = 0;
    for (auto& r : regions) {
      if (!verified.ok()) break;
      if (!r.optional || look.var(r.name) < 0) continue;
      const auto& from = shadows[k++];
      local = copy_packed(r, from.data(), from.size());
      if (!local.ok()) break;
    }
  }
  if (began) {
    // Every copy has landed (the optional regions' too): the data is in place when restart() returns,
    // and the bounce chunks can go back to the pool (a copy still reading one would take the next
    // checkpoint's data).
    Status e = m_device.restore_end(stream);
    if (local.ok()) local = e;
    for (Chunk* c : bounces.chunk) {
      if (e.ok())
        m_pool.release(c);
      else
        m_pool.retire(c);
    }
  }
  m_index_bytes = partial.bytes_read();
  m_mine = keyed.ok() ? local : mine_keys;  // not the agreed failure: damaged_nodes() asks whose read failed
  Status s = verified.ok() ? agree(m_app_comm, local) : verified;
  if (m_opts.verbose >= 1 && m_rank == 0)
    std::fprintf(stderr, "ckpt: restart from step %lld (%s level): %s\n", static_cast<long long>(step), level,
                 s.to_string().c_str());
  return s.with_context("restart from step " + std::to_string(step));
}

Result<StepIndex> Restorer::inspect(std::int64_t step, Capture& capture) {
  Status pending = capture.wait_all();  // the step may be one of ours still committing
  (void)pending;
  // Lazily, as restart() reads it: the root (a two-level index) and, later, what the reader's calls need.
  auto idx = read_index_collective(step, m_store, true);
  if (!idx.ok()) return idx.status().with_context("inspect step " + std::to_string(step));
  return idx;
}

Result<std::int64_t> Restorer::restart_newest(void* stream, Registry& registry, Capture& capture) {
  // Every rank sees the same candidate list: rank 0 lists, everybody gets it; newest first.
  auto candidates = candidate_steps(false);
  if (!candidates.ok()) return candidates.status();
  std::vector<std::int64_t> steps(candidates->rbegin(), candidates->rend());
  std::string why;
  Code code = Code::ok;  // of the newest candidate's failure that is not a plain not_found
  for (auto s : steps) {
    Status st = restart(static_cast<std::int64_t>(s), stream, registry, capture);
    if (st.ok()) {
      std::string skipped;
      for (auto& name : m_skipped) skipped += (skipped.empty() ? "" : ", ") + name;
      if (!skipped.empty())
        skipped = "optional regions not in checkpoint " + std::to_string(s) + ", left untouched: " + skipped;
      if (why.empty() && skipped.empty()) return static_cast<std::int64_t>(s);
      // The caller must learn that newer checkpoints were skipped (and why): it may want to stop.
      std::string warning = why.empty()
                                ? skipped
                                : "restarted from step " + std::to_string(s) + " after skipping newer ones: " + why +
                                      (skipped.empty() ? "" : "; " + skipped);
      return Result<std::int64_t>(static_cast<std::int64_t>(s),
                                  Status(code == Code::ok ? Code::not_found : code, warning));
    }
    if (why.size() < 4000) why += (why.empty() ? "" : "; ") + st.message();
    if (code == Code::ok && st.code() != Code::not_found) code = st.code();
    if (m_opts.verbose >= 1 && m_rank == 0)
      std::fprintf(stderr, "ckpt: falling back from step %lld: %s\n", static_cast<long long>(s), st.message().c_str());
  }
  if (steps.empty()) return Status(Code::not_found, "no checkpoint in " + m_opts.dir);
  // Candidates exist but none restores: that is damage (corrupt) or a program that does not match
  // what is stored (mismatch; a variable missing from every checkpoint is one too), not "nothing there".
  return Status(code == Code::ok ? Code::mismatch : code,
                "no checkpoint in " + m_opts.dir + " could be restored: " + why);
}

}  // namespace ckpt::detail
