/*
 * Descriptors the shim keeps for itself (wake eventfds, timer duplicates).
 * The application cannot close them — close() on one succeeds without
 * closing it — so their numbers are never reused for its own files, where
 * the shim would read or write. dup2()/dup3() onto one takes the number
 * away from the shim, which then makes another. owned_descriptors.c holds
 * the record (calls/descriptor_calls.c the close/dup2/dup3 interposers);
 * nothing else decides which descriptors are the shim's.
 */
#ifndef TIMECTL_SHIM_DESCRIPTORS_H
#define TIMECTL_SHIM_DESCRIPTORS_H

/* Descriptors numbered from here on are never the shim's (the record's size). */
#define TC_OWNED_FD_BITS 65536

void tc_fd_claim(int fd);
void tc_fd_release(int fd);
int tc_fd_owned(int fd);

#endif
