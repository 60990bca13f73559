// The bytes of a request head, checked before anything acts on them (RFC 9112). Pure: no socket, no
// libmicrohttpd, no allocation, so that Fuzz/C/fuzz_http_head.c runs every function here under libFuzzer with
// ASan and UBSan (scripts/fuzz). plings_httpd.c's front and its libmicrohttpd callbacks call these.
#ifndef PLINGS_HTTP_HEAD_H
#define PLINGS_HTTP_HEAD_H

#include <stddef.h>

/// What the front does with the bytes that came so far.
enum http_head_verdict {
    HTTP_HEAD_INCOMPLETE,  ///< wait for more (nothing wrong yet)
    HTTP_HEAD_GOOD,        ///< a whole, well-formed head: hand it to libmicrohttpd
    HTTP_HEAD_REFUSED,     ///< answer `status` with `why` and close
};

/// Looks at the first `n` bytes a connection sent (`n` may exceed `limit` by the one byte that tells a head is
/// over it). A request line is judged as soon as its line end came, so one without a version (HTTP/0.9) or
/// otherwise malformed is refused at once rather than left waiting for an empty line that will never come; the
/// header fields are judged once the empty line that ends them came, within `limit` bytes (else 414 or 431).
/// GOOD sets `*end` just past that empty line; REFUSED sets `*status` (400, 411, 414, 431 or 505) and `*why`
/// (a static phrase).
enum http_head_verdict http_head_look(const char *bytes, size_t n, size_t limit, size_t *end, unsigned *status,
                                      const char **why);

/// A byte no request target or header may carry (RFC 9110 section 5.5, RFC 9112 section 3.2): a control character,
/// other than horizontal tab in a value when `tab_allowed`.
int http_is_control(unsigned char c, int tab_allowed);

/// Whether a request target (NUL-terminated, still percent-encoded) carries a control byte or a space, raw or as %XX.
int http_target_has_control(const char *target);

/// Whether [from, to) of libmicrohttpd's parsed header block holds anything but the NULs, line ends and
/// whitespace it leaves between one value's end and the next name: anything else was hidden behind a NUL.
int http_hides_bytes(const char *from, const char *to);

#endif
