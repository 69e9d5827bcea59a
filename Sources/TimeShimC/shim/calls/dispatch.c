/*
 * libdispatch's worker-pool monitor, on real time (docs/swift.md, "Which
 * waits are timers"). libdispatch on Linux watches its thread pool with a
 * timer source that fires every second on its manager queue, from the first
 * worker thread on, for the life of the process. On the session that timer
 * is a virtual wait like any other: under auto-advance every jump stopped at
 * each of its ticks, so an hour of a program's waiting (SwiftNIO's
 * scheduleTask(in: .hours(1))) took 3,600 steps. Its work is about real
 * threads (it reads their states in /proc and adds a worker when every
 * worker is blocked with work queued), not about the program's time.
 *
 * So its source never fires on the session here: it is set to fire never,
 * and a thread of the shim's fires it once after each real interval.
 *
 * It is told from every other timer source by its queue: a source created by
 * dispatch_source_create() on libdispatch's manager queue, which only
 * libdispatch can name. libdispatch calls dispatch_source_create() and
 * dispatch_source_set_timer() through its PLT, so these interposers see its
 * own calls too.
 */
#define _GNU_SOURCE
#include "dispatch.h"
#include "../runtime/process.h"
#include "../runtime/threads.h"

#include <dlfcn.h>
#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <time.h>

#define DISPATCH_TIME_NOW 0ull
#define DISPATCH_TIME_FOREVER (~0ull)
#define MANAGER_QUEUE_LABEL "com.apple.libdispatch-manager"

typedef void *(*source_create_function)(const void *type, uintptr_t handle, uintptr_t mask, void *queue);
typedef void (*set_timer_function)(void *source, uint64_t start, uint64_t interval, uint64_t leeway);
typedef const char *(*queue_label_function)(void *queue);

static source_create_function real_source_create;
static set_timer_function real_set_timer;
static void *monitor;           /* the monitor's source, once libdispatch made it */
static uint64_t monitor_interval;
static int driver_started;

static const void *timer_type;  /* DISPATCH_SOURCE_TYPE_TIMER */

static void *next_symbol(const char *name) { return dlsym(RTLD_NEXT, name); }

static int is_monitor(const void *type, uintptr_t handle, uintptr_t mask, void *queue) {
    if (handle != 0 || mask != 0 || !queue || __atomic_load_n(&monitor, __ATOMIC_ACQUIRE)) return 0;
    const void *timer = __atomic_load_n(&timer_type, __ATOMIC_ACQUIRE);
    if (!timer) {
        timer = next_symbol("_dispatch_source_type_timer");
        __atomic_store_n(&timer_type, timer, __ATOMIC_RELEASE);
    }
    if (type != timer) return 0;
    queue_label_function label = (queue_label_function)next_symbol("dispatch_queue_get_label");
    const char *name = label ? label(queue) : NULL;
    return name && strcmp(name, MANAGER_QUEUE_LABEL) == 0;
}

TC_EXPORT void *dispatch_source_create(const void *type, uintptr_t handle, uintptr_t mask, void *queue) {
    source_create_function create = __atomic_load_n(&real_source_create, __ATOMIC_ACQUIRE);
    if (!create) {
        create = (source_create_function)next_symbol("dispatch_source_create");
        if (!create) return NULL;
        __atomic_store_n(&real_source_create, create, __ATOMIC_RELEASE);
    }
    void *source = create(type, handle, mask, queue);
    if (source && tc_shim_segment() && is_monitor(type, handle, mask, queue))
        __atomic_store_n(&monitor, source, __ATOMIC_RELEASE);
    return source;
}

/* Fires the monitor once after each real interval: a one-shot timer due at once, on the manager queue as before. */
static void *drive_monitor(void *argument) {
    (void)argument;
    prctl(PR_SET_NAME, "timectl-dispatch", 0, 0, 0);
    uint64_t interval = __atomic_load_n(&monitor_interval, __ATOMIC_ACQUIRE);
    struct timespec pause = {.tv_sec = (time_t)(interval / 1000000000u), .tv_nsec = (long)(interval % 1000000000u)};
    for (;;) {
        /* The raw call: the real clock, never the session's. */
        while (tc_raw_syscall(SYS_clock_nanosleep, CLOCK_MONOTONIC, 0, &pause, &pause) == -EINTR) {}
        pause.tv_sec = (time_t)(interval / 1000000000u);
        pause.tv_nsec = (long)(interval % 1000000000u);
        real_set_timer(__atomic_load_n(&monitor, __ATOMIC_ACQUIRE), DISPATCH_TIME_NOW, DISPATCH_TIME_FOREVER, 0);
    }
    return NULL;
}

TC_EXPORT void dispatch_source_set_timer(void *source, uint64_t start, uint64_t interval, uint64_t leeway) {
    set_timer_function set_timer = __atomic_load_n(&real_set_timer, __ATOMIC_ACQUIRE);
    if (!set_timer) {
        set_timer = (set_timer_function)next_symbol("dispatch_source_set_timer");
        if (!set_timer) return;
        __atomic_store_n(&real_set_timer, set_timer, __ATOMIC_RELEASE);
    }
    if (!source || source != __atomic_load_n(&monitor, __ATOMIC_ACQUIRE) || interval == 0 || interval == DISPATCH_TIME_FOREVER) {
        set_timer(source, start, interval, leeway);
        return;
    }
    __atomic_store_n(&monitor_interval, interval, __ATOMIC_RELEASE);
    set_timer(source, DISPATCH_TIME_FOREVER, DISPATCH_TIME_FOREVER, 0);
    int expected = 0;
    if (__atomic_compare_exchange_n(&driver_started, &expected, 1, 0, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED) &&
        tc_start_shim_thread(drive_monitor, NULL, 64 * 1024) != 0) {
        /* No thread for it: the monitor stays on the session, as without the shim's help. */
        __atomic_store_n(&driver_started, 0, __ATOMIC_RELEASE);
        set_timer(source, start, interval, leeway);
    }
}

void tc_dispatch_after_fork_in_child(void) {
    /* The driver is not in the child; a child that sets the timer again gets its own. */
    driver_started = 0;
}
