/* ckpt/ckpt.h: the C API of ckpt (C99), a thin layer over the C++ API of ckpt/ckpt.hpp.
 *
 *     ckpt_runtime* rt = NULL;
 *     if (ckpt_create(MPI_COMM_WORLD, NULL, &rt) != CKPT_OK) fprintf(stderr, "%s\n", ckpt_last_error());
 *     uint64_t global[2] = {ny, nx}, start[2] = {y0, 0}, count[2] = {ly, nx};
 *     ckpt_protect_block(rt, "rho", rho, CKPT_F64, 2, global, start, count);
 *     ckpt_protect_scalar(rt, "time", &t, CKPT_F64);
 *     ckpt_ticket* tk = NULL;
 *     ckpt_checkpoint(rt, step, NULL, &tk);       returns once the data is captured
 *     ...compute...; ckpt_ticket_wait(tk); ckpt_ticket_free(tk);
 *     int64_t step; if (ckpt_restart(rt, &step) == CKPT_OK) ...
 *     ckpt_close(rt); ckpt_free(rt);
 *
 * Errors are values: every function that can fail returns an int code, CKPT_OK (0) or one of the
 * other CKPT_* codes (the values of ckpt::Code). Nothing is thrown or aborted. The message of the
 * last failure on a runtime is ckpt_error_message(rt); the message of the last failure of the
 * calling thread (any function, including those without a runtime: ckpt_create, ckpt_ticket_*) is
 * ckpt_last_error().
 *
 * The communicator: this header does not include mpi.h. ckpt_create(comm, config, out) is a macro
 * that passes the bytes of any MPI_Comm to ckpt_create_handle() (so mpi.h is needed only where
 * ckpt_create is used, which is where the communicator is); ckpt_create_fortran() takes a Fortran
 * handle (MPI_Fint, an int in Open MPI and MPICH; MPI_Comm%MPI_VAL of mpi_f08).
 *
 * Threading as in ckpt.hpp: any MPI thread level (MPI_THREAD_MULTIPLE lets ckpt commit on threads
 * of its own; below it the application thread commits in ckpt_checkpoint/ckpt_poll/ckpt_wait_all);
 * a runtime is used by one application thread at a time; collective calls in the same order on
 * every rank. Strings returned
 * by this API stay valid until the next call on the same runtime (ckpt_error_message) or on the
 * same thread (ckpt_last_error). */
#ifndef CKPT_RUNTIME_CKPT_H
#define CKPT_RUNTIME_CKPT_H

#include <stddef.h>
#include <stdint.h>

#include "ckpt/export.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Return codes (ckpt::Code). */
#define CKPT_OK 0
#define CKPT_INVALID_ARGUMENT 1    /* bad input from the caller: a name, a shape, an option value */
#define CKPT_NOT_FOUND 2           /* no such checkpoint, variable or file */
#define CKPT_MISMATCH 3            /* restart target differs from what is stored */
#define CKPT_CORRUPT 4             /* on-disk data failed validation */
#define CKPT_IO_ERROR 5            /* the operating system refused */
#define CKPT_UNAVAILABLE 6         /* feature not compiled in, MPI without the needed thread level */
#define CKPT_FAILED_PRECONDITION 7 /* call made in the wrong state (e.g. after ckpt_close) */
#define CKPT_INTERNAL 8            /* a bug in ckpt, or out of memory */
#define CKPT_SUPERSEDED 9          /* not a failure: on_busy=coalesce replaced this checkpoint by a newer one */

/* Element types (ckpt::DType). */
#define CKPT_U8 1
#define CKPT_I8 2
#define CKPT_U16 3
#define CKPT_I16 4
#define CKPT_U32 5
#define CKPT_I32 6
#define CKPT_U64 7
#define CKPT_I64 8
#define CKPT_F32 9
#define CKPT_F64 10
#define CKPT_BYTES 11

/* Maximum number of dimensions accepted by this API. */
#define CKPT_MAX_DIMS 32

/** The runtime of one communicator (ckpt::Runtime). */
typedef struct ckpt_runtime ckpt_runtime;
/** One checkpoint in flight (ckpt::Ticket). */
typedef struct ckpt_ticket ckpt_ticket;

/** Figures of one checkpoint on this rank (ckpt::CheckpointStats, field for field).
 *
 *  The caller allocates this struct, so its size is part of the ABI. It grows only at its end, and the
 *  library is told how large the caller's copy is: ckpt_ticket_stats (a macro) passes
 *  sizeof(ckpt_checkpoint_stats) of the header the caller was compiled with to ckpt_ticket_stats_sized,
 *  which writes only the fields that lie wholly inside that size. A program built against an older
 *  header keeps working with a newer library (and a newer program with an older library gets the fields
 *  that library knows, the rest zeroed). Binaries built before the size was passed call the exported
 *  function ckpt_ticket_stats directly, which writes the first nine fields only (up to staging_bytes),
 *  what those binaries allocated. A size field inside the struct would have moved every field of the
 *  callers compiled before; a new getter with the size keeps their layout. */
