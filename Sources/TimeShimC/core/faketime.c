/*
 * libfaketime's settings: its variables, and FAKETIME's value parsed
 * (timectl_faketime.h). What each variable does under timectl is said for
 * people in docs/from-libfaketime.md, in the same order.
 */
#define _GNU_SOURCE
#include "timectl_faketime.h"
#include "timectl_timeline.h"

#include <string.h>
#include <time.h>

const struct tc_faketime_variable tc_faketime_variables[] = {
    {"FAKETIME", TC_FAKETIME_HONOURED, NULL, NULL},
    {"FAKETIME_TIMESTAMP_FILE", TC_FAKETIME_HONOURED, NULL, NULL},
    {"FAKETIME_UPDATE_TIMESTAMP_FILE", TC_FAKETIME_REFUSED, "1",
     "timectl never writes FAKETIME_TIMESTAMP_FILE; setting the clock in one process of a tree moves it for the"
     " whole tree, and a timectl session shares a settable clock between independent processes"},
    {"FAKETIME_DONT_RESET", TC_FAKETIME_HONOURED, NULL, NULL},
    {"FAKETIME_FMT", TC_FAKETIME_HONOURED, NULL, NULL},
    {"FAKETIME_XRESET", TC_FAKETIME_HONOURED, NULL, NULL},
    {"FAKETIME_FOLLOW_FILE", TC_FAKETIME_HONOURED, NULL, NULL},
    {"FAKETIME_NO_CACHE", TC_FAKETIME_HONOURED, NULL, NULL},
    {"FAKETIME_CACHE_DURATION", TC_FAKETIME_HONOURED, NULL, NULL},
    {"FAKETIME_DONT_FAKE_MONOTONIC", TC_FAKETIME_HONOURED, NULL, NULL},
    {"DONT_FAKE_MONOTONIC", TC_FAKETIME_HONOURED, NULL, NULL},
    {"FAKETIME_FORCE_MONOTONIC_FIX", TC_FAKETIME_NO_EFFECT, NULL, NULL},
    {"FAKETIME_WAIT_MS", TC_FAKETIME_NO_EFFECT, NULL, NULL},
    {"FAKETIME_DEBUG", TC_FAKETIME_NO_EFFECT, NULL, NULL},
    {"FAKETIME_SHARED", TC_FAKETIME_NO_EFFECT, NULL, NULL},
    {"NO_FAKE_STAT", TC_FAKETIME_HONOURED, NULL, NULL},
    {"FAKE_STAT", TC_FAKETIME_HONOURED, NULL, NULL},
    {"FAKE_UTIME", TC_FAKETIME_NO_EFFECT, NULL, NULL},
    {"FAKETIME_START_AFTER_SECONDS", TC_FAKETIME_HONOURED, NULL, NULL},
    {"FAKETIME_STOP_AFTER_SECONDS", TC_FAKETIME_HONOURED, NULL, NULL},
    {"FAKETIME_START_AFTER_NUMCALLS", TC_FAKETIME_HONOURED, NULL, NULL},
    {"FAKETIME_STOP_AFTER_NUMCALLS", TC_FAKETIME_HONOURED, NULL, NULL},
    {"FAKETIME_ONLY_CMDS", TC_FAKETIME_HONOURED, NULL, NULL},
    {"FAKETIME_SKIP_CMDS", TC_FAKETIME_HONOURED, NULL, NULL},
    {"FAKETIME_SPAWN_TARGET", TC_FAKETIME_REFUSED, NULL,
     "timectl does not run commands from inside a program's clock reads; start it from your script, or drive a"
     " timectl session's clock with its verbs"},
    {"FAKETIME_SPAWN_SECONDS", TC_FAKETIME_NO_EFFECT, NULL, NULL},
    {"FAKETIME_SPAWN_NUMCALLS", TC_FAKETIME_NO_EFFECT, NULL, NULL},
    {"FAKETIME_SAVE_FILE", TC_FAKETIME_REFUSED, NULL, "use timectl record --trace FILE -- CMD instead"},
    {"FAKETIME_LOAD_FILE", TC_FAKETIME_REFUSED, NULL, "use timectl replay FILE -- CMD instead"},
    {"FAKERANDOM_SEED", TC_FAKETIME_REFUSED, NULL, "timectl controls time only, not getrandom()"},
    {"FAKETIME_FAKEPID", TC_FAKETIME_REFUSED, NULL, "timectl controls time only, not getpid()"},
};
const size_t tc_faketime_variable_count = sizeof tc_faketime_variables / sizeof tc_faketime_variables[0];

/* Whether `entry` is NAME=… for `name`. */
static int entry_names(const char *entry, const char *name) {
    size_t length = strlen(name);
    return strncmp(entry, name, length) == 0 && entry[length] == '=';
}

int tc_environment_asks_faketime(char *const *environment) {
    for (char *const *entry = environment; entry && *entry; entry++)
        for (size_t i = 0; i < tc_faketime_variable_count; i++)
            if (entry_names(*entry, tc_faketime_variables[i].name)) return 1;
    return 0;
}

int tc_environment_controls_time(char *const *environment) {
    for (char *const *entry = environment; entry && *entry; entry++)
        if (entry_names(*entry, "TIMECTL_SEGMENT") && (*entry)[sizeof "TIMECTL_SEGMENT"]) return 1;
    return tc_environment_asks_faketime(environment);
}

