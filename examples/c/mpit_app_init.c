/* An application that uses MPI_T itself at a thread level below
 * MPI_THREAD_MULTIPLE while it runs, as a tool of its own might: what the
 * tuner's helper thread, which uses MPI_T at the same time, must survive.
 *
 *   mpit_app_init ROUNDS
 *
 * Each round: MPI_T_init_thread(MPI_THREAD_SINGLE), the number of control
 * variables, the first one looked up by name (MPI_T_cvar_get_index); one
 * MPI_T_finalize per round at the end (MPICH 4.0.2 crashes in MPI_T after
 * MPI_T_finalize brought its count to zero and MPI_T_init_thread raised it
 * again, with or without a tool). Rank 0 prints the level the library
 * provided, how many lookups found their variable on every rank, and the
 * thread level MPI_Query_thread reports after MPI_Init, while MPI_T is
 * initialised and after the last MPI_T_finalize (Open MPI 4.1's first
 * MPI_T_init_thread sets the thread level of the whole process: a tool
 * that asked for more on the application's behalf would show there). */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

static const char *level_name(int level) {
    if (level == MPI_THREAD_SINGLE) return "single";
    if (level == MPI_THREAD_FUNNELED) return "funneled";
    if (level == MPI_THREAD_SERIALIZED) return "serialized";
    if (level == MPI_THREAD_MULTIPLE) return "multiple";
    return "unknown";
}

int main(int argc, char **argv) {
    int rank, rounds = argc > 1 ? atoi(argv[1]) : 100, provided = -1, found = 0, all;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    int inits = 0, level_init = -1, level_mpit = -1, level_after = -1;
    MPI_Query_thread(&level_init);
    for (int r = 0; r < rounds; r++) {
        int num = 0, index = -1, len = 256, verbosity, bind, scope;
        char name[256], desc[8];
        int dlen = sizeof(desc);
        MPI_Datatype type;
        MPI_T_enum en;
        if (MPI_T_init_thread(MPI_THREAD_SINGLE, &provided) != MPI_SUCCESS) break;
        inits++;
        if (MPI_T_cvar_get_num(&num) == MPI_SUCCESS && num > 0 &&
            MPI_T_cvar_get_info(0, name, &len, &verbosity, &type, &en, desc, &dlen, &bind,
                                &scope) == MPI_SUCCESS &&
            MPI_T_cvar_get_index(name, &index) == MPI_SUCCESS && index == 0)
            found++;
    }
    MPI_Query_thread(&level_mpit);
    while (inits-- > 0) MPI_T_finalize();
    MPI_Query_thread(&level_after);
    MPI_Reduce(&found, &all, 1, MPI_INT, MPI_MIN, 0, MPI_COMM_WORLD);
    if (rank == 0) {
        printf("mpit_app_init: provided %s\n", level_name(provided));
        printf("mpit_app_init: %d of %d lookups found their variable on every rank\n", all,
               rounds);
        printf("mpit_app_init: MPI_Query_thread %s after MPI_Init, %s with MPI_T, %s after\n",
               level_name(level_init), level_name(level_mpit), level_name(level_after));
    }
    MPI_Finalize();
    return 0;
}
