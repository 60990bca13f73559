#ifndef PLINGS_CURL_H
#define PLINGS_CURL_H

#include <stddef.h>

/// One HTTP POST's result, filled by plings_http_post. Plain data: Swift never sees a CURL struct.
typedef struct plings_http_result {
    long status;              ///< HTTP status, 0 when no response arrived
    int curl_code;            ///< CURLcode, 0 on success
    char error[256];          ///< libcurl's message for a failure (never contains request headers)
    char retry_after[64];     ///< the Retry-After header value, empty when absent
    char location[512];       ///< the Location header value (redirects), empty when absent
    unsigned char *body;      ///< response body (malloc'd, free with plings_http_result_free), may be NULL
    size_t body_len;
    int body_truncated;       ///< 1 when the body exceeded the cap and was cut
} plings_http_result;

/// An opaque client: one libcurl easy handle, reused so the connection stays alive between requests.
typedef struct plings_http_client plings_http_client;

/// Global libcurl init; call once per process before any client.
int plings_http_global_init(void);

plings_http_client *plings_http_client_new(void);
void plings_http_client_free(plings_http_client *client);
/// Aborts the transfer in progress and every later one (shutdown). Safe from any thread (an atomic store).
void plings_http_client_cancel(plings_http_client *client);
/// Whether `plings_http_client_cancel` was called.
int plings_http_client_cancelled(plings_http_client *client);

/// POSTs `body` to `url` with `headers` ("Name: value" strings). Blocks up to `timeout_ms`.
/// A cancelled client (plings_http_client_cancel) aborts the transfer.
/// Responses larger than `max_body` are cut (body_truncated set). TLS peer and host are always verified.
/// `allow_http` permits plain http:// (the caller restricts that to loopback).
void plings_http_post(plings_http_client *client, const char *url, const char *const *headers, int header_count,
                      const char *body, size_t body_len, long timeout_ms,
                      size_t max_body, int allow_http, plings_http_result *result);

void plings_http_result_free(plings_http_result *result);

/// The libcurl version string, for `plings-bridge version`.
const char *plings_http_curl_version(void);

#endif
