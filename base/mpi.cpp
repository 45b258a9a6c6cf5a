// MPI helpers (see mpi.hpp).
#include "base/mpi.hpp"

#include "base/hash.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <climits>
#include <cstdio>
#include <cstring>
#include <thread>

namespace ckpt::detail {
namespace {

constexpr int kGatherTag = 7201;
constexpr int kReduceTag = 7202;
constexpr int kScanTag = 7203;

thread_local bool t_sleeping_waits = false;

/// Completes `req` (a nonblocking collective): MPI_Test, sleeping in between (set_sleeping_waits).
void complete(MPI_Request& req) {
  int done = 0;
  MPI_Test(&req, &done, MPI_STATUS_IGNORE);
  auto pause = std::chrono::microseconds(10);
  while (done == 0) {
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::microseconds(200));
    MPI_Test(&req, &done, MPI_STATUS_IGNORE);
  }
}

/// A collective, waiting as set_sleeping_waits() says: `blocking()` (MPI's blocking call), or
/// `start(&req)` (its nonblocking twin) completed by complete().
template <class Blocking, class Start>
void collective(Blocking&& blocking, Start&& start) {
  if (!t_sleeping_waits) {
    blocking();
    return;
  }
  MPI_Request req = MPI_REQUEST_NULL;
  start(&req);
  complete(req);
}

/// Completes `req` (a point-to-point request): MPI_Wait, or complete() with sleeping waits.
void wait_request(MPI_Request& req) {
  if (t_sleeping_waits)
    complete(req);
  else
    MPI_Wait(&req, MPI_STATUS_IGNORE);
}

/// `n` bytes to rank `peer` point to point, in pieces of an int count, each waited for by wait_request().
void send_bytes(const std::uint8_t* p, std::uint64_t n, int peer, int tag, MPI_Comm comm) {
  (void)for_each_piece(n, [&](std::uint64_t off, int part) {
    MPI_Request req = MPI_REQUEST_NULL;
    MPI_Isend(p + off, part, MPI_BYTE, peer, tag, comm, &req);
    wait_request(req);
    return Status::OK();
  });
}

/// `n` bytes from rank `peer` into `p`, as send_bytes() sends them.
void recv_bytes(std::uint8_t* p, std::uint64_t n, int peer, int tag, MPI_Comm comm) {
  (void)for_each_piece(n, [&](std::uint64_t off, int part) {
    MPI_Request req = MPI_REQUEST_NULL;
    MPI_Irecv(p + off, part, MPI_BYTE, peer, tag, comm, &req);
    wait_request(req);
    return Status::OK();
  });
}

}  // namespace

void set_sleeping_waits(bool on) noexcept {
#if defined(__SANITIZE_THREAD__)
  // Under ThreadSanitizer the waits stay blocking: another thread's MPI call progresses this thread's
  // nonblocking collective inside Open MPI (uninstrumented), so TSan cannot see that the request's
  // completion orders those accesses to its buffers before this thread reuses them, and reports a race
  // on this thread's stack. The sleeping waits are tested without TSan (unit_mpi_4).
  (void)on;
  t_sleeping_waits = false;
#else
  t_sleeping_waits = on;
#endif
}

bool sleeping_waits_available() noexcept {
#if defined(__SANITIZE_THREAD__)
  return false;
#else
  return true;
#endif
}

void allreduce(const void* in, void* out, int count, MPI_Datatype type, MPI_Op op, MPI_Comm comm) {
  collective([&] { MPI_Allreduce(in, out, count, type, op, comm); },
             [&](MPI_Request* req) { MPI_Iallreduce(in, out, count, type, op, comm, req); });
}

