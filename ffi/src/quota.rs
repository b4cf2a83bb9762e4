//! The space quota, the alarms and what recovers from them: the file's size and
//! defragmentation (SPEC E20, E25).

use tenure_core::{Alarm, AlarmKind};

use crate::engine::{engine, tenure};
use crate::error::{guard, invalid, null, tenure_result, Res};
use crate::util::Out;

/// What an alarm is about (`tenure_alarm.kind`): etcd's `AlarmType` numbers.
pub type tenure_alarm_kind = i32;
/// The database file reached its space quota: puts, txns that put, grants, attaches and
/// detaches fail with `TENURE_ERR_QUOTA_EXCEEDED` until the alarm is disarmed.
pub const TENURE_ALARM_NOSPACE: tenure_alarm_kind = 1;
/// The data is corrupt: every write fails with `TENURE_ERR_UNAVAILABLE`; reads still work.
pub const TENURE_ALARM_CORRUPT: tenure_alarm_kind = 2;

/// A raised alarm: which member raised it (`tenure_options.member_id` for the engine's own)
/// and what about.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct tenure_alarm {
    /// The member that raised it.
    pub member: u64,
    /// `TENURE_ALARM_NOSPACE` or `TENURE_ALARM_CORRUPT`.
    pub kind: tenure_alarm_kind,
}

impl From<Alarm> for tenure_alarm {
    fn from(a: Alarm) -> tenure_alarm {
        tenure_alarm {
            member: a.member,
            kind: a.kind.etcd_number(),
        }
    }
}

/// The core's alarm of `a`, or `TENURE_ERR_INVALID_ARGUMENT` for a kind that is not one.
fn alarm_of(a: tenure_alarm) -> Res<Alarm> {
    let kind = AlarmKind::from_etcd_number(a.kind).ok_or_else(|| {
        invalid(format!(
            "unknown alarm kind {} (TENURE_ALARM_NOSPACE = 1, TENURE_ALARM_CORRUPT = 2)",
            a.kind
        ))
    })?;
    Ok(Alarm {
        member: a.member,
        kind,
    })
}

/// The file's size (`tenure_storage_size_read`, `tenure_defragment`).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct tenure_storage_size {
    /// The file's length in bytes: what the space quota judges.
    pub file_bytes: u64,
    /// Bytes in pages the database uses; the rest is free space `tenure_defragment` gives
    /// back.
    pub in_use_bytes: u64,
}

/// Copies the raised alarms (etcd's Alarm GET), in (kind, member) order, into the caller's
/// array `buf` of `len` entries and their number into `*out_n`. An array too small for them
/// all is `TENURE_ERR_INVALID_ARGUMENT`: nothing is written to `buf`, and `*out_n` is the
/// number needed, so the caller can allocate that and call again. `buf` may be NULL when
/// `len` is 0 (to ask how many). Over `tenure_connect`, the server's alarms.
///
/// Errors: `TENURE_ERR_NULL_POINTER`, `TENURE_ERR_INVALID_ARGUMENT`, `TENURE_ERR_CLOSED`,
/// `TENURE_ERR_UNAVAILABLE`.
#[no_mangle]
pub unsafe extern "C" fn tenure_alarms(
    db: *const tenure,
    buf: *mut tenure_alarm,
    len: usize,
    out_n: *mut usize,
) -> tenure_result {
    guard("tenure_alarms", || {
        // SAFETY: the caller promises a live handle and a writable `size_t`.
        let (db, out_n) = unsafe { (engine(db)?, Out::new(out_n, "out_n")?) };
        if buf.is_null() && len > 0 {
            return Err(null("buf"));
        }
        let alarms = db.alarms()?;
        if alarms.len() > len {
            out_n.set(alarms.len());
            return Err(invalid(format!(
                "`buf` holds {len} alarms; {} are raised",
                alarms.len()
            )));
        }
        for (i, a) in alarms.iter().enumerate() {
            // SAFETY: `i < alarms.len() <= len`, and the caller promises `len` writable
            // entries at `buf` (non-NULL: `len > 0` here).
            unsafe { buf.add(i).write((*a).into()) };
        }
        out_n.set(alarms.len());
        Ok(())
    })
}

/// Raises `alarm` (etcd's Alarm ACTIVATE): NOSPACE refuses the writes that need room with
/// `TENURE_ERR_QUOTA_EXCEEDED`, CORRUPT every write with `TENURE_ERR_UNAVAILABLE`. Durable on
/// return; `*out_changed` is false if it was raised already.
///
/// Errors: `TENURE_ERR_NULL_POINTER`, `TENURE_ERR_INVALID_ARGUMENT` (an unknown kind),
/// `TENURE_ERR_CLOSED`, `TENURE_ERR_STORAGE`, `TENURE_ERR_UNAVAILABLE`.
#[no_mangle]
pub unsafe extern "C" fn tenure_alarm_raise(
    db: *const tenure,
    alarm: tenure_alarm,
    out_changed: *mut bool,
) -> tenure_result {
    guard("tenure_alarm_raise", || {
        // SAFETY: the caller promises a live handle and a writable `bool`.
        let (db, out) = unsafe { (engine(db)?, Out::new(out_changed, "out_changed")?) };
        out.set(db.raise_alarm(alarm_of(alarm)?)?);
        Ok(())
    })
}

