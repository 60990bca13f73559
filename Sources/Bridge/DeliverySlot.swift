import BridgeCore
import Forwarder
import Logging
import Platform
import Spool

/// The API forwarder, present while `api.url` is configured. A reload that adds the URL starts one, a reload
/// that removes it stops it (scans then stay in the local spool), and any other change of the API settings or
/// the token reaches the running one (`Forwarder.reload`).
final class DeliverySlot: Service {
    let name = "forwarder"
    private let spool: Spool
    private let logger: Logger
    private let current: Mutex<Forwarder?>
    private let running = Mutex(false)

    /// `settings` nil: no API yet. Nothing starts before `start()`.
    init(spool: Spool, settings: APISettings?, logger: Logger) {
        self.spool = spool
        self.logger = logger
        current = Mutex(settings.map { Forwarder(spool: spool, settings: $0, logger: logger) })
    }

    /// The running forwarder, if any (for `status`, metrics and the pipeline's wake-ups).
    var forwarder: Forwarder? { current.withLock { $0 } }

    func start() {
        running.withLock { $0 = true }
        forwarder?.start()
    }

    func stop(deadline: Double) {
        running.withLock { $0 = false }
        let stopping = current.withLock { slot -> Forwarder? in
            defer { slot = nil }
            return slot
        }
        stopping?.stop(deadline: deadline)
    }

    /// A scan was committed.
    func wake() { forwarder?.wake() }

    /// Applies reloaded API settings (nil: no `api.url`).
    func apply(_ settings: APISettings?) {
        guard running.withLock({ $0 }) else { return }
        switch (forwarder, settings) {
        case (nil, nil):
            break
        case (nil, let settings?):
            let started = Forwarder(spool: spool, settings: settings, logger: logger)
            current.withLock { $0 = started }
            started.start()
            logger.info("delivery started: scans go to the API", [("url", settings.url)])
        case (let running?, nil):
            current.withLock { $0 = nil }
            running.stop(deadline: MonotonicClock.deadline(after: 3))
            logger.info("delivery stopped: api.url was removed; scans stay in the local spool")
        case (let running?, let settings?) where settings.concurrency != running.concurrency:
            // The worker threads are made at start: a new concurrency needs a new forwarder. Claimed scans are
            // released by the old one's stop, so the new one takes them at once.
            running.stop(deadline: MonotonicClock.deadline(after: 3))
            let started = Forwarder(spool: spool, settings: settings, logger: logger)
            current.withLock { $0 = started }
            started.start()
            logger.info("delivery restarted with the new api.concurrency", [("concurrency", "\(settings.concurrency)")])
        case (let running?, let settings?):
            running.reload(settings: settings)
        }
    }
}
