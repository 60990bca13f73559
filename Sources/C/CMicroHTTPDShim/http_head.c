// The request-head checks (see http_head.h).
#include "http_head.h"

#include <string.h>
#include <strings.h>

int http_is_control(unsigned char c, int tab_allowed) { return (c < 0x20 && !(tab_allowed && c == '\t')) || c == 0x7f; }

int http_target_has_control(const char *target) {
    for (const unsigned char *p = (const unsigned char *)target; *p; p++) {
        if (http_is_control(*p, 0) || *p == ' ') return 1;
        if (p[0] == '%' && p[1] && p[2]) {
            int high = p[1] >= '0' && p[1] <= '9' ? p[1] - '0' : (p[1] | 0x20) >= 'a' && (p[1] | 0x20) <= 'f' ? (p[1] | 0x20) - 'a' + 10 : -1;
            int low = p[2] >= '0' && p[2] <= '9' ? p[2] - '0' : (p[2] | 0x20) >= 'a' && (p[2] | 0x20) <= 'f' ? (p[2] | 0x20) - 'a' + 10 : -1;
            if (high >= 0 && low >= 0 && http_is_control((unsigned char)(high << 4 | low), 0)) return 1;
        }
    }
    return 0;
}

int http_hides_bytes(const char *from, const char *to) {
    for (const char *p = from; p < to; p++) {
        if (*p != 0 && *p != '\r' && *p != '\n' && *p != ' ' && *p != '\t') return 1;
    }
    return 0;
}

// token characters (RFC 9110 section 5.6.2).
static int is_tchar(unsigned char c) {
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
           (c != 0 && strchr("!#$%&'*+-.^_`|~", c) != NULL);
}

// Where the request line begins: empty lines before it are skipped (RFC 9112 section 2.2).
static size_t head_start(const char *b, size_t n) {
    size_t i = 0;
    while (i < n && (b[i] == '\n' || (b[i] == '\r' && i + 1 < n && b[i + 1] == '\n'))) i += b[i] == '\r' ? 2 : 1;
    return i;
}

// Just past the empty line that ends a head beginning at `start`, looking no further than `n`; 0 while it has not
// all come.
static size_t head_end(const char *b, size_t start, size_t n) {
    for (size_t i = start; i < n; i++) {
        if (b[i] != '\n') continue;
        if (i + 1 < n && b[i + 1] == '\n') return i + 2;
        if (i + 2 < n && b[i + 1] == '\r' && b[i + 2] == '\n') return i + 3;
    }
    return 0;
}

// The end of the line at `from` (its LF, which is there) and where its content stops (before a CR that ends it).
static size_t line_at(const char *b, size_t from, size_t *stop) {
    size_t end = from;
    while (b[end] != '\n') end++;
    *stop = end > from && b[end - 1] == '\r' ? end - 1 : end;
    return end;
}

// request-line = method SP request-target SP HTTP-version (RFC 9112 section 3), its content [start, stop). NULL
// when it is one the server takes, with the version's minor digit; else why not and the status (400 or 505).
static const char *check_request_line(const char *b, size_t start, size_t stop, unsigned *status, char *minor) {
    *status = 400;
    size_t p = start;
    while (p < stop && is_tchar((unsigned char)b[p])) p++;
    if (p == start || p >= stop || b[p] != ' ') return "a malformed request line";
    size_t target = ++p;
    while (p < stop && (unsigned char)b[p] > ' ' && b[p] != 0x7f) p++;
    if (p < stop && b[p] != ' ') return b[p] == 0 ? "a NUL byte in the request target"
                                                  : "a control byte in the request target";
    if (p == target || p >= stop) return "a malformed request line";
    const char *version = b + p + 1;
    if (stop - p - 1 != 8 || memcmp(version, "HTTP/", 5) != 0 || version[5] < '0' || version[5] > '9' ||
        version[6] != '.' || version[7] < '0' || version[7] > '9')
        return "a malformed request line";
    if (version[5] != '1' || (version[7] != '0' && version[7] != '1')) {
        *status = 505;
        return "HTTP version not supported";
    }
    *minor = version[7];
    return NULL;
}

