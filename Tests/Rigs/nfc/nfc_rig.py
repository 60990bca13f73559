#!/usr/bin/python3
"""NFC test rig: pcscd + vsmartcard-vpcd + our own NFC tag emulator.

One process that the Swift tests spawn and drive line by line over stdin.
See README.md beside this file for the protocol, the ATRs, the fault modes and
the timings. In short:

    nfc_rig.py [--no-pcscd] [--verbose] [--log PATH] [--pcscd-log PATH] [--pcscd-debug]

prints `READY` once pcscd is up, then answers every stdin line with exactly one
line, `OK ...` or `ERR message`, after the command took effect:

    tap READER KIND UID_HEX NDEF_HEX|- [key=value ...]
    remove READER | hold SECONDS | apdus READER | status
    kill-pcscd [TERM|KILL] | start-pcscd | quit

Nothing else is ever written to stdout; logs go to stderr (or --log PATH).
"""

import argparse
import os
import select
import signal
import socket
import struct
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))

# --- optional python3-virtualsmartcard base class ------------------------------------------------
# Debian installs the package one level too deep, and it imports a `sha` module that Python 3 no
# longer has (our sha.py shim, in HERE, provides it). The cards below subclass its SmartcardOS
# (getATR/powerUp/powerDown/reset/execute), so they also run under the stock VirtualICC; the
# transport is our own (see Slot) for TCP_QUICKACK, two readers in one process, removal and
# fault injection.
VSC_PATH = "/usr/lib/python3/site-packages/virtualsmartcard"
if HERE not in sys.path:
    sys.path.insert(0, HERE)
if os.path.isdir(VSC_PATH) and VSC_PATH not in sys.path:
    sys.path.append(VSC_PATH)
try:
    from virtualsmartcard.VirtualSmartcard import SmartcardOS  # noqa: E402
    HAVE_VSC = True
except Exception:  # pragma: no cover - the rig works without the package
    HAVE_VSC = False

    class SmartcardOS(object):
        def getATR(self):
            return b""

        def powerUp(self):
            pass

        def powerDown(self):
            pass

        def reset(self):
            pass

        def execute(self, msg):
            return b""


# --- constants -----------------------------------------------------------------------------------
VPCD_HOST = "127.0.0.1"
VPCD_PORTS = (35963, 35964)  # /etc/reader.conf.d/vpcd: CHANNELID 0x8C7B, two slots
READER_NAMES = ("Virtual PCD 00 00", "Virtual PCD 00 01")
PCSCD_BIN = "/usr/sbin/pcscd"
PCSCD_RUN = "/run/pcscd"
PCSCD_COMM = os.path.join(PCSCD_RUN, "pcscd.comm")
PCSCD_PID = os.path.join(PCSCD_RUN, "pcscd.pid")

CTRL_OFF, CTRL_ON, CTRL_RESET, CTRL_ATR = 0, 1, 2, 4
SETTLE = 0.02  # after pcscd read the ATR (tap) or our EOF (remove), before answering OK

SW_OK = b"\x90\x00"
SW_NOT_FOUND = b"\x6a\x82"
SW_FUNC_NOT_SUPPORTED = b"\x6a\x81"
SW_WRONG_P1P2 = b"\x6a\x86"
SW_WRONG_LENGTH = b"\x67\x00"
SW_INS_NOT_SUPPORTED = b"\x6d\x00"
SW_CLA_NOT_SUPPORTED = b"\x6e\x00"
SW_NO_CURRENT_EF = b"\x69\x86"
SW_OFFSET_OUTSIDE = b"\x6b\x00"
SW_READER_FAIL = b"\x63\x00"

NDEF_AID = bytes.fromhex("D2760000850101")

# NFC Forum URI record prefix codes (URI RTD, table 3).
URI_PREFIXES = [
    "", "http://www.", "https://www.", "http://", "https://", "tel:", "mailto:",
    "ftp://anonymous:anonymous@", "ftp://ftp.", "ftps://", "sftp://", "smb://", "nfs://",
    "ftp://", "dav://", "news:", "telnet://", "imap:", "rtsp://", "urn:", "pop:", "sip:",
    "sips:", "tftp:", "btspp://", "btl2cap://", "btgoep://", "tcpobex://", "irdaobex://",
    "file://", "urn:epc:id:", "urn:epc:tag:", "urn:epc:pat:", "urn:epc:raw:", "urn:epc:",
    "urn:nfc:",
]

_log_file = sys.stderr
_verbose = False
_log_lock = threading.Lock()


def log(msg, debug=False):
    if debug and not _verbose:
        return
    with _log_lock:
        try:
            _log_file.write("%s nfc_rig: %s\n" % (time.strftime("%H:%M:%S"), msg))
            _log_file.flush()
        except (OSError, ValueError):
            pass


class RigError(Exception):
    """A command failed; the message becomes `ERR message`."""


class Quit(Exception):
    """The `quit` command."""


# --- helpers -------------------------------------------------------------------------------------
def xor_all(data):
    x = 0
    for b in data:
        x ^= b
    return x


def with_tck(atr_without_tck):
    """Append TCK: XOR of every byte from T0 (index 1) to the last historical byte."""
    return atr_without_tck + bytes([xor_all(atr_without_tck[1:])])


def pcsc_part3_atr(card_name):
    """PC/SC part 3 ATR of a contactless storage card (ISO 14443 A part 3, standard SS=03)."""
    hist = bytes([0x80, 0x4F, 0x0C, 0xA0, 0x00, 0x00, 0x03, 0x06, 0x03]) + card_name + b"\x00" * 4
    return with_tck(bytes([0x3B, 0x80 | len(hist), 0x80, 0x01]) + hist)


def iso14443_4_atr(historical=b""):
    """PC/SC part 3 ATR of an ISO 14443-4 (ISO-DEP) card: 3B 8n 80 01 <historical> TCK."""
    return with_tck(bytes([0x3B, 0x80 | len(historical), 0x80, 0x01]) + historical)


def pcsc_part3_atr_15693(card_name):
    """PC/SC part 3 ATR of an ISO 15693 storage card (standard SS=0B, ISO 15693 part 3)."""
    hist = bytes([0x80, 0x4F, 0x0C, 0xA0, 0x00, 0x00, 0x03, 0x06, 0x0B]) + card_name + b"\x00" * 4
    return with_tck(bytes([0x3B, 0x80 | len(hist), 0x80, 0x01]) + hist)


ATR_ULTRALIGHT = pcsc_part3_atr(b"\x00\x03")  # NTAG21x reports as Mifare Ultralight
ATR_MIFARE_1K = pcsc_part3_atr(b"\x00\x01")
ATR_MIFARE_4K = pcsc_part3_atr(b"\x00\x02")
ATR_ICODE_SLIX = pcsc_part3_atr_15693(b"\x00\x14")  # card name 0014 "ICODESLI" (PC/SC Part 3 supplement)
ATR_ISO15693 = pcsc_part3_atr_15693(b"\x00\x00")  # an ST25DV: not in the card-name table, "no information given"
ATR_TYPE4 = iso14443_4_atr(b"\x80")  # 3B 81 80 01 80 80: DESFire / NTAG424 style
ATR_PHONE = iso14443_4_atr(b"")  # 3B 80 80 01 01: Android HCE behind an ACR122U


