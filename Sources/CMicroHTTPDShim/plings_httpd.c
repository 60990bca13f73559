// libmicrohttpd behind plain C functions (see include/plings_httpd.h).
#include "plings_httpd.h"

#include <arpa/inet.h>
#include <errno.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

struct plings_httpd_server {
    struct MHD_Daemon *daemon;
    plings_httpd_handler handler;
    void *context;
    size_t max_body;
    uint16_t port;
};

struct plings_httpd_request {
    struct MHD_Connection *connection;
    /// The request target as it arrived (before percent-decoding), and its length up to the first NUL.
    const char *raw_target;
    size_t raw_target_length;
    /// Why the request is malformed (answered 400 and closed before any handler sees it); NULL when it is not.
    const char *malformed;
    int started;
    plings_httpd_server *server;
    const char *method;
    const char *path;
    char *body;
    size_t body_length;
    int too_large;
    int responded;
    enum MHD_Result result;
};

static void set_error(char *error, size_t size, const char *what, int code) {
    if (error == NULL || size == 0) return;
    if (code != 0) snprintf(error, size, "%s: %s", what, strerror(code));
    else snprintf(error, size, "%s", what);
}

// A listening socket made here rather than by MHD, so a failure says why (MHD only returns NULL).
static int listen_socket(const char *address, uint16_t port, int *ipv6, char *error, size_t error_size) {
    struct sockaddr_storage storage;
    memset(&storage, 0, sizeof storage);
    socklen_t length;
    struct sockaddr_in *v4 = (struct sockaddr_in *)&storage;
    struct sockaddr_in6 *v6 = (struct sockaddr_in6 *)&storage;
    if (inet_pton(AF_INET, address, &v4->sin_addr) == 1) {
        v4->sin_family = AF_INET;
        v4->sin_port = htons(port);
        length = sizeof *v4;
        *ipv6 = 0;
    } else if (inet_pton(AF_INET6, address, &v6->sin6_addr) == 1) {
        v6->sin6_family = AF_INET6;
        v6->sin6_port = htons(port);
        length = sizeof *v6;
        *ipv6 = 1;
    } else {
        set_error(error, error_size, "not a numeric IP address", 0);
        return -1;
    }
    int fd = socket(storage.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        set_error(error, error_size, "socket", errno);
        return -1;
    }
    int one = 1;
    // A restart must not wait out the old process's TIME_WAIT connections.
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (*ipv6) setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one);
    if (bind(fd, (struct sockaddr *)&storage, length) != 0) {
        set_error(error, error_size, "cannot bind", errno);
        close(fd);
        return -1;
    }
    if (listen(fd, 64) != 0) {
        set_error(error, error_size, "cannot listen", errno);
        close(fd);
        return -1;
    }
    return fd;
}

