import Foundation
import Testing

@testable import BridgeCore

/// The delivery health every sink shares, against docs/contracts.md, "Outcomes": failing is one probe at a time
/// with exponential backoff and full jitter (1 s base, 5 min cap) and `Retry-After` as a floor; paused is one
/// error line and nothing for 5 minutes, then one probe, or a reload ends it at once. Each change is reported
/// once (one log line per change of health, never one per attempt).
struct SinkHealthTests {
    let t0 = Date(timeIntervalSince1970: 1_781_424_000)
    func api() -> SinkHealth { SinkHealth(backoff: Backoff(base: 1, cap: 300), pauseDuration: 300) }

    @Test func aFailingEpisodeIsReportedOnceAndItsEndOnce() {
        var h = api()
        let first = h.failed(reason: "HTTP 503", now: t0, clock: 100, random: 1)
        #expect(first.change == .startedFailing(reason: "HTTP 503"))
        #expect(first.delay == 1)
        #expect(h.state == .failing(reason: "HTTP 503", since: t0))
        #expect(!h.isOpen(at: 100.5) && h.isOpen(at: 101))
        // The second failure backs off twice as long, is not a new change, and keeps the episode's first reason.
        let second = h.failed(reason: "timeout", now: t0.addingTimeInterval(1), clock: 101, random: 1)
        #expect(second.change == nil && second.delay == 2)
        #expect(h.reason == "HTTP 503")
        _ = h.failed(reason: "timeout", now: t0, clock: 103, random: 1)
        let r1 = h.succeeded(clock: 110)
        #expect(r1 == .resumed(downFor: 10, failedAttempts: 3, afterPause: false))
        #expect(h.state == .healthy && h.isOpen(at: 110) && h.consecutiveFailures == 0)
        let r2 = h.succeeded(clock: 111)
        #expect(r2 == nil)
    }

    @Test func backoffIsCappedAtFiveMinutesAndRetryAfterIsAFloor() {
        var h = api()
        var delay = 0.0
        for n in 0..<20 { delay = h.failed(reason: "x", now: t0, clock: Double(n), random: 1).delay }
        #expect(delay == 300)
        var fresh = api()
        // Full jitter: a draw of 0 may retry at once, unless the server asked for a wait.
        let r3 = fresh.failed(reason: "x", now: t0, clock: 0, random: 0)
        #expect(r3.delay == 0)
        let r4 = fresh.failed(reason: "x", retryAfter: 30, now: t0, clock: 0, random: 0)
        #expect(r4.delay == 30)
        let r5 = fresh.failed(reason: "x", retryAfter: 86_400, now: t0, clock: 0, random: 0)
        #expect(r5.delay == 3600)
    }

    /// The backoff's exponent counts probes (docs/operations.md: one probe at a time): requests sent before the
    /// last failure was recorded failed in the same round and keep its wait (a server's Retry-After may lengthen
    /// it); the next request sent after it is the next probe and doubles it.
    @Test func requestsInFlightTogetherAreOneFailure() {
        var h = api()
        // Four requests sent at 100; the first answer fails at 100.2 and sets a wait of 1 s (full jitter, draw 1).
        let first = h.failed(reason: "HTTP 503", now: t0, clock: 100.2, random: 1, sentAt: 100)
        #expect(first.delay == 1)
        for clock in [100.3, 100.4] {
            let same = h.failed(reason: "HTTP 503", now: t0, clock: clock, random: 1, sentAt: 100)
            #expect(same.change == nil && same.delay == 101.2 - clock)
        }
        // The last of them asks for 5 s: the wait is at least that, the exponent still 1.
        let asked = h.failed(reason: "HTTP 503", retryAfter: 5, now: t0, clock: 100.5, random: 1, sentAt: 100)
        #expect(asked.delay == 5 && h.consecutiveFailures == 1)
        // The probe, sent once the wait is over, fails: the second failure, 2 s.
        let probe = h.failed(reason: "HTTP 503", now: t0, clock: 105.6, random: 1, sentAt: 105.5)
        #expect(probe.delay == 2)
        #expect(h.consecutiveFailures == 2)
    }

