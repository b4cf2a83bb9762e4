/* Leases through the C API: grant, revoke, renew, time to live, attach/detach, lease_of,
 * checkpoint, the lease list, promote/demote (SPEC L1-L9). Time is a manual clock. */
#include <stdlib.h>

#include "check.h"

static void grant_allocates_fresh_ids_and_honours_explicit_ones(void) {
    tenure *db = open_memory(NULL);
    int64_t a = 0, b = 0, c = 0;
    CHECK_OK(tenure_lease_grant(db, 10000, 0, &a));
    CHECK_OK(tenure_lease_grant(db, 10000, 0, &b));
    CHECK(a > 0 && b > 0 && a != b);
    CHECK_OK(tenure_lease_grant(db, 10000, 777, &c));
    CHECK_EQ(c, 777);

    int64_t keep = -5;
    CHECK_RC(tenure_lease_grant(db, 10000, 777, &keep), TENURE_ERR_LEASE_EXISTS);
    CHECK_MSG("lease 777 already exists");
    CHECK_RC(tenure_lease_grant(db, 10000, -3, &keep), TENURE_ERR_INVALID_ARGUMENT);
    CHECK_RC(tenure_lease_grant(db, 0, 0, &keep), TENURE_ERR_INVALID_ARGUMENT);
    CHECK_RC(tenure_lease_grant(db, -1, 0, &keep), TENURE_ERR_INVALID_ARGUMENT);
    CHECK_MSG("lease TTL must be more than 0");
    CHECK_RC(tenure_lease_grant(db, INT64_MIN, 0, &keep), TENURE_ERR_INVALID_ARGUMENT);
    CHECK_RC(tenure_lease_grant(db, INT64_MAX, 0, &keep), TENURE_ERR_LEASE_TTL_TOO_LARGE);
    CHECK_MSG("at most 9000000000 s");
    /* 9 000 000 000 s is the largest TTL; one ms more is too large. */
    CHECK_RC(tenure_lease_grant(db, 9000000000LL * 1000 + 1, 0, &keep),
             TENURE_ERR_LEASE_TTL_TOO_LARGE);
    int64_t max = 0;
    CHECK_OK(tenure_lease_grant(db, 9000000000LL * 1000, 0, &max));
    CHECK_EQ(keep, -5);

    tenure_stats s;
    CHECK_OK(tenure_stats_read(db, &s));
    CHECK_EQ(s.granted, 4);
    CHECK_EQ(s.leases, 4);
    tenure_close(db);
}

static void revoke_deletes_attached_keys_and_unknown_ids_are_not_found(void) {
    tenure *db = open_memory(NULL);
    int64_t id = 0, rev = 0, rev2 = 0;
    CHECK_OK(tenure_lease_grant(db, 10000, 0, &id));
    CHECK_OK(tenure_put(db, S("svc/a"), S("1"), id, &rev));
    CHECK_OK(tenure_put(db, S("svc/b"), S("2"), id, &rev));
    CHECK_OK(tenure_put(db, S("other"), S("3"), 0, &rev));
    CHECK_OK(tenure_lease_revoke(db, id));
    tenure_kv *kv = (tenure_kv *)1;
    CHECK_OK(tenure_get(db, S("svc/a"), &kv));
    CHECK(kv == NULL);
    CHECK_OK(tenure_get(db, S("other"), &kv));
    CHECK(kv != NULL);
    tenure_kv_free(kv);
    /* One revision for the whole revoke. */
    CHECK_OK(tenure_revision(db, &rev2));
    CHECK_EQ(rev2, rev + 1);

    CHECK_RC(tenure_lease_revoke(db, id), TENURE_ERR_LEASE_NOT_FOUND);
    CHECK_RC(tenure_lease_revoke(db, 0), TENURE_ERR_LEASE_NOT_FOUND);
    CHECK_RC(tenure_lease_revoke(db, -1), TENURE_ERR_LEASE_NOT_FOUND);
    tenure_stats s;
    CHECK_OK(tenure_stats_read(db, &s));
    CHECK_EQ(s.revoked, 1);
    CHECK_EQ(s.leases, 0);
    CHECK_EQ(s.keys, 1);
    tenure_close(db);
}

static void renew_restarts_the_deadline_and_returns_the_ttl(void) {
    tenure_clock *clock = NULL;
    CHECK_OK(tenure_clock_manual_new(&clock));
    tenure *db = open_memory(clock);
    int64_t id = 0, ttl = 0;
    CHECK_OK(tenure_lease_grant(db, 2000, 0, &id));
    CHECK_OK(tenure_clock_advance(clock, 1500));
    tenure_lease_info *info = NULL;
    CHECK_OK(tenure_lease_time_to_live(db, id, &info));
    CHECK_EQ(tenure_lease_info_remaining_ms(info), 500);
    tenure_lease_info_free(info);

    CHECK_OK(tenure_lease_renew(db, id, &ttl));
    CHECK_EQ(ttl, 2000);
    CHECK_OK(tenure_lease_time_to_live(db, id, &info));
    CHECK_EQ(tenure_lease_info_remaining_ms(info), 2000);
    tenure_lease_info_free(info);

    int64_t keep = 9;
    CHECK_RC(tenure_lease_renew(db, 31337, &keep), TENURE_ERR_LEASE_NOT_FOUND);
    CHECK_MSG("31337");
    CHECK_EQ(keep, 9);
    tenure_stats s;
    CHECK_OK(tenure_stats_read(db, &s));
    CHECK_EQ(s.renewed, 1);
    tenure_close(db);
    tenure_clock_free(clock);
}

