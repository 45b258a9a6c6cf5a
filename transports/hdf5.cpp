// HDF5 transports (parallel HDF5 1.10). One file per checkpoint (ckpt.h5; g<k>.ckpt.h5 for group k),
// one dataset per variable with its global shape (per-rank variables under /ranks/<r>/), min/max and
// XXH3 checksums as dataset attributes: h5dump and h5py read it with no ckpt code.
//
//  hdf5       asynchronous. Every HDF5 call runs on the flush (write) thread - the library here is not
//             thread-safe - and is collective in segment order on every rank: start() creates the
//             file and its datasets (contiguous, allocated early), write() puts the staged bytes into
//             the datasets' storage with pwrite at H5Dget_offset (independent raw I/O), finish()
//             agrees, writes the attributes collectively and closes.
//  hdf5-sync  the papers' baseline: the application thread creates the file and writes every
//             dataset with a collective H5Dwrite (hyperslab per rank) inside checkpoint(), computes
//             the attributes, flushes and closes before checkpoint() returns.
//
// Restart reads blocks through the index like any other transport, so a block must be contiguous in
// its dataset: global arrays must be split along their first dimension (the usual row split).
#include <fcntl.h>
#include <hdf5.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <mutex>
#include <tuple>

#include "base/format.hpp"
#include "base/posix_io.hpp"
#include "transports/mpi_util.hpp"
#include "transports/transport.hpp"

