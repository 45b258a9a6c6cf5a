// The C API (ckpt/ckpt.h) over the public C++ API: opaque handles around ckpt::Runtime and
// ckpt::Ticket, Status turned into int codes and kept messages. Nothing thrown escapes into C: every
// entry point runs its body through guard(), which turns an exception into CKPT_INTERNAL.
#include "ckpt/ckpt.h"

#include <mpi.h>

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <deque>
#include <exception>
#include <memory>
#include <new>
#include <stdexcept>
#include <string>
#include <vector>

#include "ckpt/ckpt.hpp"
#include "ckpt/reader.hpp"

struct ckpt_runtime {
  std::unique_ptr<ckpt::Runtime> rt;
  std::string error;  // "<code>: <message>" of the last failure on this runtime
  bool closed = false;
  /// Tickets of checkpoints taken without a ticket for the caller, oldest first: their failures are
  /// reported by a later ckpt_checkpoint, ckpt_wait_all or ckpt_close.
  std::deque<ckpt::Ticket> unclaimed;
  std::string options_yaml;      // what ckpt_options_yaml hands out (made on the first call)
  ckpt::Status restart_warning;  // Result::warning() of the last ckpt_restart(_stream); ok when none
};

struct ckpt_ticket {
  ckpt::Ticket ticket;
};

struct ckpt_reader {
  ckpt::Reader reader;
};

/// A step and the flat arrays its ckpt_var_info entries point into (built once, at open).
struct ckpt_reader_step {
  explicit ckpt_reader_step(ckpt::CheckpointReader c) : ckpt(std::move(c)) { build(); }
  /// The flat arrays and the infos, from ckpt.variables() as they are now (again after load_blocks).
  void build() {
    listed = ckpt.blocks_loaded();
    const auto& vars = ckpt.variables();
    flat.assign(vars.size(), Flat{});
    infos.assign(vars.size(), ckpt_var_info{});
    for (std::size_t i = 0; i < vars.size(); ++i) {
      const ckpt::VariableInfo& v = vars[i];
      Flat& f = flat[i];
      for (auto& a : v.attrs) f.keys.push_back(a.first.c_str()), f.values.push_back(a.second.c_str());
      for (auto& b : v.blocks) {
        f.block_ranks.push_back(b.rank);
        f.starts.insert(f.starts.end(), b.start.begin(), b.start.end());
        f.counts.insert(f.counts.end(), b.count.begin(), b.count.end());
        // Blocks of local variables may differ in rank from the shape (never in format v1); pad.
        f.starts.resize(f.block_ranks.size() * v.shape.size(), 0);
        f.counts.resize(f.block_ranks.size() * v.shape.size(), 0);
      }
      ckpt_var_info& info = infos[i];
      info.name = v.name.c_str();
      info.dtype = static_cast<int>(v.dtype);
      info.kind = static_cast<int>(v.kind);
      info.uniform = v.uniform ? 1 : 0;
      info.ndims = static_cast<int>(v.shape.size());
      info.shape = v.shape.data();
      info.has_minmax = v.has_minmax ? 1 : 0;
      info.min = v.min;
      info.max = v.max;
      info.nattrs = v.attrs.size();
      info.attr_keys = f.keys.data();
      info.attr_values = f.values.data();
      info.nblocks = v.blocks.size();
      info.block_ranks = f.block_ranks.data();
      info.block_starts = f.starts.data();
      info.block_counts = f.counts.data();
      info.nranks = v.ranks.size();
      info.ranks = v.ranks.data();
    }
  }
  struct Flat {
    std::vector<const char*> keys, values;
    std::vector<std::uint32_t> block_ranks;
    std::vector<std::uint64_t> starts, counts;
  };
  ckpt::CheckpointReader ckpt;
  /// Whether the infos list the blocks. ckpt_reader_step_verify may list them in `ckpt` (a lazily opened
  /// step) without a rebuild here: the infos handed out stay valid until ckpt_reader_step_load_blocks.
  bool listed = false;
  std::vector<Flat> flat;
  std::vector<ckpt_var_info> infos;
};

