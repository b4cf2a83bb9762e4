/* A pool of two GPU slots shared by four workers: each worker's session takes one of the two
 * permits of semaphore "pool/gpu" (SPEC S7), works, and releases it; the others wait their turn
 * in arrival order. A worker whose session ended without releasing (a crash) would free its
 * permit with its lease. The program ends by itself.
 *
 * Build against an installed libtenure:
 *   cc -std=c11 -pthread semaphore.c $(pkg-config --cflags --libs tenure) -o semaphore
 */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdatomic.h>
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

#define PERMITS 2
#define WORKERS 4

static tenure *db;
static atomic_int in_use, most_in_use;

static void *worker(void *arg) {
    const char *name = arg;
    tenure_session *s = NULL;
    TRY(tenure_session_new(db, 10000, &s));
    tenure_permit *p = NULL;
    TRY(tenure_semaphore_acquire(s, "pool/gpu", PERMITS, 10000, &p));
    int now = atomic_fetch_add(&in_use, 1) + 1;
    int seen = atomic_load(&most_in_use);
    while (now > seen && !atomic_compare_exchange_weak(&most_in_use, &seen, now)) {
    }
    printf("%s holds a slot (fencing token %lld)\n", name,
           (long long)tenure_permit_fencing_token(p));
    atomic_fetch_sub(&in_use, 1);
    TRY(tenure_permit_release(p));
    tenure_permit_free(p);
    TRY(tenure_session_close(s));
    tenure_session_free(s);
    return NULL;
}

int main(void) {
    TRY(tenure_open(NULL, NULL, &db)); /* in memory */
    const char *names[WORKERS] = {"w1", "w2", "w3", "w4"};
    pthread_t t[WORKERS];
    for (int i = 0; i < WORKERS; i++) {
        if (pthread_create(&t[i], NULL, worker, (void *)names[i]) != 0) {
            return 1;
        }
    }
    for (int i = 0; i < WORKERS; i++) {
        pthread_join(t[i], NULL);
    }
    printf("at most %d of %d slots were in use at once\n", atomic_load(&most_in_use), PERMITS);
    tenure_close(db);
    return atomic_load(&most_in_use) <= PERMITS ? 0 : 1;
}