namespace ckpt::detail {
namespace {

/// The HDF5 library is not thread-safe here: every call holds this lock.
std::mutex& h5_lock() {
  static std::mutex m;
  return m;
}

hid_t h5_type(DType t) {
  switch (t) {
    case DType::u8: return H5T_NATIVE_UINT8;
    case DType::i8: return H5T_NATIVE_INT8;
    case DType::u16: return H5T_NATIVE_UINT16;
    case DType::i16: return H5T_NATIVE_INT16;
    case DType::u32: return H5T_NATIVE_UINT32;
    case DType::i32: return H5T_NATIVE_INT32;
    case DType::u64: return H5T_NATIVE_UINT64;
    case DType::i64: return H5T_NATIVE_INT64;
    case DType::f32: return H5T_NATIVE_FLOAT;
    case DType::f64: return H5T_NATIVE_DOUBLE;
    case DType::bytes: return H5T_NATIVE_UCHAR;
  }
  return H5T_NATIVE_UCHAR;
}

Status h5_fail(const std::string& what) { return Status(Code::io_error, "HDF5: " + what + " failed"); }

/// A variable as every rank must see it to create the same datasets collectively.
struct VarDesc {
  std::string name;  ///< dataset path
  DType dtype = DType::u8;
  bool global = false;
  int owner = -1;  ///< rank owning a per-rank dataset
  Shape shape;     ///< dataset extents ({} = scalar)
  bool operator<(const VarDesc& o) const { return std::tie(global, name) > std::tie(o.global, o.name); }
};

/// Every rank's variables of this segment, in one order on all ranks (globals first, by path).
Result<std::vector<VarDesc>> gather_vars(MPI_Comm comm, const WriteContext& ctx) {
  std::vector<std::uint8_t> mine;
  auto put = [&](const void* p, std::size_t n) {
    auto* b = static_cast<const std::uint8_t*>(p);
    mine.insert(mine.end(), b, b + n);
  };
  for (const BlockPlan& b : ctx.plan->blocks) {
    const Region& r = ctx.plan->vars[b.var];
    if (r.group != ctx.group) continue;
    const std::uint32_t len = static_cast<std::uint32_t>(r.name.size());
    const std::uint8_t dt = static_cast<std::uint8_t>(r.dtype), glob = r.kind == RegionKind::global ? 1 : 0;
    const Shape& shape = glob ? r.global : r.count;
    const std::uint32_t nd = static_cast<std::uint32_t>(shape.size());
    put(&len, 4);
    put(r.name.data(), len);
    put(&dt, 1);
    put(&glob, 1);
    put(&nd, 4);
    put(shape.data(), nd * 8);
  }
  const auto parts = allgatherv_bytes(comm, mine);
  const int size = static_cast<int>(parts.size());
  std::map<std::string, VarDesc> globals;
  std::vector<VarDesc> out;
  for (int r = 0; r < size; ++r) {
    const std::vector<std::uint8_t>& all = parts[static_cast<std::size_t>(r)];
    std::size_t p = 0;
    while (p < all.size()) {
      VarDesc d;
      std::uint32_t len = 0, nd = 0;
      std::memcpy(&len, &all[p], 4);
      p += 4;
      std::string name(reinterpret_cast<const char*>(&all[p]), len);
      p += len;
      d.dtype = static_cast<DType>(all[p++]);
      d.global = all[p++] != 0;
      std::memcpy(&nd, &all[p], 4);
      p += 4;
      d.shape.resize(nd);
      if (nd > 0) std::memcpy(d.shape.data(), &all[p], nd * 8);  // a scalar has no shape (and data() may be null)
      p += nd * 8;
      if (d.global) {
        d.name = "/" + name;
        auto it = globals.find(d.name);
        if (it == globals.end())
          globals.emplace(d.name, d);
        else if (it->second.dtype != d.dtype || it->second.shape != d.shape)
          return Status(Code::invalid_argument,
                        "hdf5: variable '" + name + "' has another dtype or global shape on rank " + std::to_string(r));
      } else {
        d.name = "/ranks/" + std::to_string(r) + "/" + name;
        d.owner = r;
        out.push_back(d);
      }
    }
  }
  for (auto& g : globals) out.push_back(g.second);
  std::sort(out.begin(), out.end());
  return out;
}

/// File offset of this rank's block of a dataset starting at `dset_off`, if the block is contiguous in it.
Result<std::uint64_t> block_offset_in(const Region& r, std::uint64_t dset_off) {
  if (r.kind != RegionKind::global) return dset_off;
  const std::size_t n = r.global.size();
  // Contiguous iff, for some k, count[d] == 1 for d < k and count[d] == global[d] for d > k.
  std::size_t k = 0;
  while (k < n && r.count[k] == 1) ++k;
  for (std::size_t d = k + 1; d < n; ++d)
    if (r.count[d] != r.global[d] && r.elements() != 0)
      return Status(Code::invalid_argument,
                    "hdf5: the block of '" + r.name +
                        "' is not contiguous in its dataset; split global arrays along the first dimension");
  std::uint64_t lin = 0;
  for (std::size_t d = 0; d < n; ++d) lin = lin * r.global[d] + r.start[d];
  return dset_off + lin * dtype_size(r.dtype);
}

/// An open parallel HDF5 checkpoint file and its datasets (created collectively).
class H5Checkpoint {
 public:
  ~H5Checkpoint() { close(); }
  Status create(const std::string& path, MPI_Comm comm, std::uint64_t alignment, const std::vector<VarDesc>& descs) {
    m_descs = descs;
    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
    H5Pset_fapl_mpio(fapl, comm, MPI_INFO_NULL);
    H5Pset_all_coll_metadata_ops(fapl, 1);
    H5Pset_coll_metadata_write(fapl, 1);
    H5Pset_alignment(fapl, 4096, alignment);
    m_file = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, fapl);
    H5Pclose(fapl);
    if (m_file < 0) return h5_fail("H5Fcreate " + path);
    hid_t lcpl = H5Pcreate(H5P_LINK_CREATE);
    H5Pset_create_intermediate_group(lcpl, 1);
    hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    H5Pset_layout(dcpl, H5D_CONTIGUOUS);
    H5Pset_alloc_time(dcpl, H5D_ALLOC_TIME_EARLY);
    H5Pset_fill_time(dcpl, H5D_FILL_TIME_NEVER);
    Status s;
    for (const VarDesc& d : m_descs) {
      std::vector<hsize_t> dims(d.shape.begin(), d.shape.end());
      hid_t space =
          dims.empty() ? H5Screate(H5S_SCALAR) : H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr);
      hid_t ds = H5Dcreate2(m_file, d.name.c_str(), h5_type(d.dtype), space, lcpl, dcpl, H5P_DEFAULT);
      H5Sclose(space);
      if (ds < 0 && s.ok()) s = h5_fail("H5Dcreate " + d.name);
      m_dsets.push_back(ds);
    }
    H5Pclose(dcpl);
    H5Pclose(lcpl);
    return s;
  }
  /// File offset of the dataset called `name`.
  Result<std::uint64_t> offset_of(const std::string& name) const {
    for (std::size_t i = 0; i < m_descs.size(); ++i)
      if (m_descs[i].name == name) {
        haddr_t a = H5Dget_offset(m_dsets[i]);
        if (a == HADDR_UNDEF) return h5_fail("H5Dget_offset " + name);
        return static_cast<std::uint64_t>(a);
      }
    return Status(Code::internal, "hdf5: no dataset " + name);
  }
  const std::vector<VarDesc>& descs() const { return m_descs; }
  hid_t dataset(std::size_t i) const { return m_dsets[i]; }
  hid_t file() const { return m_file; }

