/* Unix-domain sockets' peers, for the scheduler (controller/sockets.c; controllers only). */
#ifndef TIMECTL_SOCKETS_H
#define TIMECTL_SOCKETS_H

#include <stdint.h>

/* Every unix-domain socket of the machine's network namespace: its inode, the inode of the socket it is
   connected to (0: none) and its TCP-style state (10 = listening). Fills at most `capacity` entries and
   returns how many sockets there are (call again with more room if that is more), or −1. */
int tc_unix_socket_peers(uint64_t *inodes, uint64_t *peers, uint32_t *states, int capacity);

#endif
