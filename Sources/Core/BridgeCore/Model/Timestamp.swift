import Foundation

/// RFC 3339 UTC timestamps with milliseconds (`2026-06-14T08:00:00.123Z`), the only time format on our wire.
///
/// Formatting is done by hand from the Unix time (civil-from-days) rather than with `DateFormatter`: it is on
/// the read path, must be identical on every locale and calendar setting, and must truncate (not round) to the
/// millisecond so a replayed scan never shows a time later than the read.
public enum Timestamp {
    /// Formats `date` as `yyyy-MM-ddTHH:mm:ss.SSSZ` in UTC.
    public static func format(_ date: Date) -> String {
        // Truncate to the millisecond, after a 1 us nudge: a time parsed from "….491Z" is stored as a double
        // just below .491 and must format back to .491.
        // Clamped to what Int64 milliseconds hold (+-292 million years): a date from outside (a hostile gpsd, a
        // huge flag) must not trap here; such a date shows as an absurd year, which is what it is.
        let millis = (date.timeIntervalSince1970 * 1000 + 0.001).rounded(.down)
        let totalMillis = millis.isNaN ? 0 : Int64(min(max(millis, -9.2e18), 9.2e18))
        return format(unixMilliseconds: totalMillis)
    }

    public static func format(unixMilliseconds totalMillis: Int64) -> String {
        let millis = Int(((totalMillis % 1000) + 1000) % 1000)
        let seconds = (totalMillis - Int64(millis)) / 1000
        let days = Int(seconds >= 0 ? seconds / 86_400 : (seconds - 86_399) / 86_400)
        let secondOfDay = Int(seconds - Int64(days) * 86_400)
        let (year, month, day) = civil(fromDays: days)
        return pad(year, 4) + "-" + pad(month, 2) + "-" + pad(day, 2) + "T" + pad(secondOfDay / 3600, 2) + ":"
            + pad(secondOfDay / 60 % 60, 2) + ":" + pad(secondOfDay % 60, 2) + "." + pad(millis, 3) + "Z"
    }

    /// Parses the format above (also without milliseconds, and with `+00:00`); nil for anything else.
    public static func parse(_ text: String) -> Date? {
        let b = Array(text.utf8)
        guard b.count >= 20 else { return nil }
        func number(_ from: Int, _ count: Int) -> Int? {
            guard from + count <= b.count else { return nil }
            var value = 0
            for i in from..<(from + count) {
                guard (48...57).contains(b[i]) else { return nil }
                value = value * 10 + Int(b[i] - 48)
            }
            return value
        }
        guard let year = number(0, 4), b[4] == 0x2D, let month = number(5, 2), b[7] == 0x2D,
            let day = number(8, 2), b[10] == 0x54 || b[10] == 0x74, let hour = number(11, 2), b[13] == 0x3A,
            let minute = number(14, 2), b[16] == 0x3A, let second = number(17, 2),
            (1...12).contains(month), (1...31).contains(day), hour < 24, minute < 60, second < 61
        else { return nil }
        var index = 19
        var millis = 0
        if index < b.count, b[index] == 0x2E {
            index += 1
            var digits = 0
            while index < b.count, (48...57).contains(b[index]) {
                if digits < 3 { millis = millis * 10 + Int(b[index] - 48) }
                digits += 1
                index += 1
            }
            guard digits > 0 else { return nil }
            for _ in digits..<max(digits, 3) { millis *= 10 }
        }
        let rest = String(decoding: b[index...], as: UTF8.self)
        guard rest == "Z" || rest == "z" || rest == "+00:00" else { return nil }
        let days = daysFromCivil(year: year, month: month, day: day)
        let seconds = Int64(days) * 86_400 + Int64(hour * 3600 + minute * 60 + second)
        return Date(timeIntervalSince1970: Double(seconds) + Double(millis) / 1000)
    }

    private static func pad(_ value: Int, _ width: Int) -> String {
        let s = String(value)
        return s.count >= width ? s : String(repeating: "0", count: width - s.count) + s
    }

    // Howard Hinnant's civil_from_days / days_from_civil (public domain algorithms).
    private static func civil(fromDays z0: Int) -> (Int, Int, Int) {
        let z = z0 + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let doe = z - era * 146_097
        let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100)
        let mp = (5 * doy + 2) / 153
        let d = doy - (153 * mp + 2) / 5 + 1
        let m = mp < 10 ? mp + 3 : mp - 9
        return (yoe + era * 400 + (m <= 2 ? 1 : 0), m, d)
    }

    private static func daysFromCivil(year: Int, month: Int, day: Int) -> Int {
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yoe = y - era * 400
        let mp = month > 2 ? month - 3 : month + 9
        let doy = (153 * mp + 2) / 5 + day - 1
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy
        return era * 146_097 + doe - 719_468
    }
}
