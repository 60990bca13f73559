/// What a delivering sink counted since it started, in scans: the API's forwarder and every queue sink (a webhook)
/// keep the same four figures, which `status` and the metrics show.
public struct DeliveryStats: Sendable, Equatable {
    /// Scans sent (each scan of a batch counts once per request).
    public var attempts = 0
    public var delivered = 0
    /// Refused for good.
    public var dead = 0
    /// Scans in attempts that failed and will be retried.
    public var failures = 0

    public init(attempts: Int = 0, delivered: Int = 0, dead: Int = 0, failures: Int = 0) {
        (self.attempts, self.delivered, self.dead, self.failures) = (attempts, delivered, dead, failures)
    }
}
