/* Built by tests/cmake/CMakeLists.txt through find_package(tenure): a round trip through the
 * library, so both the shared and the static target are known to link and run. */
#include <stdio.h>
#include <string.h>
#include <tenure.h>

int main(void) {
    tenure *db = NULL;
    int64_t lease = 0, rev = 0;
    tenure_kv *kv = NULL;
    if (tenure_open(NULL, NULL, &db) != TENURE_OK ||
        tenure_lease_grant(db, 30000, 0, &lease) != TENURE_OK ||
        tenure_put(db, (const uint8_t *)"k", 1, (const uint8_t *)"v", 1, lease, &rev) != TENURE_OK ||
        tenure_get(db, (const uint8_t *)"k", 1, &kv) != TENURE_OK || kv == NULL) {
        fprintf(stderr, "%s\n", tenure_last_error_message());
        tenure_close(db);
        return 1;
    }
    tenure_bytes v = tenure_kv_value(kv);
    int ok = v.len == 1 && memcmp(v.data, "v", 1) == 0 && tenure_kv_lease(kv) == lease;
    printf("tenure %s: k = %.*s at revision %lld\n", tenure_version(), (int)v.len,
           (const char *)v.data, (long long)rev);
    tenure_kv_free(kv);
    tenure_close(db);
    return ok ? 0 : 1;
}
