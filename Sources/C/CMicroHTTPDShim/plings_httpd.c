// libmicrohttpd behind plain C functions (see include/plings_httpd.h).
#define _GNU_SOURCE  // accept4
#include "plings_httpd.h"
#include "http_head.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/sockios.h>
#include <linux/tcp.h>
#include <sys/ioctl.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <math.h>
#include <pthread.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

// The server model: one libmicrohttpd thread runs every connection from one epoll set, so threads and stacks do
// not grow with connections; a stream with nothing to send is suspended (it costs a socket and a few bytes, no
// thread) and resumed when its feed has more. A second thread, the keeper, does what libmicrohttpd 0.9.75 cannot:
// it closes a connection whose request is not complete `request_timeout` seconds after it began waiting for one
// (a header sent a byte a second, an idle keep-alive socket), a stream whose client has not taken anything for
// `stall_timeout` seconds (by the bytes its TCP stack acknowledged, looked at every `stall_check_interval` while
// bytes wait for a client: the kernel buffers megabytes for a client that never reads, so libmicrohttpd itself
// would go on writing for minutes), and, at `connection_limit`, the oldest connection still waiting for a
// request; it notices a suspended stream's client leaving (libmicrohttpd does not watch suspended sockets) and
// resumes quiet streams for their keep-alive. It sleeps until the earliest of those deadlines, or until a stream's
// socket hangs up; with no connection it sleeps until one comes. It closes a connection with shutdown(2) on its socket,
// under the lock that the connection's CLOSED notification takes before libmicrohttpd closes the descriptor, so
// the descriptor it shuts down is always that connection's. Over plain HTTP the keeper is also the front: it
// accepts the connections and checks each request head before libmicrohttpd reads it (see "The front" below).

/// Where a connection is. With the front (plain HTTP): its request head still arriving at the front
/// (PHASE_FRONT), handed to libmicrohttpd and not yet taken up by it (PHASE_HANDED), or refused by the front and
/// being closed (PHASE_CLOSING). In libmicrohttpd: waiting for (or reading) a request, answering one, or
/// streaming.
enum phase { PHASE_FRONT, PHASE_HANDED, PHASE_CLOSING, PHASE_WAITING, PHASE_ACTIVE, PHASE_STREAM };

struct stream;

struct connection_entry {
    struct connection_entry *prev, *next;
    struct MHD_Connection *connection;
    uint64_t id;
    int fd;
    enum phase phase;
    /// PHASE_FRONT, PHASE_HANDED, PHASE_WAITING: when it began waiting for a request; PHASE_CLOSING: when the
    /// front answered it (monotonic seconds).
    double since;
    /// The client's address, from the front's accept (handed to libmicrohttpd with the socket).
    struct sockaddr_storage address;
    socklen_t address_length;
    /// Shut down by the keeper; libmicrohttpd closes it on its next look.
    int cut;
    struct stream *stream;
};

struct plings_httpd_server {
    struct MHD_Daemon *daemon;
    plings_httpd_handler handler;
    void *context;
    size_t max_body;
    uint16_t port;

    /// Guards everything below, the entries and their streams.
    pthread_mutex_t lock;
    /// Signalled when a stream ends (plings_httpd_stop waits for the last), on the monotonic clock.
    pthread_cond_t stream_ended;
    struct connection_entry *head, *tail;
    unsigned open;
    unsigned open_cut;
    uint64_t next_id;
    unsigned connection_limit;
    double request_timeout, stall_timeout, keepalive;
    plings_httpd_counts counts;
    /// The keeper: its epoll set (the wake eventfd, id 0, and each stream's socket for hang-ups), its deadline.
    pthread_t keeper;
    int keeper_started;
    int keeper_epoll;
    int wake_fd;
    double keeper_deadline;
    /// When the streams' sockets are next looked at for a client that takes nothing (INFINITY: none holds bytes).
    double next_stall_check;
    int stopping;
    /// The front (plain HTTP only, see "The front" below): its listening socket (-1 without), and where it peeks
    /// at a request head.
    int front_fd;
    char *front_buffer;
    /// When the listening socket rejoins the keeper's set after running out of descriptors (INFINITY: it is in).
    double front_resume_at;
};

/// How often the streams' sockets are looked at while one holds bytes its client has not taken.
static const double stall_check_interval = 5;

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

static double monotonic_now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

// Wakes the keeper to look at its deadlines again. Called with the lock held, only when `deadline` is sooner
// than what it sleeps until (a flood of new connections does not wake it once per connection).
static void wake_keeper_locked(plings_httpd_server *server, double deadline) {
    if (deadline >= server->keeper_deadline) return;
    server->keeper_deadline = deadline;
    uint64_t one = 1;
    ssize_t written = write(server->wake_fd, &one, sizeof one);
    (void)written;  // EAGAIN: a wake-up is already pending
}

