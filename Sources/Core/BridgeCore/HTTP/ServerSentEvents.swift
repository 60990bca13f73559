/// Server-sent events framing (the HTML Living Standard, "Server-sent events", section 9.2): `id:` and `event:`
/// fields, one `data:` line per line of the payload, a blank line ending the event.
public enum ServerSentEvents {
    /// One event. `id` becomes the client's last event ID (its `Last-Event-ID` on reconnection); `event` nil is a
    /// plain `message`. A payload line break (CR, LF or CRLF) starts another `data:` line, so the text arrives as
    /// it was, and neither a CR nor an LF in `event` can forge a field.
    public static func event(id: String? = nil, event: String? = nil, data: String) -> String {
        var text = ""
        if let id { text += "id: \(singleLine(id))\n" }
        if let event { text += "event: \(singleLine(event))\n" }
        let normalized = data.replacingOccurrences(of: "\r\n", with: "\n").replacingOccurrences(of: "\r", with: "\n")
        for line in normalized.split(separator: "\n", omittingEmptySubsequences: false) { text += "data: \(line)\n" }
        return text + "\n"
    }

    /// A comment line: ignored by clients, it keeps a quiet connection alive through proxies and shows a vanished
    /// client to the server (the write fails).
    public static func comment(_ text: String) -> String { ": \(singleLine(text))\n\n" }

    /// How long a client waits before it reconnects (`retry:`, milliseconds).
    public static func retry(milliseconds: Int) -> String { "retry: \(milliseconds)\n\n" }

    /// The sequence number a reconnecting client presents (`Last-Event-ID`, or `after` in the URL): a whole
    /// number from 0; nil for anything else (an absent or foreign ID starts from now).
    public static func sequence(_ text: String?) -> Int? {
        guard let text, !text.isEmpty, text.count <= 19, text.allSatisfy({ ("0"..."9").contains($0) }) else {
            return nil
        }
        return Int(text)
    }

    private static func singleLine(_ text: String) -> String {
        String(text.unicodeScalars.filter { $0 != "\n" && $0 != "\r" && $0 != "\0" }.map(Character.init))
    }
}
