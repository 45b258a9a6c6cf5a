// HDF5 transports (parallel HDF5 1.10). One file per checkpoint (ckpt.<id>.0.h5; g<k>.ckpt.<id>.0.h5
// for group k) in the layout of base/h5.hpp (docs/format.md, "HDF5 files"): a global variable is one
// dataset with its global shape (a joined one of every rank's rows, in rank order), any other variable
// a group with one dataset per rank; min/max and
// XXH3 checksums are attributes. h5dump and h5py read it with no ckpt code, and `ckpt convert`
// writes the same layout from any checkpoint.
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
#include <cstring>
#include <map>
#include <mutex>
#include <unordered_map>

#include "base/box.hpp"
#include "base/bytes.hpp"
#include "base/format.hpp"
#include "base/h5.hpp"
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

/// A variable as every rank must see it to create the same objects collectively.
struct VarDesc {
  std::string name;
  DType dtype = DType::u8;
  RegionKind kind = RegionKind::local;
};

/// One dataset: a global variable's, or one rank's block of another variable.
struct DatasetDesc {
  std::string path;
  std::size_t var = 0;      ///< index into Layout::vars
  std::uint32_t owner = 0;  ///< the rank whose block it holds (per-rank datasets)
  Shape shape;              ///< dataset extents ({} = scalar)
};

/// Every rank's variables and datasets of this segment, in one order on all ranks.
struct Layout {
  std::vector<VarDesc> vars;
  std::vector<DatasetDesc> datasets;
  std::unordered_map<std::string, std::size_t> by_path;  ///< dataset path -> index
  /// Joined variables: this rank's first row in their dataset (the rows of lower ranks come first,
  /// as in the index the commit writes).
  std::unordered_map<std::string, std::uint64_t> first_row;
  /// Where this rank's block of plan variable `r` starts in its dataset (global and joined variables).
  Shape block_start(const Region& r) const {
    if (r.kind != RegionKind::joined) return r.start;
    Shape s(r.count.size(), 0);
    s[0] = first_row.at(r.name);
    return s;
  }
  /// Index of the dataset of this rank's block of plan variable `r`.
  std::size_t dataset_of(const Region& r, int rank) const {
    return by_path.at(h5::dataset_path(r.name, r.kind, static_cast<std::uint32_t>(rank)));
  }
};

/// This rank's blocks of the writer's group, in stream order.
std::vector<const BlockPlan*> group_blocks(const WriteContext& ctx) {
  std::vector<const BlockPlan*> out;
  for (const BlockPlan& b : ctx.plan->blocks)
    if (ctx.plan->vars[b.var].group == ctx.group) out.push_back(&b);
  return out;
}

