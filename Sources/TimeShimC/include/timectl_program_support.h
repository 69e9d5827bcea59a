/*
 * Which kinds of program the shim can put on the session's timeline besides
 * ordinary dynamically linked ones (docs/go-and-static.md). The single
 * check that decides the kind of a program consults this before refusing
 * one.
 */
#ifndef TIMECTL_PROGRAM_SUPPORT_H
#define TIMECTL_PROGRAM_SUPPORT_H

/*
 * Dynamically linked Go programs (cgo, `net`, -linkmode=external): the shim
 * redirects their vDSO clock reads and traps their raw timed waits
 * (shim/attach/vdso_redirect.c, shim/trap/syscall_trap.c). Built for x86-64
 * and aarch64 (on aarch64 not verified: qemu-user, where it is tested, has
 * neither a vDSO nor seccomp, docs/limits.md). A process in which that
 * setup fails refuses itself at start (SPEC §7).
 */
static inline int tc_shim_controls_go(void) {
#if (defined(__x86_64__) || defined(__aarch64__)) && defined(__linux__)
    return 1;
#else
    return 0;
#endif
}

/*
 * Statically linked programs (CGO_ENABLED=0 Go, static glibc C): they run
 * through timectl-static-loader, which lives beside libTimeShim.so, maps
 * the program itself and hands it to the shim (loader/static_loader.c,
 * shim/attach/static_takeover.c). The same architectures, and the same
 * caveat.
 */
static inline int tc_shim_controls_static(void) { return tc_shim_controls_go(); }

#endif
