"""A card for a QEMU `usb-ccid` reader: the host side of QEMU's `ccid-card-passthru`, which speaks the VSCard
protocol (QEMU's docs/system/devices/ccid.rst, "Passthrough protocol scenario"; libcacard's vscard_common.h) over a
chardev socket. The guest sees a real USB CCID reader (QEMU's 08e6:4433, driven by the guest's libccid and pcscd);
the card in it answers as the NFC rig's tags do (nfc_rig.build_card: an NTAG behind a PC/SC part 3 reader, so
GET UID `FF CA` and READ BINARY `FF B0` reach it as APDUs).

What is emulated: the reader (QEMU's CCID device, not an NFC reader: it has no field and no feedback) and the tag
(our emulator); what is real: the guest's USB stack, udev, libccid, pcscd and the bridge.

    reader = VSCardReader("/path/to/chardev.sock")   # QEMU: -chardev socket,server=on,wait=off
    reader.insert(card)   # VSC_ATR: a card in the reader; its APDUs are answered by card.execute(apdu)
    reader.eject()        # VSC_CardRemove

QEMU 7.2 attaches the reader to its USB port when the device is created (at boot, or by QMP device_add) and
detaches it with QMP device_del; the connection to the chardev outlives both, and a new card slot on it greets the
client with VSC_Init, which needs no answer.

Messages are a header of three big-endian 32-bit words (type, reader id, payload length) and the payload.
"""

import socket
import struct
import threading
import time

VSC_INIT, VSC_ERROR, VSC_ATR, VSC_CARD_REMOVE, VSC_APDU = 1, 2, 5, 6, 7
READER_ID = 0  # VSCARD_MINIMAL_READER_ID: QEMU's passthru card is one reader
UNDEFINED_READER_ID = 0xFFFFFFFF
MAGIC = b"VSCD"  # VSCARD_MAGIC: the four bytes as they stand (QEMU compares them unconverted)
VERSION = 2  # VSCARD_VERSION, MAKE_VERSION(0, 0, 2)


class VSCardError(Exception):
    pass


class VSCardReader(object):
    def __init__(self, path, timeout=10.0):
        self.path = path
        self.timeout = timeout
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        deadline = time.monotonic() + timeout
        while True:
            try:
                self.sock.connect(path)
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
        self.lock = threading.Lock()
        self.acks = []
        self.ack_ready = threading.Condition(self.lock)
        self.card = None
        self.apdus = 0
        self.closed = False
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()
        self._send(VSC_INIT, UNDEFINED_READER_ID, MAGIC + struct.pack(">II", VERSION, 0))

    def _send(self, kind, reader, payload=b""):
        self.sock.sendall(struct.pack(">III", kind, reader, len(payload)) + payload)

    def _recv_exactly(self, n):
        data = b""
        while len(data) < n:
            chunk = self.sock.recv(n - len(data))
            if not chunk:
                raise EOFError
            data += chunk
        return data

    def _serve(self):
        try:
            while True:
                kind, _reader, length = struct.unpack(">III", self._recv_exactly(12))
                payload = self._recv_exactly(length)
                if kind == VSC_APDU:
                    with self.lock:
                        card = self.card
                        self.apdus += 1
                    # A card taken out meanwhile answers as a reader without one would: no response data.
                    answer = card.execute(payload) if card is not None else b"\x6f\x00"
                    self._send(VSC_APDU, READER_ID, bytes(answer))
                elif kind == VSC_ERROR:
                    code = struct.unpack(">I", payload[:4])[0] if len(payload) >= 4 else -1
                    with self.lock:
                        self.acks.append(code)
                        self.ack_ready.notify_all()
                # VSC_Init (QEMU's answer to ours) needs nothing.
        except (EOFError, OSError):
            with self.lock:
                self.closed = True
                self.ack_ready.notify_all()

    def _request(self, kind, payload=b""):
        """Sends a message QEMU acknowledges with VSC_Error (code 0: success) and waits for that answer."""
        with self.lock:
            before = len(self.acks)
        self._send(kind, READER_ID, payload)
        deadline = time.monotonic() + self.timeout
        with self.lock:
            while len(self.acks) == before and not self.closed:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise VSCardError("no answer from QEMU to message type %d on %s" % (kind, self.path))
                self.ack_ready.wait(left)
            if self.closed:
                raise VSCardError("QEMU closed %s" % self.path)
            code = self.acks[before]
        if code != 0:
            raise VSCardError("QEMU refused message type %d on %s: code %d" % (kind, self.path, code))

    def insert(self, card):
        with self.lock:
            self.card = card
        self._request(VSC_ATR, bytes(card.getATR()))

    def eject(self):
        self._request(VSC_CARD_REMOVE)
        with self.lock:
            self.card = None

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass
