import BridgeCore
import Logging
import PlingsAPI
import HTTPInterface
import MQTT
import SinkKit
import SourceKit
import Spool
import Webhook

/// Every kind of sink the bridge has, in the order `status`, `doctor` and the metrics show them. A new sink module
/// adds its `ScanSinkModule` here (docs/architecture.md, "Add a sink").
public enum SinkRegistry {
    public static let modules: [ScanSinkModule] = [.api, .mqtt, .webhook, .http]

    /// Registers the spool queues of the sinks `config` enables, before a process other than `run` commits reads
    /// (`scan`, `scanners --watch --pipeline`): a read accepted while a sink is configured is queued for it, whether
    /// or not `run` has opened this spool yet. A failure is logged and the read still committed (the API's queue is
    /// the spool's own; `run` registers the others when it starts them, from then on).
    public static func registerQueues(in spool: Spool, config: BridgeConfig, logger: Logger) {
        for queue in modules.compactMap({ $0.queue(config) }) {
            do {
                try spool.registerSink(queue)
            } catch {
                logger.warn("cannot queue reads for \(queue) in the spool", [("error", error.description)])
            }
        }
    }
}

/// The configuration sections the registered modules own, for the loader and the reload's restart check.
public enum ConfigRegistry {
    public static var sections: [any ConfigSection.Type] {
        SourceRegistry.modules.map(\.configSection) + SinkRegistry.modules.compactMap(\.configSection)
    }
}
