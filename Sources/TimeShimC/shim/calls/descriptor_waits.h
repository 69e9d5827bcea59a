/*
 * Descriptor waits with timeouts (descriptor_waits.c): poll, select and
 * epoll as the system-call table reaches them, with the kernel's
 * convention (−errno; errno untouched).
 */
#ifndef TIMECTL_DESCRIPTOR_WAITS_H
#define TIMECTL_DESCRIPTOR_WAITS_H

#include <poll.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/select.h>
#include <time.h>

long tc_epoll_pwait(int epoll_fd, struct epoll_event *events, int capacity, int timeout_ms, const sigset_t *mask);
long tc_epoll_pwait2(int epoll_fd, struct epoll_event *events, int capacity, const struct timespec *timeout,
                     const sigset_t *mask);
long tc_poll(struct pollfd *fds, nfds_t count, int timeout_ms);
long tc_ppoll(struct pollfd *fds, nfds_t count, const struct timespec *timeout, const sigset_t *mask);
long tc_select(int count, fd_set *read, fd_set *write, fd_set *except, struct timeval *timeout);
/* As the raw pselect6: the time not slept is written back into `timeout`. */
long tc_pselect6(int count, fd_set *read, fd_set *write, fd_set *except, struct timespec *timeout,
                 const sigset_t *mask);

#endif
