//! etcd's Alarm over `connect` (SPEC E20): list, raise and disarm, as `etcdctl alarm` does.

use etcd_client as etcd;

use super::Remote;
use crate::alarms::{Alarm, AlarmKind};
use crate::error::Result;

impl Remote {
    /// Every raised alarm, in (kind, member) order; kinds this build does not know are left
    /// out.
    pub(crate) fn alarms(&self) -> Result<Vec<Alarm>> {
        let r = self.call(true, None, None, |mut c| async move {
            c.alarm(etcd::AlarmAction::Get, etcd::AlarmType::None, None)
                .await
        })?;
        let mut out: Vec<Alarm> = r
            .alarms()
            .iter()
            .filter_map(|m| {
                Some(Alarm {
                    member: m.member_id(),
                    kind: AlarmKind::from_etcd_number(m.alarm() as i32)?,
                })
            })
            .collect();
        out.sort_by_key(|a| (a.kind, a.member));
        Ok(out)
    }

    /// Raises (`raised`) or disarms `alarm`; false if it already was so (etcd answers a change
    /// with the alarm, and nothing otherwise).
    pub(crate) fn set_alarm(&self, alarm: Alarm, raised: bool) -> Result<bool> {
        let action = if raised {
            etcd::AlarmAction::Activate
        } else {
            etcd::AlarmAction::Deactivate
        };
        let kind = match alarm.kind {
            AlarmKind::NoSpace => etcd::AlarmType::Nospace,
            AlarmKind::Corrupt => etcd::AlarmType::Corrupt,
        };
        // Raising twice or disarming twice changes nothing: safe to repeat.
        let r = self.call(true, None, None, |mut c| async move {
            let mut opts = etcd::AlarmOptions::new();
            opts.with_member(alarm.member);
            c.alarm(action, kind, Some(opts)).await
        })?;
        Ok(!r.alarms().is_empty())
    }
}