static struct connection_entry *entry_of(struct MHD_Connection *connection) {
    const union MHD_ConnectionInfo *info = MHD_get_connection_info(connection, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    return info != NULL ? info->socket_context : NULL;
}

// A connection begins answering a request (its request is complete, or it is refused before its body).
static void entry_active(plings_httpd_server *server, struct MHD_Connection *connection) {
    struct connection_entry *entry = entry_of(connection);
    if (entry == NULL) return;
    pthread_mutex_lock(&server->lock);
    if (entry->phase == PHASE_WAITING) entry->phase = PHASE_ACTIVE;
    pthread_mutex_unlock(&server->lock);
}

// Closes a connection from outside libmicrohttpd's thread: its socket is shut down, libmicrohttpd sees the end
// on its next look and closes it as if the client had. Lock held.
static void cut_locked(plings_httpd_server *server, struct connection_entry *entry, uint64_t *counter) {
    if (entry->cut) return;
    entry->cut = 1;
    server->open_cut++;
    (*counter)++;
    shutdown(entry->fd, SHUT_RDWR);
}

// Adds a new connection, waiting for its request from now, at the end of the list (the oldest come first). Lock held.
static void append_locked(plings_httpd_server *server, struct connection_entry *entry, int fd, enum phase phase) {
    entry->fd = fd;
    entry->phase = phase;
    entry->since = monotonic_now();
    entry->id = ++server->next_id;
    entry->prev = server->tail;
    if (server->tail != NULL) server->tail->next = entry;
    else server->head = entry;
    server->tail = entry;
    server->open++;
}

// Takes a connection out of the list (it is closed, or libmicrohttpd closes it). Lock held.
static void unlink_locked(plings_httpd_server *server, struct connection_entry *entry) {
    if (entry->prev != NULL) entry->prev->next = entry->next;
    else server->head = entry->next;
    if (entry->next != NULL) entry->next->prev = entry->prev;
    else server->tail = entry->prev;
    server->open--;
    if (entry->cut) server->open_cut--;
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
    // A flood of connections waits in the kernel's queue rather than being refused at the SYN (the kernel caps
    // it at net.core.somaxconn).
    if (listen(fd, 1024) != 0) {
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

// MHD's URI log callback: it sees the target before it is decoded; what it returns is the request's state.
static void *note_target(void *cls, const char *uri, struct MHD_Connection *connection) {
    (void)cls;
    plings_httpd_request *request = calloc(1, sizeof *request);
    if (request == NULL) return NULL;
    request->connection = connection;
    request->raw_target = uri;
    request->raw_target_length = strlen(uri);
    if (http_target_has_control(uri)) request->malformed = "a control byte in the request target";
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

static enum MHD_Result check_header(void *cls, enum MHD_ValueKind kind, const char *key, size_t key_size,
                                    const char *value, size_t value_size) {
    (void)kind;
    struct header_check *check = cls;
    if (check->previous_end != NULL && key > check->previous_end && key < check->block_end &&
        http_hides_bytes(check->previous_end, key))
        check->malformed = "a NUL byte in a header";
    check->previous_end = value != NULL ? value + strlen(value) : key + strlen(key);
    if (key == NULL || strlen(key) != key_size || key_size == 0) {
        check->malformed = "a malformed header name";
        return MHD_YES;
    }
    for (size_t i = 0; i < key_size; i++) {
        unsigned char c = (unsigned char)key[i];
        if (http_is_control(c, 0) || c == ' ' || c == '\t' || c == ':') check->malformed = "a malformed header name";
    }
    if (value != NULL) {
        if (strlen(value) != value_size) check->malformed = "a NUL byte in a header";
        for (size_t i = 0; i < value_size; i++) {
            if (http_is_control((unsigned char)value[i], 1)) check->malformed = "a control byte in a header";
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
// Transfer-Encoding, no two Content-Lengths that differ, nothing hidden behind a NUL. NULL when it holds. Over TLS
// only: over plain HTTP the front checked the same rules on the raw head. A percent-encoded control byte in the
// target (found while MHD decoded it) is refused over both.
static const char *malformed_request(plings_httpd_request *request, const char *method, const char *version) {
    if (request->malformed != NULL) return request->malformed;
    // Over plain HTTP the front checked all of this on the raw head before handing the socket over (`http_head_look`).
    if (request->server->front_fd >= 0) return NULL;
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
        http_hides_bytes(check.previous_end, check.block_end))
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
            entry_active(server, connection);
            request->responded = 1;
            char text[160];
            snprintf(text, sizeof text, "bad request: %s\n", malformed);
            return queue_plain_copy(connection, MHD_HTTP_BAD_REQUEST, text);
        }
        const char *declared =
            MHD_lookup_connection_value(connection, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
        if (declared != NULL && strtoull(declared, NULL, 10) > server->max_body) {
            entry_active(server, connection);
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
    entry_active(server, connection);
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
    (void)code;
    plings_httpd_server *server = cls;
    struct connection_entry *entry = entry_of(connection);
    if (entry != NULL) {
        // Kept alive: the next request has `request_timeout` from now.
        pthread_mutex_lock(&server->lock);
        entry->phase = PHASE_WAITING;
        entry->since = monotonic_now();
        wake_keeper_locked(server, entry->since + server->request_timeout);
        pthread_mutex_unlock(&server->lock);
    }
    plings_httpd_request *request = *con_cls;
    if (request == NULL) return;
    free(request->body);
    free(request);
    *con_cls = NULL;
}

// A stream's reader and its context, behind MHD's own reader signature, and what the keeper knows of it.
struct stream {
    plings_httpd_reader reader;
    plings_httpd_release release;
    void *context;
    plings_httpd_server *server;
    struct MHD_Connection *connection;
    /// Its connection's entry while both live (lock).
    struct connection_entry *entry;
    /// Suspended by its reader (nothing to send); a wake-up that came while the reader ran; the client left.
    int suspended, wake_pending, gone;
    /// When the reader last gave bytes (monotonic seconds).
    double last_bytes;
    /// The bytes its client had acknowledged at the last look, and when that count last moved (or nothing was
    /// waiting for the client).
    uint64_t acknowledged;
    double progress_at;
};

// Whether a stream's client took something since the last look, from its socket: bytes still in the kernel's send
// queue (SIOCOUTQ), and the bytes the client acknowledged (TCP_INFO). A client whose receive buffer is full because
// it does not read acknowledges nothing more, however long the server has buffered for it. Lock held.
static void look_at_stream(struct connection_entry *entry, struct stream *stream, double now, int *holds_bytes) {
    int queued = 0;
    struct tcp_info info;
    socklen_t size = sizeof info;
    memset(&info, 0, sizeof info);
    if (ioctl(entry->fd, SIOCOUTQ, &queued) != 0 || getsockopt(entry->fd, IPPROTO_TCP, TCP_INFO, &info, &size) != 0)
        return;
    if (queued == 0 || info.tcpi_bytes_acked != stream->acknowledged) stream->progress_at = now;
    stream->acknowledged = info.tcpi_bytes_acked;
    if (queued > 0) *holds_bytes = 1;
}

// ---- The front (plain HTTP) ----
// libmicrohttpd 0.9.75 answers a few malformed requests itself, before any callback of ours sees them: 431 and 414
// for a head over its buffer, 505 for another HTTP version, a 400 whose header block it writes twice for an
// invalid Content-Length, and nothing at all (a close) for a request line or header line it cannot parse; none
// carries no-store, nosniff or a Content-Type. So over plain HTTP the keeper accepts connections itself and looks
// at each request head in the socket's receive queue without taking it (MSG_PEEK, again at each new segment)
// until the head is complete: a malformed head it answers itself and closes; a good one it hands, still unread,
// to libmicrohttpd (MHD_add_connection), which reads and parses it as if it had accepted the connection. Every
// answer then closes its connection (no keep-alive), so every request passes the front. Over TLS the head is not
// readable before libmicrohttpd decrypts it, so there is no front and those few answers stay the library's.

/// The largest request head (its line and headers) the front takes; libmicrohttpd's buffer is larger, so it never
/// refuses a head the front passed.
#define FRONT_HEAD_LIMIT (64 * 1024)
/// How long a refused connection is read and thrown away after its answer, so that closing it with unread bytes
/// does not reset the connection before its client has read the answer.
static const double front_linger = 2;
/// The listening socket's id in the keeper's epoll set (0 is the wake eventfd, the others are entries' ids).
static const uint64_t front_listen_id = UINT64_MAX;

// Reads and drops what a refused client still sends; 1 when it has closed (or failed) and the socket can go.
static int front_drain(plings_httpd_server *server, int fd) {
    for (;;) {
        ssize_t got = recv(fd, server->front_buffer, FRONT_HEAD_LIMIT, MSG_DONTWAIT);
        if (got > 0) continue;
        return got == 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
    }
}

// Closes a connection the front still owns and forgets it. Lock held; only the keeper calls it.
static void front_close_locked(plings_httpd_server *server, struct connection_entry *entry) {
    close(entry->fd);  // also leaves the epoll set
    unlink_locked(server, entry);
    free(entry);
}

// Answers a head the front refuses, with the headers every answer carries, and begins closing. Lock held.
static void front_refuse_locked(plings_httpd_server *server, struct connection_entry *entry, unsigned status,
                                const char *why) {
    static const char *const days[] = {"Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"};
    static const char *const months[] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                         "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
    const char *reason = status == 505   ? "HTTP Version Not Supported"
                         : status == 431 ? "Request Header Fields Too Large"
                         : status == 414 ? "URI Too Long"
                         : status == 411 ? "Length Required"
                                         : "Bad Request";
    time_t now = time(NULL);
    struct tm tm;
    gmtime_r(&now, &tm);
    char body[160], text[640];
    snprintf(body, sizeof body, status == 400 ? "bad request: %s\n" : "%s\n", why);
    int length = snprintf(text, sizeof text,
                          "HTTP/1.1 %u %s\r\nDate: %s, %02d %s %d %02d:%02d:%02d GMT\r\n"
                          "Content-Type: text/plain; charset=utf-8\r\nCache-Control: no-store\r\n"
                          "X-Content-Type-Options: nosniff\r\nConnection: close\r\nContent-Length: %zu\r\n\r\n%s",
                          status, reason, days[tm.tm_wday], tm.tm_mday, months[tm.tm_mon], tm.tm_year + 1900,
                          tm.tm_hour, tm.tm_min, tm.tm_sec, strlen(body), body);
    // A few hundred bytes into an empty send buffer: written whole or the client is gone.
    ssize_t sent = send(entry->fd, text, (size_t)length, MSG_NOSIGNAL | MSG_DONTWAIT);
    (void)sent;
    shutdown(entry->fd, SHUT_WR);
    server->counts.refused_malformed++;
    entry->phase = PHASE_CLOSING;
    entry->since = monotonic_now();
    if (front_drain(server, entry->fd)) front_close_locked(server, entry);
}

// At `connection_limit`: the connection that has waited longest for a request goes (an idle or incomplete one), so
// a new request gets in; when every other one is busy, the newcomer goes. Lock held.
static void make_room_locked(plings_httpd_server *server, struct connection_entry *newcomer) {
    if (server->open - server->open_cut <= server->connection_limit) return;
    struct connection_entry *oldest = NULL;
    for (struct connection_entry *e = server->head; e != NULL; e = e->next) {
        if (!e->cut && (e->phase == PHASE_WAITING || e->phase == PHASE_FRONT)) {
            oldest = e;
            break;
        }
    }
    struct connection_entry *gone = oldest != NULL ? oldest : newcomer;
    if (gone->phase == PHASE_FRONT) {
        server->counts.closed_at_limit++;
        front_close_locked(server, gone);
    } else {
        cut_locked(server, gone, &server->counts.closed_at_limit);
    }
}

// Takes every connection waiting in the listening socket's queue. Lock held.
static void front_accept_locked(plings_httpd_server *server) {
    for (;;) {
        struct sockaddr_storage address;
        socklen_t address_length = sizeof address;
        int fd = accept4(server->front_fd, (struct sockaddr *)&address, &address_length,
                         SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EINTR || errno == ECONNABORTED) continue;
            if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
                // Out of descriptors: the queue waits (the listening socket leaves the set for a second rather
                // than wake the keeper at once again).
                epoll_ctl(server->keeper_epoll, EPOLL_CTL_DEL, server->front_fd, NULL);
                server->front_resume_at = monotonic_now() + 1;
            }
            return;
        }
        struct connection_entry *entry = calloc(1, sizeof *entry);
        if (entry == NULL) {
            close(fd);
            return;
        }
        entry->address = address;
        entry->address_length = address_length;
        append_locked(server, entry, fd, PHASE_FRONT);
        // Each new segment is an edge: the head is looked at again only when more of it came.
        struct epoll_event event = {.events = EPOLLIN | EPOLLRDHUP | EPOLLET, .data.u64 = entry->id};
        if (epoll_ctl(server->keeper_epoll, EPOLL_CTL_ADD, fd, &event) != 0) {
            front_close_locked(server, entry);
            continue;
        }
        make_room_locked(server, entry);  // (the keeper looks at every deadline after this)
    }
}

// More of a head came (or its client hung up). Returns 1 when the head is complete and good: the entry is then
// PHASE_HANDED and the caller hands its socket to libmicrohttpd. Lock held.
static int front_look_locked(plings_httpd_server *server, struct connection_entry *entry, uint32_t events) {
    if (entry->phase == PHASE_CLOSING) {
        if (front_drain(server, entry->fd)) front_close_locked(server, entry);
        return 0;
    }
    ssize_t got = recv(entry->fd, server->front_buffer, FRONT_HEAD_LIMIT + 1, MSG_PEEK | MSG_DONTWAIT);
    if (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return 0;
    if (got <= 0) {
        front_close_locked(server, entry);
        return 0;
    }
    size_t end;
    unsigned status;
    const char *why;
    switch (http_head_look(server->front_buffer, (size_t)got, FRONT_HEAD_LIMIT, &end, &status, &why)) {
    case HTTP_HEAD_INCOMPLETE:
        if (events & (EPOLLRDHUP | EPOLLHUP | EPOLLERR)) front_close_locked(server, entry);  // it left mid-request
        return 0;
    case HTTP_HEAD_REFUSED:
        front_refuse_locked(server, entry, status, why);
        return 0;
    case HTTP_HEAD_GOOD:
        break;  // libmicrohttpd reads the head again itself (`end` is where the body would begin)
    }
    (void)end;
    epoll_ctl(server->keeper_epoll, EPOLL_CTL_DEL, entry->fd, NULL);
    entry->phase = PHASE_HANDED;
    return 1;
}

// Hands a good head's socket to libmicrohttpd (outside the lock: it may take it up on this thread). The entry's
// socket and address were written by this thread when it accepted the connection and are never changed after.
static void front_hand_over(plings_httpd_server *server, struct connection_entry *entry) {
    if (MHD_add_connection(server->daemon, entry->fd, (const struct sockaddr *)&entry->address,
                           entry->address_length) == MHD_YES)
        return;
    // Not taken (out of memory): libmicrohttpd closed the socket and never saw it start.
    pthread_mutex_lock(&server->lock);
    unlink_locked(server, entry);
    pthread_mutex_unlock(&server->lock);
    free(entry);
}

static void notify_connection(void *cls, struct MHD_Connection *connection, void **socket_context,
                              enum MHD_ConnectionNotificationCode code) {
    plings_httpd_server *server = cls;
    if (code == MHD_CONNECTION_NOTIFY_STARTED) {
        const union MHD_ConnectionInfo *fd = MHD_get_connection_info(connection, MHD_CONNECTION_INFO_CONNECTION_FD);
        int socket = fd != NULL ? fd->connect_fd : -1;
        pthread_mutex_lock(&server->lock);
        // A connection the front handed over keeps its entry (and when it began waiting).
        struct connection_entry *entry = NULL;
        for (struct connection_entry *e = server->head; e != NULL && socket >= 0; e = e->next) {
            if (e->phase == PHASE_HANDED && e->fd == socket) {
                entry = e;
                entry->connection = connection;
                entry->phase = PHASE_WAITING;
                break;
            }
        }
        if (entry == NULL && (entry = calloc(1, sizeof *entry)) != NULL) {
            entry->connection = connection;
            append_locked(server, entry, socket, PHASE_WAITING);
            make_room_locked(server, entry);
            wake_keeper_locked(server, entry->since + server->request_timeout);
        }
        pthread_mutex_unlock(&server->lock);
        *socket_context = entry;
        return;
    }
    struct connection_entry *entry = *socket_context;
    if (entry == NULL) return;
    *socket_context = NULL;
    pthread_mutex_lock(&server->lock);
    unlink_locked(server, entry);
    if (entry->stream != NULL) {
        epoll_ctl(server->keeper_epoll, EPOLL_CTL_DEL, entry->fd, NULL);
        entry->stream->entry = NULL;
        pthread_cond_broadcast(&server->stream_ended);
    }
    pthread_mutex_unlock(&server->lock);
    free(entry);
}

// Adds a connection to resume to a growing list; false when memory runs out (it then stays as it is).
static int push_resume(struct MHD_Connection ***list, size_t *count, size_t *capacity, struct MHD_Connection *c) {
    if (*count == *capacity) {
        size_t grown_capacity = *capacity ? 2 * *capacity : 16;
        struct MHD_Connection **grown = realloc(*list, grown_capacity * sizeof **list);
        if (grown == NULL) return 0;
        *list = grown;
        *capacity = grown_capacity;
    }
    (*list)[(*count)++] = c;
    return 1;
}

// The keeper's thread (see the top of this file).
static void *keeper_main(void *cls) {
    plings_httpd_server *server = cls;
    size_t capacity = 0;
    struct MHD_Connection **resume = NULL;
    for (;;) {
        size_t resumes = 0;
        pthread_mutex_lock(&server->lock);
        if (server->stopping) {
            pthread_mutex_unlock(&server->lock);
            break;
        }
        double now = monotonic_now();
        // Deadlines within 50 ms are met now: a burst of connections does not wake the keeper once for each.
        double soon = now + 0.05;
        double next = INFINITY;
        int check_stalls = server->next_stall_check <= soon, holds_bytes = 0;
        if (server->front_resume_at <= soon) {
            struct epoll_event listen_event = {.events = EPOLLIN, .data.u64 = front_listen_id};
            epoll_ctl(server->keeper_epoll, EPOLL_CTL_ADD, server->front_fd, &listen_event);
            server->front_resume_at = INFINITY;
        }
        if (server->front_resume_at < next) next = server->front_resume_at;
        for (struct connection_entry *e = server->head, *after; e != NULL; e = after) {
            after = e->next;
            if (e->phase == PHASE_FRONT || e->phase == PHASE_CLOSING || e->phase == PHASE_HANDED) {
                double deadline = e->since + (e->phase == PHASE_CLOSING ? front_linger : server->request_timeout);
                if (deadline > soon) {
                    if (deadline < next) next = deadline;
                } else if (e->phase == PHASE_HANDED) {
                    // libmicrohttpd never took it up (it failed inside): its socket is its own, only the entry goes.
                    unlink_locked(server, e);
                    free(e);
                } else {
                    if (e->phase == PHASE_FRONT) server->counts.closed_incomplete++;
                    front_close_locked(server, e);
                }
                continue;
            }
            if (e->cut) continue;
            struct stream *stream = e->stream;
            if (e->phase == PHASE_WAITING) {
                double deadline = e->since + server->request_timeout;
                if (deadline <= soon) cut_locked(server, e, &server->counts.closed_incomplete);
                else if (deadline < next) next = deadline;
            } else if (e->phase == PHASE_STREAM && stream != NULL && !stream->gone) {
                if (check_stalls) {
                    look_at_stream(e, stream, now, &holds_bytes);
                    if (now - stream->progress_at >= server->stall_timeout) {
                        // Its buffered bytes are dropped with a reset rather than kept for a client that takes
                        // none (a FIN would wait behind them).
                        struct linger reset = {.l_onoff = 1, .l_linger = 0};
                        setsockopt(e->fd, SOL_SOCKET, SO_LINGER, &reset, sizeof reset);
                        stream->gone = 1;
                        cut_locked(server, e, &server->counts.closed_stalled);
                        if (stream->suspended && push_resume(&resume, &resumes, &capacity, e->connection))
                            stream->suspended = 0;
                        continue;
                    }
                }
                if (!stream->suspended) continue;
                double deadline = stream->last_bytes + server->keepalive;
                if (deadline > soon) {
                    if (deadline < next) next = deadline;
                    continue;
                }
                if (push_resume(&resume, &resumes, &capacity, e->connection)) stream->suspended = 0;
            }
        }
        if (check_stalls) server->next_stall_check = holds_bytes ? now + stall_check_interval : INFINITY;
        if (server->next_stall_check < next) next = server->next_stall_check;
        server->keeper_deadline = next;
        pthread_mutex_unlock(&server->lock);
        // Outside the lock: a suspended connection is not touched by libmicrohttpd until it is resumed, and only
        // the one who cleared `suspended` resumes it.
        for (size_t i = 0; i < resumes; i++) MHD_resume_connection(resume[i]);
        int timeout = -1;
        if (isfinite(next)) {
            double wait = ceil((next - monotonic_now()) * 1000);
            timeout = wait < 0 ? 0 : wait > 3600000 ? 3600000 : (int)wait;
        }
        struct epoll_event events[32];
        int ready = epoll_wait(server->keeper_epoll, events, 32, timeout);
        for (int i = 0; i < ready; i++) {
            uint64_t id = events[i].data.u64;
            if (id == 0) {
                uint64_t count;
                ssize_t taken = read(server->wake_fd, &count, sizeof count);
                (void)taken;
                continue;
            }
            if (id == front_listen_id) {
                pthread_mutex_lock(&server->lock);
                front_accept_locked(server);
                pthread_mutex_unlock(&server->lock);
                continue;
            }
            // More of a head at the front; or a stream's client hung up: its stream ends now (libmicrohttpd would
            // notice only at its next write).
            struct MHD_Connection *gone = NULL;
            struct connection_entry *handed = NULL;
            pthread_mutex_lock(&server->lock);
            for (struct connection_entry *e = server->head; e != NULL; e = e->next) {
                if (e->id != id) continue;
                if (e->phase == PHASE_FRONT || e->phase == PHASE_CLOSING) {
                    if (front_look_locked(server, e, events[i].events)) handed = e;
                    break;
                }
                struct stream *stream = e->stream;
                if (stream != NULL && !stream->gone) {
                    stream->gone = 1;
                    server->counts.streams_left++;
                    epoll_ctl(server->keeper_epoll, EPOLL_CTL_DEL, e->fd, NULL);
                    if (stream->suspended) {
                        stream->suspended = 0;
                        gone = e->connection;
                    }
                }
                break;
            }
            pthread_mutex_unlock(&server->lock);
            if (gone != NULL) MHD_resume_connection(gone);
            if (handed != NULL) front_hand_over(server, handed);
        }
    }
    free(resume);
    return NULL;
}

// Stops the keeper's thread and closes its descriptors (not the server: plings_httpd_stop frees it).
static void stop_keeper_thread(plings_httpd_server *server) {
    if (!server->keeper_started) return;
    pthread_mutex_lock(&server->lock);
    server->stopping = 1;
    uint64_t one = 1;
    ssize_t written = write(server->wake_fd, &one, sizeof one);
    (void)written;
    pthread_mutex_unlock(&server->lock);
    pthread_join(server->keeper, NULL);
    server->keeper_started = 0;
}

// After libmicrohttpd stopped: its CLOSED notifications use the keeper's epoll set.
static void free_server(plings_httpd_server *server) {
    // What is left: connections handed over that libmicrohttpd never took up (it closed their sockets).
    for (struct connection_entry *e = server->head, *after; e != NULL; e = after) {
        after = e->next;
        free(e);
    }
    free(server->front_buffer);
    close(server->keeper_epoll);
    close(server->wake_fd);
    pthread_cond_destroy(&server->stream_ended);
    pthread_mutex_destroy(&server->lock);
    free(server);
}

// Raises the soft limit of open files to what `connections` need (systemd starts services at 1024), within the
// hard limit; returns how many connections the limit allows.
static unsigned fit_open_files(unsigned connections) {
    // The process's own descriptors (spool, devices, sockets) and libmicrohttpd's.
    const rlim_t reserve = 256;
    struct rlimit limit;
    if (getrlimit(RLIMIT_NOFILE, &limit) != 0) return connections;
    rlim_t wanted = (rlim_t)connections + reserve;
    if (limit.rlim_cur != RLIM_INFINITY && limit.rlim_cur < wanted) {
        struct rlimit raised = limit;
        raised.rlim_cur = limit.rlim_max == RLIM_INFINITY || limit.rlim_max >= wanted ? wanted : limit.rlim_max;
        if (setrlimit(RLIMIT_NOFILE, &raised) == 0) limit = raised;
    }
    if (limit.rlim_cur == RLIM_INFINITY || limit.rlim_cur >= wanted) return connections;
    return limit.rlim_cur > reserve + 8 ? (unsigned)(limit.rlim_cur - reserve) : 8;
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
    unsigned files = fit_open_files(options->connection_limit + 64);
    server->connection_limit = files > 72 ? files - 64 : 8;
    server->request_timeout = options->request_timeout;
    server->stall_timeout = options->stall_timeout;
    server->keepalive = options->keepalive;
    server->keeper_deadline = INFINITY;
    server->next_stall_check = INFINITY;
    server->front_fd = -1;
    server->front_resume_at = INFINITY;
    pthread_mutex_init(&server->lock, NULL);
    pthread_condattr_t monotonic;
    pthread_condattr_init(&monotonic);
    pthread_condattr_setclock(&monotonic, CLOCK_MONOTONIC);
    pthread_cond_init(&server->stream_ended, &monotonic);
    pthread_condattr_destroy(&monotonic);
    server->keeper_epoll = epoll_create1(EPOLL_CLOEXEC);
    server->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    struct epoll_event wake = {.events = EPOLLIN, .data.u64 = 0};
    if (server->keeper_epoll < 0 || server->wake_fd < 0 ||
        epoll_ctl(server->keeper_epoll, EPOLL_CTL_ADD, server->wake_fd, &wake) != 0 ||
        pthread_create(&server->keeper, NULL, keeper_main, server) != 0) {
        set_error(error, error_size, "cannot start its connection keeper", errno);
        close(fd);
        if (server->keeper_epoll >= 0) close(server->keeper_epoll);
        if (server->wake_fd >= 0) close(server->wake_fd);
        pthread_cond_destroy(&server->stream_ended);
        pthread_mutex_destroy(&server->lock);
        free(server);
        return NULL;
    }
    server->keeper_started = 1;
    // One thread for every connection, on epoll; a stream with nothing to send is suspended (see the top).
    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL | MHD_ALLOW_SUSPEND_RESUME;
    if (ipv6) flags |= MHD_USE_IPv6;
    int tls = options->cert_pem != NULL && options->key_pem != NULL;
    if (tls) {
        if (MHD_is_feature_supported(MHD_FEATURE_TLS) != MHD_YES) {
            close(fd);
            stop_keeper_thread(server);
            free_server(server);
            set_error(error, error_size, "this libmicrohttpd has no TLS", 0);
            return NULL;
        }
        flags |= MHD_USE_TLS;
    } else {
        // The front accepts and hands each good request's connection over (see "The front").
        server->front_buffer = malloc(FRONT_HEAD_LIMIT + 1);
        if (server->front_buffer == NULL) {
            close(fd);
            stop_keeper_thread(server);
            free_server(server);
            set_error(error, error_size, "out of memory", 0);
            return NULL;
        }
        flags |= MHD_USE_NO_LISTEN_SOCKET | MHD_USE_ITC;
        // Set before libmicrohttpd's thread starts (it reads it for every answer); watched only once it runs.
        server->front_fd = fd;
    }
    struct MHD_OptionItem items[] = {
        // Beyond the limit the keeper closes the oldest waiting connection; libmicrohttpd's own limit, a little
        // higher, refuses only what arrives faster than the keeper closes.
        {MHD_OPTION_CONNECTION_LIMIT, (intptr_t)(server->connection_limit + 64), NULL},
        // Silence while answering (the keeper watches requests and streams more closely).
        {MHD_OPTION_CONNECTION_TIMEOUT, (intptr_t)options->connection_timeout, NULL},
        // Request headers and the connection's buffers: bounded per connection. Behind the front, larger than the
        // largest head it passes, so libmicrohttpd never answers 431 or 414 itself.
        {MHD_OPTION_CONNECTION_MEMORY_LIMIT, tls ? 64 * 1024 : 2 * FRONT_HEAD_LIMIT, NULL},
        {MHD_OPTION_NOTIFY_COMPLETED, (intptr_t)request_completed, server},
        {MHD_OPTION_NOTIFY_CONNECTION, (intptr_t)notify_connection, server},
        {MHD_OPTION_URI_LOG_CALLBACK, (intptr_t)note_target, NULL},
        // Handlers run Swift and SQLite on this one thread.
        {MHD_OPTION_THREAD_STACK_SIZE, 1024 * 1024, NULL},
        // Over TLS libmicrohttpd accepts on the socket itself (MHD_OPTION_END ends the array for plain HTTP).
        {tls ? MHD_OPTION_LISTEN_SOCKET : MHD_OPTION_END, fd, NULL},
        {tls ? MHD_OPTION_HTTPS_MEM_CERT : MHD_OPTION_END, 0, (void *)options->cert_pem},
        {tls ? MHD_OPTION_HTTPS_MEM_KEY : MHD_OPTION_END, 0, (void *)options->key_pem},
        {MHD_OPTION_END, 0, NULL},
    };
    server->daemon = MHD_start_daemon(flags, 0, NULL, NULL, access_handler, server, MHD_OPTION_ARRAY, items,
                                      MHD_OPTION_END);
    if (server->daemon == NULL) {
        close(fd);
        stop_keeper_thread(server);
        free_server(server);
        set_error(error, error_size, tls ? "cannot start (is the certificate or key malformed?)" : "cannot start",
                  0);
        return NULL;
    }
    if (!tls) {
        // Taken until the queue is empty, so accept must not wait.
        fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
        struct epoll_event listen_event = {.events = EPOLLIN, .data.u64 = front_listen_id};
        if (epoll_ctl(server->keeper_epoll, EPOLL_CTL_ADD, fd, &listen_event) != 0) {
            set_error(error, error_size, "cannot watch its listening socket", errno);
            plings_httpd_stop(server);
            return NULL;
        }
    }
    return server;
}

uint16_t plings_httpd_port(const plings_httpd_server *server) { return server->port; }

// Whether a connection still holds a stream. Lock held.
static int has_stream_locked(plings_httpd_server *server) {
    for (struct connection_entry *e = server->head; e != NULL; e = e->next) {
        if (e->stream != NULL) return 1;
    }
    return 0;
}

void plings_httpd_stop(plings_httpd_server *server) {
    if (server == NULL) return;
    // libmicrohttpd must not be stopped with a suspended connection: every stream ends (its reader answers an
    // error, its connection closes) and the keeper stops resuming them; what is left after 2 s is stopped anyway.
    // A stream marked gone never suspends again (its reader looks under the lock first), so one pass resumes them
    // all; then the wait is for their ends (stream_free signals each).
    size_t count = 0, capacity = 0;
    struct MHD_Connection **resume = NULL;
    pthread_mutex_lock(&server->lock);
    server->stopping = 1;
    for (struct connection_entry *e = server->head; e != NULL; e = e->next) {
        struct stream *stream = e->stream;
        if (stream == NULL) continue;
        stream->gone = 1;
        if (stream->suspended && push_resume(&resume, &count, &capacity, e->connection)) stream->suspended = 0;
    }
    pthread_mutex_unlock(&server->lock);
    for (size_t i = 0; i < count; i++) MHD_resume_connection(resume[i]);
    free(resume);
    struct timespec until;
    clock_gettime(CLOCK_MONOTONIC, &until);
    until.tv_sec += 2;
    pthread_mutex_lock(&server->lock);
    while (has_stream_locked(server) &&
           pthread_cond_timedwait(&server->stream_ended, &server->lock, &until) != ETIMEDOUT) {
    }
    pthread_mutex_unlock(&server->lock);
    stop_keeper_thread(server);
    // The front's own connections and its listening socket (the keeper, their only user, has stopped).
    pthread_mutex_lock(&server->lock);
    for (struct connection_entry *e = server->head, *after; e != NULL; e = after) {
        after = e->next;
        if (e->phase == PHASE_FRONT || e->phase == PHASE_CLOSING) front_close_locked(server, e);
    }
    pthread_mutex_unlock(&server->lock);
    if (server->front_fd >= 0) close(server->front_fd);
    MHD_stop_daemon(server->daemon);
    free_server(server);
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
    // Behind the front every answer closes its connection, so the next request passes the front too.
    if (request->server != NULL && request->server->front_fd >= 0)
        MHD_add_response_header(response, MHD_HTTP_HEADER_CONNECTION, "close");
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

static ssize_t stream_read(void *cls, uint64_t pos, char *buffer, size_t max) {
    (void)pos;
    struct stream *stream = cls;
    plings_httpd_server *server = stream->server;
    for (;;) {
        pthread_mutex_lock(&server->lock);
        if (stream->gone) {
            pthread_mutex_unlock(&server->lock);
            return MHD_CONTENT_READER_END_WITH_ERROR;
        }
        double now = monotonic_now();
        stream->wake_pending = 0;
        int quiet = now - stream->last_bytes >= server->keepalive - 0.05;
        pthread_mutex_unlock(&server->lock);
        ssize_t count = stream->reader(stream->context, buffer, max, quiet);
        if (count < 0) return MHD_CONTENT_READER_END_OF_STREAM;
        pthread_mutex_lock(&server->lock);
        if (count > 0) {
            stream->last_bytes = monotonic_now();
            // Bytes for the client: whether it takes them is looked at within `stall_check_interval`.
            if (!isfinite(server->next_stall_check)) {
                server->next_stall_check = stream->last_bytes + stall_check_interval;
                wake_keeper_locked(server, server->next_stall_check);
            }
            pthread_mutex_unlock(&server->lock);
            return count;
        }
        if (stream->wake_pending || stream->gone) {
            // Woken while it looked: look again rather than sleep through it.
            pthread_mutex_unlock(&server->lock);
            continue;
        }
        // Nothing to send: parked until plings_httpd_wake_streams, its keep-alive or its client leaving. Suspended
        // under the lock, so whoever sees `suspended` resumes a connection that is suspended.
        stream->suspended = 1;
        MHD_suspend_connection(stream->connection);
        wake_keeper_locked(server, stream->last_bytes + server->keepalive);
        pthread_mutex_unlock(&server->lock);
        return 0;
    }
}

static void stream_free(void *cls) {
    struct stream *stream = cls;
    plings_httpd_server *server = stream->server;
    pthread_mutex_lock(&server->lock);
    struct connection_entry *entry = stream->entry;
    if (entry != NULL) {
        entry->stream = NULL;
        if (entry->phase == PHASE_STREAM) entry->phase = PHASE_ACTIVE;
        epoll_ctl(server->keeper_epoll, EPOLL_CTL_DEL, entry->fd, NULL);
        pthread_cond_broadcast(&server->stream_ended);
    }
    pthread_mutex_unlock(&server->lock);
    stream->release(stream->context);
    free(stream);
}

int plings_httpd_respond_stream(plings_httpd_request *request, unsigned status, const char *const *headers,
                                plings_httpd_reader reader, void *context, plings_httpd_release release) {
    struct stream *stream = request->responded ? NULL : calloc(1, sizeof *stream);
    if (stream == NULL) {
        release(context);
        return 0;
    }
    request->responded = 1;
    plings_httpd_server *server = request->server;
    stream->reader = reader;
    stream->release = release;
    stream->context = context;
    stream->server = server;
    stream->connection = request->connection;
    stream->last_bytes = stream->progress_at = monotonic_now();
    struct connection_entry *entry = entry_of(request->connection);
    if (entry != NULL) {
        pthread_mutex_lock(&server->lock);
        entry->phase = PHASE_STREAM;
        entry->stream = stream;
        stream->entry = entry;
        // Its client hanging up is noticed at once, also while it is suspended.
        struct epoll_event hangup = {.events = EPOLLRDHUP, .data.u64 = entry->id};
        epoll_ctl(server->keeper_epoll, EPOLL_CTL_ADD, entry->fd, &hangup);
        pthread_mutex_unlock(&server->lock);
    }
    struct MHD_Response *response =
        MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16 * 1024, stream_read, stream, stream_free);
    if (response == NULL) stream_free(stream);
    return queue(request, status, headers, response);
}

void plings_httpd_wake_streams(plings_httpd_server *server) {
    size_t count = 0, capacity = 0;
    struct MHD_Connection **resume = NULL;
    pthread_mutex_lock(&server->lock);
    if (!server->stopping) {
        for (struct connection_entry *e = server->head; e != NULL; e = e->next) {
            struct stream *stream = e->stream;
            if (stream == NULL || stream->gone) continue;
            if (stream->suspended && push_resume(&resume, &count, &capacity, e->connection)) stream->suspended = 0;
            else stream->wake_pending = 1;
        }
    }
    pthread_mutex_unlock(&server->lock);
    for (size_t i = 0; i < count; i++) MHD_resume_connection(resume[i]);
    free(resume);
}

plings_httpd_counts plings_httpd_get_counts(plings_httpd_server *server) {
    pthread_mutex_lock(&server->lock);
    plings_httpd_counts counts = server->counts;
    for (struct connection_entry *e = server->head; e != NULL; e = e->next) {
        if (e->cut) continue;
        if (e->phase == PHASE_WAITING || e->phase == PHASE_FRONT || e->phase == PHASE_HANDED) counts.waiting++;
        else if (e->phase == PHASE_STREAM) counts.streaming++;
        else counts.answering++;
    }
    pthread_mutex_unlock(&server->lock);
    return counts;
}
