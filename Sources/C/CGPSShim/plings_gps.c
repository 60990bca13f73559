#include "plings_gps.h"

#include <errno.h>
#include <fcntl.h>
#include <gps.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

// Version skew is absorbed here and nowhere else. API 9 (gpsd 3.20) made `fix.time` a timespec and gave
// `gps_read` its buffer parameters; 3.25 (API 14) renamed status constants we do not use. Older is refused.
#if GPSD_API_MAJOR_VERSION < 9
#error "gpsd 3.20 or newer (libgps API 9+) is required"
#endif

_Static_assert(sizeof(plings_gps_report) == 72, "plings_gps_report layout is shared with Swift");
_Static_assert(MODE_2D == 2 && MODE_3D == 3, "fix modes are compared as plain numbers in Swift");

/// The raw JSON line of the last message; gpsd lines are well under this (POLL answers ~1.5 KB).
#define PLINGS_GPS_MESSAGE_MAX 16384

struct plings_gps {
    struct gps_data_t data;
    char message[PLINGS_GPS_MESSAGE_MAX];
};

plings_gps *plings_gps_open(const char *host, const char *port, int *error) {
    plings_gps *gps = calloc(1, sizeof(plings_gps));
    if (gps == NULL) {
        if (error) *error = ENOMEM;
        return NULL;
    }
    errno = 0;
    if (gps_open(host, port, &gps->data) != 0) {
        // libgps stores its netlib code (negative) in errno; keep it for the message.
        if (error) *error = errno != 0 ? errno : -1;
        free(gps);
        return NULL;
    }
    return gps;
}

int plings_gps_watch(plings_gps *gps) {
    if (gps_stream(&gps->data, WATCH_ENABLE | WATCH_JSON, NULL) != 0) return -1;
    // libgps leaves the socket O_NONBLOCK (gps_read then returns 0 at once); a dedicated thread wants to
    // sleep in recv(2) instead, so that an idle connection costs no CPU.
    int flags = fcntl(gps->data.gps_fd, F_GETFL);
    if (flags < 0) return -1;
    if (fcntl(gps->data.gps_fd, F_SETFL, flags & ~O_NONBLOCK) < 0) return -1;
    return 0;
}

int plings_gps_poll(plings_gps *gps) {
    return gps_send(&gps->data, "?POLL;\n") == 0 ? 0 : -1;
}

static double timespec_seconds(timespec_t t) { return (double)t.tv_sec + (double)t.tv_nsec / 1e9; }

/// Forget the previous message's values, so that a field absent from this one cannot leak into it.
static void reset(plings_gps *gps) {
    gps->data.set = 0;
    gps->data.fix.mode = MODE_NOT_SEEN;
    gps->data.fix.latitude = NAN;
    gps->data.fix.longitude = NAN;
    gps->data.fix.eph = NAN;
    gps->data.fix.epx = NAN;
    gps->data.fix.epy = NAN;
    gps->data.fix.time.tv_sec = 0;
    gps->data.fix.time.tv_nsec = 0;
    gps->data.satellites_used = 0;
    gps->data.satellites_visible = 0;
}

static void fill_tpv(const plings_gps *gps, plings_gps_report *out) {
    const struct gps_data_t *d = &gps->data;
    out->kind = PLINGS_GPS_TPV;
    if (d->set & MODE_SET) {
        out->flags |= PLINGS_GPS_HAS_MODE;
        out->mode = d->fix.mode;
    }
    if ((d->set & LATLON_SET) && isfinite(d->fix.latitude) && isfinite(d->fix.longitude)) {
        out->flags |= PLINGS_GPS_HAS_LATLON;
        out->latitude = d->fix.latitude;
        out->longitude = d->fix.longitude;
    }
    if ((d->set & TIME_SET) && d->fix.time.tv_sec > 0) {
        out->flags |= PLINGS_GPS_HAS_TIME;
        out->time = timespec_seconds(d->fix.time);
    }
    // The error fields carry no reliable `set` bit across versions; NaN means absent (reset above).
    if (isfinite(d->fix.eph)) {
        out->flags |= PLINGS_GPS_HAS_EPH;
        out->eph = d->fix.eph;
    }
    if (isfinite(d->fix.epx)) {
        out->flags |= PLINGS_GPS_HAS_EPX;
        out->epx = d->fix.epx;
    }
    if (isfinite(d->fix.epy)) {
        out->flags |= PLINGS_GPS_HAS_EPY;
        out->epy = d->fix.epy;
    }
}

