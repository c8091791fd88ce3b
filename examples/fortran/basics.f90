! basics: the MPI basics from Fortran, so that a tool can show that it
! intercepts the Fortran bindings (MPI_INIT, MPI_INIT_THREAD, MPI_FINALIZE)
! as well as the C ones.
!
! Every iteration: MPI_COMM_SPLIT of MPI_COMM_WORLD into even and odd ranks,
! MPI_COMM_DUP of MPI_COMM_WORLD, a ring MPI_SENDRECV of 1 and of 16384
! integers (64 KiB) and an MPI_ALLREDUCE on each of the three communicators,
! then MPI_COMM_FREE of the two new ones.
!
! usage: basics [single|funneled|serialized|multiple] [ITERATIONS]
!   no level: MPI_INIT; a level: MPI_INIT_THREAD with that level.
!   ITERATIONS defaults to 3.
!
! Output (rank 0): deterministic lines that depend only on the arguments and
! the number of ranks. A provided thread level lower than requested is
! reported on stderr (unit 0).
program basics
  use mpi
  implicit none

  integer, parameter :: big = 16384
  integer :: ierr, rank, nranks, provided, required, iter, iterations, i, nargs
  integer :: split, dup, color
  integer :: sendbuf(big), recvbuf(big)
  integer(kind=8) :: acc(4), total(4), mine, reduced
  character(len=32) :: arg, init_name
  logical :: use_thread
  integer :: istat

  use_thread = .false.
  provided = MPI_THREAD_SINGLE
  required = MPI_THREAD_SINGLE
  init_name = 'MPI_INIT'
  iterations = 3
  nargs = command_argument_count()
  do i = 1, nargs
    call get_command_argument(i, arg)
    select case (trim(arg))
    case ('single')
      use_thread = .true.
      required = MPI_THREAD_SINGLE
      init_name = 'MPI_INIT_THREAD(single)'
    case ('funneled')
      use_thread = .true.
      required = MPI_THREAD_FUNNELED
      init_name = 'MPI_INIT_THREAD(funneled)'
    case ('serialized')
      use_thread = .true.
      required = MPI_THREAD_SERIALIZED
      init_name = 'MPI_INIT_THREAD(serialized)'
    case ('multiple')
      use_thread = .true.
      required = MPI_THREAD_MULTIPLE
      init_name = 'MPI_INIT_THREAD(multiple)'
    case default
      read (arg, *, iostat=istat) iterations
      if (istat /= 0 .or. iterations < 1) then
        write (0, '(a)') 'usage: basics [single|funneled|serialized|multiple] [ITERATIONS]'
        stop 2
      end if
    end select
  end do

  if (use_thread) then
    call MPI_INIT_THREAD(required, provided, ierr)
  else
    call MPI_INIT(ierr)
  end if
  call check(ierr, 'MPI_INIT')
  call MPI_COMM_RANK(MPI_COMM_WORLD, rank, ierr)
  call MPI_COMM_SIZE(MPI_COMM_WORLD, nranks, ierr)
  if (use_thread .and. provided < required .and. rank == 0) then
    write (0, '(a,i0,a,i0)') 'basics: asked for thread level ', required, &
      ', the library provides ', provided
  end if

  acc = 0
  do iter = 0, iterations - 1
    color = mod(rank, 2)
    call MPI_COMM_SPLIT(MPI_COMM_WORLD, color, nranks - rank, split, ierr)
    call check(ierr, 'MPI_COMM_SPLIT')
    call MPI_COMM_DUP(MPI_COMM_WORLD, dup, ierr)
    call check(ierr, 'MPI_COMM_DUP')

    acc(1) = acc(1) + ring(MPI_COMM_WORLD, iter)
    acc(2) = acc(2) + ring(split, iter)
    acc(3) = acc(3) + ring(dup, iter)
    acc(4) = acc(4) + allred(MPI_COMM_WORLD, iter) + allred(split, iter) + allred(dup, iter)

    call MPI_COMM_FREE(dup, ierr)
    call check(ierr, 'MPI_COMM_FREE')
    call MPI_COMM_FREE(split, ierr)
    call check(ierr, 'MPI_COMM_FREE')
  end do

  call MPI_REDUCE(acc, total, 4, MPI_INTEGER8, MPI_SUM, 0, MPI_COMM_WORLD, ierr)
  call check(ierr, 'MPI_REDUCE')
  if (rank == 0) then
    write (*, '(a,i0,a,a,a,i0)') 'basics: ranks=', nranks, ' init=', trim(init_name), &
      ' iterations=', iterations
    write (*, '(a,i0)') 'ring_world=', total(1)
    write (*, '(a,i0)') 'ring_split=', total(2)
    write (*, '(a,i0)') 'ring_dup=', total(3)
    write (*, '(a,i0)') 'allreduce=', total(4)
    flush (6)
  end if

  call MPI_FINALIZE(ierr)

contains

  subroutine check(code, what)
    integer, intent(in) :: code
    character(len=*), intent(in) :: what
    integer :: e
    if (code /= MPI_SUCCESS) then
      write (0, '(a,a,a,i0)') 'basics: ', what, ' failed with error ', code
      call MPI_ABORT(MPI_COMM_WORLD, 1, e)
    end if
  end subroutine check

  ! Ring exchange on comm (1 integer, then 16384): returns the sum of what
  ! this rank received.
  integer(kind=8) function ring(comm, it)
    integer, intent(in) :: comm, it
    integer :: r, n, right, left, k, s, e, counts(2)
    integer :: status(MPI_STATUS_SIZE)
    counts = (/ 1, big /)
    call MPI_COMM_RANK(comm, r, e)
    call MPI_COMM_SIZE(comm, n, e)
    right = mod(r + 1, n)
    left = mod(r + n - 1, n)
    ring = 0
    do s = 1, 2
      do k = 1, counts(s)
        sendbuf(k) = mod(r * 31 + k + it * 7 + s, 1000)
      end do
      call MPI_SENDRECV(sendbuf, counts(s), MPI_INTEGER, right, 100 + s, &
                        recvbuf, counts(s), MPI_INTEGER, left, 100 + s, comm, status, e)
      call check(e, 'MPI_SENDRECV')
      do k = 1, counts(s)
        ring = ring + recvbuf(k)
      end do
    end do
  end function ring

  ! Allreduce of (rank + 1) * (it + 1) on comm, counted by the comm's rank 0.
  integer(kind=8) function allred(comm, it)
    integer, intent(in) :: comm, it
    integer :: r, e
    call MPI_COMM_RANK(comm, r, e)
    mine = int(r + 1, 8) * int(it + 1, 8)
    call MPI_ALLREDUCE(mine, reduced, 1, MPI_INTEGER8, MPI_SUM, comm, e)
    call check(e, 'MPI_ALLREDUCE')
    allred = 0
    if (r == 0) allred = reduced
  end function allred

end program basics
