/*
 * Starts PROGRAM [ARGUMENT...] twice, by fork and execv and by posix_spawn,
 * and prints "forked=STATUS" and "spawned=STATUS" after each child has
 * exited: the tests start programs of one C library from another's, or
 * another architecture's, this way.
 */
#include <spawn.h>
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

static int status_of(pid_t child) {
    int status = 0;
    if (waitpid(child, &status, 0) != child) return -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: spawn_probe PROGRAM [ARGUMENT...]\n");
        return 2;
    }
    fflush(stdout);
    pid_t child = fork();
    if (child == 0) {
        execv(argv[1], argv + 1);
        perror("execv");
        _exit(127);
    }
    printf("forked=%d\n", status_of(child));
    fflush(stdout);
    int failed = posix_spawn(&child, argv[1], NULL, NULL, argv + 1, environ);
    if (failed) {
        printf("spawned=error:%d\n", failed);
        return 1;
    }
    printf("spawned=%d\n", status_of(child));
    return 0;
}