void exscan_sum(const std::uint64_t* in, std::uint64_t* out, int count, MPI_Comm comm) {
  int rank = 0, size = 1;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  const auto n = static_cast<std::size_t>(count);
  std::vector<std::uint64_t> window(in, in + n), got(n);  // window: the sum over ranks (rank-2^k, rank]
  std::fill(out, out + n, 0);
  for (long long step = 1; step < size; step *= 2) {
    const int d = static_cast<int>(step);
    MPI_Request send = MPI_REQUEST_NULL, recv = MPI_REQUEST_NULL;
    if (rank + d < size) MPI_Isend(window.data(), count, MPI_UINT64_T, rank + d, kScanTag, comm, &send);
    if (rank - d >= 0) MPI_Irecv(got.data(), count, MPI_UINT64_T, rank - d, kScanTag, comm, &recv);
    if (send != MPI_REQUEST_NULL) wait_request(send);  // before `window` changes below
    if (recv == MPI_REQUEST_NULL) continue;
    wait_request(recv);
    for (std::size_t i = 0; i < n; ++i) {  // the ranks (rank-2d, rank-d]: before this one, not yet counted
      out[i] += got[i];
      window[i] += got[i];
    }
  }
}

void bcast(void* buf, int count, MPI_Datatype type, int root, MPI_Comm comm) {
  collective([&] { MPI_Bcast(buf, count, type, root, comm); },
             [&](MPI_Request* req) { MPI_Ibcast(buf, count, type, root, comm, req); });
}

Status mpi_status(int rc, const std::string& what) {
  if (rc == MPI_SUCCESS) return Status::OK();
  char msg[MPI_MAX_ERROR_STRING] = {};
  int len = 0;
  MPI_Error_string(rc, msg, &len);
  return Status(Code::io_error, what + ": " + std::string(msg, static_cast<std::size_t>(len)));
}

Status agree(MPI_Comm comm, const Status& local) {
  if (comm == MPI_COMM_NULL) return local;
  int bad = local.ok() ? 0 : 1;
  int any = 0;
  allreduce(&bad, &any, 1, MPI_INT, MPI_MAX, comm);
  if (any == 0) return Status::OK();
  int rank = 0, size = 1;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  const int mine = bad != 0 ? rank : size;
  int lowest = 0;
  allreduce(&mine, &lowest, 1, MPI_INT, MPI_MIN, comm);
  Status first = bcast_status(comm, local, lowest);
  // The same Status on every rank, the failing ones included: callers may branch on it collectively
  // (checkpoint(-1) on one rank gives every rank the same error).
  return Status(first.code(), "rank " + std::to_string(lowest) + ": " + first.message());
}

Status agree_equal(MPI_Comm comm, const std::vector<NamedValue>& values, const std::string& what) {
  if (comm == MPI_COMM_NULL || values.empty()) return Status::OK();
  const std::size_t n = values.size();
  // max(h) and max(~h) = ~min(h) in one reduction: a value is equal everywhere when its min is its max.
  std::vector<std::uint64_t> h(2 * n), r(2 * n);
  for (std::size_t i = 0; i < n; ++i) {
    h[i] = hash64(values[i].value.data(), values[i].value.size());
    h[n + i] = ~h[i];
  }
  allreduce(h.data(), r.data(), static_cast<int>(2 * n), MPI_UINT64_T, MPI_MAX, comm);
  std::size_t first = 0;
  while (first < n && r[first] == ~r[n + first]) ++first;
  if (first == n) return Status::OK();
  int rank = 0, size = 1;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  std::uint64_t h0 = h[first];
  bcast(&h0, 1, MPI_UINT64_T, 0, comm);
  const int mine = h[first] != h0 ? rank : size;
  int other = 0;
  allreduce(&mine, &other, 1, MPI_INT, MPI_MIN, comm);
  auto text_of = [&](int root) {  // control bytes escaped: the message goes to a terminal
    std::vector<std::uint8_t> b(values[first].value.begin(), values[first].value.end());
    bcast_bytes(comm, b, root);
    std::string t;
    for (std::uint8_t c : b) {
      char esc[8];
      std::snprintf(esc, sizeof esc, "\\x%02x", c);
      t += c < 0x20 || c == 0x7f ? std::string(esc) : std::string(1, static_cast<char>(c));
    }
    return t;
  };
  const std::string v0 = text_of(0), vr = text_of(other);
  return Status(Code::invalid_argument, what + ": " + values[first].name + " differs across ranks: rank 0 has '" + v0 +
                                            "', rank " + std::to_string(other) + " has '" + vr + "'");
}

