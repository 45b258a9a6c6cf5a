!> heat3d: explicit 3D heat diffusion (7-point stencil, zero Dirichlet boundary) on a block
!> decomposition (MPI_Cart_create, halo exchange with MPI_Sendrecv), checkpointed every K steps through
!> the Fortran API of ckpt. The field is registered as this rank's box of the global array, so a
!> checkpoint restarts on any rank count; the update of a cell does not depend on the decomposition,
!> so every run, interrupted or not, on any rank count, ends with the same bits.
!>
!>   mpiexec -n 4 heat3d --n 48 40 36 --steps 200 --every 10 --out final.bin     (CKPT_DIR=... picks the directory)
!>   (kill it)  mpiexec -n 3 heat3d --n 48 40 36 --steps 200 --every 10 --restart --out final.bin
!>
!> Options: --n NX NY NZ  global cells; --steps N  last step; --every K  checkpoint period;
!> --stop M  stop after step M (a checkpoint is taken there); --restart  continue from the newest
!> checkpoint that verifies; --config FILE  ckpt YAML options; --out FILE  rank 0 writes the final
!> global field there (raw float64, Fortran order = C order [nz][ny][nx]); --sleep-us U  pause per step.
!> Prints `restored: step S` after a restart and `state: <checksum>` at the end.
program heat3d
  use, intrinsic :: iso_fortran_env, only: int64, real64, error_unit, output_unit
  use, intrinsic :: iso_c_binding, only: c_int
  use mpi_f08
  use ckpt
  implicit none

  interface
    function usleep(us) bind(C, name="usleep") result(rc)
      import :: c_int
      integer(c_int), value :: us
      integer(c_int) :: rc
    end function usleep
  end interface

  real(real64), parameter :: alpha = 0.125_real64  ! dt / dx^2, stable below 1/6
  integer :: n(3) = [40, 36, 32]
  integer(int64) :: steps = 100, every = 10, stop_at = -1, restored
  integer(int64), target :: step = 0  ! checkpointed: target, read by ckpt through its address
  integer :: sleep_us = 0
  logical :: restart = .false.
  character(len=512) :: config = "", out = ""

  type(MPI_Comm) :: cart
  type(ckpt_runtime) :: rt
  integer :: provided, rank, nranks, ierr, dims(3), coords(3), lo(3), cnt(3), nb_lo(3), nb_hi(3), d
  real(real64), allocatable, target :: u(:, :, :)  ! the state: this rank's box, contiguous
  real(real64), allocatable :: w(:, :, :)          ! work copy with one ghost layer
  character(len=1024) :: msg

  call MPI_Init_thread(MPI_THREAD_MULTIPLE, provided)
  call MPI_Comm_rank(MPI_COMM_WORLD, rank)
  call MPI_Comm_size(MPI_COMM_WORLD, nranks)
  call parse_args()

  ! Block decomposition: a 3D Cartesian grid of ranks, the remainder cells go to the first ranks.
  dims = 0
  call MPI_Dims_create(nranks, 3, dims)
  call MPI_Cart_create(MPI_COMM_WORLD, 3, dims, [.false., .false., .false.], .false., cart)
  call MPI_Comm_rank(cart, rank)
  call MPI_Cart_coords(cart, rank, 3, coords)
  do d = 1, 3
    cnt(d) = n(d) / dims(d) + merge(1, 0, coords(d) < mod(n(d), dims(d)))
    lo(d) = coords(d) * (n(d) / dims(d)) + min(coords(d), mod(n(d), dims(d)))  ! 0-based
    call MPI_Cart_shift(cart, d - 1, 1, nb_lo(d), nb_hi(d))
  end do
  if (any(cnt < 1)) call fail("too many ranks for the grid: every rank needs at least one cell per dimension")
  allocate (u(cnt(1), cnt(2), cnt(3)), w(0:cnt(1) + 1, 0:cnt(2) + 1, 0:cnt(3) + 1))
  call initial_field()
  step = 0

  ! Checkpointed state: the field (a box of the global array) and the step.
  call ckpt_init(rt, cart, ierr, config)
  call check(ierr, "ckpt_init")
  call ckpt_protect(rt, "u", u, int(n, int64), int(lo, int64), ierr)
  call check(ierr, "ckpt_protect u")
  call ckpt_protect(rt, "step", step, ierr)
  call check(ierr, "ckpt_protect step")

  if (restart) then
    call ckpt_restart(rt, restored, ierr)
    call check(ierr, "ckpt_restart")
    if (restored /= step) call fail("the restored step variable differs from the checkpoint's step")
    if (rank == 0) write (output_unit, '(a,i0,a,i0,a)') "restored: step ", step, " on ", nranks, " ranks"
  end if

  do while (step < steps)
    step = step + 1
    call advance()
    if (sleep_us > 0) ierr = usleep(int(sleep_us, c_int))
    if (mod(step, every) == 0 .or. step == stop_at) then
      call ckpt_checkpoint(rt, step, ierr)  ! returns once u is captured; written in the background
      call check(ierr, "ckpt_checkpoint")
    end if
    if (step == stop_at) exit
  end do

  call ckpt_wait_all(rt, ierr)
  call check(ierr, "ckpt_wait_all")
  call report()
  call ckpt_finalize(rt, ierr)
  call check(ierr, "ckpt_finalize")
  call MPI_Comm_free(cart)
  call MPI_Finalize()

