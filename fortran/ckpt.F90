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
                                         c_loc, c_associated, c_f_pointer
  use, intrinsic :: iso_fortran_env, only: int32, int64, real32, real64
  use mpi_f08, only: MPI_Comm
  implicit none
  private

  public :: ckpt_runtime
  public :: ckpt_init, ckpt_protect, ckpt_unprotect, ckpt_annotate, ckpt_checkpoint, ckpt_wait_all, ckpt_poll
  public :: ckpt_latest, ckpt_restart, ckpt_restart_step, ckpt_error_message, ckpt_finalize
  public :: ckpt_protect_joined, ckpt_update_joined, ckpt_joined_rows, ckpt_set_optional

  !> Return codes (ckpt/ckpt.h, ckpt::Code).
  integer, parameter, public :: CKPT_OK = 0, CKPT_INVALID_ARGUMENT = 1, CKPT_NOT_FOUND = 2, CKPT_MISMATCH = 3, &
                                CKPT_CORRUPT = 4, CKPT_IO_ERROR = 5, CKPT_UNAVAILABLE = 6, &
                                CKPT_FAILED_PRECONDITION = 7, CKPT_INTERNAL = 8, CKPT_SUPERSEDED = 9

  ! Element types (ckpt/ckpt.h).
  integer(c_int), parameter :: DT_I32 = 6, DT_I64 = 8, DT_F32 = 9, DT_F64 = 10

  !> The runtime of one communicator. Default-initialised: not usable before ckpt_init.
  type :: ckpt_runtime
    private
    type(c_ptr) :: handle = c_null_ptr
  end type ckpt_runtime

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

  !> ckpt_checkpoint(rt, step, ierr): step is integer(int64) (or a default integer).
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
    function c_restart_step(rt, step) bind(C, name="ckpt_restart_step") result(rc)
      import :: c_ptr, c_int, c_int64_t
      type(c_ptr), value :: rt
      integer(c_int64_t), value :: step
      integer(c_int) :: rc
    end function c_restart_step
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
    if (.not. c_associated(rt%handle)) then
      ierr = c_report_error(c_null_ptr, CKPT_FAILED_PRECONDITION, cstr("ckpt_finalize: the runtime is not initialised"))
      return
    end if
    ierr = c_close(rt%handle)
    call c_free(rt%handle)
    rt%handle = c_null_ptr
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

  ! ---- the typed procedures (ckpt_typed.inc, once per element type) -------------------------------

#define CKPT_TYPE real(real32)
#define CKPT_DT DT_F32
#define PROTECT protect_r32
#define PROTECT_BOX protect_box_r32
#define PROTECT_JOINED protect_joined_r32
#define UPDATE_JOINED update_joined_r32
#include "ckpt_typed.inc"

#define CKPT_TYPE real(real64)
#define CKPT_DT DT_F64
#define PROTECT protect_r64
#define PROTECT_BOX protect_box_r64
#define PROTECT_JOINED protect_joined_r64
#define UPDATE_JOINED update_joined_r64
#include "ckpt_typed.inc"

#define CKPT_TYPE integer(int32)
#define CKPT_DT DT_I32
#define PROTECT protect_i32
#define PROTECT_BOX protect_box_i32
#define PROTECT_JOINED protect_joined_i32
#define UPDATE_JOINED update_joined_i32
#include "ckpt_typed.inc"

#define CKPT_TYPE integer(int64)
#define CKPT_DT DT_I64
#define PROTECT protect_i64
#define PROTECT_BOX protect_box_i64
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
  subroutine checkpoint_i64(rt, step, ierr)
    type(ckpt_runtime), intent(inout) :: rt
    integer(int64), intent(in) :: step
    integer, intent(out) :: ierr
    ierr = c_checkpoint(rt%handle, int(step, c_int64_t), c_null_ptr, c_null_ptr)
  end subroutine checkpoint_i64

  subroutine checkpoint_i32(rt, step, ierr)
    type(ckpt_runtime), intent(inout) :: rt
    integer(int32), intent(in) :: step
    integer, intent(out) :: ierr
    call checkpoint_i64(rt, int(step, int64), ierr)
  end subroutine checkpoint_i32

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

end module ckpt
