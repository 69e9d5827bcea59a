/* Reading /proc without libc's allocating or cancellable calls: safe in the shim at any point (a signal
   handler, a fork child, before libc is resolved) and shared with TimeControlKit. */
#ifndef TIMECTL_PROCFS_H
#define TIMECTL_PROCFS_H

#include <stdint.h>

/* When process `pid` started, in clock ticks after boot (field 22 of /proc/PID/stat; an exec does not
   change it, a re-used pid does); 0 if it is gone or unreadable. With `state`, its state letter
   (field 3: 'R', 'S', 'Z', …) is stored there. */
uint64_t tc_proc_start_ticks(int32_t pid, char *state);

#endif
