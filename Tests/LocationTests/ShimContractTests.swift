import BridgeCore
import CGPSShim
import Testing

/// The C shim and the Swift validator share flag bits and kinds by value: pin them so neither drifts alone.
struct ShimContractTests {
    @Test func flagBitsMatch() {
        #expect(GPSReport.Flag.mode == UInt32(PLINGS_GPS_HAS_MODE))
        #expect(GPSReport.Flag.latLon == UInt32(PLINGS_GPS_HAS_LATLON))
        #expect(GPSReport.Flag.time == UInt32(PLINGS_GPS_HAS_TIME))
        #expect(GPSReport.Flag.eph == UInt32(PLINGS_GPS_HAS_EPH))
        #expect(GPSReport.Flag.epx == UInt32(PLINGS_GPS_HAS_EPX))
        #expect(GPSReport.Flag.epy == UInt32(PLINGS_GPS_HAS_EPY))
        #expect(GPSReport.Flag.satellites == UInt32(PLINGS_GPS_HAS_SATELLITES))
        #expect(GPSReport.Flag.fromPoll == UInt32(PLINGS_GPS_FROM_POLL))
    }

    @Test func kindsMatch() {
        #expect(GPSReport.RawKind.other == Int32(PLINGS_GPS_OTHER))
        #expect(GPSReport.RawKind.tpv == Int32(PLINGS_GPS_TPV))
        #expect(GPSReport.RawKind.sky == Int32(PLINGS_GPS_SKY))
        #expect(GPSReport.RawKind.emptyPoll == Int32(PLINGS_GPS_POLL_EMPTY))
    }

    @Test func builtAgainstASupportedLibgps() {
        #expect(plings_gps_api_major() >= 9)
        #expect(MemoryLayout<plings_gps_report>.size == 72)
    }

    @Test func refusedConnectionIsReportedWithAReason() {
        var code: Int32 = 0
        let handle = plings_gps_open("127.0.0.1", "1", &code)
        #expect(handle == nil)
        #expect(code != 0)
        #expect(!String(cString: plings_gps_error_string(code)).isEmpty)
    }
}
