// `ckpt convert`: one checkpoint -> one HDF5 file that h5py, h5dump and ParaView open without ckpt.
// Layout (docs/cli.md): a global variable is one dataset with its global shape; a uniform local or
// scalar variable is one dataset; a per-rank variable is a group with one dataset per rank
// ("rank<r>"). Statistics, checksums and provenance are attributes. Serial HDF5 calls only (the
// parallel library works serially with the default file driver); MPI is not initialised.
#include <cstdio>
#include <string>
#include <vector>

#include "ckpt/config.hpp"
#include "tools/commands.hpp"
#include "tools/json_util.hpp"
#include "tools/store.hpp"

#if CKPT_HAVE_HDF5
#include <hdf5.h>
#include <limits.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>
#endif

namespace ckpt::tools {

#if !CKPT_HAVE_HDF5

int run_convert(const ConvertArgs&) {
  return fail("convert", "built without HDF5 (reconfigure with CKPT_ENABLE_HDF5=ON and a parallel HDF5 installed)");
}

#else

namespace {

/// Owns an HDF5 identifier and closes it with the right H5*close.
class H5Id {
 public:
  using Closer = herr_t (*)(hid_t);
  H5Id() = default;
  H5Id(hid_t id, Closer c) : m_id(id), m_close(c) {}
  ~H5Id() { reset(); }
  H5Id(H5Id&& o) noexcept : m_id(o.m_id), m_close(o.m_close) { o.m_id = -1; }
  H5Id& operator=(H5Id&& o) noexcept {
    if (this != &o) {
      reset();
      m_id = o.m_id;
      m_close = o.m_close;
      o.m_id = -1;
    }
    return *this;
  }
  H5Id(const H5Id&) = delete;
  H5Id& operator=(const H5Id&) = delete;
  hid_t get() const { return m_id; }
  bool valid() const { return m_id >= 0; }
  void reset() {
    if (m_id >= 0 && m_close) m_close(m_id);
    m_id = -1;
  }

