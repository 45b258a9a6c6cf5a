#include "mesh.hpp"

#include <algorithm>
#include <set>

namespace sedov {

Tree::Tree(int nroot, int max_level) : m_nroot(nroot), m_max_level(max_level) {}

std::uint64_t Tree::morton(const BlockKey& k) {
  // Interleave the bits of the block's lower-left corner in KMAX units: leaves never share a corner
  // point, and this order is the depth-first order of the quadtree (nroot a power of two).
  const std::uint64_t x = static_cast<std::uint64_t>(k.i) << (KMAX - k.level);
  const std::uint64_t y = static_cast<std::uint64_t>(k.j) << (KMAX - k.level);
  std::uint64_t key = 0;
  for (int bit = 0; bit < 32; ++bit) {
    key |= ((x >> bit) & 1u) << (2 * bit);
    key |= ((y >> bit) & 1u) << (2 * bit + 1);
  }
  return key;
}

void Tree::set_leaves(std::vector<BlockKey> leaves) {
  std::sort(leaves.begin(), leaves.end(), [](const BlockKey& a, const BlockKey& b) { return morton(a) < morton(b); });
  m_leaves = std::move(leaves);
  m_index.clear();
  m_finest = 1;
  for (int b = 0; b < size(); ++b) {
    m_index[pack(m_leaves[b])] = b;
    m_finest = std::max(m_finest, m_leaves[b].level);
  }
}

int Tree::find(const BlockKey& k) const {
  if (k.level < 1) return -1;
  auto it = m_index.find(pack(k));
  return it == m_index.end() ? -1 : it->second;
}

int Tree::leaf_at(std::int64_t X, std::int64_t Y) const {
  if (X < 0 || Y < 0 || X >= width() || Y >= width()) return -1;
  for (int l = m_finest; l >= 1; --l) {
    const int b = find({l, static_cast<int>(X >> (KMAX - l)), static_cast<int>(Y >> (KMAX - l))});
    if (b >= 0) return b;
  }
  return -1;
}

std::vector<int> Tree::neighbours(int b) const {
  // Sample points just outside the block: at 1/4 and 3/4 of every edge (a finer neighbour covers half
  // an edge under 2:1 balance) and beyond every corner.
  const BlockKey& k = leaf(b);
  const std::int64_t s = block_span(k.level), x0 = k.i * s, y0 = k.j * s;
  const std::int64_t xs[4] = {x0 - 1, x0 + s / 4, x0 + 3 * s / 4, x0 + s};
  const std::int64_t ys[4] = {y0 - 1, y0 + s / 4, y0 + 3 * s / 4, y0 + s};
  std::set<int> out;
  for (int a = 0; a < 4; ++a)
    for (int c = 0; c < 4; ++c) {
      if ((a == 1 || a == 2) && (c == 1 || c == 2)) continue;  // inside the block
      const int n = leaf_at(xs[a], ys[c]);
      if (n >= 0 && n != b) out.insert(n);
    }
  return {out.begin(), out.end()};
}

int Tree::owner(std::int64_t b, int ranks, std::int64_t n) {
  // Inverse of first(): the first n % ranks ranks hold one block more.
  const std::int64_t q = n / ranks, r = n % ranks;
  if (b < r * (q + 1)) return static_cast<int>(b / (q + 1));
  return static_cast<int>(r + (b - r * (q + 1)) / q);
}

std::vector<BlockKey> Tree::adapt(const std::vector<int>& flags) const {
  const int n = size();
  std::vector<char> refine(n, 0), coarsen(n, 0);
  for (int b = 0; b < n; ++b) refine[b] = flags[b] > 0 && leaf(b).level < m_max_level;
  // 2:1 balance: the children of a refined block (level l+1) must not touch a leaf of level l-1.
  for (bool changed = true; changed;) {
    changed = false;
    for (int b = 0; b < n; ++b) {
      if (!refine[b]) continue;
      for (int m : neighbours(b))
        if (leaf(m).level < leaf(b).level && !refine[m]) refine[m] = 1, changed = true;
    }
  }
  // Coarsen a family only when all four siblings are leaves, all ask for it, none is refined, and
  // no leaf touching them will be finer than the siblings after this regrid (the parent would then
  // be two levels coarser than it). Neighbours' own coarsening is ignored: conservative.
  for (int b = 0; b < n; ++b) {
    const BlockKey& k = leaf(b);
    if (k.level <= 1 || (k.i & 1) || (k.j & 1) || flags[b] >= 0 || refine[b]) continue;
    const BlockKey p = k.parent();
    int family[4];
    bool ok = true;
    for (int c = 0; c < 4 && ok; ++c) {
      family[c] = find(p.child(c & 1, c >> 1));
      ok = family[c] >= 0 && flags[family[c]] < 0 && !refine[family[c]];
    }
    for (int c = 0; c < 4 && ok; ++c)
      for (int m : neighbours(family[c])) {
        if (std::find(family, family + 4, m) != family + 4) continue;
        if (leaf(m).level + (refine[m] ? 1 : 0) > k.level) ok = false;
      }
    if (ok)
      for (int c = 0; c < 4; ++c) coarsen[family[c]] = 1;
  }
  std::vector<BlockKey> out;
  out.reserve(static_cast<std::size_t>(n) + 3 * static_cast<std::size_t>(std::count(refine.begin(), refine.end(), 1)));
  for (int b = 0; b < n; ++b) {
    const BlockKey& k = leaf(b);
    if (refine[b]) {
      for (int c = 0; c < 4; ++c) out.push_back(k.child(c & 1, c >> 1));
    } else if (coarsen[b]) {
      if (!(k.i & 1) && !(k.j & 1)) out.push_back(k.parent());
    } else {
      out.push_back(k);
    }
  }
  return out;
}

}  // namespace sedov
