// libFuzzer target for the local interface's front (Sources/C/CMicroHTTPDShim/http_head.c): every byte a client
// sends before libmicrohttpd sees it. Built by scripts/fuzz with clang's -fsanitize=fuzzer,address,undefined.
//
// The input's first byte picks the head limit (so the 414/431 edges are reached with inputs of a few hundred
// bytes, where the service's limit is 64 KiB); the rest is what the client sent. Besides ASan/UBSan's own
// findings, it checks what the front relies on, and aborts when one fails:
// - a verdict is one of the three, a refusal has a status the front answers (400, 411, 414, 431, 505) and a why;
// - a good head ends with its empty line, within what came and within the limit;
// - the front looks again at every new segment, so a verdict reached on a prefix stands when more comes: a good
//   head stays good and ends at the same place, a refusal stays the same refusal (the head limit aside);
// - each prefix is looked at in a buffer of exactly its length, so a read past what came is an ASan report.
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../Sources/C/CMicroHTTPDShim/http_head.h"

struct look {
    enum http_head_verdict verdict;
    size_t end;
    unsigned status;
    const char *why;
};

static struct look look_at(const uint8_t *data, size_t n, size_t limit) {
    char *copy = malloc(n ? n : 1);
    if (copy == NULL) abort();
    memcpy(copy, data, n);
    struct look l = {.end = 0, .status = 0, .why = NULL};
    l.verdict = http_head_look(copy, n, limit, &l.end, &l.status, &l.why);
    free(copy);
    switch (l.verdict) {
    case HTTP_HEAD_INCOMPLETE: break;
    case HTTP_HEAD_GOOD:
        if (l.end == 0 || l.end > n || l.end > limit || data[l.end - 1] != '\n') abort();
        break;
    case HTTP_HEAD_REFUSED:
        if (l.status != 400 && l.status != 411 && l.status != 414 && l.status != 431 && l.status != 505) abort();
        if (l.why == NULL || l.why[0] == 0) abort();
        break;
    default: abort();
    }
    return l;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    size_t limit = 8 + (size_t)data[0] * 4;
    const uint8_t *bytes = data + 1;
    size_t n = size - 1;
    // The front peeks at most limit + 1 bytes.
    if (n > limit + 1) n = limit + 1;
    struct look whole = look_at(bytes, n, limit);
    // Prefixes ending just after each line end (where a verdict can change), at most 64 of them.
    size_t looked = 0;
    for (size_t k = 1; k < n && looked < 64; k++) {
        if (bytes[k - 1] != '\n') continue;
        looked++;
        struct look part = look_at(bytes, k, limit);
        if (part.verdict == HTTP_HEAD_GOOD &&
            (whole.verdict != HTTP_HEAD_GOOD || whole.end != part.end))
            abort();
        if (part.verdict == HTTP_HEAD_REFUSED && part.status != 414 && part.status != 431 &&
            (whole.verdict != HTTP_HEAD_REFUSED || whole.status != part.status || strcmp(whole.why, part.why) != 0))
            abort();
    }
    // The checks libmicrohttpd's callbacks make on what it parsed: a target as a C string, a header block's gap.
    char *text = malloc(n + 1);
    if (text == NULL) abort();
    memcpy(text, bytes, n);
    text[n] = 0;
    volatile int sink = http_target_has_control(text) + http_hides_bytes(text, text + n);
    (void)sink;
    free(text);
    return 0;
}