int tc_faketime_decimal(const char *text, const char **end, double *value) {
    const char *at = text;
    double sign = 1, result = 0, scale = 1;
    if (*at == '+' || *at == '-') sign = *at++ == '-' ? -1 : 1;
    int digits = 0;
    for (; *at >= '0' && *at <= '9'; at++, digits++) result = result * 10 + (*at - '0');
    if ((*at == '.' || *at == ',') && at[1] >= '0' && at[1] <= '9')
        for (at++; *at >= '0' && *at <= '9'; at++, digits++) result += (*at - '0') * (scale /= 10);
    if (!digits) return 0;
    *end = at;
    *value = sign * result;
    return 1;
}

static const char *const accepted =
    "is none of libfaketime's forms: expected 'YYYY-MM-DD hh:mm:ss' (frozen), '@YYYY-MM-DD hh:mm:ss' (starts there and runs), '+N' or '-N'"
    " seconds (or with m, h, d, y), or '%' with FAKETIME_FOLLOW_FILE, optionally followed by 'xRATE' or"
    " 'iSECONDS'";

/* A date as libfaketime reads one: strptime, local time, then an optional fraction of a second. */
static const char *parse_date(const char *text, const char *format, int64_t *instant, const char **rest) {
    struct tm fields;
    memset(&fields, 0, sizeof fields);
    fields.tm_mday = 1;
    fields.tm_isdst = -1;
    const char *after = strptime(text, format, &fields);
    if (!after) return "does not match its date format";  /* the caller names the format */
    time_t seconds = mktime(&fields);
    int64_t nanoseconds = 0;
    if (*after == '.' && after[1] >= '0' && after[1] <= '9') {
        int64_t scale = TC_NS_PER_SECOND;
        for (after++; *after >= '0' && *after <= '9'; after++)
            if (scale > 1) nanoseconds += (*after - '0') * (scale /= 10);
    }
    if ((int64_t)seconds < TC_INSTANT_MIN / TC_NS_PER_SECOND || (int64_t)seconds >= TC_INSTANT_MAX / TC_NS_PER_SECOND)
        return "is outside the years 1900 to 2200 that timectl supports";
    *instant = (int64_t)seconds * TC_NS_PER_SECOND + nanoseconds;
    *rest = after;
    return NULL;
}

/* "xRATE", or else "iSECONDS", anywhere in `text` (libfaketime looks for the first 'x', else the first 'i'). */
static const char *parse_modifiers(const char *text, struct tc_faketime_spec *spec) {
    const char *at = strchr(text, 'x');
    const char *end;
    double value;
    if (at) {
        if (!tc_faketime_decimal(at + 1, &end, &value) || value <= 0) return "has an 'x' without a rate above 0";
        double fixed = value * (double)TC_RATE_ONE;
        if (fixed < (double)TC_RATE_MIN || fixed > (double)TC_RATE_MAX)
            return "has a rate outside the 0.001 to 1000000 that timectl supports";
        spec->has_rate = 1;
        spec->rate = (uint64_t)(fixed + 0.5);
    } else if ((at = strchr(text, 'i'))) {
        if (!tc_faketime_decimal(at + 1, &end, &value) || value < 0)
            return "has an 'i' without a number of seconds of at least 0";
        if (value > 86400.0 * 365 * 100) return "has an increment over 100 years";
        spec->has_increment = 1;
        spec->increment = (int64_t)(value * (double)TC_NS_PER_SECOND + 0.5);
    }
    return NULL;
}

const char *tc_faketime_parse(const char *text, const char *format, struct tc_faketime_spec *spec) {
    static const int64_t year = 365LL * 86400;
    memset(spec, 0, sizeof *spec);
    spec->rate = TC_RATE_ONE;
    if (!format) format = "%Y-%m-%d %T";
    const char *problem = NULL, *rest = text;
    switch (text[0]) {
    case 0: return "is empty; expected a date, '@' and a date, or an offset such as '+1d'";
    case '+':
    case '-': {
        double value;
        if (!tc_faketime_decimal(text, &rest, &value)) return accepted;
        /* libfaketime's unit: the first of m, h, d, y found anywhere in the value. */
        double unit = strchr(text, 'm') ? 60 : strchr(text, 'h') ? 3600 : strchr(text, 'd') ? 86400
                    : strchr(text, 'y') ? (double)year : 1;
        double seconds = value * unit;
        if (seconds > 200.0 * year || seconds < -200.0 * year) return "is an offset of more than 200 years";
        spec->kind = TC_FAKETIME_OFFSET;
        spec->offset = (int64_t)(seconds * (double)TC_NS_PER_SECOND);
        break;
    }
    case '@':
        spec->kind = TC_FAKETIME_START_AT;
        problem = parse_date(text + 1, format, &spec->instant, &rest);
        break;
    case '%':
        spec->kind = TC_FAKETIME_FOLLOW_FILE;
        rest = text + 1;
        break;
    case 'x':
    case 'i':
        spec->kind = TC_FAKETIME_MODIFIERS;
        break;
    default:
        spec->kind = TC_FAKETIME_FROZEN;
        problem = parse_date(text, format, &spec->instant, &rest);
        break;
    }
    if (problem) return problem;
    return parse_modifiers(rest, spec);
}
