// XOR parity over the nodes of a group, and the rebuild of a lost member from it. See xor.hpp.
#include "runtime/src/levels/xor.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <utility>

#include "base/bytes.hpp"
#include "base/hash.hpp"
#include "base/posix_io.hpp"

namespace ckpt::detail {
namespace {

constexpr int kTag = 0x20;                            // one encode or rebuild at a time per communicator
constexpr std::uint64_t kPiece = 4ull << 20;          // bytes of one segment per message
constexpr std::uint64_t kMagic = 0x31524f5854504b43;  // "CKPTXOR1"

/// One member's files, as the parity header records them.
struct Member {
  std::int32_t rank = -1;
  std::vector<std::pair<std::string, std::uint64_t>> files;
  std::uint64_t total() const {
    std::uint64_t t = 0;
    for (auto& f : files) t += f.second;
    return t;
  }
};

void put_member(ByteWriter& w, const Member& m) {
  w.put<std::int32_t>(m.rank);
  w.put<std::uint32_t>(static_cast<std::uint32_t>(m.files.size()));
  for (auto& f : m.files) {
    w.str(f.first);
    w.put<std::uint64_t>(f.second);
  }
}

bool get_member(ByteReader& r, Member& m) {
  std::uint32_t n = 0;
  if (!r.get(m.rank) || !r.get(n) || n > 4096) return false;
  for (std::uint32_t i = 0; i < n; ++i) {
    std::pair<std::string, std::uint64_t> f;
    if (!r.str(f.first, 4096) || !r.get(f.second)) return false;
    m.files.push_back(std::move(f));
  }
  return true;
}

/// The parity file's header: every member's files and the segment size.
struct Header {
  std::vector<Member> members;
  std::uint64_t segment = 0;
  std::vector<std::uint8_t> encode() const {
    ByteWriter w;
    w.put<std::uint64_t>(kMagic);
    w.put<std::uint32_t>(static_cast<std::uint32_t>(members.size()));
    w.put<std::uint64_t>(segment);
    for (auto& m : members) put_member(w, m);
    return std::move(w.bytes());
  }
  bool decode(const std::vector<std::uint8_t>& b) {
    ByteReader r(b.data(), b.size());
    std::uint64_t magic = 0;
    std::uint32_t n = 0;
    if (!r.get(magic) || magic != kMagic || !r.get(n) || n < 2 || n > (1u << 16) || !r.get(segment)) return false;
    members.resize(n);
    for (auto& m : members)
      if (!get_member(r, m)) return false;
    for (auto& m : members)
      for (auto& f : m.files)
        if (!plain_name(f.first)) return false;
    return r.left() == 0;
  }
  /// Where the parity starts in the file: u64 length, header, u64 XXH3 of the header.
  static std::uint64_t parity_offset(std::size_t header_bytes) { return 8 + header_bytes + 8; }
};

/// The files of one member read (or written) as one zero-padded byte range.
class Concat {
 public:
  ~Concat() {
    for (auto& f : m_files)
      if (f.fd >= 0) ::close(f.fd);
  }
  /// Opens `dir`/name of each file for reading; the sizes found are recorded.
  Status open_read(const std::string& dir, const std::vector<std::string>& names) {
    Status first;
    for (auto& n : names) {
      std::uint64_t size = 0;
      auto fd = open_regular(dir + "/" + n, &size);
      if (!fd.ok() && first.ok()) first = fd.status();
      m_files.push_back({dir + "/" + n, fd.ok() ? fd.value() : -1, fd.ok() ? size : 0});
    }
    return first;
  }
  /// Opens `dir`/name of each file for writing (created, truncated), with the sizes they will have.
  Status open_write(const std::string& dir, const std::vector<std::pair<std::string, std::uint64_t>>& files) {
    Status first;
    for (auto& f : files) {
      const std::string path = dir + "/" + f.first;
      const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0666);
      if (fd < 0 && first.ok()) first = errno_status("create " + path);
      m_files.push_back({path, fd, f.second});
    }
    return first;
  }
  std::uint64_t total() const {
    std::uint64_t t = 0;
    for (auto& f : m_files) t += f.size;
    return t;
  }
  std::vector<std::pair<std::string, std::uint64_t>> listing(const std::vector<std::string>& names) const {
    std::vector<std::pair<std::string, std::uint64_t>> out;
    for (std::size_t i = 0; i < m_files.size(); ++i) out.emplace_back(names[i], m_files[i].size);
    return out;
  }
  /// Bytes [off, off + n) of the concatenation into `p`; zeros past the end or of a file not opened.
  Status read(std::uint64_t off, std::uint8_t* p, std::size_t n) const {
    std::fill(p, p + n, std::uint8_t{0});
    return each(off, n, [&](const File& f, std::uint64_t at, std::size_t pos, std::size_t len) {
      return f.fd < 0 ? Status::OK() : pread_all(f.fd, p + pos, len, at, f.path);
    });
  }
  /// Bytes [off, off + n) of the concatenation from `p`; what lies past the end is dropped.
  Status write(std::uint64_t off, const std::uint8_t* p, std::size_t n) const {
    return each(off, n, [&](const File& f, std::uint64_t at, std::size_t pos, std::size_t len) {
      return f.fd < 0 ? Status::OK() : pwrite_all(f.fd, p + pos, len, at, f.path);
    });
  }
  /// fdatasync (when `sync`) and close of every file.
  Status close_all(bool sync) {
    Status first;
    for (auto& f : m_files) {
      if (f.fd < 0) continue;
      if (sync && ::fdatasync(f.fd) != 0 && first.ok()) first = errno_status("fdatasync " + f.path);
      if (::close(f.fd) != 0 && first.ok()) first = errno_status("close " + f.path);
      f.fd = -1;
    }
    return first;
  }

