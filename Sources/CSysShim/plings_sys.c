#include "plings_sys.h"

#include <sys/timex.h>

int plings_clock_unsynchronized(void) {
    struct timex tx = {0};
    int state = ntp_adjtime(&tx);
    if (state < 0) return -1;
    return state == TIME_ERROR ? 1 : 0;
}
