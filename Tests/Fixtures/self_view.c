/*
 * What a program sees of itself in /proc, as ps and its own code look:
 *   self_view [ARGUMENT...]
 * Prints "comm=NAME" (/proc/self/comm), "cmdline=A|B|..." (/proc/self/cmdline,
 * its NULs as '|'), "readlink=PATH" and "readlink_pid=PATH" (readlink of
 * /proc/self/exe and /proc/PID/exe), "realpath=PATH" (realpath of
 * /proc/self/exe), and "kernel_exe=program" when the file /proc/self/exe
 * opens is argv[0] itself (same device and inode), else "kernel_exe=other".
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static void print_file(const char *key, const char *path) {
    char text[4096];
    int fd = open(path, O_RDONLY);
    ssize_t length = fd < 0 ? -1 : read(fd, text, sizeof text - 1);
    if (fd >= 0) close(fd);
    if (length < 0) length = 0;
    for (ssize_t i = 0; i < length; i++)
        if (text[i] == 0) text[i] = '|';
    while (length > 0 && (text[length - 1] == '\n' || text[length - 1] == '|')) length--;
    text[length] = 0;
    printf("%s=%s\n", key, text);
}

static void print_link(const char *key, const char *path) {
    char target[PATH_MAX];
    ssize_t length = readlink(path, target, sizeof target - 1);
    target[length < 0 ? 0 : length] = 0;
    printf("%s=%s\n", key, target);
}

int main(int argc, char **argv) {
    (void)argc;
    print_file("comm", "/proc/self/comm");
    print_file("cmdline", "/proc/self/cmdline");
    print_link("readlink", "/proc/self/exe");
    char pid_exe[64];
    snprintf(pid_exe, sizeof pid_exe, "/proc/%d/exe", (int)getpid());
    print_link("readlink_pid", pid_exe);
    char resolved[PATH_MAX];
    printf("realpath=%s\n", realpath("/proc/self/exe", resolved) ? resolved : "");
    struct stat exe, program;
    int same = stat("/proc/self/exe", &exe) == 0 && stat(argv[0], &program) == 0 && exe.st_dev == program.st_dev &&
               exe.st_ino == program.st_ino;
    printf("kernel_exe=%s\n", same ? "program" : "other");
    return 0;
}
