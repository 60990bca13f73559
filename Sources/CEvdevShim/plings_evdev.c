#include "plings_evdev.h"

#include <fcntl.h>
#include <string.h>
#include <unistd.h>
#include <sys/ioctl.h>

int plings_evdev_grab(int fd, int on) {
    return ioctl(fd, EVIOCGRAB, on ? 1 : 0);
}

int plings_evdev_name(int fd, char *buffer) {
    memset(buffer, 0, PLINGS_EVDEV_NAME_BYTES);
    int result = ioctl(fd, EVIOCGNAME(PLINGS_EVDEV_NAME_BYTES), buffer);
    buffer[PLINGS_EVDEV_NAME_BYTES - 1] = 0;
    return result;
}

int plings_evdev_id(int fd, uint16_t *bustype, uint16_t *vendor, uint16_t *product, uint16_t *version) {
    struct input_id id;
    memset(&id, 0, sizeof id);
    int result = ioctl(fd, EVIOCGID, &id);
    if (result >= 0) {
        *bustype = id.bustype;
        *vendor = id.vendor;
        *product = id.product;
        *version = id.version;
    }
    return result;
}

int plings_evdev_keys(int fd, uint8_t *bitmap) {
    memset(bitmap, 0, PLINGS_EVDEV_KEY_BITMAP_BYTES);
    return ioctl(fd, EVIOCGKEY(PLINGS_EVDEV_KEY_BITMAP_BYTES), bitmap);
}