 private:
  struct File {
    std::string path;
    int fd = -1;
    std::uint64_t size = 0;
  };
  template <typename Fn>
  Status each(std::uint64_t off, std::size_t n, Fn fn) const {
    std::uint64_t base = 0;
    for (auto& f : m_files) {
      const std::uint64_t lo = std::max(off, base), hi = std::min(off + n, base + f.size);
      if (lo < hi)
        CKPT_RETURN_IF_ERROR(fn(f, lo - base, static_cast<std::size_t>(lo - off), static_cast<std::size_t>(hi - lo)));
      base += f.size;
    }
    return Status::OK();
  }
  std::vector<File> m_files;
};

/// Sends `mine` to every other member and returns what each sent ([me] = mine).
std::vector<std::vector<std::uint8_t>> exchange_with_all(MPI_Comm comm, const XorGroup& g,
                                                         const std::vector<std::uint8_t>& mine) {
  const std::size_t n = g.ranks.size();
  std::vector<std::uint64_t> sizes(n, 0);
  std::uint64_t my_size = mine.size();
  std::vector<MPI_Request> reqs;
  for (std::size_t m = 0; m < n; ++m) {
    if (static_cast<int>(m) == g.me) continue;
    reqs.emplace_back();
    MPI_Irecv(&sizes[m], 1, MPI_UINT64_T, g.ranks[m], kTag, comm, &reqs.back());
    reqs.emplace_back();
    MPI_Isend(&my_size, 1, MPI_UINT64_T, g.ranks[m], kTag, comm, &reqs.back());
  }
  MPI_Waitall(static_cast<int>(reqs.size()), reqs.data(), MPI_STATUSES_IGNORE);
  reqs.clear();
  std::vector<std::vector<std::uint8_t>> out(n);
  out[static_cast<std::size_t>(g.me)] = mine;
  for (std::size_t m = 0; m < n; ++m) {
    if (static_cast<int>(m) == g.me) continue;
    out[m].resize(sizes[m]);
    reqs.emplace_back();
    MPI_Irecv(out[m].data(), static_cast<int>(sizes[m]), MPI_BYTE, g.ranks[m], kTag, comm, &reqs.back());
    reqs.emplace_back();
    MPI_Isend(mine.data(), static_cast<int>(mine.size()), MPI_BYTE, g.ranks[m], kTag, comm, &reqs.back());
  }
  MPI_Waitall(static_cast<int>(reqs.size()), reqs.data(), MPI_STATUSES_IGNORE);
  return out;
}

void xor_into(std::uint8_t* acc, const std::uint8_t* p, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) acc[i] ^= p[i];
}

/// The segment of member m that goes into member j's parity (m != j), of G members.
std::uint64_t segment_for(int m, int j, int G) { return static_cast<std::uint64_t>(((j - m - 1) % G + G) % G); }

