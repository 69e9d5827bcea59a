/*
 * Timers on the virtual timeline: timerfd, POSIX timers, alarm and
 * setitimer(ITIMER_REAL) (SPEC §3).
 *
 * A timerfd on a session clock is an eventfd: reading either returns a
 * 64-bit count and resets it, and both are pollable. The helper thread
 * (session/waiters.c) fires due timers — it writes the number of expirations into the
 * eventfd, or delivers the timer's signal — after every verb and, while the
 * session runs, when the next deadline comes in real time. POSIX timers keep
 * a real kernel timer id (armed never) so that ids stay unique and valid.
 *
 * Every armed timer is listed in the segment's wait table, so `status`
 * shows it and `tick --to-next` can advance to it. A timerfd's entry
 * records its descriptor and our duplicate: a Go or static program closes
 * it with a raw close that the shim does not see, and readers, and the
 * helper here, then find the two no longer one open file.
 *
 * Overruns as Linux counts them: a POSIX timer has at most one signal
 * queued. While it is queued (blocked, or not yet taken), further
 * expirations only add to the overrun count — for real-time signals too.
 * The signal trampoline (signals.c) sees the timer's signal delivered: it
 * writes the count into the handler's si_overrun and makes it what
 * timer_getoverrun() returns. A signal taken without a handler
 * (sigwaitinfo, signalfd) is noticed at the next expiration, when the
 * signal is no longer pending (/proc/self/task/TID/status); its
 * si_overrun is then the count when it was queued, and timer_getoverrun()
 * returns the count it collected.
 *
 * The table is process-local and guarded by a spinlock taken with all
 * signals blocked: alarm() and timer_settime() are async-signal-safe, and
 * a handler must not spin on a lock its own thread holds.
 */
#define _GNU_SOURCE
#include "timers.h"
#include "../runtime/libc_originals.h"
#include "../runtime/owned_descriptors.h"
#include "../runtime/process.h"
#include "../runtime/spinlock.h"
#include "../runtime/text.h"
#include "../session/wait.h"
#include "../session/waiters.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/timerfd.h>
#include <unistd.h>

/* glibc 2.36 names a SIGEV_THREAD_ID event's thread only by its member; musl by sigev_notify_thread_id. */
#ifdef sigev_notify_thread_id
#define EVENT_THREAD_ID(event) ((event)->sigev_notify_thread_id)
#else
#define EVENT_THREAD_ID(event) ((event)->_sigev_un._tid)
#endif

/* setitimer's first parameter: glibc's enum, musl's int. */
#ifdef __GLIBC__
typedef __itimer_which_t itimer_which;
#else
typedef int itimer_which;
#endif

#define TC_VTIMERS 256

enum vtimer_type { VTIMER_FREE = 0, VTIMER_TIMERFD = 1, VTIMER_POSIX = 2, VTIMER_ITIMER = 3 };

struct vtimer {
    int type;
    int vclock;
    int fd;                 /* timerfd: the application's descriptor */
    int private_fd;         /* timerfd: our duplicate, written by the helper */
    timer_t id;             /* POSIX: the reserved kernel timer id */
    struct sigevent event;  /* POSIX: how to notify */
    int armed;
    int armed_vclock;       /* the clock `deadline` is on: vclock, or MONOTONIC for a relative arm */
    int64_t deadline;       /* virtual ns on armed_vclock */
    int64_t interval;       /* virtual ns, 0 for one-shot */
    int overrun;            /* POSIX: the overrun of the last delivered expiration (timer_getoverrun) */
    int signal_queued;      /* POSIX: its signal is queued and not yet seen delivered */
    int queued_overrun;     /* POSIX: expirations since the queued signal's, coalesced into it */
    struct tc_wait wait;    /* the wait-table entry while armed */
};

static struct vtimer timers[TC_VTIMERS];
static int table_lock;
/* Descriptors that are timerfd stand-ins, for a cheap check in close(). */
#define TC_FD_BITMAP_BITS 65536
static uint64_t timerfd_bitmap[TC_FD_BITMAP_BITS / 64];

static void lock_table(sigset_t *saved) { tc_spin_lock(&table_lock, saved); }

static void unlock_table(const sigset_t *saved) { tc_spin_unlock(&table_lock, saved); }

