/* Timed waits on semaphores, message queues and signals (ipc_waits.c), for the system-call table. */
#ifndef TIMECTL_IPC_WAITS_H
#define TIMECTL_IPC_WAITS_H

/* semtimedop, mq_timedsend, mq_timedreceive or rt_sigtimedwait with the raw call's arguments: a value, or −errno. */
long tc_syscall_ipc_wait(long number, const long *arguments);

#endif
