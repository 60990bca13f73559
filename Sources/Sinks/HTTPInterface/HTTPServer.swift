import CMicroHTTPDShim
import Foundation
import Platform

/// An HTTP server on libmicrohttpd (`CMicroHTTPDShim`): one thread serves every connection from an epoll set, so
/// threads do not grow with connections and handlers must not block (they read the spool's read-only connection
/// and answer); a stream with nothing to send is parked until `wakeStreams()`. Bounded: `maxClients` connections
/// (at the limit the oldest connection still waiting for a request is closed, so a new one gets in), a whole
/// request within `requestTimeout` of connecting or of the previous answer, 64 KiB of headers, `maxBody` bytes of
/// body, a stream cut when its client has taken nothing for `stallTimeout`, 60 s of silence while answering.
///
/// `@unchecked Sendable`: the daemon handle is touched only by `stop` (once, by the sink that owns the server),
/// `wakeStreams` and `counts` (both thread-safe in the shim); libmicrohttpd's threads reach the handler through
/// the retained context, which is immutable.
final class HTTPServer: @unchecked Sendable {
    typealias Handler = @Sendable (HTTPRequest) -> Void

    private let server: OpaquePointer
    private let context: Unmanaged<HandlerBox>
    /// The port it listens on (the configured one, or the one the system chose for port 0).
    let port: Int

    static let maxBody = 4096
    static let silenceTimeout: UInt32 = 60
    /// nginx's `client_header_timeout` is 60 s and Go's servers often set 10 s or less: a person's browser sends a
    /// request in milliseconds, and an idle keep-alive connection costs a slot someone else may need.
    static let requestTimeout = 10.0
    /// A stream whose client has taken nothing for this long is cut (docs/contracts.md, "Access").
    static let stallTimeout = 60.0

    /// Binds and starts serving; throws the reason in one plain line.
    /// `keepalive`: how long a stream may stay quiet before its reader is asked with `quiet`.
    init(
        address: String, port: Int, maxClients: Int, keepalive: Double, certificate: String?, key: String?,
        handler: @escaping Handler
    ) throws(HTTPServerError) {
        let box = Unmanaged.passRetained(HandlerBox(handler))
        var error = [CChar](repeating: 0, count: 256)
        let started: OpaquePointer? = address.withCString { address in
            withOptionalCString(certificate) { certificate in
                withOptionalCString(key) { key in
                    var options = plings_httpd_options(
                        address: address, port: UInt16(clamping: port), connection_limit: UInt32(maxClients),
                        connection_timeout: Self.silenceTimeout, request_timeout: Self.requestTimeout,
                        stall_timeout: Self.stallTimeout, keepalive: keepalive, max_body: Self.maxBody,
                        cert_pem: certificate, key_pem: key)
                    return plings_httpd_start(&options, httpHandler, box.toOpaque(), &error, error.count)
                }
            }
        }
        guard let started else {
            box.release()
            throw HTTPServerError(
                description: String(decoding: error.prefix { $0 != 0 }.map(UInt8.init), as: UTF8.self))
        }
        server = started
        context = box
        self.port = Int(plings_httpd_port(started))
    }

    /// Ends every stream, closes the listener and every connection, and joins the server's threads.
    func stop() {
        plings_httpd_stop(server)
        context.release()
    }

    /// Something new for the streams: each parked one reads again. Any thread.
    func wakeStreams() { plings_httpd_wake_streams(server) }

    /// Connections by what they do, and those closed by the server, by why.
    var counts: plings_httpd_counts { plings_httpd_get_counts(server) }
}

struct HTTPServerError: Error, CustomStringConvertible {
    let description: String
}

/// The handler, kept alive for the C side while the server runs.
private final class HandlerBox: Sendable {
    let handler: HTTPServer.Handler
    init(_ handler: @escaping HTTPServer.Handler) { self.handler = handler }
}

private func httpHandler(context: UnsafeMutableRawPointer?, request: OpaquePointer?) {
    guard let context, let request else { return }
    Unmanaged<HandlerBox>.fromOpaque(context).takeUnretainedValue().handler(HTTPRequest(request))
}

