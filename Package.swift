// swift-tools-version:6.0
// plings-bridge: no outside packages; the toolchain plus Debian C libraries (see docs/architecture.md).
import PackageDescription

let package = Package(
    name: "plings-bridge",
    platforms: [.macOS(.v15)],
    products: [
        .executable(name: "plings-bridge", targets: ["plings-bridge"]),
        .executable(name: "plings-bench", targets: ["plings-bench"]),
        // For the fuzz targets in Fuzz/ (a separate package that depends on this one by path).
        .library(name: "BridgeCore", targets: ["BridgeCore"]),
        // fuzz-evdev decodes with layouts compiled from xkb-data; fuzz-config loads every module's config section.
        .library(name: "HID", targets: ["HID"]),
        .library(name: "NFC", targets: ["NFC"]),
        .library(name: "MQTT", targets: ["MQTT"]),
        .library(name: "PlingsAPI", targets: ["PlingsAPI"]),
        // fuzz-serial frames bytes with the serial scanners' framer.
        .library(name: "Serial", targets: ["Serial"]),
    ],
    targets: [
        // C libraries, one system-library target each.
        .systemLibrary(name: "CSQLite", pkgConfig: "sqlite3", providers: [.apt(["libsqlite3-dev"])]),
        // pcsc-lite: winscard.h includes <pcsclite.h> by bare name, so the include path must come from pkg-config.
        .systemLibrary(name: "CPCSCLite", pkgConfig: "libpcsclite", providers: [.apt(["libpcsclite-dev"])]),
        // libcurl behind a few C functions (curl_easy_setopt is variadic; Swift cannot call it).
        .target(name: "CCurlShim", linkerSettings: [.linkedLibrary("curl")]),
        // libc facilities Swift's Glibc module does not import (ntp_adjtime, pipe2).
        .target(name: "CSysShim"),
        // libgps behind a plain struct: gps_data_t never reaches Swift, version skew stays in one C file.
        .target(name: "CGPSShim", linkerSettings: [.linkedLibrary("gps")]),
        // libudev: device enumeration and the hot-plug monitor for HID scanners.
        .systemLibrary(name: "CUDev", pkgConfig: "libudev", providers: [.apt(["libudev-dev"])]),
        // libmosquitto (MQTT v5) behind one C callback, and libcrypto's SHA-256 for the default device id.
        .target(name: "CMosquittoShim", linkerSettings: [.linkedLibrary("mosquitto"), .linkedLibrary("crypto")]),
        // libmicrohttpd (the local HTTP interface) behind plain functions: MHD_start_daemon is variadic.
        .target(name: "CMicroHTTPDShim", linkerSettings: [.linkedLibrary("microhttpd")]),
        // libqrencode: QR Codes for the scanner calibration sheet.
        .systemLibrary(name: "CQREncode", pkgConfig: "libqrencode", providers: [.apt(["libqrencode-dev"])]),
        // libcrypto's ECDSA verification, for NXP's originality signatures (nfc.checkOriginality).
        .target(name: "CCryptoShim", linkerSettings: [.linkedLibrary("crypto")]),
        // evdev ioctl numbers and `struct input_event` access: function-like macros Swift cannot import.
        .target(name: "CEvdevShim"),
        // libxkbcommon: keymaps from xkb-data and the compose tables, compiled once per layout.
        .systemLibrary(name: "CXKBCommon", pkgConfig: "xkbcommon", providers: [.apt(["libxkbcommon-dev"])]),

        // The platform layer: the one monotonic clock, EINTR-retrying system calls, a condition variable on the
        // monotonic clock, atomic file replacement, owned file descriptors. libc only.
        .target(name: "Platform", dependencies: ["CSysShim"]),
        // Pure logic: no I/O, Foundation only.
        .target(name: "BridgeCore"),
        // logfmt lines on stderr, shared by the I/O modules.
        .target(name: "Logging", dependencies: ["BridgeCore", "Platform"]),
        // The read-source kit: the contract every read source implements, its module and context. No spool.
        .target(name: "SourceKit", dependencies: ["BridgeCore", "Logging", "Platform"]),
        // The sink kit: the contract every sink implements, the reload slot, the queue sink runner, the status board.
        .target(name: "SinkKit", dependencies: ["BridgeCore", "Logging", "Platform", "Spool"]),
        // The durable SQLite spool.
        .target(name: "Spool", dependencies: ["BridgeCore", "CSQLite", "Platform"]),
        // A blocking HTTPS client over libcurl, for every sink that speaks HTTP (the API, webhooks).
        .target(name: "HTTPTransport", dependencies: ["CCurlShim"]),
        // Delivery to the API: the GraphQL request, the delivery loop, backoff.
        .target(
            name: "PlingsAPI", dependencies: ["BridgeCore", "Logging", "Spool", "HTTPTransport", "Platform", "SinkKit"]),
        // Publishing scans and device health to an MQTT broker, from the spool (its own delivery state).
        .target(
            name: "MQTT", dependencies: ["BridgeCore", "Logging", "Spool", "CMosquittoShim", "Platform", "SinkKit"]),
        // POSTing scans to a webhook, on the queued-sink runner.
        .target(
            name: "Webhook",
            dependencies: ["BridgeCore", "CCryptoShim", "HTTPTransport", "Logging", "SinkKit", "Spool"]),
        // The local HTTP interface: bench page, scan feed (server-sent events), status, metrics, health.
        .target(
            name: "HTTPInterface",
            dependencies: ["BridgeCore", "Logging", "Spool", "CMicroHTTPDShim", "Platform", "SinkKit"]),
        // QR Code symbols (libqrencode).
        .target(name: "QRCode", dependencies: ["CQREncode"]),
        // The gpsd client (one connection on its own thread) and the fixed-location fallback.
        .target(name: "Location", dependencies: ["BridgeCore", "Logging", "CGPSShim", "Platform"]),
        // USB HID barcode scanners: udev discovery and hot-plug, evdev reader, exclusive grab.
        .target(
            name: "HID",
            dependencies: ["BridgeCore", "Logging", "Udev", "CEvdevShim", "CXKBCommon", "Platform", "SourceKit"]),
        // libudev for any subsystem: enumeration and the hot-plug monitor.
        .target(name: "Udev", dependencies: ["CUDev", "Logging", "Platform"]),
        // Serial barcode scanners (CDC-ACM, USB-serial): ttys named by serial.match, raw mode, framed by suffix.
        .target(name: "Serial", dependencies: ["BridgeCore", "Logging", "Platform", "SourceKit", "Udev"]),
        // HID POS barcode scanners: hidraw nodes chosen by report descriptor, codes from Scanned Data Reports.
        .target(name: "HIDPOS", dependencies: ["BridgeCore", "Logging", "Platform", "SourceKit", "Udev"]),
        // PC/SC: context lifecycle, reader monitor, tag reading through pcscd.
        .target(
            name: "NFC",
            dependencies: ["BridgeCore", "Logging", "CPCSCLite", "CCryptoShim", "Platform", "SourceKit", "Udev"]),
        // The read pipeline: debounce, couple the fix, parse, group commit to the spool.
        .target(name: "ReadPipeline", dependencies: ["BridgeCore", "Logging", "Spool", "Platform"]),
        // Wiring: sources -> pipeline -> spool -> sinks, through the registries.
        .target(
            name: "Bridge",
            dependencies: [
                "BridgeCore", "Logging", "Spool", "PlingsAPI", "MQTT", "Location", "HID", "NFC", "Serial", "CSysShim",
                "Platform", "SinkKit", "SourceKit", "ReadPipeline", "HIDPOS", "HTTPInterface", "HTTPTransport",
                "Webhook",
            ]),
        // The CLI: thin.
        .executableTarget(
            name: "plings-bridge",
            dependencies: [
                "Bridge", "BridgeCore", "Logging", "Spool", "Location", "HID", "NFC", "Platform", "SinkKit",
                "SourceKit", "PlingsAPI", "ReadPipeline", "QRCode",
            ]),
        // Benchmarks (`swift run -c release plings-bench`).
        .executableTarget(
            name: "plings-bench",
            dependencies: [
                "Bridge", "BridgeCore", "Spool", "CSQLite", "PlingsAPI", "Logging", "Location", "HID", "CEvdevShim",
                "NFC", "BridgeTestSupport", "Platform", "MQTT", "CXKBCommon", "ReadPipeline", "HIDPOS", "Serial",
                "HTTPInterface", "SinkKit", "SourceKit",
            ]),

        .testTarget(name: "BridgeCoreTests", dependencies: ["BridgeCore", "BridgeTestSupport"]),
        // Test support: process runners and rig launchers (never linked into the product).
        .target(name: "BridgeTestSupport", dependencies: ["BridgeCore", "CSysShim", "Platform"]),
        .testTarget(
            name: "SpoolTests", dependencies: ["Spool", "BridgeCore", "BridgeTestSupport", "CSQLite", "Platform"]),
        .testTarget(name: "LocationTests", dependencies: ["Location", "BridgeCore", "BridgeTestSupport", "CGPSShim"]),
        .testTarget(
            name: "NFCTests",
            dependencies: [
                "NFC", "Bridge", "BridgeCore", "Logging", "Spool", "BridgeTestSupport", "Platform", "ReadPipeline",
            ]),
        .testTarget(name: "CLITests", dependencies: ["BridgeCore", "BridgeTestSupport"]),
        // The composition root: the configuration with every registered section, the source registry and set.
        .testTarget(
            name: "BridgeTests",
            dependencies: [
                "Bridge", "BridgeCore", "HID", "NFC", "MQTT", "PlingsAPI", "Serial", "SinkKit", "SourceKit", "Platform",
                "BridgeTestSupport", "HIDPOS", "HTTPInterface", "Webhook",
            ]),
        .testTarget(
            name: "PipelineTests",
            dependencies: ["ReadPipeline", "BridgeCore", "Logging", "Spool", "Platform", "BridgeTestSupport"]),
        .testTarget(name: "PlatformTests", dependencies: ["Platform", "BridgeTestSupport"]),
        .testTarget(
            name: "SerialTests", dependencies: ["Serial", "BridgeCore", "BridgeTestSupport", "Platform", "Udev"]),
        .testTarget(name: "HIDPOSTests", dependencies: ["HIDPOS", "BridgeCore", "BridgeTestSupport", "Platform"]),
        .testTarget(
            name: "PlingsAPITests",
            dependencies: ["BridgeCore", "BridgeTestSupport", "PlingsAPI", "Logging", "Platform", "SinkKit", "Spool"]),
        .testTarget(
            name: "MQTTTests",
            dependencies: ["BridgeCore", "BridgeTestSupport", "Logging", "MQTT", "Platform", "SinkKit", "Spool"]),
        .testTarget(
            name: "HTTPInterfaceTests", dependencies: ["BridgeCore", "BridgeTestSupport", "Platform"]),
        .testTarget(
            name: "SinkKitTests",
            dependencies: ["BridgeCore", "BridgeTestSupport", "Logging", "Platform", "SinkKit", "Spool"]),
        .testTarget(
            name: "WebhookTests", dependencies: ["BridgeCore", "HTTPTransport", "Webhook"]),
        // The process-level tests: the real bridge with its real neighbours (receivers, brokers, spools).
        .testTarget(
            name: "EndToEndTests", dependencies: ["BridgeCore", "BridgeTestSupport", "Platform", "Spool"]),
        .testTarget(name: "OpsTests", dependencies: ["BridgeCore", "BridgeTestSupport", "Platform"]),
        .testTarget(
            name: "HIDTests",
            dependencies: [
                "HID", "BridgeCore", "Logging", "Bridge", "Spool", "BridgeTestSupport", "CEvdevShim", "Platform",
                "CXKBCommon", "ReadPipeline",
            ]),
    ],
    swiftLanguageModes: [.v6]
)

