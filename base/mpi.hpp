// MPI patterns every layer needs, written once (internal): agreement on failure, a Status or bytes
// from one rank to all, variable-length gathers, and transfers cut into pieces that fit an int count.
#ifndef CKPT_BASE_MPI_HPP
#define CKPT_BASE_MPI_HPP

#include <mpi.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "ckpt/types.hpp"
#include "ckpt/status.hpp"

namespace ckpt::detail {

/// Largest single MPI transfer we issue: counts are int, and 1 GiB keeps every count well inside.
constexpr std::uint64_t kMaxMpiPiece = 1ull << 30;

/// Calls `f(offset, count)` for [0, n) in pieces of at most kMaxMpiPiece bytes (count is an int, as
/// MPI wants it), in order; stops at and returns the first non-ok Status.
template <class F>
Status for_each_piece(std::uint64_t n, F&& f) {
  for (std::uint64_t off = 0; off < n;) {
    const int part = static_cast<int>(n - off < kMaxMpiPiece ? n - off : kMaxMpiPiece);
    CKPT_RETURN_IF_ERROR(f(off, part));
    off += static_cast<std::uint64_t>(part);
  }
  return Status::OK();
}

/// How the calling thread waits for the collectives below (and allreduce(), bcast()): false (the
/// default) with MPI's blocking calls, which poll without pause; true with the nonblocking calls,
/// tested with sleeps in between (from 10 us, doubling, at most 200 us). For ckpt's background threads:
/// a peer rank often reaches the collective milliseconds later, and a blocking call would spend those
/// polling on a core the application computes on. Per thread; set at the thread's start.
void set_sleeping_waits(bool on) noexcept;
/// False in a ThreadSanitizer build, where set_sleeping_waits() keeps blocking waits (see mpi.cpp).
bool sleeping_waits_available() noexcept;

/// MPI_Allreduce, waiting as set_sleeping_waits() says. Collective over `comm`.
void allreduce(const void* in, void* out, int count, MPI_Datatype type, MPI_Op op, MPI_Comm comm);

/// The exclusive prefix sum of `count` u64 per rank: out[i] = the sum of in[i] over the ranks before this one
/// (0 on rank 0; wrapping). By recursive doubling over point-to-point messages: ceil(log2 P) rounds, each
/// a message to rank + 2^k and one from rank - 2^k, waited for as set_sleeping_waits() says. Not
/// MPI_Exscan: Open MPI 4.1's (nonblocking) one is a chain through every rank, and with sleeping waits each
/// of its P hops costs a rank's wake-up (110 ms at 128 ranks on 2 cores). Collective over `comm`.
void exscan_sum(const std::uint64_t* in, std::uint64_t* out, int count, MPI_Comm comm);

/// MPI_Bcast, waiting as set_sleeping_waits() says. Collective over `comm`.
void bcast(void* buf, int count, MPI_Datatype type, int root, MPI_Comm comm);

/// Status for an MPI error code: ok for MPI_SUCCESS, else io_error "<what>: <MPI error string>".
Status mpi_status(int rc, const std::string& what);

/// "Did anyone fail?" Collective over `comm`. Every rank gets ok when every `local` is ok; otherwise
/// every rank, the failing ones included, gets the same Status: that of the lowest failing rank,
/// prefixed "rank <r in comm>: ". Costs one allreduce when nobody failed.
Status agree(MPI_Comm comm, const Status& local);

/// A named value a rank brings to agree_equal(): an option and its value, an argument of a collective call.
struct NamedValue {
  std::string name;
  std::string value;
};

/// "Do all ranks hold the same values?" Collective over `comm`; every rank passes the same names in the
/// same order. ok when every value is equal on every rank; otherwise every rank gets the same
/// invalid_argument: "<what>: <name> differs across ranks: rank 0 has '<v>', rank <r> has '<w>'" for the
/// first name that differs (rank r the lowest whose value differs from rank 0's). One allreduce of two
/// hashes per name when all agree.
Status agree_equal(MPI_Comm comm, const std::vector<NamedValue>& values, const std::string& what);

/// The Status `s` of rank `root` on every rank (code and message). Collective over `comm`: one
/// broadcast when `s` is ok, two otherwise.
Status bcast_status(MPI_Comm comm, const Status& s, int root);

/// Rank `root`'s `bytes` on every rank (resized on the others); any length, sent in <= 1 GiB pieces.
/// Collective over `comm`.
void bcast_bytes(MPI_Comm comm, std::vector<std::uint8_t>& bytes, int root);

/// Rank `root`'s `mine` on every rank: its bytes, or its error (what the other ranks pass is ignored).
/// Collective over `comm`: one rank reads a file and every rank gets its content or the same error.
Result<std::vector<std::uint8_t>> bcast_result(MPI_Comm comm, Result<std::vector<std::uint8_t>> mine, int root);

/// The MPI_Comm held by `comm`, checked without calling MPI on it: failed_precondition when MPI is not
/// initialised or already finalised ("... call MPI_Init_thread before <who>"), invalid_argument when the
/// handle is not an MPI_Comm of this MPI library or is MPI_COMM_NULL.
Result<MPI_Comm> comm_from_ref(const CommRef& comm, const char* who);

/// Every rank's `mine` on rank `root`, in rank order (empty on the other ranks); any lengths, also
/// when their sum exceeds what an int count can address. Collective over `comm`: two rounds (the
/// lengths, then the bytes) when the sum fits an int count.
std::vector<std::vector<std::uint8_t>> gatherv_bytes(MPI_Comm comm, const std::vector<std::uint8_t>& mine, int root);
/// Tests only: the sum of lengths above which gatherv_bytes() goes point to point (INT_MAX; 0 restores it),
/// so that the path of more than an int count runs on small data. Set it on every rank alike.
void set_gatherv_limit_for_tests(std::uint64_t bytes) noexcept;

/// gatherv_bytes() in one round when the ranks have agreed on `slot` (the same on every rank): one
/// MPI_Gather of `slot` bytes per rank, each a u64 length and up to `slot` - 8 bytes. A rank whose bytes do
/// not fit (an error message longer than what the slot was agreed for) sends them after the gather, point
/// to point; its slot's length tells `root` to receive them. gatherv_bytes() when `slot` x the ranks
/// exceeds an int count or `slot` < 8.
std::vector<std::vector<std::uint8_t>> gather_slots(MPI_Comm comm, const std::vector<std::uint8_t>& mine,
                                                    std::uint64_t slot, int root);

/// merge(left, right) of reduce_bytes(): `left` holds the values of ranks below those of `right`.
using MergeBytes =
    std::function<std::vector<std::uint8_t>(std::vector<std::uint8_t> left, const std::vector<std::uint8_t>& right)>;

/// Every rank's `mine` merged on rank 0 along a binomial tree: rank r merges what ranks r + 1, r + 2,
/// r + 4, ... send (each the merge of a run of ranks after the ones r holds) and sends the result to
/// the rank that clears its lowest set bit. `merge` sees runs of consecutive ranks, the lower one left,
/// so an associative merge that keeps the left's order gives rank 0 the values in rank order. Returns
/// the whole merge on rank 0, an empty vector elsewhere. Collective over `comm`: ceil(log2 P) rounds of
/// point-to-point messages, each the size of a merged value (waits as set_sleeping_waits() says).
std::vector<std::uint8_t> reduce_bytes(MPI_Comm comm, std::vector<std::uint8_t> mine, const MergeBytes& merge);

/// gatherv_bytes() with the result on every rank. Collective over `comm`.
std::vector<std::vector<std::uint8_t>> allgatherv_bytes(MPI_Comm comm, const std::vector<std::uint8_t>& mine);

/// Sends send[d] (send.size() == the communicator's size) to rank d; returns what each rank sent to this
/// one, in rank order. Collective over `comm`: an MPI_Alltoall of the counts, an allreduce, then one
/// MPI_Alltoallv. invalid_argument on every rank when some rank would send or receive 2^31 elements or
/// more (one MPI_Alltoallv cannot carry them).
Result<std::vector<std::vector<std::uint64_t>>> alltoallv_u64(MPI_Comm comm,
                                                              const std::vector<std::vector<std::uint64_t>>& send);

/// Frees a communicator made by ckpt (no-op for MPI_COMM_NULL or after MPI_Finalize); sets it null.
void free_comm(MPI_Comm& c);

}  // namespace ckpt::detail

#endif  // CKPT_BASE_MPI_HPP
