/* What Swift needs from libc that its Glibc module does not show (controllers only). */
#ifndef TIMECTL_CONTROLLER_H
#define TIMECTL_CONTROLLER_H

#include <poll.h>
#include <spawn.h>
#include <stddef.h>
#include <stdint.h>

struct tc_segment;

/* posix_spawn_file_actions_addchdir_np (glibc 2.29), a GNU extension. */
int tc_spawn_file_actions_addchdir(posix_spawn_file_actions_t *actions, const char *directory);

/* pidfd_open(2) (Linux 5.3): a descriptor that turns readable when `pid` exits; −1 with errno. */
int tc_pidfd_open(int pid);

/* The calling thread's id. */
int tc_gettid(void);

/* pipe2(fds, O_CLOEXEC). */
int tc_pipe_cloexec(int fds[2]);

/* pread(2) from offset 0 as a plain system call: libc's pread is a cancellation
   point, a cost the scheduler's many /proc reads notice. Bytes read, or −1 with errno. */
long tc_proc_pread(int fd, void *buffer, size_t count);

/* The segment's futex words, by address (for tc_segment_wait_for_change). */
uint32_t *tc_generation_word(struct tc_segment *segment);
uint32_t *tc_wait_changes_word(struct tc_segment *segment);

/* An acquire load of a futex word; an increment of a process-private one that wakes its waiters. */
uint32_t tc_word_load(const uint32_t *word);
int32_t tc_word_load_i32(const int32_t *word);
uint64_t tc_word_load_u64(const uint64_t *word);
void tc_word_poke(uint32_t *word);
/* Blocks while a process-private word holds `value`, at most `timeout_ns` (< 0: no limit). */
void tc_word_wait(const uint32_t *word, uint32_t value, int64_t timeout_ns);

/* The library's own pauses and waits, on real time even in a process the shim controls (a test's own
   process under TimeControlKitTesting's trait): raw system calls, never libc's interposed ones. */
/* Sleeps `nanoseconds` of real time (EINTR resumes the rest). */
void tc_real_sleep_ns(int64_t nanoseconds);
/* poll(2) with a real-time timeout in ms (< 0: none), as ppoll; −1 with errno. */
int tc_real_poll(struct pollfd *fds, unsigned long count, int timeout_ms);

/* How many CPUs the calling thread may run on (at least 1). */
int tc_usable_cpus(void);
/* Whether a spin may go on at real time `now`: there is a CPU to spare, or there has not been
   one for less than 20 µs (a thread handing its CPU to one it just woke is crowded for a few
   µs); never with fewer than 2 CPUs, where anything awaited needs the spinner's CPU.
   `*crowded_since` (0: not crowded) is the caller's, kept from one call to the next. */
int tc_spin_may_go_on(int usable_cpus, int64_t *crowded_since, int64_t now);
/* Spins, keeping the CPU, until `word` (or, if given, `local`) leaves its value (1), or real
   CLOCK_MONOTONIC reaches `until_ns`, or — checked every 10 µs — the spin may not go on (0).
   Costs a CPU instead of a wake-up: for waits known to be short. */
int tc_words_spin(const uint32_t *word, uint32_t value, const uint32_t *local, uint32_t local_value, int64_t until_ns,
                  int usable_cpus, int64_t *crowded_since);

/* prctl(PR_SET_CHILD_SUBREAPER, 1): orphaned descendants are re-parented to this process. */
int tc_become_subreaper(void);

/* Whether `pid`, a child of this process, has not exited: one waitid(WNOWAIT) that reaps nothing,
   cheap enough to ask at every scheduler step (reading its /proc stat is not). 0 once it is a
   zombie, reaped, or not a child. */
int tc_child_is_running(int pid);

#endif
