/*
 * libc's own versions of the functions the shim wraps, resolved once with
 * dlsym(RTLD_NEXT) when the shim initialises (attached or not: an
 * unattached process passes every call through). Calling these keeps
 * libc's behaviour where the shim adds nothing: cancellation points,
 * errno, signal masks.
 */
#ifndef TIMECTL_REAL_H
#define TIMECTL_REAL_H

#define _GNU_SOURCE
#include <mqueue.h>
#include <poll.h>
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/sem.h>
#include <sys/time.h>
#include <sys/timerfd.h>
#include <time.h>

/* Where glibc's and musl's prototypes differ: recvmmsg's flags, ioctl's request. */
#ifdef __GLIBC__
typedef int tc_recvmmsg_flags;
typedef unsigned long tc_ioctl_request;
#else
typedef unsigned int tc_recvmmsg_flags;
typedef int tc_ioctl_request;
#endif

struct tc_real_functions {
    int (*nanosleep)(const struct timespec *, struct timespec *);
    int (*clock_nanosleep)(clockid_t, int, const struct timespec *, struct timespec *);
    int (*poll)(struct pollfd *, nfds_t, int);
    int (*ppoll)(struct pollfd *, nfds_t, const struct timespec *, const sigset_t *);
    int (*select)(int, fd_set *, fd_set *, fd_set *, struct timeval *);
    int (*pselect)(int, fd_set *, fd_set *, fd_set *, const struct timespec *, const sigset_t *);
    int (*epoll_wait)(int, struct epoll_event *, int, int);
    int (*epoll_pwait)(int, struct epoll_event *, int, int, const sigset_t *);
    int (*epoll_pwait2)(int, struct epoll_event *, int, const struct timespec *, const sigset_t *);
    int (*pthread_cond_timedwait)(pthread_cond_t *, pthread_mutex_t *, const struct timespec *);
    int (*pthread_cond_clockwait)(pthread_cond_t *, pthread_mutex_t *, clockid_t, const struct timespec *);
    int (*sem_timedwait)(sem_t *, const struct timespec *);
    int (*sem_clockwait)(sem_t *, clockid_t, const struct timespec *);
    int (*pthread_mutex_timedlock)(pthread_mutex_t *, const struct timespec *);
    int (*pthread_mutex_clocklock)(pthread_mutex_t *, clockid_t, const struct timespec *);
    int (*timerfd_create)(int, int);
    int (*timerfd_settime)(int, int, const struct itimerspec *, struct itimerspec *);
    int (*timerfd_gettime)(int, struct itimerspec *);
    int (*timer_create)(clockid_t, struct sigevent *, timer_t *);
    int (*timer_settime)(timer_t, int, const struct itimerspec *, struct itimerspec *);
    int (*timer_gettime)(timer_t, struct itimerspec *);
    int (*timer_getoverrun)(timer_t);
    int (*timer_delete)(timer_t);
    unsigned int (*alarm)(unsigned int);
    int (*setitimer)(int, const struct itimerval *, struct itimerval *);
    int (*getitimer)(int, struct itimerval *);
    int (*close)(int);
    int (*dup2)(int, int);
    int (*dup3)(int, int, int);
    int (*sigaction)(int, const struct sigaction *, struct sigaction *);
    int (*pthread_create)(pthread_t *, const pthread_attr_t *, void *(*)(void *), void *);
    int (*pthread_sigmask)(int, const sigset_t *, sigset_t *);
    int (*sigprocmask)(int, const sigset_t *, sigset_t *);
    ssize_t (*recvmsg)(int, struct msghdr *, int);
    int (*recvmmsg)(int, struct mmsghdr *, unsigned int, tc_recvmmsg_flags, struct timespec *);
    int (*ioctl)(int, tc_ioctl_request, ...);
    int (*semtimedop)(int, struct sembuf *, size_t, const struct timespec *);
    ssize_t (*mq_timedreceive)(mqd_t, char *, size_t, unsigned int *, const struct timespec *);
    int (*mq_timedsend)(mqd_t, const char *, size_t, unsigned int, const struct timespec *);
    int (*sigtimedwait)(const sigset_t *, siginfo_t *, const struct timespec *);
};

extern struct tc_real_functions tc_real;

/* Fills tc_real; called once, from the shim's initialisation. */
void tc_real_resolve(void);

#endif
