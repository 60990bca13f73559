import BridgeCore
import PlingsAPI
import HID
import MQTT
import NFC

/// Config loader, with the sections the source and sink modules own: any file gives a configuration or an error
/// naming the key; never a crash.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> Int32 {
    var loader = ConfigLoader(sections: [APIConfig.self, HIDConfig.self, NFCConfig.self, MQTTConfig.self])
    do {
        try loader.applyFile(Array(UnsafeBufferPointer(start: data, count: size)), origin: "fuzz.json")
        precondition(!loader.config.hosts.isEmpty)
    } catch {
        precondition(!error.message.isEmpty)
    }
    return 0
}
