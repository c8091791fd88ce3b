/*
 * not_mpi: a plain program with no MPI at all (built with cc, not mpicc).
 * Used to check that an LD_PRELOAD'ed MPI tool leaves such processes alone:
 * the output and the exit status must be the same with and without it.
 *
 * usage: not_mpi [N]     (default 100)
 * Output: deterministic lines.
 */
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
    long n = argc > 1 ? strtol(argv[1], NULL, 10) : 100;
    long long sum = 0, squares = 0;
    for (long i = 1; i <= n; i++) {
        sum += i;
        squares += (long long)i * i;
    }
    printf("not_mpi: n=%ld sum=%lld sum_of_squares=%lld\n", n, sum, squares);
    return 0;
}