/// Writes the parity file's frame around parity already written at Header::parity_offset(): the
/// header's length, the header, its XXH3, and after the parity the parity's XXH3.
Status write_frame(int fd, const std::string& path, const std::vector<std::uint8_t>& header, std::uint64_t segment,
                   std::uint64_t parity_hash) {
  const std::uint64_t len = header.size(), hh = hash64(header.data(), header.size());
  CKPT_RETURN_IF_ERROR(pwrite_all(fd, &len, 8, 0, path));
  CKPT_RETURN_IF_ERROR(pwrite_all(fd, header.data(), header.size(), 8, path));
  CKPT_RETURN_IF_ERROR(pwrite_all(fd, &hh, 8, 8 + header.size(), path));
  return pwrite_all(fd, &parity_hash, 8, Header::parity_offset(header.size()) + segment, path);
}

std::string parity_name(int rank) { return "xor." + std::to_string(rank); }

}  // namespace

int xor_group_of(int nodes, int group_nodes, int k) {
  const int groups = std::max(1, nodes / std::max(2, group_nodes));
  return std::min(k / std::max(2, group_nodes), groups - 1);
}

XorGroup make_xor_group(const NodeLayout& layout, int group_nodes) {
  XorGroup g;
  const int mine = xor_group_of(layout.nodes(), group_nodes, layout.node);
  for (int k = 0; k < layout.nodes(); ++k) {
    if (xor_group_of(layout.nodes(), group_nodes, k) != mine) continue;
    if (k == layout.node) g.me = static_cast<int>(g.ranks.size());
    g.nodes.push_back(k);
    g.ranks.push_back(layout.peer(k));
  }
  return g;
}

Status xor_encode(MPI_Comm comm, const XorGroup& g, const std::string& dir, const std::vector<std::string>& names,
                  bool sync, std::uint64_t* bytes_sent) {
  Status first;
  auto note = [&](const Status& s) {
    if (!s.ok() && first.ok()) first = s;
  };
  const int G = static_cast<int>(g.ranks.size());
  Concat mine;
  note(mine.open_read(dir, names));
  // Every member learns every member's files (for the header) and so the longest member.
  Member me;
  me.rank = g.ranks[static_cast<std::size_t>(g.me)];
  me.files = mine.listing(names);
  ByteWriter w;
  put_member(w, me);
  const auto all = exchange_with_all(comm, g, w.bytes());
  Header h;
  h.members.resize(static_cast<std::size_t>(G));
  std::uint64_t longest = 0;
  for (int m = 0; m < G; ++m) {
    ByteReader r(all[static_cast<std::size_t>(m)].data(), all[static_cast<std::size_t>(m)].size());
    if (!get_member(r, h.members[static_cast<std::size_t>(m)]))
      note(Status(Code::internal,
                  "xor parity: bad file list from rank " + std::to_string(g.ranks[static_cast<std::size_t>(m)])));
    // Every member computes the same length from the same sizes, whatever it could decode.
    longest = std::max(longest, h.members[static_cast<std::size_t>(m)].total());
  }
  h.segment = (longest + static_cast<std::uint64_t>(G - 2)) / static_cast<std::uint64_t>(G - 1);
  const auto header = h.encode();

  const std::string path = dir + "/" + parity_name(me.rank);
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0666);
  if (fd < 0) note(errno_status("create " + path));
  const std::uint64_t base = Header::parity_offset(header.size());
  Hasher hash;
  std::vector<std::vector<std::uint8_t>> out(static_cast<std::size_t>(G)), in(static_cast<std::size_t>(G));
  std::vector<std::uint8_t> parity;
  std::vector<MPI_Request> reqs;
  std::uint64_t sent = 0;
  for (std::uint64_t off = 0; off < h.segment; off += kPiece) {
    const std::size_t n = static_cast<std::size_t>(std::min(kPiece, h.segment - off));
    reqs.clear();
    for (int m = 0; m < G; ++m) {
      if (m == g.me) continue;
      auto& o = out[static_cast<std::size_t>(m)];
      o.resize(n);
      note(mine.read(segment_for(g.me, m, G) * h.segment + off, o.data(), n));
      in[static_cast<std::size_t>(m)].resize(n);
      reqs.emplace_back();
      MPI_Irecv(in[static_cast<std::size_t>(m)].data(), static_cast<int>(n), MPI_BYTE,
                g.ranks[static_cast<std::size_t>(m)], kTag, comm, &reqs.back());
      reqs.emplace_back();
      MPI_Isend(o.data(), static_cast<int>(n), MPI_BYTE, g.ranks[static_cast<std::size_t>(m)], kTag, comm,
                &reqs.back());
      sent += n;
    }
    MPI_Waitall(static_cast<int>(reqs.size()), reqs.data(), MPI_STATUSES_IGNORE);
    parity.assign(n, 0);
    for (int m = 0; m < G; ++m)
      if (m != g.me) xor_into(parity.data(), in[static_cast<std::size_t>(m)].data(), n);
    hash.update(parity.data(), n);
    if (fd >= 0 && first.ok()) note(pwrite_all(fd, parity.data(), n, base + off, path));
  }
  if (fd >= 0) {
    if (first.ok()) note(write_frame(fd, path, header, h.segment, hash.digest()));
    if (sync && ::fdatasync(fd) != 0) note(errno_status("fdatasync " + path));
    if (::close(fd) != 0) note(errno_status("close " + path));
  }
  if (bytes_sent) *bytes_sent = sent;
  return first.with_context("xor parity");
}

