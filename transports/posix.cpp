// POSIX file-per-process (1PFPP): every rank writes its own file data.<rank> with pwrite.
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "base/format.hpp"
#include "base/posix_io.hpp"
#include "transports/open_token.hpp"
#include "transports/transport.hpp"

namespace ckpt::detail {
namespace {

/// A rank's data file open for writing: `fd` through the page cache and, with direct_io, `dfd` on the
/// same file with O_DIRECT (-1 when off or refused). Used by the thread that opens and writes.
struct DataFile {
  std::string path;
  int fd = -1;
  int dfd = -1;
  ~DataFile() { close(); }
  /// Creates (truncating) `path` and, when `direct`, its O_DIRECT descriptor.
  Status create(bool direct) {
    fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0666);
    if (fd < 0) return errno_status("create " + path);
    dfd = direct ? open_direct(path) : -1;
    return Status::OK();
  }
  /// Checkpoint data at `off`: O_DIRECT where it can, the rest through the page cache (pwrite_direct).
  Status write(std::uint64_t off, const void* data, std::size_t n, bool writeback) const {
    return pwrite_direct(dfd, fd, data, n, off, path, writeback);
  }
  void close() {
    if (dfd >= 0) ::close(dfd);
    if (fd >= 0) ::close(fd);
    fd = dfd = -1;
  }
};

class PosixWriter final : public Writer {
 public:
  PosixWriter(const WriteContext& ctx, std::uint64_t data_offset, bool direct)
      : m_ctx(ctx), m_data_offset(data_offset), m_direct(direct) {
    m_name = ctx.file_name("data", ctx.rank);
    m_file.path = ctx.dir + "/" + m_name;
  }

  Status open() {
    CKPT_RETURN_IF_ERROR(m_file.create(m_direct));
    auto bytes = encode_header_for(m_ctx, m_ctx.rank, m_data_offset);
    return pwrite_all(m_file.fd, bytes.data(), bytes.size(), 0, m_file.path);
  }

  Status write(std::uint64_t offset, const void* data, std::size_t n) override {
    CKPT_RETURN_IF_ERROR(m_file.write(m_data_offset + offset, data, n, m_ctx.writeback));
    m_end = std::max<std::uint64_t>(m_end, m_data_offset + offset + n);
    return Status::OK();
  }

  Result<Placement> finish(const std::vector<BlockDigest>&) override {
    // The file is as long as its stream, also where the end was not written (an empty stream; incremental
    // checkpoints skip the pieces they refer to): the rest is a hole, and the size recorded is the size.
    const std::uint64_t size = m_data_offset + m_ctx.bytes();
    if (m_end < size && ::ftruncate(m_file.fd, static_cast<off_t>(size)) != 0)
      return errno_status("ftruncate " + m_file.path);
    m_end = std::max(m_end, size);
    if (m_ctx.fsync && ::fdatasync(m_file.fd) != 0) return errno_status("fdatasync " + m_file.path);
    if (m_file.dfd >= 0) ::close(m_file.dfd);
    m_file.dfd = -1;
    const int fd = m_file.fd;
    m_file.fd = -1;
    if (::close(fd) != 0) return errno_status("close " + m_file.path);
    return Placement{m_name, m_ctx.rank, m_data_offset, std::max<std::uint64_t>(m_end, m_data_offset)};
  }

  void abort() override {
    m_file.close();
    ::unlink(m_file.path.c_str());
  }

 private:
  WriteContext m_ctx;
  std::uint64_t m_data_offset;
  bool m_direct;
  std::string m_name;
  DataFile m_file;
  std::uint64_t m_end = 0;
};

/// layout series: this rank's data file of the current segment, open from one checkpoint to the next.
/// Owned by the transport, used by the thread that opens and writes (the write thread).
struct SeriesFile : DataFile {
  std::uint64_t end = 0;  ///< end of the last finished checkpoint's stream (the next one starts aligned after it)
};

/// Appends one checkpoint's stream to the segment file at `base`; finish() keeps the file open.
class AppendWriter final : public Writer {
 public:
  AppendWriter(const WriteContext& ctx, SeriesFile& file, std::string name, std::uint64_t base)
      : m_ctx(ctx), m_file(file), m_name(std::move(name)), m_base(base), m_end(base) {}

  Status write(std::uint64_t offset, const void* data, std::size_t n) override {
    CKPT_RETURN_IF_ERROR(m_file.write(m_base + offset, data, n, m_ctx.writeback));
    m_end = std::max<std::uint64_t>(m_end, m_base + offset + n);
    return Status::OK();
  }

