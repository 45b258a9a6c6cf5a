// Whole-file transfer between two ranks for partner redundancy. See partner.hpp.
#include "runtime/src/levels/partner.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>

#include "base/bytes.hpp"
#include "base/mpi.hpp"
#include "base/posix_io.hpp"

namespace ckpt::detail {
namespace {

constexpr int kTag = 0x19;                    // one exchange at a time per communicator
constexpr std::uint64_t kPiece = 8ull << 20;  // bytes per message

/// Sends `mine` to `to` and returns what `from` sent (empty for MPI_PROC_NULL).
std::vector<std::uint8_t> sendrecv_bytes(MPI_Comm comm, int to, std::vector<std::uint8_t> mine, int from) {
  std::uint64_t n = mine.size(), m = 0;
  MPI_Sendrecv(&n, 1, MPI_UINT64_T, to, kTag, &m, 1, MPI_UINT64_T, from, kTag, comm, MPI_STATUS_IGNORE);
  std::vector<std::uint8_t> theirs(from == MPI_PROC_NULL ? 0 : m);
  MPI_Sendrecv(mine.data(), static_cast<int>(to == MPI_PROC_NULL ? 0 : n), MPI_BYTE, to, kTag, theirs.data(),
               static_cast<int>(theirs.size()), MPI_BYTE, from, kTag, comm, MPI_STATUS_IGNORE);
  return theirs;
}

}  // namespace

bool plain_name(const std::string& n) {
  return !n.empty() && n != "." && n != ".." && n.find('/') == std::string::npos && n.size() < 256;
}

bool NodeLayout::uniform() const {
  for (auto& r : ranks)
    if (r.size() != ranks.front().size()) return false;
  return true;
}

NodeLayout make_node_layout(MPI_Comm comm, int ranks_per_node) {
  int rank = 0, size = 1;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  int first = 0;  // the lowest rank of this rank's node: the node's name
  if (ranks_per_node > 0) {
    first = rank - rank % ranks_per_node;
  } else {
    MPI_Comm node = MPI_COMM_NULL;
    MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node);
    first = rank;
    MPI_Allreduce(MPI_IN_PLACE, &first, 1, MPI_INT, MPI_MIN, node);
    MPI_Comm_free(&node);
  }
  std::vector<int> firsts(static_cast<std::size_t>(size));
  MPI_Allgather(&first, 1, MPI_INT, firsts.data(), 1, MPI_INT, comm);
  NodeLayout l;
  std::vector<int> node_of_first(static_cast<std::size_t>(size), -1);
  for (int r = 0; r < size; ++r) {
    const int f = firsts[static_cast<std::size_t>(r)];
    if (node_of_first[static_cast<std::size_t>(f)] < 0) {
      node_of_first[static_cast<std::size_t>(f)] = l.nodes();
      l.ranks.emplace_back();
    }
    auto& members = l.ranks[static_cast<std::size_t>(node_of_first[static_cast<std::size_t>(f)])];
    if (r == rank) {
      l.node = node_of_first[static_cast<std::size_t>(f)];
      l.local_index = static_cast<int>(members.size());
    }
    members.push_back(r);
  }
  return l;
}

