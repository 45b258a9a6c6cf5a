// Incremental checkpoints: pieces, the chain of this rank, the ranges the write thread writes.
#include "runtime/src/pipeline/incremental.hpp"

#include <algorithm>

namespace ckpt::detail {

void init_incremental(IncrementalJob& inc, const StreamPlan& plan, std::uint32_t piece_log2,
                      std::uint64_t chunk_bytes) {
  if (piece_log2 == 0 || chunk_bytes % (std::uint64_t{1} << piece_log2) != 0) return;
  inc.on = true;
  inc.piece_log2 = piece_log2;
  inc.hashes.resize(plan.blocks.size());
  inc.reused.resize(plan.blocks.size());
  inc.first_piece.resize(plan.blocks.size());
  const std::uint64_t p = inc.piece_bytes();
  std::uint64_t pieces = 0;
  for (std::size_t i = 0; i < plan.blocks.size(); ++i) {
    inc.first_piece[i] = pieces;
    const std::uint64_t len = plan.blocks[i].length;
    if (len < p) continue;
    inc.hashes[i].resize((len + p - 1) / p);
    inc.reused[i].assign(inc.hashes[i].size(), 0);
    pieces += inc.hashes[i].size();
  }
}

void begin_incremental(IncrementalJob& inc, std::shared_ptr<const ChainTable> newest) {
  inc.started = true;
  if (newest != nullptr && !newest->saw_unchanged) {
    inc.probes = newest->probes + 1;
    inc.probed = std::move(newest);
  } else {
    inc.previous = std::move(newest);
  }
}

std::vector<std::pair<std::uint64_t, std::uint64_t>> dirty_ranges(const IncrementalJob& inc, const StreamPlan& plan,
                                                                  std::uint64_t a, std::uint64_t b) {
  std::vector<std::pair<std::uint64_t, std::uint64_t>> out;
  if (!inc.on) {
    out.emplace_back(a, b);
    return out;
  }
  auto add = [&out](std::uint64_t lo, std::uint64_t hi) {
    if (lo >= hi) return;
    if (!out.empty() && out.back().second == lo)
      out.back().second = hi;
    else
      out.emplace_back(lo, hi);
  };
  const std::uint64_t p = inc.piece_bytes();
  // The first block that ends after a (blocks are in stream order).
  auto it = std::upper_bound(plan.blocks.begin(), plan.blocks.end(), a,
                             [](std::uint64_t x, const BlockPlan& bp) { return x < bp.offset + bp.length; });
  for (; it != plan.blocks.end() && it->offset < b; ++it) {
    const std::size_t i = static_cast<std::size_t>(it - plan.blocks.begin());
    const std::uint64_t lo = std::max(a, it->offset), hi = std::min(b, it->offset + it->length);
    if (inc.reused[i].empty()) {
      add(lo, hi);
      continue;
    }
    for (std::uint64_t k = (lo - it->offset) / p; it->offset + k * p < hi; ++k) {
      if (inc.reused[i][k] != 0) continue;
      add(std::max(lo, it->offset + k * p), std::min(hi, it->offset + (k + 1) * p));
    }
  }
  return out;
}

std::shared_ptr<const ChainTable> Chain::previous(std::int64_t step, std::uint64_t started_before) const {
  std::unique_lock<std::mutex> lk(m_mu);
  m_cv.wait(lk, [&] { return m_settled >= started_before; });
  if (!m_newest || m_newest->length >= m_full_every || step <= m_newest->step) return nullptr;
  return m_newest;
}

void Chain::committed(std::int64_t step, std::uint64_t ckpt_id, const std::string& file, const IncrementalJob& inc,
                      const StreamPlan& plan, const std::vector<std::uint64_t>& own) {
  if (!inc.on) return;
  auto t = std::make_shared<ChainTable>();
  t->step = step;
  // A checkpoint that reused no piece refers to nothing: it is full, its own base (format.md), whatever it
  // was compared with.
  bool reused = false;
  for (const auto& r : inc.reused) reused = reused || std::any_of(r.begin(), r.end(), [](std::uint8_t x) { return x; });
  const ChainTable* prev = reused ? inc.previous.get() : nullptr;
  t->base_step = prev != nullptr ? prev->base_step : step;
  t->length = prev != nullptr ? prev->length + 1 : 1;
  t->saw_unchanged = inc.compared == 0 || inc.unchanged * kProbeStride >= inc.compared;
  t->probes = inc.probes;
  // Files: the previous table's that some reused piece still names, then this checkpoint's own file.
  std::vector<std::uint32_t> renumber(prev != nullptr ? prev->files.size() : 0, UINT32_MAX);
  const std::uint64_t p = inc.piece_bytes();
  std::uint32_t own_file = UINT32_MAX;
  for (std::size_t i = 0; i < inc.hashes.size(); ++i) {
    if (inc.hashes[i].empty()) continue;
    const std::vector<ChainPiece>* before = nullptr;
    if (prev != nullptr)
      if (auto f = prev->blocks.find(plan.vars[i].name); f != prev->blocks.end()) before = &f->second.second;
    std::vector<ChainPiece> pieces(inc.hashes[i].size());
    for (std::size_t k = 0; k < pieces.size(); ++k) {
      pieces[k].hash = inc.hashes[i][k];
      pieces[k].known = inc.hashes_piece(i, k);
      if (inc.reused[i][k] != 0 && before != nullptr) {
        const ChainPiece& was = (*before)[k];
        std::uint32_t& f = renumber[was.file];
        if (f == UINT32_MAX) {
          f = static_cast<std::uint32_t>(t->files.size());
          t->files.push_back(prev->files[was.file]);
        }
        pieces[k].file = f;
        pieces[k].offset = was.offset;
      } else {
        if (own_file == UINT32_MAX) {
          own_file = static_cast<std::uint32_t>(t->files.size());
          t->files.push_back(RefFile{0, step, ckpt_id, file});
        }
        pieces[k].file = own_file;
        pieces[k].offset = own[i] + k * p;
      }
    }
    t->blocks[plan.vars[i].name] = {plan.blocks[i].length, std::move(pieces)};
  }
  std::lock_guard<std::mutex> lk(m_mu);
  m_newest = std::move(t);
}

void Chain::settle() {
  {
    std::lock_guard<std::mutex> lk(m_mu);
    ++m_settled;
  }
  m_cv.notify_all();
}

void Chain::reset() {
  std::lock_guard<std::mutex> lk(m_mu);
  m_newest.reset();
}

bool pieced_block(const IncrementalJob& inc, std::size_t i, const std::string& name, std::uint64_t own_offset,
                  BlockRecord& b, std::vector<RefFile>& refs) {
  if (!inc.on || inc.previous == nullptr || i >= inc.reused.size()) return false;
  const auto& reused = inc.reused[i];
  if (std::none_of(reused.begin(), reused.end(), [](std::uint8_t r) { return r != 0; })) return false;
  const std::vector<ChainPiece>& before = inc.previous->blocks.at(name).second;
  const std::uint64_t p = inc.piece_bytes();
  b.piece_log2 = inc.piece_log2;
  b.offset = 0;
  b.pieces.assign(reused.size(), PieceRecord());
  for (std::size_t k = 0; k < reused.size(); ++k) {
    PieceRecord& pr = b.pieces[k];
    pr.hash = inc.hashes[i][k];
    if (reused[k] == 0) {
      pr.offset = own_offset + k * p;
      continue;
    }
    const RefFile& f = inc.previous->files[before[k].file];
    auto at = std::find(refs.begin(), refs.end(), f);
    if (at == refs.end()) at = refs.insert(refs.end(), f);
    pr.ref = static_cast<std::uint32_t>(at - refs.begin()) + 1;
    pr.offset = before[k].offset;
  }
  return true;
}

}  // namespace ckpt::detail
