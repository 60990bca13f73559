#ifndef PLINGS_SYS_H
#define PLINGS_SYS_H

#include <spawn.h>

/// 1 when the kernel says the clock is not synchronised (ntp_adjtime returns TIME_ERROR), 0 when it is,
/// -1 when the call failed. <sys/timex.h> is not part of Swift's Glibc module, hence this shim.
int plings_clock_unsynchronized(void);

/// pipe2(2) with `flags` (O_CLOEXEC, O_NONBLOCK): Swift's Glibc module does not import it (it needs
/// _GNU_SOURCE). 0, or -1 with errno.
int plings_pipe2(int fds[2], int flags);

/// getrandom(2) (flags 0: the kernel's CSPRNG, blocking only until it is first seeded at boot): <sys/random.h>
/// is not part of Swift's Glibc module. The byte count, or -1 with errno.
long plings_getrandom(void *buffer, unsigned long length);

/// Names the calling thread (15 bytes kept; `top -H`, gdb and the journal's thread names show it):
/// pthread_setname_np needs _GNU_SOURCE too.
void plings_name_this_thread(const char *name);

/// Sleeps until the monotonic `deadline_seconds` (CLOCK_MONOTONIC, TIMER_ABSTIME), resuming after signals: a
/// wall-clock step neither lengthens nor shortens it.
void plings_sleep_until(double deadline_seconds);

/// Installs, for each of the `count` signals, a handler that writes the signal's number as one byte to `fd` (the
/// write end of a non-blocking pipe) and does nothing else: write(2) is async-signal-safe and errno is kept.
/// SA_RESTART, so no other thread's call sees EINTR. Whichever thread the kernel picks runs it, so no signal mask
/// has to be set before the first thread starts (signalfd would need that). The signals are unblocked on the
/// calling thread (a parent may have started us with them blocked). 0, or -1 with errno.
int plings_signals_to_pipe(int fd, const int *signals, int count);

/// posix_spawn_file_actions_addclosefrom_np (glibc 2.34): the child closes every descriptor from `lowest` up.
/// Swift's Glibc module does not import it (_GNU_SOURCE). 0, or an error number.
int plings_spawn_close_from(posix_spawn_file_actions_t *actions, int lowest);

#endif
