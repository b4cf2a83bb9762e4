//! Groups and the partitioner (SPEC S12): membership on a session's lease, the live members,
//! their joins and leaves, and which members own a key.

use std::ffi::c_char;

use tenure_core::sync::{Group, GroupChange, GroupWatch, Member, Partitioner};

use super::locked;
use super::session::tenure_session;
use crate::engine::{engine, tenure};
use crate::error::{guard, invalid, shield, tenure_result};
use crate::kv::tenure_bytes;
use crate::util::{arg, boxed, bytes, free, text, timeout, Out};

/// A group handle (SPEC S12) of one session, from `tenure_group_new`: joins as one member at a
/// time. Thread-safe.
#[derive(Debug)]
pub struct tenure_group {
    g: Group,
}

/// A list of members (`tenure_group_members`, `tenure_partitioner_members_for`).
#[derive(Debug)]
pub struct tenure_member_list {
    members: Vec<Member>,
}

/// The joins and leaves of a group, from `tenure_group_watch`. Thread-safe (one reader at a time).
#[derive(Debug)]
pub struct tenure_group_watcher {
    w: std::sync::Mutex<GroupWatch>,
}

/// A partitioner over a group's live members, from `tenure_partitioner_new`. Thread-safe.
#[derive(Debug)]
pub struct tenure_partitioner {
    p: Partitioner,
}

/// The group `name` (NUL-terminated UTF-8), joined through session `s`. Free `*out` with
/// `tenure_group_free`.
///
/// Errors: `TENURE_ERR_NULL_POINTER`, `TENURE_ERR_INVALID_ARGUMENT` (name not UTF-8).
#[no_mangle]
pub unsafe extern "C" fn tenure_group_new(
    s: *const tenure_session,
    name: *const c_char,
    out: *mut *mut tenure_group,
) -> tenure_result {
    guard("tenure_group_new", || {
        // SAFETY: the caller promises a live session, a string and a writable pointer.
        let (s, name, out) = unsafe { (arg(s, "s")?, text(name, "name")?, Out::new(out, "out")?) };
        out.set(boxed(tenure_group {
            g: Group::new(&s.s, name),
        }));
        Ok(())
    })
}

/// Joins as `member` (NUL-terminated UTF-8) with `capabilities` (`capabilities_len` bytes);
/// again through the same session, updates them.
///
/// Errors: `TENURE_ERR_NULL_POINTER`, `TENURE_ERR_INVALID_ARGUMENT` (an ID empty, over 256
/// bytes, with '/', or this handle joined as another member), `TENURE_ERR_LOCKED` (another
/// session is that member), `TENURE_ERR_SESSION_EXPIRED`, `TENURE_ERR_CLOSED`.
#[no_mangle]
pub unsafe extern "C" fn tenure_group_join(
    g: *const tenure_group,
    member: *const c_char,
    capabilities: *const u8,
    capabilities_len: usize,
) -> tenure_result {
    guard("tenure_group_join", || {
        // SAFETY: the caller promises a live group, a string and readable bytes.
        let (g, member, caps) = unsafe {
            (
                arg(g, "g")?,
                text(member, "member")?,
                bytes(capabilities, capabilities_len, "capabilities")?,
            )
        };
        Ok(g.g.join(member, caps)?)
    })
}

/// Leaves the group (only this handle's membership; nothing if not joined).
///
/// Errors: `TENURE_ERR_NULL_POINTER`, `TENURE_ERR_STORAGE`, `TENURE_ERR_CLOSED`.
#[no_mangle]
pub unsafe extern "C" fn tenure_group_leave(g: *const tenure_group) -> tenure_result {
    guard("tenure_group_leave", || {
        // SAFETY: the caller promises a live group.
        Ok(unsafe { arg(g, "g") }?.g.leave()?)
    })
}

/// Frees a group handle (a membership it holds stays until `tenure_group_leave` or the end
/// of its session). NULL is a no-op.
#[no_mangle]
pub unsafe extern "C" fn tenure_group_free(g: *mut tenure_group) {
    // SAFETY: from tenure_group_new and freed once.
    shield("tenure_group_free", (), || unsafe { free(g) })
}