static void mark_timerfd(int fd, int on) {
    if (fd < 0 || fd >= TC_FD_BITMAP_BITS) return;
    uint64_t bit = 1ULL << (fd % 64);
    if (on) __atomic_fetch_or(&timerfd_bitmap[fd / 64], bit, __ATOMIC_RELEASE);
    else __atomic_fetch_and(&timerfd_bitmap[fd / 64], ~bit, __ATOMIC_RELEASE);
}

static int maybe_timerfd(int fd) {
    if (fd < 0) return 0;
    if (fd >= TC_FD_BITMAP_BITS) return 1;
    return (__atomic_load_n(&timerfd_bitmap[fd / 64], __ATOMIC_ACQUIRE) >> (fd % 64)) & 1;
}

/* Caller holds the lock. */
static struct vtimer *allocate(int type) {
    for (int i = 0; i < TC_VTIMERS; i++) {
        if (timers[i].type == VTIMER_FREE) {
            memset(&timers[i], 0, sizeof(timers[i]));
            timers[i].type = type;
            timers[i].fd = timers[i].private_fd = -1;
            timers[i].wait.slot = -1;
            return &timers[i];
        }
    }
    return NULL;
}

static struct vtimer *find_timerfd(int fd) {
    for (int i = 0; i < TC_VTIMERS; i++)
        if (timers[i].type == VTIMER_TIMERFD && timers[i].fd == fd) return &timers[i];
    return NULL;
}

static struct vtimer *find_posix(timer_t id) {
    for (int i = 0; i < TC_VTIMERS; i++)
        if (timers[i].type == VTIMER_POSIX && timers[i].id == id) return &timers[i];
    return NULL;
}

static struct vtimer *find_itimer(void) {
    for (int i = 0; i < TC_VTIMERS; i++)
        if (timers[i].type == VTIMER_ITIMER) return &timers[i];
    return NULL;
}


/* The time left and the interval, as timer_gettime reports them (virtual). Caller holds the lock. */
static struct itimerspec current_setting(struct tc_segment *segment, const struct vtimer *timer) {
    struct itimerspec setting;
    memset(&setting, 0, sizeof(setting));
    if (!timer->armed) return setting;
    int64_t left = timer->deadline - tc_segment_read(segment, timer->armed_vclock);
    /* A due timer the helper has not fired yet reports the smallest nonzero time, as Linux does. */
    setting.it_value = tc_timespec_from_ns(left > 0 ? left : 1);
    setting.it_interval = tc_timespec_from_ns(timer->interval);
    return setting;
}

/* What the wait table records of a timerfd, so that readers can tell it closed (tc_wait_timerfd_closed). */
static uint64_t descriptors_of(const struct vtimer *timer) {
    return timer->type == VTIMER_TIMERFD && timer->fd >= 0 && timer->private_fd >= 0
               ? tc_wait_descriptors(timer->fd, timer->private_fd)
               : 0;
}

static void disarm(struct vtimer *timer) {
    if (timer->armed && timer->wait.slot >= 0) tc_wait_end(&timer->wait);
    timer->armed = 0;
}

/* Arms (or disarms, for a zero value) from an itimerspec. Caller holds the lock. */
static void arm(struct tc_segment *segment, struct vtimer *timer, int kind, int absolute,
                const struct itimerspec *setting) {
    disarm(timer);
    int64_t value = tc_timespec_ns_saturating(&setting->it_value);
    if (value == 0) return;
    /* A relative timer (and its interval) measures elapsed time, as Linux arms relative CLOCK_REALTIME timers. */
    timer->armed_vclock = absolute ? timer->vclock : tc_wait_relative_clock(timer->vclock);
    timer->deadline = absolute ? tc_wait_absolute_deadline(segment, timer->armed_vclock, value)
                               : tc_wait_deadline_after(segment, timer->armed_vclock, value);
    timer->interval = tc_timespec_ns_saturating(&setting->it_interval);
    timer->overrun = 0;
    timer->queued_overrun = 0;
    timer->armed = 1;
    /* Listed as the process's (thread 0): a timer outlives the thread that armed it. */
    tc_wait_begin_timer(&timer->wait, segment, kind, timer->armed_vclock, timer->deadline, (uint32_t)(timer - timers),
                        descriptors_of(timer));
    timer->deadline = timer->wait.deadline;  /* stretched by a seeded jitter */
}

