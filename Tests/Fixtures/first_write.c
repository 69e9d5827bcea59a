/*
 * Writes a new file as its first act and prints its mtime in seconds, as
 * fstat sees it on the open descriptor and as stat sees it by path:
 *   first_write PATH
 * Run as a session's command, the write lands in the session's first
 * milliseconds, when the kernel's coarse file-time clock may still read a
 * real instant from before the session began.
 */
#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

int main(int argc, char **argv) {
    if (argc != 2) return 2;
    int fd = open(argv[1], O_CREAT | O_WRONLY | O_TRUNC, 0644);
    if (fd < 0 || write(fd, "x", 1) != 1) return 1;
    struct stat by_descriptor, by_path;
    if (fstat(fd, &by_descriptor) != 0 || stat(argv[1], &by_path) != 0) return 1;
    printf("%lld %lld\n", (long long)by_descriptor.st_mtime, (long long)by_path.st_mtime);
    return close(fd);
}
