/*
 * The interpreter that scripts/with-aarch64-binfmt.sh registers for aarch64
 * programs: runs qemu-aarch64 (QEMU, default /usr/bin/qemu-aarch64) on the
 * program, with this process's LD_PRELOAD given to the guest only (qemu's
 * -E) and taken out of qemu's own environment. qemu-user is a dynamically
 * linked program of the host: its own loader would try to preload the
 * aarch64 shim and print an error at every exec. Built static, so that
 * nothing loads before it either. The guest's library prefix is
 * QEMU_LD_PREFIX, which qemu reads itself.
 *   qemu_guest_preload PROGRAM [ARGUMENT...]        (as binfmt_misc runs it)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: qemu_guest_preload PROGRAM [ARGUMENT...]\n");
        return 2;
    }
    const char *qemu = getenv("QEMU") ? getenv("QEMU") : "/usr/bin/qemu-aarch64";
    const char *preload = getenv("LD_PRELOAD");
    static char setting[8192];
    char *arguments[argc + 4];
    int count = 0;
    arguments[count++] = (char *)qemu;
    if (preload && *preload) {
        if (snprintf(setting, sizeof setting, "LD_PRELOAD=%s", preload) >= (int)sizeof setting || strchr(preload, ',')) {
            fprintf(stderr, "qemu_guest_preload: LD_PRELOAD is too long, or has a comma, for qemu's -E\n");
            return 126;
        }
        arguments[count++] = "-E";
        arguments[count++] = setting;
        unsetenv("LD_PRELOAD");
    }
    for (int i = 1; i < argc; i++) arguments[count++] = argv[i];
    arguments[count] = NULL;
    execv(qemu, arguments);
    perror(qemu);
    return 127;
}
