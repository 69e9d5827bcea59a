/*
 * Whether this process records, replays or neither (trace_mode.c): the one
 * fact about record and replay that every part of it, and the read path,
 * looks at. Set once at attach by trace_dispatch.c.
 */
#ifndef TIMECTL_TRACE_MODE_H
#define TIMECTL_TRACE_MODE_H

enum tc_trace_mode {
    TC_TRACE_OFF = 0,
    TC_TRACE_RECORDING = 1,
    TC_TRACE_REPLAYING = 2,
};

/* Exit status of a process whose replay diverged, under `timectl replay --strict`. */
#define TC_SHIM_DIVERGED_STATUS 121

extern int tc_trace_mode;

#endif
