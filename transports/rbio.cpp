// rbIO: reduced-blocking I/O. Ranks are split into ng groups, each with one writer rank
// (the group's first rank). Workers hand their staged chunks to their writer with MPI sends from the
// flush thread - the application thread never waits for them - and the writer puts its own stream and
// its workers' streams into one file per writer (nf = ng, POSIX pwrite) or into one shared file
// (nf = 1, MPI_File_write_at by the writers). Default: one writer per node.
//
// Protocol per checkpoint (tag = 100 + sequence number mod 30000, on a communicator of the group used
// only by flush threads): a worker sends its chunks in stream order, then a zero-byte end marker (also
// after an error, so that its writer never waits forever). The writer places message bytes from
// worker w at base[w] + bytes received from w so far, and checks at the end marker that it got all of
// them.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "base/format.hpp"
#include "base/mpi.hpp"
#include "base/posix_io.hpp"
#include "transports/mpi_util.hpp"
#include "transports/transport.hpp"

namespace ckpt::detail {
namespace {

/// Where a writer puts bytes: a POSIX file of its own or an MPI file shared by the writers.
struct Sink {
  int fd = -1;
  MPI_File fh = MPI_FILE_NULL;
  std::string path;
  Status write(std::uint64_t off, const void* p, std::size_t n) {
    if (fd >= 0) return pwrite_all(fd, p, n, off, path);
    auto* c = static_cast<const char*>(p);
    return for_each_piece(n, [&](std::uint64_t done, int part) {
      MPI_Status st;
      return mpi_write_status(MPI_File_write_at(fh, static_cast<MPI_Offset>(off + done), c + done, part, MPI_BYTE, &st),
                              st, part, "MPI_File_write_at " + path);
    });
  }
};

class RbioWorker final : public Writer {
 public:
  RbioWorker(MPI_Comm data, int tag, Placement where) : m_data(data), m_tag(tag), m_where(std::move(where)) {}
  ~RbioWorker() override {
    if (!m_ended) send_end();
  }
  Status write(std::uint64_t, const void* data, std::size_t n) override {
    auto* c = static_cast<const char*>(data);
    return for_each_piece(n, [&](std::uint64_t done, int part) {
      return mpi_status(MPI_Send(c + done, part, MPI_BYTE, 0, m_tag, m_data), "rbio send to writer");
    });
  }
  Result<Placement> finish(const std::vector<BlockDigest>&) override {
    CKPT_RETURN_IF_ERROR(send_end());
    return m_where;  // durable once the writer's report says so (the commit checks every rank)
  }
  void abort() override { (void)send_end(); }

 private:
  Status send_end() {
    if (m_ended) return Status::OK();
    m_ended = true;
    return mpi_status(MPI_Send(nullptr, 0, MPI_BYTE, 0, m_tag, m_data), "rbio end marker");
  }
  MPI_Comm m_data;
  int m_tag;
  Placement m_where;
  bool m_ended = false;
};

class RbioWriter final : public Writer {
 public:
  RbioWriter(MPI_Comm data, int tag, Sink sink, bool fsync, std::vector<std::uint64_t> base,
             std::vector<std::uint64_t> expect, Placement where)
      : m_data(data),
        m_tag(tag),
        m_sink(std::move(sink)),
        m_fsync(fsync),
        m_base(std::move(base)),
        m_expect(std::move(expect)),
        m_where(std::move(where)) {}
  ~RbioWriter() override {
    if (!m_closed) abort();
  }
  Status write(std::uint64_t offset, const void* data, std::size_t n) override {
    return m_sink.write(m_base[0] + offset, data, n);  // the writer's own stream
  }
  Result<Placement> finish(const std::vector<BlockDigest>&) override {
    Status s = receive_all(true);
    Status c = close(s.ok() && m_fsync);
    if (!s.ok()) return s;
    if (!c.ok()) return c;
    return m_where;
  }
  void abort() override {
    (void)receive_all(false);  // drain: workers must not block in MPI_Send forever
    (void)close(false);
    if (!m_sink.path.empty() && m_sink.fh == MPI_FILE_NULL) ::unlink(m_sink.path.c_str());
  }

