//! Leases over etcd: grant, revoke, renew (one keep-alive round trip), time-to-live, list.

use std::time::Duration;

use etcd_client as etcd;

use super::convert::{secs, ttl_secs};
use super::Remote;
use crate::error::{Error, Result};
use crate::limits::check_lease_id;
use crate::types::{LeaseId, LeaseInfo};

impl Remote {
    pub(crate) fn grant(&self, id: Option<LeaseId>, ttl: Duration) -> Result<LeaseInfo> {
        let secs_ttl = ttl_secs(ttl)?;
        if let Some(i) = id {
            check_lease_id(i.get())?;
        }
        let r = self.call(false, None, id, |mut c| {
            let o = id.map(|i| etcd::LeaseGrantOptions::new().with_id(i.get()));
            async move { c.lease_grant(secs_ttl, o).await }
        })?;
        self.seen(r.header());
        if !r.error().is_empty() {
            return Err(Error::storage(format!("server: {}", r.error())));
        }
        Ok(LeaseInfo {
            id: LeaseId::new(r.id()),
            ttl: secs(r.ttl()),
            remaining: Some(secs(r.ttl())),
            keys: Vec::new(),
        })
    }

    pub(crate) fn revoke(&self, id: LeaseId) -> Result<()> {
        let r = self.call(true, None, Some(id), |mut c| async move {
            c.lease_revoke(id.get()).await
        })?;
        self.seen(r.header());
        Ok(())
    }

    /// One keep-alive round trip; its deadline is at most `limit`.
    pub(crate) fn renew(&self, id: LeaseId, limit: Option<Duration>) -> Result<Duration> {
        let ttl = self.call(true, limit, Some(id), |mut c| async move {
            let (mut keeper, mut stream) = c.lease_keep_alive(id.get()).await?;
            keeper.keep_alive().await?;
            // A stream that ends unanswered is the server going away (retried), not a TTL 0.
            match stream.message().await? {
                Some(r) => Ok(r.ttl()),
                None => Err(etcd::Error::LeaseKeepAliveError(
                    "the keep-alive stream ended unanswered".into(),
                )),
            }
        })?;
        if ttl <= 0 {
            return Err(Error::LeaseNotFound(id));
        }
        Ok(secs(ttl))
    }

    pub(crate) fn time_to_live(&self, id: LeaseId) -> Result<LeaseInfo> {
        let r = self.call(true, None, Some(id), |mut c| async move {
            c.lease_time_to_live(
                id.get(),
                Some(etcd::LeaseTimeToLiveOptions::new().with_keys()),
            )
            .await
        })?;
        self.seen(r.header());
        if r.ttl() < 0 {
            return Err(Error::LeaseNotFound(id));
        }
        let mut keys = r.keys().to_vec();
        keys.sort();
        Ok(LeaseInfo {
            id,
            ttl: secs(r.granted_ttl()),
            remaining: Some(secs(r.ttl())),
            keys,
        })
    }

    pub(crate) fn leases(&self) -> Result<Vec<LeaseInfo>> {
        let r = self.call(true, None, None, |mut c| async move { c.leases().await })?;
        let mut out = Vec::new();
        for l in r.leases() {
            match self.time_to_live(LeaseId::new(l.id())) {
                Ok(info) => out.push(info),
                Err(Error::LeaseNotFound(_)) => {}
                Err(e) => return Err(e),
            }
        }
        out.sort_by_key(|l| l.remaining);
        Ok(out)
    }
}
