"""Shim for the Python 2 `sha` module, which Python 3 no longer has.

Debian's python3-virtualsmartcard (3.3) falls back to `import sha as SHA1` in
virtualsmartcard/CryptoUtils.py when PyCrypto is missing, so importing
`virtualsmartcard.VirtualSmartcard` fails with "No module named 'sha'" unless
this file is on sys.path. nfc_rig.py puts its own directory first on sys.path.
"""

import hashlib

digest_size = 20
digestsize = 20
blocksize = 1


def new(data=b""):
    """Return a SHA-1 hash object, like the old `sha.new`."""
    return hashlib.sha1(data)


sha = new