contains

  subroutine parse_args()
    integer :: i, nargs
    character(len=512) :: a
    nargs = command_argument_count()
    i = 1
    do while (i <= nargs)
      call get_command_argument(i, a)
      select case (trim(a))
      case ("--n")
        n(1) = int_arg(i + 1); n(2) = int_arg(i + 2); n(3) = int_arg(i + 3); i = i + 3
      case ("--steps")
        steps = int_arg(i + 1); i = i + 1
      case ("--every")
        every = int_arg(i + 1); i = i + 1
      case ("--stop")
        stop_at = int_arg(i + 1); i = i + 1
      case ("--sleep-us")
        sleep_us = int_arg(i + 1); i = i + 1
      case ("--restart")
        restart = .true.
      case ("--config")
        call get_command_argument(i + 1, config); i = i + 1
      case ("--out")
        call get_command_argument(i + 1, out); i = i + 1
      case default
        call fail("unknown argument '"//trim(a)//"' (see the header of heat3d.f90)")
      end select
      i = i + 1
    end do
    if (any(n < 1) .or. every < 1 .or. steps < 0) call fail("need --n >= 1, --every >= 1, --steps >= 0")
  end subroutine parse_args

  integer function int_arg(i)
    integer, intent(in) :: i
    character(len=64) :: a
    integer :: st
    call get_command_argument(i, a)
    read (a, *, iostat=st) int_arg
    if (st /= 0) call fail("expected an integer, got '"//trim(a)//"'")
  end function int_arg

  !> A smooth bump plus a pattern that depends on the global index only.
  subroutine initial_field()
    integer :: i, j, k, gi, gj, gk
    real(real64) :: x, y, z
    do k = 1, cnt(3)
      do j = 1, cnt(2)
        do i = 1, cnt(1)
          gi = lo(1) + i; gj = lo(2) + j; gk = lo(3) + k
          x = real(gi, real64) / (n(1) + 1); y = real(gj, real64) / (n(2) + 1); z = real(gk, real64) / (n(3) + 1)
          u(i, j, k) = 100 * x * (1 - x) * y * (1 - y) * z * (1 - z) + 0.001_real64 * mod(gi * 7 + gj * 13 + gk * 31, 17)
        end do
      end do
    end do
  end subroutine initial_field

  !> One explicit step: fill w (interior from u, ghosts from the neighbours, 0 at the boundary), then
  !> u = w + alpha * (sum of the 6 neighbours - 6 w), the same arithmetic for every cell.
  subroutine advance()
    integer :: i, j, k
    w = 0
    w(1:cnt(1), 1:cnt(2), 1:cnt(3)) = u
    call exchange_halo()
    do k = 1, cnt(3)
      do j = 1, cnt(2)
        do i = 1, cnt(1)
          u(i, j, k) = w(i, j, k) + alpha * (((w(i - 1, j, k) + w(i + 1, j, k)) + (w(i, j - 1, k) + w(i, j + 1, k)) + &
                                              (w(i, j, k - 1) + w(i, j, k + 1))) - 6 * w(i, j, k))
        end do
      end do
    end do
  end subroutine advance

  !> Faces to the neighbours with MPI_Sendrecv (packed into contiguous buffers); a missing neighbour
  !> (MPI_PROC_NULL, the domain boundary) leaves the ghost layer at 0.
  subroutine exchange_halo()
    real(real64), allocatable :: s(:, :), r(:, :)
    integer :: lx, ly, lz
    lx = cnt(1); ly = cnt(2); lz = cnt(3)
    ! x faces
    allocate (s(ly, lz), r(ly, lz))
    s = w(lx, 1:ly, 1:lz)
    call sendrecv(s, r, nb_hi(1), nb_lo(1))
    if (nb_lo(1) /= MPI_PROC_NULL) w(0, 1:ly, 1:lz) = r
    s = w(1, 1:ly, 1:lz)
    call sendrecv(s, r, nb_lo(1), nb_hi(1))
    if (nb_hi(1) /= MPI_PROC_NULL) w(lx + 1, 1:ly, 1:lz) = r
    deallocate (s, r)
    ! y faces
    allocate (s(lx, lz), r(lx, lz))
    s = w(1:lx, ly, 1:lz)
    call sendrecv(s, r, nb_hi(2), nb_lo(2))
    if (nb_lo(2) /= MPI_PROC_NULL) w(1:lx, 0, 1:lz) = r
    s = w(1:lx, 1, 1:lz)
    call sendrecv(s, r, nb_lo(2), nb_hi(2))
    if (nb_hi(2) /= MPI_PROC_NULL) w(1:lx, ly + 1, 1:lz) = r
    deallocate (s, r)
    ! z faces
    allocate (s(lx, ly), r(lx, ly))
    s = w(1:lx, 1:ly, lz)
    call sendrecv(s, r, nb_hi(3), nb_lo(3))
    if (nb_lo(3) /= MPI_PROC_NULL) w(1:lx, 1:ly, 0) = r
    s = w(1:lx, 1:ly, 1)
    call sendrecv(s, r, nb_lo(3), nb_hi(3))
    if (nb_hi(3) /= MPI_PROC_NULL) w(1:lx, 1:ly, lz + 1) = r
  end subroutine exchange_halo

  subroutine sendrecv(s, r, dest, source)
    real(real64), intent(in) :: s(:, :)
    real(real64), intent(inout) :: r(:, :)
    integer, intent(in) :: dest, source
    call MPI_Sendrecv(s, size(s), MPI_DOUBLE_PRECISION, dest, 0, r, size(r), MPI_DOUBLE_PRECISION, source, 0, cart, &
                      MPI_STATUS_IGNORE)
  end subroutine sendrecv

  !> Rank 0 gathers the global field in Fortran order, prints a checksum of its bits (the same on every
  !> rank count) and writes it to --out.
  subroutine report()
    real(real64), allocatable :: g(:, :, :), flat(:)
    integer, allocatable :: boxes(:, :), counts(:), displs(:)
    integer :: box(6), p, off, unit, i, j, k
    integer(int64) :: h1, h2, bits
    box = [lo, cnt]
    allocate (boxes(6, nranks), counts(nranks), displs(nranks))
    call MPI_Gather(box, 6, MPI_INTEGER, boxes, 6, MPI_INTEGER, 0, cart)
    counts = product(boxes(4:6, :), dim=1)
    displs(1) = 0
    do p = 2, nranks
      displs(p) = displs(p - 1) + counts(p - 1)
    end do
    allocate (flat(sum(counts)))
    call MPI_Gatherv(u, size(u), MPI_DOUBLE_PRECISION, flat, counts, displs, MPI_DOUBLE_PRECISION, 0, cart)
    if (rank /= 0) return
    allocate (g(n(1), n(2), n(3)))
    do p = 1, nranks
      off = displs(p)
      do k = 1, boxes(6, p)
        do j = 1, boxes(5, p)
          do i = 1, boxes(4, p)
            off = off + 1
            g(boxes(1, p) + i, boxes(2, p) + j, boxes(3, p) + k) = flat(off)
          end do
        end do
      end do
    end do
    ! Two checksums of the bit patterns modulo the prime 2^31 - 1 (no integer overflow).
    h1 = 1; h2 = 7
    do k = 1, n(3)
      do j = 1, n(2)
        do i = 1, n(1)
          bits = transfer(g(i, j, k), bits)
          h1 = mod(h1 * 31 + ibits(bits, 0, 31), 2147483647_int64)
          h2 = mod(h2 * 37 + ibits(bits, 31, 31), 2147483647_int64)
        end do
      end do
    end do
    write (output_unit, '(a,i0,a,i0,a,es24.16)') "heat3d: step ", step, " on ", nranks, " ranks, max ", maxval(g)
    write (output_unit, '(a,z8.8,z8.8)') "state: ", h1, h2
    if (len_trim(out) > 0) then
      open (newunit=unit, file=trim(out), access="stream", form="unformatted", status="replace", action="write")
      write (unit) g
      close (unit)
    end if
  end subroutine report

  subroutine check(code, what)
    integer, intent(in) :: code
    character(len=*), intent(in) :: what
    if (code == CKPT_OK) return
    call ckpt_error_message(rt, msg)
    call fail(what//": "//trim(msg))
  end subroutine check

  subroutine fail(why)
    character(len=*), intent(in) :: why
    write (error_unit, '(a,i0,a,a)') "heat3d: rank ", rank, ": ", why
    call MPI_Abort(MPI_COMM_WORLD, 1)
    stop 1
  end subroutine fail

end program heat3d
