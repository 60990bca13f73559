import BridgeCore
import Logging
import SourceKit

extension SourceKind {
    /// Reads from NFC tags through PC/SC readers.
    public static let nfc = SourceKind("nfc")
}

extension NFCConfig: SourceSection {}

extension ReadSourceModule {
    /// PC/SC NFC readers (`nfc` section) through pcscd, with good-read feedback after the commit.
    public static let nfc = ReadSourceModule(
        kind: .nfc, devices: "the NFC readers", section: \.nfc, alsoRestartsWhen: { $0.hosts != $1.hosts },
        make: { context in
            NFCSource(
                config: context.config.nfc, hosts: context.config.hosts, logger: context.logger,
                submit: context.submit, commit: context.committer, stateChanged: context.stateChanged)
        },
        doctor: { config, _ in NFCDoctor.checks(config: config.nfc) })
}
