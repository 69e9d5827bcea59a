/*
 * Where sessions live (core/session_directory.c): the one rule, for
 * TimeControlKit's SessionDirectory and for the shim's clocks on
 * libfaketime's variables.
 */
#ifndef TIMECTL_SESSION_DIRECTORY_H
#define TIMECTL_SESSION_DIRECTORY_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/*
 * The per-user directory of session segments: `timectl_dir` ($TIMECTL_DIR)
 * if set and not empty, else `xdg_runtime_dir` ($XDG_RUNTIME_DIR) + "/timectl",
 * else "/dev/shm/timectl-UID". Writes it, NUL-terminated, into `path`;
 * returns its length, or 0 if it does not fit in `capacity`.
 */
size_t tc_session_directory(const char *timectl_dir, const char *xdg_runtime_dir, uint32_t uid, char *path,
                            size_t capacity);

#ifdef __cplusplus
}
#endif

#endif
