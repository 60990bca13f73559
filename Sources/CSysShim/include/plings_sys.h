#ifndef PLINGS_SYS_H
#define PLINGS_SYS_H

/// 1 when the kernel says the clock is not synchronised (ntp_adjtime returns TIME_ERROR), 0 when it is,
/// -1 when the call failed. <sys/timex.h> is not part of Swift's Glibc module, hence this shim.
int plings_clock_unsynchronized(void);

/// pipe2(2) with `flags` (O_CLOEXEC, O_NONBLOCK): Swift's Glibc module does not import it (it needs
/// _GNU_SOURCE). 0, or -1 with errno.
int plings_pipe2(int fds[2], int flags);

#endif
