/// Drops a repeat of the same payload from the same device inside a time window.
///
/// A tag held near a reader edge or a scanner that double-fires produces the same payload twice within a
/// second; that is one read. The window restarts at each *accepted* read, so a payload repeated steadily
/// every half second with a 1 s window is accepted once per window, not swallowed forever.
/// Memory is bounded: entries older than the window are pruned.
public struct Debouncer: Sendable {
    public let window: Double
    private var lastAccepted: [Key: Double] = [:]
    private var pruneCountdown = 256

    private struct Key: Hashable, Sendable {
        let device: String
        let payload: String
    }

    /// - Parameter window: seconds; zero or less disables debouncing.
    public init(window: Double) { self.window = window }

    /// Whether a read of `payload` on `device` at monotonic time `now` (seconds) is a new read.
    public mutating func accept(device: String, payload: String, now: Double) -> Bool {
        guard window > 0 else { return true }
        let key = Key(device: device, payload: payload)
        if let last = lastAccepted[key], now - last < window, now >= last { return false }
        lastAccepted[key] = now
        pruneCountdown -= 1
        if pruneCountdown <= 0 {
            pruneCountdown = 256
            lastAccepted = lastAccepted.filter { now - $0.value < window }
        }
        return true
    }

    var trackedCount: Int { lastAccepted.count }
}
