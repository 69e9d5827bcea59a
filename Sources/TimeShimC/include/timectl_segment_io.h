/*
 * Everything that opens, checks, reads and writes a segment, for callers
 * that use most of it (TimeControlKit's umbrella header, the shim, the
 * tests): the headers of core/'s segment files. Declares nothing itself.
 */
#ifndef TIMECTL_SEGMENT_IO_H
#define TIMECTL_SEGMENT_IO_H

#include "timectl_segment.h"
#include "timectl_segment_checks.h"
#include "timectl_segment_file.h"
#include "timectl_segment_futex.h"
#include "timectl_segment_latch.h"
#include "timectl_segment_lock.h"
#include "timectl_segment_tables.h"
#include "timectl_timeline.h"

#endif