static void time_to_live_reports_ttl_remaining_and_keys_in_order(void) {
    tenure_clock *clock = NULL;
    CHECK_OK(tenure_clock_manual_new(&clock));
    tenure *db = open_memory(clock);
    int64_t id = 0;
    CHECK_OK(tenure_lease_grant(db, 1000, 0, &id));
    CHECK_OK(tenure_put(db, S("b"), S(""), id, OUT_I64));
    CHECK_OK(tenure_put(db, S("a"), S(""), id, OUT_I64));
    CHECK_OK(tenure_lease_attach(db, id, S("c")));
    CHECK_OK(tenure_clock_advance(clock, 400));

    tenure_lease_info *info = NULL;
    CHECK_OK(tenure_lease_time_to_live(db, id, &info));
    CHECK_EQ(tenure_lease_info_id(info), id);
    CHECK_EQ(tenure_lease_info_ttl_ms(info), 1000);
    CHECK_EQ(tenure_lease_info_remaining_ms(info), 600);
    CHECK_EQ(tenure_lease_info_key_count(info), 3);
    CHECK(bytes_eq(tenure_lease_info_key(info, 0), "a"));
    CHECK(bytes_eq(tenure_lease_info_key(info, 1), "b"));
    CHECK(bytes_eq(tenure_lease_info_key(info, 2), "c"));
    tenure_bytes none = tenure_lease_info_key(info, 3);
    CHECK(none.data == NULL && none.len == 0);
    none = tenure_lease_info_key(info, SIZE_MAX);
    CHECK(none.data == NULL && none.len == 0);
    tenure_lease_info_free(info);

    info = (tenure_lease_info *)1;
    CHECK_RC(tenure_lease_time_to_live(db, id + 1000, &info), TENURE_ERR_LEASE_NOT_FOUND);
    CHECK(info == (tenure_lease_info *)1);
    tenure_close(db);
    tenure_clock_free(clock);
}

static void attach_detach_and_lease_of_follow_spec_l6(void) {
    tenure *db = open_memory(NULL);
    int64_t a = 0, b = 0, of = -1;
    CHECK_OK(tenure_lease_grant(db, 10000, 0, &a));
    CHECK_OK(tenure_lease_grant(db, 10000, 0, &b));
    CHECK_OK(tenure_lease_of(db, S("k"), &of));
    CHECK_EQ(of, 0);
    CHECK_OK(tenure_lease_attach(db, a, S("k")));
    CHECK_OK(tenure_lease_of(db, S("k"), &of));
    CHECK_EQ(of, a);
    /* Attaching to another lease moves the key. */
    CHECK_OK(tenure_lease_attach(db, b, S("k")));
    CHECK_OK(tenure_lease_of(db, S("k"), &of));
    CHECK_EQ(of, b);
    /* Detaching from the wrong lease leaves it alone. */
    CHECK_OK(tenure_lease_detach(db, a, S("k")));
    CHECK_OK(tenure_lease_of(db, S("k"), &of));
    CHECK_EQ(of, b);
    CHECK_OK(tenure_lease_detach(db, b, S("k")));
    CHECK_OK(tenure_lease_of(db, S("k"), &of));
    CHECK_EQ(of, 0);

    CHECK_RC(tenure_lease_attach(db, 999999, S("k")), TENURE_ERR_LEASE_NOT_FOUND);
    CHECK_RC(tenure_lease_detach(db, 999999, S("k")), TENURE_ERR_LEASE_NOT_FOUND);
    CHECK_RC(tenure_lease_attach(db, a, NULL, 0), TENURE_ERR_INVALID_ARGUMENT);
    CHECK_MSG("key must not be empty");
    CHECK_RC(tenure_lease_attach(db, a, (const uint8_t *)"k", SIZE_MAX),
             TENURE_ERR_INVALID_ARGUMENT);
    CHECK_MSG("PTRDIFF_MAX");
    /* An empty key is never attached. */
    CHECK_OK(tenure_lease_of(db, NULL, 0, &of));
    CHECK_EQ(of, 0);
    tenure_close(db);
}

