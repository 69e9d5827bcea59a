/*
 * sigaction, signal and the signal masks (signals.c): what other files of
 * the shim reach of them.
 */
#ifndef TIMECTL_SIGNALS_H
#define TIMECTL_SIGNALS_H

/* Called by attach/attach.c in a fork child: the handler table's lock may have been held by a thread the child
   does not have. */
void tc_signals_after_fork_in_child(void);

#endif
