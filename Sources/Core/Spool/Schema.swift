/// The spool's schema history. Version N is reached by running `migrations[N-1]` on version N-1.
///
/// Never edit a released step: add a new one. `PRAGMA user_version` records the version reached, inside the
/// same transaction as the step, so a crash mid-migration leaves the previous version intact.
public enum Schema {
    public static let migrations: [String] = [
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
        // 3: delivery state per extra sink (MQTT), apart from the API's `state`, so one sink never holds the other
        // back. A sink registered in `sinks` gets a queue row for every scan committed afterwards, by any process
        // (the trigger), in the same transaction as the scan. Queue rows go when their scan is purged; a scan
        // still queued for a sink is not purged.
        """
        CREATE TABLE sinks (
            name TEXT PRIMARY KEY,
            enabled INTEGER NOT NULL DEFAULT 1,
            last_error TEXT,
            last_error_at TEXT
        );
        CREATE TABLE sink_queue (
            sink TEXT NOT NULL,
            seq INTEGER NOT NULL,
            state TEXT NOT NULL CHECK (state IN ('pending', 'delivered', 'refused')),
            delivered_at TEXT,
            PRIMARY KEY (seq, sink)
        ) WITHOUT ROWID;
        CREATE INDEX sink_queue_pending ON sink_queue (sink, seq) WHERE state = 'pending';
        CREATE TRIGGER scans_enqueue_for_sinks AFTER INSERT ON scans BEGIN
            INSERT INTO sink_queue (sink, seq, state) SELECT name, NEW.seq, 'pending' FROM sinks WHERE enabled = 1;
        END;
        CREATE TRIGGER scans_dequeue_for_sinks AFTER DELETE ON scans BEGIN
            DELETE FROM sink_queue WHERE seq = OLD.seq;
        END;
        """,
        // 4: counts per state kept by triggers, so `spool stats`, `status` and the metrics read a handful of rows
        // instead of counting a year of scans (a COUNT(*) walks every index entry: ~0.1 s at 1,000,000). The
        // triggers run in the transaction that changes the scan, so the counts are exact whoever writes. The
        // commit of a pending scan, the hot path, writes no extra page: the pending count is the scans ever
        // inserted (`sqlite_sequence`, which AUTOINCREMENT updates anyway) plus the `pending` row here, which
        // every other insert, change of state and delete adjusts (`Spool.stats`). A sink's delivered and refused
        // counts change where its queue rows change (never on a commit); its pending count is its partial index.
        // And the delivery attempts recorded by any process (`run`'s forwarder and `scan`'s one attempt), with
        // those that left the scan pending (a failure to retry), for the metrics; counted from here on.
        """
        CREATE TABLE scan_counts (state TEXT PRIMARY KEY, n INTEGER NOT NULL) WITHOUT ROWID;
        INSERT INTO scan_counts (state, n) SELECT state, COUNT(*) FROM scans WHERE state != 'pending' GROUP BY state;
        INSERT INTO scan_counts (state, n) VALUES ('pending', (SELECT COUNT(*) FROM scans WHERE state = 'pending')
            - coalesce((SELECT seq FROM sqlite_sequence WHERE name = 'scans'), 0));
        CREATE TRIGGER scans_count_insert AFTER INSERT ON scans WHEN NEW.state != 'pending' BEGIN
            INSERT INTO scan_counts (state, n) VALUES (NEW.state, 1) ON CONFLICT (state) DO UPDATE SET n = n + 1;
            UPDATE scan_counts SET n = n - 1 WHERE state = 'pending';
        END;
        CREATE TRIGGER scans_count_delete AFTER DELETE ON scans BEGIN
            UPDATE scan_counts SET n = n - 1 WHERE state = OLD.state;
        END;
        CREATE TRIGGER scans_count_state AFTER UPDATE OF state ON scans WHEN OLD.state IS NOT NEW.state BEGIN
            UPDATE scan_counts SET n = n - 1 WHERE state = OLD.state;
            INSERT INTO scan_counts (state, n) VALUES (NEW.state, 1) ON CONFLICT (state) DO UPDATE SET n = n + 1;
        END;
        CREATE TABLE delivery_totals (name TEXT PRIMARY KEY, n INTEGER NOT NULL) WITHOUT ROWID;
        INSERT INTO delivery_totals (name, n) VALUES ('attempts', 0), ('failures', 0);
        CREATE TRIGGER scans_count_attempts AFTER UPDATE OF attempts ON scans WHEN NEW.attempts > OLD.attempts BEGIN
            UPDATE delivery_totals SET n = n + NEW.attempts - OLD.attempts
                WHERE name = 'attempts' OR (name = 'failures' AND NEW.state = 'pending');
        END;
        CREATE TABLE sink_counts (sink TEXT NOT NULL, state TEXT NOT NULL, n INTEGER NOT NULL,
            PRIMARY KEY (sink, state)) WITHOUT ROWID;
        INSERT INTO sink_counts (sink, state, n)
            SELECT sink, state, COUNT(*) FROM sink_queue WHERE state != 'pending' GROUP BY sink, state;
        CREATE TRIGGER sink_queue_count_delete AFTER DELETE ON sink_queue WHEN OLD.state != 'pending' BEGIN
            UPDATE sink_counts SET n = n - 1 WHERE sink = OLD.sink AND state = OLD.state;
        END;
        CREATE TRIGGER sink_queue_count_state AFTER UPDATE OF state ON sink_queue
            WHEN OLD.state IS NOT NEW.state BEGIN
            UPDATE sink_counts SET n = n - 1 WHERE sink = OLD.sink AND state = OLD.state;
            INSERT INTO sink_counts (sink, state, n) SELECT NEW.sink, NEW.state, 1 WHERE NEW.state != 'pending'
                ON CONFLICT (sink, state) DO UPDATE SET n = n + 1;
        END;
        """,
        // 5: the AIM symbology identifier a scanner gave apart from the data (HID POS). Adding a nullable column
        // rewrites no row, so a year of scans migrates in milliseconds.
        """
        ALTER TABLE scans ADD COLUMN symbology TEXT;
        """,
        // 6: which scans were sent together in one batched request, under which Idempotency-Key, while that
        // request's answer is outstanding (docs/contracts.md, "Batched request"): a retry sends the same members
        // under the same key, even after a restart. A table of its own, holding only the batches in progress,
        // so the migration touches no scan and the hot path writes nothing more.
        """
        CREATE TABLE batch_members (
            scan_id TEXT PRIMARY KEY,
            batch TEXT NOT NULL,
            size INTEGER NOT NULL
        ) WITHOUT ROWID;
        CREATE INDEX batch_members_batch ON batch_members (batch);
        """,
        // 7: the verdict of an NTAG's originality signature (`nfc.checkOriginality`): 'true', 'false' or
        // 'unknown'; null when not checked. A nullable column: no row is rewritten.
        """
        ALTER TABLE scans ADD COLUMN genuine TEXT;
        """,
        // 8: one delivery model. The API becomes a sink of `sink_queue` like MQTT (`Spool.apiSink`): its state,
        // attempts, backoff, last error and kept answer move to its queue row, `scans` keeps the read. A sink
        // marked `recognized_only` (the API) is queued only scans with an input: an unrecognized read has
        // nothing to send. What moves per existing scan is small (state, times, attempts; the identifier, error
        // and answer only where a scan may still be sent), and no `scans` row is rewritten: the old columns keep
        // what they held, and an old delivered scan's answer is read from `scans.response` (`Spool.columns`).
        // The API's delivered and refused counts start from the exact ones of schema 4; its pending count is
        // derived (`Spool.stats`). The indexes that served the API's state leave `scans` for the queue: one index
        // by sink and state (purge, retry, listing by state) and one per pending identifier (delivery order).
        """
        ALTER TABLE sinks ADD COLUMN recognized_only INTEGER NOT NULL DEFAULT 0;
        ALTER TABLE sink_queue ADD COLUMN identifier TEXT;
        ALTER TABLE sink_queue ADD COLUMN attempts INTEGER NOT NULL DEFAULT 0;
        ALTER TABLE sink_queue ADD COLUMN last_error TEXT;
        ALTER TABLE sink_queue ADD COLUMN next_attempt_at TEXT;
        ALTER TABLE sink_queue ADD COLUMN last_attempt_at TEXT;
        ALTER TABLE sink_queue ADD COLUMN response TEXT;
        INSERT INTO sinks (name, enabled, recognized_only) VALUES ('api', 1, 1);
        INSERT INTO sink_queue (sink, seq, state, delivered_at, attempts, identifier, last_error, next_attempt_at,
                                last_attempt_at, response)
            SELECT 'api', seq, CASE state WHEN 'dead' THEN 'refused' ELSE state END, delivered_at, attempts,
                CASE WHEN state = 'delivered' THEN NULL ELSE identifier END,
                CASE WHEN state = 'delivered' THEN NULL ELSE last_error END,
                CASE WHEN state = 'pending' THEN next_attempt_at END,
                CASE WHEN state = 'delivered' THEN NULL ELSE last_attempt_at END,
                CASE WHEN state = 'delivered' THEN NULL ELSE response END
            FROM scans WHERE state != 'unrecognized' ORDER BY seq;
        INSERT INTO sink_counts (sink, state, n)
            SELECT 'api', CASE state WHEN 'dead' THEN 'refused' ELSE state END, n FROM scan_counts
            WHERE state IN ('delivered', 'dead') AND n != 0;
        DROP INDEX scans_state_seq;
        DROP INDEX scans_pending_identifier;
        CREATE INDEX scans_unrecognized ON scans (seq) WHERE state = 'unrecognized';
        DROP INDEX sink_queue_pending;
        CREATE INDEX sink_queue_state ON sink_queue (sink, state, seq);
        CREATE INDEX sink_queue_pending_identifier ON sink_queue (sink, identifier, seq) WHERE state = 'pending';
        DROP TRIGGER scans_enqueue_for_sinks;
        CREATE TRIGGER scans_enqueue_for_sinks AFTER INSERT ON scans BEGIN
            INSERT INTO sink_queue (sink, seq, state, identifier)
                SELECT name, NEW.seq, 'pending', NEW.identifier FROM sinks
                WHERE enabled = 1 AND (recognized_only = 0 OR NEW.state = 'pending');
        END;
        DROP TRIGGER scans_count_attempts;
        CREATE TRIGGER sink_queue_count_attempts AFTER UPDATE OF attempts ON sink_queue
            WHEN NEW.sink = 'api' AND NEW.attempts > OLD.attempts BEGIN
            UPDATE delivery_totals SET n = n + NEW.attempts - OLD.attempts
                WHERE name = 'attempts' OR (name = 'failures' AND NEW.state = 'pending');
        END;
        """,
        // 9: a batch in progress belongs to the sink that sent it. The delivery ledger (claims, leases, per-scan
        // backoff, batches: `DeliveryLedger`) is kept by sink name, so two sinks on it may each have a batch of the
        // same scan awaiting an answer. The table holds only the batches in progress (a handful of rows), so the
        // copy is instant; every batch of a spool before it was the API's.
        """
        CREATE TABLE batch_members_by_sink (
            sink TEXT NOT NULL,
            scan_id TEXT NOT NULL,
            batch TEXT NOT NULL,
            size INTEGER NOT NULL,
            PRIMARY KEY (sink, scan_id)
        ) WITHOUT ROWID;
        INSERT INTO batch_members_by_sink (sink, scan_id, batch, size)
            SELECT 'api', scan_id, batch, size FROM batch_members;
        DROP TABLE batch_members;
        ALTER TABLE batch_members_by_sink RENAME TO batch_members;
        CREATE INDEX batch_members_batch ON batch_members (sink, batch);
        """,
        // 10: a scan's state is its sinks' (issue 56): `scans.state` is the scan's delivery over every sink that
        // queued it, kept by triggers in the transaction that changes a queue row, so every process sees one state
        // and the counts of schema 4 stay exact and flat. `pending` while an enabled sink still owes it; else `dead`
        // when a sink refused it, `delivered` when every sink that queued it took it; `kept` when no enabled sink
        // queued it (the spool is its destination); `unrecognized` stays what the parse said. `delivered_at` is when
        // it was settled (delivered or dead), for the retention, which follows every sink (`purgeDelivered`). A
        // queue row's change that leaves the scan's state as it was (MQTT's ack of a scan the API still owes)
        // writes nothing to `scans`. A scan already dead settles at the migration: dead scans were never pruned
        // before, so each gets a whole retention from the upgrade on for an operator to revive it.
        // 'kept' joins the CHECK of `scans.state` by `declarationEdits` (run before this text). Enabling or disabling
        // a sink settles again the scans it owes: `run` disables the API's queue when no `api.url` is set, as it does
        // every sink's. Settling every existing scan rewrites each recognized row once (docs/benchmarks.md).
        """
        CREATE TRIGGER sink_queue_settles_scan AFTER UPDATE OF state ON sink_queue BEGIN
            UPDATE scans SET state = v.state, delivered_at = CASE WHEN v.state IN ('delivered', 'dead') THEN coalesce(
                    CASE WHEN NEW.state != 'pending' THEN coalesce(NEW.delivered_at, NEW.last_attempt_at) END,
                    strftime('%Y-%m-%dT%H:%M:%fZ', 'now')) END
            FROM (SELECT CASE
                    WHEN EXISTS (SELECT 1 FROM sink_queue AS q JOIN sinks AS k ON k.name = q.sink
                                 WHERE q.seq = NEW.seq AND q.state = 'pending' AND k.enabled = 1) THEN 'pending'
                    WHEN EXISTS (SELECT 1 FROM sink_queue AS q WHERE q.seq = NEW.seq AND q.state = 'refused') THEN 'dead'
                    WHEN EXISTS (SELECT 1 FROM sink_queue AS q WHERE q.seq = NEW.seq AND q.state = 'delivered')
                        THEN 'delivered'
                    ELSE 'kept' END AS state) AS v
            WHERE scans.seq = NEW.seq AND scans.state != 'unrecognized' AND scans.state != v.state;
        END;
        CREATE TRIGGER sinks_settle_scans AFTER UPDATE OF enabled ON sinks WHEN OLD.enabled IS NOT NEW.enabled BEGIN
            UPDATE sink_queue SET state = state WHERE sink = NEW.name AND state = 'pending';
        END;
        UPDATE scans SET (state, delivered_at) = (
            SELECT v.state, CASE v.state
                WHEN 'delivered' THEN coalesce(v.at, scans.delivered_at, scans.created_at)
                WHEN 'dead' THEN strftime('%Y-%m-%dT%H:%M:%fZ', 'now') END
            FROM (SELECT CASE
                    WHEN EXISTS (SELECT 1 FROM sink_queue AS q JOIN sinks AS k ON k.name = q.sink
                                 WHERE q.seq = scans.seq AND q.state = 'pending' AND k.enabled = 1) THEN 'pending'
                    WHEN EXISTS (SELECT 1 FROM sink_queue AS q WHERE q.seq = scans.seq AND q.state = 'refused')
                        THEN 'dead'
                    WHEN EXISTS (SELECT 1 FROM sink_queue AS q WHERE q.seq = scans.seq AND q.state = 'delivered')
                        THEN 'delivered'
                    ELSE 'kept' END AS state,
                (SELECT max(coalesce(q.delivered_at, q.last_attempt_at)) FROM sink_queue AS q
                    WHERE q.seq = scans.seq AND q.state != 'pending') AS at) AS v)
        WHERE state != 'unrecognized';
        CREATE INDEX scans_settled ON scans (seq) WHERE state IN ('delivered', 'dead');
        """,
        // 11: what a read's time rests on (issue 59, `ClockBasis`): the boot it was made in, `CLOCK_BOOTTIME` at
        // the read, and whether the wall clock was trusted then (1) or not (0). NULL for reads committed before.
        // Adding nullable columns rewrites no row (sqlite.org/lang_altertable.html).
        """
        ALTER TABLE scans ADD COLUMN boot_id TEXT;
        ALTER TABLE scans ADD COLUMN boot_time REAL;
        ALTER TABLE scans ADD COLUMN clock_trusted INTEGER;
        """,
        // 12: the settle of schema 10, the same rule, without `UPDATE ... FROM`. SQLite builds a FROM subquery of
        // an UPDATE as a temporary table on each run, whose memory glibc hands back and takes again every time
        // (two brk calls a queue row): the settle cost ~40 µs a scan against ~7 µs now, measured with the sqlite3
        // shell on 100,000 scans in requests of 1,000 (docs/benchmarks.md, issue 56). The verdict is now a scalar
        // subquery, written twice (the value and the "it changes" test), which SQLite runs as a plain expression.
        """
        DROP TRIGGER sink_queue_settles_scan;
        CREATE TRIGGER sink_queue_settles_scan AFTER UPDATE OF state ON sink_queue BEGIN
            UPDATE scans SET (state, delivered_at) = (
                SELECT v, CASE WHEN v IN ('delivered', 'dead') THEN coalesce(
                    CASE WHEN NEW.state != 'pending' THEN coalesce(NEW.delivered_at, NEW.last_attempt_at) END,
                    strftime('%Y-%m-%dT%H:%M:%fZ', 'now')) END
                FROM (SELECT \(settledState) AS v))
            WHERE scans.seq = NEW.seq AND scans.state != 'unrecognized' AND scans.state IS NOT \(settledState);
        END;
        """,
    ]

