/// How an input source stands, for the start-up log, `status` and `plings_bridge_source_up`: one human line and
/// whether it can take reads now (at least one reader or scanner attached and watched).
public struct SourceState: Sendable, Equatable {
    /// `1 reader: ACS ACR122U 00 00`, `pcscd not running: waiting`, `no scanners found: ...`.
    public var summary: String
    /// True while at least one device is attached and read.
    public var isUp: Bool

    public init(_ summary: String, up: Bool) {
        self.summary = summary
        self.isUp = up
    }
}
