#ifndef PLINGS_GPS_H
#define PLINGS_GPS_H

/// A small C face over libgps: the Swift side never sees `struct gps_data_t` (24.5 KB, and its field names
/// change between gpsd 3.22 and 3.25+). It gets an opaque handle and a plain report struct.

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/// An open connection to gpsd; `gps_data_t` lives behind it on the heap and is never copied.
typedef struct plings_gps plings_gps;

/// What one message from gpsd was.
enum {
    PLINGS_GPS_OTHER = 0,  ///< VERSION, DEVICES, WATCH, ERROR, ... (nothing we use)
    PLINGS_GPS_TPV = 1,    ///< a time-position-velocity report (streamed, or the `tpv` of a POLL answer)
    PLINGS_GPS_SKY = 2,    ///< satellites
    PLINGS_GPS_POLL_EMPTY = 3  ///< a POLL answer that had no TPV (gpsd has not seen a fix yet)
};

/// Which fields of a report hold values (others are NaN / 0).
enum {
    PLINGS_GPS_HAS_MODE = 1u << 0,
    PLINGS_GPS_HAS_LATLON = 1u << 1,
    PLINGS_GPS_HAS_TIME = 1u << 2,
    PLINGS_GPS_HAS_EPH = 1u << 3,
    PLINGS_GPS_HAS_EPX = 1u << 4,
    PLINGS_GPS_HAS_EPY = 1u << 5,
    PLINGS_GPS_HAS_SATELLITES = 1u << 6,
    /// The TPV came from a `?POLL;` answer: gpsd's cached last fix, possibly old (gpsd 3.22 never ages it).
    PLINGS_GPS_FROM_POLL = 1u << 7
};

/// Only what the bridge uses, as plain values.
typedef struct plings_gps_report {
    int32_t kind;
    uint32_t flags;
    int32_t mode;
    int32_t satellites_used;
    int32_t satellites_visible;
    int32_t reserved;
    double latitude;
    double longitude;
    double eph;
    double epx;
    double epy;
    /// TPV time, seconds since the Unix epoch (UTC).
    double time;
} plings_gps_report;

/// Connects to gpsd at host:port. NULL on failure with `*error` set to libgps's code (negative netlib codes,
/// or a positive errno); describe it with `plings_gps_error_string`.
plings_gps *plings_gps_open(const char *host, const char *port, int *error);

/// Enables JSON streaming (`?WATCH={"enable":true,"json":true}`) and makes the socket blocking, so that
/// `plings_gps_read` sleeps in recv(2) instead of returning 0 at once. 0 on success, -1 with errno.
int plings_gps_watch(plings_gps *gps);

/// Sends `?POLL;`: gpsd answers at once with its last TPV (a plain watch does not replay it). 0 or -1.
int plings_gps_poll(plings_gps *gps);

/// Blocks until one message has been read. 1 with `*out` filled, 0 when a read returned nothing complete
/// (call again), -1 when the connection ended (EOF, reset, shutdown, error; errno may say why).
int plings_gps_read(plings_gps *gps, plings_gps_report *out);

/// Wakes a thread blocked in `plings_gps_read` on this connection (shutdown(2); the fd stays open until
/// `plings_gps_close`, so it can never be reused under the reader's feet).
void plings_gps_interrupt(plings_gps *gps);

/// Closes the connection and frees the handle.
void plings_gps_close(plings_gps *gps);

/// A description of a `plings_gps_open` error code.
const char *plings_gps_error_string(int error);

/// The libgps API major version this was built against (11 for gpsd 3.22).
int plings_gps_api_major(void);

#ifdef __cplusplus
}
#endif

/// GPSD_API_MINOR_VERSION of the libgps headers this was built with (for `plings-bridge version`).
int plings_gps_api_minor(void);

#endif
