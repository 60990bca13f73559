#define _GNU_SOURCE
#include "plings_sys.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <time.h>
#include <sys/random.h>
#include <sys/timex.h>
#include <unistd.h>

int plings_clock_unsynchronized(void) {
    struct timex tx = {0};
    int state = ntp_adjtime(&tx);
    if (state < 0) return -1;
    return state == TIME_ERROR ? 1 : 0;
}

int plings_pipe2(int fds[2], int flags) { return pipe2(fds, flags); }

void plings_name_this_thread(const char *name) {
    char short_name[16];
    strncpy(short_name, name, sizeof short_name - 1);
    short_name[sizeof short_name - 1] = 0;
    pthread_setname_np(pthread_self(), short_name);
}

void plings_sleep_until(double deadline_seconds) {
    if (!(deadline_seconds > 0)) return;
    struct timespec until;
    double whole = floor(deadline_seconds);
    until.tv_sec = (time_t)whole;
    until.tv_nsec = (long)((deadline_seconds - whole) * 1e9);
    if (until.tv_nsec >= 1000000000L) until.tv_nsec = 999999999L;
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &until, NULL) == EINTR) {
    }
}

static volatile int signal_pipe_fd = -1;

static void plings_signal_to_pipe(int number) {
    int saved = errno;
    unsigned char byte = (unsigned char)number;
    ssize_t written = write(signal_pipe_fd, &byte, 1);
    (void)written;  // EAGAIN: the pipe is full of signals nobody read yet; one more changes nothing
    errno = saved;
}

int plings_signals_to_pipe(int fd, const int *signals, int count) {
    signal_pipe_fd = fd;
    struct sigaction action;
    memset(&action, 0, sizeof action);
    action.sa_handler = plings_signal_to_pipe;
    action.sa_flags = SA_RESTART;
    sigemptyset(&action.sa_mask);
    sigset_t wanted;
    sigemptyset(&wanted);
    for (int i = 0; i < count; i++) {
        if (sigaction(signals[i], &action, NULL) != 0) return -1;
        sigaddset(&wanted, signals[i]);
    }
    // A parent may have started us with these signals blocked (a mask is inherited across exec: libdispatch's
    // worker threads block every signal, and a test harness may spawn from one). Unblocked on this thread, they
    // reach the handler; threads started from here on inherit that.
    return pthread_sigmask(SIG_UNBLOCK, &wanted, NULL) == 0 ? 0 : -1;
}

int plings_spawn_close_from(posix_spawn_file_actions_t *actions, int lowest) {
    return posix_spawn_file_actions_addclosefrom_np(actions, lowest);
}

long plings_getrandom(void *buffer, unsigned long length) { return (long)getrandom(buffer, length, 0); }
