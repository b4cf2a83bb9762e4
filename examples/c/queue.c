/* A work queue (SPEC S10): a producer enqueues jobs with priorities, two worker threads take
 * them; each job is done by exactly one worker, urgent ones first. The key layout is etcd's
 * contrib/recipes one, so Go programs using recipe.PriorityQueue can produce or consume too.
 *
 * Build against an installed libtenure:
 *   cc -std=c11 -pthread queue.c $(pkg-config --cflags --libs tenure) -o queue
 */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

#define JOBS 6

struct worker {
    const char *name;
    const tenure_queue *q;
    int done;
};

/* Takes jobs until the queue stays empty for half a second. */
static void *work(void *arg) {
    struct worker *w = arg;
    for (;;) {
        tenure_item *job = NULL;
        tenure_result rc = tenure_queue_dequeue(w->q, 500, &job);
        if (rc == TENURE_ERR_TIMEOUT) return NULL;
        TRY(rc);
        tenure_bytes v = tenure_item_value(job);
        printf("%s: %.*s\n", w->name, (int)v.len, (const char *)v.data);
        w->done++;
        tenure_item_free(job);
    }
}

int main(void) {
    tenure *db = NULL;
    TRY(tenure_open(NULL, NULL, &db));
    tenure_queue *q = NULL;
    TRY(tenure_priority_queue_new(db, "jobs", &q));
    const char *jobs[JOBS] = {"resize a", "resize b", "URGENT: restore", "resize c",
                              "URGENT: page", "report"};
    const uint16_t priority[JOBS] = {5, 5, 0, 5, 0, 9};
    for (int i = 0; i < JOBS; i++)
        TRY(tenure_queue_enqueue_priority(q, (const uint8_t *)jobs[i], strlen(jobs[i]),
                                          priority[i]));
    struct worker a = {"worker-a", q, 0}, b = {"worker-b", q, 0};
    pthread_t ta, tb;
    pthread_create(&ta, NULL, work, &a);
    pthread_create(&tb, NULL, work, &b);
    pthread_join(ta, NULL);
    pthread_join(tb, NULL);
    printf("jobs done: %d (each exactly once)\n", a.done + b.done);
    tenure_queue_free(q);
    tenure_close(db);
    return a.done + b.done == JOBS ? 0 : 1;
}
