/* Record and replay: a workload this binary runs in a child, recorded, then replayed. */
#include "shim_test.h"
#include "../../Sources/TimeShimC/shim/runtime/process.h"
#include "../../Sources/TimeShimC/shim/trace/trace_dispatch.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/timerfd.h>
#include <sys/timex.h>
#include <sys/wait.h>
#include <unistd.h>

#define WORKLOAD_READS 300

struct workload {
    pthread_t thread;
    int reads;
    int64_t values[WORKLOAD_READS + 8];
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cond;
static struct workload workload_threads[2];
static int second_thread_done;

static void *workload_thread(void *argument) {
    struct workload *self = argument;
    for (int i = 0; i < self->reads; i++) {
        /* Thread A's last recorded reading comes after thread B's last, in the recording and in the replay alike:
           a reading past the recording then continues from A's (the process's last replayed value), whatever the
           threads' speeds (under qemu-user they differ most). No clock is read while it waits. */
        if (self == &workload_threads[0] && i == WORKLOAD_READS - 1)
            while (!__atomic_load_n(&second_thread_done, __ATOMIC_ACQUIRE)) sched_yield();
        self->values[i] = now_ns(CLOCK_REALTIME);
        if (i == WORKLOAD_READS / 2) {
            /* A timed wait whose deadline has passed: recorded, and replayed, as a wait. */
            struct timespec past = {1, 0};
            pthread_mutex_lock(&lock);
            pthread_cond_timedwait(&cond, &lock, &past);
            pthread_mutex_unlock(&lock);
        }
    }
    if (self == &workload_threads[1]) __atomic_store_n(&second_thread_done, 1, __ATOMIC_RELEASE);
    return NULL;
}

/* The Go runtime's way (trace_replay.c, "Go programs"): time.Now() reads the wall clock and at once the monotonic one;
   the runtime reads the monotonic clock on its own in between. Each round stores the three. */
static void *go_workload_thread(void *argument) {
    struct workload *self = argument;
    for (int i = 0; i + 3 <= self->reads; i += 3) {
        self->values[i] = now_ns(CLOCK_REALTIME);
        self->values[i + 1] = now_ns(CLOCK_MONOTONIC);
        self->values[i + 2] = now_ns(CLOCK_MONOTONIC);
    }
    return NULL;
}


/*
 * Two threads read the clock; thread A reads SHIM_TEST_EXTRA more times (rounds, with SHIM_TEST_GO). Writes what
 * they read to SHIM_TEST_RESULTS. With SHIM_TEST_GO the process is taken for a Go program, as the shim takes one
 * at attach, and reads as Go does.
 */
int run_workload(void) {
    const char *extra = getenv("SHIM_TEST_EXTRA");
    int go = getenv("SHIM_TEST_GO") != NULL;
    struct workload *threads = workload_threads;
    threads[0].reads = WORKLOAD_READS + (extra ? atoi(extra) : 0) * (go ? 3 : 1);
    threads[1].reads = WORKLOAD_READS;
    pthread_cond_init(&cond, NULL);
    if (go && (!tc_shim_attached_segment || tc_trace_go_program_begins(tc_shim_attached_segment) != NULL)) return 3;
    for (int i = 0; i < 2; i++) pthread_create(&threads[i].thread, NULL, go ? go_workload_thread : workload_thread, &threads[i]);
    for (int i = 0; i < 2; i++) pthread_join(threads[i].thread, NULL);
    FILE *results = fopen(getenv("SHIM_TEST_RESULTS"), "w");
    if (!results) return 2;
    for (int i = 0; i < 2; i++) {
        fwrite(&threads[i].reads, sizeof(int), 1, results);
        fwrite(threads[i].values, sizeof(int64_t), (size_t)threads[i].reads, results);
    }
    fclose(results);
    return 0;
}

static int run_self(char **argv, const char *const *variables) {
    pid_t child = fork();
    if (child == 0) {
        for (int i = 0; variables[i]; i += 2) setenv(variables[i], variables[i + 1], 1);
        execv("/proc/self/exe", argv);
        _exit(127);
    }
    int status = 0;
    waitpid(child, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

static void *read_whole(const char *path, size_t *size) {
    FILE *file = fopen(path, "r");
    if (!file) return NULL;
    fseek(file, 0, SEEK_END);
    *size = (size_t)ftell(file);
    fseek(file, 0, SEEK_SET);
    void *bytes = malloc(*size ? *size : 1);
    if (fread(bytes, 1, *size, file) != *size) *size = 0;
    fclose(file);
    return bytes;
}

static void write_whole(const char *path, const void *bytes, size_t size) {
    FILE *file = fopen(path, "w");
    CHECK(file && fwrite(bytes, 1, size, file) == size, "writing %s", path);
    if (file) fclose(file);
}

static void make_registry(const char *directory) {
    char path[512];
    snprintf(path, sizeof(path), "%s/" TC_REGISTRY_FILE, directory);
    size_t size = sizeof(struct tc_registry_header) + 256 * sizeof(struct tc_registry_entry);
    struct tc_registry_header *header = calloc(1, size);
    memcpy(header->magic, TC_REGISTRY_MAGIC, sizeof(header->magic));
    header->version = TC_RECORDING_VERSION;
    header->capacity = 256;
    for (int c = 0; c < TC_VCLOCKS; c++) header->last_replayed[c] = INT64_MIN;
    write_whole(path, header, size);
    free(header);
}

/* What each recorded thread's chunks hold, concatenated in sequence order. */
struct recorded_thread {
    uint8_t bytes[1 << 16];
    size_t length;
};

static void collect_raw(const char *directory, struct recorded_thread threads[3], struct tc_raw_header *process) {
    char path[512];
    snprintf(path, sizeof(path), "%s/p0-1.raw", directory);
    size_t size = 0;
    uint8_t *raw = read_whole(path, &size);
    CHECK(raw && size >= TC_RAW_HEADER_SIZE, "the workload's raw file %s", path);
    if (!raw || size < TC_RAW_HEADER_SIZE) return;
    memcpy(process, raw, sizeof(*process));
    CHECK(memcmp(process->magic, TC_RAW_MAGIC, 8) == 0 && process->image == 1 && process->lost_events == 0, "raw header");
    for (uint32_t sequence = 0; sequence < 64; sequence++) {
        for (size_t offset = TC_RAW_HEADER_SIZE; offset + TC_CHUNK_SIZE <= size; offset += TC_CHUNK_SIZE) {
            struct tc_chunk_header chunk;
            memcpy(&chunk, raw + offset, sizeof(chunk));
            if (chunk.magic != TC_CHUNK_MAGIC || chunk.sequence != sequence || chunk.thread > 2) continue;
            struct recorded_thread *thread = &threads[chunk.thread];
            if (thread->length + chunk.length > sizeof(thread->bytes)) continue;
            memcpy(thread->bytes + thread->length, raw + offset + sizeof(chunk), chunk.length);
            thread->length += chunk.length;
        }
    }
    free(raw);
}

/* Checks a recorded thread's events against what it read: its readings in order, and `expected_waits` waits. */
static void check_recorded(const struct recorded_thread *thread, const int64_t *values, int reads, int expected_waits,
                           const char *name) {
    struct tc_decoder decoder = {thread->bytes, thread->bytes + thread->length, {0}};
    struct tc_event event;
    int readings = 0, waits = 0, mismatched = 0, result;
    while ((result = tc_decode_event(&decoder, &event)) == 1) {
        if (event.type == TC_EVENT_READ) mismatched += readings >= reads || event.value != values[readings], readings++;
        if (event.type == TC_EVENT_WAIT_BEGIN) waits++;
    }
    CHECK(result == 0, "thread %s: the recording decodes to its end", name);
    CHECK(readings == reads && mismatched == 0 && waits == expected_waits, "thread %s: %d readings (%d differ), %d waits",
          name, readings, mismatched, waits);
}

/* The workload's results file: per thread, its count, then its values (copied out: they lie unaligned). */
struct workload_results {
    int counts[2];
    int64_t values[2][WORKLOAD_READS + 8];
};

static int read_results(const char *path, struct workload_results *results) {
    size_t size = 0, offset = 0;
    uint8_t *bytes = read_whole(path, &size);
    int complete = bytes != NULL;
    for (int t = 0; t < 2 && complete; t++) {
        complete = offset + sizeof(int) <= size;
        if (!complete) break;
        memcpy(&results->counts[t], bytes + offset, sizeof(int));
        offset += sizeof(int);
        size_t length = (size_t)results->counts[t] * sizeof(int64_t);
        complete = results->counts[t] >= 0 && results->counts[t] <= WORKLOAD_READS + 8 && offset + length <= size;
        if (complete) memcpy(results->values[t], bytes + offset, length);
        offset += length;
    }
    free(bytes);
    return complete;
}

/* The trace timectl would write from the workload's recording: one process, threads 1 and 2. */
static void write_workload_trace(const char *trace_path, const struct recorded_thread threads[3],
                                 const struct tc_raw_header *process) {
    struct tc_trace_header header;
    memset(&header, 0, sizeof(header));
    memcpy(header.magic, TC_TRACE_MAGIC, 8);
    header.version = TC_TRACE_VERSION;
    header.header_size = sizeof(header);
    header.process_count = 1;
    header.stream_count = 2;
    header.processes_offset = sizeof(header);
    header.streams_offset = header.processes_offset + sizeof(struct tc_trace_process);
    header.strings_offset = header.streams_offset + 2 * sizeof(struct tc_trace_stream);
    header.strings_size = 1 + process->argv_length;
    header.data_offset = header.strings_offset + header.strings_size;
    header.data_size = threads[1].length + threads[2].length;
    header.file_size = header.data_offset + header.data_size;
    struct tc_trace_process image = {0, 1, 1, 1, process->argv_length, process->pid, 0, 2};
    struct tc_trace_stream streams[2] = {{0, 1, 0, threads[1].length, 0, 0}, {0, 2, threads[1].length, threads[2].length, 0, 0}};
    uint8_t *file = calloc(1, header.file_size);
    memcpy(file + header.processes_offset, &image, sizeof(image));
    memcpy(file + header.streams_offset, streams, sizeof(streams));
    file[header.strings_offset] = '1';
    memcpy(file + header.strings_offset + 1, process->argv, process->argv_length);
    memcpy(file + header.data_offset, threads[1].bytes, threads[1].length);
    memcpy(file + header.data_offset + threads[1].length, threads[2].bytes, threads[2].length);
    memcpy(file, &header, sizeof(header));
    header.checksum = tc_trace_checksum(file, header.file_size);
    memcpy(file, &header, sizeof(header));
    CHECK(tc_trace_validate(file, header.file_size, 1, NULL) == NULL, "the trace is valid");
    write_whole(trace_path, file, header.file_size);
    free(file);
}

/* A replay's working directory, as timectl replay makes it: a registry, the claim of the one image, no divergences. */
static void prepare_replay(const char *replaying) {
    char path[512];
    mkdir(replaying, 0700);
    make_registry(replaying);
    snprintf(path, sizeof(path), "%s/" TC_CLAIMS_FILE, replaying);
    write_whole(path, "", 1);
    snprintf(path, sizeof(path), "%s/" TC_DIVERGENCES_FILE, replaying);
    write_whole(path, "", 0);
}

/* The workload recorded in `workdir`/NAME-recording, its trace written to `trace_path`; 1 if it ran and was recorded whole. */
static int record_workload(char **argv, const char *workdir, const char *name, int go, struct workload_results *recorded,
                           const char *trace_path) {
    char recording[256], results[256];
    snprintf(recording, sizeof(recording), "%s/%s-recording", workdir, name);
    snprintf(results, sizeof(results), "%s/%s-results", workdir, name);
    mkdir(recording, 0700);
    make_registry(recording);
    const char *record_variables[] = {"SHIM_TEST_WORKLOAD", "1", "TIMECTL_RECORD", recording, "SHIM_TEST_RESULTS", results,
                                      go ? "SHIM_TEST_GO" : NULL, "1", NULL};
    CHECK(run_self(argv, record_variables) == 0, "the recorded %s workload ran", name);
    int complete = read_results(results, recorded);
    CHECK(complete && recorded->counts[0] == WORKLOAD_READS && recorded->counts[1] == WORKLOAD_READS, "%s workload results", name);
    if (!complete) return 0;
    static struct recorded_thread threads[3];
    memset(threads, 0, sizeof(threads));
    struct tc_raw_header process;
    memset(&process, 0, sizeof(process));
    collect_raw(recording, threads, &process);
    CHECK(threads[0].length == 0, "%s: the main thread read nothing", name);
    check_recorded(&threads[1], recorded->values[0], WORKLOAD_READS, go ? 0 : 1, "A");
    check_recorded(&threads[2], recorded->values[1], WORKLOAD_READS, go ? 0 : 1, "B");
    write_workload_trace(trace_path, threads, &process);
    return 1;
}

/* Replays the trace at `trace_path` in `workdir`/NAME-replay, thread A going one step further than recorded; 1 if complete. */
static int replay_workload(char **argv, const char *workdir, const char *name, int go, const char *trace_path,
                           struct workload_results *replayed, char divergences_path[512]) {
    char replaying[256], results[256];
    snprintf(replaying, sizeof(replaying), "%s/%s-replay", workdir, name);
    snprintf(results, sizeof(results), "%s/%s-replayed", workdir, name);
    prepare_replay(replaying);
    snprintf(divergences_path, 512, "%s/" TC_DIVERGENCES_FILE, replaying);
    const char *replay_variables[] = {"SHIM_TEST_WORKLOAD", "1", "TIMECTL_REPLAY", trace_path, "TIMECTL_REPLAY_DIR", replaying,
                                      "SHIM_TEST_RESULTS", results, "SHIM_TEST_EXTRA", "1", go ? "SHIM_TEST_GO" : NULL, "1", NULL};
    CHECK(run_self(argv, replay_variables) == 0, "the replayed %s workload ran", name);
    return read_results(results, replayed);
}

void test_record_and_replay(char **argv, const char *workdir) {
    char trace_path[256], path[512];
    snprintf(trace_path, sizeof(trace_path), "%s/workload.trace", workdir);
    static struct workload_results recorded, replayed;
    if (!record_workload(argv, workdir, "threads", 0, &recorded, trace_path)) return;
    const int64_t *a = recorded.values[0], *b = recorded.values[1];

    /* Replayed, thread A reading once more than it was recorded reading. */
    int complete = replay_workload(argv, workdir, "threads", 0, trace_path, &replayed, path);
    CHECK(complete && replayed.counts[0] == WORKLOAD_READS + 1, "thread A read once more");
    if (complete && replayed.counts[0] == WORKLOAD_READS + 1) {
        CHECK(memcmp(replayed.values[0], a, WORKLOAD_READS * sizeof(int64_t)) == 0, "thread A read its recorded values");
        CHECK(memcmp(replayed.values[1], b, WORKLOAD_READS * sizeof(int64_t)) == 0, "thread B read its recorded values");
        CHECK(replayed.values[0][WORKLOAD_READS] >= a[WORKLOAD_READS - 1], "after the divergence the clock went on from the last value");
    }
    size_t size = 0;
    struct tc_divergence *divergences = read_whole(path, &size);
    CHECK(divergences && size == sizeof(struct tc_divergence), "one divergence reported, %zu bytes", size);
    if (divergences && size == sizeof(struct tc_divergence)) {
        CHECK(divergences->reason == TC_DIVERGED_PAST_END && divergences->thread == 1 &&
                  divergences->call == WORKLOAD_READS + 2 && strcmp(divergences->path, "1") == 0 &&
                  divergences->asked.type == TC_EVENT_READ && divergences->asked.clock == CLOCK_REALTIME,
              "the divergence: reason %u thread %u call %u path %s", divergences->reason, divergences->thread,
              divergences->call, divergences->path);
    }
    free(divergences);
}

/*
 * A Go program is replayed per process (trace_replay.c): its two threads' time.Now() rounds hand out the recorded
 * (wall, monotonic) pairs in monotonic order, whichever thread asks; the runtime's own monotonic reads never go
 * back; one round more than recorded is one divergence of the process.
 */
void test_go_replay(char **argv, const char *workdir) {
    char trace_path[256], path[512];
    snprintf(trace_path, sizeof(trace_path), "%s/go.trace", workdir);
    static struct workload_results recorded, replayed;
    if (!record_workload(argv, workdir, "go", 1, &recorded, trace_path)) return;
    int complete = replay_workload(argv, workdir, "go", 1, trace_path, &replayed, path);
    CHECK(complete && replayed.counts[0] == WORKLOAD_READS + 3, "thread A read one round more");
    if (!complete || replayed.counts[0] != WORKLOAD_READS + 3) return;
    const int rounds = WORKLOAD_READS / 3;
    int unmatched = 0, out_of_order = 0, went_back = 0;
    for (int t = 0; t < 2; t++) {
        int64_t last_observed = INT64_MIN, last_runtime = INT64_MIN;
        for (int i = 0; i < replayed.counts[t]; i += 3) {
            const int64_t *round = &replayed.values[t][i];
            int found = 0;
            for (int u = 0; u < 2 && !found; u++)
                for (int j = 0; j < rounds * 3 && !found; j += 3)
                    found = recorded.values[u][j] == round[0] && recorded.values[u][j + 1] == round[1];
            unmatched += !found;
            if (found) {
                out_of_order += round[1] < last_observed;
                last_observed = round[1];
            }
            went_back += round[2] < last_runtime;
            last_runtime = round[2];
        }
    }
    /* Two hundred recorded rounds, two hundred and one asked for: exactly one is not a recorded one. */
    CHECK(unmatched == 1, "%d of the replayed time.Now() rounds are not recorded (wall, monotonic) pairs", unmatched);
    CHECK(out_of_order == 0, "%d rounds took an observation earlier than the thread's previous one", out_of_order);
    CHECK(went_back == 0, "%d of the runtime's own monotonic reads went back", went_back);
    size_t size = 0;
    struct tc_divergence *divergences = read_whole(path, &size);
    CHECK(divergences && size == sizeof(struct tc_divergence), "one divergence for the process, %zu bytes", size);
    if (divergences && size == sizeof(struct tc_divergence)) {
        CHECK(divergences->reason == TC_DIVERGED_GO_PAST_END && divergences->call == 2 * rounds + 1 &&
                  strcmp(divergences->path, "1") == 0 && divergences->asked.clock == CLOCK_REALTIME,
              "the divergence: reason %u call %u path %s", divergences->reason, divergences->call, divergences->path);
    }
    free(divergences);
}

/* Appends one ELF note to `notes` at `at`, padded to `alignment`; returns where the next one goes. */