/// Gathers every rank's variables (collective) and lays them out; the same result on every rank.
Result<Layout> gather_layout(MPI_Comm comm, const WriteContext& ctx) {
  int me = 0;
  MPI_Comm_rank(comm, &me);
  ByteWriter w;
  for (const BlockPlan* b : group_blocks(ctx)) {
    const Region& r = ctx.plan->vars[b->var];
    const Shape& shape = r.kind == RegionKind::global ? r.global : r.count;
    w.str(r.name);
    w.put(static_cast<std::uint8_t>(r.dtype));
    w.put(static_cast<std::uint8_t>(r.kind));
    w.put(static_cast<std::uint32_t>(shape.size()));
    for (std::uint64_t d : shape) w.put(d);
  }
  const auto parts = allgatherv_bytes(comm, w.bytes());
  Layout out;
  std::map<std::string, std::size_t> var_by_name;  // sorted: the same order everywhere
  std::map<std::string, Shape> global_shape;
  std::vector<std::pair<std::string, DatasetDesc>> per_rank;
  for (std::uint32_t rank = 0; rank < parts.size(); ++rank) {
    ByteReader rd(parts[rank].data(), parts[rank].size());
    while (!rd.at_end()) {
      VarDesc v;
      std::uint8_t dtype = 0, kind = 0;
      std::uint32_t ndim = 0;
      Shape shape;
      bool ok = rd.str(v.name) && rd.get(dtype) && rd.get(kind) && rd.count(ndim, 8, kMaxDims);
      shape.resize(ok ? ndim : 0);
      for (auto& d : shape) ok = ok && rd.get(d);
      if (!ok) return Status(Code::internal, "hdf5: malformed variable list of rank " + std::to_string(rank));
      v.dtype = static_cast<DType>(dtype);
      v.kind = static_cast<RegionKind>(kind);
      auto [it, fresh] = var_by_name.emplace(v.name, out.vars.size());
      if (fresh) {
        out.vars.push_back(v);
      } else {
        const VarDesc& seen = out.vars[it->second];
        if (seen.dtype != v.dtype || seen.kind != v.kind)
          return Status(Code::invalid_argument,
                        "hdf5: variable '" + v.name + "' has another dtype or kind on rank " + std::to_string(rank));
      }
      if (v.kind == RegionKind::global) {
        auto [g, first] = global_shape.emplace(v.name, shape);
        if (!first && g->second != shape)
          return Status(Code::invalid_argument,
                        "hdf5: variable '" + v.name + "' has another global shape on rank " + std::to_string(rank));
        continue;
      }
      if (v.kind == RegionKind::joined) {  // one dataset of every rank's rows, in rank order
        if (shape.empty())
          return Status(Code::internal,
                        "hdf5: joined variable '" + v.name + "' without rows on rank " + std::to_string(rank));
        auto [g, first] = global_shape.emplace(v.name, shape);
        if (rank == static_cast<std::uint32_t>(me)) out.first_row[v.name] = first ? 0 : g->second[0];
        if (first) continue;
        if (!std::equal(shape.begin() + 1, shape.end(), g->second.begin() + 1, g->second.end()))
          return Status(Code::invalid_argument, "hdf5: joined variable '" + v.name +
                                                    "' has rows of another shape on rank " + std::to_string(rank));
        g->second[0] += shape[0];
        continue;
      }
      per_rank.push_back({v.name, DatasetDesc{h5::dataset_path(v.name, v.kind, rank), 0, rank, shape}});
    }
  }
  // Datasets: globals first (by name), then per-rank ones (by variable, then rank).
  for (auto& [name, shape] : global_shape)
    out.datasets.push_back(DatasetDesc{"/" + name, var_by_name.at(name), 0, shape});
  for (auto& [name, d] : per_rank) {
    d.var = var_by_name.at(name);
    out.datasets.push_back(std::move(d));
  }
  for (std::size_t i = 0; i < out.datasets.size(); ++i)
    if (!out.by_path.emplace(out.datasets[i].path, i).second)
      return Status(Code::invalid_argument, "hdf5: two blocks of one rank in dataset " + out.datasets[i].path);
  return out;
}

/// Whether this rank's block of a global region is one contiguous piece of its dataset (the index
/// records each block as one byte range of the file).
Status check_contiguous(const Region& r) {
  if (r.kind != RegionKind::global) return Status::OK();
  const std::size_t n = r.global.size();
  // Contiguous iff, for some k, count[d] == 1 for d < k and count[d] == global[d] for d > k.
  std::size_t k = 0;
  while (k < n && r.count[k] == 1) ++k;
  for (std::size_t d = k + 1; d < n; ++d)
    if (r.count[d] != r.global[d] && r.elements() != 0)
      return Status(Code::invalid_argument,
                    "hdf5: the block of '" + r.name + "' is not contiguous in its dataset (count[" + std::to_string(d) +
                        "] = " + std::to_string(r.count[d]) + " of " + std::to_string(r.global[d]) +
                        "): split the global array along its first (C order) dimension only - for a Kokkos "
                        "LayoutLeft View or a Fortran array that is its LAST index - or use the posix or mpiio "
                        "transport, which store any box");
  return Status::OK();
}

/// File offset of this rank's block, starting at `start` of a dataset of extents `shape` stored at
/// `dset_off`, if the block is contiguous in it (a joined block is: whole rows).
Result<std::uint64_t> block_offset_in(const Region& r, const Shape& start, const Shape& shape, std::uint64_t dset_off) {
  if (!has_global_shape(r.kind)) return dset_off;
  CKPT_RETURN_IF_ERROR(check_contiguous(r));
  std::uint64_t lin = 0;
  for (std::size_t d = 0; d < shape.size(); ++d) lin = lin * shape[d] + start[d];
  return dset_off + lin * dtype_size(r.dtype);
}