typedef struct ckpt_checkpoint_stats {
  int64_t step;
  uint64_t bytes;         /* payload bytes of this rank's regions */
  uint64_t bytes_written; /* bytes this rank wrote */
  double blocked_s;       /* time spent inside ckpt_checkpoint */
  double capture_wait_s;  /* part of blocked_s spent waiting for staging memory */
  double flush_s;         /* first chunk handed to the flush threads -> data durable */
  double durable_s;       /* entering ckpt_checkpoint -> this rank's data durable */
  double committed_s;     /* entering ckpt_checkpoint -> commit visible */
  uint64_t staging_bytes; /* size of the staging pool during this checkpoint */
  /* ---- added after the first nine: written by ckpt_ticket_stats_sized only (see above) ---- */
  double redundancy_s;           /* with redundancy partner or xor: seconds of the copy to the partner node
                                    or of the parity exchange and write (part of committed_s) */
  uint64_t redundancy_bytes;     /* with redundancy partner or xor: bytes this rank sent */
  uint64_t staging_pinned_bytes; /* part of staging_bytes the GPU can DMA to (pinned); 0 on the host device */
  int synced;                    /* 1: fsynced (data, index, directories) before the ticket completed; 0 with
                                    fsync off, and with durable_every_ms > 0 until the next periodic sync */
} ckpt_checkpoint_stats;

/** Version of ckpt, e.g. "0.1.0". */
CKPT_API const char* ckpt_version(void);
/** Name of a code, e.g. "io_error"; "unknown" for a value that is not a code. */
CKPT_API const char* ckpt_code_name(int code);
/** "<code>: <message>" of the last failure of any ckpt call on this thread; "" if none yet. */
CKPT_API const char* ckpt_last_error(void);

/** Collective over the communicator whose handle is the `comm_size` bytes at `comm` (an MPI_Comm of
 *  the MPI library ckpt was built with). `config`: path of a YAML options file, or NULL/"" for the
 *  defaults; CKPT_* environment variables apply on top. On success *out is a new runtime; on failure
 *  (agreed by every rank) *out is NULL and ckpt_last_error() says why. */
CKPT_API int ckpt_create_handle(const void* comm, size_t comm_size, const char* config, ckpt_runtime** out);
/** As ckpt_create_handle, from a Fortran communicator handle (MPI_Fint; MPI_Comm_f2c is applied). */
CKPT_API int ckpt_create_fortran(int fortran_comm, const char* config, ckpt_runtime** out);

#ifndef __cplusplus
/** ckpt_create(MPI_Comm comm, const char* config, ckpt_runtime** out): ckpt_create_handle on `comm`.
 *  A macro (C99 compound literal) so that this header needs no mpi.h; use it where MPI_Comm is known. */
#define ckpt_create(comm, config, out) ckpt_create_handle(&(MPI_Comm){(comm)}, sizeof(MPI_Comm), (config), (out))
#endif

/** Collective: ckpt_close (if not called yet) and frees the handle. NULL is ignored. */
CKPT_API void ckpt_free(ckpt_runtime* rt);
/** Collective. Waits for checkpoints in flight, stops the background threads, frees staging
 *  memory; returns the first failure. Idempotent; later calls other than ckpt_free fail. */
CKPT_API int ckpt_close(ckpt_runtime* rt);
/** "<code>: <message>" of the last failure of a call on `rt`, "" if none; rt == NULL: ckpt_last_error(). */
CKPT_API const char* ckpt_error_message(const ckpt_runtime* rt);
/** Records a failure found by a language binding (e.g. the argument checks of the Fortran module)
 *  as the last error of `rt` (NULL: of this thread only); returns `code`. */
CKPT_API int ckpt_report_error(ckpt_runtime* rt, int code, const char* message);
/** This rank and the size of the runtime's communicator. */
CKPT_API int ckpt_rank(const ckpt_runtime* rt, int* rank);
CKPT_API int ckpt_size(const ckpt_runtime* rt, int* size);