 private:
  Status receive_all(bool keep) {
    const int n = static_cast<int>(m_expect.size());
    std::vector<std::uint64_t> got(static_cast<std::size_t>(n), 0);
    int ended = 1;  // the writer itself (worker 0) has no end marker
    Status first;
    while (ended < n) {
      MPI_Status st;
      MPI_Probe(MPI_ANY_SOURCE, m_tag, m_data, &st);
      int count = 0;
      MPI_Get_count(&st, MPI_BYTE, &count);
      const int src = st.MPI_SOURCE;
      m_buf.resize(std::max<std::size_t>(m_buf.size(), static_cast<std::size_t>(count)));
      MPI_Recv(m_buf.data(), count, MPI_BYTE, src, m_tag, m_data, MPI_STATUS_IGNORE);
      if (count == 0) {
        ++ended;
        if (keep && first.ok() && got[static_cast<std::size_t>(src)] != m_expect[static_cast<std::size_t>(src)])
          first = Status(Code::io_error, "rbio: worker " + std::to_string(src) + " of the group sent " +
                                             std::to_string(got[static_cast<std::size_t>(src)]) + " of " +
                                             std::to_string(m_expect[static_cast<std::size_t>(src)]) + " bytes");
        continue;
      }
      if (keep && first.ok())
        first = m_sink.write(m_base[static_cast<std::size_t>(src)] + got[static_cast<std::size_t>(src)], m_buf.data(),
                             static_cast<std::size_t>(count));
      got[static_cast<std::size_t>(src)] += static_cast<std::uint64_t>(count);
    }
    return first;
  }
  Status close(bool sync) {
    if (m_closed) return Status::OK();
    m_closed = true;
    Status s;
    if (m_sink.fd >= 0) {
      if (sync && ::fdatasync(m_sink.fd) != 0) s = errno_status("fdatasync " + m_sink.path);
      ::close(m_sink.fd);
    } else if (m_sink.fh != MPI_FILE_NULL) {
      // Closing a shared file is collective over the writers; every writer gets here exactly once.
      if (sync) s = mpi_status(MPI_File_sync(m_sink.fh), "MPI_File_sync " + m_sink.path);
      Status c = mpi_status(MPI_File_close(&m_sink.fh), "MPI_File_close " + m_sink.path);
      if (s.ok()) s = c;
    }
    return s;
  }

  MPI_Comm m_data;
  int m_tag;
  Sink m_sink;
  bool m_fsync;
  std::vector<std::uint64_t> m_base, m_expect;  // per group rank: file offset of its stream, its bytes
  Placement m_where;
  std::vector<char> m_buf;
  bool m_closed = false;
};

class RbioTransport final : public Transport {
 public:
  RbioTransport(const TransportConfig& o, const TransportEnv& env) : m_opts(o), m_rank(env.rank) {
    if (o.rbio_writers > 0) {
      const int ng = std::min(o.rbio_writers, env.size);
      m_color = static_cast<int>(static_cast<long long>(env.rank) * ng / env.size);
      MPI_Comm_split(env.comm, m_color, env.rank, &m_group);
    } else {  // one writer per node: the ranks sharing memory form a group
      MPI_Comm node;
      MPI_Comm_split_type(env.comm, MPI_COMM_TYPE_SHARED, env.rank, MPI_INFO_NULL, &node);
      int first = env.rank;
      MPI_Allreduce(MPI_IN_PLACE, &first, 1, MPI_INT, MPI_MIN, node);
      MPI_Comm_free(&node);
      m_color = first;  // groups are named after their writer's rank
      MPI_Comm_split(env.comm, first, env.rank, &m_group);
    }
    MPI_Comm_rank(m_group, &m_grank);
    MPI_Comm_size(m_group, &m_gsize);
    MPI_Comm_dup(m_group, &m_data);
    MPI_Comm_split(env.comm, m_grank == 0 ? 0 : MPI_UNDEFINED, env.rank, &m_writers);
    m_writer_rank = env.rank;
    MPI_Bcast(&m_writer_rank, 1, MPI_INT, 0, m_group);
    int ng = m_grank == 0 ? 1 : 0;
    MPI_Allreduce(MPI_IN_PLACE, &ng, 1, MPI_INT, MPI_SUM, env.comm);
    m_ng = ng;
    m_info = make_info(o.mpiio_hints);
  }
  ~RbioTransport() override {
    if (m_info != MPI_INFO_NULL) MPI_Info_free(&m_info);
    free_comm(m_writers);
    free_comm(m_data);
    free_comm(m_group);
  }
  const char* name() const override { return "rbio"; }
  bool collective_open() const override { return true; }
  bool writes_with_mpi() const override { return true; }
  // A file per writer holds its group's streams alone (only the writer knows its size); a shared file's
  // record is the same on every rank (open()).
  int index_writer() const override { return m_opts.rbio_files == 0 ? m_writer_rank : kOwnFiles; }