  /// Writes the ckpt attributes of every dataset. Collective: `stats[i]` must be equal everywhere.
  /// stats: per desc: min, max (NaN = none) and one checksum per rank (0 = no block).
  void write_attributes(const std::vector<double>& mins, const std::vector<double>& maxs,
                        const std::vector<std::uint64_t>& sums, int nranks, std::int64_t step, const char* transport) {
    auto scalar_attr = [](hid_t obj, const char* name, hid_t type, const void* v) {
      hid_t sp = H5Screate(H5S_SCALAR);
      hid_t a = H5Acreate2(obj, name, type, sp, H5P_DEFAULT, H5P_DEFAULT);
      if (a >= 0) {
        H5Awrite(a, type, v);
        H5Aclose(a);
      }
      H5Sclose(sp);
    };
    for (std::size_t i = 0; i < m_descs.size(); ++i) {
      if (m_dsets[i] < 0) continue;
      if (!std::isnan(mins[i])) {
        scalar_attr(m_dsets[i], "ckpt_min", H5T_NATIVE_DOUBLE, &mins[i]);
        scalar_attr(m_dsets[i], "ckpt_max", H5T_NATIVE_DOUBLE, &maxs[i]);
      }
      hsize_t n = static_cast<hsize_t>(nranks);
      hid_t sp = H5Screate_simple(1, &n, nullptr);
      hid_t a = H5Acreate2(m_dsets[i], "ckpt_xxh3_by_rank", H5T_NATIVE_UINT64, sp, H5P_DEFAULT, H5P_DEFAULT);
      if (a >= 0) {
        H5Awrite(a, H5T_NATIVE_UINT64, &sums[i * static_cast<std::size_t>(nranks)]);
        H5Aclose(a);
      }
      H5Sclose(sp);
    }
    scalar_attr(m_file, "ckpt_step", H5T_NATIVE_INT64, &step);
    hid_t str = H5Tcopy(H5T_C_S1);
    H5Tset_size(str, std::strlen(transport) + 1);
    scalar_attr(m_file, "ckpt_transport", str, transport);
    H5Tclose(str);
  }

  Status flush_and_close(bool sync) {
    Status s;
    if (m_file >= 0 && sync && H5Fflush(m_file, H5F_SCOPE_GLOBAL) < 0) s = h5_fail("H5Fflush");
    Status c = close();
    return s.ok() ? c : s;
  }
  Status close() {
    for (hid_t d : m_dsets)
      if (d >= 0) H5Dclose(d);
    m_dsets.clear();
    Status s;
    if (m_file >= 0 && H5Fclose(m_file) < 0) s = h5_fail("H5Fclose");
    m_file = -1;
    return s;
  }

