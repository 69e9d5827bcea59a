/*
 * The processes of one `timectl run` (controllers only): every process the
 * command starts inherits TIMECTL_RUN=TOKEN, a token unique to the run, so
 * the run's processes can be found from /proc/PID/environ — also after they
 * are re-parented away from timectl, or after timectl itself is killed.
 */
#ifndef TIMECTL_RUN_H
#define TIMECTL_RUN_H

#include <stdint.h>

#define TC_RUN_VARIABLE "TIMECTL_RUN"

/*
 * Fills `pids` (up to `capacity`) with the live processes whose initial
 * environment holds TIMECTL_RUN=`token`, except `excluded`; returns how
 * many there are (may exceed `capacity`). Raw system calls, no allocation.
 */
int tc_run_members(const char *token, int32_t excluded, int32_t *pids, int capacity);

/*
 * The same for a run whose command got pid `first` at `since` (real
 * monotonic ns, read before it was started): when pids cannot have wrapped
 * round since, only processes started after the command are read (see
 * runguard.c); otherwise every process, as tc_run_members does.
 */
int tc_run_members_since(const char *token, int32_t excluded, int32_t first, int64_t since, int32_t *pids, int capacity);

/*
 * SIGKILLs every member of the run, again and again until none is left (a
 * member forking meanwhile is found on the next pass) and every one killed
 * has finished dying (see tc_run_await_end), or `rounds` passes of 5 ms
 * went by; returns how many were still found or dying on the last pass.
 */
int tc_run_kill_all(const char *token, int32_t excluded, int rounds);

/*
 * Waits, in passes of 5 ms up to `rounds`, until each of `pids` is gone or
 * a zombie; returns how many were not yet. A killed process stops being a
 * member (its environ reads empty) before it has finished exiting.
 */
int tc_run_await_end(const int32_t *pids, int count, int rounds);

/*
 * Starts the run's guardian: a child process, outside every signal and in
 * a process group of its own (a SIGKILL to this process's group does not
 * reach it), that waits on a pipe whose only writer is this process. When
 * this process ends without disarming it (killed with SIGKILL, crashed),
 * the guardian kills every member of the run, removes `segment` (an
 * absolute path, or NULL: the segment of a private session that was to end
 * with the run), and exits. Returns the pipe's write end (close-on-exec),
 * or −1 with errno; `guardian` receives its pid.
 */
int tc_run_guardian_start(const char *token, const char *segment, int32_t *guardian);

/* The run ended as it should: the guardian exits without killing anything. */
void tc_run_guardian_disarm(int fd);

#endif