/// What every rank knows about every block after gather_digests(): per dataset and per variable.
struct Digests {
  struct Block {
    bool present = false;
    BlockDigest d;
  };
  std::vector<Block> by_dataset;     ///< per-rank datasets: their block
  std::vector<h5::VarAttrs> by_var;  ///< per variable: by-rank checksums and min/max over blocks
};

/// Gathers the digests of every rank's blocks (collective): O(blocks) bytes in all.
Digests gather_digests(MPI_Comm comm, int nranks, const Layout& layout, const WriteContext& ctx, int rank,
                       const std::vector<BlockDigest>& digests) {
  ByteWriter w;
  for (const BlockPlan* b : group_blocks(ctx)) {
    const BlockDigest& d = digests[b->var];
    w.put(static_cast<std::uint32_t>(layout.dataset_of(ctx.plan->vars[b->var], rank)));
    w.put(d.checksum);
    w.put(static_cast<std::uint8_t>(d.has_stats ? 1 : 0));
    w.put(d.min_bits);
    w.put(d.max_bits);
  }
  const auto parts = allgatherv_bytes(comm, w.bytes());
  Digests out;
  out.by_dataset.resize(layout.datasets.size());
  out.by_var.resize(layout.vars.size());
  for (std::size_t v = 0; v < layout.vars.size(); ++v) {
    out.by_var[v].dtype = layout.vars[v].dtype;
    out.by_var[v].kind = layout.vars[v].kind;
    out.by_var[v].by_rank.assign(static_cast<std::size_t>(nranks), 0);
  }
  for (std::size_t r = 0; r < parts.size(); ++r) {
    ByteReader rd(parts[r].data(), parts[r].size());
    while (!rd.at_end()) {
      std::uint32_t i = 0;
      std::uint8_t has_stats = 0;
      BlockDigest d;
      if (!rd.get(i) || !rd.get(d.checksum) || !rd.get(has_stats) || !rd.get(d.min_bits) || !rd.get(d.max_bits) ||
          i >= layout.datasets.size())
        break;  // (written above by the same code)
      d.has_stats = has_stats != 0;
      out.by_dataset[i] = {true, d};
      h5::VarAttrs& va = out.by_var[layout.datasets[i].var];
      va.by_rank[r] = d.checksum;
      if (d.has_stats) va.stats.add(va.dtype, d.min_bits, d.max_bits);
    }
  }
  return out;
}

