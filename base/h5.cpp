// HDF5 helpers and ckpt's HDF5 layout (docs/format.md, "HDF5 files").
#include "base/h5.hpp"

#include "base/format.hpp"
#include "base/hash.hpp"
#include "base/utf8.hpp"

namespace ckpt::detail::h5 {

Id& Id::operator=(Id&& o) noexcept {
  if (this != &o) {
    reset();
    m_id = o.m_id;
    m_close = o.m_close;
    o.m_id = -1;
  }
  return *this;
}

Status Id::close() {
  Status s;
  if (m_id >= 0 && m_close != nullptr && m_close(m_id) < 0) s = error("close");
  m_id = -1;
  return s;
}

namespace {
herr_t first_error(unsigned n, const H5E_error2_t* e, void* out) {
  if (n == 0) *static_cast<std::string*>(out) = std::string(e->func_name) + ": " + (e->desc ? e->desc : "?");
  return 0;
}
}  // namespace

Status error(const std::string& what) {
  std::string msg;
  H5Ewalk2(H5E_DEFAULT, H5E_WALK_DOWNWARD, first_error, &msg);
  H5Eclear2(H5E_DEFAULT);
  return Status(Code::io_error, "HDF5: " + what + (msg.empty() ? "" : " (" + msg + ")"));
}

void quiet() { H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr); }

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
    case DType::u8:
    case DType::bytes: break;
  }
  return H5T_STD_U8LE;
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
    case DType::u8:
    case DType::bytes: break;
  }
  return H5T_NATIVE_UINT8;
}

Result<Id> make_space(const Shape& dims) {
  Id s;
  if (dims.empty()) {
    s = Id(H5Screate(H5S_SCALAR), H5Sclose);
  } else {
    std::vector<hsize_t> d(dims.begin(), dims.end());
    s = Id(H5Screate_simple(static_cast<int>(d.size()), d.data(), nullptr), H5Sclose);
  }
  if (!s.valid()) return error("create dataspace");
  return s;
}

Result<Id> create_dataset(hid_t file, const std::string& path, DType t, const Shape& dims, hid_t dcpl) {
  Id lcpl(H5Pcreate(H5P_LINK_CREATE), H5Pclose);
  if (!lcpl.valid()) return error("H5Pcreate");
  CKPT_RETURN_IF_ERROR(check(H5Pset_create_intermediate_group(lcpl.get(), 1), "H5Pset_create_intermediate_group"));
  auto space = make_space(dims);
  if (!space.ok()) return space.status();
  Id ds(H5Dcreate2(file, path.c_str(), file_type(t), space->get(), lcpl.get(), dcpl, H5P_DEFAULT), H5Dclose);
  if (!ds.valid()) return error("create dataset " + path);
  return ds;
}

Result<Id> open_group(hid_t file, const std::string& path) {
  Id g(H5Gopen2(file, path.c_str(), H5P_DEFAULT), H5Gclose);
  if (!g.valid()) return error("open group " + path);
  return g;
}

namespace {
/// HDF5's character set for the bytes of `s`: UTF-8 when they are, else ASCII, which HDF5 and its readers
/// take as 8-bit bytes with no encoding claimed (h5py then gives a str with surrogate escapes).
H5T_cset_t cset_of(const std::string& s) { return is_utf8(s) ? H5T_CSET_UTF8 : H5T_CSET_ASCII; }
}  // namespace

Status attr_raw(hid_t obj, const std::string& name, hid_t ftype, hid_t mtype, const void* value, hsize_t n) {
  // Names are bytes too (annotation keys): HDF5 names are C strings, so a NUL cannot be written.
  if (name.find('\0') != std::string::npos)
    return Status(Code::invalid_argument, "attribute name '" + name + "' holds a NUL byte, which an HDF5 name cannot");
  const htri_t exists = H5Aexists(obj, name.c_str());
  if (exists < 0) return error("attribute " + name);
  if (exists > 0) CKPT_RETURN_IF_ERROR(check(H5Adelete(obj, name.c_str()), "replace attribute " + name));
  Id space = n == 0 ? Id(H5Screate(H5S_SCALAR), H5Sclose) : Id(H5Screate_simple(1, &n, nullptr), H5Sclose);
  Id acpl(H5Pcreate(H5P_ATTRIBUTE_CREATE), H5Pclose);
  if (!space.valid() || !acpl.valid() || H5Pset_char_encoding(acpl.get(), cset_of(name)) < 0)
    return error("attribute " + name);
  Id a(H5Acreate2(obj, name.c_str(), ftype, space.get(), acpl.get(), H5P_DEFAULT), H5Aclose);
  if (!a.valid() || H5Awrite(a.get(), mtype, value) < 0) return error("write attribute " + name);
  return a.close();
}

