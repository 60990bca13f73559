#include "plings_crypto.h"

#include <openssl/bn.h>
#include <openssl/core_names.h>
#include <openssl/ec.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/param_build.h>

int plings_ecdsa_verify_raw(const char *curve, const uint8_t *pub, size_t pub_len, const uint8_t *digest,
                            size_t digest_len, const uint8_t *signature, size_t signature_len) {
    if (signature_len == 0 || signature_len % 2 != 0 || digest_len == 0) return 0;
    int result = -1;
    OSSL_PARAM_BLD *build = OSSL_PARAM_BLD_new();
    OSSL_PARAM *params = NULL;
    EVP_PKEY_CTX *from = NULL, *verify = NULL;
    EVP_PKEY *key = NULL;
    ECDSA_SIG *sig = NULL;
    unsigned char *der = NULL;
    if (build == NULL
        || !OSSL_PARAM_BLD_push_utf8_string(build, OSSL_PKEY_PARAM_GROUP_NAME, curve, 0)
        || !OSSL_PARAM_BLD_push_octet_string(build, OSSL_PKEY_PARAM_PUB_KEY, pub, pub_len)
        || (params = OSSL_PARAM_BLD_to_param(build)) == NULL
        || (from = EVP_PKEY_CTX_new_from_name(NULL, "EC", NULL)) == NULL
        || EVP_PKEY_fromdata_init(from) <= 0
        || EVP_PKEY_fromdata(from, &key, EVP_PKEY_PUBLIC_KEY, params) <= 0)
        goto done;
    // OpenSSL takes the signature DER-encoded: SEQUENCE { INTEGER r, INTEGER s }.
    size_t half = signature_len / 2;
    BIGNUM *r = BN_bin2bn(signature, (int)half, NULL);
    BIGNUM *s = BN_bin2bn(signature + half, (int)half, NULL);
    sig = ECDSA_SIG_new();
    if (r == NULL || s == NULL || sig == NULL || !ECDSA_SIG_set0(sig, r, s)) {
        BN_free(r);
        BN_free(s);
        goto done;
    }
    int der_len = i2d_ECDSA_SIG(sig, &der);
    if (der_len <= 0 || (verify = EVP_PKEY_CTX_new(key, NULL)) == NULL || EVP_PKEY_verify_init(verify) <= 0)
        goto done;
    result = EVP_PKEY_verify(verify, der, (size_t)der_len, digest, digest_len) == 1 ? 1 : 0;
done:
    OPENSSL_free(der);
    ECDSA_SIG_free(sig);
    EVP_PKEY_CTX_free(verify);
    EVP_PKEY_free(key);
    EVP_PKEY_CTX_free(from);
    OSSL_PARAM_free(params);
    OSSL_PARAM_BLD_free(build);
    return result;
}

int plings_hmac_sha256(const uint8_t *key, size_t key_len, const uint8_t *data, size_t data_len, uint8_t out[32]) {
    unsigned int length = 0;
    // A zero-length key is a valid HMAC key; OpenSSL wants a non-NULL pointer for it.
    static const uint8_t empty[1] = {0};
    if (HMAC(EVP_sha256(), key_len ? key : empty, (int)key_len, data_len ? data : empty, data_len, out, &length)
        == NULL)
        return 0;
    return length == 32;
}

int plings_sha256(const uint8_t *data, size_t data_len, uint8_t out[32]) {
    static const uint8_t empty[1] = {0};
    unsigned int length = 0;
    if (EVP_Digest(data_len ? data : empty, data_len, out, &length, EVP_sha256(), NULL) != 1) return 0;
    return length == 32;
}