/// An open parallel HDF5 checkpoint file and its datasets (created collectively).
class H5Checkpoint {
 public:
  Status create(const std::string& path, MPI_Comm comm, std::uint64_t alignment, Layout layout) {
    m_layout = std::move(layout);
    h5::Id fapl(H5Pcreate(H5P_FILE_ACCESS), H5Pclose);
    if (!fapl.valid()) return h5::error("H5Pcreate");
    CKPT_RETURN_IF_ERROR(h5::check(H5Pset_fapl_mpio(fapl.get(), comm, MPI_INFO_NULL), "H5Pset_fapl_mpio"));
    CKPT_RETURN_IF_ERROR(h5::check(H5Pset_all_coll_metadata_ops(fapl.get(), 1), "H5Pset_all_coll_metadata_ops"));
    CKPT_RETURN_IF_ERROR(h5::check(H5Pset_coll_metadata_write(fapl.get(), 1), "H5Pset_coll_metadata_write"));
    CKPT_RETURN_IF_ERROR(h5::check(H5Pset_alignment(fapl.get(), 4096, alignment), "H5Pset_alignment"));
    m_file = h5::Id(H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, fapl.get()), H5Fclose);
    if (!m_file.valid()) return h5::error("H5Fcreate " + path);
    h5::Id dcpl(H5Pcreate(H5P_DATASET_CREATE), H5Pclose);
    if (!dcpl.valid()) return h5::error("H5Pcreate");
    CKPT_RETURN_IF_ERROR(h5::check(H5Pset_layout(dcpl.get(), H5D_CONTIGUOUS), "H5Pset_layout"));
    CKPT_RETURN_IF_ERROR(h5::check(H5Pset_alloc_time(dcpl.get(), H5D_ALLOC_TIME_EARLY), "H5Pset_alloc_time"));
    CKPT_RETURN_IF_ERROR(h5::check(H5Pset_fill_time(dcpl.get(), H5D_FILL_TIME_NEVER), "H5Pset_fill_time"));
    for (const DatasetDesc& d : m_layout.datasets) {
      auto ds = h5::create_dataset(m_file.get(), d.path, m_layout.vars[d.var].dtype, d.shape, dcpl.get());
      if (!ds.ok()) return ds.status();
      m_dsets.push_back(std::move(ds).value());
    }
    return Status::OK();
  }
  const Layout& layout() const { return m_layout; }
  hid_t dataset(std::size_t i) const { return m_dsets[i].get(); }

  /// File offsets of this rank's blocks, per plan variable (0 for other groups' variables).
  Status block_offsets(const WriteContext& ctx, int rank, std::vector<std::uint64_t>& out) const {
    out.assign(ctx.plan->vars.size(), 0);
    for (const BlockPlan* b : group_blocks(ctx)) {
      const Region& r = ctx.plan->vars[b->var];
      const std::size_t i = m_layout.dataset_of(r, rank);
      const DatasetDesc& d = m_layout.datasets[i];
      if (r.elements() == 0) continue;  // no bytes; the dataset may have no storage (HADDR_UNDEF)
      const haddr_t a = H5Dget_offset(m_dsets[i].get());
      if (a == HADDR_UNDEF) return h5::error("H5Dget_offset " + d.path);
      auto bo = block_offset_in(r, m_layout.block_start(r), d.shape, static_cast<std::uint64_t>(a));
      if (!bo.ok()) return bo.status();
      out[b->var] = bo.value();
    }
    return Status::OK();
  }

  /// Writes the attributes of every variable, dataset and the root (collective: `g` is equal everywhere).
  Status write_attributes(const Digests& g, const WriteContext& ctx, const char* transport) {
    for (std::size_t v = 0; v < m_layout.vars.size(); ++v) {
      if (has_global_shape(m_layout.vars[v].kind)) continue;
      auto grp = h5::open_group(m_file.get(), "/" + m_layout.vars[v].name);
      if (!grp.ok()) return grp.status();
      CKPT_RETURN_IF_ERROR(h5::write_var_attrs(grp->get(), g.by_var[v]));
    }
    for (std::size_t i = 0; i < m_layout.datasets.size(); ++i) {
      const DatasetDesc& d = m_layout.datasets[i];
      const VarDesc& v = m_layout.vars[d.var];
      if (has_global_shape(v.kind)) {
        CKPT_RETURN_IF_ERROR(h5::write_var_attrs(m_dsets[i].get(), g.by_var[d.var]));
      } else if (g.by_dataset[i].present) {
        const BlockDigest& b = g.by_dataset[i].d;
        CKPT_RETURN_IF_ERROR(
            h5::write_rank_attrs(m_dsets[i].get(), v.dtype, d.owner, b.checksum, b.has_stats, b.min_bits, b.max_bits));
      }
    }
    return h5::write_root_attrs(m_file.get(), ctx.step, static_cast<std::uint32_t>(ctx.nranks), transport);
  }

  Status flush_and_close(bool sync) {
    Status s;
    if (m_file.valid() && sync) s = h5::check(H5Fflush(m_file.get(), H5F_SCOPE_GLOBAL), "H5Fflush");
    Status c = close();
    return s.ok() ? c : s;
  }
  Status close() {
    Status s;
    for (h5::Id& d : m_dsets) {
      Status c = d.close();
      if (s.ok()) s = c;
    }
    m_dsets.clear();
    Status c = m_file.close();
    return s.ok() ? c : s;
  }

 private:
  Layout m_layout;
  h5::Id m_file;
  std::vector<h5::Id> m_dsets;  // destroyed (closed) before the file: H5Fclose with the MPI-IO driver
                                // fails while datasets are open
};