/// The live members of group `name`, in ID order. Free `*out` with `tenure_member_list_free`.
///
/// Errors: `TENURE_ERR_NULL_POINTER`, `TENURE_ERR_INVALID_ARGUMENT`, `TENURE_ERR_CLOSED`.
#[no_mangle]
pub unsafe extern "C" fn tenure_group_members(
    db: *const tenure,
    name: *const c_char,
    out: *mut *mut tenure_member_list,
) -> tenure_result {
    guard("tenure_group_members", || {
        // SAFETY: the caller promises a live handle, a string and a writable pointer.
        let (db, name, out) = unsafe { (engine(db)?, text(name, "name")?, Out::new(out, "out")?) };
        let members = Group::members(db, name)?;
        out.set(boxed(tenure_member_list { members }));
        Ok(())
    })
}

/// How many members a list has (0 if `l` is NULL).
#[no_mangle]
pub unsafe extern "C" fn tenure_member_list_len(l: *const tenure_member_list) -> usize {
    // SAFETY: the caller promises NULL or a live list.
    shield("tenure_member_list_len", 0, || {
        unsafe { l.as_ref() }.map_or(0, |l| l.members.len())
    })
}

fn member_at(l: *const tenure_member_list, i: usize) -> Option<&'static Member> {
    // SAFETY: the callers promise NULL or a live list; the borrow ends with it.
    unsafe { l.as_ref() }.and_then(|l| l.members.get(i))
}

/// The ID of member `i` (`{NULL, 0}` if out of range or `l` is NULL; not NUL-terminated).
/// Borrowed: valid while `l` lives.
#[no_mangle]
pub unsafe extern "C" fn tenure_member_list_id(
    l: *const tenure_member_list,
    i: usize,
) -> tenure_bytes {
    shield("tenure_member_list_id", tenure_bytes::NONE, || {
        member_at(l, i).map_or(tenure_bytes::NONE, |m| tenure_bytes::of(m.id.as_bytes()))
    })
}

/// The capabilities of member `i` (`{NULL, 0}` if out of range or `l` is NULL; empty in a
/// partitioner's answer). Borrowed: valid while `l` lives.
#[no_mangle]
pub unsafe extern "C" fn tenure_member_list_capabilities(
    l: *const tenure_member_list,
    i: usize,
) -> tenure_bytes {
    shield(
        "tenure_member_list_capabilities",
        tenure_bytes::NONE,
        || member_at(l, i).map_or(tenure_bytes::NONE, |m| tenure_bytes::of(&m.capabilities)),
    )
}

/// Frees a member list. NULL is a no-op.
#[no_mangle]
pub unsafe extern "C" fn tenure_member_list_free(l: *mut tenure_member_list) {
    // SAFETY: from this file and freed once.
    shield("tenure_member_list_free", (), || unsafe { free(l) })
}

/// Follows the joins and leaves of group `name` from now on. Free `*out` with
/// `tenure_group_watcher_free`.
///
/// Errors: `TENURE_ERR_NULL_POINTER`, `TENURE_ERR_INVALID_ARGUMENT`, `TENURE_ERR_CLOSED`.
#[no_mangle]
pub unsafe extern "C" fn tenure_group_watch(
    db: *const tenure,
    name: *const c_char,
    out: *mut *mut tenure_group_watcher,
) -> tenure_result {
    guard("tenure_group_watch", || {
        // SAFETY: the caller promises a live handle, a string and a writable pointer.
        let (db, name, out) = unsafe { (engine(db)?, text(name, "name")?, Out::new(out, "out")?) };
        let w = Group::watch(db, name)?;
        out.set(boxed(tenure_group_watcher {
            w: std::sync::Mutex::new(w),
        }));
        Ok(())
    })
}

/// The next join or leave, waiting up to `timeout_ms` (-1: no limit): `*out_joined` says
/// which, `*out_member` (free with `tenure_member_list_free`) holds the one member (its
/// capabilities are empty for a leave).
///
/// Errors: `TENURE_ERR_NULL_POINTER`, `TENURE_ERR_INVALID_ARGUMENT` (`timeout_ms` below -1),
/// `TENURE_ERR_TIMEOUT`, `TENURE_ERR_COMPACTED` (fell behind: list the members and watch
/// again), `TENURE_ERR_CLOSED`.
#[no_mangle]
pub unsafe extern "C" fn tenure_group_watcher_next(
    w: *const tenure_group_watcher,
    timeout_ms: i64,
    out_joined: *mut bool,
    out_member: *mut *mut tenure_member_list,
) -> tenure_result {
    guard("tenure_group_watcher_next", || {
        // SAFETY: the caller promises a live watch and writable pointers.
        let (w, joined, member) = unsafe {
            (
                arg(w, "w")?,
                Out::new(out_joined, "out_joined")?,
                Out::new(out_member, "out_member")?,
            )
        };
        let change = locked(&w.w).next(timeout(timeout_ms)?)?;
        let (j, m) = match change {
            GroupChange::Joined(m) => (true, m),
            GroupChange::Left(id) => (
                false,
                Member {
                    id,
                    capabilities: Vec::new(),
                },
            ),
        };
        joined.set(j);
        member.set(boxed(tenure_member_list { members: vec![m] }));
        Ok(())
    })
}

