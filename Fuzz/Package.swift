// swift-tools-version:6.0
// libFuzzer targets for every parser of outside bytes. A separate package so the default build of the
// product never tries to link them (they have no main: libFuzzer provides it). Build and run: scripts/fuzz.
import PackageDescription

let targets = [
    "fuzz-url", "fuzz-json", "fuzz-config", "fuzz-ndef", "fuzz-type2", "fuzz-type4", "fuzz-evdev",
    "fuzz-api-response", "fuzz-gps", "fuzz-fastread", "fuzz-serial",
    "fuzz-hid-descriptor", "fuzz-classic", "fuzz-type5", "fuzz-http-request",
]

let package = Package(
    name: "plings-bridge-fuzz",
    platforms: [.macOS(.v15)],
    dependencies: [.package(name: "plings-bridge", path: "..")],
    targets: [
        // What several targets share (a card scripted by the fuzz input).
        .target(
            name: "FuzzSupport", dependencies: [.product(name: "BridgeCore", package: "plings-bridge")],
            path: "Sources/FuzzSupport")
    ]
        + targets.map { name in
            .executableTarget(
                name: name,
                dependencies: [.product(name: "BridgeCore", package: "plings-bridge")]
                    + (["fuzz-type4", "fuzz-classic", "fuzz-type5"].contains(name) ? [.target(name: "FuzzSupport")] : [])
                    + (name == "fuzz-evdev" ? [.product(name: "HID", package: "plings-bridge")] : [])
                    + (name == "fuzz-serial" ? [.product(name: "Serial", package: "plings-bridge")] : [])
                    + (name == "fuzz-config"
                        ? [
                            .product(name: "HID", package: "plings-bridge"),
                            .product(name: "NFC", package: "plings-bridge"),
                            .product(name: "MQTT", package: "plings-bridge"),
                            .product(name: "PlingsAPI", package: "plings-bridge"),
                        ]
                        : []),
                path: "Sources/\(name)")
        },
    swiftLanguageModes: [.v6]
)