/* Empties an eventfd without blocking, whatever the application's flags. */
static void drain(int fd) {
    struct pollfd check = {fd, POLLIN, 0};
    struct timespec now = {0, 0};
    if (tc_raw_syscall(SYS_ppoll, &check, 1, &now, NULL, 8) <= 0) return;
    long flags = tc_raw_syscall(SYS_fcntl, fd, F_GETFL, 0);
    if (flags >= 0 && !(flags & O_NONBLOCK)) tc_raw_syscall(SYS_fcntl, fd, F_SETFL, flags | O_NONBLOCK);
    uint64_t count;
    tc_raw_syscall(SYS_read, fd, &count, sizeof(count));
    if (flags >= 0 && !(flags & O_NONBLOCK)) tc_raw_syscall(SYS_fcntl, fd, F_SETFL, flags);
}

static void forget_timerfd(struct vtimer *timer);

/* ---- firing (the helper thread) ---- */

struct firing {
    int type;
    int private_fd;
    struct sigevent event;
    uint64_t expirations;
    int kernel_id;
};

static int saturated_overrun(uint64_t overrun) { return overrun > INT_MAX ? INT_MAX : (int)overrun; }

static int signals_by_notification(const struct sigevent *event) {
    return event->sigev_notify == SIGEV_SIGNAL || event->sigev_notify == SIGEV_THREAD_ID;
}

/* Whether `signal` is pending for the process (SIGEV_SIGNAL) or for the
   thread the timer targets (SIGEV_THREAD_ID), from /proc: the kernel offers
   no other way to look at another thread's pending set. */
