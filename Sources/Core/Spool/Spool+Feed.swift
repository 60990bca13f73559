import BridgeCore

/// Committed scans by sequence number, for consumers that show scans rather than deliver them (the local HTTP
/// interface's live feed and its `/scans`): no queue, no state written; a reader keeps its own position. Every
/// query walks the primary key from a position, so it costs the same on a spool of a million scans as on an empty
/// one.
extension Spool {
    /// Scans committed after `seq`, in capture order, at most `limit`.
    public func scans(after seq: Int, limit: Int) throws(SpoolError) -> [SinkItem] {
        try items(
            "SELECT \(Spool.columns), s.seq FROM \(Spool.recordSource) WHERE s.seq > ?1 ORDER BY s.seq LIMIT ?2", seq,
            limit)
    }

    /// The newest `count` scans, in capture order.
    public func newestScans(_ count: Int) throws(SpoolError) -> [SinkItem] {
        try items(
            "SELECT \(Spool.columns), s.seq FROM \(Spool.recordSource) WHERE ?1 = 0 ORDER BY s.seq DESC LIMIT ?2", 0,
            count
        ).reversed()
    }

    /// The highest sequence number ever given (0 before the first scan). Purged rows keep theirs taken: numbers are
    /// never given twice (AUTOINCREMENT), so a position stays valid across purges and restarts.
    public func lastSeq() throws(SpoolError) -> Int {
        try withConnection { db throws(SQLiteError) in
            try db.scalarInt("SELECT seq FROM sqlite_sequence WHERE name = 'scans'") ?? 0
        }
    }

    private func items(_ sql: String, _ seq: Int, _ limit: Int) throws(SpoolError) -> [SinkItem] {
        try withConnection { db throws(SQLiteError) in
            let statement = try db.prepare(sql)
            try statement.bind(1, seq)
            try statement.bind(2, max(0, limit))
            var items: [SinkItem] = []
            while try statement.step() {
                items.append(SinkItem(seq: statement.int(Spool.columnCount), record: Spool.record(statement)))
            }
            return items
        }
    }
}