/** Registers a local array (this rank only) of `ndims` dimensions `dims` (C order, slowest first;
 *  ndims = 0 is a scalar) of `dtype` at `ptr` (host or device memory). The caller keeps ownership
 *  and keeps `ptr` valid until ckpt_unprotect or the end of the runtime. Names: [A-Za-z0-9_./-].
 *  An extent, start or global extent of 2^63 or more (a negative number cast to uint64_t) is
 *  CKPT_INVALID_ARGUMENT naming it, here and in every call below that takes extents. */
CKPT_API int ckpt_protect(ckpt_runtime* rt, const char* name, void* ptr, int dtype, int ndims, const uint64_t* dims);
/** Registers this rank's box [start, start + count) of a global C-order array of extents `global`;
 *  restartable on another rank count. */
CKPT_API int ckpt_protect_block(ckpt_runtime* rt, const char* name, void* ptr, int dtype, int ndims,
                                const uint64_t* global, const uint64_t* start, const uint64_t* count);
/** Registers a single value (same as ckpt_protect with ndims = 0). */
CKPT_API int ckpt_protect_scalar(ckpt_runtime* rt, const char* name, void* ptr, int dtype);
/** Changes the pointer and extents of a registered local array (dtype and kind stay). */
CKPT_API int ckpt_update(ckpt_runtime* rt, const char* name, void* ptr, int ndims, const uint64_t* dims);
/** Changes the pointer and box of a registered global-array region. */
CKPT_API int ckpt_update_block(ckpt_runtime* rt, const char* name, void* ptr, int ndims, const uint64_t* global,
                               const uint64_t* start, const uint64_t* count);
/** Registers this rank's rows of a joined array (ckpt::Joined): the global array is every rank's
 *  rows concatenated in rank order; the runtime gathers the row counts at each commit. dims[0] is this
 *  rank's row count (0 allowed; then ptr may be NULL), dims[1..ndims) the extents of a row, equal on
 *  every rank. first_row: restart only, the first stored row this rank reads; -1 (CKPT_BALANCED) for
 *  this rank's share of the balanced split (see ckpt_joined_rows); any other negative value is
 *  CKPT_INVALID_ARGUMENT naming it. Restartable on any rank count. */
CKPT_API int ckpt_protect_joined(ckpt_runtime* rt, const char* name, void* ptr, int dtype, int ndims,
                                 const uint64_t* dims, int64_t first_row);
/** Changes the pointer, rows and first_row of a registered joined array. */
CKPT_API int ckpt_update_joined(ckpt_runtime* rt, const char* name, void* ptr, int ndims, const uint64_t* dims,
                                int64_t first_row);
/** Registers this rank's rows of a joined array that lie in `npieces` separately allocated pieces (AMR
 *  blocks with ghost cells, particle tiles; ckpt::Scattered): piece i holds rows[i] rows at ptrs[i] (host or
 *  device memory; NULL only when rows[i] is 0), and this rank's rows are the pieces' rows in order. rows
 *  may be NULL: one row per piece. row[0..ndims_row) are the extents of one row (C order, equal on every
 *  rank; ndims_row 0: a row is one element). start and alloc: both NULL (rows packed), or ndims_row entries
 *  each, one row's memory selection: each row is the box [start, start + row) of a row-major allocation
 *  of extents alloc, and a piece of k rows holds k such allocations back to back; only the boxes are
 *  stored, and the restart writes only the boxes (ghost cells stay as they are). The caller keeps
 *  ownership of the pieces and keeps them valid until ckpt_update_scattered, ckpt_unprotect or the end
 *  of the runtime; the arrays ptrs, rows, row, start and alloc are copied. ckpt_checkpoint copies each
 *  piece's rows into staging; a restart fills the pieces registered then (on another rank count by
 *  row or by key: ckpt_set_restart_rows, ckpt_set_restart_keys). Stored as any joined array. A piece
 *  with rows and a NULL pointer, a selection that does not fit, pieces in different kinds of memory:
 *  CKPT_INVALID_ARGUMENT naming the region (and the piece). */
CKPT_API int ckpt_protect_scattered(ckpt_runtime* rt, const char* name, int dtype, int ndims_row, const uint64_t* row,
                                    size_t npieces, void* const* ptrs, const uint64_t* rows, const uint64_t* start,
                                    const uint64_t* alloc);
/** The pieces of a region registered with ckpt_protect_scattered, anew (blocks refined, coarsened or
 *  moved): the pieces, their rows and the memory selection may all change; the dtype and the row extents
 *  may not (CKPT_INVALID_ARGUMENT). CKPT_NOT_FOUND when `name` is not protected, CKPT_INVALID_ARGUMENT
 *  when it is a region of another kind. */
CKPT_API int ckpt_update_scattered(ckpt_runtime* rt, const char* name, int ndims_row, const uint64_t* row,
                                   size_t npieces, void* const* ptrs, const uint64_t* rows, const uint64_t* start,
                                   const uint64_t* alloc);