Status bcast_status(MPI_Comm comm, const Status& s, int root) {
  // The code and the message's length in one broadcast (the message follows only when there is one):
  // a commit's outcome costs one round.
  const std::string& msg = s.message();
  std::uint64_t head[2] = {static_cast<std::uint64_t>(s.code()), msg.size()};
  bcast(head, 2, MPI_UINT64_T, root, comm);
  std::string text(static_cast<std::size_t>(head[1]), '\0');
  int rank = 0;
  MPI_Comm_rank(comm, &rank);
  if (rank == root) text = msg;
  (void)for_each_piece(head[1], [&](std::uint64_t off, int part) {
    bcast(text.data() + off, part, MPI_BYTE, root, comm);
    return Status::OK();
  });
  if (head[0] == 0) return Status::OK();
  return Status(static_cast<Code>(head[0]), std::move(text));
}

Result<std::vector<std::uint8_t>> bcast_result(MPI_Comm comm, Result<std::vector<std::uint8_t>> mine, int root) {
  int rank = 0;
  MPI_Comm_rank(comm, &rank);
  const Status s = bcast_status(comm, rank == root ? mine.status() : Status::OK(), root);
  if (!s.ok()) return s;
  std::vector<std::uint8_t> bytes;
  if (rank == root) bytes = std::move(mine).value();
  bcast_bytes(comm, bytes, root);
  return bytes;
}

Result<MPI_Comm> comm_from_ref(const CommRef& comm, const char* who) {
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (!initialized || finalized)
    return Status(Code::failed_precondition,
                  std::string("MPI is not initialised (call MPI_Init_thread before ") + who + ")");
  if (comm.size() != sizeof(MPI_Comm))
    return Status(Code::invalid_argument, "the communicator handle is not an MPI_Comm of this MPI library");
  MPI_Comm c;
  std::memcpy(&c, comm.bytes(), sizeof(MPI_Comm));
  // MPI_COMM_NULL is what MPI_Comm_split gives a rank outside the new communicator: not an error of
  // the job, so it must not reach a collective (whose error handler aborts the job).
  if (c == MPI_COMM_NULL) return Status(Code::invalid_argument, "the communicator is MPI_COMM_NULL");
  return c;
}

void bcast_bytes(MPI_Comm comm, std::vector<std::uint8_t>& bytes, int root) {
  std::uint64_t n = bytes.size();
  bcast(&n, 1, MPI_UINT64_T, root, comm);
  bytes.resize(static_cast<std::size_t>(n));
  (void)for_each_piece(n, [&](std::uint64_t off, int part) {
    bcast(bytes.data() + off, part, MPI_BYTE, root, comm);
    return Status::OK();
  });
}

Result<std::vector<std::vector<std::uint64_t>>> alltoallv_u64(MPI_Comm comm,
                                                              const std::vector<std::vector<std::uint64_t>>& send) {
  int size = 1;
  MPI_Comm_size(comm, &size);
  const auto n = static_cast<std::size_t>(size);
  std::vector<std::uint64_t> out_len(n), in_len(n);
  for (std::size_t d = 0; d < n && d < send.size(); ++d) out_len[d] = send[d].size();
  MPI_Alltoall(out_len.data(), 1, MPI_UINT64_T, in_len.data(), 1, MPI_UINT64_T, comm);
  std::uint64_t out_sum = 0, in_sum = 0;
  for (std::size_t d = 0; d < n; ++d) {
    out_sum += out_len[d];
    in_sum += in_len[d];
  }
  int big = out_sum > static_cast<std::uint64_t>(INT_MAX) || in_sum > static_cast<std::uint64_t>(INT_MAX) ? 1 : 0;
  int any_big = 0;
  allreduce(&big, &any_big, 1, MPI_INT, MPI_MAX, comm);
  if (any_big != 0) return Status(Code::invalid_argument, "an all-to-all of 2^31 elements or more on one rank");
  std::vector<int> sc(n), sd(n), rc(n), rd(n);
  std::vector<std::uint64_t> flat;
  flat.reserve(static_cast<std::size_t>(out_sum));
  for (std::size_t d = 0; d < n; ++d) {
    sc[d] = static_cast<int>(out_len[d]);
    sd[d] = static_cast<int>(flat.size());
    if (d < send.size()) flat.insert(flat.end(), send[d].begin(), send[d].end());
    rc[d] = static_cast<int>(in_len[d]);
    rd[d] = d == 0 ? 0 : rd[d - 1] + rc[d - 1];
  }
  std::vector<std::uint64_t> in(static_cast<std::size_t>(in_sum));
  MPI_Alltoallv(flat.data(), sc.data(), sd.data(), MPI_UINT64_T, in.data(), rc.data(), rd.data(), MPI_UINT64_T, comm);
  std::vector<std::vector<std::uint64_t>> got(n);
  for (std::size_t d = 0; d < n; ++d) got[d].assign(in.begin() + rd[d], in.begin() + rd[d] + rc[d]);
  return got;
}