/// Frees a group watch. NULL is a no-op.
#[no_mangle]
pub unsafe extern "C" fn tenure_group_watcher_free(w: *mut tenure_group_watcher) {
    // SAFETY: from tenure_group_watch and freed once.
    shield("tenure_group_watcher_free", (), || unsafe { free(w) })
}

/// A partitioner over group `group` handing out `replicas` members per key (1 to 64). Free
/// `*out` with `tenure_partitioner_free`.
///
/// Errors: `TENURE_ERR_NULL_POINTER`, `TENURE_ERR_INVALID_ARGUMENT` (`replicas` out of range,
/// name not UTF-8).
#[no_mangle]
pub unsafe extern "C" fn tenure_partitioner_new(
    db: *const tenure,
    group: *const c_char,
    replicas: i64,
    out: *mut *mut tenure_partitioner,
) -> tenure_result {
    guard("tenure_partitioner_new", || {
        // SAFETY: the caller promises a live handle, a string and a writable pointer.
        let (db, group, out) =
            unsafe { (engine(db)?, text(group, "group")?, Out::new(out, "out")?) };
        let replicas = usize::try_from(replicas)
            .map_err(|_| invalid(format!("replicas {replicas}: must be 1 to 64")))?;
        out.set(boxed(tenure_partitioner {
            p: Partitioner::new(db, group, replicas)?,
        }));
        Ok(())
    })
}

/// The members owning `key` (`key_len` bytes) now, primary first: `replicas` of them, fewer if
/// the group has fewer. Free `*out` with `tenure_member_list_free`.
///
/// Errors: `TENURE_ERR_NULL_POINTER`, `TENURE_ERR_CLOSED`.
#[no_mangle]
pub unsafe extern "C" fn tenure_partitioner_members_for(
    p: *const tenure_partitioner,
    key: *const u8,
    key_len: usize,
    out: *mut *mut tenure_member_list,
) -> tenure_result {
    guard("tenure_partitioner_members_for", || {
        // SAFETY: the caller promises a live partitioner, readable bytes, a writable pointer.
        let (p, key, out) = unsafe {
            (
                arg(p, "p")?,
                bytes(key, key_len, "key")?,
                Out::new(out, "out")?,
            )
        };
        let members =
            p.p.members_for(key)?
                .into_iter()
                .map(|id| Member {
                    id,
                    capabilities: Vec::new(),
                })
                .collect();
        out.set(boxed(tenure_member_list { members }));
        Ok(())
    })
}

/// The primary owner of `key` (`key_len` bytes) now, as a list of one member (the first of
/// `tenure_partitioner_members_for`, whatever `replicas` is), or of none when the group is
/// empty. Free `*out` with `tenure_member_list_free`.
///
/// Errors: `TENURE_ERR_NULL_POINTER`, `TENURE_ERR_CLOSED`.
#[no_mangle]
pub unsafe extern "C" fn tenure_partitioner_primary_for(
    p: *const tenure_partitioner,
    key: *const u8,
    key_len: usize,
    out: *mut *mut tenure_member_list,
) -> tenure_result {
    guard("tenure_partitioner_primary_for", || {
        // SAFETY: the caller promises a live partitioner, readable bytes, a writable pointer.
        let (p, key, out) = unsafe {
            (
                arg(p, "p")?,
                bytes(key, key_len, "key")?,
                Out::new(out, "out")?,
            )
        };
        let members = p.p.primary_for(key)?.into_iter().map(|id| Member {
            id,
            capabilities: Vec::new(),
        });
        out.set(boxed(tenure_member_list {
            members: members.collect(),
        }));
        Ok(())
    })
}

/// Frees a partitioner. NULL is a no-op.
#[no_mangle]
pub unsafe extern "C" fn tenure_partitioner_free(p: *mut tenure_partitioner) {
    // SAFETY: from tenure_partitioner_new and freed once.
    shield("tenure_partitioner_free", (), || unsafe { free(p) })
}
