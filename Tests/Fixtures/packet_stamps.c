/*
 * The kernel's packet time stamps, every way a program gets them: sends a
 * datagram to itself over UDP on loopback and prints the clock before and
 * after, and the stamp of its arrival as SO_TIMESTAMPNS, SO_TIMESTAMP and
 * SO_TIMESTAMPING (software) control messages give it through recvmsg, as
 * SO_TIMESTAMPNS gives it through recvmmsg, and as the SIOCGSTAMPNS and
 * SIOCGSTAMP ioctls give it; SO_TIMESTAMPNS and SIOCGSTAMPNS in their 64-bit
 * (_NEW) forms too. Each line: NAME SECONDS.NANOSECONDS.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <linux/net_tstamp.h>
#include <linux/sockios.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sched.h>
#include <time.h>
#include <unistd.h>

static void print(const char *name, long long seconds, long nanoseconds) {
    printf("%s %lld.%09ld\n", name, seconds, nanoseconds);
}

static void now(const char *name) {
    struct timespec time;
    clock_gettime(CLOCK_REALTIME, &time);
    print(name, (long long)time.tv_sec, time.tv_nsec);
}

static void fail(const char *what) {
    perror(what);
    exit(1);
}

/* A UDP socket bound to loopback with `option` set to `value`, and its address. */
static int open_socket(int option, int value, struct sockaddr_in *address) {
    int fd = socket(AF_INET, SOCK_DGRAM, 0);
    if (fd < 0) fail("socket");
    if (option && setsockopt(fd, SOL_SOCKET, option, &value, sizeof value) != 0) fail("setsockopt");
    memset(address, 0, sizeof *address);
    address->sin_family = AF_INET;
    address->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t length = sizeof *address;
    if (bind(fd, (struct sockaddr *)address, length) != 0 || getsockname(fd, (struct sockaddr *)address, &length) != 0)
        fail("bind");
    return fd;
}

static void send_to_self(int fd, const struct sockaddr_in *address) {
    if (sendto(fd, "x", 1, 0, (const struct sockaddr *)address, sizeof *address) != 1) fail("sendto");
}

/* Sends a datagram to itself and receives it with recvmsg, and prints the stamp of control message `type`;
   again when it came back without one (the kernel stamps only once stamping is on for all sockets, which it
   turns on with deferred work). */
static void receive(int fd, const struct sockaddr_in *address, int type, const char *name) {
    for (int tries = 0; tries < 100000; tries++) {
        send_to_self(fd, address);
        char byte, control[256];
        struct iovec data = {&byte, 1};
        struct msghdr message = {.msg_iov = &data, .msg_iovlen = 1, .msg_control = control, .msg_controllen = sizeof control};
        if (recvmsg(fd, &message, 0) != 1) fail("recvmsg");
        for (struct cmsghdr *item = CMSG_FIRSTHDR(&message); item; item = CMSG_NXTHDR(&message, item)) {
            if (item->cmsg_level != SOL_SOCKET || item->cmsg_type != type) continue;
            if (type == SCM_TIMESTAMP) {
                struct timeval stamp;
                memcpy(&stamp, CMSG_DATA(item), sizeof stamp);
                print(name, (long long)stamp.tv_sec, stamp.tv_usec * 1000);
            } else {
                struct timespec stamp;  /* SCM_TIMESTAMPNS, or the first (software) of SCM_TIMESTAMPING's three */
                memcpy(&stamp, CMSG_DATA(item), sizeof stamp);
                if (stamp.tv_sec == 0 && stamp.tv_nsec == 0) break;
                print(name, (long long)stamp.tv_sec, stamp.tv_nsec);
            }
            return;
        }
        sched_yield();  /* not a sleep: on a frozen session that would wait for a tick */
    }
    printf("%s missing\n", name);
}

int main(void) {
    struct sockaddr_in address;
    now("before");

    int fd = open_socket(SO_TIMESTAMPNS, 1, &address);
    receive(fd, &address, SCM_TIMESTAMPNS, "timestampns");
    close(fd);

    fd = open_socket(SO_TIMESTAMP, 1, &address);
    receive(fd, &address, SCM_TIMESTAMP, "timestamp");
    close(fd);

    /* The 64-bit forms, which 32-bit programs built for times past 2038 ask for (the same layout here). */
    fd = open_socket(SO_TIMESTAMPNS_NEW, 1, &address);
    receive(fd, &address, SO_TIMESTAMPNS_NEW, "timestampns_new");
    close(fd);

    fd = open_socket(SO_TIMESTAMPING, SOF_TIMESTAMPING_RX_SOFTWARE | SOF_TIMESTAMPING_SOFTWARE, &address);
    receive(fd, &address, SCM_TIMESTAMPING, "timestamping");
    close(fd);

    fd = open_socket(SO_TIMESTAMPNS, 1, &address);
    char byte, control[256];
    struct iovec data = {&byte, 1};
    int got = 0;
    for (int tries = 0; tries < 100000 && !got; tries++) {
        send_to_self(fd, &address);
        struct mmsghdr messages[1] = {{.msg_hdr = {.msg_iov = &data, .msg_iovlen = 1, .msg_control = control,
                                                  .msg_controllen = sizeof control}}};
        if (recvmmsg(fd, messages, 1, 0, NULL) != 1) fail("recvmmsg");
        struct cmsghdr *item = CMSG_FIRSTHDR(&messages[0].msg_hdr);
        if (item && item->cmsg_type == SCM_TIMESTAMPNS) {
            struct timespec stamp;
            memcpy(&stamp, CMSG_DATA(item), sizeof stamp);
            print("recvmmsg", (long long)stamp.tv_sec, stamp.tv_nsec);
            got = 1;
        } else {
            sched_yield();  /* not a sleep: on a frozen session that would wait for a tick */
        }
    }
    if (!got) printf("recvmmsg missing\n");
    close(fd);

    /* The ioctls give the stamp of the last packet received, taken whether or not the option asked for it. */
    fd = open_socket(0, 0, &address);
    send_to_self(fd, &address);
    if (recv(fd, &byte, 1, 0) != 1) fail("recv");
    struct timespec nanoseconds;
    struct timeval microseconds;
    if (ioctl(fd, SIOCGSTAMPNS, &nanoseconds) != 0) fail("SIOCGSTAMPNS");
    print("siocgstampns", (long long)nanoseconds.tv_sec, nanoseconds.tv_nsec);
    if (ioctl(fd, SIOCGSTAMP, &microseconds) != 0) fail("SIOCGSTAMP");
    print("siocgstamp", (long long)microseconds.tv_sec, microseconds.tv_usec * 1000);
    if (ioctl(fd, SIOCGSTAMPNS_NEW, &nanoseconds) != 0) fail("SIOCGSTAMPNS_NEW");
    print("siocgstampns_new", (long long)nanoseconds.tv_sec, nanoseconds.tv_nsec);
    close(fd);

    now("after");
    return 0;
}