Status xor_rebuild(MPI_Comm comm, const XorGroup& g, int lost, const std::string& have_dir, const std::string& out_dir,
                   bool sync) {
  Status first;
  auto note = [&](const Status& s) {
    if (!s.ok() && first.ok()) first = s;
  };
  const int G = static_cast<int>(g.ranks.size());
  const bool is_lost = g.me == lost;
  // The header comes from the first survivor, to every other member: all use the same segment size.
  const int src = lost == 0 ? 1 : 0;
  std::vector<std::uint8_t> header;
  int fd = -1;
  std::string path;
  if (!is_lost) {
    path = have_dir + "/" + parity_name(g.ranks[static_cast<std::size_t>(g.me)]);
    std::uint64_t size = 0;
    auto f = open_regular(path, &size);
    if (f.ok()) {
      fd = f.value();
      std::uint64_t len = 0, hh = 0;
      Status s = pread_all(fd, &len, 8, 0, path);
      if (s.ok() && (len > (64u << 20) || 16 + len > size))
        s = Status(Code::corrupt, "xor parity " + path + ": bad header length");
      if (s.ok()) {
        header.resize(len);
        s = pread_all(fd, header.data(), len, 8, path);
        if (s.ok()) s = pread_all(fd, &hh, 8, 8 + len, path);
        if (s.ok() && hh != hash64(header.data(), header.size()))
          s = Status(Code::corrupt, "xor parity " + path + ": header checksum mismatch");
      }
      note(s);
    } else {
      note(f.status());
    }
    if (!first.ok()) header.clear();
  }
  if (g.me == src) {
    for (int m = 0; m < G; ++m) {
      if (m == src) continue;
      std::uint64_t n = header.size();
      MPI_Send(&n, 1, MPI_UINT64_T, g.ranks[static_cast<std::size_t>(m)], kTag, comm);
      MPI_Send(header.data(), static_cast<int>(n), MPI_BYTE, g.ranks[static_cast<std::size_t>(m)], kTag, comm);
    }
  } else {
    std::uint64_t n = 0;
    MPI_Recv(&n, 1, MPI_UINT64_T, g.ranks[static_cast<std::size_t>(src)], kTag, comm, MPI_STATUS_IGNORE);
    std::vector<std::uint8_t> theirs(n);
    MPI_Recv(theirs.data(), static_cast<int>(n), MPI_BYTE, g.ranks[static_cast<std::size_t>(src)], kTag, comm,
             MPI_STATUS_IGNORE);
    if (!is_lost && theirs != header && first.ok())
      note(Status(Code::corrupt, "xor parity " + path + ": header differs from rank " +
                                     std::to_string(g.ranks[static_cast<std::size_t>(src)]) + "'s"));
    header = std::move(theirs);
  }
  Header h;
  if (header.empty() || !h.decode(header) || static_cast<int>(h.members.size()) != G) {
    // Nobody sends anything more: every member sees the same header.
    if (fd >= 0) ::close(fd);
    return (first.ok()
                ? Status(Code::corrupt, "xor parity of rank " + std::to_string(g.ranks[static_cast<std::size_t>(src)]) +
                                            ": unusable header")
                : first)
        .with_context("xor rebuild");
  }
  const Member& lost_member = h.members[static_cast<std::size_t>(lost)];
  const std::uint64_t base = Header::parity_offset(header.size());
  Concat files;
  std::vector<std::string> my_names;
  if (!is_lost) {
    for (auto& f : h.members[static_cast<std::size_t>(g.me)].files) my_names.push_back(f.first);
    note(files.open_read(have_dir, my_names));
    if (files.listing(my_names) != h.members[static_cast<std::size_t>(g.me)].files)
      note(Status(Code::corrupt, "xor rebuild: the files in " + have_dir + " are not those the parity covers"));
  } else {
    if (lost_member.rank != g.ranks[static_cast<std::size_t>(g.me)])
      note(Status(Code::corrupt, "xor rebuild: the parity header names rank " + std::to_string(lost_member.rank) +
                                     " at this rank's place"));
    note(make_dirs_nofollow(out_dir));
    if (first.ok()) note(files.open_write(out_dir, lost_member.files));
    path = out_dir + "/" + parity_name(g.ranks[static_cast<std::size_t>(g.me)]);
    if (first.ok()) {
      fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0666);
      if (fd < 0) note(errno_status("create " + path));
    }
  }
  // Per piece, each survivor sends G parts: for s < G-1 what went into the parity that holds the lost
  // member's segment s (that parity itself when the survivor holds it), then its segment of the lost
  // member's own parity.
  const std::uint64_t S = h.segment;
  Hasher mine_hash, rebuilt_hash;
  std::vector<std::uint8_t> buf, acc;
  std::vector<std::vector<std::uint8_t>> in(static_cast<std::size_t>(G));
  for (std::uint64_t off = 0; off < S; off += kPiece) {
    const std::size_t n = static_cast<std::size_t>(std::min(kPiece, S - off));
    const std::size_t whole = n * static_cast<std::size_t>(G);
    if (!is_lost) {
      buf.assign(whole, 0);
      for (int s = 0; s < G; ++s) {
        std::uint8_t* p = buf.data() + static_cast<std::size_t>(s) * n;
        const int j = s < G - 1 ? (lost + s + 1) % G : lost;
        if (j == g.me) {
          if (fd >= 0) note(pread_all(fd, p, n, base + off, path));
          mine_hash.update(p, n);
        } else {
          note(files.read(segment_for(g.me, j, G) * S + off, p, n));
        }
      }
      MPI_Send(buf.data(), static_cast<int>(whole), MPI_BYTE, g.ranks[static_cast<std::size_t>(lost)], kTag, comm);
    } else {
      std::vector<MPI_Request> reqs;
      for (int m = 0; m < G; ++m) {
        if (m == lost) continue;
        in[static_cast<std::size_t>(m)].resize(whole);
        reqs.emplace_back();
        MPI_Irecv(in[static_cast<std::size_t>(m)].data(), static_cast<int>(whole), MPI_BYTE,
                  g.ranks[static_cast<std::size_t>(m)], kTag, comm, &reqs.back());
      }
      MPI_Waitall(static_cast<int>(reqs.size()), reqs.data(), MPI_STATUSES_IGNORE);
      acc.assign(whole, 0);
      for (int m = 0; m < G; ++m)
        if (m != lost) xor_into(acc.data(), in[static_cast<std::size_t>(m)].data(), whole);
      for (int s = 0; s < G - 1 && first.ok(); ++s)
        note(files.write(static_cast<std::uint64_t>(s) * S + off, acc.data() + static_cast<std::size_t>(s) * n, n));
      const std::uint8_t* parity = acc.data() + static_cast<std::size_t>(G - 1) * n;
      rebuilt_hash.update(parity, n);
      if (fd >= 0 && first.ok()) note(pwrite_all(fd, parity, n, base + off, path));
    }
  }
  if (!is_lost) {
    if (fd >= 0) {
      std::uint64_t stored = 0;
      Status s = pread_all(fd, &stored, 8, base + S, path);
      if (s.ok() && stored != mine_hash.digest())
        s = Status(Code::corrupt, "xor parity " + path + ": parity checksum mismatch");
      note(s);
      ::close(fd);
    }
  } else {
    note(files.close_all(sync));
    if (fd >= 0) {
      if (first.ok()) note(write_frame(fd, path, header, S, rebuilt_hash.digest()));
      if (sync && ::fdatasync(fd) != 0) note(errno_status("fdatasync " + path));
      if (::close(fd) != 0) note(errno_status("close " + path));
    }
    if (first.ok()) note(fsync_dir(out_dir, sync));
  }
  return first.with_context("xor rebuild");
}

}  // namespace ckpt::detail
