/* A batch that starts and ends together (SPEC S11): three workers, each with its own session,
 * enter a double barrier for three, do their share, and leave together; a plain barrier held
 * by the coordinator keeps them from starting until it releases it. The key layouts are etcd's
 * contrib/recipes ones, so Go programs using recipe.DoubleBarrier can take part.
 *
 * Build against an installed libtenure:
 *   cc -std=c11 -pthread barrier.c $(pkg-config --cflags --libs tenure) -o barrier
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

#define WORKERS 3

static tenure *db;

static void *worker(void *arg) {
    long id = (long)arg;
    tenure_barrier *go = NULL;
    TRY(tenure_barrier_new(db, "batch-go", &go));
    TRY(tenure_barrier_wait(go, 10000)); /* until the coordinator releases it */
    tenure_barrier_free(go);
    tenure_session *s = NULL;
    TRY(tenure_session_new(db, 30000, &s));
    tenure_double_barrier *b = NULL;
    TRY(tenure_double_barrier_new(s, "batch", WORKERS, &b));
    TRY(tenure_double_barrier_enter(b, 10000));
    printf("worker %ld: in (all %d are)\n", id, WORKERS);
    TRY(tenure_double_barrier_leave(b, 10000));
    printf("worker %ld: out (all %d are)\n", id, WORKERS);
    tenure_double_barrier_free(b);
    TRY(tenure_session_close(s));
    tenure_session_free(s);
    return NULL;
}

int main(void) {
    TRY(tenure_open(NULL, NULL, &db));
    tenure_barrier *go = NULL;
    TRY(tenure_barrier_new(db, "batch-go", &go));
    TRY(tenure_barrier_hold(go, NULL));
    pthread_t t[WORKERS];
    for (long i = 0; i < WORKERS; i++) pthread_create(&t[i], NULL, worker, (void *)i);
    printf("coordinator: go\n");
    TRY(tenure_barrier_release(go));
    for (int i = 0; i < WORKERS; i++) pthread_join(t[i], NULL);
    tenure_barrier_free(go);
    tenure_close(db);
    return 0;
}