namespace {

thread_local std::string t_last_error;

/// Records a non-ok status in the thread's and (when given) the runtime's last error; returns its code.
int record(const ckpt::Status& s, ckpt_runtime* rt = nullptr) noexcept {
  if (s.ok()) return CKPT_OK;
  try {
    t_last_error = s.to_string();
    if (rt != nullptr) rt->error = t_last_error;
  } catch (...) {  // out of memory while copying the message: the code still tells
  }
  return static_cast<int>(s.code());
}

int fail(ckpt::Code code, const char* message, ckpt_runtime* rt = nullptr) noexcept {
  try {
    return record(ckpt::Status(code, message), rt);
  } catch (...) {
    return static_cast<int>(code);
  }
}

/// Runs `body` (returning a Status), turning exceptions into CKPT_INTERNAL.
template <class F>
int guard(ckpt_runtime* rt, F&& body) noexcept {
  try {
    return record(body(), rt);
  } catch (const std::bad_alloc&) {
    return fail(ckpt::Code::internal, "out of memory", rt);
  } catch (const std::exception& e) {
    return fail(ckpt::Code::internal, e.what(), rt);
  } catch (...) {
    return fail(ckpt::Code::internal, "unknown exception", rt);
  }
}

ckpt::Status need_runtime(const ckpt_runtime* rt) {
  if (rt == nullptr || !rt->rt) return ckpt::Status(ckpt::Code::invalid_argument, "the runtime handle is NULL");
  return ckpt::Status::OK();
}

ckpt::Status need_name(const char* name) {
  if (name == nullptr) return ckpt::Status(ckpt::Code::invalid_argument, "the region name is NULL");
  return ckpt::Status::OK();
}

/// `what`[i] holds `value` >= 2^63: a negative number cast to uint64_t (see shape_of).
ckpt::Status wrapped_negative(const char* what, std::size_t i, std::uint64_t value) {
  return ckpt::Status(ckpt::Code::invalid_argument, std::string(what) + "[" + std::to_string(i) + "] is " +
                                                        std::to_string(value) + " (" +
                                                        std::to_string(static_cast<std::int64_t>(value)) +
                                                        " as a signed value): a negative number passed as uint64_t?");
}

/// dims[0..ndims) as a Shape; checks ndims, the pointer, and that no value is 2^63 or more: C callers
/// pass int64_t or int values through uint64_t, so such a value is a negative number that was cast (a
/// region of ~2^64 bytes that the next checkpoint would read), never a real extent.
ckpt::Result<ckpt::Shape> shape_of(int ndims, const std::uint64_t* dims, const char* what) {
  if (ndims < 0 || ndims > CKPT_MAX_DIMS)
    return ckpt::Status(ckpt::Code::invalid_argument,
                        "ndims must be 0.." + std::to_string(CKPT_MAX_DIMS) + ", got " + std::to_string(ndims));
  if (ndims > 0 && dims == nullptr)
    return ckpt::Status(ckpt::Code::invalid_argument, std::string(what) + " is NULL with ndims > 0");
  for (int d = 0; d < ndims; ++d)
    if (dims[d] > static_cast<std::uint64_t>(INT64_MAX)) return wrapped_negative(what, d, dims[d]);
  return ckpt::Shape(dims, dims + ndims);
}

ckpt::Result<ckpt::Block> block_of(int ndims, const std::uint64_t* global, const std::uint64_t* start,
                                   const std::uint64_t* count) {
  auto g = shape_of(ndims, global, "global");
  if (!g.ok()) return g.status();
  auto s = shape_of(ndims, start, "start");
  if (!s.ok()) return s.status();
  auto c = shape_of(ndims, count, "count");
  if (!c.ok()) return c.status();
  return ckpt::Block{*g, *s, *c};
}

/// The rows of a joined region: extents dims[0..ndims) (ndims >= 1), first_row a row or CKPT_BALANCED.
ckpt::Result<ckpt::Joined> joined_of(int ndims, const std::uint64_t* dims, std::int64_t first_row) {
  if (ndims < 1) return ckpt::Status(ckpt::Code::invalid_argument, "a joined array needs ndims >= 1 (its rows first)");
  if (first_row < 0 && first_row != CKPT_BALANCED)
    return ckpt::Status(ckpt::Code::invalid_argument,
                        "first_row must be a row (>= 0) or CKPT_BALANCED (-1), got " + std::to_string(first_row));
  auto d = shape_of(ndims, dims, "dims");
  if (!d.ok()) return d.status();
  ckpt::Joined j{*d, std::nullopt};
  if (first_row >= 0) j.first_row = static_cast<std::uint64_t>(first_row);
  return j;
}

/// The pieces of a scattered region (ckpt::Scattered): ptrs[i] holding rows[i] rows (rows NULL: one each),
/// rows of extents row[0..ndims_row), and one row's memory selection start/alloc (both NULL: none).
ckpt::Result<ckpt::Scattered> scattered_of(int ndims_row, const std::uint64_t* row, std::size_t npieces,
                                           void* const* ptrs, const std::uint64_t* rows, const std::uint64_t* start,
                                           const std::uint64_t* alloc) {
  auto r = shape_of(ndims_row, row, "row");
  if (!r.ok()) return r.status();
  if (npieces > 0 && ptrs == nullptr)
    return ckpt::Status(ckpt::Code::invalid_argument, "ptrs is NULL with npieces " + std::to_string(npieces));
  if ((start == nullptr) != (alloc == nullptr))
    return ckpt::Status(ckpt::Code::invalid_argument, std::string(start == nullptr ? "start" : "alloc") +
                                                          " is NULL and the other is not: a row's memory selection "
                                                          "needs both (or neither, for packed rows)");
  ckpt::Scattered s;
  s.row = *r;
  if (start != nullptr) {
    // With ndims_row 0 the selection would have no entries: refused rather than dropped unseen.
    if (ndims_row == 0)
      return ckpt::Status(ckpt::Code::invalid_argument,
                          "start and alloc given with ndims_row 0 (rows of one element): a memory selection needs "
                          "row extents");
    auto st = shape_of(ndims_row, start, "start");
    if (!st.ok()) return st.status();
    auto al = shape_of(ndims_row, alloc, "alloc");
    if (!al.ok()) return al.status();
    s.memory = ckpt::MemorySelection{*st, *al};
  }
  s.pieces.reserve(npieces);
  for (std::size_t i = 0; i < npieces; ++i) {
    const std::uint64_t n = rows != nullptr ? rows[i] : 1;
    if (n > static_cast<std::uint64_t>(INT64_MAX)) return wrapped_negative("rows", i, n);
    s.pieces.push_back(ckpt::Piece{ptrs[i], n});
  }
  return s;
}

ckpt::Result<ckpt::DType> dtype_of(int dtype) {
  if (dtype < CKPT_U8 || dtype > CKPT_BYTES)
    return ckpt::Status(ckpt::Code::invalid_argument, "unknown dtype " + std::to_string(dtype));
  return static_cast<ckpt::DType>(dtype);
}

/// Waits for the unclaimed tickets of `rt`; the first failure.
ckpt::Status wait_unclaimed(ckpt_runtime* rt) {
  ckpt::Status first;
  for (const ckpt::Ticket& t : rt->unclaimed) {
    ckpt::Status s = t.wait();
    if (s.failed() && first.ok()) first = s.with_context("checkpoint " + std::to_string(t.step()));
  }
  rt->unclaimed.clear();
  return first;
}

/// `options`: the YAML text of ckpt_create_handle_options, or NULL.
int create(MPI_Comm comm, const char* config, const char* options, ckpt_runtime** out) noexcept {
  return guard(nullptr, [&]() -> ckpt::Status {
    if (out == nullptr) return ckpt::Status(ckpt::Code::invalid_argument, "ckpt_create: out is NULL");
    *out = nullptr;
    // Defaults < the file < the text < CKPT_*; an error is kept in opts, and the Runtime's constructor
    // reports it on every rank (a file missing on one node must not leave the others waiting).
    const ckpt::Options opts = ckpt::Options::load(config != nullptr ? config : "", options != nullptr ? options : "");
    auto h = std::make_unique<ckpt_runtime>();
    h->rt = std::make_unique<ckpt::Runtime>(comm, opts);
    ckpt::Status st = h->rt->status();  // agreed by every rank
    if (!st.ok()) return st;            // the handle's destructor closes the failed runtime on every rank
    *out = h.release();
    return st;
  });
}

}  // namespace