Status attr_string(hid_t obj, const std::string& name, const std::string& value) {
  // A NUL ends an HDF5 string: such a value (annotate() takes any bytes) is kept whole as bytes.
  if (value.find('\0') != std::string::npos)
    return attr_raw(obj, name, H5T_STD_U8LE, H5T_NATIVE_UINT8, value.data(), value.size());
  Id t(H5Tcopy(H5T_C_S1), H5Tclose);
  if (!t.valid() || H5Tset_size(t.get(), H5T_VARIABLE) < 0 || H5Tset_cset(t.get(), cset_of(value)) < 0)
    return error("string type for attribute " + name);
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

namespace {
enum class StatClass { f64, i64, u64 };
StatClass stat_class(DType t) {
  switch (t) {
    case DType::f32:
    case DType::f64: return StatClass::f64;
    case DType::i8:
    case DType::i16:
    case DType::i32:
    case DType::i64: return StatClass::i64;
    default: return StatClass::u64;
  }
}
bool stat_less(DType t, std::uint64_t a, std::uint64_t b) {
  switch (stat_class(t)) {
    case StatClass::f64: return stat_to_double(t, a) < stat_to_double(t, b);
    case StatClass::i64: return static_cast<std::int64_t>(a) < static_cast<std::int64_t>(b);
    case StatClass::u64: break;
  }
  return a < b;
}
}  // namespace

Status attr_stat(hid_t obj, const std::string& name, DType t, std::uint64_t bits) {
  switch (stat_class(t)) {
    case StatClass::f64: return attr_f64(obj, name, stat_to_double(t, bits));
    case StatClass::i64: return attr_i64(obj, name, static_cast<std::int64_t>(bits));
    case StatClass::u64: break;
  }
  return attr_u64(obj, name, bits);
}

std::string dataset_path(const std::string& name, RegionKind kind, std::uint32_t rank) {
  return has_global_shape(kind) ? "/" + name : "/" + name + "/rank" + std::to_string(rank);
}

void StatRange::add(DType t, std::uint64_t lo, std::uint64_t hi) {
  if (!valid) {
    valid = true;
    min_bits = lo;
    max_bits = hi;
    return;
  }
  if (stat_less(t, lo, min_bits)) min_bits = lo;
  if (stat_less(t, max_bits, hi)) max_bits = hi;
}

Status write_var_attrs(hid_t obj, const VarAttrs& a) {
  CKPT_RETURN_IF_ERROR(attr_string(obj, "ckpt_dtype", dtype_name(a.dtype)));
  CKPT_RETURN_IF_ERROR(attr_string(obj, "ckpt_kind", region_kind_name(a.kind)));
  CKPT_RETURN_IF_ERROR(attr_string(obj, "ckpt_layout", has_global_shape(a.kind) ? "global" : "per_rank"));
  if (a.stats.valid) {
    CKPT_RETURN_IF_ERROR(attr_stat(obj, "ckpt_min", a.dtype, a.stats.min_bits));
    CKPT_RETURN_IF_ERROR(attr_stat(obj, "ckpt_max", a.dtype, a.stats.max_bits));
  }
  if (a.by_rank.empty()) return Status::OK();
  return attr_raw(obj, "ckpt_xxh3_by_rank", H5T_STD_U64LE, H5T_NATIVE_UINT64, a.by_rank.data(), a.by_rank.size());
}

Status write_rank_attrs(hid_t ds, DType t, std::uint32_t rank, std::uint64_t checksum, bool has_stats,
                        std::uint64_t min_bits, std::uint64_t max_bits) {
  CKPT_RETURN_IF_ERROR(attr_i64(ds, "ckpt_rank", rank));
  CKPT_RETURN_IF_ERROR(attr_u64(ds, "ckpt_xxh3", checksum));
  if (!has_stats) return Status::OK();
  CKPT_RETURN_IF_ERROR(attr_stat(ds, "ckpt_min", t, min_bits));
  return attr_stat(ds, "ckpt_max", t, max_bits);
}

Status write_root_attrs(hid_t file, std::int64_t step, std::uint32_t nranks, const std::string& transport) {
  CKPT_RETURN_IF_ERROR(attr_i64(file, "ckpt_step", step));
  CKPT_RETURN_IF_ERROR(attr_i64(file, "ckpt_nranks", nranks));
  CKPT_RETURN_IF_ERROR(attr_string(file, "ckpt_transport", transport));
  return attr_i64(file, "ckpt_format_version", kFormatVersion);
}

}  // namespace ckpt::detail::h5
