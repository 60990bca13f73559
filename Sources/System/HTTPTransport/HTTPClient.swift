import CCurlShim
import Foundation

/// An HTTP answer: status, the `Retry-After` and `Location` headers, and the body (capped).
public struct HTTPResponse: Sendable {
    public var status: Int
    public var retryAfter: String?
    public var location: String?
    public var body: [UInt8]

    public init(status: Int, retryAfter: String? = nil, location: String? = nil, body: [UInt8] = []) {
        self.status = status
        self.retryAfter = retryAfter
        self.location = location
        self.body = body
    }
}

/// A transport failure before any HTTP answer: refused, reset, DNS, timeout, TLS. Always transient.
public struct HTTPTransportError: Error, CustomStringConvertible, Sendable {
    public var curlCode: Int32
    public var message: String
    public var cancelled: Bool
    public var description: String { cancelled ? "request abandoned at shutdown" : message }
}

/// A blocking HTTPS client over libcurl: one easy handle, so the connection is reused between requests.
///
/// libcurl rather than FoundationNetworking's URLSession: we measured URLSession's RSS growing
/// over 13k requests, whole-second timeouts and 34 MB of ICU data in a static binary; libcurl keeps memory
/// flat (measured in docs/benchmarks.md) and is already a Debian library.
public final class HTTPClient: @unchecked Sendable {
    // @unchecked Sendable: `post` is called by one thread only (the worker that owns this client); the one
    // call made from other threads, `cancel()`, is an atomic store in the C shim (`atomic_int`), which
    // libcurl's progress callback reads with an atomic load.
    private let handle: OpaquePointer
    public static let maximumBody = 1 << 20

    private static let globalInit: Void = { _ = plings_http_global_init() }()

    public init?() {
        HTTPClient.globalInit
        guard let client = plings_http_client_new() else { return nil }
        handle = client
    }

    deinit {
        plings_http_client_free(handle)
    }

    /// Aborts the request in progress, if any, and every later one (shutdown). Safe from any thread.
    public func cancel() { plings_http_client_cancel(handle) }

    /// POSTs `body`. Throws `HTTPTransportError` when no HTTP answer arrived.
    public func post(url: String, headers: [String], body: [UInt8], timeout: Double, allowHTTP: Bool)
        throws(HTTPTransportError) -> HTTPResponse
    {
        var result = plings_http_result()
        let timeoutMs = max(1, Int(timeout * 1000))
        var cStrings = headers.map { strdup($0) }
        defer { cStrings.forEach { free($0) } }
        cStrings.withUnsafeMutableBufferPointer { headerPointers in
            headerPointers.withMemoryRebound(to: UnsafePointer<CChar>?.self) { constHeaders in
                body.withUnsafeBufferPointer { bodyBytes in
                    bodyBytes.withMemoryRebound(to: CChar.self) { bodyChars in
                        plings_http_post(
                            handle, url, constHeaders.baseAddress, Int32(headers.count), bodyChars.baseAddress,
                            bodyChars.count, timeoutMs, HTTPClient.maximumBody, allowHTTP ? 1 : 0, &result)
                    }
                }
            }
        }
        defer { plings_http_result_free(&result) }
        guard result.curl_code == 0 else {
            let message = withUnsafeBytes(of: result.error) { raw in
                String(decoding: raw.prefix(while: { $0 != 0 }), as: UTF8.self)
            }
            throw HTTPTransportError(
                curlCode: result.curl_code, message: message, cancelled: plings_http_client_cancelled(handle) != 0)
        }
        let retryAfter = withUnsafeBytes(of: result.retry_after) { raw in
            String(decoding: raw.prefix(while: { $0 != 0 }), as: UTF8.self)
        }
        let location = withUnsafeBytes(of: result.location) { raw in
            String(decoding: raw.prefix(while: { $0 != 0 }), as: UTF8.self)
        }
        let bytes = result.body.map { Array(UnsafeBufferPointer(start: $0, count: result.body_len)) } ?? []
        return HTTPResponse(
            status: result.status, retryAfter: retryAfter.isEmpty ? nil : retryAfter,
            location: location.isEmpty ? nil : location, body: bytes)
    }

    /// The linked libcurl's version string.
    public static var curlVersion: String { String(cString: plings_http_curl_version()) }
}