/// Collective over `comm`, after the file's close: rank 0 wrote the file (its size is rank 0's bytes_written);
/// every rank records that size for the index (Transport::index_writer), one stat and a broadcast. Fails on
/// every rank when rank 0 cannot stat it.
Result<Placement> placement_of(const std::string& name, const std::string& path, MPI_Comm comm, int rank,
                               std::vector<std::uint64_t> offsets) {
  constexpr std::uint64_t kNoSize = ~std::uint64_t{0};
  Placement p{name, 0, 0, 0};
  std::uint64_t size = kNoSize;
  Status s;
  if (rank == 0) {
    struct stat st {};
    if (::stat(path.c_str(), &st) == 0)
      size = static_cast<std::uint64_t>(st.st_size);
    else
      s = errno_status("stat " + path);
    p.file_bytes = size == kNoSize ? 0 : size;
  }
  MPI_Bcast(&size, 1, MPI_UINT64_T, 0, comm);
  if (size == kNoSize) return rank == 0 ? s : Status(Code::io_error, "rank 0 could not stat " + path);
  p.record_bytes = size;
  p.block_offsets = std::move(offsets);
  return p;
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
    m_blocks = group_blocks(ctx);
  }
  ~Hdf5Writer() override {
    if (!m_done) abort();
  }

  Status start() override {  // write thread, collective, in segment order
    m_started = true;
    auto layout = gather_layout(m_comm, m_ctx);
    Status s = layout.status();
    {
      std::lock_guard<std::mutex> lk(h5_lock());
      if (s.ok()) s = m_file.create(m_path, m_comm, m_alignment, std::move(layout).value());
      if (s.ok()) s = m_file.block_offsets(m_ctx, m_rank, m_offsets);
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
    // Map the window [a, b) of the stream to the blocks in it: the first block ending after a, by
    // binary search over the blocks in stream order, then forward while blocks start before b.
    const std::uint64_t a = m_ctx.segment_begin + offset, b = a + n;
    auto it = std::partition_point(m_blocks.begin(), m_blocks.end(),
                                   [a](const BlockPlan* bp) { return bp->offset + bp->length <= a; });
    for (; it != m_blocks.end() && (*it)->offset < b; ++it) {
      const BlockPlan& bp = **it;
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
    Status agreed = agree(m_comm, m_failed ? Status(Code::io_error, "hdf5: start() failed") : s);
    if (agreed.ok() && digests != nullptr) {
      const Digests g = gather_digests(m_comm, m_size, m_file.layout(), m_ctx, m_rank, *digests);
      std::lock_guard<std::mutex> lk(h5_lock());
      s = m_file.write_attributes(g, m_ctx, "hdf5");
      Status c = m_file.flush_and_close(m_ctx.fsync);
      if (s.ok()) s = c;
    } else {
      std::lock_guard<std::mutex> lk(h5_lock());
      (void)m_file.close();
    }
    if (agreed.ok()) agreed = agree(m_comm, s);  // attributes and close are collective: fail together
    if (!agreed.ok()) return agreed.with_context("hdf5: writing " + m_path);
    return placement_of(m_name, m_path, m_comm, m_rank, m_offsets);
  }

  WriteContext m_ctx;
  MPI_Comm m_comm;
  std::uint64_t m_alignment;
  int m_rank = 0, m_size = 1;
  std::string m_name, m_path;
  std::vector<const BlockPlan*> m_blocks;  ///< this group's blocks, in stream order (for write())
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

/// Writes every dataset of `f`: one collective H5Dwrite per global (or joined) dataset (a hyperslab per rank, none
/// for a rank without a block), this rank's per-rank datasets independently.
Status write_datasets(const H5Checkpoint& f, const WriteContext& ctx, int rank) {
  const Layout& layout = f.layout();
  std::vector<const BlockPlan*> mine(layout.datasets.size(), nullptr);  // dataset -> this rank's block
  for (const BlockPlan* b : group_blocks(ctx)) mine[layout.dataset_of(ctx.plan->vars[b->var], rank)] = b;
  h5::Id coll(H5Pcreate(H5P_DATASET_XFER), H5Pclose), indep(H5Pcreate(H5P_DATASET_XFER), H5Pclose);
  if (!coll.valid() || !indep.valid()) return h5::error("H5Pcreate");
  CKPT_RETURN_IF_ERROR(h5::check(H5Pset_dxpl_mpio(coll.get(), H5FD_MPIO_COLLECTIVE), "H5Pset_dxpl_mpio"));
  CKPT_RETURN_IF_ERROR(h5::check(H5Pset_dxpl_mpio(indep.get(), H5FD_MPIO_INDEPENDENT), "H5Pset_dxpl_mpio"));
  Status s;  // a global dataset's write is collective: keep going after a failure so nobody hangs
  for (std::size_t i = 0; i < layout.datasets.size(); ++i) {
    const DatasetDesc& d = layout.datasets[i];
    const bool global = has_global_shape(layout.vars[d.var].kind);
    const BlockPlan* mb = mine[i];
    if (!global && mb == nullptr) continue;  // somebody else's per-rank dataset
    // An empty array (a joined one nobody has rows of): nothing to write, and HDF5 refuses a
    // collective write into a dataset without storage. Its shape is the same on every rank.
    if (!d.shape.empty() && std::find(d.shape.begin(), d.shape.end(), 0) != d.shape.end()) continue;
    const Region* r = mb ? &ctx.plan->vars[mb->var] : nullptr;
    h5::Id fspace(H5Dget_space(f.dataset(i)), H5Sclose), mspace;
    Status ds = fspace.valid() ? Status::OK() : h5::error("H5Dget_space " + d.path);
    if (!global && r->packed()) {
      mspace = h5::Id(H5Scopy(fspace.get()), H5Sclose);
    } else if (r != nullptr && r->elements() > 0) {
      std::vector<hsize_t> ct(r->count.begin(), r->count.end());
      if (global) {
        const Shape start = layout.block_start(*r);
        std::vector<hsize_t> st(start.begin(), start.end());
        if (ds.ok())
          ds = h5::check(H5Sselect_hyperslab(fspace.get(), H5S_SELECT_SET, st.data(), nullptr, ct.data(), nullptr),
                         "select the block of " + d.path);
      }
      if (r->packed()) {
        mspace = h5::Id(H5Screate_simple(static_cast<int>(ct.size()), ct.data(), nullptr), H5Sclose);
      } else {
        // A memory selection: HDF5 gathers the box out of the allocation itself.
        std::vector<hsize_t> alloc(r->mem_alloc.begin(), r->mem_alloc.end()),
            at(r->mem_start.begin(), r->mem_start.end());
        mspace = h5::Id(H5Screate_simple(static_cast<int>(alloc.size()), alloc.data(), nullptr), H5Sclose);
        if (mspace.valid() && ds.ok())
          ds = h5::check(H5Sselect_hyperslab(mspace.get(), H5S_SELECT_SET, at.data(), nullptr, ct.data(), nullptr),
                         "select the box of " + d.path + " in its memory");
      }
    } else {
      if (ds.ok()) ds = h5::check(H5Sselect_none(fspace.get()), "H5Sselect_none");
      const hsize_t one = 1;
      mspace = h5::Id(H5Screate_simple(1, &one, nullptr), H5Sclose);
      if (mspace.valid() && ds.ok()) ds = h5::check(H5Sselect_none(mspace.get()), "H5Sselect_none");
    }
    if (ds.ok() && !mspace.valid()) ds = h5::error("memory dataspace of " + d.path);
    static const char dummy = 0;
    const void* src = mb && mb->length > 0 ? r->ptr : &dummy;
    // A collective write with a failed selection still takes part (selecting nothing) so that the
    // other ranks' writes complete.
    if (!ds.ok() && global && fspace.valid() && mspace.valid()) {
      (void)H5Sselect_none(fspace.get());
      (void)H5Sselect_none(mspace.get());
    }
    if ((ds.ok() || global) && fspace.valid() && mspace.valid()) {
      const herr_t rc = H5Dwrite(f.dataset(i), h5::mem_type(layout.vars[d.var].dtype), mspace.get(), fspace.get(),
                                 global ? coll.get() : indep.get(), src);
      if (ds.ok()) ds = h5::check(rc, "H5Dwrite " + d.path);
    }
    if (s.ok()) s = ds;
  }
  return s;
}

Result<Placement> write_sync(const WriteContext& ctx, MPI_Comm comm, std::uint64_t alignment) {
  int rank = 0, size = 1;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  const std::string name = ctx.unique_file_name("ckpt", 0) + ".h5", path = ctx.dir + "/" + name;
  auto layout = gather_layout(comm, ctx);
  if (Status a = agree(comm, layout.status()); !a.ok()) return a.with_context("hdf5-sync: variables");
  // Digests of this rank's blocks, computed here from the application's memory (host only).
  std::vector<BlockDigest> digests(ctx.plan->vars.size());
  Status s;
  for (const BlockPlan* b : group_blocks(ctx)) {
    const Region& r = ctx.plan->vars[b->var];
    if (r.mem == MemoryKind::device)
      s = Status(Code::invalid_argument, "hdf5-sync writes from host memory only ('" + r.name + "')");
    if (!s.ok()) continue;
    // An empty block (a joined array's rank with 0 rows) has the checksum of no bytes, as in the index.
    // A memory selection: the box's rows, in order (what the dataset holds).
    Hasher h;
    MinMax mm(r.dtype);
    const bool stats = dtype_has_stats(r.dtype) && b->length > 0;
    auto take = [&](const void* p, std::size_t n) {
      h.update(p, n);
      if (stats) mm.update(p, n);
    };
    if (r.packed()) {
      take(r.ptr, b->length);
    } else {
      const auto* base = static_cast<const std::uint8_t*>(r.ptr);
      (void)for_each_selection_row(r.mem_start, r.count, r.mem_alloc, dtype_size(r.dtype), 0, b->length,
                                   [&](std::uint64_t in_memory, std::uint64_t, std::uint64_t len) {
                                     take(base + in_memory, len);
                                     return Status::OK();
                                   });
    }
    digests[b->var].checksum = h.digest();
    if (stats) digests[b->var] = {digests[b->var].checksum, mm.valid(), mm.min_bits(), mm.max_bits()};
  }
  CKPT_RETURN_IF_ERROR(agree(comm, s));
  std::lock_guard<std::mutex> lk(h5_lock());
  H5Checkpoint f;
  s = f.create(path, comm, alignment, std::move(layout).value());
  std::vector<std::uint64_t> offsets;
  if (s.ok()) s = f.block_offsets(ctx, rank, offsets);
  if (Status a = agree(comm, s); !a.ok()) {
    (void)f.close();
    return a.with_context("hdf5-sync: creating " + path);
  }
  s = write_datasets(f, ctx, rank);
  Status agreed = agree(comm, s);
  if (agreed.ok()) {
    const Digests g = gather_digests(comm, size, f.layout(), ctx, rank, digests);
    s = f.write_attributes(g, ctx, "hdf5-sync");
    Status c = f.flush_and_close(ctx.fsync);
    if (s.ok()) s = c;
    agreed = agree(comm, s);
  } else {
    (void)f.close();
  }
  if (!agreed.ok()) return agreed.with_context("hdf5-sync: writing " + path);
  return placement_of(name, path, comm, rank, std::move(offsets));
}

class Hdf5Transport final : public Transport {
 public:
  Hdf5Transport(bool sync, const TransportConfig& c, const TransportEnv& env) : m_sync(sync), m_alignment(c.alignment) {
    MPI_Comm_dup(env.comm, &m_comm);  // sync: app thread; async: write thread only
  }
  ~Hdf5Transport() override { free_comm(m_comm); }
  const char* name() const override { return m_sync ? "hdf5-sync" : "hdf5"; }
  bool collective_open() const override { return true; }
  bool synchronous() const override { return m_sync; }
  bool writes_with_mpi() const override { return !m_sync; }  // hdf5-sync writes everything in open()
  int index_writer() const override { return kOwnFiles; }    // every rank records the file's size
  Status check_region(const Region& r) const override {
    // hdf5-sync writes from the application's memory at the region's one pointer (write_sync), not from
    // staging: the pieces of a Scattered region are not there.
    if (m_sync && r.pieces)
      return Status(Code::invalid_argument, "hdf5-sync: region '" + r.name +
                                                "' is Scattered (separately allocated pieces); hdf5-sync writes "
                                                "from one pointer per region: use hdf5, posix or mpiio for it");
    return check_contiguous(r);
  }
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

Result<std::unique_ptr<Transport>> make_hdf5_transport(const TransportConfig& c, const TransportEnv& env) {
  return std::unique_ptr<Transport>(std::make_unique<Hdf5Transport>(false, c, env));
}
Result<std::unique_ptr<Transport>> make_hdf5_sync_transport(const TransportConfig& c, const TransportEnv& env) {
  return std::unique_ptr<Transport>(std::make_unique<Hdf5Transport>(true, c, env));
}

}  // namespace ckpt::detail
