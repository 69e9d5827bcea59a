/*
 * The registry of a recording or replay (trace.h): which processes of the
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
 * Maps the regular file at `path`, owned by this user, whole (shared and
 * writable, or private and read-only); NULL if it cannot be, or is shorter
 * than `minimum` bytes. Raw system calls only: no errno, no interposed entry points.
 */
void *tc_trace_map_file(const char *path, int writable, uint64_t minimum, uint64_t *size);
/* This process's arguments, each ending in NUL, as much as fits in `size`; returns their length. */
uint32_t tc_trace_own_arguments(char *buffer, size_t size);

#endif
