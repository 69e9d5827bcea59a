/*
 * Attaching a process on libfaketime's settings (SPEC §13): read when no
 * session is named, before anything else attaches.
 */
#ifndef TIMECTL_FAKETIME_ENV_H
#define TIMECTL_FAKETIME_ENV_H

#include "../runtime/process.h"

enum tc_faketime_attach_result {
    TC_FAKETIME_NOT_ASKED = 0,   /* none of libfaketime's variables: real time, as any unattached process */
    TC_FAKETIME_ATTACH = 1,      /* attach to *waits; plain reads use *reads (NULL: every read is out of line) */
    TC_FAKETIME_SKIPPED = 2,     /* FAKETIME_SKIP_CMDS or FAKETIME_ONLY_CMDS leave this program on real time */
};

/*
 * Sets this process up from libfaketime's variables: refuses (one line,
 * exit status TC_SHIM_REFUSAL_STATUS) a variable timectl does not
 * implement or a value it cannot read; otherwise makes or joins the
 * clock's segment (shared by the process tree unless libfaketime restarts
 * the clock in every process) and, where the clock stands still, the
 * segment the waits run on. Raw system calls and no allocation but the
 * local-time conversion of a date (mktime), as libfaketime's.
 */
int tc_faketime_attach(struct tc_segment **waits, struct tc_segment **reads);

#endif
