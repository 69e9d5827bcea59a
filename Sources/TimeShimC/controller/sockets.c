/*
 * Unix-domain sockets' peers, from the kernel's socket diagnostics
 * (NETLINK_SOCK_DIAG, UNIX_DIAG_PEER): /proc/net/unix lists the sockets but
 * not which one each is connected to, which the scheduler needs to tell a
 * wait on an attached process from a wait on the outside world.
 */
#define _GNU_SOURCE
#include "timectl_sockets.h"

#include <errno.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <linux/sock_diag.h>
#include <linux/unix_diag.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

int tc_unix_socket_peers(uint64_t *inodes, uint64_t *peers, uint32_t *states, int capacity) {
    int fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);
    if (fd < 0) return -1;
    struct {
        struct nlmsghdr header;
        struct unix_diag_req request;
    } message;
    memset(&message, 0, sizeof(message));
    message.header.nlmsg_len = sizeof(message);
    message.header.nlmsg_type = SOCK_DIAG_BY_FAMILY;
    message.header.nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP;
    message.request.sdiag_family = AF_UNIX;
    message.request.udiag_states = ~0u;
    message.request.udiag_show = UDIAG_SHOW_PEER;
    struct sockaddr_nl kernel = {.nl_family = AF_NETLINK};
    if (sendto(fd, &message, sizeof(message), 0, (struct sockaddr *)&kernel, sizeof(kernel)) < 0) {
        close(fd);
        return -1;
    }
    int count = 0;
    static __thread char buffer[32768] __attribute__((aligned(8)));
    for (;;) {
        ssize_t length = recv(fd, buffer, sizeof(buffer), 0);
        if (length < 0 && errno == EINTR) continue;
        if (length <= 0) break;
        for (struct nlmsghdr *header = (struct nlmsghdr *)buffer; NLMSG_OK(header, (size_t)length);
             header = NLMSG_NEXT(header, length)) {
            if (header->nlmsg_type == NLMSG_DONE || header->nlmsg_type == NLMSG_ERROR) {
                close(fd);
                return count;
            }
            struct unix_diag_msg *socket_message = NLMSG_DATA(header);
            uint64_t peer = 0;
            int attributes_length = (int)(header->nlmsg_len - NLMSG_LENGTH(sizeof(*socket_message)));
            for (struct rtattr *attribute = (struct rtattr *)(socket_message + 1); RTA_OK(attribute, attributes_length);
                 attribute = RTA_NEXT(attribute, attributes_length))
                if (attribute->rta_type == UNIX_DIAG_PEER) peer = *(uint32_t *)RTA_DATA(attribute);
            if (count < capacity) {
                inodes[count] = socket_message->udiag_ino;
                peers[count] = peer;
                states[count] = socket_message->udiag_state;
            }
            count++;
        }
    }
    close(fd);
    return count;
}
