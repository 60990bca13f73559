#ifndef PLINGS_HTTPD_H
#define PLINGS_HTTPD_H

// libmicrohttpd behind a few plain C functions: MHD_start_daemon is variadic (Swift cannot call it), and Swift
// never sees an MHD struct. One thread serves every connection (epoll), so handlers and stream readers must not
// block: a stream with nothing to send says so and is parked until plings_httpd_wake_streams. A second thread
// closes requests that take too long, streams nobody reads and, at the limit, the oldest waiting connection.

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

typedef struct plings_httpd_server plings_httpd_server;
/// One request, valid from the handler's call until the response ends.
typedef struct plings_httpd_request plings_httpd_request;

/// Called once per complete request (the body read, within `max_body`) on the server's thread; it must call
/// plings_httpd_respond or plings_httpd_respond_stream once (otherwise the client gets a 500), and not block.
typedef void (*plings_httpd_handler)(void *context, plings_httpd_request *request);
/// Fills up to `max` bytes of a streamed body, without blocking. Returns the byte count (> 0); 0 when there is
/// nothing to send now (the stream is parked until plings_httpd_wake_streams, or until it has been quiet for
/// `keepalive` seconds: then `quiet` is 1 and the reader should send something); -1 to end the stream.
typedef ssize_t (*plings_httpd_reader)(void *context, char *buffer, size_t max, int quiet);
/// Releases a stream's context once the connection is done with it.
typedef void (*plings_httpd_release)(void *context);

typedef struct plings_httpd_options {
    const char *address;          ///< numeric IPv4 or IPv6 address, no brackets
    uint16_t port;                ///< 0: any free port (plings_httpd_port tells which)
    unsigned connection_limit;    ///< connections at once; beyond, the oldest waiting for a request is closed
    unsigned connection_timeout;  ///< seconds a connection answering a request may stay silent
    double request_timeout;       ///< seconds to send a whole request, from connecting or the previous answer
    double stall_timeout;         ///< seconds a stream may go without its client taking anything
    double keepalive;             ///< seconds a stream may stay quiet before its reader is asked with `quiet`
    size_t max_body;              ///< bytes a request body may have (413 beyond)
    const char *cert_pem;         ///< NULL for plain HTTP; else the certificate chain (PEM) ...
    const char *key_pem;          ///< ... and its private key (PEM)
} plings_httpd_options;

/// Connections now, by what they are doing, and those the server closed, by why (since start).
typedef struct plings_httpd_counts {
    uint64_t waiting;             ///< waiting for or reading a request
    uint64_t answering;           ///< being answered
    uint64_t streaming;           ///< holding a stream
    uint64_t closed_incomplete;   ///< no complete request within `request_timeout`
    uint64_t closed_stalled;      ///< a stream its client did not read for `stall_timeout`
    uint64_t closed_at_limit;     ///< closed to make room at `connection_limit`
    uint64_t streams_left;        ///< streams whose client hung up
    uint64_t refused_malformed;   ///< request heads the front refused (400, 411, 414, 431, 505), plain HTTP only
} plings_httpd_counts;

/// Binds, listens and starts serving. On failure returns NULL with a one-line reason in `error`.
plings_httpd_server *plings_httpd_start(const plings_httpd_options *options, plings_httpd_handler handler,
                                        void *context, char *error, size_t error_size);
/// The port the server listens on.
uint16_t plings_httpd_port(const plings_httpd_server *server);
/// Ends every stream, stops accepting, closes every connection and joins the threads.
void plings_httpd_stop(plings_httpd_server *server);
/// Something new for the streams: each parked one is asked again. Any thread.
void plings_httpd_wake_streams(plings_httpd_server *server);
plings_httpd_counts plings_httpd_get_counts(plings_httpd_server *server);

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
/// A streamed response of unknown length (chunked): `reader` is called on the server's thread until it returns
/// -1 or the client goes; `release` is called once afterwards (also when the response cannot start).
int plings_httpd_respond_stream(plings_httpd_request *request, unsigned status, const char *const *headers,
                                plings_httpd_reader reader, void *context, plings_httpd_release release);

#endif
