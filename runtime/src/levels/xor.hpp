// XOR redundancy (internal), SCR style: the ranks at one position on the nodes of a group store parity
// of each other's checkpoint files, so one lost node per group is rebuilt exactly. See docs/design.md,
// "Levels".
//
// With G members, member m's files (concatenated, zero-padded to the group's longest) are cut into G-1
// segments of S bytes. Member j stores P_j = XOR over m != j of segment (j - m - 1) mod G of member m
// (each member's segments go to the G-1 others, one each), in `xor.<rank>` beside its files: a header
// (every member's rank and file names and sizes, S), the parity and its XXH3. Lost member x's segment
// s is P_j XOR the other members' segments that went into P_j, j = (x + s + 1) mod G.
#ifndef CKPT_RUNTIME_LEVELS_XOR_HPP
#define CKPT_RUNTIME_LEVELS_XOR_HPP

#include <mpi.h>

#include <cstdint>
#include <string>
#include <vector>

#include "ckpt/status.hpp"
#include "runtime/src/levels/partner.hpp"

namespace ckpt::detail {

/// The ranks that protect each other: this rank's position on every node of its parity group.
struct XorGroup {
  std::vector<int> nodes;  ///< the group's nodes, ascending
  std::vector<int> ranks;  ///< ranks[m]: member m, the rank at this rank's position on nodes[m]
  int me = -1;             ///< this rank's member index
};

/// The parity group of node `k` when groups have `group_nodes` nodes: k / group_nodes, the last group
/// taking the nodes left over (so no group has a single node when there are >= 2 nodes).
int xor_group_of(int nodes, int group_nodes, int k);
/// This rank's group (layout uniform, >= 2 nodes).
XorGroup make_xor_group(const NodeLayout& layout, int group_nodes);

/// Every member: computes its parity of the files `dir`/`names` of the members and writes it to
/// `dir`/xor.<rank> (fdatasync when `sync`). Point to point over `comm` (one thread's); every member
/// sends everything it promised also after an error (zeros then), so no member hangs; the error is
/// returned to the member that failed, which must make the others learn it. `bytes_sent`: payload sent.
Status xor_encode(MPI_Comm comm, const XorGroup& g, const std::string& dir, const std::vector<std::string>& names,
                  bool sync, std::uint64_t* bytes_sent = nullptr);

/// Every member of a group that lost member `lost`: the others read their files and parity from
/// `have_dir` (a committed checkpoint) and send what member `lost` needs; it writes its files and its
/// parity file into `out_dir` (created). Collective over the group's members; errors as for xor_encode.
/// The survivors verify their parity against its XXH3 on the way.
Status xor_rebuild(MPI_Comm comm, const XorGroup& g, int lost, const std::string& have_dir, const std::string& out_dir,
                   bool sync);

}  // namespace ckpt::detail

#endif  // CKPT_RUNTIME_LEVELS_XOR_HPP
