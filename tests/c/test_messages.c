/* Errors a person can act on: each message names its object (which database is closed, what
 * timed out after how long, which path is a directory) and a refused TTL shows the TTL given,
 * in the one wording of every language. */
#include "check.h"

static void l2_ttl_refusals_show_the_ttl_given_in_ms(void) {
    tenure *db = open_memory(NULL);
    int64_t id = 0;
    CHECK_RC(tenure_lease_grant(db, 0, 0, &id), TENURE_ERR_INVALID_ARGUMENT);
    CHECK_MSG("lease TTL must be more than 0 and at most 9000000000 s, got 0 ms");
    CHECK_RC(tenure_lease_grant(db, -5, 0, &id), TENURE_ERR_INVALID_ARGUMENT);
    CHECK_MSG("lease TTL must be more than 0 and at most 9000000000 s, got -5 ms");
    CHECK_RC(tenure_lease_grant(db, 9000000001000, 0, &id), TENURE_ERR_LEASE_TTL_TOO_LARGE);
    CHECK_MSG("lease TTL must be more than 0 and at most 9000000000 s, got 9000000001000 ms");
    tenure_close(db);
}

static void d7_closed_names_the_database(void) {
    char path[512];
    test_path(path, sizeof path, "named.tenure");
    tenure *db = NULL, *other = NULL;
    CHECK_OK(tenure_open(path, NULL, &db));
    CHECK_OK(tenure_clone(db, &other));
    tenure_close(db);
    CHECK_RC(tenure_put(other, S("k"), S("v"), 0, OUT_I64), TENURE_ERR_CLOSED);
    CHECK_MSG(path);
    CHECK_MSG("is closed");
    CHECK_RC(tenure_revision(other, OUT_I64), TENURE_ERR_CLOSED);
    CHECK_MSG(path);
    tenure_close(other);
}

static void timeouts_say_what_they_waited_for_and_how_long(void) {
    tenure *db = open_memory(NULL);
    tenure_expired *e = NULL;
    CHECK_RC(tenure_expired_next(db, 10, &e), TENURE_ERR_TIMEOUT);
    CHECK_MSG("timed out after 10 ms waiting for an expired lease");
    tenure_watcher *w = NULL;
    tenure_event *ev = NULL;
    CHECK_OK(tenure_watch(db, S("k"), 0, 0, &w));
    CHECK_RC(tenure_watcher_next(w, 1500, &ev), TENURE_ERR_TIMEOUT);
    CHECK_MSG("timed out after 1.5 s waiting for a watch event");
    tenure_watcher_free(w);
    tenure_close(db);
}

static void d5_a_directory_or_an_empty_path_is_named_as_such(void) {
    tenure *db = NULL;
    CHECK_RC(tenure_open(test_dir(), NULL, &db), TENURE_ERR_STORAGE);
    CHECK_MSG("s a directory");
    CHECK_MSG(test_dir());
    CHECK_RC(tenure_open("", NULL, &db), TENURE_ERR_INVALID_ARGUMENT);
    CHECK_MSG("path must not be empty");
    CHECK(db == NULL);
}

void message_tests(void) {
    RUN(l2_ttl_refusals_show_the_ttl_given_in_ms);
    RUN(d7_closed_names_the_database);
    RUN(timeouts_say_what_they_waited_for_and_how_long);
    RUN(d5_a_directory_or_an_empty_path_is_named_as_such);
}