namespace {
std::atomic<std::uint64_t> g_gatherv_limit{static_cast<std::uint64_t>(INT_MAX)};
}  // namespace

void set_gatherv_limit_for_tests(std::uint64_t bytes) noexcept {
  g_gatherv_limit = bytes == 0 ? static_cast<std::uint64_t>(INT_MAX) : std::min<std::uint64_t>(bytes, INT_MAX);
}

std::vector<std::vector<std::uint8_t>> gatherv_bytes(MPI_Comm comm, const std::vector<std::uint8_t>& mine, int root) {
  int rank = 0, size = 1;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  const std::uint64_t my_len = mine.size();
  // Every rank learns every length (one round): each then knows the total, and so whether the
  // bytes fit one MPI_Gatherv (an int count, the common case) or go point to point, in pieces.
  std::vector<std::uint64_t> lens(static_cast<std::size_t>(size));
  collective(
      [&] { MPI_Allgather(&my_len, 1, MPI_UINT64_T, lens.data(), 1, MPI_UINT64_T, comm); },
      [&](MPI_Request* req) { MPI_Iallgather(&my_len, 1, MPI_UINT64_T, lens.data(), 1, MPI_UINT64_T, comm, req); });
  std::uint64_t sum = 0;
  for (auto l : lens) sum += std::min<std::uint64_t>(l, 1ull << 32);  // no overflow below 2^31 ranks
  const int small = sum <= g_gatherv_limit.load(std::memory_order_relaxed) ? 1 : 0;
  if (rank != root) lens.clear();
  std::vector<std::vector<std::uint8_t>> out(rank == root ? static_cast<std::size_t>(size) : 0);
  if (small != 0) {
    std::vector<int> counts(lens.size()), displs(lens.size());
    int total = 0;
    for (std::size_t r = 0; r < lens.size(); ++r) {
      counts[r] = static_cast<int>(lens[r]);
      displs[r] = total;
      total += counts[r];
    }
    std::vector<std::uint8_t> all(static_cast<std::size_t>(total));
    const int n = static_cast<int>(my_len);
    collective(
        [&] { MPI_Gatherv(mine.data(), n, MPI_BYTE, all.data(), counts.data(), displs.data(), MPI_BYTE, root, comm); },
        [&](MPI_Request* req) {
          MPI_Igatherv(mine.data(), n, MPI_BYTE, all.data(), counts.data(), displs.data(), MPI_BYTE, root, comm, req);
        });
    for (std::size_t r = 0; r < out.size(); ++r)
      out[r].assign(all.begin() + displs[r], all.begin() + displs[r] + counts[r]);
    return out;
  }
  // More than an int count in all: point to point, in pieces, waited for as set_sleeping_waits() says.
  if (rank != root) {
    send_bytes(mine.data(), my_len, root, kGatherTag, comm);
    return out;
  }
  for (int r = 0; r < size; ++r) {
    auto& v = out[static_cast<std::size_t>(r)];
    if (r == root) {
      v = mine;
      continue;
    }
    v.resize(static_cast<std::size_t>(lens[static_cast<std::size_t>(r)]));
    recv_bytes(v.data(), v.size(), r, kGatherTag, comm);
  }
  return out;
}

