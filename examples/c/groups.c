/* Splitting work among live workers (SPEC S12): three workers join the group "shards", each
 * through its own session; a partitioner names the owner of each job by consistent hashing
 * over the live members, and a group watch reports each join and leave. When a worker's
 * session ends (closed here; expired if its process dies) it leaves the group, and only the
 * jobs it owned move to the others.
 *
 * Build against an installed libtenure:
 *   cc -std=c11 groups.c $(pkg-config --cflags --libs tenure) -o groups
 */
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

#define WORKERS 3
#define JOBS 8

/* The primary owner of `job` (the first member of the partitioner's answer) into `out`. */
static void owner_of(const tenure_partitioner *p, const char *job, char *out, size_t cap) {
    tenure_member_list *owners = NULL;
    TRY(tenure_partitioner_members_for(p, (const uint8_t *)job, strlen(job), &owners));
    tenure_bytes id = tenure_member_list_id(owners, 0);
    snprintf(out, cap, "%.*s", (int)id.len, (const char *)id.data);
    tenure_member_list_free(owners);
}

int main(void) {
    tenure *db = NULL;
    TRY(tenure_open(NULL, NULL, &db));
    tenure_group_watcher *changes = NULL;
    TRY(tenure_group_watch(db, "shards", &changes));

    tenure_session *s[WORKERS];
    tenure_group *g[WORKERS];
    for (int i = 0; i < WORKERS; i++) {
        char id[16];
        snprintf(id, sizeof id, "worker-%d", i);
        TRY(tenure_session_new(db, 30000, &s[i]));
        TRY(tenure_group_new(s[i], "shards", &g[i]));
        TRY(tenure_group_join(g[i], id, (const uint8_t *)"cpu", 3));
    }
    tenure_member_list *members = NULL;
    TRY(tenure_group_members(db, "shards", &members));
    printf("%zu live members\n", tenure_member_list_len(members));
    tenure_member_list_free(members);

    tenure_partitioner *p = NULL;
    TRY(tenure_partitioner_new(db, "shards", 1, &p));
    char before[JOBS][16], after[16], job[16];
    for (int j = 0; j < JOBS; j++) {
        snprintf(job, sizeof job, "job-%d", j);
        owner_of(p, job, before[j], sizeof before[j]);
        printf("%s -> %s\n", job, before[j]);
    }

    /* worker-1's session ends: it leaves, and only its jobs move. */
    TRY(tenure_session_close(s[1]));
    for (int n = 0; n < WORKERS + 1; n++) {
        bool joined = false;
        tenure_member_list *who = NULL;
        TRY(tenure_group_watcher_next(changes, 10000, &joined, &who));
        tenure_bytes id = tenure_member_list_id(who, 0);
        printf("%s %.*s\n", joined ? "joined" : "left", (int)id.len, (const char *)id.data);
        tenure_member_list_free(who);
    }
    for (int j = 0; j < JOBS; j++) {
        snprintf(job, sizeof job, "job-%d", j);
        owner_of(p, job, after, sizeof after);
        if (strcmp(after, "worker-1") == 0 ||
            (strcmp(before[j], "worker-1") != 0 && strcmp(after, before[j]) != 0)) {
            fprintf(stderr, "%s moved from %s to %s\n", job, before[j], after);
            return 1;
        }
        if (strcmp(after, before[j]) != 0) printf("%s: %s -> %s\n", job, before[j], after);
    }

    tenure_partitioner_free(p);
    tenure_group_watcher_free(changes);
    for (int i = 0; i < WORKERS; i++) {
        tenure_group_free(g[i]);
        if (i != 1) TRY(tenure_session_close(s[i]));
        tenure_session_free(s[i]);
    }
    tenure_close(db);
    return 0;
}
