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

}  // namespace ckpt::detail

#endif  // CKPT_RUNTIME_OVERLAP_HPP
