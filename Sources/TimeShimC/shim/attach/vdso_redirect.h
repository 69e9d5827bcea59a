/*
 * Go and static programs read the clock through the vDSO themselves
 * (vdso_redirect.c): its clock symbols are made to lead into the shim's
 * vDSO entries (calls/clock.h).
 */
#ifndef TIMECTL_VDSO_REDIRECT_H
#define TIMECTL_VDSO_REDIRECT_H

/* Go programs: 1 when the vDSO's clock symbols now lead into the shim. */
int tc_vdso_redirect(void);
/* Static programs: the same, to the reads that use no thread-local state. */
int tc_vdso_redirect_static(void);

#endif
