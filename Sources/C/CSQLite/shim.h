#ifndef PLINGS_CSQLITE_SHIM_H
#define PLINGS_CSQLITE_SHIM_H
#include <sqlite3.h>
#endif
