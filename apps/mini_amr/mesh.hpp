// mini_amr's mesh: cubic blocks of an octree over the unit cube, each block one separate allocation
// with one layer of ghost cells, refined around a moving sphere and balanced over the ranks along the
// Morton curve. Nothing here knows about checkpoints.
#ifndef MINI_AMR_MESH_HPP
#define MINI_AMR_MESH_HPP

#include <mpi.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace mini_amr {

/// The run's shape; equal on every rank.
struct Params {
  int nroot = 2;         ///< root blocks per side (level 0), at most 16
  int cells = 4;         ///< interior cells per block side (even)
  int nvars = 2;         ///< variables per cell
  int max_level = 2;     ///< finest level, at most kDepth
  int regrid_every = 4;  ///< steps between regrids
};

/// Ids address blocks down to this level: a block's id is the Morton code of its lower corner at this
/// level, shifted left by 4, plus its level. Ordering blocks by id orders them along the Morton curve.
constexpr int kDepth = 12;

/// A block's place: its level and its integer coordinates at that level.
struct Key {
  int level = 0, i = 0, j = 0, k = 0;
};
std::int64_t id_of(const Key& k);
Key key_of(std::int64_t id);

/// One block: `u` is double[nvars][cells + 2][cells + 2][cells + 2] (one ghost layer on each side).
struct Block {
  std::int64_t id = 0;
  Key key;
  std::unique_ptr<double[]> u;
};

class Mesh {
 public:
  Mesh(MPI_Comm comm, const Params& p);
  const Params& params() const { return m_p; }
  /// Doubles in one block's allocation.
  std::size_t allocated() const { return static_cast<std::size_t>(m_p.nvars) * m_m * m_m * m_m; }
  /// The blocks of the mesh at step 0, filled with the initial condition.
  void init();
  /// Makes `leaves` (block ids, any order, every rank the same) the mesh and allocates this rank's
  /// share of them (its contiguous part of the Morton order), interiors and ghosts zero.
  void set_leaves(std::vector<std::int64_t> leaves);
  /// One step: ghosts from each block's own boundary, then a 7-point average plus a forcing term.
  void advance(std::int64_t step);
  /// Refines the blocks inside the sphere of `step`, coarsens the families outside it, and moves the
  /// blocks to their owners under the new partition (plain MPI). True when the mesh changed.
  bool regrid(std::int64_t step);
  /// This rank's blocks, in id order.
  std::vector<Block>& blocks() { return m_blocks; }
  /// Blocks of the whole mesh.
  std::size_t global_blocks() const { return m_leaves.size(); }
  /// Blocks this rank received from another rank in regrids so far.
  std::int64_t moved_in() const { return m_moved_in; }
  /// Collective: every block's id, level, coordinates and the hash of its interior, in id order, to
  /// `path` (rank 0; skipped when empty). Returns the hash of that listing on rank 0 (independent of
  /// the rank count), "" elsewhere.
  std::string dump(const std::string& path) const;

 private:
  /// Rank r owns leaves [first(r), first(r + 1)) of `n`.
  std::int64_t first(int r, std::size_t n) const;
  int owner(std::int64_t index, std::size_t n) const;
  std::unique_ptr<double[]> allocate() const;
  int want(const Key& k, std::int64_t step) const;

  MPI_Comm m_comm;
  int m_rank = 0, m_size = 1;
  Params m_p;
  int m_m;                             // cells + 2
  std::vector<std::int64_t> m_leaves;  // every block of the mesh, in id order
  std::vector<Block> m_blocks;         // this rank's: leaves [first(rank), first(rank + 1))
  std::int64_t m_moved_in = 0;
};

}  // namespace mini_amr

#endif  // MINI_AMR_MESH_HPP
