#ifndef PLINGS_SYS_H
#define PLINGS_SYS_H

/// 1 when the kernel says the clock is not synchronised (ntp_adjtime returns TIME_ERROR), 0 when it is,
/// -1 when the call failed. <sys/timex.h> is not part of Swift's Glibc module, hence this shim.
int plings_clock_unsynchronized(void);

#endif
