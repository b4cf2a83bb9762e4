/* Groups and the partitioner from C (SPEC S12): join, members, the watch of joins and leaves,
 * a member whose session ends, the partitioner and misuse. */
#define _POSIX_C_SOURCE 200809L
#include <stdlib.h>

#include "check.h"

static void expect_change(tenure_group_watcher *w, bool joined, const char *id) {
    bool j = !joined;
    tenure_member_list *m = NULL;
    CHECK_OK(tenure_group_watcher_next(w, WAIT_MS, &j, &m));
    CHECK(j == joined);
    CHECK_EQ(tenure_member_list_len(m), 1);
    CHECK(bytes_eq(tenure_member_list_id(m, 0), id));
    tenure_member_list_free(m);
}

static void s12_groups_join_leave_watch_and_partition(void) {
    tenure *db = open_memory(NULL);
    tenure_group_watcher *w = NULL;
    CHECK_OK(tenure_group_watch(db, "workers", &w));
    tenure_session *a = new_session(db), *b = new_session(db);
    tenure_group *ga = NULL, *gb = NULL;
    CHECK_OK(tenure_group_new(a, "workers", &ga));
    CHECK_OK(tenure_group_new(b, "workers", &gb));
    CHECK_OK(tenure_group_join(ga, "w1", S("cpu")));
    CHECK_OK(tenure_group_join(gb, "w2", S("gpu")));
    expect_change(w, true, "w1");
    expect_change(w, true, "w2");
    tenure_member_list *l = NULL;
    CHECK_OK(tenure_group_members(db, "workers", &l));
    CHECK_EQ(tenure_member_list_len(l), 2);
    CHECK(bytes_eq(tenure_member_list_id(l, 0), "w1"));
    CHECK(bytes_eq(tenure_member_list_capabilities(l, 1), "gpu"));
    CHECK(tenure_member_list_id(l, 2).data == NULL);
    tenure_member_list_free(l);

    tenure_partitioner *p = NULL;
    CHECK_RC(tenure_partitioner_new(db, "workers", 0, &p), TENURE_ERR_INVALID_ARGUMENT);
    CHECK_OK(tenure_partitioner_new(db, "workers", 2, &p));
    CHECK_OK(tenure_partitioner_members_for(p, S("invoice-42"), &l));
    CHECK_EQ(tenure_member_list_len(l), 2);
    tenure_member_list *primary = NULL;
    CHECK_OK(tenure_partitioner_primary_for(p, S("invoice-42"), &primary));
    CHECK_EQ(tenure_member_list_len(primary), 1);
    CHECK(bytes_eq(tenure_member_list_id(primary, 0), "w1") ||
          bytes_eq(tenure_member_list_id(primary, 0), "w2"));
    tenure_bytes first = tenure_member_list_id(l, 0), pid = tenure_member_list_id(primary, 0);
    CHECK(first.len == pid.len && memcmp(first.data, pid.data, pid.len) == 0);
    tenure_member_list_free(primary);
    tenure_member_list_free(l);

    CHECK_RC(tenure_group_join(gb, "w1", S("")), TENURE_ERR_INVALID_ARGUMENT); /* joined as w2 */
    tenure_group *other = NULL;
    CHECK_OK(tenure_group_new(b, "workers", &other));
    CHECK_RC(tenure_group_join(other, "w1", S("")), TENURE_ERR_LOCKED);
    CHECK_RC(tenure_group_join(other, "a/b", S("")), TENURE_ERR_INVALID_ARGUMENT);
    tenure_group_free(other);

    CHECK_OK(tenure_group_leave(ga));
    expect_change(w, false, "w1");
    end_session(b); /* w2's session ends: it leaves */
    expect_change(w, false, "w2");
    CHECK_OK(tenure_partitioner_members_for(p, S("invoice-42"), &l));
    CHECK_EQ(tenure_member_list_len(l), 0);
    tenure_member_list_free(l);
    CHECK_OK(tenure_partitioner_primary_for(p, S("invoice-42"), &l));
    CHECK_EQ(tenure_member_list_len(l), 0); /* the group is empty */
    tenure_member_list_free(l);
    bool j;
    tenure_member_list *m = NULL;
    CHECK_RC(tenure_group_watcher_next(w, 10, &j, &m), TENURE_ERR_TIMEOUT);
    CHECK_RC(tenure_group_join(NULL, "x", S("")), TENURE_ERR_NULL_POINTER);
    CHECK_EQ(tenure_member_list_len(NULL), 0);
    tenure_member_list_free(NULL);
    tenure_group_watcher_free(NULL);
    tenure_partitioner_free(NULL);
    tenure_group_free(NULL);
    tenure_partitioner_free(p);
    tenure_group_watcher_free(w);
    tenure_group_free(ga);
    tenure_group_free(gb);
    end_session(a);
    tenure_close(db);
}

void group_tests(void) {
    RUN(s12_groups_join_leave_watch_and_partition);
}
