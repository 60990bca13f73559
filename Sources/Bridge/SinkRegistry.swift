import BridgeCore
import Forwarder
import HTTPInterface
import MQTT
import Plugins
import Webhook

/// Every kind of sink the bridge has, in the order `status`, `doctor` and the metrics show them. A new sink module
/// adds its `ScanSinkModule` here (docs/architecture.md, "Add a sink").
public enum SinkRegistry {
    public static let modules: [ScanSinkModule] = [.api, .mqtt, .webhook, .http]
}

/// The configuration sections the registered modules own, for the loader and the reload's restart check.
public enum ConfigRegistry {
    public static var sections: [any ConfigSection.Type] {
        SourceRegistry.modules.map(\.configSection) + SinkRegistry.modules.compactMap(\.configSection)
    }
}
