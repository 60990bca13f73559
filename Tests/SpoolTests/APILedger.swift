import Spool

extension Spool {
    /// The API's delivery ledger, as the forwarder uses it.
    var api: DeliveryLedger { ledger(Spool.apiSink) }
}