  Result<Placement> finish(const std::vector<BlockDigest>&) override {
    if (m_ctx.fsync && ::fdatasync(m_file.fd) != 0) return errno_status("fdatasync " + m_file.path);
    m_file.end = std::max(m_end, m_base + m_ctx.bytes());
    Placement p{m_name, m_ctx.rank, m_base, m_file.end};
    p.appended_at = m_base;
    p.attrs.emplace_back("layout", "series");
    return p;
  }

  // The next checkpoint goes where this one did (m_file.end is unchanged). What this one wrote is cut
  // off: the file ends where its last finished stream ends, so that no bytes of an aborted stream stay
  // behind a shorter next one, where format.md promises zeros (`ckpt verify` checks them).
  void abort() override {
    if (m_end > m_file.end && m_file.fd >= 0 && ::ftruncate(m_file.fd, static_cast<off_t>(m_file.end)) != 0)
      std::fprintf(stderr, "ckpt: cannot cut an aborted checkpoint's bytes off %s: %s\n", m_file.path.c_str(),
                   std::strerror(errno));
  }

 private:
  WriteContext m_ctx;
  SeriesFile& m_file;
  std::string m_name;
  std::uint64_t m_base, m_end;
};

class PosixTransport final : public Transport {
 public:
  PosixTransport(std::uint64_t alignment, int open_token, MPI_Comm comm, bool append, bool direct)
      : m_alignment(alignment), m_token(open_token), m_comm(comm), m_append(append), m_direct(direct) {}
  ~PosixTransport() override {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (m_comm != MPI_COMM_NULL && !finalized) MPI_Comm_free(&m_comm);
  }
  const char* name() const override { return "posix"; }
  bool collective_open() const override { return m_token > 0; }  // the open token is passed round robin
  int index_writer() const override { return kOwnFiles; }
  Result<std::unique_ptr<Writer>> open(const WriteContext& ctx) override {
    const std::uint64_t data_offset = std::max<std::uint64_t>(m_alignment, kDataHeaderBytes);
    if (m_append) {
      Status s = m_token > 0 ? with_open_token(m_comm, m_token, [&] { return open_series(ctx, data_offset); })
                             : open_series(ctx, data_offset);
      CKPT_RETURN_IF_ERROR(s);
      const std::uint64_t base = (m_series.end + m_alignment - 1) / m_alignment * m_alignment;
      return std::unique_ptr<Writer>(
          std::make_unique<AppendWriter>(ctx, m_series, ctx.file_name("data", ctx.rank), base));
    }
    auto w = std::make_unique<PosixWriter>(ctx, data_offset, m_direct);
    Status s = m_token > 0 ? with_open_token(m_comm, m_token, [&] { return w->open(); }) : w->open();
    CKPT_RETURN_IF_ERROR(s);
    return std::unique_ptr<Writer>(std::move(w));
  }

 private:
  /// Opens this rank's file of the segment ctx.dir the first time a checkpoint goes there (a new
  /// segment: the previous one's file is closed), with its data header (the segment's first step).
  Status open_series(const WriteContext& ctx, std::uint64_t data_offset) {
    const std::string path = ctx.dir + "/" + ctx.file_name("data", ctx.rank);
    if (path == m_series.path && m_series.fd >= 0) return Status::OK();
    m_series.close();
    // A segment is new to this run (SeriesCursor starts above every segment in the root): truncate.
    m_series.path = path;
    Status s = m_series.create(m_direct);
    if (s.ok()) {
      auto head = encode_header_for(ctx, ctx.rank, data_offset);
      s = pwrite_all(m_series.fd, head.data(), head.size(), 0, path);
    }
    // The file's name in the segment must survive a crash before any commit that names it does.
    if (s.ok()) s = fsync_dir(ctx.dir, ctx.fsync);
    if (!s.ok()) {
      m_series.close();
      m_series.path.clear();
      return s;
    }
    m_series.end = data_offset;
    return Status::OK();
  }

  std::uint64_t m_alignment;
  int m_token;
  MPI_Comm m_comm;  // the write thread only (the token; opens run there)
  bool m_append;
  bool m_direct;        ///< direct_io: the data goes from the staging chunks to the device (O_DIRECT)
  SeriesFile m_series;  // layout series
};

}  // namespace

Result<std::unique_ptr<Transport>> make_posix_transport(const TransportConfig& c, const TransportEnv& env) {
  MPI_Comm comm = MPI_COMM_NULL;
  if (c.open_token > 0) MPI_Comm_dup(env.comm, &comm);
  return std::unique_ptr<Transport>(
      std::make_unique<PosixTransport>(c.alignment, c.open_token, comm, c.append, c.direct_io));
}

}  // namespace ckpt::detail