/** Collective. The rows of joined array `name` in checkpoint `step`: *total of them, and this rank's
 *  share [*begin, *end) of their balanced split (what to allocate before ckpt_restart_step). */
CKPT_API int ckpt_joined_rows(ckpt_runtime* rt, int64_t step, const char* name, uint64_t* total, uint64_t* begin,
                              uint64_t* end);
/** first_row of ckpt_protect_joined / ckpt_update_joined: this rank's share of the balanced split. */
#define CKPT_BALANCED (-1)
/** Marks a region optional (optional != 0) or not: a restart from a checkpoint that lacks it leaves it
 *  untouched instead of failing with CKPT_NOT_FOUND (ckpt::Runtime::set_optional). */
CKPT_API int ckpt_set_optional(ckpt_runtime* rt, const char* name, int optional);
/** Stores only a box of a region's memory (ckpt::Runtime::set_memory_selection): the region's pointer
 *  is that of a row-major allocation of extents alloc[0..ndims), and its extents those of the box that
 *  starts at start[0..ndims) in it (ghost cells stay out of the checkpoint; restart writes only the box).
 *  ndims is the region's; ndims 0 packs the region again. Kept through updates. */
CKPT_API int ckpt_set_memory_selection(ckpt_runtime* rt, const char* name, int ndims, const uint64_t* start,
                                       const uint64_t* alloc);
/** Restart of joined array `name` fills this rank's n rows with the stored rows rows[0..n) (0-based, any
 *  order, a row may be asked for twice or by several ranks; rows may be NULL when n is 0): the N->M
 *  restart of blocks that moved (ckpt::Runtime::set_restart_rows). Replaces first_row and the balanced
 *  split until ckpt_clear_restart_rows. */
CKPT_API int ckpt_set_restart_rows(ckpt_runtime* rt, const char* name, const uint64_t* rows, size_t n);
/** As ckpt_set_restart_rows, the rows named by their values keys[0..n) in `key`, a joined integer array
 *  of one value per row (a block id; ckpt::Runtime::set_restart_keys). Resolved by the restart
 *  (collective): CKPT_NOT_FOUND for a key no stored row holds, CKPT_INVALID_ARGUMENT for one held twice. */
CKPT_API int ckpt_set_restart_keys(ckpt_runtime* rt, const char* name, const char* key, const int64_t* keys, size_t n);
/** Back to first_row or the balanced split for joined array `name` (ckpt::Runtime::clear_restart_rows). */
CKPT_API int ckpt_clear_restart_rows(ckpt_runtime* rt, const char* name);
/** Forgets a region. */
CKPT_API int ckpt_unprotect(ckpt_runtime* rt, const char* name);
/** Attaches a string attribute to a region, stored in the index of every later checkpoint. */
CKPT_API int ckpt_annotate(ckpt_runtime* rt, const char* name, const char* key, const char* value);

/** Collective. Captures every region for `step` (>= 0) and returns once the data is copied (host) or
 *  its copies are ordered on `stream` (a cudaStream_t; NULL = default stream). Writing and committing
 *  go on in the background. `ticket`: receives a new ticket to free with ckpt_ticket_free, or NULL
 *  (then ckpt_wait_all reports the outcome). The return code is the capture's: a checkpoint that
 *  failed to start returns its code here (and its ticket's wait returns it too). */
CKPT_API int ckpt_checkpoint(ckpt_runtime* rt, int64_t step, void* stream, ckpt_ticket** ticket);
/** Blocks until the checkpoint is committed or failed; returns the outcome (the same on every rank). */
CKPT_API int ckpt_ticket_wait(const ckpt_ticket* ticket);
/** *done = 1 once ckpt_ticket_wait would not block, else 0. */
CKPT_API int ckpt_ticket_done(const ckpt_ticket* ticket, int* done);
/** This rank's figures of the checkpoint (complete once done) into `stats`, whose size the caller
 *  compiled with is `stats_size`: every field lying wholly inside it is written, bytes of stats_size
 *  beyond the fields this library knows are zeroed. CKPT_INVALID_ARGUMENT when stats_size is smaller
 *  than the first nine fields (offsetof(ckpt_checkpoint_stats, redundancy_s)). Call it through the
 *  ckpt_ticket_stats(ticket, stats) macro, which passes sizeof(ckpt_checkpoint_stats). */
