// `ckpt convert`: one checkpoint -> one HDF5 file that h5py, h5dump and ParaView open without ckpt.
// The layout is the hdf5 transport's (base/h5.hpp, docs/format.md "HDF5 files"): a global variable is
// one dataset with its global shape, any other variable a group with one dataset per rank
// ("rank<r>"). Statistics, checksums and provenance are attributes. Serial HDF5 calls only (the
// parallel library works serially with the default file driver); MPI is not initialised.
#include <cstdio>
#include <string>
#include <vector>

#include "ckpt/config.hpp"
#include "tools/commands.hpp"
#include "tools/json_util.hpp"
#include "tools/output.hpp"
#include "tools/store.hpp"

#if CKPT_HAVE_HDF5
#include <limits.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>
#include "base/h5.hpp"
#endif

namespace ckpt::tools {

#if CKPT_HAVE_HDF5
namespace h5 = detail::h5;
#endif

#if !CKPT_HAVE_HDF5

int run_convert(const ConvertArgs&) {
  return fail("convert", "built without HDF5 (reconfigure with CKPT_ENABLE_HDF5=ON and a parallel HDF5 installed)");
}

#else

namespace {

class Converter {
 public:
  Converter(const Checkpoint& c, CheckpointReader& reader, hid_t file)
      : m_c(c), m_file(file), m_reader(reader), m_lookup(c.index) {}

  Status run() {
    const Index& idx = m_c.index;
    CKPT_RETURN_IF_ERROR(h5::write_root_attrs(m_file, idx.step, idx.nranks, idx.transport));
    // Provenance only a conversion has (docs/format.md, "HDF5 files").
    CKPT_RETURN_IF_ERROR(h5::attr_string(m_file, "ckpt_id", hex64(idx.ckpt_id)));
    CKPT_RETURN_IF_ERROR(h5::attr_f64(m_file, "ckpt_created_unix", idx.created_unix));
    CKPT_RETURN_IF_ERROR(h5::attr_string(m_file, "ckpt_source", m_c.dir));
    for (auto& kv : idx.attrs) CKPT_RETURN_IF_ERROR(h5::attr_string(m_file, "ckpt_attr." + kv.first, kv.second));
    for (std::uint32_t v = 0; v < idx.vars.size(); ++v)
      CKPT_RETURN_IF_ERROR(convert_var(v).with_context("variable '" + idx.vars[v].name + "'"));
    return Status::OK();
  }

 private:
  /// The layout's attributes of variable `v` (on its dataset or group), then its annotations.
  Status var_attrs(hid_t obj, std::uint32_t v) {
    const VarRecord& r = m_c.index.vars[v];
    h5::VarAttrs a;
    a.dtype = r.dtype;
    a.kind = r.kind;
    a.by_rank.assign(m_c.index.nranks, 0);
    for (std::uint32_t i : m_lookup.blocks(v)) {
      const BlockRecord& b = m_c.index.blocks[i];
      a.by_rank[b.rank] = b.checksum;
      if (b.has_stats) a.stats.add(r.dtype, b.min_bits, b.max_bits);
    }
    CKPT_RETURN_IF_ERROR(h5::write_var_attrs(obj, a));
    for (auto& kv : r.attrs) CKPT_RETURN_IF_ERROR(h5::attr_string(obj, kv.first, kv.second));
    return Status::OK();
  }

  /// Writes `data` (a whole block) into the box [start, start + count) of dataset `ds`.
  Status write_box(hid_t ds, DType t, const Shape& start, const Shape& count, const void* data) {
    if (count.empty()) return h5::check(H5Dwrite(ds, h5::mem_type(t), H5S_ALL, H5S_ALL, H5P_DEFAULT, data), "write");
    h5::Id fspace(H5Dget_space(ds), H5Sclose);
    if (!fspace.valid()) return h5::error("dataspace");
    std::vector<hsize_t> s(start.begin(), start.end()), n(count.begin(), count.end());
    CKPT_RETURN_IF_ERROR(h5::check(
        H5Sselect_hyperslab(fspace.get(), H5S_SELECT_SET, s.data(), nullptr, n.data(), nullptr), "select block"));
    auto mspace = h5::make_space(count);
    if (!mspace.ok()) return mspace.status();
    return h5::check(H5Dwrite(ds, h5::mem_type(t), mspace->get(), fspace.get(), H5P_DEFAULT, data), "write block");
  }

