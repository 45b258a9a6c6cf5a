// POSIX file-per-process (1PFPP): every rank writes its own file data.<rank> with pwrite.
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "base/format.hpp"
#include "base/posix_io.hpp"
#include "transports/open_token.hpp"
#include "transports/transport.hpp"

namespace ckpt::detail {
namespace {

class PosixWriter final : public Writer {
 public:
  PosixWriter(const WriteContext& ctx, std::uint64_t data_offset) : m_ctx(ctx), m_data_offset(data_offset) {
    m_name = ctx.file_name("data", ctx.rank);
    m_path = ctx.dir + "/" + m_name;
  }
  ~PosixWriter() override {
    if (m_fd >= 0) ::close(m_fd);
  }

  Status open() {
    m_fd = ::open(m_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0666);
    if (m_fd < 0) return errno_status("create " + m_path);
    auto bytes = encode_header_for(m_ctx, m_ctx.rank, m_data_offset);
    return pwrite_all(m_fd, bytes.data(), bytes.size(), 0, m_path);
  }

  Status write(std::uint64_t offset, const void* data, std::size_t n) override {
    CKPT_RETURN_IF_ERROR(pwrite_all(m_fd, data, n, m_data_offset + offset, m_path));
    m_end = std::max<std::uint64_t>(m_end, m_data_offset + offset + n);
    return Status::OK();
  }

  Result<Placement> finish(const std::vector<BlockDigest>&) override {
    if (m_ctx.fsync && ::fdatasync(m_fd) != 0) return errno_status("fdatasync " + m_path);
    if (::close(m_fd) != 0) {
      m_fd = -1;
      return errno_status("close " + m_path);
    }
    m_fd = -1;
    return Placement{m_name, m_ctx.rank, m_data_offset, std::max<std::uint64_t>(m_end, m_data_offset)};
  }

  void abort() override {
    if (m_fd >= 0) ::close(m_fd);
    m_fd = -1;
    ::unlink(m_path.c_str());
  }

 private:
  WriteContext m_ctx;
  std::uint64_t m_data_offset;
  std::string m_name, m_path;
  int m_fd = -1;
  std::uint64_t m_end = 0;
};

class PosixTransport final : public Transport {
 public:
  PosixTransport(std::uint64_t alignment, int open_token, MPI_Comm comm)
      : m_alignment(alignment), m_token(open_token), m_comm(comm) {}
  ~PosixTransport() override {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (m_comm != MPI_COMM_NULL && !finalized) MPI_Comm_free(&m_comm);
  }
  const char* name() const override { return "posix"; }
  bool collective_open() const override { return m_token > 0; }  // the open token is passed round robin
  Result<std::unique_ptr<Writer>> open(const WriteContext& ctx) override {
    auto w = std::make_unique<PosixWriter>(ctx, std::max<std::uint64_t>(m_alignment, kDataHeaderBytes));
    Status s = m_token > 0 ? with_open_token(m_comm, m_token, [&] { return w->open(); }) : w->open();
    CKPT_RETURN_IF_ERROR(s);
    return std::unique_ptr<Writer>(std::move(w));
  }

 private:
  std::uint64_t m_alignment;
  int m_token;
  MPI_Comm m_comm;  // the write thread only (the token; opens run there)
};

}  // namespace

Result<std::unique_ptr<Transport>> make_posix_transport(const TransportConfig& c, const TransportEnv& env) {
  MPI_Comm comm = MPI_COMM_NULL;
  if (c.open_token > 0) MPI_Comm_dup(env.comm, &comm);
  return std::unique_ptr<Transport>(std::make_unique<PosixTransport>(c.alignment, c.open_token, comm));
}

}  // namespace ckpt::detail
