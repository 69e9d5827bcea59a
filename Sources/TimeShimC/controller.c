/*
 * Compiled into TimeControlKit only, never into libTimeShim.so. A program
 * that links TimeControlKit (timectl, a Swift test harness) controls
 * sessions. If it is started with the shim preloaded — `timectl tick` run
 * from a script that `timectl run` started — the shim finds this ELF note
 * in the executable and stays out of the way. A note rather than a symbol:
 * SwiftPM does not export an executable's symbols dynamically, but every
 * linker loads SHT_NOTE sections into a PT_NOTE segment the shim can walk.
 */
#include "timectl_segment.h"

__attribute__((section(".note.timectl.controller"), aligned(4), used))
static const struct {
    unsigned int name_size, desc_size, type;
    char name[8];
    unsigned int desc;
} controller_note = {8, 4, TC_CONTROLLER_NOTE_TYPE, "timectl", 1};