CKPT_API int ckpt_ticket_stats_sized(const ckpt_ticket* ticket, ckpt_checkpoint_stats* stats, size_t stats_size);
/** The exported function of binaries built before ckpt_ticket_stats_sized: writes the first nine fields
 *  of `stats` only (step .. staging_bytes), what they allocated. Source code reaches it only by naming it
 *  in parentheses, (ckpt_ticket_stats)(ticket, stats); the macro below is what it calls. */
CKPT_API int(ckpt_ticket_stats)(const ckpt_ticket* ticket, ckpt_checkpoint_stats* stats);
/** ckpt_ticket_stats(const ckpt_ticket* ticket, ckpt_checkpoint_stats* stats): every field of this
 *  header's ckpt_checkpoint_stats (ckpt_ticket_stats_sized with its size). */
#define ckpt_ticket_stats(ticket, stats) ckpt_ticket_stats_sized((ticket), (stats), sizeof(ckpt_checkpoint_stats))
/** Frees a ticket (the checkpoint itself goes on). NULL is ignored. */
CKPT_API void ckpt_ticket_free(ckpt_ticket* ticket);
/** Collective. Blocks until every checkpoint in flight is done; returns the first failure. */
CKPT_API int ckpt_wait_all(ckpt_runtime* rt);
/** Collective. With funneled MPI calls (option mpi_threads): commits the checkpoints every rank has
 *  written, on this thread (ckpt::Runtime::poll); otherwise nothing. */
CKPT_API int ckpt_poll(ckpt_runtime* rt);

/** Collective. *step = newest checkpoint whose index validates, or -1 if there is none; an error
 *  code (not -1) when the checkpoint directory cannot be listed (ckpt::Runtime::latest). */
CKPT_API int ckpt_latest(ckpt_runtime* rt, int64_t* step);
/** Collective. Fills every region from checkpoint `step`, verifying checksums. */
CKPT_API int ckpt_restart_step(ckpt_runtime* rt, int64_t step);
/** Collective. Restarts from the newest checkpoint that loads and verifies (falling back to older
 *  ones) and stores its step in *step; CKPT_NOT_FOUND (and *step = -1) when none exists. */
CKPT_API int ckpt_restart(ckpt_runtime* rt, int64_t* step);
/** The warning of the last successful ckpt_restart or ckpt_restart_stream (ckpt::Runtime::restart()'s
 *  Result::warning()): *code = CKPT_OK and *message = "" when it restarted from the newest step with
 *  every region; otherwise *code is the failure of the newest skipped step that failed with more than
 *  CKPT_NOT_FOUND (e.g. CKPT_CORRUPT), or CKPT_NOT_FOUND (only optional regions left untouched, or every
 *  skipped step lacked something), and *message says which newer steps were skipped and why, and which
 *  optional regions were left untouched. Reset by every restart call (ckpt_restart_step and failed
 *  restarts leave none); the code is the same on every rank. *message is owned by rt, valid until the
 *  next restart or ckpt_free; either output may be NULL. */
CKPT_API int ckpt_restart_warning(const ckpt_runtime* rt, int* code, const char** message);

/* ---- For language bindings (the Python package): options as text, restart on a stream, the device -- */

/** As ckpt_create_handle, with `options` applied on top of the file `config`: NULL/"" or the text of a
 *  YAML map with the keys of a config file (docs/options.md; JSON is YAML, so a binding passes its
 *  dictionary as JSON). Precedence: defaults < config < options < CKPT_* environment variables. An
 *  error of `options` (unknown key, bad value, not a map) names "options" and is agreed by every rank. */
CKPT_API int ckpt_create_handle_options(const void* comm, size_t comm_size, const char* config, const char* options,
                                        ckpt_runtime** out);
/** Collective. As ckpt_restart, with the copies into device memory ordered after the work enqueued so
 *  far on `stream` (a cudaStream_t, or hipStream_t; NULL = the default stream) and the work enqueued on
 *  `stream` afterwards ordered after them (ckpt::Runtime::restart(ckpt::newest, stream)). The host device ignores it. */
CKPT_API int ckpt_restart_stream(ckpt_runtime* rt, void* stream, int64_t* step);
/** Collective. As ckpt_restart_step, ordered on `stream` as in ckpt_restart_stream. */
CKPT_API int ckpt_restart_step_stream(ckpt_runtime* rt, int64_t step, void* stream);
/** *name = the device that copies the regions (ckpt::Runtime::device_name): "host" (built without a
 *  GPU device, or no GPU found: pointers are read as host memory), "cuda" or "hip". A static string. */
CKPT_API int ckpt_device_name(const ckpt_runtime* rt, const char** name);

/* ---- Reading checkpoints without restarting (ckpt::Reader; no MPI call, serial) ----------------- */