/// Disarms `alarm` (etcd's Alarm DEACTIVATE, `etcdctl alarm disarm`): writes are let in again
/// once no alarm of its kind is left. A NOSPACE alarm comes back at the next write that would
/// reach the quota: compact (`tenure_compact` with `physical`) and `tenure_defragment` first.
/// Durable on return; `*out_changed` is false if it was not raised.
///
/// Errors: as `tenure_alarm_raise`.
#[no_mangle]
pub unsafe extern "C" fn tenure_alarm_disarm(
    db: *const tenure,
    alarm: tenure_alarm,
    out_changed: *mut bool,
) -> tenure_result {
    guard("tenure_alarm_disarm", || {
        // SAFETY: the caller promises a live handle and a writable `bool`.
        let (db, out) = unsafe { (engine(db)?, Out::new(out_changed, "out_changed")?) };
        out.set(db.disarm_alarm(alarm_of(alarm)?)?);
        Ok(())
    })
}

/// The member ID the engine raises its own alarms as (`tenure_options.member_id`).
///
/// Errors: `TENURE_ERR_NULL_POINTER`, `TENURE_ERR_UNSUPPORTED` (a handle from
/// `tenure_connect`).
#[no_mangle]
pub unsafe extern "C" fn tenure_member_id(db: *const tenure, out: *mut u64) -> tenure_result {
    guard("tenure_member_id", || {
        // SAFETY: the caller promises a live handle and a writable pointer.
        let (db, out) = unsafe { (engine(db)?, Out::new(out, "out")?) };
        out.set(db.member_id()?);
        Ok(())
    })
}

/// The file's space quota in bytes (`tenure_options.quota_backend_bytes`); 0: none.
///
/// Errors: `TENURE_ERR_NULL_POINTER`, `TENURE_ERR_UNSUPPORTED` (a handle from
/// `tenure_connect`).
#[no_mangle]
pub unsafe extern "C" fn tenure_quota_backend_bytes(
    db: *const tenure,
    out: *mut u64,
) -> tenure_result {
    guard("tenure_quota_backend_bytes", || {
        // SAFETY: the caller promises a live handle and a writable pointer.
        let (db, out) = unsafe { (engine(db)?, Out::new(out, "out")?) };
        out.set(db.quota_backend_bytes()?.unwrap_or(0));
        Ok(())
    })
}

/// The file's length and the bytes in use (SPEC D10).
///
/// Errors: `TENURE_ERR_NULL_POINTER`, `TENURE_ERR_CLOSED`, `TENURE_ERR_STORAGE`,
/// `TENURE_ERR_UNSUPPORTED` (a handle from `tenure_connect`).
#[no_mangle]
pub unsafe extern "C" fn tenure_storage_size_read(
    db: *const tenure,
    out: *mut tenure_storage_size,
) -> tenure_result {
    guard("tenure_storage_size_read", || {
        // SAFETY: the caller promises a live handle and a writable struct.
        let (db, out) = unsafe { (engine(db)?, Out::new(out, "out")?) };
        let s = db.storage_size()?;
        out.set(tenure_storage_size {
            file_bytes: s.file_bytes,
            in_use_bytes: s.in_use_bytes,
        });
        Ok(())
    })
}

/// Gives the file's free pages back to the filesystem (SPEC D10) and writes the new size to
/// `*out`. Commits wait meanwhile; `TENURE_ERR_STORAGE` while a snapshot or a hash is reading
/// the file.
///
/// Errors: `TENURE_ERR_NULL_POINTER`, `TENURE_ERR_CLOSED`, `TENURE_ERR_STORAGE`,
/// `TENURE_ERR_UNSUPPORTED` (a handle from `tenure_connect`).
#[no_mangle]
pub unsafe extern "C" fn tenure_defragment(
    db: *const tenure,
    out: *mut tenure_storage_size,
) -> tenure_result {
    guard("tenure_defragment", || {
        // SAFETY: the caller promises a live handle and a writable struct.
        let (db, out) = unsafe { (engine(db)?, Out::new(out, "out")?) };
        let s = db.defragment()?;
        out.set(tenure_storage_size {
            file_bytes: s.file_bytes,
            in_use_bytes: s.in_use_bytes,
        });
        Ok(())
    })
}
