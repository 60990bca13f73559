// A small C layer over libcurl's easy interface: curl_easy_setopt is variadic, which Swift cannot call,
// and keeping every libcurl type here means the Swift side sees one plain struct.
#include "plings_curl.h"

#include <curl/curl.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

struct plings_http_client {
    CURL *easy;
    /// Set by another thread (shutdown) to abort the transfer in progress; read by libcurl's progress callback.
    atomic_int cancel;
};

typedef struct {
    plings_http_result *result;
    size_t cap;
    size_t max_body;
} write_state;

int plings_http_global_init(void) { return (int)curl_global_init(CURL_GLOBAL_DEFAULT); }

plings_http_client *plings_http_client_new(void) {
    plings_http_client *client = calloc(1, sizeof *client);
    if (!client) return NULL;
    atomic_init(&client->cancel, 0);
    client->easy = curl_easy_init();
    if (!client->easy) {
        free(client);
        return NULL;
    }
    return client;
}

void plings_http_client_cancel(plings_http_client *client) { atomic_store(&client->cancel, 1); }

int plings_http_client_cancelled(plings_http_client *client) { return atomic_load(&client->cancel); }

void plings_http_client_free(plings_http_client *client) {
    if (!client) return;
    curl_easy_cleanup(client->easy);
    free(client);
}

static size_t on_body(char *data, size_t size, size_t count, void *user) {
    write_state *state = user;
    size_t n = size * count;
    plings_http_result *r = state->result;
    size_t room = state->max_body > r->body_len ? state->max_body - r->body_len : 0;
    size_t take = n < room ? n : room;
    if (take < n) r->body_truncated = 1;
    if (take == 0) return n;  // keep reading (and discarding) so the connection stays reusable
    if (r->body_len + take > state->cap) {
        size_t cap = state->cap ? state->cap * 2 : 4096;
        while (cap < r->body_len + take) cap *= 2;
        unsigned char *grown = realloc(r->body, cap);
        if (!grown) return 0;  // aborts the transfer with CURLE_WRITE_ERROR
        r->body = grown;
        state->cap = cap;
    }
    memcpy(r->body + r->body_len, data, take);
    r->body_len += take;
    return n;
}

/// Copies a header's value (without surrounding blanks and the CR LF) into `out` when its name matches.
static void take_header(const char *data, size_t n, const char *name, char *out, size_t out_size) {
    size_t name_len = strlen(name);
    if (n <= name_len || strncasecmp(data, name, name_len) != 0) return;
    const char *value = data + name_len;
    size_t len = n - name_len;
    while (len > 0 && (*value == ' ' || *value == '\t')) { value++; len--; }
    while (len > 0 && (value[len - 1] == '\r' || value[len - 1] == '\n' || value[len - 1] == ' ')) len--;
    if (len >= out_size) len = out_size - 1;
    memcpy(out, value, len);
    out[len] = 0;
}

static size_t on_header(char *data, size_t size, size_t count, void *user) {
    plings_http_result *r = user;
    size_t n = size * count;
    take_header(data, n, "retry-after:", r->retry_after, sizeof r->retry_after);
    take_header(data, n, "location:", r->location, sizeof r->location);
    return n;
}

static int on_progress(void *user, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal, curl_off_t ulnow) {
    (void)dltotal; (void)dlnow; (void)ultotal; (void)ulnow;
    plings_http_client *client = user;
    return atomic_load(&client->cancel) ? 1 : 0;
}

void plings_http_post(plings_http_client *client, const char *url, const char *const *headers, int header_count,
                      const char *body, size_t body_len, long timeout_ms,
                      size_t max_body, int allow_http, plings_http_result *result) {
    memset(result, 0, sizeof *result);
    CURL *h = client->easy;
    // Options that a previous request may have changed are all set again below.
    // Every header, then "Expect:" (without it libcurl adds "Expect: 100-continue" to larger POSTs and waits a
    // second for the server). A failed append frees what was built and sends nothing: a request without its
    // headers would go out without the token or the idempotency key.
    struct curl_slist *list = NULL;
    for (int i = 0; i <= header_count; i++) {
        struct curl_slist *grown = curl_slist_append(list, i < header_count ? headers[i] : "Expect:");
        if (!grown) {
            curl_slist_free_all(list);
            result->curl_code = CURLE_OUT_OF_MEMORY;
            strcpy(result->error, "out of memory building the request headers");
            return;
        }
        list = grown;
    }

    write_state state = {result, 0, max_body};
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_POST, 1L);
    curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
    curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)body_len);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, list);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &state);
    curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(h, CURLOPT_HEADERDATA, result);
    curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, on_progress);
    curl_easy_setopt(h, CURLOPT_XFERINFODATA, client);
    curl_easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, timeout_ms);
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, timeout_ms);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);  // threads: no SIGALRM for DNS timeouts
    curl_easy_setopt(h, CURLOPT_TCP_NODELAY, 1L);
    curl_easy_setopt(h, CURLOPT_TCP_KEEPALIVE, 1L);
    curl_easy_setopt(h, CURLOPT_SSL_VERIFYPEER, 1L);
    curl_easy_setopt(h, CURLOPT_SSL_VERIFYHOST, 2L);
    curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, 0L);  // a redirect would resend the token elsewhere
    curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, allow_http ? "https,http" : "https");
    // Plain http is allowed only to loopback (the caller checks): it never goes through a proxy, which would
    // receive the Authorization header in clear. https honours https_proxy/no_proxy from the environment (NULL
    // restores libcurl's default); the proxy then sees only the TLS tunnel.
    int plain_http = strncasecmp(url, "http://", 7) == 0;
    curl_easy_setopt(h, CURLOPT_PROXY, plain_http ? "" : NULL);
    curl_easy_setopt(h, CURLOPT_ERRORBUFFER, result->error);

    CURLcode code = curl_easy_perform(h);
    result->curl_code = (int)code;
    if (code == CURLE_OK) {
        long status = 0;
        curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
        result->status = status;
    } else if (result->error[0] == 0) {
        strncpy(result->error, curl_easy_strerror(code), sizeof result->error - 1);
    }
    // The error buffer and our state live on this stack frame: detach them before returning.
    curl_easy_setopt(h, CURLOPT_ERRORBUFFER, NULL);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, NULL);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, NULL);
    curl_easy_setopt(h, CURLOPT_HEADERDATA, NULL);
    curl_easy_setopt(h, CURLOPT_XFERINFODATA, NULL);
    curl_slist_free_all(list);
}

void plings_http_result_free(plings_http_result *result) {
    free(result->body);
    result->body = NULL;
    result->body_len = 0;
}

const char *plings_http_curl_version(void) { return curl_version(); }