  // Application thread, collective over all ranks.
  Result<std::unique_ptr<Writer>> open(const WriteContext& ctx) override {
    const int tag = 100 + static_cast<int>(m_seq++ % 30000);
    const std::uint64_t align = std::max<std::uint64_t>(m_opts.alignment, kDataHeaderBytes);
    const std::uint64_t mine = round_up_to(ctx.bytes(), align);
    std::vector<std::uint64_t> sizes(static_cast<std::size_t>(m_gsize));
    std::uint64_t raw = ctx.bytes();
    std::vector<std::uint64_t> raws(static_cast<std::size_t>(m_gsize));
    MPI_Gather(&mine, 1, MPI_UINT64_T, sizes.data(), 1, MPI_UINT64_T, 0, m_group);
    MPI_Gather(&raw, 1, MPI_UINT64_T, raws.data(), 1, MPI_UINT64_T, 0, m_group);
    const bool shared = m_opts.rbio_files == 1;
    std::uint64_t group_total = 0;
    for (auto s : sizes) group_total += s;
    // File offset where this group's region starts (shared file: after the groups before it).
    std::uint64_t group_base = align;
    if (shared && m_grank == 0) {
      std::uint64_t before = 0;
      exscan_sum(&group_total, &before, 1, m_writers);  // log2 P rounds, not MPI_Exscan's chain
      group_base = align + before;
    }
    std::vector<std::uint64_t> base(static_cast<std::size_t>(m_gsize));
    if (m_grank == 0) {
      std::uint64_t off = group_base;
      for (int r = 0; r < m_gsize; ++r) {
        base[static_cast<std::size_t>(r)] = off;
        off += sizes[static_cast<std::size_t>(r)];
      }
    }
    std::uint64_t my_base = 0;
    MPI_Scatter(base.data(), 1, MPI_UINT64_T, &my_base, 1, MPI_UINT64_T, 0, m_group);
    const std::string file = shared ? ctx.unique_file_name("rbio", 0) : ctx.file_name("rbio", m_writer_rank);
    const std::string path = ctx.dir + "/" + file;

    Status s;
    Sink sink;
    if (m_grank == 0) {
      sink.path = path;
      if (shared) {
        int rc = MPI_File_open(m_writers, path.c_str(), MPI_MODE_CREATE | MPI_MODE_WRONLY, m_info, &sink.fh);
        s = mpi_status(rc, "MPI_File_open " + path);
        if (s.ok()) MPI_File_set_errhandler(sink.fh, MPI_ERRORS_RETURN);
      } else {
        sink.fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0666);
        if (sink.fd < 0) s = errno_status("create " + path);
      }
      int wrank = 0;
      MPI_Comm_rank(m_writers, &wrank);
      if (s.ok() && (!shared || wrank == 0)) {
        auto hb = encode_header_for(ctx, m_rank, align);
        s = sink.write(0, hb.data(), hb.size());
      }
      // A shared file is used by the writers together (its close and the allreduce below are collective
      // over them): its open is agreed among them first.
      if (shared) s = agree(m_writers, s);
    }
    // The writer's open must be agreed in its group: workers would otherwise send into nothing.
    s = agree(m_group, s);
    if (!s.ok()) {
      if (sink.fd >= 0) ::close(sink.fd);
      if (sink.fh != MPI_FILE_NULL) MPI_File_close(&sink.fh);
      return s.with_context("rbio: the writer of this group could not open " + path);
    }
    // A shared file is recorded as the first writer's (rank 0), with its size on every rank (the writers'
    // allreduce, then each writer's broadcast to its group): the same record wherever it is listed.
    Placement where{file, shared ? 0 : m_writer_rank, my_base, 0};
    std::uint64_t shared_end = 0;
    if (m_grank == 0) {
      std::uint64_t group_end = group_base;  // where the group's last stream ends
      for (int r = 0; r < m_gsize; ++r)
        if (raws[static_cast<std::size_t>(r)] > 0)
          group_end = std::max(group_end, base[static_cast<std::size_t>(r)] + raws[static_cast<std::size_t>(r)]);
      where.file_bytes = shared ? 0 : group_end;
      where.attrs = {{"rbio.writers", std::to_string(m_ng)}, {"rbio.files", shared ? "1" : std::to_string(m_ng)}};
      if (shared) {
        // The first writer reports the shared file's size as written.
        MPI_Allreduce(&group_end, &shared_end, 1, MPI_UINT64_T, MPI_MAX, m_writers);
        int wrank = 0;
        MPI_Comm_rank(m_writers, &wrank);
        if (wrank == 0) where.file_bytes = shared_end;
      }
    }
    if (shared) {
      MPI_Bcast(&shared_end, 1, MPI_UINT64_T, 0, m_group);
      where.record_bytes = shared_end;
    }
    if (m_grank == 0)
      return std::unique_ptr<Writer>(std::make_unique<RbioWriter>(m_data, tag, std::move(sink), ctx.fsync,
                                                                  std::move(base), std::move(raws), std::move(where)));
    return std::unique_ptr<Writer>(std::make_unique<RbioWorker>(m_data, tag, std::move(where)));
  }

 private:
  TransportConfig m_opts;
  int m_rank;
  int m_color = 0, m_grank = 0, m_gsize = 1, m_writer_rank = 0, m_ng = 1;
  long long m_seq = 0;
  MPI_Comm m_group = MPI_COMM_NULL, m_data = MPI_COMM_NULL, m_writers = MPI_COMM_NULL;
  MPI_Info m_info = MPI_INFO_NULL;
};

}  // namespace

// Its sends run on the write thread: the Runtime refuses it when that thread may not call MPI
// (writes_with_mpi(), funneled mode) and otherwise demands MPI_THREAD_MULTIPLE.
Result<std::unique_ptr<Transport>> make_rbio_transport(const TransportConfig& o, const TransportEnv& env) {
  return std::unique_ptr<Transport>(std::make_unique<RbioTransport>(o, env));
}

}  // namespace ckpt::detail