private func withOptionalCString<R>(_ text: String?, _ body: (UnsafePointer<CChar>?) -> R) -> R {
    guard let text else { return body(nil) }
    return text.withCString { body($0) }
}

/// One request, valid during the handler's call.
struct HTTPRequest {
    private let raw: OpaquePointer

    fileprivate init(_ raw: OpaquePointer) { self.raw = raw }

    var method: String { String(cString: plings_httpd_method(raw)) }
    var path: String { String(cString: plings_httpd_path(raw)) }
    func header(_ name: String) -> String? { plings_httpd_header(raw, name).map { String(cString: $0) } }
    func argument(_ name: String) -> String? { plings_httpd_argument(raw, name).map { String(cString: $0) } }
    func cookie(_ name: String) -> String? { plings_httpd_cookie(raw, name).map { String(cString: $0) } }

    var body: [UInt8] {
        var length = 0
        guard let bytes = plings_httpd_body(raw, &length) else { return [] }
        return bytes.withMemoryRebound(to: UInt8.self, capacity: length) {
            Array(UnsafeBufferPointer(start: $0, count: length))
        }
    }

    func respond(_ status: Int, _ headers: [(String, String)], body: [UInt8]) {
        withHeaders(headers) { headers in
            _ = body.withUnsafeBytes { plings_httpd_respond(raw, UInt32(status), headers, $0.baseAddress, $0.count) }
        }
    }

    func respond(_ status: Int, _ headers: [(String, String)], text: String) {
        respond(status, headers, body: Array(text.utf8))
    }

    /// A body written by `stream` as it comes, until it ends or the client goes.
    func respond(_ status: Int, _ headers: [(String, String)], stream: some HTTPStream) {
        let context = Unmanaged.passRetained(StreamBox(stream)).toOpaque()
        withHeaders(headers) { headers in
            _ = plings_httpd_respond_stream(raw, UInt32(status), headers, streamRead, context, streamRelease)
        }
    }

    private func withHeaders(_ headers: [(String, String)], _ body: (UnsafePointer<UnsafePointer<CChar>?>) -> Void) {
        let strings = headers.flatMap { [strdup($0.0), strdup($0.1)] }
        defer { strings.forEach { free($0) } }
        let pointers = strings.map { UnsafePointer($0) } + [nil]
        pointers.withUnsafeBufferPointer { buffer in
            // Never empty: it ends with the NULL terminator.
            if let base = buffer.baseAddress { body(base) }
        }
    }
}

/// What a stream's read gives: bytes to send, nothing yet (the stream is parked until the server's
/// `wakeStreams()` or its keep-alive), or the end of the response.
enum HTTPStreamRead {
    case bytes([UInt8])
    case later
    case end
}

/// A streamed response body. `read` is called on the server's one thread and must not block; `quiet` says the
/// stream has sent nothing for the keep-alive interval (send a comment, or the client cannot tell a quiet stream
/// from a dead one). `close` comes once, when the connection is done with it (ended, client gone, server
/// stopping).
protocol HTTPStream: AnyObject, Sendable {
    func read(max: Int, quiet: Bool) -> HTTPStreamRead
    func close()
}

private final class StreamBox: Sendable {
    let stream: any HTTPStream
    init(_ stream: any HTTPStream) { self.stream = stream }
}

private func streamRead(
    context: UnsafeMutableRawPointer?, buffer: UnsafeMutablePointer<CChar>?, max: Int, quiet: Int32
) -> Int {
    guard let context, let buffer else { return -1 }
    let stream = Unmanaged<StreamBox>.fromOpaque(context).takeUnretainedValue().stream
    let bytes: [UInt8]
    switch stream.read(max: max, quiet: quiet != 0) {
    case .end: return -1
    case .later: return 0
    case .bytes(let read): bytes = read
    }
    guard !bytes.isEmpty else { return 0 }
    let count = min(bytes.count, max)
    bytes.withUnsafeBytes { source in
        if let base = source.baseAddress { UnsafeMutableRawPointer(buffer).copyMemory(from: base, byteCount: count) }
    }
    return count
}

private func streamRelease(context: UnsafeMutableRawPointer?) {
    guard let context else { return }
    let box = Unmanaged<StreamBox>.fromOpaque(context)
    box.takeUnretainedValue().stream.close()
    box.release()
}
