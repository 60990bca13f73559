// swift-tools-version:6.0
// plings-bridge: no outside packages; the toolchain plus Debian C libraries (see design section 3).
import PackageDescription

let package = Package(
    name: "plings-bridge",
    platforms: [.macOS(.v15)],
    products: [
        .executable(name: "plings-bridge", targets: ["plings-bridge"]),
        .executable(name: "plings-bench", targets: ["plings-bench"]),
    ],
    targets: [
        // C libraries, one system-library target each.
        .systemLibrary(name: "CSQLite", pkgConfig: "sqlite3", providers: [.apt(["libsqlite3-dev"])]),
        // pcsc-lite: winscard.h includes <pcsclite.h> by bare name, so the include path must come from pkg-config.
        .systemLibrary(name: "CPCSCLite", pkgConfig: "libpcsclite", providers: [.apt(["libpcsclite-dev"])]),
        // libcurl behind a few C functions (curl_easy_setopt is variadic; Swift cannot call it).
        .target(name: "CCurlShim", linkerSettings: [.linkedLibrary("curl")]),

        // Pure logic: no I/O, Foundation only.
        .target(name: "BridgeCore"),
        // logfmt lines on stderr, shared by the I/O modules.
        .target(name: "Logging", dependencies: ["BridgeCore"]),
        // The durable SQLite spool.
        .target(name: "Spool", dependencies: ["BridgeCore", "CSQLite"]),
        // Delivery to the API: HTTP client, delivery loop, backoff.
        .target(name: "Forwarder", dependencies: ["BridgeCore", "Logging", "Spool", "CCurlShim"]),
        // PC/SC: context lifecycle, reader monitor, tag reading through pcscd.
        .target(name: "NFC", dependencies: ["BridgeCore", "Logging", "CPCSCLite"]),
        // Wiring: sources -> pipeline -> spool -> forwarder.
        .target(name: "Bridge", dependencies: ["BridgeCore", "Logging", "Spool", "Forwarder"]),
        // The CLI: thin.
        .executableTarget(name: "plings-bridge", dependencies: ["Bridge", "BridgeCore", "Logging", "Spool", "NFC"]),
        // Benchmarks (`swift run -c release plings-bench`).
        .executableTarget(
            name: "plings-bench", dependencies: ["Bridge", "BridgeCore", "Spool", "CSQLite", "Forwarder", "Logging", "NFC"]),

        .testTarget(name: "BridgeCoreTests", dependencies: ["BridgeCore"]),
        // Test support: process runners and rig launchers (never linked into the product).
        .target(name: "BridgeTestSupport", path: "Sources/BridgeTestSupport"),
        .testTarget(name: "SpoolTests", dependencies: ["Spool", "BridgeCore", "BridgeTestSupport", "CSQLite"]),
        .testTarget(name: "NFCTests", dependencies: ["NFC", "Bridge", "BridgeCore", "Logging", "Spool", "BridgeTestSupport"]),
        .testTarget(name: "CLITests", dependencies: ["BridgeCore", "BridgeTestSupport"]),
    ],
    swiftLanguageModes: [.v6]
)
