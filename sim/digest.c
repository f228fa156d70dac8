#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>

#include "digest.h"

struct ms_digest {
    EVP_MD_CTX *ctx;
};

ms_digest *ms_digest_new(void)
{
    ms_digest *d = ms_xcalloc(1, sizeof *d);
    d->ctx = EVP_MD_CTX_new();
    if (!d->ctx || EVP_DigestInit_ex(d->ctx, EVP_sha256(), NULL) != 1) {
        fputs("moesim: libcrypto: cannot start a SHA-256 digest\n", stderr);
        abort();
    }
    return d;
}

void ms_digest_update(ms_digest *d, const void *data, size_t n)
{
    if (n && EVP_DigestUpdate(d->ctx, data, n) != 1) {
        fputs("moesim: libcrypto: SHA-256 update failed\n", stderr);
        abort();
    }
}

void ms_digest_final(ms_digest *d, char hex[MS_DIGEST_HEX])
{
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int n = 0;
    if (EVP_DigestFinal_ex(d->ctx, md, &n) != 1 || n != 32) {
        fputs("moesim: libcrypto: SHA-256 final failed\n", stderr);
        abort();
    }
    for (unsigned i = 0; i < n; i++)
        snprintf(hex + 2 * i, 3, "%02x", md[i]);
    ms_digest_free(d);
}

void ms_digest_free(ms_digest *d)
{
    if (!d)
        return;
    EVP_MD_CTX_free(d->ctx);
    free(d);
}

int ms_digest_file(const char *path, char hex[MS_DIGEST_HEX], ms_err *err)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return ms_fail(err, "%s: cannot read: %s", path, strerror(errno));
    ms_digest *d = ms_digest_new();
    unsigned char buf[1 << 16];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, f)) > 0)
        ms_digest_update(d, buf, n);
    int bad = ferror(f);
    fclose(f);
    if (bad) {
        ms_digest_free(d);
        return ms_fail(err, "%s: read error", path);
    }
    ms_digest_final(d, hex);
    return 0;
}
