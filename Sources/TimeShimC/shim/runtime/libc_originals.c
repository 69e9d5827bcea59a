#define _GNU_SOURCE
#include "libc_originals.h"

#include <dlfcn.h>

struct tc_real_functions tc_real;

#define RESOLVE(name) tc_real.name = (__typeof__(tc_real.name))dlsym(RTLD_NEXT, #name)

void tc_real_resolve(void) {
    RESOLVE(nanosleep);
    RESOLVE(clock_nanosleep);
    RESOLVE(poll);
    RESOLVE(ppoll);
    RESOLVE(select);
    RESOLVE(pselect);
    RESOLVE(epoll_wait);
    RESOLVE(epoll_pwait);
    RESOLVE(epoll_pwait2);
    RESOLVE(pthread_cond_timedwait);
    RESOLVE(pthread_cond_clockwait);
    RESOLVE(sem_timedwait);
    RESOLVE(sem_clockwait);
    RESOLVE(pthread_mutex_timedlock);
    RESOLVE(pthread_mutex_clocklock);
    RESOLVE(timerfd_create);
    RESOLVE(timerfd_settime);
    RESOLVE(timerfd_gettime);
    RESOLVE(timer_create);
    RESOLVE(timer_settime);
    RESOLVE(timer_gettime);
    RESOLVE(timer_getoverrun);
    RESOLVE(timer_delete);
    RESOLVE(alarm);
    RESOLVE(setitimer);
    RESOLVE(getitimer);
    RESOLVE(close);
    RESOLVE(dup2);
    RESOLVE(dup3);
    RESOLVE(sigaction);
    RESOLVE(pthread_create);
    RESOLVE(pthread_sigmask);
    RESOLVE(sigprocmask);
    RESOLVE(recvmsg);
    RESOLVE(recvmmsg);
    RESOLVE(ioctl);
    RESOLVE(semtimedop);
    RESOLVE(mq_timedreceive);
    RESOLVE(mq_timedsend);
    RESOLVE(sigtimedwait);
}
