/// The system calls the scheduler tells apart when a thread is blocked in
/// one (`/proc/PID/task/TID/syscall` gives the kernel's number), with each
/// architecture's numbers: x86-64 has its own table, aarch64 the generic one
/// (`asm-generic/unistd.h`), which lacks the older calls (`poll`, `select`,
/// `epoll_wait`, `pause`) that its libc makes of their successors. The
/// table of the architecture timectl is built for is chosen at compile time;
/// a test checks both against the kernel headers of each toolchain.
///
/// A program run by qemu-user is a process of the host: its blocked calls
/// are qemu's, made with the host's numbers, so the host's table reads them.
enum SystemCall: String, CaseIterable, Sendable {
    case read, write, pread64, pwrite64, readv, writev, preadv, pwritev, preadv2, pwritev2
    case sendfile, splice, tee
    case connect, accept, accept4, sendto, recvfrom, sendmsg, recvmsg, recvmmsg, sendmmsg
    case poll, ppoll, select, pselect6, epoll_wait, epoll_pwait, epoll_pwait2
    case futex, futex_waitv
    case wait4, waitid
    case pause, rt_sigtimedwait, rt_sigsuspend
    case nanosleep, clock_nanosleep
    case fcntl, flock, semop, semtimedop, msgsnd, msgrcv, mq_timedsend, mq_timedreceive
    case ioctl, io_getevents, io_uring_enter

    /// x86-64's numbers (`asm/unistd_64.h`).
    static let x86_64: [SystemCall: Int] = [
        .read: 0, .write: 1, .pread64: 17, .pwrite64: 18, .readv: 19, .writev: 20, .preadv: 295, .pwritev: 296,
        .preadv2: 327, .pwritev2: 328, .sendfile: 40, .splice: 275, .tee: 276,
        .connect: 42, .accept: 43, .accept4: 288, .sendto: 44, .recvfrom: 45, .sendmsg: 46, .recvmsg: 47,
        .recvmmsg: 299, .sendmmsg: 307,
        .poll: 7, .ppoll: 271, .select: 23, .pselect6: 270, .epoll_wait: 232, .epoll_pwait: 281, .epoll_pwait2: 441,
        .futex: 202, .futex_waitv: 449, .wait4: 61, .waitid: 247,
        .pause: 34, .rt_sigtimedwait: 128, .rt_sigsuspend: 130, .nanosleep: 35, .clock_nanosleep: 230,
        .fcntl: 72, .flock: 73, .semop: 65, .semtimedop: 220, .msgsnd: 69, .msgrcv: 70,
        .mq_timedsend: 242, .mq_timedreceive: 243, .ioctl: 16, .io_getevents: 208, .io_uring_enter: 426,
    ]

    /// aarch64's numbers (the generic table, `asm-generic/unistd.h`): no poll, select, epoll_wait or pause.
    static let aarch64: [SystemCall: Int] = [
        .read: 63, .write: 64, .pread64: 67, .pwrite64: 68, .readv: 65, .writev: 66, .preadv: 69, .pwritev: 70,
        .preadv2: 286, .pwritev2: 287, .sendfile: 71, .splice: 76, .tee: 77,
        .connect: 203, .accept: 202, .accept4: 242, .sendto: 206, .recvfrom: 207, .sendmsg: 211, .recvmsg: 212,
        .recvmmsg: 243, .sendmmsg: 269,
        .ppoll: 73, .pselect6: 72, .epoll_pwait: 22, .epoll_pwait2: 441,
        .futex: 98, .futex_waitv: 449, .wait4: 260, .waitid: 95,
        .rt_sigtimedwait: 137, .rt_sigsuspend: 133, .nanosleep: 101, .clock_nanosleep: 115,
        .fcntl: 25, .flock: 32, .semop: 193, .semtimedop: 192, .msgsnd: 189, .msgrcv: 188,
        .mq_timedsend: 182, .mq_timedreceive: 183, .ioctl: 29, .io_getevents: 4, .io_uring_enter: 426,
    ]

    #if arch(x86_64)
    static let numbers = x86_64
    #elseif arch(arm64)
    static let numbers = aarch64
    #else
    #error("timectl supports x86-64 and aarch64 Linux")
    #endif

    private static let byNumber: [Int: SystemCall] = Dictionary(uniqueKeysWithValues: numbers.map { ($0.value, $0.key) })

    /// The call with this architecture's `number`, or nil for one the scheduler does not tell apart.
    init?(number: Int) {
        guard let call = Self.byNumber[number] else { return nil }
        self = call
    }

    /// Its name, or "system call N" for a number it does not know.
    static func name(of number: Int) -> String { SystemCall(number: number)?.rawValue ?? "system call \(number)" }
}
