// pcsc-lite's client API. Included as <PCSC/...> so the header is found with or without pkg-config's
// -I/usr/include/PCSC; winscard.h itself includes <pcsclite.h> by bare name, which needs that -I.
#include <PCSC/winscard.h>
#include <PCSC/wintypes.h>
#include <PCSC/pcsclite.h>

// The Swift side relies on these layouts: DWORD and LONG are 64-bit on Linux, and
// SCARD_READERSTATE is 80 bytes. A different pcsc-lite ABI must fail the build, not corrupt memory.
_Static_assert(sizeof(DWORD) == 8, "pcsc-lite DWORD is expected to be 64-bit on Linux");
_Static_assert(sizeof(LONG) == 8, "pcsc-lite LONG is expected to be 64-bit on Linux");
_Static_assert(sizeof(SCARD_READERSTATE) == 80, "SCARD_READERSTATE is expected to be 80 bytes");
_Static_assert(sizeof(SCARD_IO_REQUEST) == 16, "SCARD_IO_REQUEST is expected to be 16 bytes");
