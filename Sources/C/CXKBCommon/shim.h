#ifndef PLINGS_CXKBCOMMON_SHIM_H
#define PLINGS_CXKBCOMMON_SHIM_H
#include <xkbcommon/xkbcommon.h>
#include <xkbcommon/xkbcommon-compose.h>
#endif