/** The checkpoints under a root, or one checkpoint directory (ckpt::Reader). */
typedef struct ckpt_reader ckpt_reader;
/** One complete checkpoint opened for reading (ckpt::CheckpointReader). */
typedef struct ckpt_reader_step ckpt_reader_step;

/* Variable kinds (ckpt::VarKind). */
#define CKPT_KIND_LOCAL 0
#define CKPT_KIND_GLOBAL 1
#define CKPT_KIND_SCALAR 2
#define CKPT_KIND_JOINED 3 /* rows of every rank, concatenated: read like a global array */

/** A stored variable (ckpt::VariableInfo). Every pointer belongs to the ckpt_reader_step it came from
 *  and stays valid until ckpt_reader_step_free. */
typedef struct ckpt_var_info {
  const char* name;
  int dtype;             /* CKPT_U8 ... CKPT_BYTES */
  int kind;              /* CKPT_KIND_* */
  int uniform;           /* 1: every rank stored the same bytes (scalars, locals) */
  int ndims;             /* entries of shape */
  const uint64_t* shape; /* global: the whole array; local/scalar: the lowest writer rank's block */
  int has_minmax;        /* 1: min and max hold the stored statistics */
  double min, max;
  size_t nattrs;
  const char* const* attr_keys;   /* nattrs entries, in annotate() order */
  const char* const* attr_values; /* nattrs entries */
  size_t nblocks;
  const uint32_t* block_ranks;  /* nblocks entries: the rank that wrote each block */
  const uint64_t* block_starts; /* nblocks * ndims: first index of each block (zeros unless global) */
  const uint64_t* block_counts; /* nblocks * ndims: extents of each block */
  size_t nranks;
  const uint32_t* ranks; /* ranks that wrote a block, ascending, each once */
} ckpt_var_info;

/** Opens a checkpoint root or one checkpoint directory; *out receives a handle to free with
 *  ckpt_reader_free. */
CKPT_API int ckpt_reader_open(const char* path, ckpt_reader** out);
/** Collective over the communicator whose handle is the `comm_size` bytes at `comm` (an MPI_Comm):
 *  as ckpt_reader_open, but rank 0 lists `path` and every rank gets the listing or rank 0's error;
 *  ckpt_reader_open_step and ckpt_reader_latest of this reader are then collective too (rank 0 reads
 *  the index once, every rank gets it). Reads stay independent: each rank reads its own part. The
 *  communicator must stay valid while steps are opened. Use ckpt_reader_open_comm(comm, path, out). */
CKPT_API int ckpt_reader_open_handle(const void* comm, size_t comm_size, const char* path, ckpt_reader** out);
#ifndef __cplusplus
/** ckpt_reader_open_comm(MPI_Comm comm, const char* path, ckpt_reader** out): ckpt_reader_open_handle
 *  on `comm` (a macro, as ckpt_create, so that this header needs no mpi.h). */
#define ckpt_reader_open_comm(comm, path, out) \
  ckpt_reader_open_handle(&(MPI_Comm){(comm)}, sizeof(MPI_Comm), (path), (out))
#endif
/** Frees a reader (steps opened from it stay valid). NULL is ignored. */
CKPT_API void ckpt_reader_free(ckpt_reader* r);
/** Complete steps, oldest first: *count receives how many there are; up to `capacity` of them are
 *  stored in steps (which may be NULL when capacity is 0). */
CKPT_API int ckpt_reader_steps(const ckpt_reader* r, int64_t* steps, size_t capacity, size_t* count);
/** Opens complete step `step` (CKPT_NOT_FOUND when it is not one); free with ckpt_reader_step_free. */
CKPT_API int ckpt_reader_open_step(const ckpt_reader* r, int64_t step, ckpt_reader_step** out);
/** Opens the newest complete step (CKPT_NOT_FOUND when there is none). */
CKPT_API int ckpt_reader_latest(const ckpt_reader* r, ckpt_reader_step** out);
/** Frees a step. NULL is ignored. */
CKPT_API void ckpt_reader_step_free(ckpt_reader_step* c);
/** The step, the number of ranks that wrote it and its transport (a string owned by c). Any output
 *  may be NULL. */