static int signal_pending(const struct sigevent *event) {
    struct tc_text path = {.length = 0};
    tc_text_append(&path, "/proc/self/task/");
    tc_text_append_number(&path, event->sigev_notify == SIGEV_THREAD_ID ? EVENT_THREAD_ID(event) : tc_shim_pid());
    tc_text_append(&path, "/status");
    long fd = tc_raw_syscall(SYS_openat, AT_FDCWD, path.text, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return 0;
    char status[4096];
    long length = tc_raw_syscall(SYS_read, fd, status, sizeof(status) - 1);
    tc_raw_syscall(SYS_close, fd);
    if (length <= 0) return 0;
    status[length] = 0;
    const char *field = strstr(status, event->sigev_notify == SIGEV_THREAD_ID ? "\nSigPnd:" : "\nShdPnd:");
    if (!field) return 0;
    field += 8;
    while (*field == ' ' || *field == '\t') field++;
    uint64_t mask = 0;
    for (; (*field >= '0' && *field <= '9') || (*field >= 'a' && *field <= 'f'); field++)
        mask = mask << 4 | (uint64_t)(*field <= '9' ? *field - '0' : *field - 'a' + 10);
    int signal = event->sigev_signo;
    return signal > 0 && signal <= 64 && ((mask >> (signal - 1)) & 1);
}

static void *run_notify_function(void *argument) {
    struct sigevent event = *(struct sigevent *)argument;
    munmap(argument, 4096);
    event.sigev_notify_function(event.sigev_value);
    return NULL;
}

static void deliver(const struct firing *firing) {
    int32_t pid = tc_shim_pid();
    if (firing->type == VTIMER_TIMERFD) {
        if (tc_fd_owned(firing->private_fd))
            tc_raw_syscall(SYS_write, firing->private_fd, &firing->expirations, sizeof(firing->expirations));
        return;
    }
    if (firing->type == VTIMER_ITIMER) {
        tc_raw_syscall(SYS_kill, pid, SIGALRM);
        return;
    }
    const struct sigevent *event = &firing->event;
    siginfo_t info;
    memset(&info, 0, sizeof(info));
    info.si_signo = event->sigev_signo;
    info.si_code = SI_TIMER;
    info.si_overrun = saturated_overrun(firing->expirations - 1);
    info.si_timerid = firing->kernel_id;
    info.si_value = event->sigev_value;
    switch (event->sigev_notify) {
    case SIGEV_SIGNAL:
        tc_raw_syscall(SYS_rt_sigqueueinfo, pid, event->sigev_signo, &info);
        break;
    case SIGEV_THREAD_ID:
        tc_raw_syscall(SYS_rt_tgsigqueueinfo, pid, EVENT_THREAD_ID(event), event->sigev_signo, &info);
        break;
    case SIGEV_THREAD: {
        /* A copy the new thread owns (mmap: the helper does not call malloc). */
        void *copy = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (copy == MAP_FAILED) break;
        memcpy(copy, event, sizeof(*event));
        pthread_t thread;
        if (pthread_create(&thread, event->sigev_notify_attributes, run_notify_function, copy) == 0)
            pthread_detach(thread);
        else
            munmap(copy, 4096);
        break;
    }
    default: break; /* SIGEV_NONE */
    }
}

int64_t tc_timers_fire_due(struct tc_segment *segment) {
    struct firing due[TC_VTIMERS];
    int count = 0;
    int64_t next = TC_FOREVER;
    /* Closes the shim does not see are raw ones, which only Go and static programs make: theirs are looked at. */
    int raw_closes = tc_syscall_trap_active();
    sigset_t saved;
    lock_table(&saved);
    for (int i = 0; i < TC_VTIMERS; i++) {
        struct vtimer *timer = &timers[i];
        if (raw_closes && timer->type == VTIMER_TIMERFD &&
            tc_timerfd_descriptors_closed(tc_shim_pid(), descriptors_of(timer)))
            forget_timerfd(timer);
        if (timer->type == VTIMER_FREE || !timer->armed) continue;
        struct tc_wait_view view = tc_wait_look(segment, timer->armed_vclock);
        /* A seeded scheduler fires timers due together one at a time (SPEC §11). */
        if (view.now >= timer->deadline && !tc_wait_held(segment, timer->wait.slot)) {
            uint64_t expirations = 1;
            if (timer->interval > 0) expirations += (uint64_t)((view.now - timer->deadline) / timer->interval);
            int coalesced = 0;
            if (timer->type == VTIMER_POSIX && signals_by_notification(&timer->event)) {
                if (timer->signal_queued && signal_pending(&timer->event)) {
                    timer->queued_overrun = saturated_overrun((uint64_t)timer->queued_overrun + expirations);
                    coalesced = 1;
                } else {
                    /* The last one was taken (a handler would have said so already): by sigwaitinfo or signalfd. */
                    if (timer->signal_queued) timer->overrun = timer->queued_overrun;
                    timer->signal_queued = 1;
                    timer->queued_overrun = saturated_overrun(expirations - 1);
                }
            } else {
                timer->overrun = saturated_overrun(expirations - 1);
            }
            if (!coalesced)
                due[count++] = (struct firing){timer->type, timer->private_fd, timer->event, expirations,
                                               (int)(intptr_t)timer->id};
            if (timer->interval > 0) {
                timer->deadline += (int64_t)expirations * timer->interval;
                timer->wait.deadline = timer->deadline;
                tc_wait_set_deadline(segment, timer->wait.slot, timer->armed_vclock, timer->deadline);
            } else {
                disarm(timer);
                continue;
            }
        }
        int64_t remaining = tc_wait_remaining(&view, &timer->wait);
        if (remaining < next) next = remaining;
    }
    unlock_table(&saved);
    for (int i = 0; i < count; i++) deliver(&due[i]);
    return next;
}

/* The trampoline (signals.c) runs a handler for a timer's signal: the signal
   is taken, and carries every expiration coalesced into it. */
void tc_timers_signal_taken(int signal, siginfo_t *info) {
    sigset_t saved;
    lock_table(&saved);
    for (int i = 0; i < TC_VTIMERS; i++) {
        struct vtimer *timer = &timers[i];
        if (timer->type != VTIMER_POSIX || !timer->signal_queued || timer->event.sigev_signo != signal ||
            (int)(intptr_t)timer->id != info->si_timerid)
            continue;
        info->si_overrun = timer->overrun = timer->queued_overrun;
        timer->signal_queued = 0;
        timer->queued_overrun = 0;
        break;
    }
    unlock_table(&saved);
}

/* fork: hold the table across it, so the child never inherits it locked. */
static sigset_t fork_saved_mask;

void tc_timers_before_fork(void) { lock_table(&fork_saved_mask); }

void tc_timers_after_fork_in_parent(void) { unlock_table(&fork_saved_mask); }

void tc_timers_after_fork_in_child(void) {
    /* POSIX timers and alarms are not inherited. A timerfd is, but the
       parent's helper keeps firing it; the child only reads it. */
    for (int i = 0; i < TC_VTIMERS; i++) {
        if (timers[i].type == VTIMER_TIMERFD) {
            mark_timerfd(timers[i].fd, 0);
            tc_fd_release(timers[i].private_fd);
            tc_raw_syscall(SYS_close, timers[i].private_fd);
        }
        timers[i].type = VTIMER_FREE;
    }
    unlock_table(&fork_saved_mask);
}

/* ---- timerfd ---- */

static int virtual_clock_for_timer(clockid_t clock) {
    int vclock = tc_vclock_for_clockid(clock);
    /* timerfds and timers accept these five; the shim takes them all. */
    return vclock;
}

/* Caller holds the lock. */
static void forget_timerfd(struct vtimer *timer) {
    disarm(timer);
    tc_fd_release(timer->private_fd);
    tc_raw_syscall(SYS_close, timer->private_fd);
    timer->type = VTIMER_FREE;
    mark_timerfd(timer->fd, 0);
}

static int shim_timerfd_create(int clock, int flags) {
    struct tc_segment *segment = tc_shim_segment();
    int vclock = virtual_clock_for_timer(clock);
    if (!segment || vclock < 0 || (flags & ~(TFD_NONBLOCK | TFD_CLOEXEC)))
        return tc_real.timerfd_create(clock, flags);
    int event_flags = ((flags & TFD_NONBLOCK) ? EFD_NONBLOCK : 0) | ((flags & TFD_CLOEXEC) ? EFD_CLOEXEC : 0);
    long fd = tc_raw_syscall(SYS_eventfd2, 0, event_flags);
    if (fd < 0) return (int)tc_shim_errno_result(fd);
    long private_fd = tc_raw_syscall(SYS_fcntl, fd, F_DUPFD_CLOEXEC, 100);
    if (private_fd < 0) private_fd = tc_raw_syscall(SYS_fcntl, fd, F_DUPFD_CLOEXEC, 0);
    sigset_t saved;
    lock_table(&saved);
    /* A timer still listed on this number lost its descriptor to a close the shim did not see (a static
       program's raw close): the kernel has just handed the number out again. */
    struct vtimer *stale = find_timerfd((int)fd);
    if (stale) forget_timerfd(stale);
    struct vtimer *timer = private_fd >= 0 ? allocate(VTIMER_TIMERFD) : NULL;
    if (timer) {
        timer->vclock = vclock;
        timer->fd = (int)fd;
        timer->private_fd = (int)private_fd;
        mark_timerfd((int)fd, 1);
        tc_fd_claim((int)private_fd);
    }
    unlock_table(&saved);
    if (!timer) {
        if (private_fd >= 0) tc_raw_syscall(SYS_close, private_fd);
        tc_raw_syscall(SYS_close, fd);
        errno = EMFILE;
        return -1;
    }
    return (int)fd;
}

static int shim_timerfd_settime(int fd, int flags, const struct itimerspec *setting, struct itimerspec *old) {
    struct tc_segment *segment = tc_shim_segment();
    if (!segment || !maybe_timerfd(fd)) return tc_real.timerfd_settime(fd, flags, setting, old);
    sigset_t saved;
    lock_table(&saved);
    struct vtimer *timer = find_timerfd(fd);
    if (!timer) {
        unlock_table(&saved);
        return tc_real.timerfd_settime(fd, flags, setting, old);
    }
    if (!setting || !tc_timespec_valid(&setting->it_value) || !tc_timespec_valid(&setting->it_interval) ||
        (flags & ~(TFD_TIMER_ABSTIME | TFD_TIMER_CANCEL_ON_SET))) {
        unlock_table(&saved);
        errno = setting ? EINVAL : EFAULT;
        return -1;
    }
    if (old) *old = current_setting(segment, timer);
    /* Re-arming discards expirations not yet read, as for a timerfd. */
    drain(timer->private_fd);
    arm(segment, timer, TC_WAIT_TIMERFD, flags & TFD_TIMER_ABSTIME, setting);
    unlock_table(&saved);
    tc_helper_poke();
    return 0;
}

static int shim_timerfd_gettime(int fd, struct itimerspec *current) {
    struct tc_segment *segment = tc_shim_segment();
    if (!segment || !maybe_timerfd(fd)) return tc_real.timerfd_gettime(fd, current);
    sigset_t saved;
    lock_table(&saved);
    struct vtimer *timer = find_timerfd(fd);
    if (timer) *current = current_setting(segment, timer);
    unlock_table(&saved);
    return timer ? 0 : tc_real.timerfd_gettime(fd, current);
}

TC_EXPORT int timerfd_create(int, int) __attribute__((alias("shim_timerfd_create")));
TC_EXPORT int timerfd_settime(int, int, const struct itimerspec *, struct itimerspec *)
    __attribute__((alias("shim_timerfd_settime")));
TC_EXPORT int timerfd_gettime(int, struct itimerspec *) __attribute__((alias("shim_timerfd_gettime")));

/* A closed (or replaced) descriptor stops being a virtual timer. */
void tc_timerfd_forget(int fd) {
    if (!maybe_timerfd(fd)) return;
    sigset_t saved;
    lock_table(&saved);
    struct vtimer *timer = find_timerfd(fd);
    if (timer) forget_timerfd(timer);
    unlock_table(&saved);
}

int tc_timerfd_number_taken(int fd) {
    sigset_t saved;
    lock_table(&saved);
    for (int i = 0; i < TC_VTIMERS; i++) {
        if (timers[i].type != VTIMER_TIMERFD || timers[i].private_fd != fd) continue;
        long moved = tc_raw_syscall(SYS_fcntl, fd, F_DUPFD_CLOEXEC, 100);
        tc_fd_release(fd);
        timers[i].private_fd = moved >= 0 ? (int)moved : -1;
        if (moved >= 0) tc_fd_claim((int)moved);
        if (timers[i].armed) tc_wait_set_descriptors(tc_shim_segment(), timers[i].wait.slot, descriptors_of(&timers[i]));
        unlock_table(&saved);
        return 1;
    }
    unlock_table(&saved);
    return 0;
}

/* ---- POSIX timers ---- */

static int shim_timer_create(clockid_t clock, struct sigevent *event, timer_t *id) {
    struct tc_segment *segment = tc_shim_segment();
    int vclock = virtual_clock_for_timer(clock);
    if (!segment || vclock < 0) return tc_real.timer_create(clock, event, id);
    struct sigevent notify;
    if (event) {
        notify = *event;
        int supported = notify.sigev_notify == SIGEV_NONE || notify.sigev_notify == SIGEV_SIGNAL ||
                        notify.sigev_notify == SIGEV_THREAD || notify.sigev_notify == SIGEV_THREAD_ID;
        if (!supported) return tc_real.timer_create(clock, event, id);
    } else {
        memset(&notify, 0, sizeof(notify));
        notify.sigev_notify = SIGEV_SIGNAL;
        notify.sigev_signo = SIGALRM;
    }
    /* A real timer that is never armed reserves an id the kernel and libc accept. */
    struct sigevent silent;
    memset(&silent, 0, sizeof(silent));
    silent.sigev_notify = SIGEV_NONE;
    timer_t reserved;
    if (tc_real.timer_create(CLOCK_MONOTONIC, &silent, &reserved) != 0) return -1;
    if (!event) notify.sigev_value.sival_ptr = reserved;
    sigset_t saved;
    lock_table(&saved);
    struct vtimer *timer = allocate(VTIMER_POSIX);
    if (timer) {
        timer->vclock = vclock;
        timer->id = reserved;
        timer->event = notify;
    }
    unlock_table(&saved);
    if (!timer) {
        tc_real.timer_delete(reserved);
        errno = EAGAIN;
        return -1;
    }
    *id = reserved;
    return 0;
}

static int shim_timer_settime(timer_t id, int flags, const struct itimerspec *setting, struct itimerspec *old) {
    struct tc_segment *segment = tc_shim_segment();
    if (!segment) return tc_real.timer_settime(id, flags, setting, old);
    sigset_t saved;
    lock_table(&saved);
    struct vtimer *timer = find_posix(id);
    if (!timer) {
        unlock_table(&saved);
        return tc_real.timer_settime(id, flags, setting, old);
    }
    if (!setting || !tc_timespec_valid(&setting->it_value) || !tc_timespec_valid(&setting->it_interval)) {
        unlock_table(&saved);
        errno = setting ? EINVAL : EFAULT;
        return -1;
    }
    if (old) *old = current_setting(segment, timer);
    arm(segment, timer, TC_WAIT_TIMER, flags & TIMER_ABSTIME, setting);
    unlock_table(&saved);
    tc_helper_poke();
    return 0;
}

static int shim_timer_gettime(timer_t id, struct itimerspec *current) {
    struct tc_segment *segment = tc_shim_segment();
    if (!segment) return tc_real.timer_gettime(id, current);
    sigset_t saved;
    lock_table(&saved);
    struct vtimer *timer = find_posix(id);
    if (timer) *current = current_setting(segment, timer);
    unlock_table(&saved);
    return timer ? 0 : tc_real.timer_gettime(id, current);
}

static int shim_timer_getoverrun(timer_t id) {
    struct tc_segment *segment = tc_shim_segment();
    if (!segment) return tc_real.timer_getoverrun(id);
    sigset_t saved;
    lock_table(&saved);
    struct vtimer *timer = find_posix(id);
    int overrun = timer ? timer->overrun : -1;
    unlock_table(&saved);
    return timer ? overrun : tc_real.timer_getoverrun(id);
}

static int shim_timer_delete(timer_t id) {
    struct tc_segment *segment = tc_shim_segment();
    if (segment) {
        sigset_t saved;
        lock_table(&saved);
        struct vtimer *timer = find_posix(id);
        if (timer) {
            disarm(timer);
            timer->type = VTIMER_FREE;
        }
        unlock_table(&saved);
    }
    return tc_real.timer_delete(id);
}

TC_EXPORT int timer_create(clockid_t, struct sigevent *, timer_t *) __attribute__((alias("shim_timer_create")));
TC_EXPORT int timer_settime(timer_t, int, const struct itimerspec *, struct itimerspec *)
    __attribute__((alias("shim_timer_settime")));
TC_EXPORT int timer_gettime(timer_t, struct itimerspec *) __attribute__((alias("shim_timer_gettime")));
TC_EXPORT int timer_getoverrun(timer_t) __attribute__((alias("shim_timer_getoverrun")));
TC_EXPORT int timer_delete(timer_t) __attribute__((alias("shim_timer_delete")));

/* ---- alarm and setitimer(ITIMER_REAL): one timer per process ---- */

static struct itimerval to_itimerval(struct itimerspec setting) {
    struct itimerval value;
    value.it_value.tv_sec = setting.it_value.tv_sec;
    value.it_value.tv_usec = (setting.it_value.tv_nsec + 999) / 1000;
    value.it_interval.tv_sec = setting.it_interval.tv_sec;
    value.it_interval.tv_usec = setting.it_interval.tv_nsec / 1000;
    return value;
}

/* Arms the process's real-time interval timer; the old setting goes to *old. */
static int set_itimer(struct tc_segment *segment, const struct itimerval *value, struct itimerval *old) {
    if (value->it_value.tv_usec < 0 || value->it_value.tv_usec >= 1000000 || value->it_value.tv_sec < 0 ||
        value->it_interval.tv_usec < 0 || value->it_interval.tv_usec >= 1000000 || value->it_interval.tv_sec < 0) {
        errno = EINVAL;
        return -1;
    }
    struct itimerspec setting = {
        {value->it_interval.tv_sec, value->it_interval.tv_usec * 1000},
        {value->it_value.tv_sec, value->it_value.tv_usec * 1000},
    };
    sigset_t saved;
    lock_table(&saved);
    struct vtimer *timer = find_itimer();
    if (!timer) timer = allocate(VTIMER_ITIMER);
    if (timer) {
        timer->vclock = TC_VCLOCK_MONOTONIC;
        if (old) *old = to_itimerval(current_setting(segment, timer));
        arm(segment, timer, TC_WAIT_ALARM, 0, &setting);
    }
    unlock_table(&saved);
    if (!timer) {
        errno = EAGAIN;
        return -1;
    }
    tc_helper_poke();
    return 0;
}

static int shim_setitimer(itimer_which which, const struct itimerval *value, struct itimerval *old) {
    struct tc_segment *segment = tc_shim_segment();
    if (!segment || which != ITIMER_REAL || !value) return tc_real.setitimer(which, value, old);
    return set_itimer(segment, value, old);
}

static int shim_getitimer(itimer_which which, struct itimerval *current) {
    struct tc_segment *segment = tc_shim_segment();
    if (!segment || which != ITIMER_REAL) return tc_real.getitimer(which, current);
    sigset_t saved;
    lock_table(&saved);
    struct vtimer *timer = find_itimer();
    struct itimerspec setting;
    memset(&setting, 0, sizeof(setting));
    if (timer) setting = current_setting(segment, timer);
    unlock_table(&saved);
    *current = to_itimerval(setting);
    return 0;
}

static unsigned int shim_alarm(unsigned int seconds) {
    struct tc_segment *segment = tc_shim_segment();
    if (!segment) return tc_real.alarm(seconds);
    struct itimerval value = {{0, 0}, {seconds, 0}}, old;
    if (set_itimer(segment, &value, &old) != 0) return 0;
    /* As glibc: round to the nearest second, but never report 0 while an alarm is pending. */
    unsigned int left = (unsigned int)old.it_value.tv_sec;
    if (old.it_value.tv_usec >= 500000 || (left == 0 && old.it_value.tv_usec > 0)) left++;
    return left;
}

TC_EXPORT int setitimer(itimer_which, const struct itimerval *restrict, struct itimerval *restrict)
    __attribute__((alias("shim_setitimer")));
TC_EXPORT int getitimer(itimer_which, struct itimerval *) __attribute__((alias("shim_getitimer")));
TC_EXPORT unsigned int alarm(unsigned int) __attribute__((alias("shim_alarm")));

/* ---- the same calls made raw, by Go and static programs (trap/syscall_trap.c traps them) ---- */

static long kernel_result(long libc_result) { return libc_result < 0 ? -errno : libc_result; }

/*
 * A kernel timer id as the timer_t this file keeps: glibc (≥ 2.34) hands out
 * the kernel's id itself for every timer that is not SIGEV_THREAD, and the
 * ids reserved above are SIGEV_NONE. A negative id is no timer: glibc would
 * take it for one of its SIGEV_THREAD records, so the kernel answers it.
 */
static int kernel_timer(long id, timer_t *timer) {
    if ((int)id < 0) return 0;
    *timer = (timer_t)(intptr_t)(int)id;
    return 1;
}

/* timer_create with the kernel's arguments: the id is written as the kernel's (an int). */
static long raw_timer_create(long clock, long event_argument, long id_argument) {
    const struct sigevent *event = (const struct sigevent *)event_argument;
    int *id = (int *)id_argument;
    /* SIGEV_THREAD is libc's own notion: the kernel refuses it, and a static libc has made it SIGEV_THREAD_ID. */
    if (!tc_shim_segment() || virtual_clock_for_timer((clockid_t)clock) < 0 || !id ||
        (event && event->sigev_notify == SIGEV_THREAD))
        return tc_raw_syscall(SYS_timer_create, clock, event_argument, id_argument);
    timer_t created;
    long result = kernel_result(shim_timer_create((clockid_t)clock, (struct sigevent *)event, &created));
    if (result == 0) *id = (int)(intptr_t)created;
    return result;
}

long tc_timers_syscall(long number, long a1, long a2, long a3, long a4) {
    timer_t timer;
    switch (number) {
    case SYS_timerfd_create: return kernel_result(shim_timerfd_create((int)a1, (int)a2));
    case SYS_timerfd_settime:
        return kernel_result(shim_timerfd_settime((int)a1, (int)a2, (const struct itimerspec *)a3, (struct itimerspec *)a4));
    case SYS_timerfd_gettime: return kernel_result(shim_timerfd_gettime((int)a1, (struct itimerspec *)a2));
    case SYS_timer_create: return raw_timer_create(a1, a2, a3);
    case SYS_timer_settime:
        if (!kernel_timer(a1, &timer)) break;
        return kernel_result(shim_timer_settime(timer, (int)a2, (const struct itimerspec *)a3, (struct itimerspec *)a4));
    case SYS_timer_gettime:
        if (!kernel_timer(a1, &timer) || !a2) break;
        return kernel_result(shim_timer_gettime(timer, (struct itimerspec *)a2));
    case SYS_timer_getoverrun:
        if (!kernel_timer(a1, &timer)) break;
        return kernel_result(shim_timer_getoverrun(timer));
    case SYS_timer_delete:
        if (!kernel_timer(a1, &timer)) break;
        return kernel_result(shim_timer_delete(timer));
#ifdef SYS_alarm
    case SYS_alarm: return shim_alarm((unsigned int)a1);  /* x86-64's; aarch64 has none (libc's alarm is setitimer) */
#endif
    case SYS_setitimer:
        return kernel_result(shim_setitimer((itimer_which)a1, (const struct itimerval *)a2, (struct itimerval *)a3));
    case SYS_getitimer:
        if (!a2) break;
        return kernel_result(shim_getitimer((itimer_which)a1, (struct itimerval *)a2));
    default: break;
    }
    return tc_raw_syscall(number, a1, a2, a3, a4);
}
