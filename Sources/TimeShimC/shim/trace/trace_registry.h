/*
 * The registry of a recording or replay (trace_dispatch.h): which processes of the
 * run are known, where each sits in the process tree, and the numbering of
 * each process's threads. The registry file's layout is timectl_trace.h's.
 * Shared by the recording (trace_recording.c) and replay (trace_replay.c)
 * halves; implemented in trace_registry.c.
 */
#ifndef TIMECTL_TRACE_REGISTRY_H
#define TIMECTL_TRACE_REGISTRY_H

#include "timectl_trace.h"

#include <stddef.h>
#include <stdint.h>

/* An entry index meaning "none": the registry was full, or the process has no parent in it. */
#define TC_NO_ENTRY UINT32_MAX

/* The mapped registry and its entries; NULL until tc_registry_map succeeds. */
extern struct tc_registry_header *tc_registry;
extern struct tc_registry_entry *tc_registry_entries;
/* This process's entry (TC_NO_ENTRY if it has none) and its image, counted from 1 (an exec adds one). */
extern uint32_t tc_registry_own_entry;
extern uint32_t tc_registry_own_image;

/* Maps the registry of the run's working `directory`; NULL, or a phrase saying what is wrong. */
const char *tc_registry_map(const char *directory);
/* Finds this process's entry (after an exec) or makes one as the next child of its parent's; 0, or −1 if full. */
int tc_registry_join(void);

/* Fork: the child's ordinal is taken in the parent, before the fork; the child then claims its entry with it. */
void tc_registry_before_fork(void);
void tc_registry_after_fork_in_child(void);

/* The calling thread's number in this process image: 0 for the main thread, else in the order of creation. */
uint32_t tc_trace_thread_number(void);

/*
 * A statically linked program's threads (attach/static_takeover.c) run on the
 * program's FS, not a TCB of the shim's libc, so the shim's __thread
 * variables are not theirs: their clock reads reach the shim through the
 * redirected vDSO with no TLS, their trapped calls on a borrowed TCB.
 * There, each per-thread part of the trace keeps its state in a slot of a
 * fixed table instead, one per thread, keyed by the thread's id and claimed
 * lock-free at its first event. Their threads are numbered in the order of
 * their first event (the shim does not see their creation): the main
 * thread is 0. A thread that finds no slot (the table is full, or it is in
 * a fork child that did not exec, where the parent's recording state is
 * not its own) gets −1, and its events are lost (counted).
 */
#define TC_STATIC_TRACE_THREADS 512
/* Whether per-thread trace state is kept in slots: a static program has taken over the process. */
int tc_trace_threads_in_slots(void);
/* The calling thread's slot, or −1. Async-signal-safe, allocation-free: raw system calls and atomics. */
int tc_trace_thread_slot(void);
/* The calling (main) thread's number moves to its slot. */
void tc_registry_static_program_begins(void);

/*
 * Maps the regular file at `path`, owned by this user, whole (shared and
 * writable, or private and read-only); NULL if it cannot be, or is shorter
 * than `minimum` bytes. Raw system calls only: no errno, no interposed entry points.
 */
void *tc_trace_map_file(const char *path, int writable, uint64_t minimum, uint64_t *size);
/* This process's arguments, each ending in NUL, as much as fits in `size`; returns their length. */
uint32_t tc_trace_own_arguments(char *buffer, size_t size);

#endif
