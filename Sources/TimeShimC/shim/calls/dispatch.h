/*
 * libdispatch's worker-pool monitor on real time (dispatch.c).
 */
#ifndef TIMECTL_DISPATCH_H
#define TIMECTL_DISPATCH_H

/* In a fork child (attach/attach.c): the thread that fires the monitor is the parent's. */
void tc_dispatch_after_fork_in_child(void);

#endif
