// libmicrohttpd behind plain C functions (see include/plings_httpd.h).
#include "plings_httpd.h"

#include <arpa/inet.h>
#include <errno.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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

static enum MHD_Result queue_plain(struct MHD_Connection *connection, unsigned status, const char *text) {
    struct MHD_Response *response =
        MHD_create_response_from_buffer(strlen(text), (void *)text, MHD_RESPMEM_PERSISTENT);
    if (response == NULL) return MHD_NO;
    MHD_add_response_header(response, MHD_HTTP_HEADER_CONTENT_TYPE, "text/plain; charset=utf-8");
    MHD_add_response_header(response, MHD_HTTP_HEADER_CONNECTION, "close");
    enum MHD_Result result = MHD_queue_response(connection, status, response);
    MHD_destroy_response(response);
    return result;
}

static enum MHD_Result access_handler(void *cls, struct MHD_Connection *connection, const char *url,
                                      const char *method, const char *version, const char *upload_data,
                                      size_t *upload_data_size, void **con_cls) {
    (void)version;
    plings_httpd_server *server = cls;
    plings_httpd_request *request = *con_cls;
    if (request == NULL) {
        request = calloc(1, sizeof *request);
        if (request == NULL) return MHD_NO;
        request->connection = connection;
        request->server = server;
        request->method = method;
        request->path = url;
        *con_cls = request;
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
