/*
 * Checking a trace file (the format is timectl_trace.h's): shared by the
 * shim, which maps a trace to replay it, and TimeControlKit, which reads,
 * shows and writes traces.
 */
#include "timectl_trace.h"

#include <string.h>

uint64_t tc_trace_checksum(const uint8_t *file, uint64_t size) {
    const size_t field = offsetof(struct tc_trace_header, checksum);
    static const uint8_t zero[sizeof(uint64_t)];
    if (size < field + sizeof(uint64_t)) return tc_fnv1a(TC_FNV_OFFSET, file, (size_t)size);
    uint64_t hash = tc_fnv1a(TC_FNV_OFFSET, file, field);
    hash = tc_fnv1a(hash, zero, sizeof(zero));
    return tc_fnv1a(hash, file + field + sizeof(uint64_t), (size_t)(size - field - sizeof(uint64_t)));
}

static int inside(uint64_t offset, uint64_t length, uint64_t limit) {
    return offset <= limit && length <= limit - offset;
}

const char *tc_trace_validate(const uint8_t *file, uint64_t size, int verify_checksum, uint32_t *found_version) {
    struct tc_trace_header header;
    if (size < sizeof(header.magic) || memcmp(file, TC_TRACE_MAGIC, sizeof(header.magic)) != 0)
        return "is not a timectl trace";
    if (size < offsetof(struct tc_trace_header, version) + sizeof(uint32_t)) return "is truncated";
    memcpy(&header.version, file + offsetof(struct tc_trace_header, version), sizeof(uint32_t));
    if (found_version) *found_version = header.version;
    if (header.version < TC_TRACE_OLDEST_VERSION || header.version > TC_TRACE_VERSION)
        return "has another trace format version";
    if (size < sizeof(header)) return "is truncated";
    memcpy(&header, file, sizeof(header));
    if (header.header_size != sizeof(header)) return "has an inconsistent layout";
    if (header.file_size > size) return "is truncated";
    if (header.file_size != size) return "has an inconsistent layout";
    if (!inside(header.processes_offset, (uint64_t)header.process_count * sizeof(struct tc_trace_process), size) ||
        !inside(header.streams_offset, (uint64_t)header.stream_count * sizeof(struct tc_trace_stream), size) ||
        !inside(header.strings_offset, header.strings_size, size) || !inside(header.data_offset, header.data_size, size) ||
        header.processes_offset % 8 || header.streams_offset % 8)
        return "has an inconsistent layout";
    if (verify_checksum && tc_trace_checksum(file, size) != header.checksum)
        return "is corrupted (its checksum does not match its contents)";
    const struct tc_trace_process *processes = (const struct tc_trace_process *)(file + header.processes_offset);
    for (uint32_t i = 0; i < header.process_count; i++) {
        const struct tc_trace_process *p = &processes[i];
        if (!inside(p->path_offset, p->path_length, header.strings_size) ||
            !inside(p->argv_offset, p->argv_length, header.strings_size) ||
            !inside(p->first_stream, p->stream_count, header.stream_count) || p->image == 0)
            return "has an inconsistent layout";
    }
    const struct tc_trace_stream *streams = (const struct tc_trace_stream *)(file + header.streams_offset);
    for (uint32_t i = 0; i < header.stream_count; i++) {
        const struct tc_trace_stream *s = &streams[i];
        if (s->process >= header.process_count || !inside(s->data_offset, s->data_length, header.data_size))
            return "has an inconsistent layout";
    }
    /* A process's streams are its own, by increasing thread number (replay searches them). */
    for (uint32_t i = 0; i < header.process_count; i++) {
        for (uint32_t k = 0; k < processes[i].stream_count; k++) {
            const struct tc_trace_stream *s = &streams[processes[i].first_stream + k];
            if (s->process != i || (k > 0 && s->thread <= s[-1].thread)) return "has an inconsistent layout";
        }
    }
    return 0;
}