// Answers `text` (copied) and closes the connection, with the headers every answer carries.
static enum MHD_Result queue_plain_copy(struct MHD_Connection *connection, unsigned status, const char *text) {
    struct MHD_Response *response =
        MHD_create_response_from_buffer(strlen(text), (void *)text, MHD_RESPMEM_MUST_COPY);
    if (response == NULL) return MHD_NO;
    MHD_add_response_header(response, MHD_HTTP_HEADER_CONTENT_TYPE, "text/plain; charset=utf-8");
    MHD_add_response_header(response, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
    MHD_add_response_header(response, "X-Content-Type-Options", "nosniff");
    MHD_add_response_header(response, MHD_HTTP_HEADER_CONNECTION, "close");
    enum MHD_Result result = MHD_queue_response(connection, status, response);
    MHD_destroy_response(response);
    return result;
}

static enum MHD_Result queue_plain(struct MHD_Connection *connection, unsigned status, const char *text) {
    return queue_plain_copy(connection, status, text);
}

// A byte no request target or header may carry (RFC 9110 section 5.5, RFC 9112 section 3.2): a control character
// other than horizontal tab in a value. A NUL in particular would cut what the handler acts on short of what came.
static int is_control(unsigned char c, int tab_allowed) { return (c < 0x20 && !(tab_allowed && c == '\t')) || c == 0x7f; }

// Whether a request target, still percent-encoded, carries a control byte, raw or as %XX.
static int target_has_control(const char *target) {
    for (const unsigned char *p = (const unsigned char *)target; *p; p++) {
        if (is_control(*p, 0) || *p == ' ') return 1;
        if (p[0] == '%' && p[1] && p[2]) {
            char hex[3] = {(char)p[1], (char)p[2], 0};
            char *end = NULL;
            long byte = strtol(hex, &end, 16);
            if (end == hex + 2 && is_control((unsigned char)byte, 0)) return 1;
        }
    }
    return 0;
}

// MHD's URI log callback: it sees the target before it is decoded; what it returns is the request's state.
static void *note_target(void *cls, const char *uri, struct MHD_Connection *connection) {
    (void)cls;
    plings_httpd_request *request = calloc(1, sizeof *request);
    if (request == NULL) return NULL;
    request->connection = connection;
    request->raw_target = uri;
    request->raw_target_length = strlen(uri);
    if (target_has_control(uri)) request->malformed = "a control byte in the request target";
    return request;
}

struct header_check {
    /// Where the previous header's value ended, and the end of the header block in MHD's read buffer.
    const char *previous_end;
    const char *block_end;
    int hosts;
    int content_lengths;
    int transfer_encodings;
    const char *content_length;
    const char *malformed;
};

// MHD parses the header block in place and ends each name and value with a NUL where its separator or line end
// was: between one value's end and the next name there are only those and whitespace. Anything else there was
// hidden behind a NUL byte inside the value, which every string API here would cut.
static int hides_bytes(const char *from, const char *to) {
    for (const char *p = from; p < to; p++) {
        if (*p != 0 && *p != '\r' && *p != '\n' && *p != ' ' && *p != '\t') return 1;
    }
    return 0;
}

static enum MHD_Result check_header(void *cls, enum MHD_ValueKind kind, const char *key, size_t key_size,
                                    const char *value, size_t value_size) {
    (void)kind;
    struct header_check *check = cls;
    if (check->previous_end != NULL && key > check->previous_end && key < check->block_end &&
        hides_bytes(check->previous_end, key))
        check->malformed = "a NUL byte in a header";
    check->previous_end = value != NULL ? value + strlen(value) : key + strlen(key);
    if (key == NULL || strlen(key) != key_size || key_size == 0) {
        check->malformed = "a malformed header name";
        return MHD_YES;
    }
    for (size_t i = 0; i < key_size; i++) {
        unsigned char c = (unsigned char)key[i];
        if (is_control(c, 0) || c == ' ' || c == '\t' || c == ':') check->malformed = "a malformed header name";
    }
    if (value != NULL) {
        if (strlen(value) != value_size) check->malformed = "a NUL byte in a header";
        for (size_t i = 0; i < value_size; i++) {
            if (is_control((unsigned char)value[i], 1)) check->malformed = "a control byte in a header";
        }
    }
    if (strcasecmp(key, MHD_HTTP_HEADER_HOST) == 0) check->hosts++;
    if (strcasecmp(key, MHD_HTTP_HEADER_TRANSFER_ENCODING) == 0) check->transfer_encodings++;
    if (strcasecmp(key, MHD_HTTP_HEADER_CONTENT_LENGTH) == 0) {
        if (check->content_length != NULL && value != NULL && strcmp(check->content_length, value) != 0)
            check->malformed = "two different Content-Length headers";
        check->content_length = value;
        check->content_lengths++;
    }
    return MHD_YES;
}

// The framing rules of RFC 9112 (sections 3.2 and 6.3) that MHD leaves to the application, checked once per
// request before anything acts on it: one Host (exactly one in HTTP/1.1), no Content-Length beside a
// Transfer-Encoding, no two Content-Lengths that differ, nothing hidden behind a NUL. NULL when it holds.
static const char *malformed_request(plings_httpd_request *request, const char *method, const char *version) {
    if (request->malformed != NULL) return request->malformed;
    // MHD parses the request line in place: the version follows the target's terminating NUL. Anything more in
    // between was behind a NUL byte inside the target.
    if (request->raw_target != NULL && version > request->raw_target &&
        (size_t)(version - request->raw_target) < 65536 &&
        (size_t)(version - request->raw_target) > request->raw_target_length + 1)
        return "a NUL byte in the request target";
    struct header_check check = {0};
    const union MHD_ConnectionInfo *size =
        MHD_get_connection_info(request->connection, MHD_CONNECTION_INFO_REQUEST_HEADER_SIZE);
    check.block_end = size != NULL && method != NULL ? method + size->header_size : NULL;
    MHD_get_connection_values_n(request->connection, MHD_HEADER_KIND, check_header, &check);
    // The last value: up to the end of the block (the empty line that ends it).
    if (check.malformed == NULL && check.previous_end != NULL && check.block_end != NULL &&
        check.previous_end < check.block_end && check.block_end - check.previous_end < 65536 &&
        hides_bytes(check.previous_end, check.block_end))
        check.malformed = "a NUL byte in a header";
    if (check.malformed != NULL) return check.malformed;
    if (check.hosts > 1) return "more than one Host header";
    if (check.hosts == 0 && strcmp(version, MHD_HTTP_VERSION_1_1) == 0) return "no Host header";
    if (check.content_lengths > 0 && check.transfer_encodings > 0)
        return "Content-Length together with Transfer-Encoding";
    return NULL;
}

static enum MHD_Result access_handler(void *cls, struct MHD_Connection *connection, const char *url,
                                      const char *method, const char *version, const char *upload_data,
                                      size_t *upload_data_size, void **con_cls) {
    plings_httpd_server *server = cls;
    plings_httpd_request *request = *con_cls;
    if (request == NULL) {
        request = calloc(1, sizeof *request);
        if (request == NULL) return MHD_NO;
        request->connection = connection;
        *con_cls = request;
    }
    if (!request->started) {
        request->started = 1;
        request->server = server;
        request->method = method;
        request->path = url;
        const char *malformed = malformed_request(request, method, version);
        if (malformed != NULL) {
            request->responded = 1;
            char text[160];
            snprintf(text, sizeof text, "bad request: %s\n", malformed);
            return queue_plain_copy(connection, MHD_HTTP_BAD_REQUEST, text);
        }
        const char *declared =
            MHD_lookup_connection_value(connection, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
        if (declared != NULL && strtoull(declared, NULL, 10) > server->max_body) {
            request->responded = 1;
            return queue_plain(connection, MHD_HTTP_CONTENT_TOO_LARGE, "request body too large\n");
        }
        return MHD_YES;
    }
    if (request->responded) {
        *upload_data_size = 0;
        return MHD_YES;
    }
    if (*upload_data_size > 0) {
        size_t more = *upload_data_size;
        *upload_data_size = 0;
        if (request->too_large) return MHD_YES;
        if (request->body_length + more > server->max_body) {
            request->too_large = 1;
            free(request->body);
            request->body = NULL;
            request->body_length = 0;
            return MHD_YES;
        }
        char *grown = realloc(request->body, request->body_length + more + 1);
        if (grown == NULL) return MHD_NO;
        memcpy(grown + request->body_length, upload_data, more);
        request->body = grown;
        request->body_length += more;
        request->body[request->body_length] = 0;
        return MHD_YES;
    }
    if (request->too_large) {
        request->responded = 1;
        return queue_plain(connection, MHD_HTTP_CONTENT_TOO_LARGE, "request body too large\n");
    }
    server->handler(server->context, request);
    if (!request->responded) {
        request->responded = 1;
        return queue_plain(connection, MHD_HTTP_INTERNAL_SERVER_ERROR, "no response\n");
    }
    return request->result;
}

static void request_completed(void *cls, struct MHD_Connection *connection, void **con_cls,
                              enum MHD_RequestTerminationCode code) {
    (void)cls;
    (void)connection;
    (void)code;
    plings_httpd_request *request = *con_cls;
    if (request == NULL) return;
    free(request->body);
    free(request);
    *con_cls = NULL;
}

plings_httpd_server *plings_httpd_start(const plings_httpd_options *options, plings_httpd_handler handler,
                                        void *context, char *error, size_t error_size) {
    int ipv6 = 0;
    int fd = listen_socket(options->address, options->port, &ipv6, error, error_size);
    if (fd < 0) return NULL;
    struct sockaddr_storage bound;
    socklen_t bound_length = sizeof bound;
    uint16_t port = options->port;
    if (getsockname(fd, (struct sockaddr *)&bound, &bound_length) == 0) {
        port = ntohs(bound.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&bound)->sin6_port
                                                  : ((struct sockaddr_in *)&bound)->sin_port);
    }
    plings_httpd_server *server = calloc(1, sizeof *server);
    if (server == NULL) {
        close(fd);
        set_error(error, error_size, "out of memory", 0);
        return NULL;
    }
    server->handler = handler;
    server->context = context;
    server->max_body = options->max_body;
    server->port = port;
    unsigned flags = MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_POLL;
    if (ipv6) flags |= MHD_USE_IPv6;
    int tls = options->cert_pem != NULL && options->key_pem != NULL;
    if (tls) {
        if (MHD_is_feature_supported(MHD_FEATURE_TLS) != MHD_YES) {
            close(fd);
            free(server);
            set_error(error, error_size, "this libmicrohttpd has no TLS", 0);
            return NULL;
        }
        flags |= MHD_USE_TLS;
    }
    struct MHD_OptionItem items[] = {
        {MHD_OPTION_LISTEN_SOCKET, fd, NULL},
        {MHD_OPTION_CONNECTION_LIMIT, (intptr_t)options->connection_limit, NULL},
        {MHD_OPTION_CONNECTION_TIMEOUT, (intptr_t)options->connection_timeout, NULL},
        // Request headers and the connection's buffers: bounded per connection.
        {MHD_OPTION_CONNECTION_MEMORY_LIMIT, 64 * 1024, NULL},
        {MHD_OPTION_NOTIFY_COMPLETED, (intptr_t)request_completed, NULL},
        {MHD_OPTION_URI_LOG_CALLBACK, (intptr_t)note_target, NULL},
        // Handlers run Swift and SQLite; 512 KiB is ample and keeps 64 connections' address space small.
        {MHD_OPTION_THREAD_STACK_SIZE, 512 * 1024, NULL},
        {tls ? MHD_OPTION_HTTPS_MEM_CERT : MHD_OPTION_END, 0, (void *)options->cert_pem},
        {tls ? MHD_OPTION_HTTPS_MEM_KEY : MHD_OPTION_END, 0, (void *)options->key_pem},
        {MHD_OPTION_END, 0, NULL},
    };
    server->daemon = MHD_start_daemon(flags, 0, NULL, NULL, access_handler, server, MHD_OPTION_ARRAY, items,
                                      MHD_OPTION_END);
    if (server->daemon == NULL) {
        close(fd);
        free(server);
        set_error(error, error_size, tls ? "cannot start (is the certificate or key malformed?)" : "cannot start",
                  0);
        return NULL;
    }
    return server;
}

uint16_t plings_httpd_port(const plings_httpd_server *server) { return server->port; }

void plings_httpd_stop(plings_httpd_server *server) {
    if (server == NULL) return;
    MHD_stop_daemon(server->daemon);
    free(server);
}

const char *plings_httpd_method(const plings_httpd_request *request) { return request->method; }
const char *plings_httpd_path(const plings_httpd_request *request) { return request->path; }

const char *plings_httpd_header(const plings_httpd_request *request, const char *name) {
    return MHD_lookup_connection_value(request->connection, MHD_HEADER_KIND, name);
}

const char *plings_httpd_argument(const plings_httpd_request *request, const char *name) {
    return MHD_lookup_connection_value(request->connection, MHD_GET_ARGUMENT_KIND, name);
}

const char *plings_httpd_cookie(const plings_httpd_request *request, const char *name) {
    return MHD_lookup_connection_value(request->connection, MHD_COOKIE_KIND, name);
}

const char *plings_httpd_body(const plings_httpd_request *request, size_t *length) {
    *length = request->body_length;
    return request->body;
}

static void add_headers(struct MHD_Response *response, const char *const *headers) {
    if (headers == NULL) return;
    for (size_t i = 0; headers[i] != NULL && headers[i + 1] != NULL; i += 2) {
        MHD_add_response_header(response, headers[i], headers[i + 1]);
    }
}

// Queues `response` (NULL: it could not be made) with its headers, and releases it.
static int queue(plings_httpd_request *request, unsigned status, const char *const *headers,
                 struct MHD_Response *response) {
    if (response == NULL) {
        request->result = MHD_NO;
        return 0;
    }
    add_headers(response, headers);
    request->result = MHD_queue_response(request->connection, status, response);
    MHD_destroy_response(response);
    return request->result == MHD_YES;
}

int plings_httpd_respond(plings_httpd_request *request, unsigned status, const char *const *headers,
                         const void *body, size_t length) {
    if (request->responded) return 0;
    request->responded = 1;
    return queue(request, status, headers,
                 MHD_create_response_from_buffer(length, (void *)(length ? body : ""), MHD_RESPMEM_MUST_COPY));
}

// A stream's reader and its context, behind MHD's own reader signature.
struct stream {
    plings_httpd_reader reader;
    plings_httpd_release release;
    void *context;
};

static ssize_t stream_read(void *cls, uint64_t pos, char *buffer, size_t max) {
    (void)pos;
    struct stream *stream = cls;
    ssize_t count = stream->reader(stream->context, buffer, max);
    // 0 would make MHD call again at once (a busy loop): a reader that has nothing ends the stream.
    return count > 0 ? count : MHD_CONTENT_READER_END_OF_STREAM;
}

static void stream_free(void *cls) {
    struct stream *stream = cls;
    stream->release(stream->context);
    free(stream);
}

int plings_httpd_respond_stream(plings_httpd_request *request, unsigned status, const char *const *headers,
                                plings_httpd_reader reader, void *context, plings_httpd_release release) {
    struct stream *stream = request->responded ? NULL : malloc(sizeof *stream);
    if (stream == NULL) {
        release(context);
        return 0;
    }
    request->responded = 1;
    stream->reader = reader;
    stream->release = release;
    stream->context = context;
    struct MHD_Response *response =
        MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16 * 1024, stream_read, stream, stream_free);
    if (response == NULL) stream_free(stream);
    return queue(request, status, headers, response);
}
