!> Module ckpt: the Fortran API of ckpt, over the C API of ckpt/ckpt.h (iso_c_binding).
!>
!>     use ckpt
!>     type(ckpt_runtime) :: rt
!>     call ckpt_init(rt, MPI_COMM_WORLD, ierr)                   ! collective; MPI_THREAD_MULTIPLE
!>     call ckpt_protect(rt, "u", u(1:nx, 1:ny, 1:nz), global, start, ierr) ! this rank's box of a global array
!>     call ckpt_protect(rt, "time", t, ierr)                       ! a scalar (or a local array)
!>     call ckpt_checkpoint(rt, step, ierr)                         ! returns once the data is captured
!>     call ckpt_restart(rt, step, ierr)                            ! newest checkpoint that verifies
!>     call ckpt_finalize(rt, ierr)
!>
!> Every procedure returns its outcome in ierr: CKPT_OK (0) or another CKPT_* code; ckpt_error_message
!> says why. Nothing stops or aborts.
!>
!> Array order: ckpt stores arrays in C (row-major) order, slowest dimension first. A Fortran array
!> a(n1, n2, n3) is column-major, so it is registered as the C array [n3, n2, n1] (dimensions
!> reversed, no data moved): `ckpt ls` shows [n3, n2, n1] and a C/C++ reader indexes it a[i3][i2][i1].
!> Global extents and box starts are given in Fortran order (start 0-based) and reversed the same way.
!> Each Fortran-registered array carries the attribute array_order = "fortran".
!>
!> Arrays are registered by address: pass the whole array (or a contiguous part), declared with the
!> target attribute, and keep it allocated until ckpt_unprotect or ckpt_finalize. A non-contiguous
!> actual argument (e.g. u(1:nx-1, :)) is refused with CKPT_INVALID_ARGUMENT, never copied.
!> The module uses assumed-rank dummies (Fortran 2018 / TS 29113; gfortran >= 9): any rank works,
!> the calling code may be plain Fortran 2008.
module ckpt
  use, intrinsic :: iso_c_binding, only: c_ptr, c_null_ptr, c_char, c_null_char, c_int, c_int64_t, c_size_t, &
                                         c_loc, c_associated, c_f_pointer, c_funptr, c_null_funptr, c_funloc, &
                                         c_double, c_int32_t, c_sizeof
  use, intrinsic :: iso_fortran_env, only: int32, int64, real32, real64
  use mpi_f08, only: MPI_Comm
  implicit none
  private

  public :: ckpt_runtime
  public :: ckpt_init, ckpt_protect, ckpt_unprotect, ckpt_annotate, ckpt_checkpoint, ckpt_wait_all, ckpt_poll
  public :: ckpt_latest, ckpt_restart, ckpt_restart_step, ckpt_error_message, ckpt_finalize
  public :: ckpt_protect_joined, ckpt_update_joined, ckpt_joined_rows, ckpt_set_optional, ckpt_protect_selection
  public :: ckpt_step, ckpt_steps, ckpt_inspect, ckpt_step_free, ckpt_step_nvars, ckpt_step_var_name
  public :: ckpt_step_variable, ckpt_step_attribute, ckpt_dir, ckpt_protect_source
  public :: ckpt_options_yaml, ckpt_funneled, ckpt_restart_level, ckpt_skipped_optional
  public :: ckpt_locate_proc, ckpt_resize_proc
  public :: ckpt_ticket, ckpt_ticket_wait, ckpt_ticket_done, ckpt_ticket_stats
  public :: ckpt_ticket_free, ckpt_restart_warning
  public :: ckpt_set_restart_rows, ckpt_set_restart_keys, ckpt_clear_restart_rows
  public :: ckpt_protect_scattered, ckpt_update_scattered

  !> Return codes (ckpt/ckpt.h, ckpt::Code).
  integer, parameter, public :: CKPT_OK = 0, CKPT_INVALID_ARGUMENT = 1, CKPT_NOT_FOUND = 2, CKPT_MISMATCH = 3, &
                                CKPT_CORRUPT = 4, CKPT_IO_ERROR = 5, CKPT_UNAVAILABLE = 6, &
                                CKPT_FAILED_PRECONDITION = 7, CKPT_INTERNAL = 8, CKPT_SUPERSEDED = 9

  ! Element types (ckpt/ckpt.h).
  integer(c_int), parameter :: DT_I32 = 6, DT_I64 = 8, DT_F32 = 9, DT_F64 = 10
  !> Element types (ckpt/ckpt.h, ckpt::DType): ckpt_protect_source's dtype, ckpt_step_variable's.
  integer, parameter, public :: CKPT_U8 = 1, CKPT_I8 = 2, CKPT_U16 = 3, CKPT_I16 = 4, CKPT_U32 = 5, &
                                CKPT_I32 = 6, CKPT_U64 = 7, CKPT_I64 = 8, CKPT_F32 = 9, CKPT_F64 = 10, &
                                CKPT_BYTES = 11
  !> Variable kinds (ckpt/ckpt.h, ckpt::VarKind): ckpt_step_variable's kind.
  integer, parameter, public :: CKPT_KIND_LOCAL = 0, CKPT_KIND_GLOBAL = 1, CKPT_KIND_SCALAR = 2, &
                                CKPT_KIND_JOINED = 3

  abstract interface
    !> A region registered with ckpt_protect_source: where its data is now. ptr = c_loc(a) of the
    !> array (target, contiguous), extents = shape(a, int64) in Fortran order (a joined array: rows
    !> last); an allocatable of size 0 is a scalar. ierr /= CKPT_OK fails the call that asked.
    subroutine ckpt_locate_proc(ptr, extents, ierr)
      import :: c_ptr, int64
      type(c_ptr), intent(out) :: ptr
      integer(int64), allocatable, intent(out) :: extents(:)
      integer, intent(out) :: ierr
    end subroutine ckpt_locate_proc
    !> Called by a restart before the region is filled, with the extents (Fortran order) of the step
    !> it tries: reallocate the array to them. ierr /= CKPT_OK fails that step's restart.
    subroutine ckpt_resize_proc(extents, ierr)
      import :: int64
      integer(int64), intent(in) :: extents(:)
      integer, intent(out) :: ierr
    end subroutine ckpt_resize_proc
  end interface

  ! The Fortran procedures of one region registered with ckpt_protect_source; its address is the C
  ! callbacks' user pointer. Kept in a list of the runtime, freed by ckpt_finalize.
  type :: source_procs
    procedure(ckpt_locate_proc), pointer, nopass :: locate => null()
    procedure(ckpt_resize_proc), pointer, nopass :: resize => null()
    type(source_procs), pointer :: next => null()
  end type source_procs

  !> The runtime of one communicator. Default-initialised: not usable before ckpt_init.
  type :: ckpt_runtime
    private
    type(c_ptr) :: handle = c_null_ptr
    type(source_procs), pointer :: sources => null()
  end type ckpt_runtime

  !> One checkpoint described by ckpt_inspect (its index; no data is read). Free with ckpt_step_free.
  type :: ckpt_step
    private
    type(c_ptr) :: handle = c_null_ptr
  end type ckpt_step

  !> One checkpoint in flight (ckpt_ticket of ckpt/ckpt.h), from ckpt_checkpoint(rt, step, ierr, ticket).
  !> Free with ckpt_ticket_free (the checkpoint goes on without it).
  type :: ckpt_ticket
    private
    type(c_ptr) :: handle = c_null_ptr
  end type ckpt_ticket

  !> This rank's figures of one checkpoint (ckpt_checkpoint_stats, ckpt::CheckpointStats field for
  !> field; seconds of wall-clock time), from ckpt_ticket_stats.
  type, public :: ckpt_checkpoint_stats
    integer(int64) :: step = -1
    integer(int64) :: bytes = 0                !< payload bytes of this rank's regions
    integer(int64) :: bytes_written = 0        !< bytes this rank wrote
    real(real64) :: blocked_s = 0              !< time spent inside ckpt_checkpoint
    real(real64) :: capture_wait_s = 0         !< part of blocked_s spent waiting for staging memory
    real(real64) :: flush_s = 0                !< first chunk handed to the flush threads -> data durable
    real(real64) :: durable_s = 0              !< entering ckpt_checkpoint -> this rank's data durable
    real(real64) :: committed_s = 0            !< entering ckpt_checkpoint -> commit visible
    integer(int64) :: staging_bytes = 0        !< size of the staging pool during this checkpoint
    real(real64) :: redundancy_s = 0           !< with redundancy partner or xor: copy or parity time
    integer(int64) :: redundancy_bytes = 0     !< with redundancy partner or xor: bytes this rank sent
    integer(int64) :: staging_pinned_bytes = 0 !< part of staging_bytes the GPU can DMA to; 0 on the host
    logical :: synced = .false.                !< fsynced before the ticket completed
  end type ckpt_checkpoint_stats

  ! ckpt_checkpoint_stats of ckpt/ckpt.h (unsigned fields as int64: sizes stay below 2^63).
  type, bind(C) :: c_checkpoint_stats
    integer(c_int64_t) :: step, bytes, bytes_written
    real(c_double) :: blocked_s, capture_wait_s, flush_s, durable_s, committed_s
    integer(c_int64_t) :: staging_bytes
    real(c_double) :: redundancy_s
    integer(c_int64_t) :: redundancy_bytes, staging_pinned_bytes
    integer(c_int) :: synced
  end type c_checkpoint_stats

  ! ckpt_var_info of ckpt/ckpt.h.
  type, bind(C) :: c_var_info
    type(c_ptr) :: name
    integer(c_int) :: dtype, kind, uniform, ndims
    type(c_ptr) :: shape
    integer(c_int) :: has_minmax
    real(c_double) :: min, max
    integer(c_size_t) :: nattrs
    type(c_ptr) :: attr_keys, attr_values
    integer(c_size_t) :: nblocks
    type(c_ptr) :: block_ranks, block_starts, block_counts
    integer(c_size_t) :: nranks
    type(c_ptr) :: ranks
  end type c_var_info

  !> ckpt_init(rt, comm, ierr [, config]): comm is an integer handle (use mpi) or a type(MPI_Comm)
  !> (use mpi_f08); config the path of a YAML options file.
  interface ckpt_init
    module procedure init_int, init_f08
  end interface ckpt_init

  !> ckpt_protect(rt, name, a, ierr): a local array (this rank only, any rank) or a scalar.
  !> ckpt_protect(rt, name, a, global, start, ierr): a is this rank's box of a global array of extents
  !> global(1:rank(a)), starting at the 0-based index start(1:rank(a)) (integer(int64), Fortran order).
  interface ckpt_protect
    module procedure protect_r32, protect_r64, protect_i32, protect_i64
    module procedure protect_box_r32, protect_box_r64, protect_box_i32, protect_box_i64
  end interface ckpt_protect

  !> ckpt_protect_selection(rt, name, a, first, count, ierr): registers only the box of extents count(:)
  !> at 0-based offsets first(:) of the contiguous array a (Fortran order, one entry per dimension of a),
  !> e.g. the interior u(1:nx, 1:ny) of u(0:nx+1, 0:ny+1) is first = [1, 1], count = [nx, ny]: the ghost
  !> cells stay out of the checkpoint and restart fills only the box (ckpt_set_memory_selection in C).
  !> Pass the whole array a, never a section (a section is copied into a temporary).
  interface ckpt_protect_selection
    module procedure protect_selection_r32, protect_selection_r64, protect_selection_i32, protect_selection_i64
  end interface ckpt_protect_selection

  !> ckpt_protect_joined(rt, name, a, ierr [, first_row]): a holds this rank's rows of a joined array
  !> (every rank's rows, concatenated in rank order by ckpt at each commit): the rows are the LAST
  !> Fortran dimension, e.g. x(3, nlocal) is nlocal rows of 3; nlocal may be 0. No offsets to compute.
  !> first_row (restart only, 0-based): the first stored row read into a; absent: this rank's share of
  !> the balanced split (see ckpt_joined_rows). ckpt_update_joined: the same for a registered array
  !> whose address or row count changed.
  interface ckpt_protect_joined
    module procedure protect_joined_r32, protect_joined_r64, protect_joined_i32, protect_joined_i64
  end interface ckpt_protect_joined
  interface ckpt_update_joined
    module procedure update_joined_r32, update_joined_r64, update_joined_i32, update_joined_i64
  end interface ckpt_update_joined

  !> ckpt_checkpoint(rt, step, ierr [, ticket]): step is integer(int64) (or a default integer); ticket
  !> (type(ckpt_ticket)): receives a ticket of this checkpoint (its outcome and ckpt_ticket_stats).
  interface ckpt_checkpoint
    module procedure checkpoint_i64, checkpoint_i32
  end interface ckpt_checkpoint

  !> ckpt_restart_step(rt, step, ierr): restart from the given step.
  interface ckpt_restart_step
    module procedure restart_step_i64, restart_step_i32
  end interface ckpt_restart_step

  interface
    function c_create_fortran(comm, config, out) bind(C, name="ckpt_create_fortran") result(rc)
      import :: c_int, c_char, c_ptr
      integer(c_int), value :: comm
      character(kind=c_char), dimension(*), intent(in) :: config
      type(c_ptr), intent(out) :: out
      integer(c_int) :: rc
    end function c_create_fortran
    function c_close(rt) bind(C, name="ckpt_close") result(rc)
      import :: c_ptr, c_int
      type(c_ptr), value :: rt
      integer(c_int) :: rc
    end function c_close
    subroutine c_free(rt) bind(C, name="ckpt_free")
      import :: c_ptr
      type(c_ptr), value :: rt
    end subroutine c_free
    function c_error_message(rt) bind(C, name="ckpt_error_message") result(msg)
      import :: c_ptr
      type(c_ptr), value :: rt
      type(c_ptr) :: msg
    end function c_error_message
    function c_report_error(rt, code, message) bind(C, name="ckpt_report_error") result(rc)
      import :: c_ptr, c_int, c_char
      type(c_ptr), value :: rt
      integer(c_int), value :: code
      character(kind=c_char), dimension(*), intent(in) :: message
      integer(c_int) :: rc
    end function c_report_error
    function c_protect(rt, name, ptr, dtype, ndims, dims) bind(C, name="ckpt_protect") result(rc)
      import :: c_ptr, c_int, c_char, c_int64_t
      type(c_ptr), value :: rt, ptr
      character(kind=c_char), dimension(*), intent(in) :: name
      integer(c_int), value :: dtype, ndims
      integer(c_int64_t), dimension(*), intent(in) :: dims
      integer(c_int) :: rc
    end function c_protect
    function c_protect_block(rt, name, ptr, dtype, ndims, global, start, count) &
        bind(C, name="ckpt_protect_block") result(rc)
      import :: c_ptr, c_int, c_char, c_int64_t
      type(c_ptr), value :: rt, ptr
      character(kind=c_char), dimension(*), intent(in) :: name
      integer(c_int), value :: dtype, ndims
      integer(c_int64_t), dimension(*), intent(in) :: global, start, count
      integer(c_int) :: rc
    end function c_protect_block
    function c_protect_joined(rt, name, ptr, dtype, ndims, dims, first_row) &
        bind(C, name="ckpt_protect_joined") result(rc)
      import :: c_ptr, c_int, c_char, c_int64_t
      type(c_ptr), value :: rt, ptr
      character(kind=c_char), dimension(*), intent(in) :: name
      integer(c_int), value :: dtype, ndims
      integer(c_int64_t), dimension(*), intent(in) :: dims
      integer(c_int64_t), value :: first_row
      integer(c_int) :: rc
    end function c_protect_joined
    function c_update_joined(rt, name, ptr, ndims, dims, first_row) bind(C, name="ckpt_update_joined") result(rc)
      import :: c_ptr, c_int, c_char, c_int64_t
      type(c_ptr), value :: rt, ptr
      character(kind=c_char), dimension(*), intent(in) :: name
      integer(c_int), value :: ndims
      integer(c_int64_t), dimension(*), intent(in) :: dims
      integer(c_int64_t), value :: first_row
      integer(c_int) :: rc
    end function c_update_joined
    function c_protect_scattered(rt, name, dtype, ndims_row, row, npieces, ptrs, rows, start, alloc) &
        bind(C, name="ckpt_protect_scattered") result(rc)
      import :: c_ptr, c_int, c_char, c_int64_t, c_size_t
      type(c_ptr), value :: rt
      character(kind=c_char), dimension(*), intent(in) :: name
      integer(c_int), value :: dtype, ndims_row
      integer(c_int64_t), dimension(*), intent(in) :: row
      integer(c_size_t), value :: npieces
      type(c_ptr), dimension(*), intent(in) :: ptrs
      integer(c_int64_t), dimension(*), intent(in) :: rows
      type(c_ptr), value :: start, alloc  ! c_null_ptr: no memory selection
      integer(c_int) :: rc
    end function c_protect_scattered
    function c_update_scattered(rt, name, ndims_row, row, npieces, ptrs, rows, start, alloc) &
        bind(C, name="ckpt_update_scattered") result(rc)
      import :: c_ptr, c_int, c_char, c_int64_t, c_size_t
      type(c_ptr), value :: rt
      character(kind=c_char), dimension(*), intent(in) :: name
      integer(c_int), value :: ndims_row
      integer(c_int64_t), dimension(*), intent(in) :: row
      integer(c_size_t), value :: npieces
      type(c_ptr), dimension(*), intent(in) :: ptrs
      integer(c_int64_t), dimension(*), intent(in) :: rows
      type(c_ptr), value :: start, alloc
      integer(c_int) :: rc
    end function c_update_scattered
    function c_joined_rows(rt, step, name, tot, beg, fin) bind(C, name="ckpt_joined_rows") result(rc)
      import :: c_ptr, c_int, c_char, c_int64_t
      type(c_ptr), value :: rt
      integer(c_int64_t), value :: step
      character(kind=c_char), dimension(*), intent(in) :: name
      integer(c_int64_t), intent(out) :: tot, beg, fin
      integer(c_int) :: rc
    end function c_joined_rows
    function c_set_optional(rt, name, optional) bind(C, name="ckpt_set_optional") result(rc)
      import :: c_ptr, c_int, c_char
      type(c_ptr), value :: rt
      character(kind=c_char), dimension(*), intent(in) :: name
      integer(c_int), value :: optional
      integer(c_int) :: rc
    end function c_set_optional
    function c_set_memory_selection(rt, name, ndims, start, alloc) bind(C, name="ckpt_set_memory_selection") result(rc)
      import :: c_ptr, c_int, c_char, c_int64_t
      type(c_ptr), value :: rt
      character(kind=c_char), dimension(*), intent(in) :: name
      integer(c_int), value :: ndims
      integer(c_int64_t), dimension(*), intent(in) :: start, alloc
      integer(c_int) :: rc
    end function c_set_memory_selection
    function c_set_restart_rows(rt, name, rows, n) bind(C, name="ckpt_set_restart_rows") result(rc)
      import :: c_ptr, c_int, c_char, c_int64_t, c_size_t
      type(c_ptr), value :: rt
      character(kind=c_char), dimension(*), intent(in) :: name
      integer(c_int64_t), dimension(*), intent(in) :: rows
      integer(c_size_t), value :: n
      integer(c_int) :: rc
    end function c_set_restart_rows
    function c_set_restart_keys(rt, name, key, keys, n) bind(C, name="ckpt_set_restart_keys") result(rc)
      import :: c_ptr, c_int, c_char, c_int64_t, c_size_t
      type(c_ptr), value :: rt
      character(kind=c_char), dimension(*), intent(in) :: name, key
      integer(c_int64_t), dimension(*), intent(in) :: keys
      integer(c_size_t), value :: n
      integer(c_int) :: rc
    end function c_set_restart_keys
    function c_clear_restart_rows(rt, name) bind(C, name="ckpt_clear_restart_rows") result(rc)
      import :: c_ptr, c_int, c_char
      type(c_ptr), value :: rt
      character(kind=c_char), dimension(*), intent(in) :: name
      integer(c_int) :: rc
    end function c_clear_restart_rows
    function c_unprotect(rt, name) bind(C, name="ckpt_unprotect") result(rc)
      import :: c_ptr, c_int, c_char
      type(c_ptr), value :: rt
      character(kind=c_char), dimension(*), intent(in) :: name
      integer(c_int) :: rc
    end function c_unprotect
    function c_annotate(rt, name, key, value) bind(C, name="ckpt_annotate") result(rc)
      import :: c_ptr, c_int, c_char
      type(c_ptr), value :: rt
      character(kind=c_char), dimension(*), intent(in) :: name, key, value
      integer(c_int) :: rc
    end function c_annotate
    function c_checkpoint(rt, step, stream, ticket) bind(C, name="ckpt_checkpoint") result(rc)
      import :: c_ptr, c_int, c_int64_t
      type(c_ptr), value :: rt, stream, ticket
      integer(c_int64_t), value :: step
      integer(c_int) :: rc
    end function c_checkpoint
    function c_wait_all(rt) bind(C, name="ckpt_wait_all") result(rc)
      import :: c_ptr, c_int
      type(c_ptr), value :: rt
      integer(c_int) :: rc
    end function c_wait_all
    function c_poll(rt) bind(C, name="ckpt_poll") result(rc)
      import :: c_ptr, c_int
      type(c_ptr), value :: rt
      integer(c_int) :: rc
    end function c_poll
    function c_latest(rt, step) bind(C, name="ckpt_latest") result(rc)
      import :: c_ptr, c_int, c_int64_t
      type(c_ptr), value :: rt
      integer(c_int64_t), intent(out) :: step
      integer(c_int) :: rc
    end function c_latest
    function c_restart(rt, step) bind(C, name="ckpt_restart") result(rc)
      import :: c_ptr, c_int, c_int64_t
      type(c_ptr), value :: rt
      integer(c_int64_t), intent(out) :: step
      integer(c_int) :: rc
    end function c_restart
    function c_restart_warning(rt, code, message) bind(C, name="ckpt_restart_warning") result(rc)
      import :: c_ptr, c_int
      type(c_ptr), value :: rt
      integer(c_int), intent(out) :: code
      type(c_ptr), intent(out) :: message
      integer(c_int) :: rc
    end function c_restart_warning
    function c_ticket_wait(t) bind(C, name="ckpt_ticket_wait") result(rc)
      import :: c_ptr, c_int
      type(c_ptr), value :: t
      integer(c_int) :: rc
    end function c_ticket_wait
    function c_ticket_done(t, done) bind(C, name="ckpt_ticket_done") result(rc)
      import :: c_ptr, c_int
      type(c_ptr), value :: t
      integer(c_int), intent(out) :: done
      integer(c_int) :: rc
    end function c_ticket_done
    function c_ticket_stats_sized(t, stats, size) bind(C, name="ckpt_ticket_stats_sized") result(rc)
      import :: c_ptr, c_int, c_size_t, c_checkpoint_stats
      type(c_ptr), value :: t
      type(c_checkpoint_stats), intent(out) :: stats
      integer(c_size_t), value :: size
      integer(c_int) :: rc
    end function c_ticket_stats_sized
    subroutine c_ticket_free(t) bind(C, name="ckpt_ticket_free")
      import :: c_ptr
      type(c_ptr), value :: t
    end subroutine c_ticket_free
    function c_restart_step(rt, step) bind(C, name="ckpt_restart_step") result(rc)
      import :: c_ptr, c_int, c_int64_t
      type(c_ptr), value :: rt
      integer(c_int64_t), value :: step
      integer(c_int) :: rc
    end function c_restart_step
    function c_steps(rt, steps, capacity, count) bind(C, name="ckpt_steps") result(rc)
      import :: c_ptr, c_int, c_int64_t, c_size_t
      type(c_ptr), value :: rt
      integer(c_int64_t), dimension(*), intent(out) :: steps
      integer(c_size_t), value :: capacity
      integer(c_size_t), intent(out) :: count
      integer(c_int) :: rc
    end function c_steps
    function c_inspect(rt, step, out) bind(C, name="ckpt_inspect") result(rc)
      import :: c_ptr, c_int, c_int64_t
      type(c_ptr), value :: rt
      integer(c_int64_t), value :: step
      type(c_ptr), intent(out) :: out
      integer(c_int) :: rc
    end function c_inspect
    subroutine c_step_free(c) bind(C, name="ckpt_reader_step_free")
      import :: c_ptr
      type(c_ptr), value :: c
    end subroutine c_step_free
    function c_step_nvars(c, n) bind(C, name="ckpt_reader_step_nvars") result(rc)
      import :: c_ptr, c_int, c_size_t
      type(c_ptr), value :: c
      integer(c_size_t), intent(out) :: n
      integer(c_int) :: rc
    end function c_step_nvars
    function c_step_var(c, i, info) bind(C, name="ckpt_reader_step_var") result(rc)
      import :: c_ptr, c_int, c_size_t, c_var_info
      type(c_ptr), value :: c
      integer(c_size_t), value :: i
      type(c_var_info), intent(out) :: info
      integer(c_int) :: rc
    end function c_step_var
    function c_step_load_blocks(c) bind(C, name="ckpt_reader_step_load_blocks") result(rc)
      import :: c_ptr, c_int
      type(c_ptr), value :: c
      integer(c_int) :: rc
    end function c_step_load_blocks
    function c_step_find(c, name, i) bind(C, name="ckpt_reader_step_find") result(rc)
      import :: c_ptr, c_int, c_size_t, c_char
      type(c_ptr), value :: c
      character(kind=c_char), dimension(*), intent(in) :: name
      integer(c_size_t), intent(out) :: i
      integer(c_int) :: rc
    end function c_step_find
    function c_dir(rt, dir) bind(C, name="ckpt_dir") result(rc)
      import :: c_ptr, c_int
      type(c_ptr), value :: rt
      type(c_ptr), intent(out) :: dir
      integer(c_int) :: rc
    end function c_dir
    function c_options_yaml(rt, yaml) bind(C, name="ckpt_options_yaml") result(rc)
      import :: c_ptr, c_int
      type(c_ptr), value :: rt
      type(c_ptr), intent(out) :: yaml
      integer(c_int) :: rc
    end function c_options_yaml
    function c_funneled(rt, funneled) bind(C, name="ckpt_funneled") result(rc)
      import :: c_ptr, c_int
      type(c_ptr), value :: rt
      integer(c_int), intent(out) :: funneled
      integer(c_int) :: rc
    end function c_funneled
    function c_restart_level(rt, level) bind(C, name="ckpt_restart_level") result(rc)
      import :: c_ptr, c_int
      type(c_ptr), value :: rt
      type(c_ptr), intent(out) :: level
      integer(c_int) :: rc
    end function c_restart_level
    function c_skipped_optional(rt, i, count, name) bind(C, name="ckpt_skipped_optional") result(rc)
      import :: c_ptr, c_int, c_size_t
      type(c_ptr), value :: rt
      integer(c_size_t), value :: i
      integer(c_size_t), intent(out) :: count
      type(c_ptr), intent(out) :: name
      integer(c_int) :: rc
    end function c_skipped_optional
    function c_protect_source(rt, name, dtype, kind, locate, resize, user) bind(C, name="ckpt_protect_source") &
        result(rc)
      import :: c_ptr, c_int, c_char, c_funptr
      type(c_ptr), value :: rt, user
      character(kind=c_char), dimension(*), intent(in) :: name
      integer(c_int), value :: dtype, kind
      type(c_funptr), value :: locate, resize
      integer(c_int) :: rc
    end function c_protect_source
    function c_strlen(s) bind(C, name="strlen") result(n)
      import :: c_ptr, c_size_t
      type(c_ptr), value :: s
      integer(c_size_t) :: n
    end function c_strlen
  end interface

contains

  ! ---- helpers ------------------------------------------------------------------------------------

  !> `s` without trailing blanks, NUL-terminated for C.
  pure function cstr(s) result(c)
    character(len=*), intent(in) :: s
    character(kind=c_char, len=len_trim(s) + 1) :: c
    c = trim(s)//c_null_char
  end function cstr

  !> The error of a non-contiguous actual argument, recorded as the last error of rt.
  function not_contiguous(rt, name) result(ierr)
    type(ckpt_runtime), intent(in) :: rt
    character(len=*), intent(in) :: name
    integer :: ierr
    ierr = c_report_error(rt%handle, CKPT_INVALID_ARGUMENT, cstr("ckpt_protect: region '"//trim(name)// &
                          "': the array is not contiguous (an array section?); ckpt registers memory by address "// &
                          "and does not copy: pass a whole or contiguous array"))
  end function not_contiguous

  !> "<what>(i) = <v> is negative" for the first negative entry of `values` (1-based, Fortran order), ""
  !> when there is none: the C API takes extents as uint64_t, where a negative value would wrap.
  function first_negative(what, values) result(msg)
    character(len=*), intent(in) :: what
    integer(int64), intent(in) :: values(:)
    character(len=:), allocatable :: msg
    character(len=24) :: i_text, v_text
    integer :: i
    msg = ""
    do i = 1, size(values)
      if (values(i) < 0) then
        write (i_text, '(i0)') i
        write (v_text, '(i0)') values(i)
        msg = what//"("//trim(i_text)//") = "//trim(v_text)//" is negative"
        return
      end if
    end do
  end function first_negative

  ! ---- runtime ------------------------------------------------------------------------------------

  subroutine init_int(rt, comm, ierr, config)
    type(ckpt_runtime), intent(inout) :: rt
    integer, intent(in) :: comm
    integer, intent(out) :: ierr
    character(len=*), intent(in), optional :: config
    if (c_associated(rt%handle)) then
      ierr = c_report_error(rt%handle, CKPT_FAILED_PRECONDITION, &
                            cstr("ckpt_init: this ckpt_runtime is already initialised (call ckpt_finalize first)"))
      return
    end if
    if (present(config)) then
      ierr = c_create_fortran(int(comm, c_int), cstr(config), rt%handle)
    else
      ierr = c_create_fortran(int(comm, c_int), cstr(""), rt%handle)
    end if
  end subroutine init_int

  subroutine init_f08(rt, comm, ierr, config)
    type(ckpt_runtime), intent(inout) :: rt
    type(MPI_Comm), intent(in) :: comm
    integer, intent(out) :: ierr
    character(len=*), intent(in), optional :: config
    call init_int(rt, comm%MPI_VAL, ierr, config)
  end subroutine init_f08

  !> Collective: waits for the checkpoints in flight, stops the runtime and frees it; rt can be
  !> initialised again. ierr: the first failure of a checkpoint still in flight.
  subroutine ckpt_finalize(rt, ierr)
    type(ckpt_runtime), intent(inout) :: rt
    integer, intent(out) :: ierr
    type(source_procs), pointer :: next
    if (.not. c_associated(rt%handle)) then
      ierr = c_report_error(c_null_ptr, CKPT_FAILED_PRECONDITION, cstr("ckpt_finalize: the runtime is not initialised"))
      return
    end if
    ierr = c_close(rt%handle)
    call c_free(rt%handle)
    rt%handle = c_null_ptr
    do while (associated(rt%sources))  ! the runtime that called them is gone
      next => rt%sources%next
      deallocate (rt%sources)
      rt%sources => next
    end do
  end subroutine ckpt_finalize

  !> The last error of rt as "<code>: <message>" (blank if none); for an rt that is not initialised
  !> (e.g. after a failed ckpt_init) the last error of this thread.
  subroutine ckpt_error_message(rt, msg)
    type(ckpt_runtime), intent(in) :: rt
    character(len=*), intent(out) :: msg
    type(c_ptr) :: p
    character(kind=c_char), pointer :: chars(:)
    integer :: i, n
    msg = ""
    p = c_error_message(rt%handle)
    if (.not. c_associated(p)) return
    n = int(c_strlen(p))
    if (n == 0) return
    call c_f_pointer(p, chars, [n])
    do i = 1, min(n, len(msg))
      msg(i:i) = chars(i)
    end do
  end subroutine ckpt_error_message

  ! ---- regions -------------------------------------------------------------------------------------

  !> Registers `rank(a)` extents `shp` at `ptr`: a local array (global absent) or a box of a global
  !> array; the Fortran extents are reversed into C order and the array order is recorded.
  subroutine protect_any(rt, name, ptr, dtype, shp, ierr, global, start)
    type(ckpt_runtime), intent(inout) :: rt
    character(len=*), intent(in) :: name
    type(c_ptr), intent(in) :: ptr
    integer(c_int), intent(in) :: dtype
    integer(int64), intent(in) :: shp(:)
    integer, intent(out) :: ierr
    integer(int64), intent(in), optional :: global(:), start(:)
    integer(c_int64_t) :: cdims(max(1, size(shp))), cglobal(max(1, size(shp))), cstart(max(1, size(shp)))
    integer :: n
    type(c_ptr) :: p
    character(len=:), allocatable :: negative
    n = size(shp)
    p = ptr
    if (product(shp) == 0) p = c_null_ptr
    cdims = 0
    cdims(1:n) = shp(n:1:-1)
    if (present(global)) then
      if (size(global) /= n .or. size(start) /= n) then
        ierr = c_report_error(rt%handle, CKPT_INVALID_ARGUMENT, cstr("ckpt_protect: region '"//trim(name)// &
                              "': global and start need one entry per dimension of the array"))
        return
      end if
      negative = first_negative("global", global)
      if (len(negative) == 0) negative = first_negative("start", start)
      if (len(negative) > 0) then
        ierr = c_report_error(rt%handle, CKPT_INVALID_ARGUMENT, cstr("ckpt_protect: region '"//trim(name)//"': "// &
                              negative))
        return
      end if
      cglobal = 0
      cstart = 0
      cglobal(1:n) = global(n:1:-1)
      cstart(1:n) = start(n:1:-1)
      ierr = c_protect_block(rt%handle, cstr(name), p, dtype, int(n, c_int), cglobal, cstart, cdims)
    else
      ierr = c_protect(rt%handle, cstr(name), p, dtype, int(n, c_int), cdims)
    end if
    if (ierr == CKPT_OK .and. n > 0) ierr = c_annotate(rt%handle, cstr(name), cstr("array_order"), cstr("fortran"))
  end subroutine protect_any

  !> Registers the box count(:) at offsets first(:) of an array of Fortran extents `shp` at `ptr`: the box
  !> as a local array, then the allocation around it as its memory selection (all reversed into C order).
  !> The arguments are checked first, so that a refused selection leaves nothing registered.
  subroutine selection_any(rt, name, ptr, dtype, shp, first, count, ierr)
    type(ckpt_runtime), intent(inout) :: rt
    character(len=*), intent(in) :: name
    type(c_ptr), intent(in) :: ptr
    integer(c_int), intent(in) :: dtype
    integer(int64), intent(in) :: shp(:), first(:), count(:)
    integer, intent(out) :: ierr
    integer(c_int64_t) :: cstart(max(1, size(shp))), calloc(max(1, size(shp)))
    integer :: n
    integer(c_int) :: undone
    n = size(shp)
    if (size(first) /= n .or. size(count) /= n .or. n == 0) then
      ierr = c_report_error(rt%handle, CKPT_INVALID_ARGUMENT, cstr("ckpt_protect_selection: region '"//trim(name)// &
                            "': first and count need one entry per dimension of the array"))
      return
    end if
    if (any(first < 0) .or. any(count < 0) .or. any(first + count > shp)) then
      ierr = c_report_error(rt%handle, CKPT_INVALID_ARGUMENT, cstr("ckpt_protect_selection: region '"//trim(name)// &
                            "': the box first + count must lie inside the array's extents"))
      return
    end if
    call protect_any(rt, name, ptr, dtype, count, ierr)
    if (ierr /= 0) return
    cstart(1:n) = first(n:1:-1)
    calloc(1:n) = shp(n:1:-1)
    ierr = c_set_memory_selection(rt%handle, cstr(name), int(n, c_int), cstart, calloc)
    if (ierr /= 0) then  ! never leave the allocation registered as if it were the packed box
      undone = c_unprotect(rt%handle, cstr(name))  ! the first error's code and message are kept
    end if
  end subroutine selection_any

  !> Registers (update = .false.) or re-points (update = .true.) this rank's rows of a joined array of
  !> Fortran extents `shp` (rows last); extents reversed into C order (rows first).
  subroutine joined_any(rt, name, ptr, dtype, shp, update, ierr, first_row)
    type(ckpt_runtime), intent(inout) :: rt
    character(len=*), intent(in) :: name
    type(c_ptr), intent(in) :: ptr
    integer(c_int), intent(in) :: dtype
    integer(int64), intent(in) :: shp(:)
    logical, intent(in) :: update
    integer, intent(out) :: ierr
    integer(int64), intent(in), optional :: first_row
    integer(c_int64_t) :: cdims(max(1, size(shp))), first
    character(len=24) :: row_text
    integer :: n
    type(c_ptr) :: p
    n = size(shp)
    if (n == 0) then
      ierr = c_report_error(rt%handle, CKPT_INVALID_ARGUMENT, cstr("ckpt_protect_joined: region '"//trim(name)// &
                            "': a joined array needs an array (its last dimension is the rows)"))
      return
    end if
    p = ptr
    if (product(shp) == 0) p = c_null_ptr
    cdims(1:n) = shp(n:1:-1)
    first = -1  ! CKPT_BALANCED
    if (present(first_row)) then
      if (first_row < 0) then
        write (row_text, '(i0)') first_row
        ierr = c_report_error(rt%handle, CKPT_INVALID_ARGUMENT, cstr("ckpt_protect_joined: region '"//trim(name)// &
                              "': first_row = "//trim(row_text)// &
                              " is negative (a 0-based row; leave first_row out for the balanced split)"))
        return
      end if
      first = int(first_row, c_int64_t)
    end if
    if (update) then
      ierr = c_update_joined(rt%handle, cstr(name), p, int(n, c_int), cdims, first)
    else
      ierr = c_protect_joined(rt%handle, cstr(name), p, dtype, int(n, c_int), cdims, first)
      if (ierr == CKPT_OK) ierr = c_annotate(rt%handle, cstr(name), cstr("array_order"), cstr("fortran"))
    end if
  end subroutine joined_any

  !> Registers this rank's rows of a joined array that lie in separately allocated pieces (AMR blocks with
  !> ghost cells, each its own allocation; ckpt_protect_scattered in C): pieces(k) = c_loc of piece k (a
  !> contiguous array with the target attribute, kept allocated until ckpt_update_scattered, ckpt_unprotect
  !> or ckpt_finalize; c_null_ptr only for a piece of 0 rows), holding rows(k) rows (absent: one row per
  !> piece); this rank's rows are the pieces' rows in order. dtype: CKPT_F64, CKPT_F32, CKPT_I64, CKPT_I32,
  !> ... row: the extents of one row in Fortran order (integer(int64), the same on every rank; size 0: a row
  !> is one element). first and alloc (optional, both or neither, one entry per entry of row, Fortran
  !> order): each row is the box of extents row at 0-based offsets first of an allocation of extents
  !> alloc, e.g. a block u(0:nx+1, 0:nz+1, nv) with one ghost layer is row = [nx, nz, nv], first = [1, 1, 0],
  !> alloc = [nx + 2, nz + 2, nv]; a piece of k rows is an array of extents [alloc, k] (rows last, as in
  !> ckpt_protect_joined). Only the boxes are stored, and a restart fills only the boxes (on another rank
  !> count by row or by key: ckpt_set_restart_rows, ckpt_set_restart_keys). Extents reversed into C order.
  subroutine ckpt_protect_scattered(rt, name, dtype, row, pieces, ierr, rows, first, alloc)
    type(ckpt_runtime), intent(inout) :: rt
    character(len=*), intent(in) :: name
    integer, intent(in) :: dtype
    integer(int64), intent(in) :: row(:)
    type(c_ptr), intent(in) :: pieces(:)
    integer, intent(out) :: ierr
    integer(int64), intent(in), optional :: rows(:), first(:), alloc(:)
    call scattered_any(rt, "ckpt_protect_scattered", name, int(dtype, c_int), row, pieces, .false., ierr, rows, &
                       first, alloc)
  end subroutine ckpt_protect_scattered

  !> The pieces of a region registered with ckpt_protect_scattered, anew (blocks refined, coarsened or
  !> moved): pieces, rows and the selection (first, alloc) may all change; the dtype and row may not.
  subroutine ckpt_update_scattered(rt, name, row, pieces, ierr, rows, first, alloc)
    type(ckpt_runtime), intent(inout) :: rt
    character(len=*), intent(in) :: name
    integer(int64), intent(in) :: row(:)
    type(c_ptr), intent(in) :: pieces(:)
    integer, intent(out) :: ierr
    integer(int64), intent(in), optional :: rows(:), first(:), alloc(:)
    call scattered_any(rt, "ckpt_update_scattered", name, 0_c_int, row, pieces, .true., ierr, rows, first, alloc)
  end subroutine ckpt_update_scattered

  !> ckpt_protect_scattered (update = .false.) or ckpt_update_scattered: the arguments checked (so that the
  !> C API never sees a negative value wrapped to 2^64 - n, nor a selection of another rank than the row),
  !> the pieces and rows copied to the heap (thousands of blocks fit any stack), the extents reversed.
  subroutine scattered_any(rt, what, name, dtype, row, pieces, update, ierr, rows, first, alloc)
    type(ckpt_runtime), intent(inout) :: rt
    character(len=*), intent(in) :: what, name
    integer(c_int), intent(in) :: dtype
    integer(int64), intent(in) :: row(:)
    type(c_ptr), intent(in) :: pieces(:)
    logical, intent(in) :: update
    integer, intent(out) :: ierr
    integer(int64), intent(in), optional :: rows(:), first(:), alloc(:)
    integer(c_int64_t) :: crow(max(1, size(row)))
    integer(c_int64_t), allocatable, target :: crows(:), cstart(:), calloc(:)
    type(c_ptr), allocatable :: cptrs(:)
    type(c_ptr) :: pstart, palloc
    character(len=:), allocatable :: why
    integer :: n, np
    n = size(row)
    np = size(pieces)
    why = first_negative("row", row)
    if (present(rows)) then
      if (size(rows) /= np) why = "rows needs one entry per piece"
      if (len(why) == 0) why = first_negative("rows", rows)
    end if
    if (present(first) .neqv. present(alloc)) then
      why = "first and alloc (a row's memory selection) are given both or neither"
    else if (present(first)) then
      if (size(first) /= n .or. size(alloc) /= n) then
        why = "first and alloc need one entry per entry of row (a row's memory selection)"
      else if (len(why) == 0) then
        why = first_negative("first", first)
        if (len(why) == 0) why = first_negative("alloc", alloc)
      end if
    end if
    if (len(why) > 0) then
      ierr = c_report_error(rt%handle, CKPT_INVALID_ARGUMENT, cstr(what//": region '"//trim(name)//"': "//why))
      return
    end if
    crow = 0
    crow(1:n) = row(n:1:-1)
    allocate (cptrs(max(1, np)), crows(max(1, np)))
    cptrs = c_null_ptr
    cptrs(1:np) = pieces
    crows = 1
    if (present(rows)) crows(1:np) = rows
    pstart = c_null_ptr
    palloc = c_null_ptr
    if (present(first)) then
      allocate (cstart(max(1, n)), calloc(max(1, n)))
      cstart(1:n) = first(n:1:-1)
      calloc(1:n) = alloc(n:1:-1)
      pstart = c_loc(cstart)
      palloc = c_loc(calloc)
    end if
    if (update) then
      ierr = c_update_scattered(rt%handle, cstr(name), int(n, c_int), crow, int(np, c_size_t), cptrs, crows, pstart, &
                                palloc)
    else
      ierr = c_protect_scattered(rt%handle, cstr(name), dtype, int(n, c_int), crow, int(np, c_size_t), cptrs, crows, &
                                 pstart, palloc)
      if (ierr == CKPT_OK) ierr = c_annotate(rt%handle, cstr(name), cstr("array_order"), cstr("fortran"))
    end if
  end subroutine scattered_any

  ! ---- the typed procedures (ckpt_typed.inc, once per element type) -------------------------------

#define CKPT_TYPE real(real32)
#define CKPT_DT DT_F32
#define PROTECT protect_r32
#define PROTECT_BOX protect_box_r32
#define PROTECT_SELECTION protect_selection_r32
#define PROTECT_JOINED protect_joined_r32
#define UPDATE_JOINED update_joined_r32
#include "ckpt_typed.inc"

#define CKPT_TYPE real(real64)
#define CKPT_DT DT_F64
#define PROTECT protect_r64
#define PROTECT_BOX protect_box_r64
#define PROTECT_SELECTION protect_selection_r64
#define PROTECT_JOINED protect_joined_r64
#define UPDATE_JOINED update_joined_r64
#include "ckpt_typed.inc"

#define CKPT_TYPE integer(int32)
#define CKPT_DT DT_I32
#define PROTECT protect_i32
#define PROTECT_BOX protect_box_i32
#define PROTECT_SELECTION protect_selection_i32
#define PROTECT_JOINED protect_joined_i32
#define UPDATE_JOINED update_joined_i32
#include "ckpt_typed.inc"

#define CKPT_TYPE integer(int64)
#define CKPT_DT DT_I64
#define PROTECT protect_i64
#define PROTECT_BOX protect_box_i64
#define PROTECT_SELECTION protect_selection_i64
#define PROTECT_JOINED protect_joined_i64
#define UPDATE_JOINED update_joined_i64
#include "ckpt_typed.inc"

  !> Collective. The rows of joined array `name` in checkpoint `step`: total of them, and this rank's
  !> share of their balanced split, rows first .. first + count - 1 (0-based): allocate count rows,
  !> register them, then ckpt_restart_step.
  subroutine ckpt_joined_rows(rt, step, name, total, first, count, ierr)
    type(ckpt_runtime), intent(inout) :: rt
    integer(int64), intent(in) :: step
    character(len=*), intent(in) :: name
    integer(int64), intent(out) :: total, first, count
    integer, intent(out) :: ierr
    integer(c_int64_t) :: t, b, e
    ierr = c_joined_rows(rt%handle, int(step, c_int64_t), cstr(name), t, b, e)
    total = t
    first = b
    count = e - b
  end subroutine ckpt_joined_rows

  !> Marks a region optional (optional = .true., the default) or not: a restart from a checkpoint
  !> without it leaves it untouched instead of failing (a variable added after the checkpoint).
  subroutine ckpt_set_optional(rt, name, ierr, optional)
    type(ckpt_runtime), intent(inout) :: rt
    character(len=*), intent(in) :: name
    integer, intent(out) :: ierr
    logical, intent(in), optional :: optional
    integer(c_int) :: flag
    flag = 1
    if (present(optional)) then
      if (.not. optional) flag = 0
    end if
    ierr = c_set_optional(rt%handle, cstr(name), flag)
  end subroutine ckpt_set_optional

  !> Restart of joined array `name` fills this rank's rows with the stored rows rows(:) (0-based indices
  !> into the stored array, any order, also asked for twice or by several ranks), one per registered
  !> row: the N->M restart of blocks that moved. Until ckpt_clear_restart_rows.
  subroutine ckpt_set_restart_rows(rt, name, rows, ierr)
    type(ckpt_runtime), intent(inout) :: rt
    character(len=*), intent(in) :: name
    integer(int64), dimension(:), intent(in) :: rows
    integer, intent(out) :: ierr
    integer(c_int64_t), allocatable :: copy(:)  ! on the heap: millions of rows fit any stack
    allocate (copy(max(1, size(rows))))
    copy(1:size(rows)) = rows
    ierr = c_set_restart_rows(rt%handle, cstr(name), copy, int(size(rows), c_size_t))
  end subroutine ckpt_set_restart_rows

  !> As ckpt_set_restart_rows, the rows named by their values keys(:) in `key`, a joined integer array
  !> of one value per row (a block id). The restart fails with CKPT_NOT_FOUND for a key no stored row
  !> holds, CKPT_INVALID_ARGUMENT for one held by two rows.
  subroutine ckpt_set_restart_keys(rt, name, key, keys, ierr)
    type(ckpt_runtime), intent(inout) :: rt
    character(len=*), intent(in) :: name, key
    integer(int64), dimension(:), intent(in) :: keys
    integer, intent(out) :: ierr
    integer(c_int64_t), allocatable :: copy(:)  ! on the heap: millions of keys fit any stack
    allocate (copy(max(1, size(keys))))
    copy(1:size(keys)) = keys
    ierr = c_set_restart_keys(rt%handle, cstr(name), cstr(key), copy, int(size(keys), c_size_t))
  end subroutine ckpt_set_restart_keys

  !> Back to first_row or the balanced split for joined array `name`.
  subroutine ckpt_clear_restart_rows(rt, name, ierr)
    type(ckpt_runtime), intent(inout) :: rt
    character(len=*), intent(in) :: name
    integer, intent(out) :: ierr
    ierr = c_clear_restart_rows(rt%handle, cstr(name))
  end subroutine ckpt_clear_restart_rows

  !> Forgets a region.
  subroutine ckpt_unprotect(rt, name, ierr)
    type(ckpt_runtime), intent(inout) :: rt
    character(len=*), intent(in) :: name
    integer, intent(out) :: ierr
    ierr = c_unprotect(rt%handle, cstr(name))
  end subroutine ckpt_unprotect

  !> Attaches a string attribute key = value to a region (stored in every later checkpoint's index).
  subroutine ckpt_annotate(rt, name, key, value, ierr)
    type(ckpt_runtime), intent(inout) :: rt
    character(len=*), intent(in) :: name, key, value
    integer, intent(out) :: ierr
    ierr = c_annotate(rt%handle, cstr(name), cstr(key), cstr(value))
  end subroutine ckpt_annotate

  ! ---- checkpoint and restart ---------------------------------------------------------------------

  !> Collective. Captures every region for `step` (>= 0) and returns once the data is copied; writing
  !> goes on in the background. ierr reports bad arguments or state and the failure of an earlier
  !> checkpoint; a failure of this one is reported by a later ckpt_checkpoint, ckpt_wait_all or
  !> ckpt_finalize. ierr is the same on every rank.
  !> With `ticket`: it receives this checkpoint's ticket (a ticket it held before is freed first), whose
  !> ckpt_ticket_wait returns the checkpoint's outcome.
  subroutine checkpoint_i64(rt, step, ierr, ticket)
    type(ckpt_runtime), intent(inout) :: rt
    integer(int64), intent(in) :: step
    integer, intent(out) :: ierr
    type(ckpt_ticket), intent(inout), optional, target :: ticket
    if (present(ticket)) then
      call ckpt_ticket_free(ticket)
      ierr = c_checkpoint(rt%handle, int(step, c_int64_t), c_null_ptr, c_loc(ticket%handle))
    else
      ierr = c_checkpoint(rt%handle, int(step, c_int64_t), c_null_ptr, c_null_ptr)
    end if
  end subroutine checkpoint_i64

  subroutine checkpoint_i32(rt, step, ierr, ticket)
    type(ckpt_runtime), intent(inout) :: rt
    integer(int32), intent(in) :: step
    integer, intent(out) :: ierr
    type(ckpt_ticket), intent(inout), optional :: ticket
    call checkpoint_i64(rt, int(step, int64), ierr, ticket)
  end subroutine checkpoint_i32

  !> Blocks until the ticket's checkpoint is committed or failed; ierr = its outcome (the same on every
  !> rank; CKPT_SUPERSEDED when on_busy coalesce replaced it). Collective with funneled MPI calls.
  subroutine ckpt_ticket_wait(ticket, ierr)
    type(ckpt_ticket), intent(in) :: ticket
    integer, intent(out) :: ierr
    ierr = c_ticket_wait(ticket%handle)
  end subroutine ckpt_ticket_wait

  !> done = .true. once ckpt_ticket_wait would not block (whatever the outcome).
  subroutine ckpt_ticket_done(ticket, done, ierr)
    type(ckpt_ticket), intent(in) :: ticket
    logical, intent(out) :: done
    integer, intent(out) :: ierr
    integer(c_int) :: d
    d = 0
    ierr = c_ticket_done(ticket%handle, d)
    done = d /= 0
  end subroutine ckpt_ticket_done

  !> This rank's figures of the ticket's checkpoint (complete once it is done).
  subroutine ckpt_ticket_stats(ticket, stats, ierr)
    type(ckpt_ticket), intent(in) :: ticket
    type(ckpt_checkpoint_stats), intent(out) :: stats
    integer, intent(out) :: ierr
    type(c_checkpoint_stats), target :: c
    ierr = c_ticket_stats_sized(ticket%handle, c, int(c_sizeof(c), c_size_t))
    if (ierr /= CKPT_OK) return
    stats = ckpt_checkpoint_stats(c%step, c%bytes, c%bytes_written, c%blocked_s, c%capture_wait_s, c%flush_s, &
                                  c%durable_s, c%committed_s, c%staging_bytes, c%redundancy_s, &
                                  c%redundancy_bytes, c%staging_pinned_bytes, c%synced /= 0)
  end subroutine ckpt_ticket_stats

  !> Frees the ticket (the checkpoint goes on); a ticket that holds none is left alone.
  subroutine ckpt_ticket_free(ticket)
    type(ckpt_ticket), intent(inout) :: ticket
    if (c_associated(ticket%handle)) call c_ticket_free(ticket%handle)
    ticket%handle = c_null_ptr
  end subroutine ckpt_ticket_free

  !> Collective. Waits until every checkpoint in flight is committed; the first failure.
  subroutine ckpt_wait_all(rt, ierr)
    type(ckpt_runtime), intent(inout) :: rt
    integer, intent(out) :: ierr
    ierr = c_wait_all(rt%handle)
  end subroutine ckpt_wait_all

  !> Collective. With funneled MPI calls (option mpi_threads): commits the checkpoints every rank has
  !> written, on this thread; otherwise nothing.
  subroutine ckpt_poll(rt, ierr)
    type(ckpt_runtime), intent(inout) :: rt
    integer, intent(out) :: ierr
    ierr = c_poll(rt%handle)
  end subroutine ckpt_poll

  !> Collective. step = the newest checkpoint whose index validates, -1 if there is none.
  subroutine ckpt_latest(rt, step, ierr)
    type(ckpt_runtime), intent(inout) :: rt
    integer(int64), intent(out) :: step
    integer, intent(out) :: ierr
    integer(c_int64_t) :: s
    ierr = c_latest(rt%handle, s)
    step = s
  end subroutine ckpt_latest

  !> Collective. Fills every region from the newest checkpoint that loads and verifies (falling back
  !> to older ones); step = its step. CKPT_NOT_FOUND (step = -1) when there is none.
  subroutine ckpt_restart(rt, step, ierr)
    type(ckpt_runtime), intent(inout) :: rt
    integer(int64), intent(out) :: step
    integer, intent(out) :: ierr
    integer(c_int64_t) :: s
    ierr = c_restart(rt%handle, s)
    step = s
  end subroutine ckpt_restart

  !> Collective. Fills every region from checkpoint `step`, verifying checksums.
  subroutine restart_step_i64(rt, step, ierr)
    type(ckpt_runtime), intent(inout) :: rt
    integer(int64), intent(in) :: step
    integer, intent(out) :: ierr
    ierr = c_restart_step(rt%handle, int(step, c_int64_t))
  end subroutine restart_step_i64

  subroutine restart_step_i32(rt, step, ierr)
    type(ckpt_runtime), intent(inout) :: rt
    integer(int32), intent(in) :: step
    integer, intent(out) :: ierr
    call restart_step_i64(rt, int(step, int64), ierr)
  end subroutine restart_step_i32

  ! ---- sizing before a restart: steps, inspect, the directory, regions found through procedures ----

  !> The C string at p, whole (an allocatable of its length).
  function from_cstr(p) result(s)
    type(c_ptr), intent(in) :: p
    character(len=:), allocatable :: s
    character(kind=c_char), pointer :: chars(:)
    integer :: i, n
    if (.not. c_associated(p)) then
      s = ""
      return
    end if
    n = int(c_strlen(p))
    allocate (character(len=n) :: s)
    if (n == 0) return
    call c_f_pointer(p, chars, [n])
    do i = 1, n
      s(i:i) = chars(i)
    end do
  end function from_cstr

  !> Copies `value` into `out`; CKPT_INVALID_ARGUMENT (recorded on rt) when out is too short for it.
  function copy_out(rt, what, value, out) result(ierr)
    type(ckpt_runtime), intent(in) :: rt
    character(len=*), intent(in) :: what, value
    character(len=*), intent(out) :: out
    integer :: ierr
    character(len=24) :: n_text
    out = ""
    if (len(value) > len(out)) then
      write (n_text, '(i0)') len(value)
      ierr = c_report_error(rt%handle, CKPT_INVALID_ARGUMENT, cstr(what//": the string needs "//trim(n_text)// &
                            " characters, got one of fewer"))
      return
    end if
    out = value
    ierr = CKPT_OK
  end function copy_out

  !> Collective. The complete steps, oldest first: those of the checkpoint directory whose index
  !> validates (what ckpt_inspect opens and ckpt_restart tries) and the node level's, with local_dir.
  subroutine ckpt_steps(rt, steps, ierr)
    type(ckpt_runtime), intent(inout) :: rt
    integer(int64), allocatable, intent(out) :: steps(:)
    integer, intent(out) :: ierr
    integer(c_int64_t), allocatable :: buf(:)
    integer(c_size_t) :: n, got
    allocate (buf(1))
    ierr = c_steps(rt%handle, buf, 0_c_size_t, n)  ! collective: every rank calls it as often
    if (ierr == CKPT_OK) then
      deallocate (buf)
      allocate (buf(max(1_c_size_t, n)))
      ierr = c_steps(rt%handle, buf, n, got)
      n = min(n, got)  ! a step committed in between: the first n
    end if
    if (ierr /= CKPT_OK) n = 0
    allocate (steps(n))
    steps = buf(1:n)
  end subroutine ckpt_steps

  !> The checkpoint directory in effect: after the YAML file and the CKPT_* variables, absolute.
  !> CKPT_INVALID_ARGUMENT when `dir` is too short for it.
  subroutine ckpt_dir(rt, dir, ierr)
    type(ckpt_runtime), intent(in) :: rt
    character(len=*), intent(out) :: dir
    integer, intent(out) :: ierr
    type(c_ptr) :: p
    dir = ""
    ierr = c_dir(rt%handle, p)
    if (ierr == CKPT_OK) ierr = copy_out(rt, "ckpt_dir", from_cstr(p), dir)
  end subroutine ckpt_dir

  !> Every option in effect as YAML text (loadable as a config file). CKPT_INVALID_ARGUMENT when `yaml`
  !> is too short for it (lines end with achar(10)).
  subroutine ckpt_options_yaml(rt, yaml, ierr)
    type(ckpt_runtime), intent(in) :: rt
    character(len=*), intent(out) :: yaml
    integer, intent(out) :: ierr
    type(c_ptr) :: p
    yaml = ""
    ierr = c_options_yaml(rt%handle, p)
    if (ierr == CKPT_OK) ierr = copy_out(rt, "ckpt_options_yaml", from_cstr(p), yaml)
  end subroutine ckpt_options_yaml

  !> Whether every MPI call of the runtime is made on the application thread (option mpi_threads).
  subroutine ckpt_funneled(rt, funneled, ierr)
    type(ckpt_runtime), intent(in) :: rt
    logical, intent(out) :: funneled
    integer, intent(out) :: ierr
    integer(c_int) :: f
    f = 0
    ierr = c_funneled(rt%handle, f)
    funneled = f /= 0
  end subroutine ckpt_funneled

  !> The level the last successful restart read from: "local", "partner", "xor", "global", or blank
  !> before any. CKPT_INVALID_ARGUMENT when `level` is too short.
  subroutine ckpt_restart_level(rt, level, ierr)
    type(ckpt_runtime), intent(in) :: rt
    character(len=*), intent(out) :: level
    integer, intent(out) :: ierr
    type(c_ptr) :: p
    level = ""
    ierr = c_restart_level(rt%handle, p)
    if (ierr == CKPT_OK) ierr = copy_out(rt, "ckpt_restart_level", from_cstr(p), level)
  end subroutine ckpt_restart_level

  !> The warning of the last successful ckpt_restart: code = CKPT_OK and message = "" when it restarted
  !> from the newest step with every region; otherwise code is the newest skipped step's failure (e.g.
  !> CKPT_CORRUPT; CKPT_NOT_FOUND when only optional regions were left untouched) and message says which
  !> steps were skipped and why. message is allocated to its length (it lists every skipped step's
  !> failure, so no fixed length would do). Reset by every restart.
  subroutine ckpt_restart_warning(rt, code, message, ierr)
    type(ckpt_runtime), intent(in) :: rt
    integer, intent(out) :: code
    character(len=:), allocatable, intent(out) :: message
    integer, intent(out) :: ierr
    integer(c_int) :: c
    type(c_ptr) :: p
    c = CKPT_OK
    p = c_null_ptr
    ierr = c_restart_warning(rt%handle, c, p)
    code = c
    message = from_cstr(p)
  end subroutine ckpt_restart_warning

  !> The optional regions the last restart left untouched because its checkpoint lacked them, each in
  !> an element of `names` (allocated here, of the caller's length). CKPT_INVALID_ARGUMENT when a name is
  !> longer than that.
  subroutine ckpt_skipped_optional(rt, names, ierr)
    type(ckpt_runtime), intent(in) :: rt
    character(len=*), allocatable, intent(out) :: names(:)
    integer, intent(out) :: ierr
    integer(c_size_t) :: n, i, again
    type(c_ptr) :: p
    n = 0
    ierr = c_skipped_optional(rt%handle, 0_c_size_t, n, p)
    if (ierr /= CKPT_OK) n = 0
    allocate (names(n))
    do i = 1, n
      if (ierr /= CKPT_OK) exit
      ierr = c_skipped_optional(rt%handle, i - 1, again, p)
      if (ierr == CKPT_OK) ierr = copy_out(rt, "ckpt_skipped_optional", from_cstr(p), names(i))
    end do
  end subroutine ckpt_skipped_optional

  !> Collective. Describes checkpoint `step` without restoring anything (rank 0 reads its index, every
  !> rank gets it): ask with ckpt_step_nvars, ckpt_step_var_name, ckpt_step_variable and
  !> ckpt_step_attribute, then ckpt_step_free(c). CKPT_NOT_FOUND when step is not a complete checkpoint.
  subroutine ckpt_inspect(rt, step, c, ierr)
    type(ckpt_runtime), intent(inout) :: rt
    integer(int64), intent(in) :: step
    type(ckpt_step), intent(inout) :: c
    integer, intent(out) :: ierr
    call ckpt_step_free(c)
    ierr = c_inspect(rt%handle, int(step, c_int64_t), c%handle)
  end subroutine ckpt_inspect

  !> Frees what ckpt_inspect gave (nothing for a ckpt_step never inspected).
  subroutine ckpt_step_free(c)
    type(ckpt_step), intent(inout) :: c
    if (c_associated(c%handle)) call c_step_free(c%handle)
    c%handle = c_null_ptr
  end subroutine ckpt_step_free

  !> The number of variables of the step.
  subroutine ckpt_step_nvars(c, n, ierr)
    type(ckpt_step), intent(in) :: c
    integer, intent(out) :: n
    integer, intent(out) :: ierr
    integer(c_size_t) :: k
    k = 0
    ierr = c_step_nvars(c%handle, k)
    n = int(k)
  end subroutine ckpt_step_nvars

  !> The name of variable i (1 .. nvars, registration order). CKPT_INVALID_ARGUMENT when `name` is too
  !> short for it or i is out of range.
  subroutine ckpt_step_var_name(c, i, name, ierr)
    type(ckpt_step), intent(in) :: c
    integer, intent(in) :: i
    character(len=*), intent(out) :: name
    integer, intent(out) :: ierr
    type(c_var_info) :: info
    type(ckpt_runtime) :: none
    name = ""
    if (i < 1) then
      ierr = c_report_error(c_null_ptr, CKPT_INVALID_ARGUMENT, cstr("ckpt_step_var_name: i must be >= 1"))
      return
    end if
    ierr = c_step_var(c%handle, int(i - 1, c_size_t), info)
    if (ierr == CKPT_OK) ierr = copy_out(none, "ckpt_step_var_name", from_cstr(info%name), name)
  end subroutine ckpt_step_var_name

  !> Variable `name` of the step: dtype (CKPT_F64, ...), kind (CKPT_KIND_*), extents (Fortran order,
  !> the reverse of the stored C order: what to allocate; a global or joined array's whole extents, a
  !> joined array's rows in total last; a local array's lowest writer rank's; size 0 for a scalar) and,
  !> for a joined array, rows_per_rank(r) = the rows rank r wrote (r = 0 .. writer ranks - 1; asking for
  !> it lists every block of a two-level index, which ckpt_inspect reads lazily). Every output is
  !> optional. CKPT_NOT_FOUND when the step has no such variable.
  subroutine ckpt_step_variable(c, name, ierr, dtype, kind, extents, rows_per_rank)
    type(ckpt_step), intent(in) :: c
    character(len=*), intent(in) :: name
    integer, intent(out) :: ierr
    integer, intent(out), optional :: dtype, kind
    integer(int64), allocatable, intent(out), optional :: extents(:), rows_per_rank(:)
    type(c_var_info) :: info
    integer(c_size_t) :: i
    integer(c_int64_t), pointer :: shp(:), counts(:)
    integer(c_int32_t), pointer :: ranks(:)
    integer :: n, b, top
    ierr = c_step_find(c%handle, cstr(name), i)
    if (ierr /= CKPT_OK) return
    ierr = c_step_var(c%handle, i, info)
    if (ierr /= CKPT_OK) return
    if (present(rows_per_rank) .and. info%kind == CKPT_KIND_JOINED) then
      ierr = c_step_load_blocks(c%handle)  ! a two-level index opened from its root: list the blocks
      if (ierr == CKPT_OK) ierr = c_step_var(c%handle, i, info)
      if (ierr /= CKPT_OK) return
    end if
    n = int(info%ndims)
    if (present(dtype)) dtype = int(info%dtype)
    if (present(kind)) kind = int(info%kind)
    if (present(extents)) then
      allocate (extents(n))
      if (n > 0) then
        call c_f_pointer(info%shape, shp, [n])
        extents = shp(n:1:-1)
      end if
    end if
    if (present(rows_per_rank)) then
      if (info%kind /= CKPT_KIND_JOINED .or. n < 1) then
        allocate (rows_per_rank(0:-1))
        ierr = c_report_error(c_null_ptr, CKPT_MISMATCH, cstr("ckpt_step_variable: '"//trim(name)// &
                              "' is not a joined array (rows_per_rank)"))
        return
      end if
      top = -1
      if (info%nblocks > 0) then
        call c_f_pointer(info%block_ranks, ranks, [info%nblocks])
        call c_f_pointer(info%block_counts, counts, [int(info%nblocks) * n])
        top = int(maxval(ranks))
      end if
      allocate (rows_per_rank(0:top))
      rows_per_rank = 0
      do b = 1, int(info%nblocks)
        rows_per_rank(ranks(b)) = rows_per_rank(ranks(b)) + counts((b - 1) * n + 1)
      end do
    end if
  end subroutine ckpt_step_variable

  !> The value of attribute `key` of variable `name` (ckpt_annotate's). CKPT_NOT_FOUND when there is no
  !> such variable or attribute, CKPT_INVALID_ARGUMENT when `value` is too short.
  subroutine ckpt_step_attribute(c, name, key, value, ierr)
    type(ckpt_step), intent(in) :: c
    character(len=*), intent(in) :: name, key
    character(len=*), intent(out) :: value
    integer, intent(out) :: ierr
    type(c_var_info) :: info
    type(ckpt_runtime) :: none
    integer(c_size_t) :: i
    type(c_ptr), pointer :: keys(:), values(:)
    integer :: a
    value = ""
    ierr = c_step_find(c%handle, cstr(name), i)
    if (ierr /= CKPT_OK) return
    ierr = c_step_var(c%handle, i, info)
    if (ierr /= CKPT_OK) return
    if (info%nattrs > 0) then
      call c_f_pointer(info%attr_keys, keys, [info%nattrs])
      call c_f_pointer(info%attr_values, values, [info%nattrs])
      do a = 1, int(info%nattrs)
        if (from_cstr(keys(a)) == trim(key)) then
          ierr = copy_out(none, "ckpt_step_attribute", from_cstr(values(a)), value)
          return
        end if
      end do
    end if
    ierr = c_report_error(c_null_ptr, CKPT_NOT_FOUND, cstr("ckpt_step_attribute: variable '"//trim(name)// &
                          "' has no attribute '"//trim(key)//"'"))
  end subroutine ckpt_step_attribute

  !> The C locate callback of a region registered with ckpt_protect_source: calls its Fortran procedure
  !> and reverses the extents into C order.
  function source_locate(user, ptr, ndims, dims) bind(C) result(rc)
    type(c_ptr), value :: user
    type(c_ptr), intent(out) :: ptr
    integer(c_int), intent(out) :: ndims
    integer(c_int64_t), intent(out) :: dims(32)  ! CKPT_MAX_DIMS
    integer(c_int) :: rc
    type(source_procs), pointer :: procs
    integer(int64), allocatable :: extents(:)
    integer :: ierr, n
    call c_f_pointer(user, procs)
    ptr = c_null_ptr
    call procs%locate(ptr, extents, ierr)
    rc = int(ierr, c_int)
    ndims = 0
    if (ierr /= CKPT_OK) return
    if (.not. allocated(extents)) allocate (extents(0))
    n = size(extents)
    ndims = int(n, c_int)  ! more than 32: the C API refuses it, naming the region
    if (n <= 32) dims(1:n) = extents(n:1:-1)  ! a negative extent is refused there too
    if (n <= 32 .and. product(extents) == 0) ptr = c_null_ptr
  end function source_locate

  !> The C resize callback: the extents, reversed into Fortran order, to its Fortran procedure.
  function source_resize(user, ndims, dims) bind(C) result(rc)
    type(c_ptr), value :: user
    integer(c_int), value :: ndims
    integer(c_int64_t), intent(in) :: dims(*)
    integer(c_int) :: rc
    type(source_procs), pointer :: procs
    integer :: ierr
    call c_f_pointer(user, procs)
    call procs%resize(int(dims(ndims:1:-1), int64), ierr)
    rc = int(ierr, c_int)
  end function source_resize

  !> Registers a region found through procedures at every checkpoint and restart (module variables hold
  !> the array): locate says where it is now, resize (optional) reallocates it to the extents of the step
  !> a restart tries, so that one ckpt_restart sizes it for each step it tries and keeps the fall-back
  !> to an older step. dtype: CKPT_F64, CKPT_F32, CKPT_I64, CKPT_I32, ... joined = .true.: this rank's rows
  !> of a joined array (rows the LAST Fortran dimension; restartable on any rank count, resize then gets
  !> this rank's balanced share); otherwise a local array (same rank count). locate is called once here.
  subroutine ckpt_protect_source(rt, name, dtype, locate, ierr, resize, joined)
    type(ckpt_runtime), intent(inout) :: rt
    character(len=*), intent(in) :: name
    integer, intent(in) :: dtype
    procedure(ckpt_locate_proc) :: locate
    integer, intent(out) :: ierr
    procedure(ckpt_resize_proc), optional :: resize
    logical, intent(in), optional :: joined
    type(source_procs), pointer :: procs
    type(c_funptr) :: on_resize
    integer(c_int) :: kind
    kind = CKPT_KIND_LOCAL
    if (present(joined)) then
      if (joined) kind = CKPT_KIND_JOINED
    end if
    allocate (procs)
    procs%locate => locate
    on_resize = c_null_funptr
    if (present(resize)) then
      procs%resize => resize
      on_resize = c_funloc(source_resize)
    end if
    ierr = c_protect_source(rt%handle, cstr(name), int(dtype, c_int), kind, c_funloc(source_locate), on_resize, &
                            c_loc(procs))
    if (ierr /= CKPT_OK) then
      deallocate (procs)
      return
    end if
    procs%next => rt%sources
    rt%sources => procs
    ierr = c_annotate(rt%handle, cstr(name), cstr("array_order"), cstr("fortran"))
  end subroutine ckpt_protect_source

end module ckpt
