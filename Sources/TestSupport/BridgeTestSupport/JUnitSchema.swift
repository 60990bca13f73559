import Foundation

/// The JUnit schema Jenkins' xunit plugin documents (`junit-10.xsd`), as scripts/setup fetches it: two revisions,
/// each in a directory named by the plugin's commit. A report that a lab's Jenkins or GitLab reads must validate
/// against both.
public enum JUnitSchema {
    /// Where scripts/setup keeps the schema revisions.
    public static var directory: String {
        let cache =
            ProcessInfo.processInfo.environment["XDG_CACHE_HOME"]
            ?? (ProcessInfo.processInfo.environment["HOME"] ?? "/root") + "/.cache"
        return cache + "/plings-bridge/junit-schema"
    }

    /// Validates `file` against every revision with libxml2's XML Schema validator (python3-lxml); returns the
    /// schema files used. Throws with the validator's message when the file is not valid, or when the schema was
    /// never fetched.
    @discardableResult
    public static func validate(_ file: String) throws -> [String] {
        let revisions = ((try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []).sorted()
            .map { directory + "/" + $0 + "/junit-10.xsd" }.filter { FileManager.default.fileExists(atPath: $0) }
        guard !revisions.isEmpty else { throw RigError("no JUnit schema in \(directory): run scripts/setup") }
        let check = """
            import sys
            from lxml import etree
            document = etree.parse(sys.argv[1])
            for xsd in sys.argv[2:]:
                schema = etree.XMLSchema(etree.parse(xsd))
                if not schema.validate(document):
                    print(xsd + ": " + str(schema.error_log.last_error)); sys.exit(1)
            """
        let result = try ProcessRunner.run("/usr/bin/python3", ["-c", check, file] + revisions)
        guard result.status == 0 else { throw RigError("JUnit schema: \(result.stdout) \(result.stderr)") }
        return revisions
    }
}