    /// A scan's state from its queue rows (schema 10's rule), for the scan of the queue row `NEW`: `pending` while
    /// an enabled sink owes it, else `dead` when one refused it, `delivered` when one took it, else `kept`.
    private static let settledState = """
        (SELECT CASE
            WHEN EXISTS (SELECT 1 FROM sink_queue AS q JOIN sinks AS k ON k.name = q.sink
                         WHERE q.seq = NEW.seq AND q.state = 'pending' AND k.enabled = 1) THEN 'pending'
            WHEN EXISTS (SELECT 1 FROM sink_queue AS q WHERE q.seq = NEW.seq AND q.state = 'refused') THEN 'dead'
            WHEN EXISTS (SELECT 1 FROM sink_queue AS q WHERE q.seq = NEW.seq AND q.state = 'delivered')
                THEN 'delivered'
            ELSE 'kept' END)
        """

    /// Changes of a table's declared constraints that SQLite's ALTER TABLE cannot make, by the procedure SQLite
    /// documents for loosening a CHECK (sqlite.org/lang_altertable.html, "Making Other Kinds Of Table Schema
    /// Changes": the table's text in `sqlite_schema` rewritten, the schema version raised, in the step's
    /// transaction): step index -> table, the text replaced, its replacement. Every existing row satisfies the
    /// looser check, so no row is read or rewritten.
    public static let declarationEdits: [Int: (table: String, from: String, to: String)] = [
        9: ("scans", "'unrecognized'))", "'unrecognized', 'kept'))")
    ]

    public static var currentVersion: Int { migrations.count }
}
