/* The program-kind check: Go build notes. */
#include "shim_test.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
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

static size_t put_note(unsigned char *notes, size_t at, const char *name, uint32_t name_size, uint32_t type,
                       uint32_t desc_size, size_t alignment) {
    uint32_t header[3] = {name_size, desc_size, type};
    memcpy(notes + at, header, sizeof(header));
    memcpy(notes + at + 12, name, name_size);
    at = (at + 12 + name_size + alignment - 1) & ~(alignment - 1);
    memset(notes + at, 0xA5, desc_size);
    return (at + desc_size + alignment - 1) & ~(alignment - 1);
}

/* The notes checked from a heap copy of exactly `size` bytes: AddressSanitizer sees any read past them. */
static int go_program(const unsigned char *notes, size_t size, size_t alignment) {
    unsigned char *copy = malloc(size ? size : 1);
    memcpy(copy, notes, size);
    int found = tc_notes_mark_go_program(copy, size, alignment);
    free(copy);
    return found;
}

/* The one test of "is this a Go program" (timectl_program.h), as both its users meet notes. */
void test_go_notes(void) {
    static unsigned char notes[512];
    /* What a cgo build carries: the GNU build id, then Go's ("Go\0\0", type 4). */
    size_t gnu_end = put_note(notes, 0, "GNU", 4, 3, 20, 4);
    size_t go_end = put_note(notes, gnu_end, "Go\0", 4, 4, 83, 4);
    CHECK(go_program(notes, go_end, 4), "the Go linker's build-id note after the GNU one");
    CHECK(!go_program(notes, gnu_end, 4), "the GNU build id alone");
    CHECK(!go_program(notes, gnu_end + 12 + 2, 4), "a Go note cut inside its name");
    CHECK(!go_program(notes, 0, 4) && !go_program(notes, 11, 4), "no note, or less than a note header");

    size_t end = put_note(notes, 0, "Go", 3, 1, 8, 4);
    CHECK(go_program(notes, end, 4), "an owner of 3 bytes (\"Go\\0\") and another Go note type");
    end = put_note(notes, 0, "Gopher", 7, 4, 8, 4);
    CHECK(!go_program(notes, end, 4), "an owner that only begins with Go");
    end = put_note(notes, 0, "Go\0x", 4, 4, 8, 4);
    CHECK(!go_program(notes, end, 4), "an owner with more than NULs after Go");

    /* A descriptor size that points far past the end ends the walk. */
    memset(notes, 0, sizeof(notes));
    put_note(notes, 0, "GNU", 4, 3, 0, 4);
    uint32_t huge = UINT32_MAX;
    memcpy(notes + 4, &huge, sizeof(huge));
    put_note(notes, 16, "Go\0", 4, 4, 8, 4);
    CHECK(!go_program(notes, 36, 4), "a note whose descriptor runs past the segment hides what follows");

    /* An 8-aligned segment (.note.gnu.property): a 12-byte descriptor is padded to 16. */
    end = put_note(notes, 0, "GNU", 4, 5, 12, 8);
    CHECK(end == 32, "an 8-aligned note takes 32 bytes, %zu", end);
    end = put_note(notes, end, "Go\0", 4, 4, 8, 8);
    CHECK(go_program(notes, end, 8), "a Go note after an 8-aligned one");

    /* The controller's note, as controller/controller.c lays it out. */
    end = put_note(notes, 0, "timectl", 8, TC_CONTROLLER_NOTE_TYPE, 4, 4);
    CHECK(tc_notes_include(notes, end, 4, "timectl", TC_CONTROLLER_NOTE_TYPE), "the controller note");
    CHECK(!tc_notes_include(notes, end, 4, "timectl", TC_CONTROLLER_NOTE_TYPE + 1), "another type of timectl's");
    CHECK(!go_program(notes, end, 4), "the controller note is not Go's");

    /* And a program of the same file test: this C test program is no Go program. */
    struct tc_program program;
    tc_program_inspect(AT_FDCWD, "/proc/self/exe", &program);
    CHECK(program.kind == TC_PROGRAM_CONTROLLABLE, "this test program's kind: %d", (int)program.kind);
}
