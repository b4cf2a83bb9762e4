/* Use after close (SPEC D7): every call on another handle of a closed engine is
 * TENURE_ERR_CLOSED; handles are still freed one by one. */
#include <stdlib.h>

#include "check.h"

static void every_call_on_a_closed_engine_is_closed(void) {
    char path[512];
    test_path(path, sizeof path, "closed.tenure");
    tenure *db = NULL, *other = NULL, *third = NULL, *out = NULL;
    CHECK_OK(tenure_open(path, NULL, &db));
    CHECK_OK(tenure_clone(db, &other));
    CHECK_OK(tenure_clone(other, &third));
    int64_t lease = 0;
    CHECK_OK(tenure_lease_grant(db, 60000, 0, &lease));
    CHECK_OK(tenure_put(other, S("k"), S("v"), lease, OUT_I64));
    tenure_watcher *w = NULL;
    CHECK_OK(tenure_watch(third, S("k"), 0, 0, &w));
    tenure_txn *txn = NULL;
    CHECK_OK(tenure_txn_new(&txn));
    CHECK_OK(tenure_txn_get(txn, true, S("k")));

    tenure_close(db); /* closes the engine and frees this handle only */

    int64_t i64 = -9;
    bool b = true;
    uint64_t u64 = 7;
    tenure_kv *kv = NULL;
    tenure_kv_list *kvl = NULL;
    tenure_lease_info *info = NULL;
    tenure_lease_list *ll = NULL;
    tenure_expired *e = NULL;
    tenure_txn_response *r = NULL;
    tenure_watcher *w2 = NULL;
    tenure_event *ev = NULL;

    CHECK_RC(tenure_clone(other, &out), TENURE_ERR_CLOSED);
    CHECK_MSG("closed");
    CHECK_RC(tenure_put(other, S("k"), S("v"), 0, &i64), TENURE_ERR_CLOSED);
    CHECK_RC(tenure_get(other, S("k"), &kv), TENURE_ERR_CLOSED);
    CHECK_RC(tenure_delete(other, S("k"), &b), TENURE_ERR_CLOSED);
    CHECK_RC(tenure_delete_prefix(other, S("k"), &u64), TENURE_ERR_CLOSED);
    CHECK_RC(tenure_range(other, S("k"), 0, &kvl), TENURE_ERR_CLOSED);
    CHECK_RC(tenure_revision(other, &i64), TENURE_ERR_CLOSED);
    CHECK_RC(tenure_lease_grant(other, 1000, 0, &i64), TENURE_ERR_CLOSED);
    CHECK_RC(tenure_lease_grant(other, 1000, 4242, &i64), TENURE_ERR_CLOSED);
    CHECK_RC(tenure_lease_revoke(other, lease), TENURE_ERR_CLOSED);
    CHECK_RC(tenure_lease_renew(other, lease, &i64), TENURE_ERR_CLOSED);
    CHECK_RC(tenure_lease_time_to_live(other, lease, &info), TENURE_ERR_CLOSED);
    CHECK_RC(tenure_lease_attach(other, lease, S("k")), TENURE_ERR_CLOSED);
    CHECK_RC(tenure_lease_detach(other, lease, S("k")), TENURE_ERR_CLOSED);
    CHECK_RC(tenure_lease_of(other, S("k"), &i64), TENURE_ERR_CLOSED);
    CHECK_RC(tenure_lease_checkpoint(other, lease, 10), TENURE_ERR_CLOSED);
    CHECK_RC(tenure_leases(other, &ll), TENURE_ERR_CLOSED);
    CHECK_RC(tenure_promote(other, 0), TENURE_ERR_CLOSED);
    CHECK_RC(tenure_demote(other), TENURE_ERR_CLOSED);
    CHECK_RC(tenure_is_primary(other, &b), TENURE_ERR_CLOSED);
    CHECK_RC(tenure_expired_next(other, 0, &e), TENURE_ERR_CLOSED);
    CHECK_RC(tenure_expired_next(other, 100000, &e), TENURE_ERR_CLOSED);
    CHECK_RC(tenure_txn_commit(other, txn, &r), TENURE_ERR_CLOSED);
    CHECK_RC(tenure_watch(other, S("k"), 0, 0, &w2), TENURE_ERR_CLOSED);
    CHECK_RC(tenure_watcher_next(w, 0, &ev), TENURE_ERR_CLOSED);
    CHECK_RC(tenure_watcher_next(w, -1, &ev), TENURE_ERR_CLOSED);

    CHECK_EQ(i64, -9);
    CHECK(b);
    CHECK_EQ(u64, 7);
    CHECK(out == NULL && kv == NULL && kvl == NULL && info == NULL && ll == NULL);
    CHECK(e == NULL && r == NULL && w2 == NULL && ev == NULL);

    /* Stats stay readable after close, as in Rust: the final counters. */
    tenure_stats s;
    CHECK_OK(tenure_stats_read(other, &s));
    CHECK_EQ(s.granted, 1);
    CHECK_EQ(s.revision, 1);

    /* The file was released by the close, though other handles still exist. */
    tenure *again = NULL;
    CHECK_OK(tenure_open(path, NULL, &again));
    tenure_kv *kv2 = NULL;
    CHECK_OK(tenure_get(again, S("k"), &kv2));
    CHECK(kv2 != NULL);
    tenure_kv_free(kv2);
    tenure_close(again);

    tenure_close(third); /* closing a closed engine again is fine */
    tenure_free(other);
    tenure_watcher_free(w);
    tenure_txn_free(txn);
}

static void freeing_the_last_handle_closes_the_engine(void) {
    char path[512];
    test_path(path, sizeof path, "last.tenure");
    tenure *db = NULL, *other = NULL;
    CHECK_OK(tenure_open(path, NULL, &db));
    CHECK_OK(tenure_clone(db, &other));
    CHECK_OK(tenure_put(db, S("k"), S("v"), 0, OUT_I64));
    tenure_free(db); /* not the last: the engine stays open */
    CHECK_OK(tenure_put(other, S("k2"), S("v"), 0, OUT_I64));
    tenure *second = NULL;
    CHECK_RC(tenure_open(path, NULL, &second), TENURE_ERR_ALREADY_OPEN);
    tenure_free(other); /* the last: closes the engine and releases the file */
    CHECK_OK(tenure_open(path, NULL, &second));
    int64_t rev = 0;
    CHECK_OK(tenure_revision(second, &rev));
    CHECK_EQ(rev, 2);
    tenure_close(second);
}

void closed_tests(void) {
    RUN(every_call_on_a_closed_engine_is_closed);
    RUN(freeing_the_last_handle_closes_the_engine);
}