/// The tree shows the machine: every target but the tests lives in `Sources/<role>/<name>`, its role one of these
/// folders (docs/architecture.md, "Module graph", is drawn from them by scripts/module-graph.py).
let layout: [String: [String]] = [
    "Executables": ["plings-bridge", "plings-bench"],
    // The composition root: sources -> pipeline -> spool -> sinks, through the registries.
    "Composition": ["Bridge"],
    // Where reads come from (and the position coupled to each).
    "Readers": ["NFC", "HID", "HIDPOS", "Serial", "Location"],
    // Where scans go.
    "Sinks": ["PlingsAPI", "MQTT", "Webhook", "HTTPInterface"],
    // The scan model, the pipeline, the spool and the contracts every reader and sink implements.
    "Core": ["BridgeCore", "ReadPipeline", "Spool", "SourceKit", "SinkKit"],
    // What every side uses of the system: clocks, threads, descriptors, udev, logging, HTTP, QR Codes.
    "System": ["Platform", "Udev", "Logging", "HTTPTransport", "QRCode"],
    // C libraries: shims and system-library module maps.
    "C": [
        "CSQLite", "CPCSCLite", "CCurlShim", "CSysShim", "CGPSShim", "CUDev", "CMosquittoShim", "CMicroHTTPDShim",
        "CQREncode", "CCryptoShim", "CEvdevShim", "CXKBCommon",
    ],
    "TestSupport": ["BridgeTestSupport"],
]
for target in package.targets where target.type != .test {
    guard let role = layout.first(where: { $0.value.contains(target.name) })?.key else {
        fatalError("Package.swift: give \(target.name) a role in `layout`")
    }
    target.path = "Sources/\(role)/\(target.name)"
}