Status exchange_files(MPI_Comm comm, int to, const std::string& src_dir, const std::vector<std::string>& names,
                      int from, const std::string& dst_dir, bool sync, std::uint64_t* bytes_sent) {
  Status first;
  auto note = [&](const Status& s) {
    if (!s.ok() && first.ok()) first = s;
  };
  // Headers: the names and sizes of the files each side sends.
  std::vector<int> in_fds;
  std::vector<std::uint64_t> out_size;
  if (to != MPI_PROC_NULL)
    for (auto& n : names) {
      std::uint64_t size = 0;
      auto fd = open_regular(src_dir + "/" + n, &size);
      if (!fd.ok()) note(fd.status());
      in_fds.push_back(fd.ok() ? fd.value() : -1);
      out_size.push_back(fd.ok() ? size : 0);
    }
  ByteWriter header;
  header.put<std::uint32_t>(static_cast<std::uint32_t>(out_size.size()));
  for (std::size_t i = 0; i < out_size.size(); ++i) {
    header.str(names[i]);
    header.put<std::uint64_t>(out_size[i]);
  }
  const auto theirs = sendrecv_bytes(comm, to, std::move(header.bytes()), from);
  std::vector<std::string> in_names;
  std::vector<std::uint64_t> in_size;
  if (from != MPI_PROC_NULL) {
    ByteReader r(theirs.data(), theirs.size());
    std::uint32_t count = 0;
    r.get(count);
    for (std::uint32_t i = 0; i < count && r.error().empty(); ++i) {
      std::string n;
      std::uint64_t size = 0;
      r.str(n);
      r.get(size);
      in_names.push_back(n);
      in_size.push_back(size);
    }
    if (!r.error().empty())
      return Status(Code::internal, "partner copy: bad header from rank " + std::to_string(from) + ": " + r.error());
  }
  std::vector<int> out_fds;
  if (!in_names.empty()) note(make_dirs_nofollow(dst_dir));
  for (auto& n : in_names) {
    int fd = -1;
    if (!plain_name(n)) {
      note(Status(Code::internal, "partner copy: bad file name '" + n + "' from rank " + std::to_string(from)));
    } else if (first.ok()) {
      const std::string path = dst_dir + "/" + n;
      fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0666);
      if (fd < 0) note(errno_status("create " + path));
    }
    out_fds.push_back(fd);
  }
  // Payload: file i of each side, piece by piece, until both sides' files are done.
  std::vector<std::uint8_t> send_buf, recv_buf;
  const std::size_t files = std::max(out_size.size(), in_size.size());
  std::uint64_t sent = 0;
  for (std::size_t i = 0; i < files; ++i) {
    const std::uint64_t out_n = i < out_size.size() ? out_size[i] : 0, in_n = i < in_size.size() ? in_size[i] : 0;
    for (std::uint64_t off = 0; off < std::max(out_n, in_n); off += kPiece) {
      const std::size_t s = static_cast<std::size_t>(off < out_n ? std::min(kPiece, out_n - off) : 0);
      const std::size_t r = static_cast<std::size_t>(off < in_n ? std::min(kPiece, in_n - off) : 0);
      send_buf.assign(s, 0);
      if (s > 0 && in_fds[i] >= 0) note(pread_all(in_fds[i], send_buf.data(), s, off, src_dir + "/" + names[i]));
      recv_buf.resize(r);
      MPI_Sendrecv(send_buf.data(), static_cast<int>(s), MPI_BYTE, s > 0 ? to : MPI_PROC_NULL, kTag, recv_buf.data(),
                   static_cast<int>(r), MPI_BYTE, r > 0 ? from : MPI_PROC_NULL, kTag, comm, MPI_STATUS_IGNORE);
      sent += s;
      if (r > 0 && out_fds[i] >= 0) note(pwrite_all(out_fds[i], recv_buf.data(), r, off, dst_dir + "/" + in_names[i]));
    }
  }
  for (int fd : in_fds)
    if (fd >= 0) ::close(fd);
  for (std::size_t i = 0; i < out_fds.size(); ++i) {
    if (out_fds[i] < 0) continue;
    if (sync && ::fdatasync(out_fds[i]) != 0) note(errno_status("fdatasync " + dst_dir + "/" + in_names[i]));
    if (::close(out_fds[i]) != 0) note(errno_status("close " + dst_dir + "/" + in_names[i]));
  }
  if (!in_names.empty() && first.ok()) note(fsync_dir(dst_dir, sync));
  if (bytes_sent) *bytes_sent = sent;
  return first;
}

}  // namespace ckpt::detail
