/* Where sessions live (timectl_session_directory.h). */
#include "timectl_session_directory.h"

#include <stdio.h>

size_t tc_session_directory(const char *timectl_dir, const char *xdg_runtime_dir, uint32_t uid, char *path,
                            size_t capacity) {
    int length;
    if (timectl_dir && *timectl_dir) length = snprintf(path, capacity, "%s", timectl_dir);
    else if (xdg_runtime_dir && *xdg_runtime_dir) length = snprintf(path, capacity, "%s/timectl", xdg_runtime_dir);
    else length = snprintf(path, capacity, "/dev/shm/timectl-%u", (unsigned)uid);
    return length < 0 || (size_t)length >= capacity ? 0 : (size_t)length;
}
