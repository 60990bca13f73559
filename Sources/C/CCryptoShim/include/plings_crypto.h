#ifndef PLINGS_CRYPTO_H
#define PLINGS_CRYPTO_H

#include <stddef.h>
#include <stdint.h>

/// Verifies an ECDSA signature given as r || s (two big-endian halves of equal length) over `digest` used as is
/// (no hashing: NXP's originality signatures sign the UID itself), with the public key `pub` (an uncompressed
/// point, 04 || x || y) on the named curve (an OpenSSL group name such as "secp128r1").
/// Returns 1 when it verifies, 0 when it does not, -1 when the curve or the key cannot be used.
int plings_ecdsa_verify_raw(const char *curve, const uint8_t *pub, size_t pub_len, const uint8_t *digest,
                            size_t digest_len, const uint8_t *signature, size_t signature_len);

/// HMAC-SHA256 (RFC 2104, FIPS 180-4) of `data` under `key`, into `out` (32 bytes). Returns 1 on success, 0 when
/// libcrypto failed.
int plings_hmac_sha256(const uint8_t *key, size_t key_len, const uint8_t *data, size_t data_len, uint8_t out[32]);

/// SHA-256 of `data` into `out` (32 bytes). Returns 1 on success, 0 when libcrypto failed.
int plings_sha256(const uint8_t *data, size_t data_len, uint8_t out[32]);

#endif
