// Partner redundancy (internal): whole files of a checkpoint sent to another rank over MPI and written
// there, for the partner copy at checkpoint time and for the rebuild of a lost node's files at
// restart. See docs/design.md, "Levels".
#ifndef CKPT_RUNTIME_LEVELS_PARTNER_HPP
#define CKPT_RUNTIME_LEVELS_PARTNER_HPP

#include <mpi.h>

#include <cstdint>
#include <string>
#include <vector>

#include "ckpt/status.hpp"

namespace ckpt::detail {

/// Which ranks form which node (docs/design.md, "Levels"). The same on every rank.
struct NodeLayout {
  int node = 0;                         ///< this rank's node
  int local_index = 0;                  ///< this rank's position among its node's ranks
  std::vector<std::vector<int>> ranks;  ///< ranks[k]: the ranks of node k, ascending
  int nodes() const { return static_cast<int>(ranks.size()); }
  bool leader() const { return local_index == 0; }
  /// The rank of node `k` at this rank's position, MPI_PROC_NULL when node k has fewer ranks.
  int peer(int k) const {
    const auto& r = ranks[static_cast<std::size_t>(k)];
    return local_index < static_cast<int>(r.size()) ? r[static_cast<std::size_t>(local_index)] : MPI_PROC_NULL;
  }
  /// Whether every node has the same number of ranks.
  bool uniform() const;
};

/// The nodes of `comm`: rank r is on node r / `ranks_per_node` when that is > 0, else on the node MPI
/// reports (MPI_Comm_split_type SHARED), nodes numbered by their lowest rank. Collective.
NodeLayout make_node_layout(MPI_Comm comm, int ranks_per_node);

/// Whether `n` is a plain file name (no '/', not "." or "..", short): names received over MPI must be.
bool plain_name(const std::string& n);

/// Sends the files `src_dir`/`names` to rank `to` and, at the same time, receives the files rank `from`
/// sends, writing them (fdatasync when `sync`) under their own names into `dst_dir` (created). Either
/// rank may be MPI_PROC_NULL. Point to point over `comm` (one thread's); every byte promised is sent
/// also after a read error (zeros then), so the pair never hangs; the error is returned to the rank
/// that failed, which must make the others learn it (an agreement). Names must be plain file names.
/// `bytes_sent` (optional) gets the payload bytes sent.
Status exchange_files(MPI_Comm comm, int to, const std::string& src_dir, const std::vector<std::string>& names,
                      int from, const std::string& dst_dir, bool sync, std::uint64_t* bytes_sent = nullptr);

}  // namespace ckpt::detail

#endif  // CKPT_RUNTIME_LEVELS_PARTNER_HPP