 private:
  std::vector<VarDesc> m_descs;
  std::vector<hid_t> m_dsets;
  hid_t m_file = -1;
};

/// Gathers, for every dataset, min/max over its blocks and the checksum of each rank's block.
void gather_stats(MPI_Comm comm, int rank, int nranks, const std::vector<VarDesc>& descs, const WriteContext& ctx,
                  const std::vector<BlockDigest>& digests, std::vector<double>& mins, std::vector<double>& maxs,
                  std::vector<std::uint64_t>& sums) {
  const std::size_t n = descs.size();
  mins.assign(n, std::numeric_limits<double>::infinity());
  maxs.assign(n, -std::numeric_limits<double>::infinity());
  std::vector<std::uint64_t> mine(n, 0);
  for (const BlockPlan& b : ctx.plan->blocks) {
    const Region& r = ctx.plan->vars[b.var];
    if (r.group != ctx.group) continue;
    const std::string path =
        r.kind == RegionKind::global ? "/" + r.name : "/ranks/" + std::to_string(rank) + "/" + r.name;
    for (std::size_t i = 0; i < n; ++i) {
      if (descs[i].name != path) continue;
      const BlockDigest& d = digests[b.var];
      mine[i] = d.checksum;
      if (d.has_stats) {
        mins[i] = std::min(mins[i], stat_to_double(r.dtype, d.min_bits));
        maxs[i] = std::max(maxs[i], stat_to_double(r.dtype, d.max_bits));
      }
    }
  }
  MPI_Allreduce(MPI_IN_PLACE, mins.data(), static_cast<int>(n), MPI_DOUBLE, MPI_MIN, comm);
  MPI_Allreduce(MPI_IN_PLACE, maxs.data(), static_cast<int>(n), MPI_DOUBLE, MPI_MAX, comm);
  for (std::size_t i = 0; i < n; ++i)
    if (std::isinf(mins[i]) && std::isinf(maxs[i])) mins[i] = maxs[i] = std::nan("");
  std::vector<std::uint64_t> all(n * static_cast<std::size_t>(nranks));
  MPI_Allgather(mine.data(), static_cast<int>(n), MPI_UINT64_T, all.data(), static_cast<int>(n), MPI_UINT64_T, comm);
  sums.assign(n * static_cast<std::size_t>(nranks), 0);  // [desc][rank]
  for (int r = 0; r < nranks; ++r)
    for (std::size_t i = 0; i < n; ++i)
      sums[i * static_cast<std::size_t>(nranks) + static_cast<std::size_t>(r)] =
          all[static_cast<std::size_t>(r) * n + i];
}

/// Offsets of this rank's blocks (per plan variable) in the file.
Status my_block_offsets(const H5Checkpoint& f, const WriteContext& ctx, int rank, std::vector<std::uint64_t>& out) {
  out.assign(ctx.plan->vars.size(), 0);
  for (const BlockPlan& b : ctx.plan->blocks) {
    const Region& r = ctx.plan->vars[b.var];
    if (r.group != ctx.group) continue;
    const std::string path =
        r.kind == RegionKind::global ? "/" + r.name : "/ranks/" + std::to_string(rank) + "/" + r.name;
    auto off = f.offset_of(path);
    if (!off.ok()) return off.status();
    auto bo = block_offset_in(r, off.value());
    if (!bo.ok()) return bo.status();
    out[b.var] = bo.value();
  }
  return Status::OK();
}

// ---- hdf5 (asynchronous) --------------------------------------------------------------------------

