! Uses only the installed module: checkpoint a box of a global array, restart it, check it.
program fortran_consumer
  use mpi_f08
  use ckpt
  use, intrinsic :: iso_fortran_env, only: int64, real64
  implicit none
  type(ckpt_runtime) :: rt
  real(real64), target :: a(10, 3)
  integer :: provided, rank, nranks, ierr, e(4)
  integer(int64) :: step
  integer(int64), allocatable :: steps(:)
  character(len=512) :: msg
  call MPI_Init_thread(MPI_THREAD_MULTIPLE, provided)
  call MPI_Comm_rank(MPI_COMM_WORLD, rank)
  call MPI_Comm_size(MPI_COMM_WORLD, nranks)
  a = 1.5_real64 + rank
  call ckpt_init(rt, MPI_COMM_WORLD, e(1))
  call ckpt_protect(rt, "a", a, [10_int64, 3_int64 * nranks], [0_int64, 3_int64 * rank], e(2))
  call ckpt_checkpoint(rt, 1_int64, e(3))
  call ckpt_wait_all(rt, e(4))
  a = 0
  call ckpt_restart(rt, step, ierr)
  if (ierr == CKPT_OK) call ckpt_steps(rt, steps, ierr)  ! the sizing procedures are in the module too
  if (.not. allocated(steps)) allocate (steps(0))
  if (any(e /= CKPT_OK) .or. ierr /= CKPT_OK .or. step /= 1 .or. any(a /= 1.5_real64 + rank) .or. &
      size(steps) /= 1) then
    call ckpt_error_message(rt, msg)
    print '(a,i0,a,a)', "fortran consumer: FAILED on rank ", rank, ": ", trim(msg)
    call MPI_Abort(MPI_COMM_WORLD, 1)
  end if
  call ckpt_finalize(rt, ierr)
  if (rank == 0) print '(a)', "fortran consumer: ok"
  call MPI_Finalize()
end program fortran_consumer