static void checkpoint_is_used_by_promote_l8_l9(void) {
    tenure_clock *clock = NULL;
    CHECK_OK(tenure_clock_manual_new(&clock));
    tenure *db = open_memory(clock);
    int64_t id = 0;
    bool primary = false;
    CHECK_OK(tenure_lease_grant(db, 10000, 0, &id));
    CHECK_OK(tenure_lease_checkpoint(db, id, 3000));
    /* A checkpoint does not move the current deadline. */
    tenure_lease_info *info = NULL;
    CHECK_OK(tenure_lease_time_to_live(db, id, &info));
    CHECK_EQ(tenure_lease_info_remaining_ms(info), 10000);
    tenure_lease_info_free(info);

    CHECK_OK(tenure_demote(db));
    CHECK_OK(tenure_is_primary(db, &primary));
    CHECK(!primary);
    CHECK_OK(tenure_lease_time_to_live(db, id, &info));
    CHECK_EQ(tenure_lease_info_remaining_ms(info), -1); /* no deadline on a standby */
    CHECK_EQ(tenure_lease_info_ttl_ms(info), 10000);
    tenure_lease_info_free(info);
    CHECK_RC(tenure_lease_renew(db, id, OUT_I64), TENURE_ERR_NOT_PRIMARY);
    CHECK_MSG("not the primary");

    CHECK_RC(tenure_promote(db, -1), TENURE_ERR_INVALID_ARGUMENT);
    CHECK_OK(tenure_promote(db, 500));
    CHECK_OK(tenure_is_primary(db, &primary));
    CHECK(primary);
    CHECK_OK(tenure_lease_time_to_live(db, id, &info));
    CHECK_EQ(tenure_lease_info_remaining_ms(info), 3500); /* extend + checkpointed remaining */
    tenure_lease_info_free(info);

    CHECK_RC(tenure_lease_checkpoint(db, id, -1), TENURE_ERR_INVALID_ARGUMENT);
    CHECK_RC(tenure_lease_checkpoint(db, id + 1, 10), TENURE_ERR_LEASE_NOT_FOUND);
    tenure_close(db);
    tenure_clock_free(clock);
}

static void leases_lists_every_live_lease_by_remaining_time(void) {
    tenure_clock *clock = NULL;
    CHECK_OK(tenure_clock_manual_new(&clock));
    tenure *db = open_memory(clock);
    int64_t slow = 0, fast = 0, mid = 0;
    CHECK_OK(tenure_lease_grant(db, 30000, 0, &slow));
    CHECK_OK(tenure_lease_grant(db, 10000, 0, &fast));
    CHECK_OK(tenure_lease_grant(db, 20000, 0, &mid));
    CHECK_OK(tenure_lease_attach(db, mid, S("m")));

    tenure_lease_list *list = NULL;
    CHECK_OK(tenure_leases(db, &list));
    CHECK_EQ(tenure_lease_list_len(list), 3);
    CHECK_EQ(tenure_lease_info_id(tenure_lease_list_get(list, 0)), fast);
    CHECK_EQ(tenure_lease_info_id(tenure_lease_list_get(list, 1)), mid);
    CHECK_EQ(tenure_lease_info_id(tenure_lease_list_get(list, 2)), slow);
    const tenure_lease_info *m = tenure_lease_list_get(list, 1);
    CHECK_EQ(tenure_lease_info_ttl_ms(m), 20000);
    CHECK_EQ(tenure_lease_info_key_count(m), 1);
    CHECK(bytes_eq(tenure_lease_info_key(m, 0), "m"));
    CHECK(tenure_lease_list_get(list, 3) == NULL);
    tenure_lease_list_free(list);

    CHECK_OK(tenure_lease_revoke(db, fast));
    CHECK_OK(tenure_lease_revoke(db, mid));
    CHECK_OK(tenure_lease_revoke(db, slow));
    CHECK_OK(tenure_leases(db, &list));
    CHECK_EQ(tenure_lease_list_len(list), 0);
    CHECK(tenure_lease_list_get(list, 0) == NULL);
    tenure_lease_list_free(list);
    tenure_close(db);
    tenure_clock_free(clock);
}

static void min_ttl_raises_short_ttls(void) {
    tenure_options o;
    tenure *db = NULL;
    tenure_options_init(&o);
    o.min_ttl_ms = 5000;
    CHECK_OK(tenure_open(NULL, &o, &db));
    int64_t id = 0, ttl = 0;
    CHECK_OK(tenure_lease_grant(db, 1000, 0, &id));
    CHECK_OK(tenure_lease_renew(db, id, &ttl));
    CHECK_EQ(ttl, 5000);
    tenure_close(db);
}

void lease_tests(void) {
    RUN(grant_allocates_fresh_ids_and_honours_explicit_ones);
    RUN(revoke_deletes_attached_keys_and_unknown_ids_are_not_found);
    RUN(renew_restarts_the_deadline_and_returns_the_ttl);
    RUN(time_to_live_reports_ttl_remaining_and_keys_in_order);
    RUN(attach_detach_and_lease_of_follow_spec_l6);
    RUN(checkpoint_is_used_by_promote_l8_l9);
    RUN(leases_lists_every_live_lease_by_remaining_time);
    RUN(min_ttl_raises_short_ttls);
}
