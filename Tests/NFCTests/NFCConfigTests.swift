import BridgeCore
import NFC
import Testing

/// The `nfc` section, which the NFC module owns: its keys arrive from the file and the environment, and a bad value
/// is refused with the key and the reason (the ACS manuals' units: 100 ms blink steps).
@Suite struct NFCConfigTests {
    @Test("config: nfc.profiles, nfc.feedback and nfc.silenceDetectBeep")
    func config() throws {
        var loader = ConfigLoader(sections: [NFCConfig.self])
        try loader.applyFile(
            Array(
                #"""
                {"nfc": {"profiles": [{"reader": "Virtual PCD 00 00", "profile": "acr122u"}],
                         "feedback": {"enabled": true, "accepted": "green 2x200", "failed": "off"},
                         "silenceDetectBeep": true}}
                """#.utf8), origin: "f")
        let nfc = loader.config.nfc
        #expect(nfc.profiles == [.init(reader: "Virtual PCD 00 00", profile: .acr122u)])
        #expect(nfc.feedback.accepted == .init(led: .green, beeps: 2, milliseconds: 200))
        #expect(nfc.feedback.unrecognized == .init(led: .orange, beeps: 2, milliseconds: 100))
        #expect(nfc.feedback.failed == .off)
        #expect(nfc.silenceDetectBeep)
        #expect(!BridgeConfig().nfc.silenceDetectBeep && BridgeConfig().nfc.feedback.enabled)

        try loader.applyEnvironment(["PLINGS_BRIDGE_NFC_FEEDBACK_ENABLED": "false"])
        #expect(!loader.config.nfc.feedback.enabled)
        for (json, message) in [
            (
                #"{"nfc":{"profiles":[{"reader":"X","profile":"acr999"}]}}"#,
                "config key 'nfc.profiles' in f[0].profile: expected one of acr122u, acr1252u, omnikey, acr1552u, identiv, plain"
            ),
            (
                #"{"nfc":{"profiles":[{"profile":"plain"}]}}"#,
                "config key 'nfc.profiles' in f[0].reader: expected a non-empty substring of a reader name"
            ),
            (
                #"{"nfc":{"profiles":[{"reader":"X","profile":"plain","beep":1}]}}"#,
                "config key 'nfc.profiles' in f[0]: unknown key 'beep'"
            ),
            (
                #"{"nfc":{"feedback":{"accepted":"green 1x50"}}}"#,
                "config key 'nfc.feedback.accepted' in f: the duration must be 100...2500 ms in steps of 100, got 50"
            ),
        ] {
            var fresh = ConfigLoader(sections: [NFCConfig.self])
            #expect(throws: ConfigError(message)) { try fresh.applyFile(Array(json.utf8), origin: "f") }
        }
    }
}