 private:
  hid_t m_id = -1;
  Closer m_close = nullptr;
};

herr_t first_error(unsigned n, const H5E_error2_t* e, void* out) {
  if (n == 0) *static_cast<std::string*>(out) = std::string(e->func_name) + ": " + (e->desc ? e->desc : "?");
  return 0;
}

/// A Status for the failed HDF5 call `what`, with the innermost message of the error stack.
Status h5_error(const std::string& what) {
  std::string msg;
  H5Ewalk2(H5E_DEFAULT, H5E_WALK_DOWNWARD, first_error, &msg);
  H5Eclear2(H5E_DEFAULT);
  return Status(Code::io_error, "HDF5: " + what + (msg.empty() ? "" : " (" + msg + ")"));
}

/// File (little-endian, fixed) and memory (native) types of a dtype; `bytes` is stored as u8.
hid_t file_type(DType t) {
  switch (t) {
    case DType::i8: return H5T_STD_I8LE;
    case DType::u16: return H5T_STD_U16LE;
    case DType::i16: return H5T_STD_I16LE;
    case DType::u32: return H5T_STD_U32LE;
    case DType::i32: return H5T_STD_I32LE;
    case DType::u64: return H5T_STD_U64LE;
    case DType::i64: return H5T_STD_I64LE;
    case DType::f32: return H5T_IEEE_F32LE;
    case DType::f64: return H5T_IEEE_F64LE;
    default: return H5T_STD_U8LE;
  }
}
hid_t mem_type(DType t) {
  switch (t) {
    case DType::i8: return H5T_NATIVE_INT8;
    case DType::u16: return H5T_NATIVE_UINT16;
    case DType::i16: return H5T_NATIVE_INT16;
    case DType::u32: return H5T_NATIVE_UINT32;
    case DType::i32: return H5T_NATIVE_INT32;
    case DType::u64: return H5T_NATIVE_UINT64;
    case DType::i64: return H5T_NATIVE_INT64;
    case DType::f32: return H5T_NATIVE_FLOAT;
    case DType::f64: return H5T_NATIVE_DOUBLE;
    default: return H5T_NATIVE_UINT8;
  }
}

H5Id make_space(const Shape& dims) {
  if (dims.empty()) return H5Id(H5Screate(H5S_SCALAR), H5Sclose);
  std::vector<hsize_t> d(dims.begin(), dims.end());
  return H5Id(H5Screate_simple(static_cast<int>(d.size()), d.data(), nullptr), H5Sclose);
}

Status attr_raw(hid_t obj, const std::string& name, hid_t ftype, hid_t mtype, const void* value, hsize_t n = 0) {
  if (H5Aexists(obj, name.c_str()) > 0) H5Adelete(obj, name.c_str());
  H5Id space = n == 0 ? H5Id(H5Screate(H5S_SCALAR), H5Sclose) : H5Id(H5Screate_simple(1, &n, nullptr), H5Sclose);
  H5Id a(H5Acreate2(obj, name.c_str(), ftype, space.get(), H5P_DEFAULT, H5P_DEFAULT), H5Aclose);
  if (!a.valid() || H5Awrite(a.get(), mtype, value) < 0) return h5_error("write attribute " + name);
  return Status::OK();
}

/// A variable-length UTF-8 string attribute (h5py reads it as str, h5dump prints it plainly).
Status attr_string(hid_t obj, const std::string& name, const std::string& value) {
  H5Id t(H5Tcopy(H5T_C_S1), H5Tclose);
  H5Tset_size(t.get(), H5T_VARIABLE);
  H5Tset_cset(t.get(), H5T_CSET_UTF8);
  const char* p = value.c_str();
  return attr_raw(obj, name, t.get(), t.get(), &p);
}

Status attr_i64(hid_t obj, const std::string& name, std::int64_t v) {
  return attr_raw(obj, name, H5T_STD_I64LE, H5T_NATIVE_INT64, &v);
}
Status attr_u64(hid_t obj, const std::string& name, std::uint64_t v) {
  return attr_raw(obj, name, H5T_STD_U64LE, H5T_NATIVE_UINT64, &v);
}
Status attr_f64(hid_t obj, const std::string& name, double v) {
  return attr_raw(obj, name, H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, &v);
}

/// A stored min/max as an attribute of its class: f64 for floats, i64 / u64 for integers.
Status attr_stat(hid_t obj, const std::string& name, DType t, std::uint64_t bits) {
  switch (t) {
    case DType::f32:
    case DType::f64: return attr_f64(obj, name, detail::stat_to_double(t, bits));
    case DType::i8:
    case DType::i16:
    case DType::i32:
    case DType::i64: return attr_i64(obj, name, static_cast<std::int64_t>(bits));
    default: return attr_u64(obj, name, bits);
  }
}

class Converter {
 public:
  Converter(const Checkpoint& c, hid_t file) : m_c(c), m_file(file), m_reader(c) {}

  Status run() {
    const Index& idx = m_c.index;
    CKPT_RETURN_IF_ERROR(attr_i64(m_file, "ckpt_step", idx.step));
    CKPT_RETURN_IF_ERROR(attr_i64(m_file, "ckpt_nranks", idx.nranks));
    CKPT_RETURN_IF_ERROR(attr_string(m_file, "ckpt_transport", idx.transport));
    CKPT_RETURN_IF_ERROR(attr_string(m_file, "ckpt_id", hex64(idx.ckpt_id)));
    CKPT_RETURN_IF_ERROR(attr_f64(m_file, "ckpt_created_unix", idx.created_unix));
    CKPT_RETURN_IF_ERROR(attr_string(m_file, "ckpt_source", m_c.dir));
    CKPT_RETURN_IF_ERROR(attr_i64(m_file, "ckpt_format_version", detail::kFormatVersion));
    for (auto& kv : idx.attrs) CKPT_RETURN_IF_ERROR(attr_string(m_file, "ckpt_attr." + kv.first, kv.second));
    for (std::uint32_t v = 0; v < idx.vars.size(); ++v)
      CKPT_RETURN_IF_ERROR(convert_var(v).with_context("variable '" + idx.vars[v].name + "'"));
    return Status::OK();
  }

