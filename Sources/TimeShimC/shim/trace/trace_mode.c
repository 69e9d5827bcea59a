/*
 * Whether this process records, replays or neither; see trace_mode.h.
 */
#include "trace_mode.h"

int tc_trace_mode;
