/* Run against a libtenure built with REMOTE=0 (make test-c-lean): tenure_connect is still
 * exported with the same signature and answers TENURE_ERR_UNSUPPORTED, saying why, while the
 * embedded engine is all there. */
#include <stdio.h>
#include <string.h>
#include <tenure.h>

int main(void) {
    tenure *db = NULL;
    tenure_result rc = tenure_connect("http://127.0.0.1:2379", NULL, &db);
    const char *msg = tenure_last_error_message();
    if (rc != TENURE_ERR_UNSUPPORTED || db != NULL || strstr(msg, "REMOTE=0") == NULL) {
        fprintf(stderr, "tenure_connect returned %s (%s), want TENURE_ERR_UNSUPPORTED\n",
                tenure_result_str(rc), msg);
        tenure_close(db);
        return 1;
    }
    printf("%s: %s\n", tenure_result_str(rc), msg);
    /* NULL arguments are still refused first. */
    if (tenure_connect("http://127.0.0.1:2379", NULL, NULL) != TENURE_ERR_NULL_POINTER) {
        fprintf(stderr, "tenure_connect(out = NULL) is not TENURE_ERR_NULL_POINTER\n");
        return 1;
    }

    int64_t rev = 0;
    tenure_kv *kv = NULL;
    if (tenure_open(NULL, NULL, &db) != TENURE_OK ||
        tenure_put(db, (const uint8_t *)"k", 1, (const uint8_t *)"v", 1, 0, &rev) != TENURE_OK ||
        tenure_get(db, (const uint8_t *)"k", 1, &kv) != TENURE_OK || kv == NULL) {
        fprintf(stderr, "embedded engine: %s\n", tenure_last_error_message());
        tenure_close(db);
        return 1;
    }
    tenure_kv_free(kv);
    tenure_close(db);
    return 0;
}
