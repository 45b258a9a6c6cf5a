// coIO: MPI-IO collective writes. The ranks are split into nf contiguous groups; each group
// writes one file with MPI_File_write_at_all, every rank's stream at its own aligned offset. nf = 1
// is one shared file. Collective calls must match across a group, so every rank makes as many
// write_at_all calls as the rank with the most writes (extra calls write nothing), also on errors:
// counted from the caller's write length (WriteContext::write_bytes), which differs per rank.
#include <algorithm>

#include "base/format.hpp"
#include "base/mpi.hpp"
#include "transports/mpi_util.hpp"
#include "transports/transport.hpp"

namespace ckpt::detail {
namespace {

class MpiioWriter final : public Writer {
 public:
  MpiioWriter(MPI_File fh, std::string name, int writer, std::uint64_t base, std::uint64_t file_bytes,
              std::uint64_t record_bytes, long long calls, bool fsync, Attributes hints)
      : m_fh(fh),
        m_name(std::move(name)),
        m_writer(writer),
        m_base(base),
        m_file_bytes(file_bytes),
        m_record_bytes(record_bytes),
        m_calls(calls),
        m_fsync(fsync),
        m_hints(std::move(hints)) {}
  ~MpiioWriter() override {
    if (m_fh != MPI_FILE_NULL) abort();
  }

  Status write(std::uint64_t offset, const void* data, std::size_t n) override {
    auto* p = static_cast<const char*>(data);
    return for_each_piece(n, [&](std::uint64_t done, int part) {
      MPI_Status st;
      int rc =
          MPI_File_write_at_all(m_fh, static_cast<MPI_Offset>(m_base + offset + done), p + done, part, MPI_BYTE, &st);
      ++m_made;
      return mpi_write_status(rc, st, part, "MPI_File_write_at_all " + m_name);
    });
  }

  Result<Placement> finish(const std::vector<BlockDigest>&) override {
    Status s = pad_and_close();
    if (!s.ok()) return s;
    Placement p{m_name, m_writer, m_base, m_file_bytes};
    p.record_bytes = m_record_bytes;
    p.attrs = m_hints;
    return p;
  }

  void abort() override { (void)pad_and_close(); }

 private:
  Status pad_and_close() {
    if (m_fh == MPI_FILE_NULL) return Status::OK();
    Status first;
    while (m_made < m_calls) {  // match the collective calls of the ranks with more chunks
      MPI_Status st;
      int rc = MPI_File_write_at_all(m_fh, 0, nullptr, 0, MPI_BYTE, &st);
      ++m_made;
      if (first.ok()) first = mpi_status(rc, "MPI_File_write_at_all " + m_name);
    }
    if (m_fsync) {
      int rc = MPI_File_sync(m_fh);
      if (first.ok()) first = mpi_status(rc, "MPI_File_sync " + m_name);
    }
    int rc = MPI_File_close(&m_fh);
    m_fh = MPI_FILE_NULL;
    if (first.ok()) first = mpi_status(rc, "MPI_File_close " + m_name);
    return first;
  }

  MPI_File m_fh;
  std::string m_name;
  int m_writer;
  std::uint64_t m_base, m_file_bytes, m_record_bytes;
  long long m_calls, m_made = 0;
  bool m_fsync;
  Attributes m_hints;
};

class MpiioTransport final : public Transport {
 public:
  MpiioTransport(const TransportConfig& o, const TransportEnv& env) : m_opts(o), m_rank(env.rank) {
    m_nf = std::max(1, std::min(o.mpiio_files, env.size));
    m_color = static_cast<int>(static_cast<long long>(env.rank) * m_nf / env.size);
    MPI_Comm_split(env.comm, m_color, env.rank, &m_comm);
    m_info = make_info(o.mpiio_hints);
    int first = env.rank;
    MPI_Allreduce(MPI_IN_PLACE, &first, 1, MPI_INT, MPI_MIN, m_comm);
    m_group_root = first;
  }
  ~MpiioTransport() override {
    if (m_info != MPI_INFO_NULL) MPI_Info_free(&m_info);
    free_comm(m_comm);
  }
  const char* name() const override { return "mpiio"; }
  bool collective_open() const override { return true; }
  bool writes_with_mpi() const override { return true; }
  int index_writer() const override { return kOwnFiles; }  // every rank reports the same file record