extern "C" {

const char* ckpt_version(void) { return ckpt::version(); }

const char* ckpt_code_name(int code) {
  if (code < CKPT_OK || code > CKPT_SUPERSEDED) return "unknown";
  return ckpt::code_name(static_cast<ckpt::Code>(code));
}

const char* ckpt_last_error(void) { return t_last_error.c_str(); }

int ckpt_create_handle(const void* comm, size_t comm_size, const char* config, ckpt_runtime** out) {
  return ckpt_create_handle_options(comm, comm_size, config, nullptr, out);
}

int ckpt_create_fortran(int fortran_comm, const char* config, ckpt_runtime** out) {
  if (out != nullptr) *out = nullptr;
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (!initialized || finalized) return fail(ckpt::Code::failed_precondition, "ckpt_create: MPI is not initialised");
  return create(MPI_Comm_f2c(static_cast<MPI_Fint>(fortran_comm)), config, nullptr, out);
}

void ckpt_free(ckpt_runtime* rt) {
  if (rt == nullptr) return;
  try {
    if (rt->rt) rt->rt->close();
  } catch (...) {
  }
  delete rt;
}

int ckpt_close(ckpt_runtime* rt) {
  return guard(rt, [&] {
    CKPT_RETURN_IF_ERROR(need_runtime(rt));
    if (rt->closed) return ckpt::Status::OK();
    ckpt::Status s = rt->rt->close();
    rt->closed = true;
    ckpt::Status u = wait_unclaimed(rt);
    return s.ok() ? u : s;
  });
}

const char* ckpt_error_message(const ckpt_runtime* rt) {
  return rt == nullptr ? t_last_error.c_str() : rt->error.c_str();
}

int ckpt_report_error(ckpt_runtime* rt, int code, const char* message) {
  if (code == CKPT_OK) return CKPT_OK;
  if (code < CKPT_OK || code > CKPT_INTERNAL) code = CKPT_INTERNAL;
  return fail(static_cast<ckpt::Code>(code), message != nullptr ? message : "", rt);
}

int ckpt_rank(const ckpt_runtime* rt, int* rank) {
  return guard(nullptr, [&] {
    CKPT_RETURN_IF_ERROR(need_runtime(rt));
    if (rank == nullptr) return ckpt::Status(ckpt::Code::invalid_argument, "ckpt_rank: rank is NULL");
    *rank = rt->rt->rank();
    return ckpt::Status::OK();
  });
}

int ckpt_size(const ckpt_runtime* rt, int* size) {
  return guard(nullptr, [&] {
    CKPT_RETURN_IF_ERROR(need_runtime(rt));
    if (size == nullptr) return ckpt::Status(ckpt::Code::invalid_argument, "ckpt_size: size is NULL");
    *size = rt->rt->size();
    return ckpt::Status::OK();
  });
}

int ckpt_protect(ckpt_runtime* rt, const char* name, void* ptr, int dtype, int ndims, const uint64_t* dims) {
  return guard(rt, [&] {
    CKPT_RETURN_IF_ERROR(need_runtime(rt));
    CKPT_RETURN_IF_ERROR(need_name(name));
    auto t = dtype_of(dtype);
    if (!t.ok()) return t.status();
    auto d = shape_of(ndims, dims, "dims");
    if (!d.ok()) return d.status();
    return rt->rt->protect(name, ptr, *t, *d);
  });
}

int ckpt_protect_block(ckpt_runtime* rt, const char* name, void* ptr, int dtype, int ndims, const uint64_t* global,
                       const uint64_t* start, const uint64_t* count) {
  return guard(rt, [&] {
    CKPT_RETURN_IF_ERROR(need_runtime(rt));
    CKPT_RETURN_IF_ERROR(need_name(name));
    auto t = dtype_of(dtype);
    if (!t.ok()) return t.status();
    auto b = block_of(ndims, global, start, count);
    if (!b.ok()) return b.status();
    return rt->rt->protect(name, ptr, *t, *b);
  });
}

int ckpt_protect_scalar(ckpt_runtime* rt, const char* name, void* ptr, int dtype) {
  return ckpt_protect(rt, name, ptr, dtype, 0, nullptr);
}

int ckpt_update(ckpt_runtime* rt, const char* name, void* ptr, int ndims, const uint64_t* dims) {
  return guard(rt, [&] {
    CKPT_RETURN_IF_ERROR(need_runtime(rt));
    CKPT_RETURN_IF_ERROR(need_name(name));
    auto d = shape_of(ndims, dims, "dims");
    if (!d.ok()) return d.status();
    return rt->rt->update(name, ptr, *d);
  });
}

int ckpt_update_block(ckpt_runtime* rt, const char* name, void* ptr, int ndims, const uint64_t* global,
                      const uint64_t* start, const uint64_t* count) {
  return guard(rt, [&] {
    CKPT_RETURN_IF_ERROR(need_runtime(rt));
    CKPT_RETURN_IF_ERROR(need_name(name));
    auto b = block_of(ndims, global, start, count);
    if (!b.ok()) return b.status();
    return rt->rt->update(name, ptr, *b);
  });
}

int ckpt_protect_joined(ckpt_runtime* rt, const char* name, void* ptr, int dtype, int ndims, const uint64_t* dims,
                        int64_t first_row) {
  return guard(rt, [&] {
    CKPT_RETURN_IF_ERROR(need_runtime(rt));
    CKPT_RETURN_IF_ERROR(need_name(name));
    auto t = dtype_of(dtype);
    if (!t.ok()) return t.status();
    auto j = joined_of(ndims, dims, first_row);
    if (!j.ok()) return j.status();
    return rt->rt->protect(name, ptr, *t, *j);
  });
}

int ckpt_update_joined(ckpt_runtime* rt, const char* name, void* ptr, int ndims, const uint64_t* dims,
                       int64_t first_row) {
  return guard(rt, [&] {
    CKPT_RETURN_IF_ERROR(need_runtime(rt));
    CKPT_RETURN_IF_ERROR(need_name(name));
    auto j = joined_of(ndims, dims, first_row);
    if (!j.ok()) return j.status();
    return rt->rt->update(name, ptr, *j);
  });
}

int ckpt_protect_scattered(ckpt_runtime* rt, const char* name, int dtype, int ndims_row, const uint64_t* row,
                           size_t npieces, void* const* ptrs, const uint64_t* rows, const uint64_t* start,
                           const uint64_t* alloc) {
  return guard(rt, [&] {
    CKPT_RETURN_IF_ERROR(need_runtime(rt));
    CKPT_RETURN_IF_ERROR(need_name(name));
    auto t = dtype_of(dtype);
    if (!t.ok()) return t.status();
    auto s = scattered_of(ndims_row, row, npieces, ptrs, rows, start, alloc);
    if (!s.ok()) return s.status().with_context("ckpt_protect_scattered: region '" + std::string(name) + "'");
    return rt->rt->protect(name, *t, *s);
  });
}

int ckpt_update_scattered(ckpt_runtime* rt, const char* name, int ndims_row, const uint64_t* row, size_t npieces,
                          void* const* ptrs, const uint64_t* rows, const uint64_t* start, const uint64_t* alloc) {
  return guard(rt, [&] {
    CKPT_RETURN_IF_ERROR(need_runtime(rt));
    CKPT_RETURN_IF_ERROR(need_name(name));
    auto s = scattered_of(ndims_row, row, npieces, ptrs, rows, start, alloc);
    if (!s.ok()) return s.status().with_context("ckpt_update_scattered: region '" + std::string(name) + "'");
    return rt->rt->update(name, *s);
  });
}

int ckpt_joined_rows(ckpt_runtime* rt, int64_t step, const char* name, uint64_t* total, uint64_t* begin,
                     uint64_t* end) {
  return guard(rt, [&] {
    CKPT_RETURN_IF_ERROR(need_runtime(rt));
    CKPT_RETURN_IF_ERROR(need_name(name));
    if (total == nullptr || begin == nullptr || end == nullptr)
      return ckpt::Status(ckpt::Code::invalid_argument, "ckpt_joined_rows: total, begin or end is NULL");
    auto r = rt->rt->joined_rows(step, name);
    if (!r.ok()) return r.status();
    *total = r->total;
    *begin = r->begin;
    *end = r->end;
    return ckpt::Status::OK();
  });
}

int ckpt_set_optional(ckpt_runtime* rt, const char* name, int optional) {
  return guard(rt, [&] {
    CKPT_RETURN_IF_ERROR(need_runtime(rt));
    CKPT_RETURN_IF_ERROR(need_name(name));
    return rt->rt->set_optional(name, optional != 0);
  });
}

int ckpt_set_memory_selection(ckpt_runtime* rt, const char* name, int ndims, const uint64_t* start,
                              const uint64_t* alloc) {
  return guard(rt, [&] {
    CKPT_RETURN_IF_ERROR(need_runtime(rt));
    CKPT_RETURN_IF_ERROR(need_name(name));
    auto s = shape_of(ndims, start, "start");
    if (!s.ok()) return s.status();
    auto a = shape_of(ndims, alloc, "alloc");
    if (!a.ok()) return a.status();
    return rt->rt->set_memory_selection(name, ckpt::MemorySelection{*s, *a});
  });
}

int ckpt_set_restart_rows(ckpt_runtime* rt, const char* name, const uint64_t* rows, size_t n) {
  return guard(rt, [&] {
    CKPT_RETURN_IF_ERROR(need_runtime(rt));
    CKPT_RETURN_IF_ERROR(need_name(name));
    if (rows == nullptr && n > 0) return ckpt::Status(ckpt::Code::invalid_argument, "set_restart_rows: rows is NULL");
    return rt->rt->set_restart_rows(name,
                                    n == 0 ? std::vector<std::uint64_t>() : std::vector<std::uint64_t>(rows, rows + n));
  });
}

int ckpt_set_restart_keys(ckpt_runtime* rt, const char* name, const char* key, const int64_t* keys, size_t n) {
  return guard(rt, [&] {
    CKPT_RETURN_IF_ERROR(need_runtime(rt));
    CKPT_RETURN_IF_ERROR(need_name(name));
    if (key == nullptr) return ckpt::Status(ckpt::Code::invalid_argument, "set_restart_keys: key is NULL");
    if (keys == nullptr && n > 0) return ckpt::Status(ckpt::Code::invalid_argument, "set_restart_keys: keys is NULL");
    return rt->rt->set_restart_keys(name, key,
                                    n == 0 ? std::vector<std::int64_t>() : std::vector<std::int64_t>(keys, keys + n));
  });
}

int ckpt_clear_restart_rows(ckpt_runtime* rt, const char* name) {
  return guard(rt, [&] {
    CKPT_RETURN_IF_ERROR(need_runtime(rt));
    CKPT_RETURN_IF_ERROR(need_name(name));
    return rt->rt->clear_restart_rows(name);
  });
}

int ckpt_unprotect(ckpt_runtime* rt, const char* name) {
  return guard(rt, [&] {
    CKPT_RETURN_IF_ERROR(need_runtime(rt));
    CKPT_RETURN_IF_ERROR(need_name(name));
    return rt->rt->unprotect(name);
  });
}

int ckpt_annotate(ckpt_runtime* rt, const char* name, const char* key, const char* value) {
  return guard(rt, [&] {
    CKPT_RETURN_IF_ERROR(need_runtime(rt));
    CKPT_RETURN_IF_ERROR(need_name(name));
    if (key == nullptr || value == nullptr)
      return ckpt::Status(ckpt::Code::invalid_argument, "ckpt_annotate: key or value is NULL");
    return rt->rt->annotate(name, key, value);
  });
}

int ckpt_checkpoint(ckpt_runtime* rt, int64_t step, void* stream, ckpt_ticket** ticket) {
  if (ticket != nullptr) *ticket = nullptr;
  return guard(rt, [&] {
    CKPT_RETURN_IF_ERROR(need_runtime(rt));
    // The code returned here must be the same on every rank (SPMD callers branch on it), so it only
    // reports what every rank knows: the arguments, the state, and the agreed outcome of earlier
    // checkpoints that the C++ call would wait for anyway (max_in_flight). A failure of this
    // checkpoint itself is reported by its ticket, or by a later call.
    if (rt->closed) return ckpt::Status(ckpt::Code::failed_precondition, "the Runtime is closed");
    CKPT_RETURN_IF_ERROR(rt->rt->status());
    if (step < 0)
      return ckpt::Status(ckpt::Code::invalid_argument, "checkpoint step must be >= 0, got " + std::to_string(step));
    const std::size_t max_in_flight = static_cast<std::size_t>(std::max(1, rt->rt->options().max_in_flight));
    const bool coalesce = rt->rt->options().on_busy == ckpt::Options::OnBusy::coalesce;
    if (coalesce) {
      // Never waits on I/O: done tickets are forgotten unless they failed (wait_all and close report
      // those); deciding on done-ness would differ between ranks.
      for (auto it = rt->unclaimed.begin(); it != rt->unclaimed.end();)
        it = it->done() && !it->wait().failed() ? rt->unclaimed.erase(it) : it + 1;
    }
    while (!coalesce && rt->unclaimed.size() >= max_in_flight) {
      ckpt::Ticket old = rt->unclaimed.front();
      rt->unclaimed.pop_front();
      ckpt::Status s = old.wait();
      if (!s.ok())
        return s.with_context("checkpoint " + std::to_string(old.step()) + " failed; step " + std::to_string(step) +
                              " was not taken");
    }
    // Allocated before the collective call: an allocation failure must not leave one rank out.
    std::unique_ptr<ckpt_ticket> h = ticket != nullptr ? std::make_unique<ckpt_ticket>() : nullptr;
    if (!h) rt->unclaimed.emplace_back();
    ckpt::Ticket tk = rt->rt->checkpoint(step, stream);
    if (h) {
      h->ticket = std::move(tk);
      *ticket = h.release();
    } else {
      rt->unclaimed.back() = std::move(tk);
    }
    return ckpt::Status::OK();
  });
}

int ckpt_ticket_wait(const ckpt_ticket* ticket) {
  return guard(nullptr, [&] {
    if (ticket == nullptr) return ckpt::Status(ckpt::Code::invalid_argument, "ckpt_ticket_wait: ticket is NULL");
    return ticket->ticket.wait();
  });
}

int ckpt_ticket_done(const ckpt_ticket* ticket, int* done) {
  return guard(nullptr, [&] {
    if (ticket == nullptr || done == nullptr)
      return ckpt::Status(ckpt::Code::invalid_argument, "ckpt_ticket_done: ticket or done is NULL");
    *done = ticket->ticket.done() ? 1 : 0;
    return ckpt::Status::OK();
  });
}

namespace {
/// Bytes of ckpt_checkpoint_stats up to and including staging_bytes: the struct before it grew, what
/// binaries calling the exported ckpt_ticket_stats allocated.
constexpr std::size_t kStatsV1Size = offsetof(ckpt_checkpoint_stats, redundancy_s);
static_assert(kStatsV1Size == 72, "the first nine fields of ckpt_checkpoint_stats are ABI: never change them");

/// Writes the fields of `s` lying wholly inside the caller's `size` bytes at `out`, zeroes the rest.
ckpt::Status write_stats(const ckpt_ticket* ticket, ckpt_checkpoint_stats* out, std::size_t size, const char* fn) {
  if (ticket == nullptr || out == nullptr)
    return ckpt::Status(ckpt::Code::invalid_argument, std::string(fn) + ": ticket or stats is NULL");
  if (size < kStatsV1Size)
    return ckpt::Status(ckpt::Code::invalid_argument, std::string(fn) + ": stats_size " + std::to_string(size) +
                                                          " is smaller than the first nine fields (" +
                                                          std::to_string(kStatsV1Size) + " bytes)");
  const ckpt::CheckpointStats s = ticket->ticket.stats();
  ckpt_checkpoint_stats c{};
  c.step = s.step;
  c.bytes = s.bytes;
  c.bytes_written = s.bytes_written;
  c.blocked_s = s.blocked_s;
  c.capture_wait_s = s.capture_wait_s;
  c.flush_s = s.flush_s;
  c.durable_s = s.durable_s;
  c.committed_s = s.committed_s;
  c.staging_bytes = s.staging_bytes;
  c.redundancy_s = s.redundancy_s;
  c.redundancy_bytes = s.redundancy_bytes;
  c.staging_pinned_bytes = s.staging_pinned_bytes;
  c.synced = s.synced ? 1 : 0;
  // Whole fields only: where each field ends (the first nine together), in declaration order; the
  // last end inside `size` is how much is copied.
  const std::size_t ends[] = {kStatsV1Size, offsetof(ckpt_checkpoint_stats, redundancy_bytes),
                              offsetof(ckpt_checkpoint_stats, staging_pinned_bytes),
                              offsetof(ckpt_checkpoint_stats, synced),
                              offsetof(ckpt_checkpoint_stats, synced) + sizeof(c.synced)};
  std::size_t n = 0;
  for (std::size_t e : ends)
    if (e <= size) n = e;
  std::memcpy(out, &c, n);
  if (size > n) std::memset(reinterpret_cast<unsigned char*>(out) + n, 0, size - n);
  return ckpt::Status::OK();
}
}  // namespace

int ckpt_ticket_stats_sized(const ckpt_ticket* ticket, ckpt_checkpoint_stats* stats, size_t stats_size) {
  return guard(nullptr, [&] { return write_stats(ticket, stats, stats_size, "ckpt_ticket_stats"); });
}

int(ckpt_ticket_stats)(const ckpt_ticket* ticket, ckpt_checkpoint_stats* stats) {
  return guard(nullptr, [&] { return write_stats(ticket, stats, kStatsV1Size, "ckpt_ticket_stats"); });
}

void ckpt_ticket_free(ckpt_ticket* ticket) { delete ticket; }

int ckpt_wait_all(ckpt_runtime* rt) {
  return guard(rt, [&] {
    CKPT_RETURN_IF_ERROR(need_runtime(rt));
    ckpt::Status s = rt->rt->wait_all();
    ckpt::Status u = wait_unclaimed(rt);  // already done: wait_all waited for every checkpoint in flight
    return s.ok() ? u : s;
  });
}

int ckpt_poll(ckpt_runtime* rt) {
  return guard(rt, [&] {
    CKPT_RETURN_IF_ERROR(need_runtime(rt));
    return rt->rt->poll();
  });
}

int ckpt_latest(ckpt_runtime* rt, int64_t* step) {
  return guard(rt, [&] {
    CKPT_RETURN_IF_ERROR(need_runtime(rt));
    if (step == nullptr) return ckpt::Status(ckpt::Code::invalid_argument, "ckpt_latest: step is NULL");
    CKPT_RETURN_IF_ERROR(rt->rt->status());
    auto newest = rt->rt->latest();
    CKPT_RETURN_IF_ERROR(newest.status());
    *step = newest->value_or(-1);
    return ckpt::Status::OK();
  });
}

int ckpt_restart_step(ckpt_runtime* rt, int64_t step) { return ckpt_restart_step_stream(rt, step, nullptr); }

int ckpt_restart(ckpt_runtime* rt, int64_t* step) { return ckpt_restart_stream(rt, nullptr, step); }

// ---- for language bindings: options as text, restart on a stream, the device ------------------------

int ckpt_create_handle_options(const void* comm, size_t comm_size, const char* config, const char* options,
                               ckpt_runtime** out) {
  if (out != nullptr) *out = nullptr;
  if (comm == nullptr || comm_size != sizeof(MPI_Comm))
    return fail(ckpt::Code::invalid_argument,
                "ckpt_create: the communicator handle is not an MPI_Comm of the MPI library ckpt was built with");
  MPI_Comm c;
  std::memcpy(&c, comm, sizeof c);
  return create(c, config, options, out);
}

int ckpt_restart_step_stream(ckpt_runtime* rt, int64_t step, void* stream) {
  return guard(rt, [&] {
    CKPT_RETURN_IF_ERROR(need_runtime(rt));
    rt->restart_warning = ckpt::Status::OK();  // restart(step) has no fall-back, hence no warning
    return rt->rt->restart(step, stream);
  });
}

int ckpt_restart_stream(ckpt_runtime* rt, void* stream, int64_t* step) {
  if (step != nullptr) *step = -1;
  return guard(rt, [&] {
    CKPT_RETURN_IF_ERROR(need_runtime(rt));
    if (step == nullptr) return ckpt::Status(ckpt::Code::invalid_argument, "ckpt_restart: step is NULL");
    rt->restart_warning = ckpt::Status::OK();
    ckpt::Result<std::int64_t> r = rt->rt->restart(ckpt::newest, stream);
    if (!r.ok()) return r.status();
    *step = *r;
    rt->restart_warning = r.warning();
    return ckpt::Status::OK();
  });
}

int ckpt_restart_warning(const ckpt_runtime* rt, int* code, const char** message) {
  return guard(nullptr, [&] {
    CKPT_RETURN_IF_ERROR(need_runtime(rt));
    if (code != nullptr) *code = static_cast<int>(rt->restart_warning.code());
    if (message != nullptr) *message = rt->restart_warning.message().c_str();
    return ckpt::Status::OK();
  });
}

int ckpt_device_name(const ckpt_runtime* rt, const char** name) {
  return guard(nullptr, [&] {
    CKPT_RETURN_IF_ERROR(need_runtime(rt));
    if (name == nullptr) return ckpt::Status(ckpt::Code::invalid_argument, "ckpt_device_name: name is NULL");
    *name = rt->rt->device_name();
    return ckpt::Status::OK();
  });
}

// ---- the reader ------------------------------------------------------------------------------------

namespace {
ckpt::Status need(const void* p, const char* what) {
  if (p == nullptr) return ckpt::Status(ckpt::Code::invalid_argument, std::string(what) + " is NULL");
  return ckpt::Status::OK();
}
/// The box [start, start + count) of a reader call, each of ndims extents (shape_of's checks).
struct Box {
  ckpt::Shape start, count;
};
ckpt::Result<Box> box_of(int ndims, const std::uint64_t* start, const std::uint64_t* count) {
  auto s = shape_of(ndims, start, "start");
  if (!s.ok()) return s.status();
  auto n = shape_of(ndims, count, "count");
  if (!n.ok()) return n.status();
  return Box{std::move(s).value(), std::move(n).value()};
}
int open_step_into(ckpt::Result<ckpt::CheckpointReader> c, ckpt_reader_step** out) {
  return guard(nullptr, [&] {
    if (!c.ok()) return c.status();
    *out = new ckpt_reader_step(std::move(c).value());
    return ckpt::Status::OK();
  });
}
}  // namespace

int ckpt_reader_open(const char* path, ckpt_reader** out) {
  if (out != nullptr) *out = nullptr;
  return guard(nullptr, [&] {
    CKPT_RETURN_IF_ERROR(need(path, "ckpt_reader_open: path"));
    CKPT_RETURN_IF_ERROR(need(out, "ckpt_reader_open: out"));
    auto r = ckpt::Reader::open(path);
    if (!r.ok()) return r.status();
    *out = new ckpt_reader{std::move(r).value()};
    return ckpt::Status::OK();
  });
}

int ckpt_reader_open_handle(const void* comm, size_t comm_size, const char* path, ckpt_reader** out) {
  if (out != nullptr) *out = nullptr;
  return guard(nullptr, [&] {
    CKPT_RETURN_IF_ERROR(need(path, "ckpt_reader_open_handle: path"));
    CKPT_RETURN_IF_ERROR(need(out, "ckpt_reader_open_handle: out"));
    if (comm == nullptr || comm_size != sizeof(MPI_Comm))
      return ckpt::Status(ckpt::Code::invalid_argument,
                          "ckpt_reader_open_handle: the communicator handle is not an MPI_Comm of the MPI library "
                          "ckpt was built with");
    MPI_Comm c;
    std::memcpy(&c, comm, sizeof c);
    auto r = ckpt::Reader::open(c, path);
    if (!r.ok()) return r.status();
    *out = new ckpt_reader{std::move(r).value()};
    return ckpt::Status::OK();
  });
}

void ckpt_reader_free(ckpt_reader* r) { delete r; }

int ckpt_reader_steps(const ckpt_reader* r, int64_t* steps, size_t capacity, size_t* count) {
  return guard(nullptr, [&] {
    CKPT_RETURN_IF_ERROR(need(r, "ckpt_reader_steps: reader"));
    CKPT_RETURN_IF_ERROR(need(count, "ckpt_reader_steps: count"));
    if (capacity > 0) CKPT_RETURN_IF_ERROR(need(steps, "ckpt_reader_steps: steps"));
    const std::vector<std::int64_t> all = r->reader.steps();
    *count = all.size();
    std::copy_n(all.begin(), std::min(capacity, all.size()), steps);
    return ckpt::Status::OK();
  });
}

int ckpt_reader_open_step(const ckpt_reader* r, int64_t step, ckpt_reader_step** out) {
  if (out != nullptr) *out = nullptr;
  if (r == nullptr || out == nullptr) return fail(ckpt::Code::invalid_argument, "ckpt_reader_open_step: NULL argument");
  return open_step_into(r->reader.open_step(step), out);
}

int ckpt_reader_latest(const ckpt_reader* r, ckpt_reader_step** out) {
  if (out != nullptr) *out = nullptr;
  if (r == nullptr || out == nullptr) return fail(ckpt::Code::invalid_argument, "ckpt_reader_latest: NULL argument");
  return open_step_into(r->reader.latest(), out);
}

void ckpt_reader_step_free(ckpt_reader_step* c) { delete c; }

int ckpt_reader_step_info(const ckpt_reader_step* c, int64_t* step, int* nranks, const char** transport) {
  return guard(nullptr, [&] {
    CKPT_RETURN_IF_ERROR(need(c, "ckpt_reader_step_info: step handle"));
    if (step != nullptr) *step = c->ckpt.step();
    if (nranks != nullptr) *nranks = c->ckpt.nranks();
    if (transport != nullptr) *transport = c->ckpt.transport().c_str();
    return ckpt::Status::OK();
  });
}

int ckpt_reader_step_nvars(const ckpt_reader_step* c, size_t* n) {
  return guard(nullptr, [&] {
    CKPT_RETURN_IF_ERROR(need(c, "ckpt_reader_step_nvars: step handle"));
    CKPT_RETURN_IF_ERROR(need(n, "ckpt_reader_step_nvars: n"));
    *n = c->infos.size();
    return ckpt::Status::OK();
  });
}

int ckpt_reader_step_var(const ckpt_reader_step* c, size_t i, ckpt_var_info* info) {
  return guard(nullptr, [&] {
    CKPT_RETURN_IF_ERROR(need(c, "ckpt_reader_step_var: step handle"));
    CKPT_RETURN_IF_ERROR(need(info, "ckpt_reader_step_var: info"));
    if (i >= c->infos.size())
      return ckpt::Status(ckpt::Code::invalid_argument, "variable index " + std::to_string(i) + " out of range (" +
                                                            std::to_string(c->infos.size()) + " variables)");
    *info = c->infos[i];
    return ckpt::Status::OK();
  });
}

int ckpt_reader_step_find(const ckpt_reader_step* c, const char* name, size_t* i) {
  return guard(nullptr, [&] {
    CKPT_RETURN_IF_ERROR(need(c, "ckpt_reader_step_find: step handle"));
    CKPT_RETURN_IF_ERROR(need(name, "ckpt_reader_step_find: name"));
    CKPT_RETURN_IF_ERROR(need(i, "ckpt_reader_step_find: i"));
    const auto& vars = c->ckpt.variables();
    for (std::size_t k = 0; k < vars.size(); ++k)
      if (vars[k].name == name) {
        *i = k;
        return ckpt::Status::OK();
      }
    return c->ckpt.variable(name).status();  // not_found, worded by the reader
  });
}

int ckpt_reader_step_box_bytes(ckpt_reader_step* c, const char* name, int ndims, const uint64_t* start,
                               const uint64_t* count, uint64_t* bytes) {
  return guard(nullptr, [&] {
    CKPT_RETURN_IF_ERROR(need(c, "ckpt_reader_step_box_bytes: step handle"));
    CKPT_RETURN_IF_ERROR(need(name, "ckpt_reader_step_box_bytes: name"));
    CKPT_RETURN_IF_ERROR(need(bytes, "ckpt_reader_step_box_bytes: bytes"));
    auto box = box_of(ndims, start, count);
    if (!box.ok()) return box.status();
    auto b = c->ckpt.box_bytes(name, box->start, box->count);
    if (!b.ok()) return b.status();
    *bytes = b.value();
    return ckpt::Status::OK();
  });
}

int ckpt_reader_step_rank_bytes(ckpt_reader_step* c, const char* name, uint32_t rank, uint64_t* bytes) {
  return guard(nullptr, [&] {
    CKPT_RETURN_IF_ERROR(need(c, "ckpt_reader_step_rank_bytes: step handle"));
    CKPT_RETURN_IF_ERROR(need(name, "ckpt_reader_step_rank_bytes: name"));
    CKPT_RETURN_IF_ERROR(need(bytes, "ckpt_reader_step_rank_bytes: bytes"));
    auto b = c->ckpt.rank_bytes(name, rank);
    if (!b.ok()) return b.status();
    *bytes = b.value();
    return ckpt::Status::OK();
  });
}

int ckpt_reader_step_read(ckpt_reader_step* c, const char* name, int ndims, const uint64_t* start,
                          const uint64_t* count, void* out, size_t out_bytes) {
  return guard(nullptr, [&] {
    CKPT_RETURN_IF_ERROR(need(c, "ckpt_reader_step_read: step handle"));
    CKPT_RETURN_IF_ERROR(need(name, "ckpt_reader_step_read: name"));
    auto box = box_of(ndims, start, count);
    if (!box.ok()) return box.status();
    if (out == nullptr && out_bytes > 0) return ckpt::Status(ckpt::Code::invalid_argument, "out is NULL");
    return c->ckpt.read(name, box->start, box->count, out, out_bytes);
  });
}

int ckpt_reader_step_read_rank(ckpt_reader_step* c, const char* name, uint32_t rank, void* out, size_t out_bytes) {
  return guard(nullptr, [&] {
    CKPT_RETURN_IF_ERROR(need(c, "ckpt_reader_step_read_rank: step handle"));
    CKPT_RETURN_IF_ERROR(need(name, "ckpt_reader_step_read_rank: name"));
    if (out == nullptr && out_bytes > 0) return ckpt::Status(ckpt::Code::invalid_argument, "out is NULL");
    return c->ckpt.read_rank(name, rank, out, out_bytes);
  });
}

int ckpt_reader_step_rows_by_key(ckpt_reader_step* c, const char* key, uint64_t* rows, size_t capacity, size_t* count) {
  if (count != nullptr) *count = 0;
  return guard(nullptr, [&] {
    CKPT_RETURN_IF_ERROR(need(c, "ckpt_reader_step_rows_by_key: step handle"));
    CKPT_RETURN_IF_ERROR(need(key, "ckpt_reader_step_rows_by_key: key"));
    CKPT_RETURN_IF_ERROR(need(count, "ckpt_reader_step_rows_by_key: count"));
    if (capacity > 0) CKPT_RETURN_IF_ERROR(need(rows, "ckpt_reader_step_rows_by_key: rows"));
    auto order = c->ckpt.rows_by_key(key);
    if (!order.ok()) return order.status();
    *count = order->size();
    std::copy_n(order->begin(), std::min(capacity, order->size()), rows);
    return ckpt::Status::OK();
  });
}

int ckpt_reader_step_verify(ckpt_reader_step* c) {
  return guard(nullptr, [&] {
    CKPT_RETURN_IF_ERROR(need(c, "ckpt_reader_step_verify: step handle"));
    return c->ckpt.verify();
  });
}

// ---- parity with ckpt::Runtime: sizing before restart, the resolved options ------------------------

namespace {
/// A code a C callback returned, as a Status naming the region and the callback.
ckpt::Status callback_status(int rc, const std::string& name, const char* what) {
  if (rc == CKPT_OK) return ckpt::Status::OK();
  const ckpt::Code code = rc > CKPT_OK && rc <= CKPT_INTERNAL ? static_cast<ckpt::Code>(rc) : ckpt::Code::internal;
  return ckpt::Status(code, "region '" + name + "': its " + what + " callback returned " + std::to_string(rc) + " (" +
                                ckpt_code_name(rc) + ")");
}
}  // namespace

int ckpt_steps(ckpt_runtime* rt, int64_t* steps, size_t capacity, size_t* count) {
  if (count != nullptr) *count = 0;
  return guard(rt, [&] {
    CKPT_RETURN_IF_ERROR(need_runtime(rt));
    // Checked after the collective call: a rank with a bad argument must not leave the others waiting.
    auto all = rt->rt->steps();
    CKPT_RETURN_IF_ERROR(need(count, "ckpt_steps: count"));
    if (capacity > 0) CKPT_RETURN_IF_ERROR(need(steps, "ckpt_steps: steps"));
    if (!all.ok()) return all.status();
    *count = all->size();
    std::copy_n(all->begin(), std::min(capacity, all->size()), steps);
    return ckpt::Status::OK();
  });
}

int ckpt_reader_step_load_blocks(ckpt_reader_step* c) {
  return guard(nullptr, [&] {
    CKPT_RETURN_IF_ERROR(need(c, "ckpt_reader_step_load_blocks: step"));
    if (c->listed) return ckpt::Status::OK();
    CKPT_RETURN_IF_ERROR(c->ckpt.load_blocks());
    c->build();
    return ckpt::Status::OK();
  });
}

int ckpt_inspect(ckpt_runtime* rt, int64_t step, ckpt_reader_step** out) {
  if (out != nullptr) *out = nullptr;
  return guard(rt, [&] {
    CKPT_RETURN_IF_ERROR(need_runtime(rt));
    auto c = rt->rt->inspect(step);  // collective: before the argument checks of this rank
    CKPT_RETURN_IF_ERROR(need(out, "ckpt_inspect: out"));
    if (!c.ok()) return c.status();
    *out = new ckpt_reader_step(std::move(c).value());
    return ckpt::Status::OK();
  });
}

int ckpt_dir(const ckpt_runtime* rt, const char** dir) {
  return guard(nullptr, [&] {
    CKPT_RETURN_IF_ERROR(need_runtime(rt));
    CKPT_RETURN_IF_ERROR(need(dir, "ckpt_dir: dir"));
    *dir = rt->rt->options().dir.c_str();
    return ckpt::Status::OK();
  });
}

int ckpt_options_yaml(ckpt_runtime* rt, const char** yaml) {
  return guard(rt, [&] {
    CKPT_RETURN_IF_ERROR(need_runtime(rt));
    CKPT_RETURN_IF_ERROR(need(yaml, "ckpt_options_yaml: yaml"));
    if (rt->options_yaml.empty()) rt->options_yaml = rt->rt->options().to_yaml();  // fixed once created
    *yaml = rt->options_yaml.c_str();
    return ckpt::Status::OK();
  });
}

int ckpt_funneled(const ckpt_runtime* rt, int* funneled) {
  return guard(nullptr, [&] {
    CKPT_RETURN_IF_ERROR(need_runtime(rt));
    CKPT_RETURN_IF_ERROR(need(funneled, "ckpt_funneled: funneled"));
    *funneled = rt->rt->funneled() ? 1 : 0;
    return ckpt::Status::OK();
  });
}

int ckpt_restart_index_bytes(const ckpt_runtime* rt, uint64_t* bytes) {
  return guard(nullptr, [&] {
    CKPT_RETURN_IF_ERROR(need_runtime(rt));
    CKPT_RETURN_IF_ERROR(need(bytes, "ckpt_restart_index_bytes: bytes"));
    *bytes = rt->rt->restart_index_bytes();
    return ckpt::Status::OK();
  });
}

int ckpt_restart_level(const ckpt_runtime* rt, const char** level) {
  return guard(nullptr, [&] {
    CKPT_RETURN_IF_ERROR(need_runtime(rt));
    CKPT_RETURN_IF_ERROR(need(level, "ckpt_restart_level: level"));
    *level = rt->rt->restart_level().c_str();
    return ckpt::Status::OK();
  });
}

int ckpt_skipped_optional(const ckpt_runtime* rt, size_t index, size_t* count, const char** name) {
  return guard(nullptr, [&] {
    CKPT_RETURN_IF_ERROR(need_runtime(rt));
    CKPT_RETURN_IF_ERROR(need(count, "ckpt_skipped_optional: count"));
    const std::vector<std::string>& skipped = rt->rt->skipped_optional();
    *count = skipped.size();
    if (name != nullptr) *name = index < skipped.size() ? skipped[index].c_str() : nullptr;
    return ckpt::Status::OK();
  });
}

int ckpt_protect_source(ckpt_runtime* rt, const char* name, int dtype, int kind, ckpt_locate_fn locate,
                        ckpt_resize_fn resize, void* user) {
  return guard(rt, [&] {
    CKPT_RETURN_IF_ERROR(need_runtime(rt));
    CKPT_RETURN_IF_ERROR(need_name(name));
    auto t = dtype_of(dtype);
    if (!t.ok()) return t.status();
    if (kind != CKPT_KIND_LOCAL && kind != CKPT_KIND_JOINED)
      return ckpt::Status(
          ckpt::Code::invalid_argument,
          "ckpt_protect_source: kind must be CKPT_KIND_LOCAL (0) or CKPT_KIND_JOINED (3), got " + std::to_string(kind));
    if (locate == nullptr) return ckpt::Status(ckpt::Code::invalid_argument, "ckpt_protect_source: locate is NULL");
    ckpt::Source src;
    // The runtime turns an exception of locate() into invalid_argument naming the region.
    src.locate = [locate, user]() -> ckpt::Place {
      void* ptr = nullptr;
      int ndims = -1;
      std::uint64_t dims[CKPT_MAX_DIMS] = {};
      const int rc = locate(user, &ptr, &ndims, dims);
      if (rc != CKPT_OK)
        throw std::runtime_error("the locate callback returned " + std::to_string(rc) + " (" + ckpt_code_name(rc) +
                                 ")");
      auto d = shape_of(ndims, dims, "dims");  // ndims in range, no negative extent cast to uint64_t
      if (!d.ok()) throw std::runtime_error("the locate callback gave " + d.status().message());
      return ckpt::Place{ptr, ckpt::Dims(std::move(d).value())};
    };
    if (resize != nullptr) {
      const std::string region = name;
      src.resize = [resize, user, region](const ckpt::Shape& count) {
        return callback_status(resize(user, static_cast<int>(count.size()), count.data()), region, "resize");
      };
    }
    return rt->rt->protect(name, *t, std::move(src),
                           kind == CKPT_KIND_JOINED ? ckpt::SourceKind::joined : ckpt::SourceKind::local);
  });
}

}  // extern "C"