    /// A reload ends a backoff at once (the operator fixed something); the episode and its exponent stay, so a
    /// failure after it waits as long as the next probe would have.
    @Test func aReloadEndsABackoffButNotTheEpisode() {
        var h = api()
        _ = h.failed(reason: "timeout", now: t0, clock: 0, random: 1)
        _ = h.failed(reason: "timeout", now: t0, clock: 1, random: 1)
        #expect(!h.isOpen(at: 2))
        let ended = h.endBackoff(clock: 2)
        #expect(ended)
        #expect(h.isOpen(at: 2) && h.state == .failing(reason: "timeout", since: t0))
        let again = h.endBackoff(clock: 2)
        #expect(!again)
        let next = h.failed(reason: "timeout", now: t0, clock: 3, random: 1, sentAt: 2.5)
        #expect(next.delay == 4)
        var healthy = api()
        let nothing = healthy.endBackoff(clock: 0)
        #expect(!nothing)
    }

    @Test func aPauseLastsFiveMinutesOrUntilAReload() {
        var h = api()
        let r6 = h.pause(reason: "HTTP 401", now: t0, clock: 50)
        #expect(r6 == .paused(reason: "HTTP 401"))
        #expect(h.state == .paused(reason: "HTTP 401", until: t0.addingTimeInterval(300)))
        let r7 = h.pause(reason: "HTTP 401", now: t0, clock: 50)
        #expect(r7 == nil)
        #expect(!h.isOpen(at: 349) && h.isOpen(at: 350))
        // A failure that arrives while the pause runs changes nothing.
        let r8 = h.failed(reason: "late", now: t0, clock: 60, random: 1)
        #expect(r8.change == nil)
        #expect(h.reason == "HTTP 401" && !h.isOpen(at: 349))
        let r9 = h.endPause()
        #expect(r9)
        #expect(h.state == .healthy && h.isOpen(at: 60))
        let r10 = h.endPause()
        #expect(!r10)
    }

    @Test func aProbeThatSucceedsAfterAPauseIsAResumption() {
        var h = api()
        _ = h.pause(reason: "HTTP 403", now: t0, clock: 0)
        let r11 = h.succeeded(clock: 300)
        #expect(r11 == .resumed(downFor: 0, failedAttempts: 0, afterPause: true))
    }

    /// A broker: not known before the first connection, and a connection that ends at once does not restart the
    /// backoff at its shortest (`forgiveFailures` once it lasted).
    @Test func aBrokerConnectionKeepsItsBackoffUntilItLasts() {
        var h = SinkHealth(backoff: Backoff(base: 1, cap: 30), pauseDuration: 300, initial: .starting)
        #expect(h.reason == nil && !h.isHealthy)
        let r12 = h.noteFailure(reason: "refused", now: t0, clock: 0)
        #expect(r12 == .startedFailing(reason: "refused"))
        let r13 = h.scheduleRetry(clock: 0, random: 1)
        #expect(r13 == 1)
        let r14 = h.scheduleRetry(clock: 1, random: 1)
        #expect(r14 == 2)
        let r15 = h.connected(clock: 3)
        #expect(r15 == .resumed(downFor: 3, failedAttempts: 2, afterPause: false))
        #expect(h.consecutiveFailures == 2)
        // The broker's later reasons say more than its first: the latest is kept when asked.
        _ = h.noteFailure(reason: "lost", now: t0, clock: 4, keepFirstReason: false)
        _ = h.noteFailure(reason: "TLS: unknown CA", now: t0, clock: 4, keepFirstReason: false)
        #expect(h.reason == "TLS: unknown CA")
        let r16 = h.scheduleRetry(clock: 4, random: 1)
        #expect(r16 == 4)
        h.forgiveFailures()
        let r17 = h.scheduleRetry(clock: 5, random: 0.75)
        #expect(r17 == 0.75)
    }
}
