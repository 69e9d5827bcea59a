/*
 * What a recvmsg costs, for scripts/bench-recvmsg:
 *   recv_loop ROUNDS STAMPS
 * Sends a datagram to itself over UDP on loopback and receives it with
 * recvmsg, ROUNDS times; with STAMPS 1 the socket asks for SO_TIMESTAMPNS,
 * so every recvmsg brings a control message back. Prints "ns_per_recvmsg X":
 * the median of the recvmsg calls alone, timed with the raw clock
 * (raw_clock.h).
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "raw_clock.h"

static int compare(const void *a, const void *b) {
    long long x = *(const long long *)a, y = *(const long long *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: recv_loop ROUNDS STAMPS\n");
        return 2;
    }
    int rounds = atoi(argv[1]), stamps = atoi(argv[2]);
    int fd = socket(AF_INET, SOCK_DGRAM, 0);
    if (stamps && setsockopt(fd, SOL_SOCKET, SO_TIMESTAMPNS, &stamps, sizeof stamps) != 0) return perror("setsockopt"), 1;
    struct sockaddr_in address = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t length = sizeof address;
    if (bind(fd, (struct sockaddr *)&address, length) != 0 || getsockname(fd, (struct sockaddr *)&address, &length) != 0)
        return perror("bind"), 1;
    long long *samples = calloc((size_t)rounds, sizeof *samples);
    char byte = 'x', control[128];
    struct iovec data = {&byte, 1};
    for (int i = 0; i < rounds; i++) {
        if (sendto(fd, &byte, 1, 0, (struct sockaddr *)&address, length) != 1) return perror("sendto"), 1;
        struct msghdr message = {.msg_iov = &data, .msg_iovlen = 1, .msg_control = control, .msg_controllen = sizeof control};
        long long start = raw_monotonic_ns();
        if (recvmsg(fd, &message, 0) != 1) return perror("recvmsg"), 1;
        samples[i] = raw_monotonic_ns() - start;
        if (stamps && message.msg_controllen == 0) return fprintf(stderr, "no time stamp came back\n"), 1;
    }
    qsort(samples, (size_t)rounds, sizeof *samples, compare);
    printf("ns_per_recvmsg %lld\n", samples[rounds / 2]);
    return 0;
}
