!> The Fortran module's parity with ckpt::Runtime at 4 ranks: ckpt_steps, ckpt_inspect (variables,
!> dtype, kind, extents in Fortran order, a joined array's rows per rank and in total, attributes),
!> ckpt_dir (resolved from the YAML file), ckpt_options_yaml, ckpt_funneled, ckpt_restart_level,
!> ckpt_skipped_optional, and ckpt_protect_source: one ckpt_restart sizes the arrays
!> through their resize procedures for each step it tries - step 2 is damaged, so it falls back to step
!> 1 and the arrays end with step 1's extents, and ckpt_restart_warning says so (CKPT_CORRUPT) -, tickets
!> and ckpt_ticket_stats (synced with fsync, not without), plus the error paths. Scratch directory: $CKPTTEST_TMP.
!> Exit status 1 on a failed check.
module parity_state
  use, intrinsic :: iso_c_binding, only: c_ptr, c_loc, c_null_ptr
  use, intrinsic :: iso_fortran_env, only: int64, real64
  use ckpt, only: CKPT_OK, CKPT_IO_ERROR
  implicit none
  real(real64), allocatable, target :: x(:, :)  ! x(3, n): this rank's n rows of a joined array
  real(real64), allocatable, target :: h(:)     ! a local array whose length depends on the step
  integer :: x_resizes = 0, h_resizes = 0
  integer(int64) :: x_asked(8) = -1, h_asked(8) = -1
  logical :: fail_locate = .false.
contains
  subroutine locate_x(ptr, extents, ierr)
    type(c_ptr), intent(out) :: ptr
    integer(int64), allocatable, intent(out) :: extents(:)
    integer, intent(out) :: ierr
    ierr = CKPT_OK
    if (fail_locate) then
      ierr = CKPT_IO_ERROR
      return
    end if
    ptr = c_null_ptr
    if (size(x) > 0) ptr = c_loc(x)
    extents = shape(x, int64)
  end subroutine locate_x

  subroutine resize_x(extents, ierr)
    integer(int64), intent(in) :: extents(:)
    integer, intent(out) :: ierr
    ierr = CKPT_OK
    x_resizes = x_resizes + 1
    if (x_resizes <= size(x_asked)) x_asked(x_resizes) = extents(2)
    deallocate (x)
    allocate (x(extents(1), extents(2)))
    x = -1
  end subroutine resize_x

  subroutine locate_h(ptr, extents, ierr)
    type(c_ptr), intent(out) :: ptr
    integer(int64), allocatable, intent(out) :: extents(:)
    integer, intent(out) :: ierr
    ierr = CKPT_OK
    ptr = c_null_ptr
    if (size(h) > 0) ptr = c_loc(h)
    extents = shape(h, int64)
  end subroutine locate_h

  subroutine resize_h(extents, ierr)
    integer(int64), intent(in) :: extents(:)
    integer, intent(out) :: ierr
    ierr = CKPT_OK
    h_resizes = h_resizes + 1
    if (h_resizes <= size(h_asked)) h_asked(h_resizes) = extents(1)
    deallocate (h)
    allocate (h(extents(1)))
    h = -1
  end subroutine resize_h

  !> x: n rows {id0 + k, step, -(id0 + k)}; h: m values 100 * rank + k.
  subroutine fill(n, id0, step, m, rank)
    integer(int64), intent(in) :: n, id0, step, m
    integer, intent(in) :: rank
    integer(int64) :: k
    if (allocated(x)) deallocate (x)
    if (allocated(h)) deallocate (h)
    allocate (x(3, n), h(m))
    do k = 1, n
      x(:, k) = [real(id0 + k - 1, real64), real(step, real64), -real(id0 + k - 1, real64)]
    end do
    h = [(real(100 * rank + k - 1, real64), k = 1, m)]
  end subroutine fill
end module parity_state

