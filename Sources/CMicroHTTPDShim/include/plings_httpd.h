#ifndef PLINGS_HTTPD_H
#define PLINGS_HTTPD_H

// libmicrohttpd behind a few plain C functions: MHD_start_daemon is variadic (Swift cannot call it), and Swift
// never sees an MHD struct. One thread per connection, so a handler or a stream's reader may block; a slow or
// stalled client only ever holds its own thread.

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

typedef struct plings_httpd_server plings_httpd_server;
/// One request, valid from the handler's call until the response ends.
typedef struct plings_httpd_request plings_httpd_request;

/// Called once per complete request (the body read, within `max_body`) on the connection's thread; it must call
/// plings_httpd_respond or plings_httpd_respond_stream once (otherwise the client gets a 500).
typedef void (*plings_httpd_handler)(void *context, plings_httpd_request *request);
/// Fills up to `max` bytes of a streamed body; may block (the connection has its own thread). Returns the byte
/// count (> 0), or -1 to end the stream.
typedef ssize_t (*plings_httpd_reader)(void *context, char *buffer, size_t max);
/// Releases a stream's context once the connection is done with it.
typedef void (*plings_httpd_release)(void *context);

typedef struct plings_httpd_options {
    const char *address;          ///< numeric IPv4 or IPv6 address, no brackets
    uint16_t port;                ///< 0: any free port (plings_httpd_port tells which)
    unsigned connection_limit;    ///< connections at once; more are refused
    unsigned connection_timeout;  ///< seconds a connection may stay silent (a stalled reader included)
    size_t max_body;              ///< bytes a request body may have (413 beyond)
    const char *cert_pem;         ///< NULL for plain HTTP; else the certificate chain (PEM) ...
    const char *key_pem;          ///< ... and its private key (PEM)
} plings_httpd_options;

/// Binds, listens and starts serving. On failure returns NULL with a one-line reason in `error`.
plings_httpd_server *plings_httpd_start(const plings_httpd_options *options, plings_httpd_handler handler,
                                        void *context, char *error, size_t error_size);
/// The port the server listens on.
uint16_t plings_httpd_port(const plings_httpd_server *server);
/// Stops accepting, closes every connection and joins their threads. A stream's reader that blocks must be
/// released first (the caller ends its streams, then stops).
void plings_httpd_stop(plings_httpd_server *server);

const char *plings_httpd_method(const plings_httpd_request *request);
/// The path without the query.
const char *plings_httpd_path(const plings_httpd_request *request);
/// A request header, a query argument or a cookie by name; NULL when absent.
const char *plings_httpd_header(const plings_httpd_request *request, const char *name);
const char *plings_httpd_argument(const plings_httpd_request *request, const char *name);
const char *plings_httpd_cookie(const plings_httpd_request *request, const char *name);
/// The request body (NULL when none).
const char *plings_httpd_body(const plings_httpd_request *request, size_t *length);

/// A whole response. `headers` holds name, value, name, value, ... and ends with NULL.
int plings_httpd_respond(plings_httpd_request *request, unsigned status, const char *const *headers,
                         const void *body, size_t length);
/// A streamed response of unknown length (chunked): `reader` is called on the connection's thread until it
/// returns -1 or the client goes; `release` is called once afterwards (also when the response cannot start).
int plings_httpd_respond_stream(plings_httpd_request *request, unsigned status, const char *const *headers,
                                plings_httpd_reader reader, void *context, plings_httpd_release release);

#endif