 private:
  /// Attributes every variable's object gets.
  Status var_attrs(hid_t obj, std::uint32_t v, const char* layout) {
    const VarRecord& r = m_c.index.vars[v];
    CKPT_RETURN_IF_ERROR(attr_string(obj, "ckpt_dtype", dtype_name(r.dtype)));
    CKPT_RETURN_IF_ERROR(attr_string(obj, "ckpt_kind", detail::region_kind_name(r.kind)));
    CKPT_RETURN_IF_ERROR(attr_string(obj, "ckpt_layout", layout));
    CKPT_RETURN_IF_ERROR(attr_string(obj, "transport", m_c.index.transport));
    const VarStats st = var_stats(m_c.index, v);
    if (st.valid) {
      CKPT_RETURN_IF_ERROR(attr_stat(obj, "min", r.dtype, st.min_bits));
      CKPT_RETURN_IF_ERROR(attr_stat(obj, "max", r.dtype, st.max_bits));
    }
    std::vector<std::uint64_t> sums;
    for (auto* b : blocks_of(m_c.index, v)) sums.push_back(b->checksum);
    CKPT_RETURN_IF_ERROR(attr_u64(obj, "ckpt_nblocks", sums.size()));
    if (!sums.empty())
      CKPT_RETURN_IF_ERROR(
          attr_raw(obj, "ckpt_block_checksums", H5T_STD_U64LE, H5T_NATIVE_UINT64, sums.data(), sums.size()));
    for (auto& kv : r.attrs) CKPT_RETURN_IF_ERROR(attr_string(obj, kv.first, kv.second));
    return Status::OK();
  }

  Result<H5Id> create_dataset(hid_t parent, const std::string& path, DType t, const Shape& dims) {
    H5Id lcpl(H5Pcreate(H5P_LINK_CREATE), H5Pclose);
    H5Pset_create_intermediate_group(lcpl.get(), 1);
    H5Id space = make_space(dims);
    H5Id ds(H5Dcreate2(parent, path.c_str(), file_type(t), space.get(), lcpl.get(), H5P_DEFAULT, H5P_DEFAULT),
            H5Dclose);
    if (!ds.valid()) return h5_error("create dataset /" + path);
    return ds;
  }

  /// Writes `data` (a whole block) into the box [start, start + count) of dataset `ds`.
  Status write_box(hid_t ds, DType t, const Shape& start, const Shape& count, const void* data) {
    if (count.empty()) {
      if (H5Dwrite(ds, mem_type(t), H5S_ALL, H5S_ALL, H5P_DEFAULT, data) < 0) return h5_error("write");
      return Status::OK();
    }
    H5Id fspace(H5Dget_space(ds), H5Sclose);
    std::vector<hsize_t> s(start.begin(), start.end()), n(count.begin(), count.end());
    if (H5Sselect_hyperslab(fspace.get(), H5S_SELECT_SET, s.data(), nullptr, n.data(), nullptr) < 0)
      return h5_error("select block");
    H5Id mspace = make_space(count);
    if (H5Dwrite(ds, mem_type(t), mspace.get(), fspace.get(), H5P_DEFAULT, data) < 0) return h5_error("write block");
    return Status::OK();
  }

