#ifndef PLINGS_EVDEV_H
#define PLINGS_EVDEV_H

// evdev ioctls and `struct input_event` for Swift: the kernel defines them with function-like macros
// (`EVIOCGRAB`, `EVIOCGNAME(len)`, `_IOW`, `input_event_sec`) that Swift cannot import. Every function
// returns the raw ioctl result (-1 with errno set on failure), so the Swift side owns EINTR and errors.

#include <linux/input.h>
#include <stdint.h>
#include <stddef.h>

_Static_assert(sizeof(struct input_event) == 24, "struct input_event must be 24 bytes (64-bit ABI only)");
_Static_assert(EVIOCGRAB == 0x40044590, "EVIOCGRAB must be _IOW('E', 0x90, int)");
_Static_assert(sizeof(struct input_id) == 8, "struct input_id must be 4 x u16");

/// Bytes in an EVIOCGKEY bitmap (KEY_CNT bits): the size the kernel's own tools use, and the only size
/// umockdev's ioctl records answer at.
#define PLINGS_EVDEV_KEY_BITMAP_BYTES 96
/// Bytes of the EVIOCGNAME buffer (the common size, and the one umockdev records answer at).
#define PLINGS_EVDEV_NAME_BYTES 256

_Static_assert(KEY_CNT / 8 == PLINGS_EVDEV_KEY_BITMAP_BYTES, "KEY_CNT changed");

/// The EVIOCGRAB request number (for tests comparing it with the hand-computed value).
static inline unsigned long plings_evdev_eviocgrab_request(void) { return EVIOCGRAB; }

/// Exclusive grab (`on` != 0) or release. The int travels by value, not by pointer.
int plings_evdev_grab(int fd, int on);

/// The device name into `buffer` (PLINGS_EVDEV_NAME_BYTES bytes, NUL-terminated on success).
int plings_evdev_name(int fd, char *buffer);

/// Bus type, vendor, product and version.
int plings_evdev_id(int fd, uint16_t *bustype, uint16_t *vendor, uint16_t *product, uint16_t *version);

/// The pressed-key bitmap into `bitmap` (PLINGS_EVDEV_KEY_BITMAP_BYTES bytes).
int plings_evdev_keys(int fd, uint8_t *bitmap);

/// A virtual keyboard through uinput (the kernel's Documentation/input/uinput.rst): opens `path` (/dev/uinput)
/// write-only, declares EV_KEY with every key code up to KEY_MAX and EV_SYN, names it `name` on BUS_VIRTUAL with
/// `vendor`/`product`, and creates it. Returns the descriptor, or -errno of the step that failed (the descriptor
/// closed). Events are then `write(2)`n as `struct input_event` records, each group ended by SYN_REPORT.
int plings_uinput_create(const char *path, const char *name, uint16_t vendor, uint16_t product);

/// Removes the virtual keyboard (UI_DEV_DESTROY) and closes `fd`.
void plings_uinput_destroy(int fd);

/// Field access on a raw record, for code that holds a `struct input_event` from C.
static inline long long plings_input_event_sec(const struct input_event *e) { return (long long)e->input_event_sec; }
static inline long long plings_input_event_usec(const struct input_event *e) { return (long long)e->input_event_usec; }
static inline uint16_t plings_input_event_type(const struct input_event *e) { return e->type; }
static inline uint16_t plings_input_event_code(const struct input_event *e) { return e->code; }
static inline int32_t plings_input_event_value(const struct input_event *e) { return e->value; }

/// Offsets of the fields, so Swift can check its own little-endian decoder against the C layout.
static inline size_t plings_input_event_offset_type(void) { return offsetof(struct input_event, type); }
static inline size_t plings_input_event_offset_code(void) { return offsetof(struct input_event, code); }
static inline size_t plings_input_event_offset_value(void) { return offsetof(struct input_event, value); }

#endif