std::vector<std::vector<std::uint8_t>> gather_slots(MPI_Comm comm, const std::vector<std::uint8_t>& mine,
                                                    std::uint64_t slot, int root) {
  int rank = 0, size = 1;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  constexpr std::uint64_t kLen = sizeof(std::uint64_t);
  if (slot < kLen || slot > static_cast<std::uint64_t>(INT_MAX) / static_cast<std::uint64_t>(size))
    return gatherv_bytes(comm, mine, root);
  const std::uint64_t my_len = mine.size();
  const bool fits = my_len <= slot - kLen;
  std::vector<std::uint8_t> out_slot(static_cast<std::size_t>(slot), 0);
  std::memcpy(out_slot.data(), &my_len, kLen);
  if (fits && my_len > 0) std::memcpy(out_slot.data() + kLen, mine.data(), mine.size());
  std::vector<std::uint8_t> all(rank == root ? static_cast<std::size_t>(slot) * static_cast<std::size_t>(size) : 0);
  const int n = static_cast<int>(slot);
  collective(
      [&] { MPI_Gather(out_slot.data(), n, MPI_BYTE, all.data(), n, MPI_BYTE, root, comm); },
      [&](MPI_Request* req) { MPI_Igather(out_slot.data(), n, MPI_BYTE, all.data(), n, MPI_BYTE, root, comm, req); });
  if (rank != root) {
    if (!fits) send_bytes(mine.data(), my_len, root, kGatherTag, comm);
    return {};
  }
  std::vector<std::vector<std::uint8_t>> out(static_cast<std::size_t>(size));
  for (int r = 0; r < size; ++r) {
    auto& v = out[static_cast<std::size_t>(r)];
    if (r == root) {
      v = mine;
      continue;
    }
    const std::uint8_t* at = all.data() + static_cast<std::size_t>(r) * static_cast<std::size_t>(slot);
    std::uint64_t len = 0;
    std::memcpy(&len, at, kLen);
    if (len <= slot - kLen) {
      v.assign(at + kLen, at + kLen + len);
      continue;
    }
    v.resize(static_cast<std::size_t>(len));
    recv_bytes(v.data(), len, r, kGatherTag, comm);
  }
  return out;
}

std::vector<std::vector<std::uint8_t>> allgatherv_bytes(MPI_Comm comm, const std::vector<std::uint8_t>& mine) {
  int rank = 0, size = 1;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  auto parts = gatherv_bytes(comm, mine, 0);
  // Root packs [u64 length, bytes]* and everybody unpacks.
  std::vector<std::uint8_t> packed;
  if (rank == 0)
    for (auto& p : parts) {
      const std::uint64_t n = p.size();
      const auto* np = reinterpret_cast<const std::uint8_t*>(&n);
      packed.insert(packed.end(), np, np + sizeof n);
      packed.insert(packed.end(), p.begin(), p.end());
    }
  bcast_bytes(comm, packed, 0);
  if (rank == 0) return parts;
  parts.assign(static_cast<std::size_t>(size), {});
  std::size_t at = 0;
  for (auto& p : parts) {
    std::uint64_t n = 0;
    std::memcpy(&n, packed.data() + at, sizeof n);
    at += sizeof n;
    p.assign(packed.begin() + static_cast<std::ptrdiff_t>(at), packed.begin() + static_cast<std::ptrdiff_t>(at + n));
    at += static_cast<std::size_t>(n);
  }
  return parts;
}

void free_comm(MPI_Comm& c) {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (c != MPI_COMM_NULL && finalized == 0) MPI_Comm_free(&c);
  c = MPI_COMM_NULL;
}

std::vector<std::uint8_t> reduce_bytes(MPI_Comm comm, std::vector<std::uint8_t> mine, const MergeBytes& merge) {
  int rank = 0, size = 1;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  for (int mask = 1; mask < size; mask <<= 1) {
    MPI_Request req = MPI_REQUEST_NULL;
    if ((rank & mask) != 0) {  // this rank's run is complete: to the rank below, and done
      const int to = rank - mask;
      std::uint64_t n = mine.size();
      MPI_Isend(&n, 1, MPI_UINT64_T, to, kReduceTag, comm, &req);
      wait_request(req);
      send_bytes(mine.data(), n, to, kReduceTag, comm);
      return {};
    }
    const int from = rank + mask;
    if (from >= size) continue;
    std::uint64_t n = 0;
    MPI_Irecv(&n, 1, MPI_UINT64_T, from, kReduceTag, comm, &req);
    wait_request(req);
    std::vector<std::uint8_t> theirs(n);
    recv_bytes(theirs.data(), n, from, kReduceTag, comm);
    mine = merge(std::move(mine), theirs);
  }
  return mine;
}

}  // namespace ckpt::detail
