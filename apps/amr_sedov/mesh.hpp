// The block quadtree of amr_sedov: keys, Morton order, point location, 2:1-balanced refinement and
// coarsening, and the partition of the leaves over ranks. Every rank holds the whole list of leaves
// (a few thousand at most here), so neighbour search and the decisions of a regrid are local and
// identical on every rank; only the cell data are distributed.
#ifndef AMR_SEDOV_MESH_HPP
#define AMR_SEDOV_MESH_HPP

#include <algorithm>
#include <cstdint>
#include <unordered_map>
#include <vector>

namespace sedov {

constexpr int NB = 16;           // interior cells per block side
constexpr int NG = 2;            // guard cells per side (MUSCL-Hancock and the Lohner stencil need 2)
constexpr int NT = NB + 2 * NG;  // cells per block side with guards
constexpr int NVAR = 4;          // conserved variables
enum Var { DENS = 0, MOMX = 1, MOMY = 2, ENER = 3 };
constexpr int KMAX = 20;  // level of the integer coordinates used for keys and point lookups

/// A block of the quadtree: level 1 is the root grid of nroot x nroot blocks, level l has
/// nroot * 2^(l-1) blocks per side; (i, j) count blocks along x and y.
struct BlockKey {
  int level = 1, i = 0, j = 0;
  bool operator==(const BlockKey& o) const { return level == o.level && i == o.i && j == o.j; }
  bool operator!=(const BlockKey& o) const { return !(*this == o); }
  BlockKey parent() const { return {level - 1, i / 2, j / 2}; }
  BlockKey child(int a, int b) const { return {level + 1, 2 * i + a, 2 * j + b}; }
};

class Tree {
 public:
  Tree(int nroot, int max_level);

  /// Replaces the leaves; they are sorted along the Morton curve (depth-first order of the tree).
  void set_leaves(std::vector<BlockKey> leaves);
  const std::vector<BlockKey>& leaves() const { return m_leaves; }
  const BlockKey& leaf(int b) const { return m_leaves[static_cast<std::size_t>(b)]; }
  int size() const { return static_cast<int>(m_leaves.size()); }
  int nroot() const { return m_nroot; }
  int max_level() const { return m_max_level; }
  int finest_level() const { return m_finest; }

  /// Index of the leaf with this key, -1 if it is not a leaf.
  int find(const BlockKey& k) const;
  /// Index of the leaf containing the point (X, Y) in KMAX units, -1 outside the domain.
  int leaf_at(std::int64_t X, std::int64_t Y) const;
  /// Leaves that touch leaf b (edges or corners), b excluded, sorted and unique.
  std::vector<int> neighbours(int b) const;

  /// Width of the domain [0, 1] in KMAX units, and of a block / a cell of level l.
  std::int64_t width() const { return static_cast<std::int64_t>(m_nroot) << (KMAX - 1); }
  static std::int64_t block_span(int level) { return std::int64_t(1) << (KMAX - level); }
  static std::int64_t cell_span(int level) { return block_span(level) / NB; }
  /// Cells per side of the whole domain at level l, and their width in physical units.
  std::int64_t cells(int level) const { return static_cast<std::int64_t>(m_nroot) * NB << (level - 1); }
  double dx(int level) const { return 1.0 / static_cast<double>(cells(level)); }

  /// The leaves after a regrid: flags +1 refine, -1 coarsen (all four siblings must agree), 0 keep.
  /// Refinement propagates so that touching leaves differ by at most one level (2:1 balance, also
  /// across corners); a coarsening that would break the balance is dropped.
  std::vector<BlockKey> adapt(const std::vector<int>& flags) const;

  /// Contiguous ranges of the Morton order: rank r owns [first(r), first(r + 1)).
  static std::int64_t first(int rank, int ranks, std::int64_t n) {
    return rank * (n / ranks) + std::min<std::int64_t>(rank, n % ranks);
  }
  static int owner(std::int64_t b, int ranks, std::int64_t n);

  static std::uint64_t morton(const BlockKey& k);

 private:
  static std::uint64_t pack(const BlockKey& k) {
    return (static_cast<std::uint64_t>(k.level) << 48) | (static_cast<std::uint64_t>(k.i) << 24) |
           static_cast<std::uint64_t>(k.j);
  }
  int m_nroot, m_max_level, m_finest = 1;
  std::vector<BlockKey> m_leaves;
  std::unordered_map<std::uint64_t, int> m_index;
};

}  // namespace sedov

#endif
