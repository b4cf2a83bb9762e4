/* Several processes on one file, no server (README "Several processes, no server"): run this
 * program a few times at once on one path; each adds N to a counter key under a lock that all
 * of them share, then prints the count it left and whether it owned the file.
 *
 *     cc shared_counter.c $(pkg-config --cflags --libs tenure) -o shared_counter
 *     ./shared_counter /tmp/count.tenure 100 & ./shared_counter /tmp/count.tenure 100; wait
 *     ./shared_counter /tmp/count.tenure 0        # count 200
 */
#define _POSIX_C_SOURCE 200809L
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tenure.h>

static int fail(const char *what, tenure_result rc) {
    fprintf(stderr, "%s: %s: %s\n", what, tenure_result_str(rc), tenure_last_error_message());
    return 1;
}

static long long read_count(tenure *db) {
    tenure_kv *kv = NULL;
    long long n = 0;
    if (tenure_get(db, (const uint8_t *)"count", 5, &kv) == TENURE_OK && kv != NULL) {
        tenure_bytes v = tenure_kv_value(kv);
        char buf[32] = {0};
        memcpy(buf, v.data, v.len < sizeof buf - 1 ? v.len : sizeof buf - 1);
        n = atoll(buf);
    }
    tenure_kv_free(kv);
    return n;
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: %s PATH N\n", argv[0]);
        return 2;
    }
    long n = atol(argv[2]);
    tenure_options opts;
    tenure_options_init(&opts);
    opts.shared = true; /* the first process owns the file and serves the others */
    tenure *db = NULL;
    tenure_result rc = tenure_open(argv[1], &opts, &db);
    if (rc != TENURE_OK) return fail("open", rc);
    tenure_session *s = NULL;
    if ((rc = tenure_session_new(db, 10000, &s)) != TENURE_OK) return fail("session", rc);
    for (long i = 0; i < n; i++) {
        tenure_lock *lock = NULL;
        if ((rc = tenure_mutex_lock(s, "counter", 10000, &lock)) != TENURE_OK) {
            return fail("lock", rc);
        }
        char value[32];
        int len = snprintf(value, sizeof value, "%lld", read_count(db) + 1);
        rc = tenure_put(db, (const uint8_t *)"count", 5, (const uint8_t *)value, (size_t)len, 0,
                        &(int64_t){0});
        if (rc != TENURE_OK) return fail("put", rc);
        if ((rc = tenure_lock_unlock(lock)) != TENURE_OK) return fail("unlock", rc);
        tenure_lock_free(lock);
    }
    tenure_stats st;
    tenure_stats_read(db, &st);
    printf("count %lld (%s the file)\n", read_count(db), st.owner ? "owned" : "did not own");
    tenure_session_close(s);
    tenure_session_free(s);
    tenure_close(db);
    return 0;
}