program test_fortran_parity
  use, intrinsic :: iso_fortran_env, only: int64, real64, error_unit
  use mpi_f08
  use ckpt
  use parity_state
  implicit none

  type(ckpt_runtime) :: rt
  type(ckpt_step) :: c
  type(ckpt_ticket) :: tk
  type(ckpt_checkpoint_stats) :: st
  integer :: wcode
  character(len=:), allocatable :: wmsg
  logical :: done
  integer :: ierr, rank, nranks, provided, failures = 0, total, unit, n, dtype, kind, q
  integer(int64) :: r, step, total1, total2, b1, e1, b2, e2, k
  integer(int64), allocatable :: steps(:), extents(:), rows(:)
  character(len=1024) :: msg, got
  character(len=512) :: tmp, dir, yaml
  character(len=4) :: short
  character(len=65536) :: yaml_text
  logical :: funneled
  real(real64), target :: extra = 42.0_real64
  character(len=64), allocatable :: names(:)
  character(len=2), allocatable :: tiny(:)
  integer(int64), target :: bids(2), bgot_ids(2), want_ids(3)
  real(real64), target :: bvals(3, 2), bgot(3, 3)

  call MPI_Init_thread(MPI_THREAD_MULTIPLE, provided)
  call MPI_Comm_rank(MPI_COMM_WORLD, rank)
  call MPI_Comm_size(MPI_COMM_WORLD, nranks)
  r = rank
  call get_environment_variable("CKPTTEST_TMP", tmp)
  if (len_trim(tmp) == 0) tmp = "/tmp/ckpt-fortran-parity-test"
  dir = trim(tmp)//"/fortran_parity"
  yaml = trim(dir)//".yaml"
  if (rank == 0) then
    call execute_command_line("rm -rf '"//trim(dir)//"' && mkdir -p '"//trim(dir)//"'"//achar(0))
    open (newunit=unit, file=trim(yaml), status="replace", action="write")
    write (unit, '(a)') "dir: "//trim(dir), "keep: 5", "fsync: false"
    close (unit)
  end if
  call MPI_Barrier(MPI_COMM_WORLD)

  call ckpt_init(rt, MPI_COMM_WORLD, ierr, trim(yaml)); call ok(ierr, "ckpt_init")
  call ckpt_dir(rt, got, ierr); call ok(ierr, "ckpt_dir")
  call expect(got == dir, "ckpt_dir is the YAML file's directory: "//trim(got))
  call ckpt_dir(rt, short, ierr)
  call expect(ierr == CKPT_INVALID_ARGUMENT, "ckpt_dir into a string too short fails")
  call ckpt_error_message(rt, msg)
  call expect(index(msg, "characters") > 0, "and says how long it must be: "//trim(msg))
  call ckpt_steps(rt, steps, ierr); call ok(ierr, "ckpt_steps")
  call expect(size(steps) == 0, "no step yet")
  call ckpt_options_yaml(rt, yaml_text, ierr); call ok(ierr, "ckpt_options_yaml")
  call expect(index(yaml_text, "keep: 5") > 0 .and. index(yaml_text, trim(dir)) > 0, &
              "the YAML text holds the options in effect")
  call ckpt_options_yaml(rt, short, ierr)
  call expect(ierr == CKPT_INVALID_ARGUMENT, "ckpt_options_yaml into a string too short fails")
  call ckpt_funneled(rt, funneled, ierr); call ok(ierr, "ckpt_funneled")
  call expect(.not. funneled, "MPI_THREAD_MULTIPLE and mpi_threads auto: not funneled")
  call ckpt_restart_level(rt, got, ierr); call ok(ierr, "ckpt_restart_level")
  call expect(len_trim(got) == 0, "no restart yet: no level")

  ! ---- write steps 1 (rank r: r + 1 rows, 10 in all) and 2 (2r + 1 rows, 16 in all) ----
  call fill(r + 1, r * (r + 1) / 2, 1_int64, r + 2, rank)
  step = 1
  call ckpt_protect(rt, "step", step, ierr); call ok(ierr, "protect step")
  call ckpt_protect_source(rt, "x", CKPT_F64, locate_x, ierr, resize=resize_x, joined=.true.)
  call ok(ierr, "protect_source x (joined)")
  call ckpt_protect_source(rt, "h", CKPT_F64, locate_h, ierr, resize=resize_h); call ok(ierr, "protect_source h")
  call ckpt_annotate(rt, "x", "units", "m", ierr); call ok(ierr, "annotate")
  call ckpt_checkpoint(rt, step, ierr, tk); call ok(ierr, "checkpoint 1 with a ticket")
  call ckpt_ticket_wait(tk, ierr); call ok(ierr, "ckpt_ticket_wait")
  call ckpt_ticket_done(tk, done, ierr); call ok(ierr, "ckpt_ticket_done")
  call expect(done, "a waited ticket is done")
  call ckpt_ticket_stats(tk, st, ierr); call ok(ierr, "ckpt_ticket_stats")
  call expect(st%step == 1, "stats of step 1")
  call expect(st%bytes == 8 * (3 * (r + 1) + (r + 2) + 1), "stats: this rank's payload bytes (x, h, step)")
  call expect(st%bytes_written >= st%bytes .and. st%staging_bytes > 0, "stats: bytes written, staging")
  call expect(st%committed_s >= st%durable_s .and. st%durable_s > 0, "stats: times")
  call expect(.not. st%synced, "fsync: false - not synced")
  call expect(st%redundancy_bytes == 0 .and. st%redundancy_s == 0, "no redundancy without local_dir")
  call expect(st%staging_pinned_bytes == 0, "the host device pins nothing")
  call ckpt_ticket_free(tk)
  call ckpt_ticket_free(tk)  ! a freed ticket holds none: nothing happens
  call ckpt_wait_all(rt, ierr); call ok(ierr, "wait_all 1")
  call fill(2 * r + 1, r * r, 2_int64, r + 3, rank)
  step = 2
  call ckpt_checkpoint(rt, step, ierr); call ok(ierr, "checkpoint 2")
  call ckpt_wait_all(rt, ierr); call ok(ierr, "wait_all 2")

  ! ---- inspect before allocating ----
  call ckpt_steps(rt, steps, ierr); call ok(ierr, "ckpt_steps")
  call expect(size(steps) == 2, "two steps")
  if (size(steps) == 2) call expect(steps(1) == 1 .and. steps(2) == 2, "steps 1 and 2, oldest first")
  call ckpt_inspect(rt, 2_int64, c, ierr); call ok(ierr, "ckpt_inspect")
  call ckpt_step_nvars(c, n, ierr); call ok(ierr, "ckpt_step_nvars")
  call expect(n == 3, "three variables")
  call ckpt_step_var_name(c, 2, got, ierr); call ok(ierr, "ckpt_step_var_name")
  call expect(got == "x", "variable 2 is x (registration order): "//trim(got))
  call ckpt_step_var_name(c, 0, got, ierr)
  call expect(ierr == CKPT_INVALID_ARGUMENT, "variable 0 is refused")
  call ckpt_step_var_name(c, 4, got, ierr)
  call expect(ierr == CKPT_INVALID_ARGUMENT, "variable 4 of 3 is refused")
  total2 = 0
  total1 = 0
  do q = 0, nranks - 1
    total1 = total1 + q + 1
    total2 = total2 + 2 * q + 1
  end do
  call ckpt_step_variable(c, "x", ierr, dtype=dtype, kind=kind, extents=extents, rows_per_rank=rows)
  call ok(ierr, "ckpt_step_variable x")
  call expect(dtype == CKPT_F64 .and. kind == CKPT_KIND_JOINED, "x: f64, joined")
  call expect(size(extents) == 2, "x has two extents")
  if (size(extents) == 2) call expect(extents(1) == 3 .and. extents(2) == total2, "x(3, rows in total)")
  call expect(lbound(rows, 1) == 0 .and. ubound(rows, 1) == nranks - 1, "rows_per_rank(0:nranks-1)")
  if (size(rows) == nranks) call expect(all(rows == [(2 * q + 1, q = 0, nranks - 1)]), "rows per writer rank")
  call ckpt_step_variable(c, "h", ierr, kind=kind, extents=extents); call ok(ierr, "ckpt_step_variable h")
  call expect(kind == CKPT_KIND_LOCAL .and. size(extents) == 1, "h: local, one extent")
  call ckpt_step_variable(c, "h", ierr, rows_per_rank=rows)
  call expect(ierr == CKPT_MISMATCH, "rows_per_rank of a local array fails")
  call ckpt_step_variable(c, "nope", ierr, kind=kind)
  call expect(ierr == CKPT_NOT_FOUND, "an unknown variable is not found")
  call ckpt_step_attribute(c, "x", "units", got, ierr); call ok(ierr, "ckpt_step_attribute")
  call expect(got == "m", "units = m: "//trim(got))
  call ckpt_step_attribute(c, "x", "array_order", got, ierr); call ok(ierr, "array_order")
  call expect(got == "fortran", "array_order = fortran")
  call ckpt_step_attribute(c, "x", "colour", got, ierr)
  call expect(ierr == CKPT_NOT_FOUND, "a missing attribute is not found")
  call ckpt_step_free(c)
  call ckpt_inspect(rt, 99_int64, c, ierr)
  call expect(ierr == CKPT_NOT_FOUND, "inspect of a missing step fails")

  ! ---- error paths of ckpt_protect_source ----
  fail_locate = .true.
  call ckpt_protect_source(rt, "bad", CKPT_F64, locate_x, ierr)
  call expect(ierr == CKPT_INVALID_ARGUMENT, "a locate that fails is refused")
  call ckpt_error_message(rt, msg)
  call expect(index(msg, "'bad'") > 0, "naming the region: "//trim(msg))
  fail_locate = .false.
  call ckpt_protect_source(rt, "bad", 99, locate_x, ierr)
  call expect(ierr == CKPT_INVALID_ARGUMENT, "an unknown dtype is refused")
  call ckpt_finalize(rt, ierr); call ok(ierr, "finalize")

  ! ---- damage step 2; one restart falls back to step 1, resizing for each step it tries ----
  if (rank == 0) then
    ! The name ends in a NUL: libgfortran strndup()s it, and ASan's strict_string_checks (.ci/sanitizers)
    ! wants its arguments NUL-terminated within their length; the NUL ends the name as the length would.
    open (newunit=unit, file=trim(dir)//"/ckpt.2/data.0"//achar(0), status="replace", action="write")  ! now empty
    close (unit)
  end if
  call MPI_Barrier(MPI_COMM_WORLD)
  deallocate (x, h)
  allocate (x(3, 0), h(0))
  step = -1
  call ckpt_init(rt, MPI_COMM_WORLD, ierr, trim(yaml)); call ok(ierr, "ckpt_init again")
  call ckpt_protect(rt, "step", step, ierr); call ok(ierr, "protect step")
  call ckpt_protect_source(rt, "x", CKPT_F64, locate_x, ierr, resize=resize_x, joined=.true.)
  call ok(ierr, "protect_source x, no rows yet")
  call ckpt_protect_source(rt, "h", CKPT_F64, locate_h, ierr, resize=resize_h); call ok(ierr, "protect_source h")
  call ckpt_protect(rt, "extra", extra, ierr); call ok(ierr, "protect extra")  ! in no checkpoint
  call ckpt_set_optional(rt, "extra", ierr); call ok(ierr, "set_optional extra")
  call ckpt_restart(rt, step, ierr); call ok(ierr, "restart")
  call expect(step == 1, "fell back to step 1")
  call ckpt_restart_level(rt, got, ierr); call ok(ierr, "ckpt_restart_level")
  call expect(got == "global", "restarted from the global level: "//trim(got))
  call ckpt_skipped_optional(rt, names, ierr); call ok(ierr, "ckpt_skipped_optional")
  call expect(size(names) == 1, "one optional region skipped")
  if (size(names) == 1) call expect(names(1) == "extra", "it is extra: "//trim(names(1)))
  call expect(extra == 42.0_real64, "and left untouched")
  call ckpt_skipped_optional(rt, tiny, ierr)
  call expect(ierr == CKPT_INVALID_ARGUMENT, "a name longer than the caller's strings is refused")
  call ckpt_restart_warning(rt, wcode, wmsg, ierr); call ok(ierr, "ckpt_restart_warning")
  call expect(wcode == CKPT_CORRUPT, "the warning's code is step 2's failure, corrupt")
  call expect(index(wmsg, "after skipping newer ones") > 0 .and. index(wmsg, "step 2") > 0 .and. &
              index(wmsg, "extra") > 0, "the warning names the skipped step and region: "//wmsg)
  b1 = total1 * r / nranks
  e1 = total1 * (r + 1) / nranks
  b2 = total2 * r / nranks
  e2 = total2 * (r + 1) / nranks
  call expect(x_resizes == 2, "x resized twice")
  call expect(x_asked(1) == e2 - b2 .and. x_asked(2) == e1 - b1, "for step 2's share, then step 1's")
  call expect(size(x, 1) == 3 .and. size(x, 2) == e1 - b1, "x has step 1's share of the rows")
  do k = 1, size(x, 2, int64)
    call expect(all(x(:, k) == [real(b1 + k - 1, real64), 1.0_real64, -real(b1 + k - 1, real64)]), "x restored")
  end do
  call expect(h_resizes == 2 .and. h_asked(1) == r + 3 .and. h_asked(2) == r + 2, "h resized for step 2, then 1")
  call expect(size(h) == r + 2, "h has step 1's length")
  if (size(h) == r + 2) call expect(all(h == [(real(100 * r + k - 1, real64), k = 1, r + 2)]), "h restored")
  call ckpt_restart_step(rt, 1_int64, ierr); call ok(ierr, "restart_step 1")
  call ckpt_restart_warning(rt, wcode, wmsg, ierr); call ok(ierr, "ckpt_restart_warning after restart_step")
  call expect(wcode == CKPT_OK .and. len(wmsg) == 0, "a restart of a given step leaves no warning")
  call ckpt_finalize(rt, ierr); call ok(ierr, "finalize")

  ! ---- fsync and durable_every_ms 0: the ticket's checkpoint is synced ----
  if (rank == 0) then
    open (newunit=unit, file=trim(yaml)//".synced"//achar(0), status="replace", action="write")
    write (unit, '(a)') "dir: "//trim(dir)//"/synced", "fsync: true", "durable_every_ms: 0"
    close (unit)
  end if
  call MPI_Barrier(MPI_COMM_WORLD)
  call ckpt_init(rt, MPI_COMM_WORLD, ierr, trim(yaml)//".synced"); call ok(ierr, "ckpt_init synced")
  call ckpt_protect(rt, "extra", extra, ierr); call ok(ierr, "protect extra")
  call ckpt_checkpoint(rt, 7, ierr, tk); call ok(ierr, "checkpoint 7 (default integer) with a ticket")
  call ckpt_ticket_wait(tk, ierr); call ok(ierr, "ckpt_ticket_wait 7")
  call ckpt_ticket_stats(tk, st, ierr); call ok(ierr, "ckpt_ticket_stats 7")
  call expect(st%step == 7 .and. st%bytes == 8, "stats of step 7: one real64")
  call expect(st%synced, "fsync: true, durable_every_ms: 0 - synced")
  call ckpt_ticket_free(tk)
  call ckpt_finalize(rt, ierr); call ok(ierr, "finalize synced")

  ! ---- rows by key and by index: blocks that moved (ckpt_set_restart_keys, ckpt_set_restart_rows) ----
  ! Rank r writes 2 blocks of 3 values (rows are the last dimension), ids 100 + 20 r and 110 + 20 r.
  bids = [100_int64 + 20 * r, 110_int64 + 20 * r]
  do q = 1, 2
    bvals(:, q) = real(bids(q), real64) + [0.0_real64, 0.25_real64, 0.5_real64]
  end do
  call ckpt_init(rt, MPI_COMM_WORLD, ierr, trim(yaml)//".synced"); call ok(ierr, "ckpt_init by key")
  call ckpt_protect_joined(rt, "blocks", bvals, ierr); call ok(ierr, "protect_joined blocks")
  call ckpt_protect_joined(rt, "id", bids, ierr); call ok(ierr, "protect_joined id")
  call ckpt_checkpoint(rt, 9, ierr); call ok(ierr, "checkpoint 9")
  call ckpt_wait_all(rt, ierr); call ok(ierr, "wait_all 9")
  call ckpt_finalize(rt, ierr); call ok(ierr, "finalize 9")
  ! Now every rank owns the last rank's first block, its own second one and block 0; by index, the
  ! first and last stored rows.
  want_ids = [100_int64 + 20 * (nranks - 1), 110_int64 + 20 * r, 100_int64]
  call ckpt_init(rt, MPI_COMM_WORLD, ierr, trim(yaml)//".synced"); call ok(ierr, "ckpt_init restart by key")
  call ckpt_protect_joined(rt, "blocks", bgot, ierr); call ok(ierr, "protect_joined blocks (3 rows)")
  call ckpt_protect_joined(rt, "id", bgot_ids, ierr); call ok(ierr, "protect_joined id (2 rows)")
  call ckpt_set_restart_keys(rt, "blocks", "id", want_ids, ierr); call ok(ierr, "set_restart_keys")
  call ckpt_set_restart_rows(rt, "id", [2_int64 * nranks - 1, 0_int64], ierr); call ok(ierr, "set_restart_rows")
  call ckpt_restart_step(rt, 9_int64, ierr); call ok(ierr, "restart 9 by key")
  do q = 1, 3
    call expect(all(bgot(:, q) == real(want_ids(q), real64) + [0.0_real64, 0.25_real64, 0.5_real64]), &
                "block restored by key")
  end do
  call expect(all(bgot_ids == [110_int64 + 20 * (nranks - 1), 100_int64]), "ids restored by row")
  call ckpt_set_restart_rows(rt, "nope", [0_int64], ierr)
  call expect(ierr == CKPT_NOT_FOUND, "set_restart_rows of an unknown region")
  want_ids(2) = 7
  call ckpt_set_restart_keys(rt, "blocks", "id", want_ids, ierr); call ok(ierr, "set_restart_keys 7")
  call ckpt_restart_step(rt, 9_int64, ierr)
  call expect(ierr == CKPT_NOT_FOUND, "a key no row holds fails on every rank")
  call ckpt_clear_restart_rows(rt, "blocks", ierr); call ok(ierr, "clear_restart_rows")
  call ckpt_finalize(rt, ierr); call ok(ierr, "finalize by key")

  ! The main program's allocatables live in its frame, never freed at its end: freed here so that
  ! LeakSanitizer (.ci/sanitizers) finds nothing at exit.
  if (allocated(wmsg)) deallocate (wmsg)
  if (allocated(steps)) deallocate (steps)
  if (allocated(extents)) deallocate (extents)
  if (allocated(rows)) deallocate (rows)
  if (allocated(names)) deallocate (names)
  if (allocated(tiny)) deallocate (tiny)
  call MPI_Allreduce(failures, total, 1, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD)
  if (rank == 0) write (*, '(a,i0,a,i0,a)') "fortran_parity: ", total, " failed checks over ", nranks, " ranks"
  call MPI_Finalize()
  if (total /= 0) error stop 1

contains

  subroutine ok(code, what)
    integer, intent(in) :: code
    character(len=*), intent(in) :: what
    character(len=1024) :: m
    if (code == CKPT_OK) return
    call ckpt_error_message(rt, m)
    call expect(.false., what//": "//trim(m))
  end subroutine ok

  subroutine expect(cond, what)
    logical, intent(in) :: cond
    character(len=*), intent(in) :: what
    if (cond) return
    failures = failures + 1
    write (error_unit, '(a,i0,a,a)') "rank ", rank, ": FAILED: ", what
  end subroutine expect

end program test_fortran_parity
