import BridgeCore

/// One line of `scanners --watch` (docs/contracts.md): the read as a scanner gave it and, when it went through
/// the pipeline, what the pipeline did with it.
public enum WatchedRead {
    /// `{"device", "raw", "time"}`, then `outcome` (`accepted` with the scan's `id` and `state`, `debounced`, or
    /// `refused` with its `error`) when `outcome` is given.
    public static func json(_ read: Read, outcome: ReadOutcome?) -> JSONValue {
        var fields: [(String, JSONValue)] = [
            ("device", .string(read.device)), ("raw", .string(read.raw)),
            ("time", .string(Timestamp.format(read.time))),
        ]
        switch outcome {
        case nil: break
        case .accepted(let scan)?:
            fields += [
                ("outcome", .string("accepted")), ("id", .string(scan.id)), ("state", .string(scan.state.rawValue)),
            ]
        case .debounced?:
            fields.append(("outcome", .string("debounced")))
        case .refused(let why)?:
            fields += [("outcome", .string("refused")), ("error", .string(why))]
        }
        return .object(fields)
    }
}