  /// XXH3-64 of the dataset's bytes in C order, read back in slabs of whole rows of dimension 0.
  Result<std::uint64_t> dataset_checksum(hid_t ds, DType t, const Shape& dims) {
    const std::size_t esize = dtype_size(t);
    detail::Hasher h;
    if (dims.empty()) {
      std::vector<std::uint8_t> buf(esize);
      if (H5Dread(ds, mem_type(t), H5S_ALL, H5S_ALL, H5P_DEFAULT, buf.data()) < 0) return h5_error("read back");
      h.update(buf.data(), buf.size());
      return h.digest();
    }
    const std::uint64_t row_elems = shape_elements(dims) / std::max<std::uint64_t>(1, dims[0]);
    const std::uint64_t rows_per_slab =
        std::max<std::uint64_t>(1, (8u << 20) / std::max<std::uint64_t>(1, row_elems * esize));
    std::vector<std::uint8_t> buf;
    H5Id fspace(H5Dget_space(ds), H5Sclose);
    for (std::uint64_t r0 = 0; r0 < dims[0] && row_elems > 0; r0 += rows_per_slab) {
      Shape start(dims.size(), 0), count = dims;
      start[0] = r0;
      count[0] = std::min(rows_per_slab, dims[0] - r0);
      buf.resize(static_cast<std::size_t>(shape_elements(count) * esize));
      std::vector<hsize_t> s(start.begin(), start.end()), n(count.begin(), count.end());
      H5Sselect_hyperslab(fspace.get(), H5S_SELECT_SET, s.data(), nullptr, n.data(), nullptr);
      H5Id mspace = make_space(count);
      if (H5Dread(ds, mem_type(t), mspace.get(), fspace.get(), H5P_DEFAULT, buf.data()) < 0)
        return h5_error("read back");
      h.update(buf.data(), buf.size());
    }
    return h.digest();
  }

  Status convert_var(std::uint32_t v) {
    const VarRecord& r = m_c.index.vars[v];
    const auto blocks = blocks_of(m_c.index, v);
    if (r.kind == RegionKind::global) {
      auto ds = create_dataset(m_file, r.name, r.dtype, r.global);
      if (!ds.ok()) return ds.status();
      for (auto* b : blocks) {
        if (block_elements(*b) == 0) continue;
        CKPT_RETURN_IF_ERROR(m_reader.read(*b, m_buf));
        CKPT_RETURN_IF_ERROR(write_box(ds->get(), r.dtype, b->start, b->count, m_buf.data()));
      }
      auto sum = dataset_checksum(ds->get(), r.dtype, r.global);
      if (!sum.ok()) return sum.status();
      CKPT_RETURN_IF_ERROR(attr_u64(ds->get(), "checksum", sum.value()));
      return var_attrs(ds->get(), v, "global");
    }
    if (r.uniform && !blocks.empty()) {  // one value for every rank: one dataset
      const BlockRecord* b = blocks.front();
      auto ds = create_dataset(m_file, r.name, r.dtype, b->count);
      if (!ds.ok()) return ds.status();
      CKPT_RETURN_IF_ERROR(m_reader.read(*b, m_buf));
      if (block_elements(*b) > 0)
        CKPT_RETURN_IF_ERROR(write_box(ds->get(), r.dtype, Shape(b->count.size(), 0), b->count, m_buf.data()));
      CKPT_RETURN_IF_ERROR(attr_u64(ds->get(), "checksum", b->checksum));
      return var_attrs(ds->get(), v, "uniform");
    }
    // Per rank: group <name> with datasets rank<r>.
    H5Id lcpl(H5Pcreate(H5P_LINK_CREATE), H5Pclose);
    H5Pset_create_intermediate_group(lcpl.get(), 1);
    H5Id g(H5Gcreate2(m_file, r.name.c_str(), lcpl.get(), H5P_DEFAULT, H5P_DEFAULT), H5Gclose);
    if (!g.valid()) return h5_error("create group /" + r.name);
    for (auto* b : blocks) {
      auto ds = create_dataset(g.get(), "rank" + std::to_string(b->rank), r.dtype, b->count);
      if (!ds.ok()) return ds.status();
      CKPT_RETURN_IF_ERROR(m_reader.read(*b, m_buf));
      if (block_elements(*b) > 0)
        CKPT_RETURN_IF_ERROR(write_box(ds->get(), r.dtype, Shape(b->count.size(), 0), b->count, m_buf.data()));
      CKPT_RETURN_IF_ERROR(attr_u64(ds->get(), "checksum", b->checksum));
      CKPT_RETURN_IF_ERROR(attr_i64(ds->get(), "rank", b->rank));
      if (b->has_stats) {
        CKPT_RETURN_IF_ERROR(attr_stat(ds->get(), "min", r.dtype, b->min_bits));
        CKPT_RETURN_IF_ERROR(attr_stat(ds->get(), "max", r.dtype, b->max_bits));
      }
    }
    return var_attrs(g.get(), v, "per_rank");
  }