  Status convert_var(std::uint32_t v) {
    const VarRecord& r = m_c.index.vars[v];
    if (detail::has_global_shape(r.kind)) {  // global and joined arrays: one dataset
      auto ds = h5::create_dataset(m_file, h5::dataset_path(r.name, r.kind, 0), r.dtype, r.global);
      if (!ds.ok()) return ds.status();
      for (std::uint32_t i : m_lookup.blocks(v)) {
        const BlockRecord& b = m_c.index.blocks[i];
        if (block_elements(b) == 0) continue;
        auto need = m_reader.box_bytes(r.name, b.start, b.count);  // the claim checked against the file
        if (!need.ok()) return need.status();
        m_buf.resize(need.value());
        CKPT_RETURN_IF_ERROR(m_reader.read(r.name, b.start, b.count, m_buf.data(), m_buf.size()));
        CKPT_RETURN_IF_ERROR(write_box(ds->get(), r.dtype, b.start, b.count, m_buf.data()));
      }
      return var_attrs(ds->get(), v);
    }
    // Any other variable: group <name> with one dataset rank<r> per block.
    for (std::uint32_t i : m_lookup.blocks(v)) {
      const BlockRecord& b = m_c.index.blocks[i];
      auto ds = h5::create_dataset(m_file, h5::dataset_path(r.name, r.kind, b.rank), r.dtype, b.count);
      if (!ds.ok()) return ds.status();
      auto need = m_reader.rank_bytes(r.name, b.rank);  // the claim checked against the file
      if (!need.ok()) return need.status();
      m_buf.resize(need.value());
      CKPT_RETURN_IF_ERROR(m_reader.read_rank(r.name, b.rank, m_buf.data(), m_buf.size()));
      if (block_elements(b) > 0)
        CKPT_RETURN_IF_ERROR(write_box(ds->get(), r.dtype, Shape(b.count.size(), 0), b.count, m_buf.data()));
      CKPT_RETURN_IF_ERROR(
          h5::write_rank_attrs(ds->get(), r.dtype, b.rank, b.checksum, b.has_stats, b.min_bits, b.max_bits));
    }
    if (m_lookup.blocks(v).empty()) {  // no block at all: an empty group still names the variable
      h5::Id lcpl(H5Pcreate(H5P_LINK_CREATE), H5Pclose);
      if (!lcpl.valid() || H5Pset_create_intermediate_group(lcpl.get(), 1) < 0) return h5::error("H5Pcreate");
      h5::Id g(H5Gcreate2(m_file, ("/" + r.name).c_str(), lcpl.get(), H5P_DEFAULT, H5P_DEFAULT), H5Gclose);
      if (!g.valid()) return h5::error("create group /" + r.name);
    }
    auto g = h5::open_group(m_file, "/" + r.name);
    if (!g.ok()) return g.status();
    return var_attrs(g->get(), v);
  }

  const Checkpoint& m_c;
  hid_t m_file;
  CheckpointReader& m_reader;
  detail::IndexLookup m_lookup;
  std::vector<std::uint8_t> m_buf;
};

}  // namespace

namespace {
/// The output must not land inside a checkpoint or a series segment (it would replace `index`, a data
/// file or a step log, add a file verify then reports, or go with the segment) nor take a name the store
/// owns in a checkpoint root (detail::is_store_name: latest, latest.tmp, .lock, .root, .owner,
/// ckpt.<step>[.tmp|...], series.<k>...), which the next commit, recovery or retention would replace or delete. A root is a
/// directory holding any such entry (a job that has not committed yet holds its .lock).
Status check_output_outside_checkpoints(const std::string& output) {
  const auto [parent, name] = detail::split_last(output);
  char real[PATH_MAX];
  if (::realpath(parent.c_str(), real) == nullptr) return Status::OK();  // H5Fcreate reports it
  const std::string dir = real;
  const std::string dir_name = detail::split_last(dir).second;
  if (::access((dir + "/index").c_str(), F_OK) == 0 || detail::parse_step_name(dir_name).has_value() ||
      detail::parse_segment_name(dir_name).has_value())
    return Status(Code::invalid_argument, "refusing to write " + output + " inside checkpoint " + dir);
  if (detail::is_store_name(name) && detail::scan_root(dir).store_entries)
    return Status(Code::invalid_argument, "refusing to write " + output + ": '" + name +
                                              "' belongs to the checkpoint store of the root " + dir);
  return Status::OK();
}
}  // namespace

int run_convert(const ConvertArgs& a) {
  // Data through the public Reader; the index for what only a conversion records (checksums, raw
  // statistics, provenance).
  auto reader = open_reader(a.path);
  if (!reader.ok()) return fail("convert", reader.status().message());
  // The checkpoint by its name (a series step has no directory of its own).
  auto c = open_checkpoint(names_checkpoint(a.path) ? a.path : a.path + "/" + detail::step_name(reader->step()));
  if (!c.ok()) return fail("convert", c.status().message());
  struct stat st {};
  if (!a.force && ::lstat(a.output.c_str(), &st) == 0)
    return fail("convert", a.output + " exists (use --force to overwrite)");
  if (Status where = check_output_outside_checkpoints(a.output); !where.ok()) return fail("convert", where.message());
  h5::quiet();  // errors become Status messages, not stack dumps
  // Written under a temporary name of this process, created exclusively (O_EXCL: a link planted at
  // that name is never followed), and renamed, so a failed conversion leaves no half file behind.
  const std::string tmp = a.output + ".tmp." + std::to_string(::getpid());
  Status s;
  {
    h5::Id file(H5Fcreate(tmp.c_str(), H5F_ACC_EXCL, H5P_DEFAULT, H5P_DEFAULT), H5Fclose);
    if (!file.valid()) return fail("convert", h5::error("create " + tmp).message());
    s = Converter(c.value(), reader.value(), file.get()).run();
    if (s.ok()) s = h5::check(H5Fflush(file.get(), H5F_SCOPE_GLOBAL), "flush " + tmp);
    Status closed = file.close();
    if (s.ok()) s = closed;
  }
  if (s.ok() && ::rename(tmp.c_str(), a.output.c_str()) != 0)
    s = Status(Code::io_error, "rename " + tmp + " to " + a.output);
  if (!s.ok()) {
    ::unlink(tmp.c_str());
    return fail("convert", s.message());
  }
  say("%s: step %lld, %zu variables -> %s\n", c->dir, static_cast<long long>(c->index.step), c->index.vars.size(),
      a.output);
  return kExitOk;
}

#endif  // CKPT_HAVE_HDF5

}  // namespace ckpt::tools
