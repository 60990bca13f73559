#include "plings_evdev.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/uinput.h>
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

int plings_uinput_create(const char *path, const char *name, uint16_t vendor, uint16_t product) {
    int fd = open(path, O_WRONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) return -errno;
    int failed = 0;
    if (ioctl(fd, UI_SET_EVBIT, EV_KEY) < 0 || ioctl(fd, UI_SET_EVBIT, EV_SYN) < 0) failed = errno;
    // Every key a scanner could have sent: the replay writes the scanner's own key codes, whatever they are.
    for (int key = 1; !failed && key < KEY_MAX; key++) {
        if (ioctl(fd, UI_SET_KEYBIT, key) < 0) failed = errno;
    }
    if (!failed) {
        struct uinput_setup setup;
        memset(&setup, 0, sizeof setup);
        setup.id.bustype = BUS_VIRTUAL;
        setup.id.vendor = vendor;
        setup.id.product = product;
        strncpy(setup.name, name, UINPUT_MAX_NAME_SIZE - 1);
        if (ioctl(fd, UI_DEV_SETUP, &setup) < 0 || ioctl(fd, UI_DEV_CREATE) < 0) failed = errno;
    }
    if (failed) {
        close(fd);
        return -failed;
    }
    return fd;
}

void plings_uinput_destroy(int fd) {
    ioctl(fd, UI_DEV_DESTROY);
    close(fd);
}
