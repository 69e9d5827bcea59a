/*
 * libfaketime's settings (core/faketime.c): the variables libfaketime
 * 0.9.10 reads, what the shim does with each, whether an environment asks
 * for a timeline at all, and FAKETIME's value parsed. Shared by the shim
 * (which honours the variables when no session is named: SPEC §13,
 * docs/from-libfaketime.md), timectl-static-loader and `timectl faketime`,
 * so that each of them reads a setting the same way.
 */
#ifndef TIMECTL_FAKETIME_H
#define TIMECTL_FAKETIME_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* What the shim does with one of libfaketime's variables. */
enum tc_faketime_handling {
    TC_FAKETIME_HONOURED = 1, /* with libfaketime's meaning */
    TC_FAKETIME_NO_EFFECT = 2, /* accepted: what it tunes does not exist here (said in docs/from-libfaketime.md) */
    TC_FAKETIME_REFUSED = 3,  /* the process refuses to run, with one line naming it */
};

struct tc_faketime_variable {
    const char *name;
    int handling;             /* enum tc_faketime_handling */
    /* Refused only when it has this value (libfaketime acts on no other); NULL: whatever its value. */
    const char *refused_value;
    /* For a refused variable: why, and what to use instead (the end of the refusal's line). */
    const char *instead;
};

/* Every variable libfaketime 0.9.10 reads (its README and src/libfaketime.c), in README order. */
extern const struct tc_faketime_variable tc_faketime_variables[];
extern const size_t tc_faketime_variable_count;

/* The variable through which the processes of one tree share their timeline (the file of its segment). */
#define TC_FAKETIME_SEGMENT_VARIABLE "TIMECTL_FAKETIME_SEGMENT"

/*
 * Whether an environment (NAME=VALUE entries, NULL-terminated; NULL for
 * none) puts a process that loads the shim on a timeline: it names a
 * session (TIMECTL_SEGMENT, not empty: a session wins), or it holds one of
 * libfaketime's variables. 0: the process runs on real time, as before.
 * Allocation-free: it runs on the exec path.
 */
int tc_environment_controls_time(char *const *environment);
/* The same for libfaketime's variables alone (and no session). */
int tc_environment_asks_faketime(char *const *environment);

/* The forms of FAKETIME (libfaketime's README, 4b–4e). */
enum tc_faketime_kind {
    TC_FAKETIME_FROZEN = 1,      /* "YYYY-MM-DD hh:mm:ss": every clock stands at `instant` */
    TC_FAKETIME_START_AT = 2,    /* "@YYYY-MM-DD hh:mm:ss": starts at `instant`, then runs */
    TC_FAKETIME_OFFSET = 3,      /* "+N" / "-N" with m, h, d or y: real time plus `offset` */
    TC_FAKETIME_FOLLOW_FILE = 4, /* "%": starts at the mtime of FAKETIME_FOLLOW_FILE */
    TC_FAKETIME_MODIFIERS = 5,   /* only "xRATE" or "iSECONDS": the clocks read real time */
};

struct tc_faketime_spec {
    int32_t kind;                /* enum tc_faketime_kind */
    int32_t has_rate;            /* "xRATE" given: waits last 1/RATE as long */
    int64_t instant;             /* FROZEN, START_AT: ns since the epoch */
    int64_t offset;              /* OFFSET: ns, either sign */
    uint64_t rate;               /* fixed point (timectl_timeline.h); TC_RATE_ONE without "x" */
    int64_t increment;           /* "iSECONDS": ns every reading adds; 0 without */
    int32_t has_increment;
    int32_t reserved;
};

/*
 * Parses FAKETIME's value as libfaketime does: dates with strptime
 * `format` (FAKETIME_FMT; NULL for libfaketime's "%Y-%m-%d %T") in the
 * local time zone (mktime), an optional ".fraction" after them; offsets as
 * a decimal number ('.' or ',') scaled by the first of m, h, d, y found;
 * then "xRATE" (or else "iSECONDS"). NULL on success, else a phrase saying
 * what is wrong and what is accepted.
 */
const char *tc_faketime_parse(const char *text, const char *format, struct tc_faketime_spec *spec);

/* A decimal number as libfaketime's values are written ('.' or ',' before a fraction): 1 and *value, or 0. */
int tc_faketime_decimal(const char *text, const char **end, double *value);

#ifdef __cplusplus
}
#endif

#endif
