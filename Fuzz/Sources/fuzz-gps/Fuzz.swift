import BridgeCore

/// What the libgps shim hands us: arbitrary field values (NaN, infinities, out-of-range modes and times)
/// through validation, the fix policy and the accuracy rule. A fix that comes out is always on the globe.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> Int32 {
    guard size >= 64 else { return 0 }
    let raw = UnsafeRawBufferPointer(start: data, count: size)
    func double(_ i: Int) -> Double { raw.loadUnaligned(fromByteOffset: 8 + i * 8, as: Double.self) }
    func int32(_ i: Int) -> Int32 { raw.loadUnaligned(fromByteOffset: i * 4, as: Int32.self) }
    let report = GPSReport.validate(
        kind: int32(0) & 3, flags: UInt32(bitPattern: int32(1)), mode: Int32(raw[56] % 5), latitude: double(0),
        longitude: double(1), eph: double(2), epx: double(3), epy: double(4), time: double(5),
        satellitesUsed: Int32(raw[57]), satellitesVisible: Int32(raw[58]))
    if let lat = report.latitude, let lon = report.longitude { precondition(abs(lat) <= 90 && abs(lon) <= 180) }
    if let accuracy = HorizontalAccuracy.from(eph: report.eph, epx: report.epx, epy: report.epy) {
        precondition(accuracy.isFinite && accuracy >= 0)
    }
    _ = FixPolicy(maxFixAge: 10, minMode: 2).update(for: report, receivedAt: 100)
    return 0
}
