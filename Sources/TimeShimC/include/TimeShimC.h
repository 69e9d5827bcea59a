/* The module TimeControlKit imports: the segment, its arithmetic, real clocks, the trace format. */
#include "timectl_controller.h"
#include "timectl_program_support.h"
#include "timectl_realclock.h"
#include "timectl_segment.h"
#include "timectl_segment_io.h"
#include "timectl_timeline.h"
#include "timectl_trace.h"