def parse_hex(text, what):
    t = text.replace(":", "").replace(" ", "")
    if len(t) % 2:
        raise RigError("%s: odd number of hex digits" % what)
    try:
        return bytes.fromhex(t)
    except ValueError:
        raise RigError("%s: not hex: %r" % (what, text))


def uri_record(url):
    """A short NDEF message with one URI record (TNF 1, type U), with the longest prefix code."""
    code, rest = 0, url
    for i, p in enumerate(URI_PREFIXES):
        if p and url.startswith(p) and len(p) > len(URI_PREFIXES[code]):
            code, rest = i, url[len(p):]
    payload = bytes([code]) + rest.encode("utf-8")
    if len(payload) < 256:
        return bytes([0xD1, 0x01, len(payload)]) + b"U" + payload
    return bytes([0xC1, 0x01]) + struct.pack(">I", len(payload)) + b"U" + payload


def ndef_tlv(message):
    """NDEF message TLV (03, 1- or 3-byte length) followed by the terminator TLV FE."""
    if len(message) < 0xFF:
        return bytes([0x03, len(message)]) + message + b"\xfe"
    return b"\x03\xff" + struct.pack(">H", len(message)) + message + b"\xfe"


# --- cards ---------------------------------------------------------------------------------------
class Card(SmartcardOS):
    """What a PC/SC part 3 reader (ACR122U-like) with a tag in its field answers."""

    kind = "?"

    def __init__(self, uid, opts):
        self.uid = uid
        self.faults = opts["faults"]
        self.garbage_sw = opts["sw"]
        self.atr = opts["atr"]

    # SmartcardOS interface
    def getATR(self):
        return self.atr

    def powerUp(self):
        self.on_power()

    def powerDown(self):
        self.on_power()

    def reset(self):
        self.on_power()

    def on_power(self):
        pass

    def execute(self, apdu):
        if len(apdu) < 4:
            return SW_WRONG_LENGTH
        if apdu[0] == 0xFF and apdu[1] == 0xCA:
            return self.get_data(apdu)
        return self.command(apdu)

    def get_data(self, apdu):
        """FF CA P1 00 Le: P1=00 UID (what the bridge uses); P1=01 ATS (not emulated)."""
        if "no_uid" in self.faults:
            return SW_FUNC_NOT_SUPPORTED
        if apdu[2] != 0x00 or apdu[3] != 0x00:
            return SW_FUNC_NOT_SUPPORTED if apdu[2] == 0x01 else SW_WRONG_P1P2
        le = apdu[4] if len(apdu) >= 5 else 0
        if le and le < len(self.uid):
            return bytes([0x6C, len(self.uid)])
        return self.uid + SW_OK

    def command(self, apdu):
        return SW_FUNC_NOT_SUPPORTED if apdu[0] == 0xFF else SW_CLA_NOT_SUPPORTED

    @staticmethod
    def storage_read(apdu, default_le):
        """PC/SC Part 3 READ BINARY `FF B0 P1 P2 Le` of a storage card: (address P1P2, Le, None), Le 00 taken as
        `default_le`; or (None, None, the status word refusing anything else)."""
        if apdu[0] != 0xFF:
            return None, None, SW_CLA_NOT_SUPPORTED
        if apdu[1] != 0xB0:
            return None, None, SW_FUNC_NOT_SUPPORTED
        if len(apdu) != 5:
            return None, None, SW_WRONG_LENGTH
        return (apdu[2] << 8) | apdu[3], apdu[4] or default_le, None

    def read_reply(self, data):
        """Apply the read faults to a successful read answer."""
        if "garbage_sw" in self.faults:
            return self.garbage_sw
        if "short4" in self.faults:
            data = data[:4]
        return data + SW_OK


