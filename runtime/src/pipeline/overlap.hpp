// Refusing a checkpoint whose global arrays cannot be restored: overlapping stored blocks (internal).
#ifndef CKPT_RUNTIME_OVERLAP_HPP
#define CKPT_RUNTIME_OVERLAP_HPP

#include "base/format.hpp"
#include "ckpt/status.hpp"

namespace ckpt::detail {

/// Ok when no two non-empty blocks of any global variable of `idx` overlap; otherwise
/// invalid_argument naming the variable, both ranks and both boxes. Ghost cells registered as part
/// of a Block are the usual cause: restart cannot tell which copy of a cell is the owner's.
/// Cost: a sort and a sweep along the slowest dimension per variable, comparing a block only with
/// the blocks that overlap it in that dimension (O(n log n) for slabs, n * (blocks per slab) for
/// 2-D and 3-D decompositions).
Status check_disjoint_blocks(const Index& idx);

/// Replaces `boxes` (only var, rank, start and count are read; the non-empty boxes of a variable disjoint,
/// as check_disjoint_blocks() or the joined arrays' row numbering make them) by fewer boxes with the same
/// union per variable: two boxes of a variable that meet face to face and agree in every other dimension
/// become one, until no two do. A merged box keeps the lower rank of its parts; empty boxes stay as they
/// are; the survivors keep their order. A group writer sends rank 0 these instead of one box per block
/// (commit_spread): since two boxes join only when they touch without overlapping, each merged box is
/// exactly the union of some blocks and overlapping blocks stay in different boxes, so two writers'
/// blocks overlap exactly when their merged boxes do, and the catalog's directories (a bounding box per
/// writer) do not change. Call it on one writer's boxes only: across writers it would merge boxes of
/// different writers, whose directories then change. A grid of a box (every cut through the whole box,
/// as a Cartesian decomposition's contiguous ranks) becomes one box; other tilings may stay several (a
/// pinwheel of 5 cannot merge at all). Cost: per round, a sort of the boxes per dimension; a grid
/// merges in one round, a nested layout may take a round per pair (quadratic: ~0.25 s for 2000 boxes).
void merge_adjacent_boxes(std::vector<BlockRecord>& boxes);

}  // namespace ckpt::detail

#endif  // CKPT_RUNTIME_OVERLAP_HPP