static void fill_sky(const plings_gps *gps, plings_gps_report *out) {
    if (gps->data.set & SATELLITE_SET) {
        out->flags |= PLINGS_GPS_HAS_SATELLITES;
        out->satellites_used = gps->data.satellites_used;
        out->satellites_visible = gps->data.satellites_visible;
    }
}

/// Copies the first JSON object of the array named `key` (`"tpv":[{...}]`) into `buffer`; 0 when absent.
/// Brace counting skips strings, so a `}` inside a device path cannot end the object early.
static size_t first_object(const char *message, const char *key, char *buffer, size_t size) {
    const char *p = strstr(message, key);
    if (p == NULL) return 0;
    p += strlen(key);
    while (*p == ' ') p++;
    if (*p != '{') return 0;
    int depth = 0;
    int in_string = 0;
    const char *start = p;
    for (; *p != '\0'; p++) {
        if (in_string) {
            if (*p == '\\' && p[1] != '\0') {
                p++;
            } else if (*p == '"') {
                in_string = 0;
            }
            continue;
        }
        if (*p == '"') {
            in_string = 1;
        } else if (*p == '{') {
            depth++;
        } else if (*p == '}' && --depth == 0) {
            size_t length = (size_t)(p - start) + 1;
            if (length + 1 > size) return 0;
            memcpy(buffer, start, length);
            buffer[length] = '\0';
            return length;
        }
    }
    return 0;
}

/// libgps 3.22 does not unpack a POLL answer's TPV into `fix`; unpack its embedded TPV and SKY objects.
static void unpack_poll(plings_gps *gps, plings_gps_report *out) {
    static _Thread_local char object[PLINGS_GPS_MESSAGE_MAX];
    out->kind = PLINGS_GPS_POLL_EMPTY;
    if (first_object(gps->message, "\"tpv\":[", object, sizeof object) > 0) {
        reset(gps);
        if (gps_unpack(object, &gps->data) == 0) {
            fill_tpv(gps, out);
            out->flags |= PLINGS_GPS_FROM_POLL;
        }
    }
    if (first_object(gps->message, "\"sky\":[", object, sizeof object) > 0) {
        reset(gps);
        if (gps_unpack(object, &gps->data) == 0) fill_sky(gps, out);
    }
}

static int starts_with(const char *text, const char *prefix) { return strncmp(text, prefix, strlen(prefix)) == 0; }

int plings_gps_read(plings_gps *gps, plings_gps_report *out) {
    memset(out, 0, sizeof *out);
    out->latitude = out->longitude = out->eph = out->epx = out->epy = out->time = NAN;
    reset(gps);  // `set` sticks across reads otherwise
    gps->message[0] = '\0';
    int status;
    do {
        errno = 0;
        status = gps_read(&gps->data, gps->message, (int)sizeof gps->message);
    } while (status < 0 && errno == EINTR);
    if (status < 0) return -1;
    if (status == 0) return 0;
    const char *m = gps->message;
    while (*m == ' ') m++;
    if (starts_with(m, "{\"class\":\"TPV\"")) {
        fill_tpv(gps, out);
    } else if (starts_with(m, "{\"class\":\"SKY\"")) {
        out->kind = PLINGS_GPS_SKY;
        fill_sky(gps, out);
    } else if (starts_with(m, "{\"class\":\"POLL\"")) {
        unpack_poll(gps, out);
    } else {
        out->kind = PLINGS_GPS_OTHER;
    }
    return 1;
}

void plings_gps_interrupt(plings_gps *gps) { shutdown(gps->data.gps_fd, SHUT_RDWR); }

void plings_gps_close(plings_gps *gps) {
    if (gps == NULL) return;
    (void)gps_stream(&gps->data, WATCH_DISABLE, NULL);
    gps_close(&gps->data);
    free(gps);
}

const char *plings_gps_error_string(int error) { return gps_errstr(error); }

int plings_gps_api_major(void) { return GPSD_API_MAJOR_VERSION; }
int plings_gps_api_minor(void) { return GPSD_API_MINOR_VERSION; }
