import BridgeCore
import BridgeTestSupport
import Foundation
import Testing

/// `scanners --calibration-sheet` (issue 26): every code on the sheet decodes back to its exact text with zbar
/// (Debian `zbar-tools`), from the PNG directly and from the SVG as headless Chromium renders it; the SVG is
/// well-formed XML (Python's parser). The rendered sheet is kept as `.build/artifacts/calibration-sheet.png`.
@Suite(.serialized, .enabled(if: FileManager.default.isExecutableFile(atPath: "/usr/bin/zbarimg")))
struct CalibrationSheetTests {
    let binary = Products.path("plings-bridge")

    /// The sheet's texts, written out here: the calibration code holds every printable ASCII character.
    static let expected: Set<String> = [
        "PLCAL !\"#$%&'()*+,-./0123456789:;<=>?@ABCDEFGHIJKLMNOPQRSTUVWXYZ[\\]^_`abcdefghijklmnopqrstuvwxyz{|}~",
        "https://s.plings.io/?t=q&i=4kyQCd5tMDjJVW&p=4.2.3.3.6",
        "01095011010209171719050810ABCD1234\u{1D}21XYZ9876",
        "https://s.plings.io/?t=q&i=4kyQCd5tMDjJVWJKRzVT9ZpXw3LmQeTy4pEx7Zr2MnRead42KxQR7hbK2mXw"
            + "&p=4.2.3.3.6.7.8.9.10.11.12.13.14.15.16.17.18.19.20&cp=K7hbK2mXw9ZpXw3LmQeTy4pEx7Zr2",
    ]

    /// What zbar reads in `image`: one text per QR Code (`--raw`: the data only, one symbol per line).
    func decode(_ image: String) throws -> Set<String> {
        let result = try ProcessRunner.run("/usr/bin/zbarimg", ["-q", "--raw", image])
        #expect(result.status == 0, "\(result.stderr)")
        return Set(result.stdout.split(separator: "\n", omittingEmptySubsequences: true).map(String.init))
    }

    @Test func everyCodeOnThePNGDecodesToItsText() throws {
        let dir = TemporaryDirectory("sheet")
        defer { dir.remove() }
        let file = dir.file("sheet.png")
        let made = try ProcessRunner.run(binary, ["scanners", "--calibration-sheet", file])
        #expect(made.status == 0, "\(made.stderr)")
        #expect(try decode(file) == Self.expected)
    }

    @Test func theSVGIsWellFormedAndDecodesAsChromiumDrawsIt() throws {
        let dir = TemporaryDirectory("sheet")
        defer { dir.remove() }
        let svg = dir.file("sheet.svg")
        #expect(try ProcessRunner.run(binary, ["scanners", "--calibration-sheet", svg]).status == 0)
        let parsed = try ProcessRunner.run(
            "/usr/bin/python3", ["-c", "import sys, xml.etree.ElementTree as E; E.parse(sys.argv[1])", svg])
        #expect(parsed.status == 0, "not well-formed XML: \(parsed.stderr)")
        let artifacts = Products.packageRoot.appendingPathComponent(".build/artifacts").path
        try FileManager.default.createDirectory(atPath: artifacts, withIntermediateDirectories: true)
        let shot = artifacts + "/calibration-sheet.png"
        try? FileManager.default.removeItem(atPath: shot)
        let rendered = try ProcessRunner.run(
            "/usr/bin/chromium",
            [
                "--headless=new", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--window-size=800,1130",
                "--user-data-dir=\(dir.file("chromium"))", "--screenshot=\(shot)", "file://\(svg)",
            ], timeout: 120)
        #expect(FileManager.default.fileExists(atPath: shot), "\(rendered.stderr.suffix(500))")
        #expect(try decode(shot) == Self.expected)
        // A wrong format is refused before anything is written.
        let wrong = try ProcessRunner.run(binary, ["scanners", "--calibration-sheet", dir.file("sheet.pdf")])
        #expect(wrong.status == 2 && wrong.stderr.contains(".svg"))
    }
}
