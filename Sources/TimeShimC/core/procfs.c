#define _GNU_SOURCE
#include "timectl_procfs.h"
#include "timectl_realclock.h"

#include <fcntl.h>
#include <string.h>
#include <sys/syscall.h>

uint64_t tc_proc_start_ticks(int32_t pid, char *state) {
    char path[32] = "/proc/", digits[12], buffer[1024];
    int count = 0;
    for (uint32_t rest = (uint32_t)pid; count == 0 || rest; rest /= 10) digits[count++] = (char)('0' + rest % 10);
    size_t at = strlen(path);
    while (count) path[at++] = digits[--count];
    memcpy(path + at, "/stat", 6);
    long fd = tc_raw_syscall(SYS_openat, AT_FDCWD, path, O_RDONLY | O_CLOEXEC, 0);
    if (fd < 0) return 0;
    long length = tc_raw_syscall(SYS_read, fd, buffer, sizeof(buffer) - 1);
    tc_raw_syscall(SYS_close, fd);
    if (length <= 0) return 0;
    buffer[length] = 0;
    /* The name (field 2) may hold spaces and parentheses: it ends at the last ')'. */
    const char *field = strrchr(buffer, ')');
    if (!field || field[1] != ' ' || !field[2]) return 0;
    if (state) *state = field[2];
    for (int n = 0; n < 20 && field; n++) field = strchr(field + 1, ' ');
    if (!field) return 0;
    uint64_t ticks = 0;
    for (field++; *field >= '0' && *field <= '9'; field++) ticks = ticks * 10 + (uint64_t)(*field - '0');
    return ticks;
}