class Hdf5Writer final : public Writer {
 public:
  Hdf5Writer(const WriteContext& ctx, MPI_Comm comm, std::uint64_t alignment)
      : m_ctx(ctx), m_comm(comm), m_alignment(alignment) {
    MPI_Comm_rank(comm, &m_rank);
    MPI_Comm_size(comm, &m_size);
    m_name = ctx.unique_file_name("ckpt", 0) + ".h5";  // ckpt.<id>.0.h5 / g1.ckpt.<id>.0.h5
    m_path = ctx.dir + "/" + m_name;
  }
  ~Hdf5Writer() override {
    if (!m_done) abort();
  }

  Status start() override {  // write thread, collective, in segment order
    m_started = true;
    auto descs = gather_vars(m_comm, m_ctx);
    Status s = descs.status();
    {
      std::lock_guard<std::mutex> lk(h5_lock());
      if (s.ok()) s = m_file.create(m_path, m_comm, m_alignment, descs.value());
      if (s.ok()) s = my_block_offsets(m_file, m_ctx, m_rank, m_offsets);
    }
    if (s.ok()) {
      m_fd = ::open(m_path.c_str(), O_WRONLY | O_CLOEXEC | O_NOFOLLOW);
      if (m_fd < 0) s = errno_status("open " + m_path);
    }
    s = agree(m_comm, s);
    if (!s.ok()) {
      m_failed = true;
      return s.with_context("hdf5: creating " + m_path);
    }
    return Status::OK();
  }

  Status write(std::uint64_t offset, const void* data, std::size_t n) override {
    if (m_failed || !m_started) return Status(Code::failed_precondition, "hdf5: write without a file");
    // Map the window [offset, offset + n) of the segment to the blocks in it.
    const std::uint64_t a = m_ctx.segment_begin + offset, b = a + n;
    for (const BlockPlan& bp : m_ctx.plan->blocks) {
      if (m_ctx.plan->vars[bp.var].group != m_ctx.group) continue;
      const std::uint64_t lo = std::max(a, bp.offset), hi = std::min(b, bp.offset + bp.length);
      if (hi <= lo) continue;
      CKPT_RETURN_IF_ERROR(pwrite_all(m_fd, static_cast<const char*>(data) + (lo - a), hi - lo,
                                      m_offsets[bp.var] + (lo - bp.offset), m_path));
    }
    return Status::OK();
  }

  Result<Placement> finish(const std::vector<BlockDigest>& digests) override {
    Status s;
    if (m_fd >= 0) {
      if (m_ctx.fsync && ::fdatasync(m_fd) != 0) s = errno_status("fdatasync " + m_path);
      ::close(m_fd);
      m_fd = -1;
    }
    return end(s, &digests);
  }
  void abort() override { (void)end(Status(Code::io_error, "aborted"), nullptr); }

 private:
  Result<Placement> end(Status s, const std::vector<BlockDigest>* digests) {
    if (m_done) return s.ok() ? Status(Code::internal, "hdf5: finished twice") : s;
    m_done = true;
    if (!m_started) CKPT_RETURN_IF_ERROR(start());  // (the runtime starts every segment; defensive)
    if (m_fd >= 0) {
      ::close(m_fd);
      m_fd = -1;
    }
    const Status agreed = agree(m_comm, m_failed ? Status(Code::io_error, "hdf5: start() failed") : s);
    const bool ok = agreed.ok();
    if (ok && digests != nullptr) {
      std::vector<double> mins, maxs;
      std::vector<std::uint64_t> sums;
      gather_stats(m_comm, m_rank, m_size, m_file.descs(), m_ctx, *digests, mins, maxs, sums);
      std::lock_guard<std::mutex> lk(h5_lock());
      m_file.write_attributes(mins, maxs, sums, m_size, m_ctx.step, "hdf5");
      s = m_file.flush_and_close(m_ctx.fsync);
    } else {
      std::lock_guard<std::mutex> lk(h5_lock());
      (void)m_file.close();
    }
    if (!ok) return agreed.with_context("hdf5: writing " + m_path);
    if (!s.ok()) return s;
    Placement p{m_name, 0, 0, 0};
    if (m_rank == 0) {
      struct stat st {};
      if (::stat(m_path.c_str(), &st) == 0) p.file_bytes = static_cast<std::uint64_t>(st.st_size);
    }
    p.block_offsets = m_offsets;
    return p;
  }

