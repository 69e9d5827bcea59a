/*
 * libFuzzer target: the trace reader (timectl_trace.h, trace.c). Any
 * input is validated without checking the checksum (so the fuzzer reaches
 * the tables), then, if accepted, every stream is decoded to its end: no
 * read outside the file, no undefined behaviour. Built and run by
 * scripts/fuzz.sh.
 */
#include "timectl_trace.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t length) {
    /* The reader expects an aligned mapping. */
    uint8_t *file = malloc(length ? length : 1);
    memcpy(file, data, length);
    uint32_t version = 0;
    if (tc_trace_validate(file, length, 0, &version) == NULL) {
        struct tc_trace_header header;
        memcpy(&header, file, sizeof(header));
        const struct tc_trace_stream *streams = (const void *)(file + header.streams_offset);
        for (uint32_t s = 0; s < header.stream_count; s++) {
            struct tc_decoder decoder = {.next = file + header.data_offset + streams[s].data_offset};
            decoder.end = decoder.next + streams[s].data_length;
            struct tc_event event;
            uint32_t events = 0;
            while (tc_decode_event(&decoder, &event) == 1) events++;
        }
    }
    tc_trace_validate(file, length, 1, &version);
    free(file);
    return 0;
}
