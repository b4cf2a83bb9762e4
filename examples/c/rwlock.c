/* A configuration read by many and rewritten by one: three reader threads hold the read lock
 * of "config" together, a writer waits for them (and readers arriving after it wait for it),
 * then rewrites the value alone with its fencing token (SPEC S8). The key layout is etcd's
 * contrib/recipes RWMutex, so Go programs using that package take part over `tenure serve` or
 * etcd. The program ends by itself.
 *
 * Build against an installed libtenure:
 *   cc -std=c11 -pthread rwlock.c $(pkg-config --cflags --libs tenure) -o rwlock
 */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include <tenure.h>

#define TRY(call)                                                                         \
    do {                                                                                  \
        tenure_result rc_ = (call);                                                       \
        if (rc_ != TENURE_OK) {                                                           \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, tenure_result_str(rc_), \
                    tenure_last_error_message());                                         \
            exit(1);                                                                      \
        }                                                                                 \
    } while (0)

static tenure *db;

static void *reader(void *arg) {
    (void)arg;
    tenure_session *s = NULL;
    TRY(tenure_session_new(db, 10000, &s));
    tenure_rwhold *h = NULL;
    TRY(tenure_rwlock_lock(s, "config", false, 10000, &h));
    tenure_kv *kv = NULL;
    TRY(tenure_get(db, (const uint8_t *)"config.value", 12, &kv));
    printf("a reader sees %s\n", kv ? "a value" : "no value yet");
    tenure_kv_free(kv);
    TRY(tenure_rwhold_release(h));
    tenure_rwhold_free(h);
    TRY(tenure_session_close(s));
    tenure_session_free(s);
    return NULL;
}

int main(void) {
    TRY(tenure_open(NULL, NULL, &db)); /* in memory */
    pthread_t t[3];
    for (int i = 0; i < 3; i++) {
        if (pthread_create(&t[i], NULL, reader, NULL) != 0) {
            return 1;
        }
    }
    tenure_session *w = NULL;
    TRY(tenure_session_new(db, 10000, &w));
    tenure_rwhold *h = NULL;
    TRY(tenure_rwlock_lock(w, "config", true, 10000, &h));
    printf("the writer holds it alone (fencing token %lld)\n",
           (long long)tenure_rwhold_fencing_token(h));
    int64_t revision = 0;
    TRY(tenure_put(db, (const uint8_t *)"config.value", 12, (const uint8_t *)"v2", 2, 0, &revision));
    TRY(tenure_rwhold_release(h));
    tenure_rwhold_free(h);
    for (int i = 0; i < 3; i++) {
        pthread_join(t[i], NULL);
    }
    TRY(tenure_session_close(w));
    tenure_session_free(w);
    tenure_close(db);
    return 0;
}