  WriteContext m_ctx;
  MPI_Comm m_comm;
  std::uint64_t m_alignment;
  int m_rank = 0, m_size = 1;
  std::string m_name, m_path;
  H5Checkpoint m_file;
  std::vector<std::uint64_t> m_offsets;
  int m_fd = -1;
  bool m_started = false, m_failed = false, m_done = false;
};

// ---- hdf5-sync (the baseline) -------------------------------------------------------------------

/// Everything already happened in open(); the flush threads only deliver the placement.
class DoneWriter final : public Writer {
 public:
  explicit DoneWriter(Placement p) : m_p(std::move(p)) {}
  Status write(std::uint64_t, const void*, std::size_t) override { return Status::OK(); }
  Result<Placement> finish(const std::vector<BlockDigest>&) override { return m_p; }
  void abort() override {}

 private:
  Placement m_p;
};

Result<Placement> write_sync(const WriteContext& ctx, MPI_Comm comm, std::uint64_t alignment) {
  int rank = 0, size = 1;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  const std::string name = ctx.unique_file_name("ckpt", 0) + ".h5", path = ctx.dir + "/" + name;
  auto descs = gather_vars(comm, ctx);
  if (Status a = agree(comm, descs.status()); !a.ok()) return a.with_context("hdf5-sync: variables");
  // Digests of this rank's blocks, computed here from the application's memory (host only).
  std::vector<BlockDigest> digests(ctx.plan->vars.size());
  Status s;
  for (const BlockPlan& b : ctx.plan->blocks) {
    const Region& r = ctx.plan->vars[b.var];
    if (r.group != ctx.group) continue;
    if (r.mem == MemoryKind::device)
      s = Status(Code::invalid_argument, "hdf5-sync writes from host memory only ('" + r.name + "')");
    if (!s.ok() || b.length == 0) continue;
    digests[b.var].checksum = hash64(b.src, b.length);
    if (dtype_has_stats(r.dtype)) {
      MinMax mm(r.dtype);
      mm.update(b.src, b.length);
      digests[b.var] = {digests[b.var].checksum, mm.valid(), mm.min_bits(), mm.max_bits()};
    }
  }
  CKPT_RETURN_IF_ERROR(agree(comm, s));
  std::lock_guard<std::mutex> lk(h5_lock());
  H5Checkpoint f;
  s = f.create(path, comm, alignment, descs.value());
  std::vector<std::uint64_t> offsets;
  if (s.ok()) s = my_block_offsets(f, ctx, rank, offsets);
  CKPT_RETURN_IF_ERROR(agree(comm, s).with_context("hdf5-sync: creating " + path));
  // One collective H5Dwrite per global dataset (a hyperslab per rank); per-rank datasets independently.
  hid_t coll = H5Pcreate(H5P_DATASET_XFER), indep = H5Pcreate(H5P_DATASET_XFER);
  H5Pset_dxpl_mpio(coll, H5FD_MPIO_COLLECTIVE);
  H5Pset_dxpl_mpio(indep, H5FD_MPIO_INDEPENDENT);
  for (std::size_t i = 0; i < f.descs().size(); ++i) {
    const VarDesc& d = f.descs()[i];
    const Region* mine = nullptr;
    const BlockPlan* mb = nullptr;
    for (const BlockPlan& b : ctx.plan->blocks) {
      const Region& r = ctx.plan->vars[b.var];
      if (r.group == ctx.group &&
          (d.global ? "/" + r.name == d.name && r.kind == RegionKind::global
                    : d.owner == rank && "/ranks/" + std::to_string(rank) + "/" + r.name == d.name)) {
        mine = &r;
        mb = &b;
      }
    }
    if (!d.global && mine == nullptr) continue;  // somebody else's per-rank dataset
    hid_t fspace = H5Dget_space(f.dataset(i));
    hid_t mspace;
    if (d.global) {
      std::vector<hsize_t> st(mine ? mine->start.begin() : d.shape.begin(), mine ? mine->start.end() : d.shape.end());
      std::vector<hsize_t> ct(mine ? mine->count.begin() : d.shape.begin(), mine ? mine->count.end() : d.shape.end());
      if (mine && mine->elements() > 0) {
        H5Sselect_hyperslab(fspace, H5S_SELECT_SET, st.data(), nullptr, ct.data(), nullptr);
        mspace = H5Screate_simple(static_cast<int>(ct.size()), ct.data(), nullptr);
      } else {
        H5Sselect_none(fspace);
        hsize_t one = 1;
        mspace = H5Screate_simple(1, &one, nullptr);
        H5Sselect_none(mspace);
      }
    } else {
      mspace = H5Scopy(fspace);
    }
    const void* src = mb && mb->length > 0 ? mb->src : nullptr;
    static const char dummy = 0;
    if (H5Dwrite(f.dataset(i), h5_type(d.dtype), mspace, fspace, d.global ? coll : indep, src ? src : &dummy) < 0 &&
        s.ok())
      s = h5_fail("H5Dwrite " + d.name);
    H5Sclose(mspace);
    H5Sclose(fspace);
  }
  H5Pclose(coll);
  H5Pclose(indep);
  const Status agreed = agree(comm, s);
  const bool ok = agreed.ok();
  if (ok) {
    std::vector<double> mins, maxs;
    std::vector<std::uint64_t> sums;
    gather_stats(comm, rank, size, f.descs(), ctx, digests, mins, maxs, sums);
    f.write_attributes(mins, maxs, sums, size, ctx.step, "hdf5-sync");
    s = f.flush_and_close(ctx.fsync);
  } else {
    (void)f.close();
  }
  if (!ok) return agreed.with_context("hdf5-sync: writing " + path);
  if (!s.ok()) return s;
  Placement p{name, 0, 0, 0};
  if (rank == 0) {
    struct stat st {};
    if (::stat(path.c_str(), &st) == 0) p.file_bytes = static_cast<std::uint64_t>(st.st_size);
  }
  p.block_offsets = std::move(offsets);
  return p;
}

