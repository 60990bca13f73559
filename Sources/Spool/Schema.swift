/// The spool's schema history. Version N is reached by running `migrations[N-1]` on version N-1.
///
/// Never edit a released step: add a new one. `PRAGMA user_version` records the version reached, inside the
/// same transaction as the step, so a crash mid-migration leaves the previous version intact.
enum Schema {
    static let migrations: [String] = [
        // 1: the record of docs/contracts.md, "Spool record".
        """
        CREATE TABLE scans (
            seq INTEGER PRIMARY KEY AUTOINCREMENT,
            id TEXT NOT NULL UNIQUE,
            created_at TEXT NOT NULL,
            state TEXT NOT NULL CHECK (state IN ('pending', 'delivered', 'dead', 'unrecognized')),
            source_kind TEXT NOT NULL,
            device TEXT NOT NULL,
            uid TEXT,
            raw TEXT NOT NULL,
            input TEXT,
            attempts INTEGER NOT NULL DEFAULT 0,
            last_error TEXT,
            next_attempt_at TEXT,
            delivered_at TEXT,
            response TEXT
        );
        CREATE INDEX scans_state_seq ON scans (state, seq);
        """,
        // 2: the identifier as a column, so per-identifier ordering is an index lookup instead of JSON parsing,
        // and the time of the last attempt, so `spool stats` can name the latest error.
        """
        ALTER TABLE scans ADD COLUMN identifier TEXT;
        ALTER TABLE scans ADD COLUMN last_attempt_at TEXT;
        UPDATE scans SET identifier = json_extract(input, '$.identifier')
            WHERE input IS NOT NULL AND json_valid(input);
        CREATE INDEX scans_pending_identifier ON scans (identifier, seq) WHERE state = 'pending';
        """,
    ]

    static var currentVersion: Int { migrations.count }
}
