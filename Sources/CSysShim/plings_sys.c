#define _GNU_SOURCE
#include "plings_sys.h"

#include <fcntl.h>
#include <sys/timex.h>
#include <unistd.h>

int plings_clock_unsynchronized(void) {
    struct timex tx = {0};
    int state = ntp_adjtime(&tx);
    if (state < 0) return -1;
    return state == TIME_ERROR ? 1 : 0;
}

int plings_pipe2(int fds[2], int flags) { return pipe2(fds, flags); }
