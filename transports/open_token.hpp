// Round-robin token on file open (as in ADIOS): with k tokens, rank r opens its file after rank
// r - k has opened its own, so at most k opens hit the metadata server at once. Internal.
#ifndef CKPT_TRANSPORTS_OPEN_TOKEN_HPP
#define CKPT_TRANSPORTS_OPEN_TOKEN_HPP

#include <mpi.h>

namespace ckpt::detail {

/// Runs `open` under the token. Collective over `comm` (every rank must call it); `k` <= 0 means
/// no token. `comm` must not be used by another thread at the same time.
template <class F>
auto with_open_token(MPI_Comm comm, int k, F&& open) {
  int rank = 0, size = 1;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  const int tag = 7101;
  char token = 0;
  if (k > 0 && rank - k >= 0) MPI_Recv(&token, 1, MPI_CHAR, rank - k, tag, comm, MPI_STATUS_IGNORE);
  auto result = open();
  if (k > 0 && rank + k < size) MPI_Send(&token, 1, MPI_CHAR, rank + k, tag, comm);
  return result;
}

}  // namespace ckpt::detail

#endif  // CKPT_TRANSPORTS_OPEN_TOKEN_HPP
