!> The Fortran module ckpt at 4 ranks: every type (real32, real64, int32, int64) as a scalar and as
!> local arrays of rank 1-4, a global box, checkpoint/restart of given and newest steps, unprotect, and
!> the error paths (ierr /= CKPT_OK with a message, never a stop): bad config, use before init, a
!> non-contiguous section, a box of the wrong rank, a missing step, use after finalize. Both ckpt_init
!> forms (type(MPI_Comm) and an integer handle). Scattered regions: ghosted blocks, each its own
!> allocation, checkpointed as one joined array of their interiors and restarted into new allocations by
!> key on 3 ranks and by the balanced split into one piece of several rows on 4 (interiors equal, ghosts
!> untouched), and their refusals (a piece with rows and no memory, a selection of another rank than the
!> row, negative extents). Scratch directory: $CKPTTEST_TMP. Exit status 1 on a failed check.
program test_fortran_api
  use, intrinsic :: iso_fortran_env, only: int32, int64, real32, real64, error_unit
  use, intrinsic :: iso_c_binding, only: c_ptr, c_loc, c_null_ptr
  use mpi_f08
  use ckpt
  implicit none

  ! A block of a scattered region: NV variables of NX x NZ cells with one ghost layer, its own allocation.
  integer, parameter :: NX = 4, NZ = 3, NV = 2
  real(real64), parameter :: GHOST = -7.0_real64
  type :: ghosted_block
    real(real64), allocatable :: u(:, :, :)  ! u(0:NX+1, 0:NZ+1, NV)
  end type ghosted_block

  type(ckpt_runtime) :: rt, unused
  integer :: ierr, rank, nranks, provided, failures = 0, total, i, j, unit
  character(len=1024) :: msg
  character(len=512) :: tmp, dir, yaml, bad_yaml
  integer(int64) :: step

  real(real32), target :: s_r32, a_r32(5, 4, 3, 2)
  real(real64), target :: s_r64, a_r64(7)
  integer(int32), target :: s_i32, a_i32(3, 4)
  integer(int64), target :: s_i64, a_i64(2, 3, 4)
  real(real64), target :: box(4, 3, 2)  ! this rank's box of the global array [4, 3, 2 * nranks]
  real(real64), target :: big(6, 6)
  real(real64), target :: ghosted(0:5, 0:4), want(4, 3)  ! a 4 x 3 interior with one ghost layer
  real(real64), allocatable, target :: rows(:, :)  ! this rank's rows of a joined array
  integer(int64) :: nrows, first, count
  type(ghosted_block), allocatable, target :: blk(:)  ! this rank's blocks, each allocated on its own
  type(c_ptr), allocatable :: pieces(:)
  integer(int64), allocatable, target :: bid(:), mine(:)
  real(real64), allocatable, target :: slab(:, :, :, :)  ! a piece of several blocks: slab(0:NX+1, 0:NZ+1, NV, k)
  integer(int64), parameter :: ROW(3) = [int(NX, int64), int(NZ, int64), int(NV, int64)]
  integer(int64), parameter :: FIRST_CELL(3) = [1_int64, 1_int64, 0_int64]
  integer(int64), parameter :: ALLOC(3) = [int(NX + 2, int64), int(NZ + 2, int64), int(NV, int64)]
  type(ckpt_runtime) :: rt3
  type(MPI_Comm) :: three
  integer :: k, nb, wrong, color
  integer(int64) :: g, owned, nmine

  call MPI_Init_thread(MPI_THREAD_MULTIPLE, provided)
  call MPI_Comm_rank(MPI_COMM_WORLD, rank)
  call MPI_Comm_size(MPI_COMM_WORLD, nranks)
  call get_environment_variable("CKPTTEST_TMP", tmp)
  if (len_trim(tmp) == 0) tmp = "/tmp/ckpt-fortran-api-test"
  dir = trim(tmp)//"/fortran_api"
  yaml = trim(dir)//".yaml"
  bad_yaml = trim(dir)//".bad.yaml"
  if (rank == 0) then
    ! The trailing NUL keeps libgfortran's strndup of the command inside its buffer (ASan's
    ! strict_string_checks in .ci/sanitizers reports a read one byte past it otherwise).
    call execute_command_line("rm -rf '"//trim(dir)//"' && mkdir -p '"//trim(dir)//"'"//achar(0))
    open (newunit=unit, file=trim(yaml), status="replace", action="write")
    write (unit, '(a)') "dir: "//trim(dir), "keep: 3", "fsync: false"
    close (unit)
    open (newunit=unit, file=trim(bad_yaml), status="replace", action="write")
    write (unit, '(a)') "keep: zero"
    close (unit)
  end if
  call MPI_Barrier(MPI_COMM_WORLD)

  ! ---- errors before a runtime exists ----
  call ckpt_checkpoint(unused, 1_int64, ierr)
  call expect(ierr == CKPT_INVALID_ARGUMENT, "checkpoint before ckpt_init fails")
  call ckpt_error_message(unused, msg)
  call expect(index(msg, "NULL") > 0, "its message names the missing runtime: "//trim(msg))
  call ckpt_finalize(unused, ierr)
  call expect(ierr == CKPT_FAILED_PRECONDITION, "finalize before ckpt_init fails")
  call ckpt_init(rt, MPI_COMM_WORLD, ierr, trim(bad_yaml))
  call expect(ierr == CKPT_INVALID_ARGUMENT, "ckpt_init with a bad YAML value fails")
  call ckpt_error_message(rt, msg)
  call expect(index(msg, "keep") > 0, "its message names the option: "//trim(msg))
  call ckpt_init(rt, MPI_COMM_WORLD, ierr, trim(dir)//"/missing.yaml")
  call expect(ierr /= CKPT_OK, "ckpt_init with a missing YAML file fails")

  ! ---- the integer-handle form, then the runtime used below ----
  call ckpt_init(rt, MPI_COMM_WORLD%MPI_VAL, ierr, trim(yaml))
  call expect(ierr == CKPT_OK, "ckpt_init from an integer communicator")
  call ckpt_init(rt, MPI_COMM_WORLD, ierr, trim(yaml))
  call expect(ierr == CKPT_FAILED_PRECONDITION, "ckpt_init of an initialised runtime fails")
  call ckpt_finalize(rt, ierr)
  call expect(ierr == CKPT_OK, "ckpt_finalize")
  call ckpt_init(rt, MPI_COMM_WORLD, ierr, trim(yaml))
  call expect(ierr == CKPT_OK, "ckpt_init from type(MPI_Comm)")

  ! ---- protect every type and rank ----
  call ckpt_protect(rt, "s_r32", s_r32, ierr); call ok(ierr, "protect real32 scalar")
  call ckpt_protect(rt, "s_r64", s_r64, ierr); call ok(ierr, "protect real64 scalar")
  call ckpt_protect(rt, "s_i32", s_i32, ierr); call ok(ierr, "protect int32 scalar")
  call ckpt_protect(rt, "s_i64", s_i64, ierr); call ok(ierr, "protect int64 scalar")
  call ckpt_protect(rt, "a_r32", a_r32, ierr); call ok(ierr, "protect real32 rank 4")
  call ckpt_protect(rt, "a_r64", a_r64, ierr); call ok(ierr, "protect real64 rank 1")
  call ckpt_protect(rt, "a_i32", a_i32, ierr); call ok(ierr, "protect int32 rank 2")
  call ckpt_protect(rt, "a_i64", a_i64, ierr); call ok(ierr, "protect int64 rank 3")
  call ckpt_protect(rt, "box", box, global=[4_int64, 3_int64, 2_int64 * nranks], start=[0_int64, 0_int64, 2_int64 * rank], &
                    ierr=ierr)
  call ok(ierr, "protect a box of a global array")

  ! ---- error paths of protect ----
  call ckpt_protect(rt, "section", big(1:3, :), ierr)
  call expect(ierr == CKPT_INVALID_ARGUMENT, "a non-contiguous section is refused")
  call ckpt_error_message(rt, msg)
  call expect(index(msg, "not contiguous") > 0 .and. index(msg, "section") > 0, "message: "//trim(msg))
  call ckpt_protect(rt, "section", big(:, 2:3), ierr)
  call ok(ierr, "a contiguous section is accepted")
  call ckpt_unprotect(rt, "section", ierr); call ok(ierr, "unprotect")
  call ckpt_protect(rt, "box2", box, [4_int64, 3_int64], [0_int64, 0_int64], ierr)
  call expect(ierr == CKPT_INVALID_ARGUMENT, "a box with the wrong number of global extents is refused")
  call ckpt_protect(rt, "box3", box, [4_int64, 3_int64, 1_int64], [0_int64, 0_int64, 0_int64], ierr)
  call expect(ierr == CKPT_INVALID_ARGUMENT, "a box outside the global array is refused")
  call ckpt_error_message(rt, msg)
  call expect(len_trim(msg) > 0, "message: "//trim(msg))
  call ckpt_protect(rt, "box4", box, [4_int64, 3_int64, 2_int64 * nranks], [0_int64, -1_int64, 0_int64], ierr)
  call expect(ierr == CKPT_INVALID_ARGUMENT, "a negative start is refused")
  call ckpt_error_message(rt, msg)
  call expect(index(msg, "start(2)") > 0 .and. index(msg, "-1") > 0, "message names start(2): "//trim(msg))
  call ckpt_protect(rt, "box5", box, [4_int64, -3_int64, 2_int64 * nranks], [0_int64, 0_int64, 0_int64], ierr)
  call expect(ierr == CKPT_INVALID_ARGUMENT, "a negative global extent is refused")
  call ckpt_error_message(rt, msg)
  call expect(index(msg, "global(2)") > 0, "message names global(2): "//trim(msg))
  call ckpt_protect(rt, "s_r64", s_r64, ierr)
  call expect(ierr == CKPT_INVALID_ARGUMENT, "a name protected twice is refused")
  call ckpt_protect(rt, "bad name!", s_r64, ierr)
  call expect(ierr == CKPT_INVALID_ARGUMENT, "a bad name is refused")
  call ckpt_unprotect(rt, "nothing", ierr)
  call expect(ierr == CKPT_NOT_FOUND, "unprotect of an unknown name")
  call ckpt_annotate(rt, "a_r64", "units", "m/s", ierr); call ok(ierr, "annotate")

  ! ---- checkpoint 1 and 2, restart each ----
  call fill(1)
  call ckpt_checkpoint(rt, 1_int64, ierr); call ok(ierr, "checkpoint 1")
  call fill(2)
  call ckpt_checkpoint(rt, 2, ierr); call ok(ierr, "checkpoint 2 (default-integer step)")
  call ckpt_poll(rt, ierr); call ok(ierr, "poll")
  call ckpt_wait_all(rt, ierr); call ok(ierr, "wait_all")
  call ckpt_latest(rt, step, ierr)
  call expect(ierr == CKPT_OK .and. step == 2, "latest is 2")
  call fill(0)
  call ckpt_restart_step(rt, 1_int64, ierr); call ok(ierr, "restart step 1")
  call expect(same(1), "step 1 restored bit for bit")
  call fill(0)
  call ckpt_restart(rt, step, ierr); call ok(ierr, "restart newest")
  call expect(step == 2 .and. same(2), "the newest (step 2) restored bit for bit")
  call ckpt_restart_step(rt, 77, ierr)
  call expect(ierr == CKPT_NOT_FOUND, "restart of a missing step")
  call ckpt_checkpoint(rt, -3_int64, ierr)
  call expect(ierr == CKPT_INVALID_ARGUMENT, "a negative step is refused")

  ! ---- unprotect, then a restart fills only what is still protected ----
  call ckpt_unprotect(rt, "a_r32", ierr); call ok(ierr, "unprotect a_r32")
  call fill(0)
  call ckpt_restart_step(rt, 1_int64, ierr); call ok(ierr, "restart step 1 without a_r32")
  call expect(all(a_r32 == rank) .and. s_r64 == 1.5_real64, "a_r32 untouched (as filled for step 0), the others restored")

  ! ---- a joined array: rank r holds r + 1 rows of 2 (rows last); restart a balanced share, explicit rows ----
  allocate (rows(2, rank + 1))
  do i = 1, rank + 1
    rows(1, i) = real(rank * (rank + 1) / 2 + i - 1, real64)  ! its global row, 0-based
    rows(2, i) = -1.0_real64
  end do
  call ckpt_protect_joined(rt, "walkers", rows, ierr); call ok(ierr, "protect a joined array")
  call ckpt_protect_joined(rt, "walkers0", s_r64, ierr)
  call expect(ierr == CKPT_INVALID_ARGUMENT, "a scalar is not a joined array")
  call ckpt_checkpoint(rt, 5_int64, ierr); call ok(ierr, "checkpoint 5 with a joined array")
  call ckpt_wait_all(rt, ierr); call ok(ierr, "wait_all 5")
  call ckpt_joined_rows(rt, 5_int64, "walkers", nrows, first, count, ierr); call ok(ierr, "joined_rows")
  call expect(nrows == int(nranks * (nranks + 1) / 2, int64), "the stored rows of every rank")
  deallocate (rows)
  allocate (rows(2, count))
  rows = 0
  call ckpt_update_joined(rt, "walkers", rows, ierr); call ok(ierr, "update a joined array")
  call ckpt_restart_step(rt, 5_int64, ierr); call ok(ierr, "restart the balanced share")
  call expect(all(rows(2, :) == -1.0_real64), "joined rows restored")
  do i = 1, int(count)
    call expect(rows(1, i) == real(first + i - 1, real64), "joined row in order")
  end do
  deallocate (rows)
  allocate (rows(2, 1))
  call ckpt_update_joined(rt, "walkers", rows, ierr, first_row=nrows - 1); call ok(ierr, "explicit rows")
  call ckpt_restart_step(rt, 5_int64, ierr); call ok(ierr, "restart the last row on every rank")
  call expect(rows(1, 1) == real(nrows - 1, real64), "the last row")
  call ckpt_update_joined(rt, "walkers", rows, ierr, first_row=-1_int64)
  call expect(ierr == CKPT_INVALID_ARGUMENT, "a negative first_row is refused (absent means balanced)")
  call ckpt_error_message(rt, msg)
  call expect(index(msg, "first_row") > 0 .and. index(msg, "-1") > 0, "message names first_row: "//trim(msg))
  call ckpt_protect_joined(rt, "walkers_neg", rows, ierr, first_row=-7_int64)
  call expect(ierr == CKPT_INVALID_ARGUMENT, "protect_joined with a negative first_row is refused")
  call ckpt_update_joined(rt, "walkers", rows, ierr, first_row=nrows); call ok(ierr, "rows past the end")
  call ckpt_restart_step(rt, 5_int64, ierr)
  call expect(ierr == CKPT_MISMATCH, "rows past the end are a mismatch")
  call ckpt_unprotect(rt, "walkers", ierr); call ok(ierr, "unprotect walkers")
  deallocate (rows)
  ! An optional variable missing from checkpoint 5 is left alone.
  call ckpt_protect(rt, "added", big, ierr); call ok(ierr, "protect added")
  big = 3.0_real64
  call ckpt_restart_step(rt, 5_int64, ierr)
  call expect(ierr == CKPT_NOT_FOUND, "a new variable is not in checkpoint 5")
  call ckpt_set_optional(rt, "added", ierr); call ok(ierr, "set_optional")
  call ckpt_restart_step(rt, 5_int64, ierr); call ok(ierr, "restart with the optional variable missing")
  call expect(all(big == 3.0_real64), "the optional variable is untouched")

  call ckpt_unprotect(rt, "added", ierr); call ok(ierr, "unprotect added")

  ! ---- a memory selection: the interior ghosted(1:4, 1:3) only, ghosts left as they are ----
  ghosted = -1.0_real64
  do i = 1, 3
    want(:, i) = [(100.0_real64 * rank + 10 * i + j, j = 1, 4)]
  end do
  ghosted(1:4, 1:3) = want
  call ckpt_protect_selection(rt, "interior", ghosted, [1_int64, 1_int64], [4_int64, 3_int64, 1_int64], ierr)
  call expect(ierr == CKPT_INVALID_ARGUMENT, "a selection with a count of the wrong rank is refused")
  call ckpt_protect_selection(rt, "interior", ghosted, [2_int64, 1_int64], [5_int64, 3_int64], ierr)
  call expect(ierr == CKPT_INVALID_ARGUMENT, "a selection past the array's extents is refused")
  call ckpt_error_message(rt, msg)
  call expect(index(msg, "interior") > 0, "its message names the region: "//trim(msg))
  call ckpt_protect_selection(rt, "interior", ghosted, [1_int64, 1_int64], [4_int64, 3_int64], ierr)
  call ok(ierr, "protect_selection (nothing was registered by the refused calls)")
  call ckpt_checkpoint(rt, 11_int64, ierr); call ok(ierr, "checkpoint 11")
  call ckpt_wait_all(rt, ierr); call ok(ierr, "wait_all 11")
  ghosted = 7.0_real64
  call ckpt_restart_step(rt, 11_int64, ierr); call ok(ierr, "restart 11")
  call expect(all(ghosted(1:4, 1:3) == want), "the interior is restored")
  call expect(all(ghosted(0, :) == 7.0_real64) .and. all(ghosted(5, :) == 7.0_real64) .and. &
              all(ghosted(:, 0) == 7.0_real64) .and. all(ghosted(:, 4) == 7.0_real64), "the ghosts are untouched")

  ! ---- scattered: rank r's r + 2 ghosted blocks, each its own allocation (one row per piece) ----
  nb = rank + 2
  allocate (blk(nb), pieces(nb), bid(nb))
  do k = 1, nb
    bid(k) = block_id(first_block(rank) + k - 1)
    allocate (blk(k)%u(0:NX + 1, 0:NZ + 1, NV))
    call fill_block(blk(k)%u, bid(k))
    pieces(k) = c_loc(blk(k)%u)
  end do
  call ckpt_protect_scattered(rt, "blocks", CKPT_F64, ROW, pieces, ierr, first=FIRST_CELL, alloc=ALLOC)
  call ok(ierr, "protect_scattered the ghosted blocks")
  call ckpt_protect_joined(rt, "block_id", bid, ierr); call ok(ierr, "protect_joined block_id")
  call ckpt_checkpoint(rt, 21_int64, ierr); call ok(ierr, "checkpoint 21 with scattered blocks")
  do k = 1, nb
    blk(k)%u = 0.0_real64  ! captured when ckpt_checkpoint returned: this is not stored
  end do
  call ckpt_wait_all(rt, ierr); call ok(ierr, "wait_all 21")
  call ckpt_finalize(rt, ierr); call ok(ierr, "finalize after checkpoint 21")  ! one runtime per directory at a time

  ! On 3 ranks by key: rank q owns the blocks whose id mod 3 == q, in reverse order, in new allocations.
  color = MPI_UNDEFINED
  if (rank < 3) color = 0
  call MPI_Comm_split(MPI_COMM_WORLD, color, rank, three)
  if (rank < 3) then
    mine = [(block_id(g), g = first_block(nranks) - 1, 0, -1)]
    mine = pack(mine, mod(mine, 3_int64) == rank)
    deallocate (blk, pieces, bid)
    allocate (blk(size(mine)), pieces(size(mine)), bid(size(mine)))
    do k = 1, size(mine)
      allocate (blk(k)%u(0:NX + 1, 0:NZ + 1, NV))
      call fill_block(blk(k)%u, -1_int64)
      pieces(k) = c_loc(blk(k)%u)
    end do
    bid = -1
    call ckpt_init(rt3, three, ierr, trim(yaml)); call ok3(ierr, "ckpt_init on 3 ranks")
    call ckpt_protect_scattered(rt3, "blocks", CKPT_F64, ROW, pieces, ierr, first=FIRST_CELL, alloc=ALLOC)
    call ok3(ierr, "protect_scattered new allocations on 3 ranks")
    call ckpt_protect_joined(rt3, "block_id", bid, ierr); call ok3(ierr, "protect_joined block_id on 3 ranks")
    call ckpt_set_restart_keys(rt3, "blocks", "block_id", mine, ierr); call ok3(ierr, "set_restart_keys blocks")
    call ckpt_set_restart_keys(rt3, "block_id", "block_id", mine, ierr); call ok3(ierr, "set_restart_keys ids")
    call ckpt_restart_step(rt3, 21_int64, ierr); call ok3(ierr, "restart 21 by key on 3 ranks")
    call expect(all(bid == mine), "the block ids restored by key on 3 ranks")
    wrong = 0
    do k = 1, size(mine)
      wrong = wrong + block_wrong(blk(k)%u, mine(k))
    end do
    call expect(wrong == 0, "blocks restored by key on 3 ranks: interiors equal, ghosts untouched")
    nmine = size(mine)
    call MPI_Allreduce(nmine, owned, 1, MPI_INTEGER8, MPI_SUM, three)
    call expect(owned == first_block(nranks), "the 3 ranks restored every block")
    call ckpt_finalize(rt3, ierr); call ok3(ierr, "finalize on 3 ranks")
    call MPI_Comm_free(three)
  end if
  call MPI_Barrier(MPI_COMM_WORLD)

  ! On 4 ranks: registered with no piece, then updated to the balanced share in one piece of `count` blocks
  ! back to back (rows last); the ids.
  call ckpt_init(rt, MPI_COMM_WORLD, ierr, trim(yaml)); call ok(ierr, "ckpt_init again")
  call ckpt_protect_scattered(rt, "blocks", CKPT_F64, ROW, [c_ptr ::], ierr, first=FIRST_CELL, alloc=ALLOC)
  call ok(ierr, "protect_scattered with no piece")
  call ckpt_joined_rows(rt, 21_int64, "blocks", nrows, first, count, ierr); call ok(ierr, "joined_rows blocks")
  call expect(nrows == first_block(nranks), "the stored blocks of every rank")
  allocate (slab(0:NX + 1, 0:NZ + 1, NV, count))
  do k = 1, int(count)
    call fill_block(slab(:, :, :, k), -1_int64)
  end do
  deallocate (bid)
  allocate (bid(count))
  bid = -1
  call ckpt_update_scattered(rt, "blocks", ROW, [c_loc(slab)], ierr, rows=[count], first=FIRST_CELL, alloc=ALLOC)
  call ok(ierr, "update_scattered to one piece of several blocks")
  call ckpt_protect_joined(rt, "block_id", bid, ierr); call ok(ierr, "protect_joined block_id")
  call ckpt_restart_step(rt, 21_int64, ierr); call ok(ierr, "restart 21 balanced")
  wrong = 0
  do k = 1, int(count)
    wrong = wrong + block_wrong(slab(:, :, :, k), block_id(first + k - 1))
    call expect(bid(k) == block_id(first + k - 1), "a block id of the balanced share")
  end do
  call expect(wrong == 0, "the balanced share restored into one piece: interiors equal, ghosts untouched")

  ! The refusals; the refused calls register nothing.
  call ckpt_protect_scattered(rt, "bad", CKPT_F64, [4_int64], [c_loc(big), c_null_ptr], ierr, rows=[1_int64, 2_int64])
  call expect(ierr == CKPT_INVALID_ARGUMENT, "a piece with rows and no memory is refused")
  call ckpt_error_message(rt, msg)
  call expect(index(msg, "piece 1 has 2 rows and a null pointer") > 0, "message names the piece: "//trim(msg))
  call ckpt_protect_scattered(rt, "bad", CKPT_F64, ROW, [c_loc(slab)], ierr, first=[1_int64, 1_int64], &
                              alloc=[6_int64, 5_int64])
  call expect(ierr == CKPT_INVALID_ARGUMENT, "a selection of another rank than the row is refused")
  call ckpt_error_message(rt, msg)
  call expect(index(msg, "one entry per entry of row") > 0 .and. index(msg, "'bad'") > 0, "message: "//trim(msg))
  call ckpt_protect_scattered(rt, "bad", CKPT_F64, ROW, [c_loc(slab)], ierr, first=FIRST_CELL)
  call expect(ierr == CKPT_INVALID_ARGUMENT, "first without alloc is refused")
  call ckpt_protect_scattered(rt, "bad", CKPT_F64, ROW, [c_loc(slab)], ierr, first=[3_int64, 1_int64, 0_int64], &
                              alloc=ALLOC)
  call expect(ierr == CKPT_INVALID_ARGUMENT, "a box past the allocation is refused")
  call ckpt_error_message(rt, msg)
  call expect(index(msg, "memory selection") > 0, "message: "//trim(msg))
  call ckpt_protect_scattered(rt, "bad", CKPT_F64, [4_int64, -3_int64], [c_loc(slab)], ierr)
  call expect(ierr == CKPT_INVALID_ARGUMENT, "a negative row extent is refused")
  call ckpt_error_message(rt, msg)
  call expect(index(msg, "row(2) = -3 is negative") > 0, "message names row(2): "//trim(msg))
  call ckpt_protect_scattered(rt, "bad", CKPT_F64, [4_int64], [c_loc(slab)], ierr, rows=[-1_int64])
  call expect(ierr == CKPT_INVALID_ARGUMENT, "a negative row count is refused")
  call ckpt_protect_scattered(rt, "bad", CKPT_F64, [4_int64], [c_loc(slab)], ierr, rows=[1_int64, 1_int64])
  call expect(ierr == CKPT_INVALID_ARGUMENT, "rows of another size than pieces is refused")
  call ckpt_update_scattered(rt, "blocks", [int(NX, int64), int(NZ, int64)], [c_loc(slab)], ierr, rows=[count])
  call expect(ierr == CKPT_INVALID_ARGUMENT, "other row extents are refused")
  call ckpt_update_scattered(rt, "nothing", ROW, [c_loc(slab)], ierr)
  call expect(ierr == CKPT_NOT_FOUND, "update_scattered of an unknown name")
  call ckpt_protect_scattered(rt, "bad", CKPT_F64, [4_int64], [c_loc(big)], ierr)
  call ok(ierr, "protect_scattered after the refusals (nothing was registered)")
  call ckpt_unprotect(rt, "bad", ierr); call ok(ierr, "unprotect bad")
  ! The refusals changed nothing: the slab restores again.
  slab = GHOST
  call ckpt_restart_step(rt, 21_int64, ierr); call ok(ierr, "restart 21 after the refusals")
  wrong = 0
  do k = 1, int(count)
    wrong = wrong + block_wrong(slab(:, :, :, k), block_id(first + k - 1))
  end do
  call expect(wrong == 0, "the slab restored after the refusals")
  call ckpt_unprotect(rt, "blocks", ierr); call ok(ierr, "unprotect blocks")
  call ckpt_unprotect(rt, "block_id", ierr); call ok(ierr, "unprotect block_id")
  deallocate (slab, bid, blk, pieces)
  if (allocated(mine)) deallocate (mine)

  ! ---- finalize, then use after finalize ----
  call ckpt_finalize(rt, ierr); call ok(ierr, "finalize")
  call ckpt_checkpoint(rt, 3_int64, ierr)
  call expect(ierr /= CKPT_OK, "checkpoint after finalize fails")
  call ckpt_finalize(rt, ierr)
  call expect(ierr /= CKPT_OK, "finalize twice fails")

  call MPI_Allreduce(failures, total, 1, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD)
  if (rank == 0) write (*, '(a,i0,a,i0,a)') "fortran_api: ", total, " failed checks over ", nranks, " ranks"
  call MPI_Finalize()
  if (total /= 0) error stop 1

contains

  subroutine fill(k)
    integer, intent(in) :: k
    s_r32 = 0.25 * k; s_r64 = 1.5_real64 * k; s_i32 = 3 * k + rank; s_i64 = -5_int64 * k
    a_r32 = reshape([(real(i * k + rank, real32), i = 1, size(a_r32))], shape(a_r32))
    a_r64 = [(real(i, real64) / 3 * k, i = 1, size(a_r64))]
    a_i32 = reshape([(i * 11 * k - rank, i = 1, size(a_i32))], shape(a_i32))
    a_i64 = reshape([(int(i, int64) * 2_int64**40 * k, i = 1, size(a_i64))], shape(a_i64))
    box = reshape([(real(i + 100 * rank, real64) * k, i = 1, size(box))], shape(box))
  end subroutine fill

  logical function same(k)
    integer, intent(in) :: k
    real(real32) :: c_r32(5, 4, 3, 2), cs_r32
    real(real64) :: c_r64(7), c_box(4, 3, 2), cs_r64
    integer(int32) :: c_i32(3, 4), cs_i32
    integer(int64) :: c_i64(2, 3, 4), cs_i64
    cs_r32 = s_r32; cs_r64 = s_r64; cs_i32 = s_i32; cs_i64 = s_i64
    c_r32 = a_r32; c_r64 = a_r64; c_i32 = a_i32; c_i64 = a_i64; c_box = box
    call fill(k)
    same = cs_r32 == s_r32 .and. cs_r64 == s_r64 .and. cs_i32 == s_i32 .and. cs_i64 == s_i64 .and. &
           all(c_r32 == a_r32) .and. all(c_r64 == a_r64) .and. all(c_i32 == a_i32) .and. all(c_i64 == a_i64) .and. &
           all(c_box == box)
  end function same

  !> Block g's id (distinct for g < 101, not in the order of g).
  integer(int64) function block_id(g)
    integer(int64), intent(in) :: g
    block_id = 500_int64 + mod(29_int64 * g, 101_int64) * 2
  end function block_id

  !> The first block of rank r of the writing job (rank r holds r + 2 of them); first_block(nranks): all.
  integer(int64) function first_block(r)
    integer, intent(in) :: r
    first_block = int(r, int64) * (r + 3) / 2
  end function first_block

  !> The interior cell u(x, z, v) of block id: id * 1000 + its index in C order [v][z][x].
  real(real64) function cell(id, x, z, v)
    integer(int64), intent(in) :: id
    integer, intent(in) :: x, z, v
    cell = real(id, real64) * 1000 + ((v - 1) * NZ + z - 1) * NX + x - 1
  end function cell

  !> GHOST everywhere, then block id's cells in the interior (id < 0: GHOST only, a block to restart into).
  subroutine fill_block(u, id)
    real(real64), intent(out) :: u(0:, 0:, :)
    integer(int64), intent(in) :: id
    integer :: x, z, v
    u = GHOST
    if (id < 0) return
    do v = 1, NV
      do z = 1, NZ
        do x = 1, NX
          u(x, z, v) = cell(id, x, z, v)
        end do
      end do
    end do
  end subroutine fill_block

  !> The cells of u that differ from block id (interior) or from GHOST (the ghost layer).
  integer function block_wrong(u, id)
    real(real64), intent(in) :: u(0:, 0:, :)
    integer(int64), intent(in) :: id
    integer :: x, z, v
    real(real64) :: want
    block_wrong = 0
    do v = 1, NV
      do z = 0, NZ + 1
        do x = 0, NX + 1
          want = GHOST
          if (x >= 1 .and. x <= NX .and. z >= 1 .and. z <= NZ) want = cell(id, x, z, v)
          if (u(x, z, v) /= want) block_wrong = block_wrong + 1
        end do
      end do
    end do
  end function block_wrong

  subroutine ok3(code, what)
    integer, intent(in) :: code
    character(len=*), intent(in) :: what
    character(len=1024) :: m
    if (code == CKPT_OK) return
    call ckpt_error_message(rt3, m)
    call expect(.false., what//": "//trim(m))
  end subroutine ok3

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

end program test_fortran_api
