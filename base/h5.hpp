// HDF5 helpers and the one layout of ckpt's HDF5 files (internal; built only with HDF5).
// Both writers use it: the hdf5 transports (parallel, collective) and `ckpt convert` (serial).
// The layout is specified in docs/format.md, "HDF5 files":
//   global variable        dataset /<name> with the global shape
//   local / scalar         group /<name> with one dataset rank<r> per rank that stored a block
// Every HDF5 return code is checked: a failure is a Status with the innermost message of the HDF5
// error stack.
#ifndef CKPT_BASE_H5_HPP
#define CKPT_BASE_H5_HPP

#include <hdf5.h>

#include <cstdint>
#include <string>
#include <vector>

#include "base/layout.hpp"
#include "ckpt/status.hpp"
#include "ckpt/types.hpp"

namespace ckpt::detail::h5 {

/// Owns an HDF5 identifier and closes it with the matching H5*close. Move-only.
class Id {
 public:
  using Closer = herr_t (*)(hid_t);
  Id() = default;
  Id(hid_t id, Closer c) : m_id(id), m_close(c) {}
  ~Id() { reset(); }
  Id(Id&& o) noexcept : m_id(o.m_id), m_close(o.m_close) { o.m_id = -1; }
  Id& operator=(Id&& o) noexcept;
  Id(const Id&) = delete;
  Id& operator=(const Id&) = delete;
  hid_t get() const { return m_id; }
  bool valid() const { return m_id >= 0; }
  /// Closes now; returns the close's failure (a file close flushes, so it can fail).
  Status close();
  void reset() { (void)close(); }

 private:
  hid_t m_id = -1;
  Closer m_close = nullptr;
};

/// io_error "HDF5: <what> (<innermost message of the error stack>)"; clears the stack.
Status error(const std::string& what);
/// Status of an herr_t: ok when >= 0, else error(what).
inline Status check(herr_t rc, const std::string& what) { return rc < 0 ? error(what) : Status::OK(); }
/// Turns off HDF5's printing of error stacks on this thread (errors become Status messages).
void quiet();

/// Type in the file: the dtype as a little-endian HDF5 type (`bytes` as u8).
hid_t file_type(DType t);
/// Type in memory: the native type of the dtype (`bytes` as u8).
hid_t mem_type(DType t);

/// A simple dataspace of `dims` ({} = scalar).
Result<Id> make_space(const Shape& dims);
/// Creates dataset `path` (absolute, intermediate groups created) in `file`. `dcpl` may be H5P_DEFAULT.
Result<Id> create_dataset(hid_t file, const std::string& path, DType t, const Shape& dims, hid_t dcpl = H5P_DEFAULT);
/// Opens group `path` of `file`.
Result<Id> open_group(hid_t file, const std::string& path);

/// Writes attribute `name` (replacing one of that name): `n` == 0 a scalar, else a 1-d array of n. The
/// name's character set is UTF-8 when its bytes are, else ASCII; a name with a NUL is invalid_argument.
Status attr_raw(hid_t obj, const std::string& name, hid_t ftype, hid_t mtype, const void* value, hsize_t n = 0);
/// A string attribute holding exactly the bytes of `value`: a variable-length string, UTF-8 when the
/// bytes are, else ASCII (8-bit bytes; h5py reads either as str, the latter with surrogate escapes);
/// a value with a NUL byte, which an HDF5 string cannot hold, as a 1-d u8 array. Attribute names take
/// the same character set rule (attr_raw); a name with a NUL byte is invalid_argument.
Status attr_string(hid_t obj, const std::string& name, const std::string& value);
Status attr_i64(hid_t obj, const std::string& name, std::int64_t v);
Status attr_u64(hid_t obj, const std::string& name, std::uint64_t v);
Status attr_f64(hid_t obj, const std::string& name, double v);
/// A stored min/max bit pattern as an attribute of its class: f64 for floats, i64 / u64 for integers.
Status attr_stat(hid_t obj, const std::string& name, DType t, std::uint64_t bits);

// ---- the layout -----------------------------------------------------------------------------------

/// "/<name>" for a global or joined variable (one dataset of the whole array), "/<name>/rank<r>" for
/// rank r's block of any other variable.
std::string dataset_path(const std::string& name, RegionKind kind, std::uint32_t rank);

/// Min/max over blocks, compared in the stored class (f64, i64 or u64): 64-bit integers keep every bit.
struct StatRange {
  bool valid = false;
  std::uint64_t min_bits = 0, max_bits = 0;
  void add(DType t, std::uint64_t min_bits, std::uint64_t max_bits);
};

/// What both writers record about one variable (docs/format.md lists the attributes).
struct VarAttrs {
  DType dtype = DType::u8;
  RegionKind kind = RegionKind::local;
  StatRange stats;                     ///< over every block of the variable
  std::vector<std::uint64_t> by_rank;  ///< XXH3-64 of rank r's block (the index's), 0 = no block
};
/// On a global or joined variable's dataset or a per-rank variable's group: ckpt_dtype, ckpt_kind,
/// ckpt_layout ("global" | "per_rank"), ckpt_min / ckpt_max (when valid), ckpt_xxh3_by_rank.
Status write_var_attrs(hid_t obj, const VarAttrs& a);
/// On a per-rank dataset rank<r>: ckpt_rank, ckpt_xxh3, ckpt_min / ckpt_max (when the block has them).
Status write_rank_attrs(hid_t ds, DType t, std::uint32_t rank, std::uint64_t checksum, bool has_stats,
                        std::uint64_t min_bits, std::uint64_t max_bits);
/// On the root group: ckpt_step, ckpt_nranks, ckpt_transport, ckpt_format_version.
Status write_root_attrs(hid_t file, std::int64_t step, std::uint32_t nranks, const std::string& transport);

}  // namespace ckpt::detail::h5

#endif  // CKPT_BASE_H5_HPP
