#ifndef PLINGS_CUDEV_SHIM_H
#define PLINGS_CUDEV_SHIM_H
#include <libudev.h>
#endif
