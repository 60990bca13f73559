import Dispatch
import Glibc

/// Process signals as an `AsyncStream`, through dispatch signal sources (never code in a signal handler).
///
/// Created from a nonisolated function on purpose: dispatch sources set up from top-level `main.swift` code
/// are MainActor-isolated in Swift 6 and crash with SIGILL when the handler fires off the main thread.
public enum SignalStream {
    nonisolated public static func make(_ signals: [Int32]) -> AsyncStream<Int32> {
        AsyncStream { continuation in
            let queue = DispatchQueue(label: "signals")
            var sources: [any DispatchSourceSignal] = []
            for number in signals {
                signal(number, SIG_IGN)  // the default action would kill us before dispatch sees it
                let source = DispatchSource.makeSignalSource(signal: number, queue: queue)
                source.setEventHandler { continuation.yield(number) }
                source.resume()
                sources.append(source)
            }
            let keep = SourcesBox(sources)
            continuation.onTermination = { _ in keep.cancel() }
        }
    }

    /// A dead peer (gpsd, the API) must end in EPIPE, not kill the process.
    public static func ignoreSIGPIPE() { signal(SIGPIPE, SIG_IGN) }
}

private final class SourcesBox: @unchecked Sendable {
    // Only touched at creation and on termination, which dispatch serialises.
    let sources: [any DispatchSourceSignal]
    init(_ sources: [any DispatchSourceSignal]) { self.sources = sources }
    func cancel() { sources.forEach { $0.cancel() } }
}
