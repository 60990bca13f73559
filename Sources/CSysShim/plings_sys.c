#define _GNU_SOURCE
#include "plings_sys.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <string.h>
#include <time.h>
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