class Hdf5Transport final : public Transport {
 public:
  Hdf5Transport(bool sync, const Options& o, const TransportEnv& env) : m_sync(sync), m_alignment(o.alignment) {
    MPI_Comm_dup(env.comm, &m_comm);  // sync: app thread; async: write thread only
  }
  ~Hdf5Transport() override { free_comm(m_comm); }
  const char* name() const override { return m_sync ? "hdf5-sync" : "hdf5"; }
  bool collective_open() const override { return true; }
  bool synchronous() const override { return m_sync; }
  Result<std::unique_ptr<Writer>> open(const WriteContext& ctx) override {
    if (!m_sync) return std::unique_ptr<Writer>(std::make_unique<Hdf5Writer>(ctx, m_comm, m_alignment));
    auto p = write_sync(ctx, m_comm, m_alignment);
    if (!p.ok()) return p.status();
    return std::unique_ptr<Writer>(std::make_unique<DoneWriter>(std::move(p).value()));
  }

 private:
  bool m_sync;
  std::uint64_t m_alignment;
  MPI_Comm m_comm = MPI_COMM_NULL;
};

}  // namespace

Result<std::unique_ptr<Transport>> make_hdf5_transport(const Options& o, const TransportEnv& env) {
  return std::unique_ptr<Transport>(std::make_unique<Hdf5Transport>(false, o, env));
}
Result<std::unique_ptr<Transport>> make_hdf5_sync_transport(const Options& o, const TransportEnv& env) {
  return std::unique_ptr<Transport>(std::make_unique<Hdf5Transport>(true, o, env));
}

}  // namespace ckpt::detail
