/*
 * One table for system calls made without libc's wrappers (SPEC §3). Two
 * doors lead into it: libc's syscall() (Rust's std, tokio, the BEAM and
 * libstdc++ wait through it) and the SIGSYS trap of Go and static programs
 * (trap/syscall_trap.c). Each entry names the doors it serves, so any difference
 * in what the two cover is written in the table; a number with no entry for
 * a door goes to the kernel unchanged.
 */
#ifndef TIMECTL_SYSCALL_TABLE_H
#define TIMECTL_SYSCALL_TABLE_H

enum tc_door {
    TC_DOOR_SYSCALL = 1, /* libc's syscall() */
    TC_DOOR_TRAP = 2,    /* a raw call trapped by the seccomp filter */
};

struct tc_syscall {
    long number;
    long arg[6];
    int door;
    /* Made by the Go runtime (a trapped Go program): its short relative waits are back-offs (see the table). */
    int go_runtime;
    /* The trap's ucontext_t (what rt_sigreturn restores), NULL through syscall(). */
    void *context;
};

/* The kernel's answer for `call`: a value, or −errno. */
long tc_syscall_dispatch(const struct tc_syscall *call);

#endif