  const Checkpoint& m_c;
  hid_t m_file;
  BlockReader m_reader;
  std::vector<std::uint8_t> m_buf;
};

}  // namespace

namespace {
/// The output must not land inside a checkpoint (it would replace `index` or a data file, or add a
/// file verify then reports) nor take a name of a checkpoint root's own (latest, .lock, ckpt.<step>).
Status check_output_outside_checkpoints(const std::string& output) {
  const std::size_t slash = output.find_last_of('/');
  const std::string parent = slash == std::string::npos ? "." : (slash == 0 ? "/" : output.substr(0, slash));
  const std::string name = slash == std::string::npos ? output : output.substr(slash + 1);
  char real[PATH_MAX];
  if (::realpath(parent.c_str(), real) == nullptr) return Status::OK();  // H5Fcreate reports it
  const std::string dir = real;
  const std::size_t dslash = dir.find_last_of('/');
  const std::string dir_name = dslash == std::string::npos ? dir : dir.substr(dslash + 1);
  if (::access((dir + "/index").c_str(), F_OK) == 0 || detail::parse_step_name(dir_name).has_value())
    return Status(Code::invalid_argument, "refusing to write " + output + " inside checkpoint " + dir);
  if (name == "latest" || name == ".lock" || name == "index" || detail::parse_step_name(name).has_value()) {
    auto steps = detail::make_directory_store(dir)->list();
    if (steps.ok() && !steps->empty())
      return Status(Code::invalid_argument,
                    "refusing to write " + output + ": '" + name + "' is a name of the checkpoint root " + dir);
  }
  return Status::OK();
}
}  // namespace

int run_convert(const ConvertArgs& a) {
  auto c = resolve_checkpoint(a.path);
  if (!c.ok()) return fail("convert", c.status().message());
  struct stat st {};
  if (!a.force && ::lstat(a.output.c_str(), &st) == 0)
    return fail("convert", a.output + " exists (use --force to overwrite)");
  if (Status where = check_output_outside_checkpoints(a.output); !where.ok()) return fail("convert", where.message());
  H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);  // errors become Status messages, not stack dumps
  // Written under a temporary name of this process, created exclusively (O_EXCL: a link planted at
  // that name is never followed), and renamed, so a failed conversion leaves no half file behind.
  const std::string tmp = a.output + ".tmp." + std::to_string(::getpid());
  Status s;
  {
    H5Id file(H5Fcreate(tmp.c_str(), H5F_ACC_EXCL, H5P_DEFAULT, H5P_DEFAULT), H5Fclose);
    if (!file.valid()) return fail("convert", h5_error("create " + tmp).message());
    s = Converter(c.value(), file.get()).run();
    if (s.ok() && H5Fflush(file.get(), H5F_SCOPE_GLOBAL) < 0) s = h5_error("flush " + tmp);
  }
  if (s.ok() && ::rename(tmp.c_str(), a.output.c_str()) != 0)
    s = Status(Code::io_error, "rename " + tmp + " to " + a.output);
  if (!s.ok()) {
    ::unlink(tmp.c_str());
    return fail("convert", s.message());
  }
  std::printf("%s: step %lld, %zu variables -> %s\n", c->dir.c_str(), static_cast<long long>(c->index.step),
              c->index.vars.size(), a.output.c_str());
  return kExitOk;
}

#endif  // CKPT_HAVE_HDF5

}  // namespace ckpt::tools
