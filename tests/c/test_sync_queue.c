/* Queues from C (SPEC S10): FIFO and priority order, a dequeue woken by an enqueue from another
 * thread, cancellation, try_dequeue and misuse. */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdlib.h>

#include "check.h"

/* Takes one item within WAIT_MS and checks its value. */
static void expect_item(const tenure_queue *q, const char *want) {
    tenure_item *it = NULL;
    CHECK_OK(tenure_queue_dequeue(q, WAIT_MS, &it));
    tenure_bytes v = tenure_item_value(it);
    CHECK_EQ(v.len, strlen(want));
    CHECK(v.len == strlen(want) && memcmp(v.data, want, v.len) == 0);
    tenure_item_free(it);
}

static void s10_a_fifo_queue_hands_out_items_in_order_once(void) {
    tenure *db = open_memory(NULL);
    tenure_queue *q = NULL;
    CHECK_OK(tenure_queue_new(db, "jobs", &q));
    tenure_item *it = (tenure_item *)1;
    CHECK_OK(tenure_queue_try_dequeue(q, &it));
    CHECK(it == NULL);
    CHECK_OK(tenure_queue_enqueue(q, S("one")));
    CHECK_OK(tenure_queue_enqueue(q, S("two")));
    CHECK_OK(tenure_queue_enqueue(q, S("three")));
    expect_item(q, "one");
    expect_item(q, "two");
    CHECK_OK(tenure_queue_try_dequeue(q, &it));
    CHECK(it != NULL && tenure_item_value(it).len == 5);
    tenure_item_free(it);
    CHECK_RC(tenure_queue_dequeue(q, 0, &it), TENURE_ERR_TIMEOUT);
    /* Misuse: the wrong enqueue for the kind, NULLs, a bad timeout. */
    CHECK_RC(tenure_queue_enqueue_priority(q, S("x"), 1), TENURE_ERR_INVALID_ARGUMENT);
    CHECK_MSG("FIFO queue");
    CHECK_RC(tenure_queue_dequeue(q, -2, &it), TENURE_ERR_INVALID_ARGUMENT);
    CHECK_RC(tenure_queue_dequeue(q, 0, NULL), TENURE_ERR_NULL_POINTER);
    CHECK_RC(tenure_queue_enqueue(NULL, S("x")), TENURE_ERR_NULL_POINTER);
    CHECK_RC(tenure_queue_new(db, NULL, &q), TENURE_ERR_NULL_POINTER);
    CHECK_RC(tenure_queue_try_dequeue(q, NULL), TENURE_ERR_NULL_POINTER);
    CHECK(tenure_item_value(NULL).data == NULL);
    tenure_item_free(NULL);
    tenure_queue_free(NULL);
    tenure_queue_free(q);
    tenure_close(db);
}

static void s10_a_priority_queue_serves_lower_priorities_first(void) {
    tenure *db = open_memory(NULL);
    tenure_queue *q = NULL;
    CHECK_OK(tenure_priority_queue_new(db, "pq", &q));
    CHECK_OK(tenure_queue_enqueue_priority(q, S("later"), 7));
    CHECK_OK(tenure_queue_enqueue_priority(q, S("first"), 0));
    CHECK_OK(tenure_queue_enqueue_priority(q, S("second"), 0));
    CHECK_OK(tenure_queue_enqueue_priority(q, S("last"), UINT16_MAX));
    tenure_kv *kv = NULL;
    CHECK_OK(tenure_get(db, S("pq/00000/0000000000000001"), &kv));
    CHECK(kv != NULL); /* etcd's layout: name/<priority>/<sequence> */
    tenure_kv_free(kv);
    expect_item(q, "first");
    expect_item(q, "second");
    expect_item(q, "later");
    expect_item(q, "last");
    CHECK_RC(tenure_queue_enqueue(q, S("x")), TENURE_ERR_INVALID_ARGUMENT);
    CHECK_MSG("priority queue");
    tenure_queue_free(q);
    tenure_close(db);
}

struct consumer {
    const tenure_queue *q;
    tenure_result rc;
    tenure_item *item;
};

static void *consume(void *arg) {
    struct consumer *c = arg;
    c->rc = tenure_queue_dequeue(c->q, -1, &c->item);
    return NULL;
}

/* The consumer may start waiting before or after the enqueue: either way it gets the item
 * (its wait reads the queue after its watch is in place). */
static void s10_a_waiting_dequeue_is_woken_by_an_enqueue_and_cancel_ends_it(void) {
    tenure *db = open_memory(NULL);
    tenure_queue *q = NULL;
    CHECK_OK(tenure_queue_new(db, "wake", &q));
    struct consumer c = {q, TENURE_OK, NULL};
    pthread_t t;
    CHECK(pthread_create(&t, NULL, consume, &c) == 0);
    CHECK_OK(tenure_queue_enqueue(q, S("hello")));
    pthread_join(t, NULL);
    CHECK_OK(c.rc);
    CHECK(c.item != NULL && tenure_item_value(c.item).len == 5);
    tenure_item_free(c.item);

    /* Cancel ends a waiting dequeue with TIMEOUT and takes nothing. */
    struct consumer w = {q, TENURE_OK, NULL};
    CHECK(pthread_create(&t, NULL, consume, &w) == 0);
    CHECK_OK(tenure_queue_cancel(q));
    pthread_join(t, NULL);
    CHECK_RC(w.rc, TENURE_ERR_TIMEOUT);
    CHECK(w.item == NULL);
    CHECK_OK(tenure_queue_enqueue(q, S("kept")));
    tenure_item *it = NULL;
    CHECK_OK(tenure_queue_try_dequeue(q, &it));
    CHECK(it != NULL);
    tenure_item_free(it);
    CHECK_RC(tenure_queue_cancel(NULL), TENURE_ERR_NULL_POINTER);
    tenure_queue_free(q);
    tenure_close(db);
}

void queue_tests(void) {
    RUN(s10_a_fifo_queue_hands_out_items_in_order_once);
    RUN(s10_a_priority_queue_serves_lower_priorities_first);
    RUN(s10_a_waiting_dequeue_is_woken_by_an_enqueue_and_cancel_ends_it);
}
