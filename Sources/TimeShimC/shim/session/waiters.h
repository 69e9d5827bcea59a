/*
 * Waiters the helper thread wakes after each verb, and the helper thread
 * itself (waiters.c): a thread waiting on descriptors or a condition
 * variable cannot watch the segment's generation futex, so the process's
 * helper, blocked on it, writes their wake eventfds or broadcasts their
 * condvars. The helper also fires the process's virtual timers, through
 * the function the layer above hands it (tc_helper_set_timers): the timers
 * are calls/timers.c's, above this layer.
 */
#ifndef TIMECTL_WAITERS_H
#define TIMECTL_WAITERS_H

#include "../runtime/process.h"
#include "wait.h"

#include <pthread.h>

/*
 * Registers the calling thread as waiting on file descriptors until
 * tc_waiter_leave(); returns its wake eventfd, which turns readable after
 * every verb, or −1 (no eventfd, or too many waiters): the caller then
 * waits in slices of TC_SLICE_NS.
 */
int tc_waiter_enter_fd(void);
/* Registers the calling thread as waiting on `cond` (holding `mutex`) until
   `wait` is due (its deadline passed, and no seeded scheduler holds it); 0, or −1 (too many waiters: then slices). */
int tc_waiter_enter_cond(pthread_cond_t *cond, pthread_mutex_t *mutex, const struct tc_wait *wait);
/* The rate the calling condition waiter's current real timeout was worked out for. */
void tc_waiter_set_rate(uint64_t rate);
/* Whether the helper woke the calling condition waiter because its deadline came. */
int tc_waiter_woken_at_deadline(void);
/* Ends the registration an enter call made (only one that succeeded: a
   wait in a signal handler nests inside the thread's outer wait). */
void tc_waiter_leave(void);
/* For pthread_cleanup_push: tc_waiter_leave() if *(volatile int *)entered. */
void tc_waiter_leave_cleanup(void *entered);
/* Empties a wake eventfd after it woke its thread. */
void tc_waiter_drain(int wake_fd);

/* dup2/dup3 is about to replace `fd`, one of the shim's wake eventfds: stop using it. */
void tc_wake_fd_taken(int fd);
/* Tells the helper thread that the process's timers changed (starting it if needed). */
void tc_helper_poke(void);

/* What the helper calls after each verb and when its timeout comes: fires due virtual timers; returns real ns
   until the next one, or TC_FOREVER. Handed by attach/attach.c before the process counts as attached. */
void tc_helper_set_timers(int64_t (*fire_due)(struct tc_segment *segment));

/* In a fork child (attach/attach.c): the parent's helper, waiters and wake eventfds are not the child's. */
void tc_waiters_after_fork_in_child(void);

#endif
