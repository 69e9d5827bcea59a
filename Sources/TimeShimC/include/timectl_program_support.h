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
 * (interpose/vdso_redirect.c, interpose/syscall_trap.c). x86-64 only. A
 * process in which that setup fails refuses itself at start (SPEC §7).
 * Statically linked Go (CGO_ENABLED=0) is not covered: it cannot load the shim.
 */
static inline int tc_shim_controls_go(void) {
#if defined(__x86_64__) && defined(__linux__)
    return 1;
#else
    return 0;
#endif
}

#endif