  // Application thread, collective over the group.
  Result<std::unique_ptr<Writer>> open(const WriteContext& ctx) override {
    const std::uint64_t align = std::max<std::uint64_t>(m_opts.alignment, kDataHeaderBytes);
    const std::uint64_t mine = round_up_to(ctx.bytes(), align);
    std::uint64_t before = 0, total = 0;
    exscan_sum(&mine, &before, 1, m_comm);  // log2 P rounds, not MPI_Exscan's chain through every rank
    int grank = 0;
    MPI_Comm_rank(m_comm, &grank);
    std::uint64_t my_end = align + before + ctx.bytes();  // the file ends where the last stream ends
    MPI_Allreduce(&my_end, &total, 1, MPI_UINT64_T, MPI_MAX, m_comm);
    // The collective calls this rank will make: one per write() and 1 GiB piece of it. The writes'
    // length is the caller's (each rank's auto chunk follows its own state), so the count differs
    // across ranks; every rank makes the largest (pad_and_close), agreed here.
    const std::uint64_t each = ctx.write_bytes != 0 ? ctx.write_bytes : std::max<std::uint64_t>(ctx.bytes(), 1);
    long long calls = 0;
    for (std::uint64_t off = 0; off < ctx.bytes(); off += each) {
      const std::uint64_t len = std::min<std::uint64_t>(each, ctx.bytes() - off);
      calls += static_cast<long long>((len + kMaxMpiPiece - 1) / kMaxMpiPiece);
    }
    MPI_Allreduce(MPI_IN_PLACE, &calls, 1, MPI_LONG_LONG, MPI_MAX, m_comm);

    const std::string file = ctx.unique_file_name("coio", m_color);  // see unique_file_name()
    const std::string path = ctx.dir + "/" + file;
    MPI_File fh = MPI_FILE_NULL;
    int rc = MPI_File_open(m_comm, path.c_str(), MPI_MODE_CREATE | MPI_MODE_WRONLY, m_info, &fh);
    Status s = agree(m_comm, mpi_status(rc, "MPI_File_open " + path));
    if (!s.ok()) {
      if (fh != MPI_FILE_NULL) MPI_File_close(&fh);
      return s;
    }
    MPI_File_set_errhandler(fh, MPI_ERRORS_RETURN);
    if (grank == 0) {
      auto hb = encode_header_for(ctx, m_rank, align);
      MPI_Status st;
      s = mpi_write_status(MPI_File_write_at(fh, 0, hb.data(), static_cast<int>(hb.size()), MPI_BYTE, &st), st,
                           static_cast<int>(hb.size()), "write header of " + path);
    }
    Attributes hints = grank == 0 ? hints_in_effect(fh, "mpiio.hint.") : Attributes{};
    hints.emplace_back("mpiio.files", std::to_string(m_nf));
    // The group's first rank wrote the file (its bytes_written); every rank reports its size (the allreduce
    // above) for the index, so the record is the same wherever it is listed (index_writer()).
    auto w =
        std::make_unique<MpiioWriter>(fh, file, m_group_root, align + before, grank == 0 ? std::max(total, align) : 0,
                                      std::max(total, align), calls, ctx.fsync, std::move(hints));
    s = agree(m_comm, s);  // the header write is agreed too: a writer is used collectively or not at all
    if (!s.ok()) {
      w->abort();
      return s;
    }
    return std::unique_ptr<Writer>(std::move(w));
  }

 private:
  TransportConfig m_opts;
  int m_rank;
  int m_nf = 1, m_color = 0, m_group_root = 0;
  MPI_Comm m_comm = MPI_COMM_NULL;
  MPI_Info m_info = MPI_INFO_NULL;
};

}  // namespace

Result<std::unique_ptr<Transport>> make_mpiio_transport(const TransportConfig& o, const TransportEnv& env) {
  return std::unique_ptr<Transport>(std::make_unique<MpiioTransport>(o, env));
}

}  // namespace ckpt::detail
