/// What the pipeline did with a read a source handed on: the source's good-read feedback (a beep, an LED) follows
/// it, after the commit.
public enum CommitResult: Sendable, Equatable {
    /// On disk; `pending` true for a Plings scan, false for one spooled as unrecognized.
    case committed(pending: Bool)
    /// A repeat inside the debounce window: the first read is already on disk.
    case duplicate
    /// The spool refused it: nothing was accepted.
    case refused
}

extension FeedbackOutcome {
    /// The feedback for a commit's result. `recognized`: whether the read holds a Plings URL (a duplicate says
    /// nothing more about the read than that).
    public init(_ result: CommitResult, recognized: Bool) {
        switch result {
        case .committed(let pending): self = pending ? .accepted : .unrecognized
        case .duplicate: self = recognized ? .accepted : .unrecognized
        case .refused: self = .failed
        }
    }
}
