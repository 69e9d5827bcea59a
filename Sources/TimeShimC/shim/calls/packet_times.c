/*
 * Time stamps the kernel gives a program with the packets it receives:
 * SO_TIMESTAMP, SO_TIMESTAMPNS and SO_TIMESTAMPING control messages from
 * recvmsg and recvmmsg (old and new forms), and the SIOCGSTAMP and
 * SIOCGSTAMPNS ioctls. The kernel takes them from CLOCK_REALTIME when the
 * packet arrives; they are mapped, as file times are, to the virtual wall
 * time at which that instant happened in the session
 * (timectl_filetimes.h), so that `ping` computes its round trips from its
 * own clock reads and the packets' stamps on one timeline. A
 * SO_TIMESTAMPING stamp from the network card's own clock (the third) is
 * left as it is: it is not CLOCK_REALTIME.
 *
 * recvmsg costs one more check for every call: whether any control message
 * came back (msg_controllen, which the kernel sets to what it wrote).
 */
#define _GNU_SOURCE
#include "../runtime/libc_originals.h"
#include "../runtime/process.h"
#include "timectl_filetimes.h"

#include <linux/sockios.h>
#include <stdarg.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>

/* The control message types carrying CLOCK_REALTIME stamps, old and new (64-bit time) forms; on x86-64 and
   aarch64 both forms have the same layout: a struct timeval, a struct timespec, or three timespecs. */
enum { STAMP_TIMEVAL, STAMP_TIMESPEC, STAMP_TIMESTAMPING, STAMP_NONE };

static int stamp_kind(int type) {
    switch (type) {
    case 29: case 63: return STAMP_TIMEVAL;       /* SO_TIMESTAMP_OLD, SO_TIMESTAMP_NEW */
    case 35: case 64: return STAMP_TIMESPEC;      /* SO_TIMESTAMPNS_OLD, SO_TIMESTAMPNS_NEW */
    case 37: case 65: return STAMP_TIMESTAMPING;  /* SO_TIMESTAMPING_OLD, SO_TIMESTAMPING_NEW */
    default: return STAMP_NONE;
    }
}

static int64_t to_virtual(const struct tc_segment *segment, int64_t real) {
    /* Packet stamps come from the precise clock, not the coarse one file times lag by. */
    return tc_file_time_to_virtual(segment, real, 0);
}

static void map_timeval(const struct tc_segment *segment, unsigned char *at) {
    struct timeval stamp;
    memcpy(&stamp, at, sizeof stamp);
    if (stamp.tv_sec == 0 && stamp.tv_usec == 0) return;
    int64_t virtual_time = to_virtual(segment, (int64_t)stamp.tv_sec * 1000000000 + stamp.tv_usec * 1000);
    stamp.tv_sec = virtual_time / 1000000000;
    stamp.tv_usec = virtual_time % 1000000000 / 1000;
    memcpy(at, &stamp, sizeof stamp);
}

static void map_timespec(const struct tc_segment *segment, unsigned char *at) {
    struct timespec stamp;
    memcpy(&stamp, at, sizeof stamp);
    if (stamp.tv_sec == 0 && stamp.tv_nsec == 0) return;  /* no stamp of that kind */
    stamp = tc_timespec_from_ns(to_virtual(segment, tc_timespec_ns(stamp)));
    memcpy(at, &stamp, sizeof stamp);
}

static void map_control_messages(struct msghdr *message) {
    const struct tc_segment *segment = tc_shim_segment();
    if (!segment) return;
    for (struct cmsghdr *control = CMSG_FIRSTHDR(message); control; control = CMSG_NXTHDR(message, control)) {
        if (control->cmsg_level != SOL_SOCKET) continue;
        size_t length = control->cmsg_len - CMSG_LEN(0);
        unsigned char *data = CMSG_DATA(control);
        switch (stamp_kind(control->cmsg_type)) {
        case STAMP_TIMEVAL:
            if (length >= sizeof(struct timeval)) map_timeval(segment, data);
            break;
        case STAMP_TIMESPEC:
            if (length >= sizeof(struct timespec)) map_timespec(segment, data);
            break;
        case STAMP_TIMESTAMPING:
            /* The software stamp, and the legacy one (zero since Linux 3.17); not the card's own. */
            if (length >= 2 * sizeof(struct timespec)) {
                map_timespec(segment, data);
                map_timespec(segment, data + sizeof(struct timespec));
            }
            break;
        }
    }
}

static ssize_t shim_recvmsg(int fd, struct msghdr *message, int flags) {
    ssize_t received = tc_real.recvmsg ? tc_real.recvmsg(fd, message, flags)
                                       : tc_shim_errno_result(tc_raw_syscall(SYS_recvmsg, fd, message, flags));
    if (received >= 0 && message->msg_controllen) map_control_messages(message);
    return received;
}

static int shim_recvmmsg(int fd, struct mmsghdr *messages, unsigned int count, tc_recvmmsg_flags flags,
                         struct timespec *timeout) {
    int received = tc_real.recvmmsg
                       ? tc_real.recvmmsg(fd, messages, count, flags, timeout)
                       : (int)tc_shim_errno_result(tc_raw_syscall(SYS_recvmmsg, fd, messages, count, flags, timeout));
    for (int i = 0; i < received; i++)
        if (messages[i].msg_hdr.msg_controllen) map_control_messages(&messages[i].msg_hdr);
    return received;
}

/* The stamp of the last packet a socket received, as SIOCGSTAMP (a timeval) or SIOCGSTAMPNS (a timespec) gives it. */
static int shim_ioctl(int fd, tc_ioctl_request request, ...) {
    va_list arguments;
    va_start(arguments, request);
    void *argument = va_arg(arguments, void *);
    va_end(arguments);
    int result = tc_real.ioctl ? tc_real.ioctl(fd, request, argument)
                               : (int)tc_shim_errno_result(tc_raw_syscall(SYS_ioctl, fd, request, argument));
    if (result != 0 || !argument) return result;
    /* Request codes are 32 bits, whatever type the C library gives them. */
    unsigned long code = (unsigned int)request;
    if (code == SIOCGSTAMP_OLD || code == SIOCGSTAMP_NEW || code == SIOCGSTAMPNS_OLD || code == SIOCGSTAMPNS_NEW) {
        const struct tc_segment *segment = tc_shim_segment();
        if (!segment) return result;
        if (code == SIOCGSTAMP_OLD || code == SIOCGSTAMP_NEW) map_timeval(segment, argument);
        else map_timespec(segment, argument);
    }
    return result;
}

TC_EXPORT ssize_t recvmsg(int, struct msghdr *, int) __attribute__((alias("shim_recvmsg")));
TC_EXPORT int recvmmsg(int, struct mmsghdr *, unsigned int, tc_recvmmsg_flags, struct timespec *)
    __attribute__((alias("shim_recvmmsg")));
TC_EXPORT int ioctl(int, tc_ioctl_request, ...) __attribute__((alias("shim_ioctl")));
