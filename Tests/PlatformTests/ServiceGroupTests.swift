import Glibc
import Platform
import Testing

/// The lifecycle contract: layers start first to last and stop last to first; the services of one layer stop
/// together against the one deadline; a thread started by `OwnThread` is joined.
struct ServiceGroupTests {
    /// A service that records its start and stop in a shared journal and, when told to, refuses to finish its stop
    /// until a partner's stop has begun (by the deadline at the latest).
    final class Part: Service {
        let name: String
        let journal: Monitor<[String]>
        let waitsFor: String?

        init(_ name: String, journal: Monitor<[String]>, waitsFor: String? = nil) {
            self.name = name
            self.journal = journal
            self.waitsFor = waitsFor
        }

        func start() { journal.update { $0.append("start \(name)") } }

        func stop(deadline: Double) {
            journal.update { $0.append("stop \(name)") }
            if let waitsFor {
                let met = journal.wait(until: deadline) { $0.contains("stop \(waitsFor)") }
                journal.update { $0.append(met ? "\(name) met \(waitsFor)" : "\(name) alone") }
            }
            journal.update { $0.append("stopped \(name)") }
        }
    }

    @Test func layersStartInOrderAndTheirPartsStopTogether() {
        let journal = Monitor<[String]>([])
        // a and b each finish stopping only once the other has begun: one after the other, the first would wait
        // until the deadline and say "alone".
        let group = ServiceGroup(layers: [
            [Part("first", journal: journal)],
            [Part("a", journal: journal, waitsFor: "b"), Part("b", journal: journal, waitsFor: "a")],
        ])
        group.start()
        let late = group.stop(deadline: MonotonicClock.deadline(after: 5))
        let entries = journal.withLock { $0 }
        #expect(Array(entries.prefix(3)) == ["start first", "start a", "start b"])
        #expect(entries.contains("a met b") && entries.contains("b met a"))
        // The first layer stops only after both parts of the last one have stopped.
        let firstStop = entries.firstIndex(of: "stop first") ?? -1
        #expect(firstStop > (entries.firstIndex(of: "stopped a") ?? .max))
        #expect(firstStop > (entries.firstIndex(of: "stopped b") ?? .max))
        #expect(late.isEmpty)
    }

    @Test func aStopPastTheDeadlineIsNamed() {
        let journal = Monitor<[String]>([])
        // Nobody called "never" stops, so "slow" waits until the deadline.
        let group = ServiceGroup([Part("slow", journal: journal, waitsFor: "never")])
        group.start()
        #expect(group.stop(deadline: MonotonicClock.deadline(after: 0.05)) == ["slow"])
        #expect(journal.withLock { $0 }.contains("slow alone"))
    }

    @Test func ownThreadRunsOffTheCallerAndIsJoined() {
        let seen = Mutex<[String]>([])
        let thread = OwnThread(name: "probe") {
            var name = [CChar](repeating: 0, count: 32)
            if let file = fopen("/proc/thread-self/comm", "r") {
                _ = fgets(&name, Int32(name.count), file)
                fclose(file)
            }
            seen.withLock { $0.append(String(cString: name).trimmingNewline) }
        }
        thread.join()
        // The kernel keeps the name it was given: the thread is ours, not one of the cooperative pool's.
        #expect(seen.withLock { $0 } == ["probe"])
    }
}

extension String {
    fileprivate var trimmingNewline: String { hasSuffix("\n") ? String(dropLast()) : self }
}