class Type2Card(Card):
    """NTAG213/215/216 (and `blank`), and a MIFARE Ultralight EV1 MF0UL21 (`ul21`), behind an ACR122U: FF CA for
    the UID, FF B0 00 PP LL reads; through the pass-through FAST_READ, READ, READ_SIG and GET_VERSION."""

    # kind: (total pages, CC, GET_VERSION answer); user memory = pages 4 .. total-6 (NTAG21x and MF0ULx1 data
    # sheets: 5 configuration pages at the end). The GET_VERSION answers are the data sheets'.
    MODELS = {
        "ntag213": (45, "E1101200", "0004040201000F03"),  # 144 data bytes declared, 144 user bytes
        "ntag215": (135, "E1103E00", "0004040201001103"),  # 496 declared, 504 user bytes
        "ntag216": (231, "E1106D00", "0004040201001303"),  # 872 declared, 888 user bytes
        "blank": (45, "E1101200", "0004040201000F03"),  # an NTAG213 whose data area is all zeros
        "ul21": (41, "E1101000", "0004030101000E03"),  # Ultralight EV1 MF0UL21: 128 user bytes, CC as formatted
    }

    def __init__(self, kind, uid, image, opts):
        Card.__init__(self, uid, opts)
        self.kind = kind
        # What READ_SIG (3C 00) answers: NXP's 32-byte originality signature over the UID (sig=HEX), or, as a
        # clone without one answers, 32 zero bytes.
        self.signature = opts.get("sig") or bytes(32)
        pages, cc, version = self.MODELS[kind]
        # What GET_VERSION (60) answers: the model's, or `version=HEX` (a clone's), or none (`version=none`: a NAK).
        self.version = opts["version"] if "version" in opts else bytes.fromhex(version)
        if len(uid) != 7:
            raise RigError("%s needs a 7-byte UID, got %d bytes" % (kind, len(uid)))
        cc = opts["cc"] if opts["cc"] is not None else bytes.fromhex(cc)
        if len(cc) != 4:
            raise RigError("cc= must be 4 bytes for a Type 2 tag")
        self.user_bytes = (pages - 4 - 5) * 4
        if image is None:
            image = b"" if kind == "blank" else b"\x03\x00\xfe"  # factory state: empty NDEF
        if len(image) > self.user_bytes:
            raise RigError("data area image is %d bytes, %s holds %d" % (len(image), kind,
                                                                        self.user_bytes))
        u = uid
        mem = bytearray()
        mem += bytes([u[0], u[1], u[2], 0x88 ^ u[0] ^ u[1] ^ u[2]])  # page 0: UID0-2, BCC0
        mem += u[3:7]  # page 1: UID3-6
        mem += bytes([u[3] ^ u[4] ^ u[5] ^ u[6], 0x48, 0x00, 0x00])  # page 2: BCC1, int, lock
        mem += cc  # page 3: capability container
        mem += image + b"\x00" * (self.user_bytes - len(image))
        mem += bytes.fromhex("000000BD")  # dynamic lock bytes, RFUI
        mem += bytes.fromhex("040000FF")  # CFG0: MIRROR, RFUI, MIRROR_PAGE, AUTH0
        mem += bytes.fromhex("00050000")  # CFG1: ACCESS, RFUI
        mem += b"\x00" * 8  # PWD and PACK read as zeros
        assert len(mem) == pages * 4
        self.mem = bytes(mem)
        self.pages = pages
        self.atr = opts["atr"] or ATR_ULTRALIGHT

    def command(self, apdu):
        page, le, refusal = self.storage_read(apdu, 16)
        if refusal:
            return refusal
        if le > 16:
            return SW_WRONG_LENGTH
        if page >= self.pages:
            return SW_READER_FAIL  # the tag NAKs READ of a page that does not exist
        # NTAG READ returns 4 pages and rolls over to page 0 past the last page.
        data = bytes(self.mem[((page + i // 4) % self.pages) * 4 + i % 4] for i in range(le))
        return self.read_reply(data)


class MifareClassicCard(Card):
    """MIFARE Classic 1K/4K behind a PC/SC Part 3 reader: GET UID, LOAD KEYS (FF 82) into volatile slots,
    GENERAL AUTHENTICATE (FF 86, and the ACR122U's older FF 88) with key A per sector, READ BINARY (FF B0) of one
    16-byte block of the authenticated sector; anything else refused. A failed authentication or a read outside
    the authenticated sector gives 63 00, as the ACR122U answers.

    Without a message the card is as it leaves the factory: transport key A FF..FF everywhere, no MAD. With
    `url=`/`ndef=` it is formatted as the NFC Forum maps NDEF onto MIFARE Classic (NXP AN1305) over the MAD
    (NXP AN10787): MAD1 in sector 0 (public MAD key A A0A1A2A3A4A5; CRC-8, info byte 01, application ID E1 03 for
    every other sector; its trailer with AN10787's access bits 78 77 88 and General Purpose Byte C1, MAD1, or for
    4K C2, MAD2), for 4K MAD2 in sector 16, NDEF sectors with the public key A D3F7D3F7D3F7 holding the
    NDEF TLV and a terminator in their data blocks. `classic=badcrc` spoils the MAD's CRC, `classic=private` gives
    the NDEF sectors a private key A.
    """

    MAD_KEY = bytes.fromhex("A0A1A2A3A4A5")
    NDEF_KEY = bytes.fromhex("D3F7D3F7D3F7")
    TRANSPORT_KEY = b"\xff" * 6

    def __init__(self, kind, uid, message, opts):
        Card.__init__(self, uid, opts)
        if len(uid) not in (4, 7):
            raise RigError("%s needs a 4- or 7-byte UID" % kind)
        self.kind = kind
        four_k = kind == "mifare4k"
        self.atr = opts["atr"] or (ATR_MIFARE_4K if four_k else ATR_MIFARE_1K)
        self.sectors = 40 if four_k else 16
        self.blocks = 256 if four_k else 64
        self.mem = [bytearray(16) for _ in range(self.blocks)]
        self.keys = [self.TRANSPORT_KEY] * self.sectors
        self.slots = {}
        self.authenticated = None
        self.mem[0][:len(uid)] = uid
        if message is not None:
            self.format(message, four_k, opts.get("classic"))

    @staticmethod
    def first_block(sector):
        return 4 * sector if sector < 32 else 128 + 16 * (sector - 32)

    def sector_of(self, block):
        return block // 4 if block < 128 else 32 + (block - 128) // 16

    def trailer(self, sector):
        return self.first_block(sector) + (3 if sector < 32 else 15)

    @staticmethod
    def mad_crc(data):
        crc = 0xC7
        for b in data:
            crc ^= b
            for _ in range(8):
                crc = ((crc << 1) ^ 0x1D) & 0xFF if crc & 0x80 else (crc << 1) & 0xFF
        return crc

    def format(self, message, four_k, variant):
        mad_sectors = [0, 16] if four_k else [0]
        ndef_sectors = [s for s in range(1, self.sectors) if s not in mad_sectors]
        aids = b"\x03\xe1" * 15  # E1 03, low byte first, for sectors 1-15
        mad1 = bytearray([0, 0x01]) + aids
        mad1[0] = self.mad_crc(mad1[1:])
        if variant == "badcrc":
            mad1[0] ^= 0xFF
        self.mem[1], self.mem[2] = mad1[:16], mad1[16:]
        # Sector 0's trailer: key A, access bits 78 77 88, the General Purpose Byte (DA, MA, ADV = MAD version).
        self.mem[3][:] = self.MAD_KEY + bytes([0x78, 0x77, 0x88, 0xC2 if four_k else 0xC1]) + bytes(6)
        if four_k:
            mad2 = bytearray([0, 0x00]) + b"\x03\xe1" * 23  # sectors 17-39
            mad2[0] = self.mad_crc(mad2[1:])
            self.mem[64], self.mem[65], self.mem[66] = mad2[:16], mad2[16:32], mad2[32:]
        for sector in mad_sectors:
            self.keys[sector] = self.MAD_KEY
        ndef_key = bytes.fromhex("112233445566") if variant == "private" else self.NDEF_KEY
        data = ndef_tlv(message)
        for sector in ndef_sectors:
            self.keys[sector] = ndef_key
            for block in range(self.first_block(sector), self.trailer(sector)):
                self.mem[block][:] = data[:16].ljust(16, b"\x00")
                data = data[16:]
        if data:
            raise RigError("message too long for a %s" % self.kind)

    def command(self, apdu):
        if apdu[0] != 0xFF:
            return SW_CLA_NOT_SUPPORTED
        if apdu[1] == 0x82:  # LOAD KEYS FF 82 00 slot 06 key
            if len(apdu) != 11 or apdu[4] != 6:
                return SW_WRONG_LENGTH
            self.slots[apdu[3]] = bytes(apdu[5:11])
            return SW_OK
        if apdu[1] == 0x86:  # GENERAL AUTHENTICATE FF 86 00 00 05 01 00 block keytype slot
            if len(apdu) != 10 or apdu[4] != 5 or apdu[5] != 0x01:
                return SW_WRONG_LENGTH
            return self.authenticate(apdu[7], apdu[8], apdu[9])
        if apdu[1] == 0x88:  # ACR122U's older form FF 88 00 block keytype slot
            return self.authenticate(apdu[3], apdu[4], apdu[5]) if len(apdu) == 6 else SW_WRONG_LENGTH
        if apdu[1] == 0xB0:  # READ BINARY FF B0 00 block 10
            block = apdu[3]
            if len(apdu) != 5 or apdu[4] != 16 or block >= self.blocks:
                return SW_READER_FAIL
            if self.authenticated != self.sector_of(block):
                return SW_READER_FAIL
            data = bytes(self.mem[block])
            if block == self.trailer(self.sector_of(block)):
                data = b"\x00" * 6 + data[6:]  # key A never reads back
            return data + SW_OK
        if apdu[1] == 0xD6:
            return SW_READER_FAIL
        return SW_FUNC_NOT_SUPPORTED

    def authenticate(self, block, key_type, slot):
        self.authenticated = None
        if block >= self.blocks or key_type != 0x60 or self.slots.get(slot) != self.keys[self.sector_of(block)]:
            return SW_READER_FAIL
        self.authenticated = self.sector_of(block)
        return SW_OK


class Type5Card(Card):
    """An NFC Forum Type 5 tag (ISO 15693) behind a reader that speaks ISO 15693 (Omnikey 5x22, ACR1552U): READ
    BINARY `FF B0 <block high> <block low> Le` reads block P1P2, Le 00 one block of the tag's size, Le = n x the
    block size n blocks (the reader sends READ MULTIPLE BLOCKS); a block the tag lacks `6B 00`, another Le `67 00`.
    `fault=no_multi`: the tag lacks READ MULTIPLE BLOCKS whatever its CC says (`6A 81` for n > 1).

    `icodeslix`: NXP ICODE SLIX, 28 blocks of 4 bytes, formatted as NXP ships NDEF ICODE tags: CC `E1 40 0E 01`
    (version 1.0, read and write granted, MLEN 0x0E x 8 = 112 bytes, MBREAD). `st25dv64k`: ST25DV64K, 2048
    blocks of 4 bytes, the 8-byte CC ST's NDEF library writes for memories over 2040 bytes: `E2 40 00 01 00 00 04
    00` (two-byte block numbers, MLEN in bytes 6-7: 0x0400 x 8 = 8192). The TLVs follow the CC. `cc=HEX` replaces
    the CC's bytes; `proprietary=N` puts an N-byte Proprietary TLV (`FD`, as ST's tags may carry) before the NDEF
    TLV.
    """

    MODELS = {
        "icodeslix": (28, "E1400E01", ATR_ICODE_SLIX),
        "st25dv64k": (2048, "E240000100000400", ATR_ISO15693),
    }
    BLOCK = 4

    def __init__(self, kind, uid, message, opts):
        Card.__init__(self, uid, opts)
        if len(uid) != 8:
            raise RigError("%s needs an 8-byte UID (ISO 15693)" % kind)
        self.kind = kind
        blocks, cc, atr = self.MODELS[kind]
        self.atr = opts["atr"] or atr
        self.blocks = blocks
        cc = opts["cc"] if opts["cc"] is not None else bytes.fromhex(cc)
        size = opts.get("proprietary", 0)
        proprietary = b""
        if size:
            length = bytes([size]) if size < 0xFF else b"\xff" + size.to_bytes(2, "big")
            proprietary = b"\xfd" + length + bytes((i * 7) & 0xFF for i in range(size))
        image = cc + proprietary + (ndef_tlv(message) if message is not None else b"")
        if len(image) > blocks * self.BLOCK:
            raise RigError("message too long for a %s" % kind)
        self.mem = image.ljust(blocks * self.BLOCK, b"\x00")

    def get_data(self, apdu):
        """A reader hands an ISO 15693 UID over in the order the tag sends it, least significant byte first
        (ISO/IEC 15693-3); the UID `tap` is given is written as on the tag's label, E0 first."""
        reply = Card.get_data(self, apdu)
        return self.uid[::-1] + SW_OK if reply == self.uid + SW_OK else reply

    def command(self, apdu):
        block, le, refusal = self.storage_read(apdu, self.BLOCK)
        if refusal:
            return refusal
        if le % self.BLOCK:
            return SW_WRONG_LENGTH
        count = le // self.BLOCK
        if count > 1 and "no_multi" in self.faults:
            return SW_FUNC_NOT_SUPPORTED
        if block + count > self.blocks:
            return SW_OFFSET_OUTSIDE
        return self.read_reply(self.mem[block * self.BLOCK:(block + count) * self.BLOCK])


class Type4Card(Card):
    """NFC Forum Type 4 tag (ISO-DEP), or a phone (`phone`: no NDEF application, SELECT -> 6A82)."""

    def __init__(self, kind, uid, message, opts):
        Card.__init__(self, uid, opts)
        self.kind = kind
        if not 4 <= len(uid) <= 10:
            raise RigError("%s needs a 4..10-byte UID" % kind)
        self.atr = opts["atr"] or (ATR_PHONE if kind == "phone" else ATR_TYPE4)
        self.mle = opts["mle"] if opts["mle"] is not None else 0xFF
        self.mlc = opts["mlc"] if opts["mlc"] is not None else 0xFF
        message = message if message is not None else b""
        size = opts["size"] if opts["size"] is not None else max(0x0800, len(message) + 2)
        if len(message) + 2 > size:
            raise RigError("NDEF message (%d bytes) + NLEN does not fit size=%d" % (len(message),
                                                                                   size))
        self.ndef_file = struct.pack(">H", len(message)) + message
        self.ndef_file += b"\x00" * (size - len(self.ndef_file))
        if opts["cc"] is not None:
            self.cc_file = opts["cc"]
        else:
            self.cc_file = (b"\x00\x0f\x20" + struct.pack(">HH", self.mle, self.mlc) +
                            b"\x04\x06\xe1\x04" + struct.pack(">H", size) + b"\x00\x00")
        self.files = {b"\xe1\x03": self.cc_file, b"\xe1\x04": self.ndef_file}
        self.app_selected = False
        self.current = None

    def on_power(self):
        self.app_selected = False
        self.current = None

    def command(self, apdu):
        if apdu[0] == 0xFF:
            return SW_FUNC_NOT_SUPPORTED
        if apdu[0] & 0xF0 != 0x00:
            return SW_CLA_NOT_SUPPORTED
        if self.kind == "phone":
            return SW_NOT_FOUND if apdu[1] == 0xA4 else SW_INS_NOT_SUPPORTED
        if apdu[1] == 0xA4:
            return self.select(apdu)
        if apdu[1] == 0xB0:
            return self.read_binary(apdu)
        return SW_INS_NOT_SUPPORTED

    def select(self, apdu):
        if len(apdu) < 6 or len(apdu) < 5 + apdu[4]:
            return SW_WRONG_LENGTH
        data = apdu[5:5 + apdu[4]]
        p1, p2 = apdu[2], apdu[3]
        if p1 == 0x04:
            self.current = None
            self.app_selected = data == NDEF_AID and p2 in (0x00, 0x0C)
            return SW_OK if self.app_selected else SW_NOT_FOUND
        if p1 == 0x00:
            if not self.app_selected or data not in self.files:
                return SW_NOT_FOUND
            self.current = data
            return SW_OK
        return SW_WRONG_P1P2

    def read_binary(self, apdu):
        if self.current is None:
            return SW_NO_CURRENT_EF
        if len(apdu) == 4:
            le = 256
        elif len(apdu) == 5:
            le = apdu[4] or 256
        else:
            return SW_WRONG_LENGTH  # no Lc on READ BINARY, no extended length
        if apdu[2] & 0x80:
            return SW_WRONG_P1P2  # short EF identifier addressing: not emulated
        if le > self.mle:
            return SW_WRONG_LENGTH
        offset = (apdu[2] << 8) | apdu[3]
        f = self.files[self.current]
        if offset > len(f):
            return SW_OFFSET_OUTSIDE
        return self.read_reply(f[offset:offset + le])


KINDS = ("ntag213", "ntag215", "ntag216", "ul21", "type4", "blank", "phone", "mifare1k", "mifare4k", "icodeslix",
         "st25dv64k")
OPTION_KEYS = ("ndef", "url", "cc", "mle", "mlc", "size", "fault", "sw", "atr", "wait", "classic", "sig",
               "version", "proprietary")
FAULTS = ("short4", "remove_after", "garbage_sw", "no_uid", "thru_short", "thru_garbage", "thru_sw", "no_multi")
PERSONALITIES = ("plain", "acr122u", "part3")


def build_card(kind, uid_hex, data_arg, options):
    if kind not in KINDS:
        raise RigError("unknown kind %r (one of %s)" % (kind, ", ".join(KINDS)))
    uid = parse_hex(uid_hex, "UID")
    opts = {"faults": {}, "sw": b"\x6f\x00", "atr": None, "cc": None, "mle": None, "mlc": None,
            "size": None, "wait": 3.0}
    message = None
    for item in options:
        if "=" not in item:
            raise RigError("option %r is not key=value" % item)
        key, value = item.split("=", 1)
        if key not in OPTION_KEYS:
            raise RigError("unknown option %r (one of %s)" % (key, ", ".join(OPTION_KEYS)))
        try:
            if key == "ndef":
                message = parse_hex(value, "ndef=")
            elif key == "url":
                message = uri_record(value)
            elif key in ("cc", "atr"):
                opts[key] = parse_hex(value, key + "=")
            elif key == "sw":
                opts["sw"] = parse_hex(value, "sw=")
            elif key in ("mle", "mlc", "size"):
                opts[key] = int(value, 0)
                if not 1 <= opts[key] <= 0xFFFF:
                    raise RigError("%s= out of range" % key)
            elif key == "wait":
                opts["wait"] = float(value)
            elif key == "proprietary":
                opts["proprietary"] = int(value, 0)
                if not 0 <= opts["proprietary"] <= 0xFFFE:
                    raise RigError("proprietary= out of range")
            elif key == "version":
                opts["version"] = None if value == "none" else parse_hex(value, "version=")
            elif key == "sig":
                opts["sig"] = parse_hex(value, "sig=")
                if len(opts["sig"]) != 32:
                    raise RigError("sig= must be 32 bytes")
            elif key == "classic":
                if value not in ("badcrc", "private"):
                    raise RigError("classic= is badcrc or private")
                opts["classic"] = value
            elif key == "fault":
                for f in value.split(","):
                    name, _, arg = f.partition("=")
                    if name not in FAULTS:
                        raise RigError("unknown fault %r (one of %s)" % (name, ", ".join(FAULTS)))
                    if name == "remove_after":
                        opts["faults"][name] = int(arg)
                        if opts["faults"][name] < 0:
                            raise RigError("remove_after must be >= 0")
                    elif arg:
                        raise RigError("fault %s takes no value" % name)
                    else:
                        opts["faults"][name] = True
        except ValueError as e:
            raise RigError("bad value for %s: %s" % (key, e))
    if data_arg != "-" and message is not None:
        raise RigError("give either NDEF_HEX or ndef=/url=, not both")
    if kind in Type2Card.MODELS:
        if message is not None:
            image = ndef_tlv(message)
        else:
            image = None if data_arg == "-" else parse_hex(data_arg, "data area image")
        card = Type2Card(kind, uid, image, opts)
    elif kind in ("type4", "phone"):
        if message is None and data_arg != "-":
            message = parse_hex(data_arg, "NDEF message")
        card = Type4Card(kind, uid, message, opts)
    elif kind in Type5Card.MODELS:
        if message is None and data_arg != "-":
            message = parse_hex(data_arg, "NDEF message")
        card = Type5Card(kind, uid, message, opts)
    else:
        if message is None and data_arg != "-":
            message = parse_hex(data_arg, "NDEF message")
        card = MifareClassicCard(kind, uid, message, opts)
    return card, opts


# --- reader personalities ------------------------------------------------------------------------
def ber_length(n):
    """BER-TLV length: 1 byte below 0x80, else 81 xx / 82 xx xx."""
    if n < 0x80:
        return bytes([n])
    if n < 0x100:
        return bytes([0x81, n])
    return bytes([0x82, n >> 8, n & 0xFF])


# What an ACR122U answers to Get Firmware Version: its version in ASCII, without SW1 SW2 (ACR122U API manual).
ACR122U_FIRMWARE = b"ACR122U207"


class Personality(object):
    """What the reader itself answers before the card sees an APDU (ACR122U / PC/SC Part 3 manuals).

    `plain` answers nothing itself: every FF 00 / FF C2 pseudo-APDU reaches the card, which refuses it
    with 6A81. `acr122u` answers the LED/buzzer pseudo-APDU FF 00 40, the detect-beep setting FF 00 52
    and the direct transmit FF 00 00 00 Lc D4 42 <tag command> (PN533 InCommunicateThru: D5 43 status
    data). `part3` answers the PC/SC Part 3 transparent session FF C2 00 00 02 81 00 / 82 00 and the
    transparent exchange FF C2 00 01 Lc 95 L <tag command> (C0 03 00 90 00, 97 L data). `acr122u` also
    answers Get Firmware Version FF 00 48 00 00 with the 10 ASCII bytes of its version and no status word, as
    the ACR122U API manual shows (`ACR122U207`, the version of the readers sold today). Reader commands
    (FF 00 40, FF 00 52, FF 00 48) are recorded with their arrival time and not listed by `apdus`.
    """

    def __init__(self, name):
        self.name = name
        self.session = False

    def handle(self, slot, card, apdu):
        """The reader's answer, or None to pass the APDU to the card."""
        if self.name == "acr122u" and len(apdu) >= 5 and apdu[0] == 0xFF and apdu[1] == 0x00:
            if apdu[2] == 0x40:
                slot.note_feedback(apdu)
                if len(apdu) != 9 or apdu[4] != 0x04:
                    return SW_READER_FAIL
                return b"\x90\x00"  # SW1 90, SW2 = the current LED state (both off)
            if apdu[2] == 0x52:
                slot.note_feedback(apdu)
                return SW_OK if len(apdu) == 5 and apdu[3] in (0x00, 0xFF) else SW_READER_FAIL
            if apdu[2] == 0x48:
                slot.note_feedback(apdu)
                return ACR122U_FIRMWARE if apdu == b"\xff\x00\x48\x00\x00" else SW_READER_FAIL
            if apdu[2] == 0x00 and apdu[3] == 0x00 and len(apdu) == 5 + apdu[4] and apdu[5:7] == b"\xd4\x42":
                return self.in_communicate_thru(card, apdu[7:])
        if self.name == "part3" and len(apdu) >= 5 and apdu[0] == 0xFF and apdu[1] == 0xC2:
            return self.transparent(card, apdu)
        return None

    def in_communicate_thru(self, card, command):
        faults = card.faults
        if "thru_sw" in faults:
            return SW_READER_FAIL
        ok, data = self.tag_exchange(card, command)
        if not ok:
            return b"\xd5\x43\x01" + SW_OK  # PN533 status 01: the tag did not answer a full frame
        reply = b"\xd5\x43\x00" + data
        if "thru_short" in faults:
            reply = reply[:-5]
        if "thru_garbage" in faults:
            reply = b"\xd5\x43\x00" + bytes((b * 7 + 3) & 0xFF for b in data[:len(data) // 2 + 1])
        return reply + SW_OK

    def transparent(self, card, apdu):
        ok_status = b"\xc0\x03\x00\x90\x00"
        if len(apdu) != 5 + apdu[4]:
            return SW_WRONG_LENGTH
        body = apdu[5:]
        if apdu[3] == 0x00:  # manage session
            if body == b"\x81\x00":
                self.session = True
                return ok_status + SW_OK
            if body == b"\x82\x00":
                self.session = False
                return ok_status + SW_OK
            return b"\xc0\x03\x01\x6a\x81" + SW_OK
        if apdu[3] != 0x01:
            return SW_WRONG_P1P2
        if not self.session:
            return b"\xc0\x03\x00\x69\x86" + SW_OK  # no session: command not allowed
        if len(body) < 2 or body[0] != 0x95 or body[1] != len(body) - 2:
            return b"\xc0\x03\x01\x6a\x81" + SW_OK
        if "thru_sw" in card.faults:
            return SW_FUNC_NOT_SUPPORTED
        ok, data = self.tag_exchange(card, body[2:])
        if not ok:
            return b"\xc0\x03\x01\x64\x01" + SW_OK  # no response from the tag
        tlv = b"\x97" + ber_length(len(data)) + data
        if "thru_short" in card.faults:
            tlv = tlv[:-5]  # the 97 object declares more than follows
        if "thru_garbage" in card.faults:
            tlv = b"\x97\x82\xff\xff" + data[:3]
        return ok_status + b"\x92\x01\x00\x96\x02\x00\x00" + tlv + SW_OK

    @staticmethod
    def tag_exchange(card, command):
        """The tag's answer to a raw NTAG command: (True, data) or (False, None) for a NAK/no answer.

        READ_SIG (3C 00): the 32-byte originality signature. GET_VERSION (60): the 8 bytes of the model (a NAK
        with `version=none`). FAST_READ (3A start end): pages start..end; a start or end page the tag lacks, or end < start,
        is a NAK (NTAG213/215/216 datasheet), and FAST_READ does not roll over. READ (30 addr): 4 pages
        with roll-over, as FF B0 does.
        """
        mem = getattr(card, "mem", None)
        pages = getattr(card, "pages", None)
        if mem is None or pages is None:
            return False, None
        if len(command) == 2 and command[0] == 0x3C and command[1] == 0x00:  # READ_SIG (NTAG21x datasheet)
            return True, card.signature
        if len(command) == 1 and command[0] == 0x60:  # GET_VERSION (NTAG21x, MF0ULx1 data sheets)
            version = getattr(card, "version", None)
            return (True, version) if version else (False, None)
        if len(command) == 3 and command[0] == 0x3A:
            start, end = command[1], command[2]
            if start > end or end >= pages:
                return False, None
            return True, bytes(mem[start * 4:(end + 1) * 4])
        if len(command) == 2 and command[0] == 0x30:
            if command[1] >= pages:
                return False, None
            return True, bytes(mem[((command[1] + i // 4) % pages) * 4 + i % 4] for i in range(16))
        return False, None


# --- vpcd transport ------------------------------------------------------------------------------
class Slot(object):
    """One virtual reader: the card lying on it and the TCP link to vpcd that makes it present.

    The card is present while we are connected to vpcd's port for this reader. The link thread
    reconnects when pcscd goes away and comes back (the card stays on the reader), and ends on
    `remove` or when the remove_after fault fired.
    """

    def __init__(self, index):
        self.index = index
        self.port = VPCD_PORTS[index]
        self.lock = threading.Lock()
        self.card = None
        self.thread = None
        self.removing = threading.Event()
        self.detected = threading.Event()
        self.gone = threading.Event()
        self.gone.set()
        self.apdus = []
        self.fault_removed = False
        self.tap_time = 0.0
        self.detect_time = None
        self.personality = Personality("plain")
        self.delay = 0.0
        self.feedback = []  # (monotonic time, hex) of every feedback command since the tap

    def note_feedback(self, apdu):
        with self.lock:
            self.feedback.append((time.monotonic(), apdu.hex().upper()))

    def exchange(self, msg):
        """One APDU: the per-exchange delay, then the reader's own answer or the card's."""
        if self.delay > 0:
            time.sleep(self.delay)
        answer = self.personality.handle(self, self.card, msg)
        return answer if answer is not None else self.card.execute(msg)

    def feedback_report(self):
        with self.lock:
            return "OK %d%s" % (len(self.feedback),
                                "".join(" %.6f:%s" % (t, a) for t, a in self.feedback))

    @property
    def present(self):
        return self.thread is not None and not self.gone.is_set()

    def tap(self, card, opts):
        if self.fault_removed and self.thread is not None:
            self.gone.wait(2.5)  # let pcscd see the fault removal first (see _ghost)
        if self.present:
            raise RigError("reader %d already has a card; remove it first" % self.index)
        self.card = card
        self.remove_after = opts["faults"].get("remove_after")
        self.personality = Personality(self.personality.name)
        with self.lock:
            self.feedback = []
        self.apdus = []
        self.fault_removed = False
        self.removing.clear()
        self.detected.clear()
        self.gone.clear()
        self.tap_time = time.monotonic()
        self.detect_time = None
        self.thread = threading.Thread(target=self._run, name="slot%d" % self.index, daemon=True)
        self.thread.start()
        wait = opts["wait"]
        if wait <= 0:
            return "OK tap %d placed" % self.index
        if not self.detected.wait(wait):
            if self.gone.is_set():
                raise RigError("tap %d: card left before pcscd saw it" % self.index)
            raise RigError("tap %d: pcscd did not see the card within %.1fs (it stays on the "
                           "reader until `remove %d`)" % (self.index, wait, self.index))
        time.sleep(SETTLE)  # pcscd publishes the state right after reading our ATR
        return "OK tap %d detect_ms=%.0f" % (self.index, (self.detect_time - self.tap_time) * 1000)

    def remove(self, timeout=2.0):
        if self.fault_removed and self.thread is not None:
            self.gone.wait(timeout + 1.0)  # until pcscd saw the reader empty (see _ghost)
            time.sleep(SETTLE)
        if self.thread is None or self.gone.is_set():
            self.thread = None
            return "OK remove %d %s" % (self.index,
                                        "removed_by_fault" if self.fault_removed else "was_empty")
        t0 = time.monotonic()
        self.removing.set()
        self.gone.wait(timeout + 1.0)
        self.thread.join(1.0)
        self.thread = None
        time.sleep(SETTLE)  # pcscd publishes the removal right after reading our EOF
        return "OK remove %d after_ms=%.0f" % (self.index, (time.monotonic() - t0) * 1000)

    # link thread
    def _run(self):
        try:
            while not self.removing.is_set():
                sock = self._connect()
                if sock is None:
                    break
                reason = self._serve(sock)
                if reason == "fault":
                    self._ghost()
                if reason != "eof":
                    break
                log("reader %d: vpcd closed the link (pcscd gone?); card stays, reconnecting"
                    % self.index, debug=True)
        except Exception as e:  # never leave a half-present card behind silently
            log("reader %d: link thread failed: %r" % (self.index, e))
        finally:
            self.gone.set()

    def _ghost(self):
        """After a fault removal, make pcscd's next presence poll see the reader empty.

        vpcd accepts a pending connection at its next poll; a link closed at its first message
        reads as "not present" there, so pcscd publishes the removal at that poll and we know
        when. Without this, a quick re-tap would be accepted at the same poll and pcscd would
        never see the reader empty (same event counter, no power-up).
        """
        try:
            s = socket.create_connection((VPCD_HOST, self.port), timeout=0.5)
        except OSError:
            return  # pcscd is gone: nothing to tell
        try:
            r, _, _ = select.select([s], [], [], 1.5)
            if r:
                try:
                    s.recv(65536)
                except OSError:
                    pass
        finally:
            s.close()

    def _connect(self):
        while not self.removing.is_set():
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            try:
                s.connect((VPCD_HOST, self.port))
            except OSError:
                s.close()
                self.removing.wait(0.05)  # pcscd not (yet) up: keep trying while on the reader
                continue
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            log("reader %d: connected to vpcd port %d" % (self.index, self.port), debug=True)
            return s
        return None

    def _send(self, sock, payload):
        sock.sendall(struct.pack(">H", len(payload)) + payload)

    def _serve(self, sock):
        """Answer vpcd until the link ends; returns "eof", "removed" or "fault".

        Removal is a close of the link, never a 0-length answer: vpcd 3.3 does not eject on a
        0-length message, its polling thread blocks on the socket until we close it.
        """
        buf = b""
        powered = False
        removing_since = None
        try:
            while True:
                if self.removing.is_set():
                    if removing_since is None:
                        removing_since = time.monotonic()
                    elif time.monotonic() - removing_since > 1.0:
                        return "removed"  # vpcd did not ask again within 1 s: just drop the link
                r, _, _ = select.select([sock], [], [], 0.02)
                if not r:
                    continue
                try:
                    chunk = sock.recv(65536)
                except OSError:
                    chunk = b""
                # vpcd writes the 2-byte length and the payload in two segments: without a
                # quick ACK the second one waits for the delayed-ACK timer (~40 ms per APDU).
                try:
                    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_QUICKACK, 1)
                except OSError:
                    pass
                if not chunk:
                    return "removed" if self.removing.is_set() else "eof"
                buf += chunk
                while len(buf) >= 2:
                    n = struct.unpack(">H", buf[:2])[0]
                    if len(buf) < 2 + n:
                        break
                    msg, buf = buf[2:2 + n], buf[2 + n:]
                    if n > 1:
                        with self.lock:
                            # Reader commands (feedback, firmware version) are listed by `feedback`, not `apdus`
                            # (they are not reads).
                            if not (self.personality.name == "acr122u" and msg[:3] in
                                    (b"\xff\x00\x40", b"\xff\x00\x52", b"\xff\x00\x48")):
                                self.apdus.append(msg.hex().upper())
                            count = len(self.apdus)
                    if self.removing.is_set():
                        # Close instead of answering: pcscd sees the removal at this very poll
                        # (or the APDU in flight gets a 0-byte answer, as a card leaving does).
                        return "removed"
                    if n == 1:
                        powered = self._control(sock, msg[0], powered)
                    elif n > 1:
                        if self.remove_after is not None and count > self.remove_after:
                            log("reader %d: fault remove_after=%d: link closed on APDU %d"
                                % (self.index, self.remove_after, count), debug=True)
                            self.fault_removed = True
                            return "fault"  # vpcd reads EOF: SCardTransmit gets 0 bytes
                        resp = self.exchange(msg)
                        log("reader %d: %s -> %s" % (self.index, msg.hex().upper(),
                                                     resp.hex().upper()), debug=True)
                        self._send(sock, resp)
        finally:
            try:
                sock.close()
            except OSError:
                pass

    def _control(self, sock, code, powered):
        card = self.card
        log("reader %d: ctrl %d" % (self.index, code), debug=True)
        if code == CTRL_ATR:
            self._send(sock, card.getATR())
            # pcscd on insertion: presence poll (ATR), power up (1), ATR, then publishes the
            # new reader state. Presence polls alone do not count: if the power-up failed, pcscd
            # reports the card but SCardConnect gives SCARD_E_NO_SMARTCARD.
            if powered and not self.detected.is_set():
                self.detect_time = time.monotonic()
                self.detected.set()
        elif code == CTRL_ON:
            card.powerUp()
            powered = True
        elif code == CTRL_OFF:
            card.powerDown()
        elif code == CTRL_RESET:
            card.reset()
        return powered

    def apdu_report(self):
        with self.lock:
            return "OK %d%s" % (len(self.apdus), "".join(" " + a for a in self.apdus))


# --- pcscd management ----------------------------------------------------------------------------
def _proc_comm(pid):
    try:
        with open("/proc/%d/comm" % pid) as f:
            return f.read().strip()
    except OSError:
        return None


def _proc_state(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return None


def _alive(pid):
    st = _proc_state(pid)
    return st is not None and st != "Z"


def _ports_listening():
    want = {"%04X" % p for p in VPCD_PORTS}
    found = set()
    try:
        with open("/proc/net/tcp") as f:
            next(f)
            for line in f:
                parts = line.split()
                port = parts[1].split(":")[1]
                if port in want and parts[3] == "0A":
                    found.add(port)
    except OSError:
        pass
    return found == want


def _die_with_parent():
    """In the pcscd child: get SIGTERM when the rig dies (even by SIGKILL). Linux only.

    PR_SET_PDEATHSIG fires when the forking *thread* ends: pcscd is only started from the
    main thread, which lives as long as the rig.
    """
    try:
        import ctypes
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM, 0, 0, 0)  # PR_SET_PDEATHSIG
    except Exception:
        pass


class Pcscd(object):
    def __init__(self, log_path, debug):
        self.proc = None
        self.log_path = log_path
        self.debug = debug

    @property
    def running(self):
        return self.proc is not None and self.proc.poll() is None

    def _stale_pids(self):
        pids = set()
        try:
            with open(PCSCD_PID) as f:
                pid = int(f.read().strip() or 0)
            if pid > 0 and _proc_comm(pid) == "pcscd" and _alive(pid):
                pids.add(pid)
        except (OSError, ValueError):
            pass
        # A pcscd that lost its pid file still holds the vpcd ports: find it too.
        for name in os.listdir("/proc"):
            if name.isdigit() and _proc_comm(int(name)) == "pcscd" and _alive(int(name)):
                pids.add(int(name))
        if self.proc is not None:
            pids.discard(self.proc.pid)
        return pids

    def cleanup_stale(self):
        pids = self._stale_pids()
        for pid in pids:
            log("stopping stale pcscd pid %d" % pid)
            try:
                os.kill(pid, signal.SIGTERM)
            except OSError:
                pass
        deadline = time.monotonic() + 3.0
        while pids and time.monotonic() < deadline:
            pids = {p for p in pids if _alive(p)}
            time.sleep(0.02)
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        deadline = time.monotonic() + 2.0
        while pids and time.monotonic() < deadline:
            pids = {p for p in pids if _alive(p)}
            time.sleep(0.02)
        if pids:
            raise RigError("stale pcscd %s would not die" % sorted(pids))
        self.remove_files()

    @staticmethod
    def remove_files():
        for path in (PCSCD_COMM, PCSCD_PID):
            try:
                os.unlink(path)
            except FileNotFoundError:
                pass
            except OSError as e:
                log("cannot remove %s: %s" % (path, e))

    def start(self, timeout=5.0):
        if self.running:
            raise RigError("pcscd already running (pid %d)" % self.proc.pid)
        self.cleanup_stale()
        # wait for the kernel to free the vpcd ports of a just-killed pcscd
        deadline = time.monotonic() + 2.0
        while _ports_listening() and time.monotonic() < deadline:
            time.sleep(0.02)
        args = [PCSCD_BIN, "--foreground"]
        if self.debug:
            args += ["--debug", "--apdu"]
        out = open(self.log_path, "ab") if self.log_path else subprocess.DEVNULL
        t0 = time.monotonic()
        try:
            self.proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=out,
                                         stderr=subprocess.STDOUT, close_fds=True,
                                         preexec_fn=_die_with_parent)
        finally:
            if out is not subprocess.DEVNULL:
                out.close()
        deadline = t0 + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                rc = self.proc.returncode
                self.proc = None
                raise RigError("pcscd exited with %d at start (see --pcscd-log)" % rc)
            if os.path.exists(PCSCD_COMM) and _ports_listening():
                ms = (time.monotonic() - t0) * 1000
                log("pcscd pid %d up in %.0f ms" % (self.proc.pid, ms))
                return "OK start-pcscd pid=%d ms=%.0f" % (self.proc.pid, ms)
            time.sleep(0.01)
        self.stop()
        raise RigError("pcscd not up within %.0fs" % timeout)

    def stop(self, sig=signal.SIGTERM):
        if self.proc is None:
            return "OK kill-pcscd not_running"
        pid = self.proc.pid
        t0 = time.monotonic()
        if self.proc.poll() is None:
            try:
                self.proc.send_signal(sig)
            except OSError:
                pass
            try:
                self.proc.wait(5.0)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5.0)
        self.proc = None
        self.remove_files()  # SIGKILL leaves pcscd.comm and pcscd.pid behind
        return "OK kill-pcscd pid=%d ms=%.0f" % (pid, (time.monotonic() - t0) * 1000)


# --- command loop --------------------------------------------------------------------------------
class Rig(object):
    def __init__(self, args):
        self.slots = [Slot(0), Slot(1)]
        self.pcscd = Pcscd(args.pcscd_log, args.pcscd_debug)
        self.manage_pcscd = not args.no_pcscd

    def slot(self, arg):
        try:
            i = int(arg)
        except ValueError:
            i = -1
        if i not in (0, 1):
            raise RigError("READER must be 0 or 1, got %r" % arg)
        return self.slots[i]

    def handle(self, line):
        words = line.split()
        if not words or words[0].startswith("#"):
            return "OK"  # every line gets exactly one answer, blank and comment lines too
        cmd, args = words[0], words[1:]
        if cmd == "tap":
            if len(args) < 4:
                raise RigError("usage: tap READER KIND UID_HEX NDEF_HEX|- [key=value ...]")
            slot = self.slot(args[0])
            card, opts = build_card(args[1], args[2], args[3], args[4:])
            return slot.tap(card, opts)
        if cmd == "remove":
            self.need(args, 1, "remove READER")
            return self.slot(args[0]).remove()
        if cmd == "hold":
            self.need(args, 1, "hold SECONDS")
            try:
                secs = float(args[0])
            except ValueError:
                raise RigError("hold: not a number: %r" % args[0])
            time.sleep(max(0.0, secs))
            return "OK hold %s" % args[0]
        if cmd == "apdus":
            self.need(args, 1, "apdus READER")
            return self.slot(args[0]).apdu_report()
        if cmd == "reader":
            if len(args) < 2:
                raise RigError("usage: reader READER plain|acr122u|part3 [delay=MS]")
            slot = self.slot(args[0])
            if args[1] not in PERSONALITIES:
                raise RigError("unknown personality %r (one of %s)" % (args[1], ", ".join(PERSONALITIES)))
            delay = 0.0
            for item in args[2:]:
                key, _, value = item.partition("=")
                if key != "delay":
                    raise RigError("unknown reader option %r (delay=MS)" % item)
                try:
                    delay = float(value) / 1000.0
                except ValueError:
                    raise RigError("delay: not a number: %r" % value)
                if not 0 <= delay <= 1:
                    raise RigError("delay must be 0..1000 ms")
            slot.personality = Personality(args[1])
            slot.delay = delay
            return "OK reader %d %s delay_ms=%g" % (slot.index, args[1], delay * 1000)
        if cmd == "feedback":
            self.need(args, 1, "feedback READER")
            return self.slot(args[0]).feedback_report()
        if cmd == "status":
            if self.pcscd.running:
                parts = ["pcscd=running pid=%d" % self.pcscd.proc.pid]
            else:
                other = sorted(self.pcscd._stale_pids())
                parts = ["pcscd=external pid=%d" % other[0] if other else "pcscd=stopped"]
            for s in self.slots:
                state = "empty"
                if s.present:
                    state = "removing" if s.fault_removed or s.removing.is_set() else s.card.kind
                parts.append("reader%d=%s" % (s.index, state))
            return "OK " + " ".join(parts)
        if cmd == "kill-pcscd":
            sig = signal.SIGTERM
            if args:
                if args[0].upper() not in ("TERM", "KILL"):
                    raise RigError("kill-pcscd [TERM|KILL]")
                sig = getattr(signal, "SIG" + args[0].upper())
            if self.pcscd.proc is None:
                raise RigError("no pcscd started by the rig")
            return self.pcscd.stop(sig)
        if cmd == "start-pcscd":
            return self.pcscd.start()
        if cmd == "quit":
            raise Quit()
        raise RigError("unknown command %r" % cmd)

    @staticmethod
    def need(args, n, usage):
        if len(args) != n:
            raise RigError("usage: " + usage)

    def shutdown(self):
        """Take the cards off, stop our pcscd (its exit ends the links at once), clean up."""
        for s in self.slots:
            if s.present:
                s.removing.set()
        if self.pcscd.proc is not None:
            self.pcscd.stop()
        for s in self.slots:
            if s.thread is not None:
                s.gone.wait(2.5)


def reply(text):
    try:
        sys.stdout.write(text + "\n")
        sys.stdout.flush()
    except (BrokenPipeError, ValueError):
        raise SystemExit(0)


def _on_signal(signum, frame):
    raise SystemExit(0)


def main(argv=None):
    global _log_file, _verbose
    ap = argparse.ArgumentParser(description="NFC test rig: pcscd + vpcd + tag emulator")
    ap.add_argument("--no-pcscd", action="store_true",
                    help="do not start pcscd (one is already running); start-pcscd still works")
    ap.add_argument("--verbose", "-v", action="store_true", help="log every APDU and control code")
    ap.add_argument("--log", help="write the rig's log here instead of stderr")
    ap.add_argument("--pcscd-log", help="append pcscd's output to this file (default: discarded)")
    ap.add_argument("--pcscd-debug", action="store_true", help="run pcscd with --debug --apdu")
    args = ap.parse_args(argv)
    if args.log:
        _log_file = open(args.log, "a", buffering=1)
    _verbose = args.verbose
    signal.signal(signal.SIGTERM, _on_signal)
    signal.signal(signal.SIGINT, _on_signal)
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    signal.signal(signal.SIGPIPE, signal.SIG_IGN)

    rig = Rig(args)
    quitting = False
    try:
        if rig.manage_pcscd:
            try:
                rig.pcscd.start()
            except RigError as e:
                log("cannot start pcscd: %s" % e)
                reply("ERR %s" % e)
                return 1
        reply("READY")
        while True:
            line = sys.stdin.readline()
            if not line:
                break
            try:
                answer = rig.handle(line.strip())
            except RigError as e:
                answer = "ERR %s" % e
            except Quit:
                quitting = True
                break
            except Exception as e:  # a rig bug must not kill the test run silently
                log("internal error on %r: %r" % (line.strip(), e))
                answer = "ERR internal: %r" % e
            reply(answer)
    except SystemExit:
        pass
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        rig.shutdown()
    if quitting:
        reply("OK quit")  # after the cleanup: pcscd is gone and its files removed
    return 0


if __name__ == "__main__":
    sys.exit(main())