CKPT_API int ckpt_reader_step_info(const ckpt_reader_step* c, int64_t* step, int* nranks, const char** transport);
/** Number of variables. */
CKPT_API int ckpt_reader_step_nvars(const ckpt_reader_step* c, size_t* n);
/** Variable `i` (0 <= i < nvars, registration order). */
CKPT_API int ckpt_reader_step_var(const ckpt_reader_step* c, size_t i, ckpt_var_info* info);
/** Index of the variable called `name` (CKPT_NOT_FOUND when there is none). */
CKPT_API int ckpt_reader_step_find(const ckpt_reader_step* c, const char* name, size_t* i);
/** *bytes = what ckpt_reader_step_read of the same box writes, once the checks it makes before reading
 *  passed (the box lies in the array; every block it touches lies inside its data file as the file is
 *  now, and those blocks cover the box). Reads no data. Allocate from it, not from extents or block
 *  sizes: a damaged or crafted index may claim more than its files hold (CKPT_CORRUPT here). */
CKPT_API int ckpt_reader_step_box_bytes(ckpt_reader_step* c, const char* name, int ndims, const uint64_t* start,
                                        const uint64_t* count, uint64_t* bytes);
/** *bytes = the size of the block rank `rank` wrote of local or scalar variable `name`, once it is known to
 *  lie inside its data file (as ckpt_reader_step_box_bytes). */
CKPT_API int ckpt_reader_step_rank_bytes(ckpt_reader_step* c, const char* name, uint32_t rank, uint64_t* bytes);
/** Reads the box [start, start + count) of global variable `name` into `out` (row-major, the stored
 *  dtype, at least the box's bytes in out_bytes); only the blocks that intersect it are read, each
 *  verified. */
CKPT_API int ckpt_reader_step_read(ckpt_reader_step* c, const char* name, int ndims, const uint64_t* start,
                                   const uint64_t* count, void* out, size_t out_bytes);
/** Reads the block rank `rank` wrote of local or scalar variable `name`. */
CKPT_API int ckpt_reader_step_read_rank(ckpt_reader_step* c, const char* name, uint32_t rank, void* out,
                                        size_t out_bytes);
/** Reads and checks every block; CKPT_CORRUPT with ckpt_last_error() naming each bad block. (A step from
 *  ckpt_inspect of a two-level index is read whole first; its infos keep nblocks 0 until
 *  ckpt_reader_step_load_blocks.) */
CKPT_API int ckpt_reader_step_verify(ckpt_reader_step* c);
/** Lists every block (ckpt::CheckpointReader::load_blocks): a step from ckpt_inspect of a two-level index
 *  (index_format 2) describes its variables from the root index alone, with nblocks and nranks 0 in
 *  ckpt_var_info, and reads the block records a read needs when it needs them; this reads the whole
 *  index (every sub-index, checked as ckpt_reader_open_step checks it) so that ckpt_reader_step_var lists
 *  blocks and ranks. Infos taken before are invalid afterwards: take them again. Nothing when the blocks
 *  are listed already. CKPT_CORRUPT for a damaged sub-index, CKPT_FAILED_PRECONDITION when the step was
 *  committed again since it was opened. */
CKPT_API int ckpt_reader_step_load_blocks(ckpt_reader_step* c);
/** The rows of joined integer variable `key` ordered by its values (ckpt::CheckpointReader::rows_by_key):
 *  rows[i] is the stored row holding the i-th smallest value, so that joined arrays of the same rows
 *  written by different rank counts read in one order. *count receives the number of rows; up to
 *  `capacity` are stored (rows may be NULL when capacity is 0). CKPT_INVALID_ARGUMENT naming why when
 *  `key` is not joined, not an integer dtype, has more than one value per row, or holds a value in more
 *  than one row (the message names the first few). */
CKPT_API int ckpt_reader_step_rows_by_key(ckpt_reader_step* c, const char* key, uint64_t* rows, size_t capacity,
                                          size_t* count);

/* ---- The runtime's parity with ckpt::Runtime: sizing before restart, the resolved options -------- */

/** Collective. The complete steps, oldest first (ckpt::Runtime::steps): those of the checkpoint
 *  directory whose index validates (what ckpt_inspect opens and ckpt_restart tries) and, with the
 *  option local_dir, the steps the node level can restore. *count receives how many there are; up to
 *  `capacity` of them are stored in steps (NULL allowed when capacity is 0). Every rank gets the same. */
CKPT_API int ckpt_steps(ckpt_runtime* rt, int64_t* steps, size_t capacity, size_t* count);
/** Collective. Describes checkpoint `step` without restoring anything (ckpt::Runtime::inspect): rank 0
 *  reads its index once, every rank gets it (a two-level index: its root only, O(variables); blocks are
 *  listed after ckpt_reader_step_load_blocks). *out is a step handle of the reader API (ckpt_reader_step_var
 *  and the other ckpt_reader_step_* functions: variables in registration order with dtype, kind, shape,
 *  attributes, blocks; a joined array's shape[0] is its rows in total, its block i holds
 *  block_counts[i * ndims] rows written by rank block_ranks[i]); free it with ckpt_reader_step_free. It
 *  stays valid after ckpt_free. CKPT_NOT_FOUND when `step` is not a complete checkpoint. */
