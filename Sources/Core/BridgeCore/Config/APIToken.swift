/// The rules a bearer token must meet before it is used (docs/configuration.md, "The API token").
///
/// A token goes into an HTTP header line, so anything but visible ASCII could end the header early (CR/LF would
/// add headers of the sender's choosing) or be mangled on the way. A very short token is refused too: it is
/// guessable, and redacting it from logs would blank out ordinary words.
public enum APIToken {
    /// Shorter tokens are refused. 16 visible ASCII characters is about 100 bits even if only letters and
    /// digits are used, the least an API credential should have, and it cannot collide with words in a log line.
    public static let minimumLength = 16

    /// The token in `text` (surrounding whitespace, such as `echo`'s newline, is not part of it), or an error
    /// naming `source` and what is wrong. The error never contains the token or any part of it.
    public static func validate(_ text: String, source: String) throws(ConfigError) -> String {
        let token = text.trimmingASCIIWhitespace()
        for (offset, byte) in token.utf8.enumerated() where !(0x21...0x7E).contains(byte) {
            let what =
                byte < 0x20 || byte == 0x7F
                ? "a control character (0x\(String(byte, radix: 16, uppercase: true)))"
                : byte == 0x20 ? "a space" : "a non-ASCII character"
            throw ConfigError(
                "\(source): the token contains \(what) at byte \(offset + 1); "
                    + "a token is visible ASCII only (0x21-0x7E)")
        }
        guard token.utf8.count >= minimumLength else {
            throw ConfigError(
                "\(source): the token is \(token.utf8.count) characters long, "
                    + "shorter than the minimum of \(minimumLength)")
        }
        return token
    }
}
