/// Prometheus text exposition (format 0.0.4) of the service's counters and gauges, for the node exporter's
/// textfile collector. Pure: the service gathers the numbers, this only spells them.
public struct MetricsText {
    private var lines: [String] = []
    private var described: Set<String> = []

    public init() {}

    /// Adds one sample; `help` and `type` are written once per metric name.
    public mutating func add(
        _ name: String, _ value: Double, labels: [(String, String)] = [], help: String, type: String = "gauge"
    ) {
        if described.insert(name).inserted {
            lines.append("# HELP \(name) \(help)")
            lines.append("# TYPE \(name) \(type)")
        }
        var sample = name
        if !labels.isEmpty {
            sample += "{" + labels.map { "\($0.0)=\"\(MetricsText.escape($0.1))\"" }.joined(separator: ",") + "}"
        }
        lines.append(sample + " " + MetricsText.format(value))
    }

    /// One series per state in `states` under the label `state`: 1 for `current`, 0 for the others (an enum as
    /// Prometheus spells one, so an alert can match a state that is not current).
    public mutating func addState(_ name: String, states: [String], current: String, help: String) {
        for state in states { add(name, state == current ? 1 : 0, labels: [("state", state)], help: help) }
    }

    /// A counter of events since the process started.
    public mutating func addCounter(_ name: String, _ value: Int, help: String) {
        add(name, Double(value), help: help, type: "counter")
    }

    public var text: String { lines.joined(separator: "\n") + "\n" }

    static func escape(_ value: String) -> String {
        var out = ""
        for c in value {
            switch c {
            case "\\": out += "\\\\"
            case "\"": out += "\\\""
            case "\n": out += "\\n"
            default: out.append(c)
            }
        }
        return out
    }

    static func format(_ value: Double) -> String {
        if value.isNaN { return "NaN" }
        if value.isInfinite { return value > 0 ? "+Inf" : "-Inf" }
        if value == value.rounded(), abs(value) < 1e15 { return String(Int64(value)) }
        return String(value)
    }
}