CKPT_API int ckpt_inspect(ckpt_runtime* rt, int64_t step, ckpt_reader_step** out);
/** *dir = the checkpoint directory in effect (ckpt::Runtime::options().dir): after the config file,
 *  the options text and the CKPT_* variables, made absolute and agreed by every rank. Owned by rt,
 *  valid until ckpt_free. */
CKPT_API int ckpt_dir(const ckpt_runtime* rt, const char** dir);
/** *yaml = every option in effect as YAML text (ckpt::Options::to_yaml of ckpt::Runtime::options()),
 *  loadable as a config file. Owned by rt, valid until ckpt_free. */
CKPT_API int ckpt_options_yaml(ckpt_runtime* rt, const char** yaml);
/** *funneled = 1 when every MPI call of the runtime is made on the application thread (option
 *  mpi_threads, "auto" resolved; ckpt::Runtime::funneled), else 0. */
CKPT_API int ckpt_funneled(const ckpt_runtime* rt, int* funneled);
/** *level = the level the last successful restart read from: "local", "partner", "xor", "global", or ""
 *  before any (ckpt::Runtime::restart_level). Owned by rt, valid until the next restart. */
CKPT_API int ckpt_restart_level(const ckpt_runtime* rt, const char** level);
/** *bytes = the index bytes this rank read or received in the last restart: with index_format 2, the root
 *  and only the catalog pieces and sub-indices its regions needed; the whole index otherwise; 0 before
 *  any (ckpt::Runtime::restart_index_bytes). */
CKPT_API int ckpt_restart_index_bytes(const ckpt_runtime* rt, uint64_t* bytes);
/** The optional regions the last restart left untouched because its checkpoint lacked them
 *  (ckpt::Runtime::skipped_optional): *count receives how many; when index < *count, *name (if not
 *  NULL) receives the index-th name (owned by rt, valid until the next restart). */
CKPT_API int ckpt_skipped_optional(const ckpt_runtime* rt, size_t index, size_t* count, const char** name);

/** A region found anew at every checkpoint and restart (ckpt::Source), registered with
 *  ckpt_protect_source. locate: where the data is now: stores its address in *ptr (NULL only when it
 *  holds no element) and its extents in dims[0..*ndims) (C order, at most CKPT_MAX_DIMS entries; a
 *  local source may set *ndims = 0 for a scalar; a joined source gives its rows first). Returns
 *  CKPT_OK, or another code to fail the call that asked with CKPT_INVALID_ARGUMENT naming the region and
 *  that code. Called on the application thread inside ckpt_protect_source, ckpt_checkpoint and the
 *  restarts, never concurrently; it must not call ckpt. */
typedef int (*ckpt_locate_fn)(void* user, void** ptr, int* ndims, uint64_t* dims);
/** Optional (NULL: none). Called by a restart, before the region is filled, with the extents it will fill
 *  from the step being tried: the stored extents of this rank's array (local), or this rank's share of
 *  the balanced split of the stored rows, rows first (joined). It makes room (realloc); locate is then
 *  asked again. Its code other than CKPT_OK fails that step's restart with that code (ckpt_restart then
 *  falls back to an older step, calling resize again with that step's extents). */
typedef int (*ckpt_resize_fn)(void* user, int ndims, const uint64_t* dims);
/** Registers a region through callbacks (ckpt::Runtime::protect with a ckpt::Source): `kind` is
 *  CKPT_KIND_LOCAL (a local array or scalar, restartable on the same rank count) or CKPT_KIND_JOINED (this
 *  rank's rows of a joined array, restartable on any rank count with the balanced split). `user` is
 *  handed to both callbacks and must stay valid while the region is registered. With a resize callback,
 *  ckpt_restart sizes the region for each step it tries: one call restarts step-dependent lengths and
 *  keeps the fall-back to an older step. locate is called once here to check the region. */
CKPT_API int ckpt_protect_source(ckpt_runtime* rt, const char* name, int dtype, int kind, ckpt_locate_fn locate,
                                 ckpt_resize_fn resize, void* user);

#ifdef __cplusplus
} /* extern "C" */

/** C++: ckpt_create from any MPI_Comm (a function template; C uses the macro above). */
template <class Comm>
inline int ckpt_create(Comm comm, const char* config, ckpt_runtime** out) {
  return ckpt_create_handle(&comm, sizeof(Comm), config, out);
}
#endif

#endif /* CKPT_RUNTIME_CKPT_H */