// The header fields of a complete head, from `from` (just past the request line's LF) to `end` (just past the
// empty line): RFC 9112 sections 5 and 6.3. Over plain HTTP these are the only checks of the framing; the target's
// percent-encoded control bytes and the Host value are checked later, on the parsed request.
static const char *check_fields(const char *b, size_t from, size_t end, char minor, unsigned *status) {
    *status = 400;
    const char *length = NULL;
    size_t length_size = 0, stop, line_end;
    int transfer_encodings = 0, hosts = 0;
    for (size_t i = from; i < end; i = line_end + 1) {
        line_end = line_at(b, i, &stop);
        if (stop == i) break;
        if (b[i] == ' ' || b[i] == '\t') return "a folded header line";
        size_t p = i;
        while (p < stop && is_tchar((unsigned char)b[p])) p++;
        if (p == i || p >= stop || b[p] != ':') return "a malformed header name";
        const char *name = b + i;
        size_t name_size = p - i;
        for (size_t k = ++p; k < stop; k++) {
            if (b[k] == 0) return "a NUL byte in a header";
            if (http_is_control((unsigned char)b[k], 1)) return "a control byte in a header";
        }
        while (p < stop && (b[p] == ' ' || b[p] == '\t')) p++;
        size_t q = stop;
        while (q > p && (b[q - 1] == ' ' || b[q - 1] == '\t')) q--;
        if (name_size == 14 && strncasecmp(name, "Content-Length", 14) == 0) {
            if (q == p || q - p > 18) return "an invalid Content-Length";
            for (size_t k = p; k < q; k++) {
                if (b[k] < '0' || b[k] > '9') return "an invalid Content-Length";
            }
            if (length != NULL && (length_size != q - p || memcmp(length, b + p, q - p) != 0))
                return "two different Content-Length headers";
            length = b + p;
            length_size = q - p;
        } else if (name_size == 17 && strncasecmp(name, "Transfer-Encoding", 17) == 0) {
            transfer_encodings++;
        } else if (name_size == 4 && strncasecmp(name, "Host", 4) == 0) {
            hosts++;
        }
    }
    if (hosts > 1) return "more than one Host header";
    if (hosts == 0 && minor == '1') return "no Host header";
    if (length != NULL && transfer_encodings > 0) return "Content-Length together with Transfer-Encoding";
    if (transfer_encodings > 0) {
        // A chunked body is valid HTTP/1.1, but nothing here takes one (the one form is small), and refusing it
        // leaves no body framing to libmicrohttpd's own error answers.
        *status = 411;
        return "a request body needs Content-Length";
    }
    return NULL;
}

enum http_head_verdict http_head_look(const char *b, size_t n, size_t limit, size_t *end, unsigned *status,
                                      const char **why) {
    size_t seen = n > limit ? limit : n;
    size_t start = head_start(b, seen);
    const char *first_lf = start < seen ? memchr(b + start, '\n', seen - start) : NULL;
    if (first_lf == NULL) {
        if (n <= limit) return HTTP_HEAD_INCOMPLETE;
        *status = 414;
        *why = "request line too long";
        return HTTP_HEAD_REFUSED;
    }
    size_t line_end = (size_t)(first_lf - b), stop;
    (void)line_at(b, start, &stop);
    char minor = 0;
    if ((*why = check_request_line(b, start, stop, status, &minor)) != NULL) return HTTP_HEAD_REFUSED;
    size_t head = head_end(b, start, seen);
    if (head == 0) {
        if (n <= limit) return HTTP_HEAD_INCOMPLETE;
        *status = 431;
        *why = "request header fields too large";
        return HTTP_HEAD_REFUSED;
    }
    if ((*why = check_fields(b, line_end + 1, head, minor, status)) != NULL) return HTTP_HEAD_REFUSED;
    *end = head;
    return HTTP_HEAD_GOOD;
}
