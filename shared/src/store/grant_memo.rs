//! Grants as they loaded, remembered by id and version, for [`super::Grants::grants_for`]:
//! intake reads an agent's live grants for a tool on every call the policy would hold for a
//! person, and decoding each one again — its JSON, its digest checked — then compiling its
//! condition cost twelve times the rest of such a submit beside 164 grants (BENCHMARKS.md,
//! issue 33). A stored grant changes only by a write that raises its version (a use, a
//! revocation), so a record read at a version remembered is the grant remembered: the store
//! still reads every record, with its version and liveness, on every call — only the decoding
//! is skipped. What is remembered was decoded through the grant's own checks.

use crate::domain::grant::Grant;
use std::collections::HashMap;
use std::sync::Mutex;

/// How many grants a store remembers; past it, it forgets them all and starts again (a
/// tenant's live grants are few; a bound keeps a process's memory whatever the store holds).
const REMEMBERED: usize = 10_000;

#[derive(Default)]
pub struct GrantMemo {
    /// By id (`grt_` + a ULID: one per approval); the tenant and version are checked on a hit.
    loaded: Mutex<HashMap<String, Grant>>,
}

impl GrantMemo {
    /// The grant of `tenant` stored as `id` at `version`: the one remembered at that version,
    /// else `decode`d from its record (through its checks) and remembered.
    pub fn grant<E>(
        &self,
        tenant: &str,
        id: &str,
        version: u64,
        decode: impl FnOnce() -> Result<Grant, E>,
    ) -> Result<Grant, E> {
        match self.remembered(tenant, id, version) {
            Some(g) => Ok(g),
            None => self.keep(tenant, id, version, decode()),
        }
    }

    /// The grant remembered for `tenant`'s `id` at `version`, if any.
    pub fn remembered(&self, tenant: &str, id: &str, version: u64) -> Option<Grant> {
        let remembered = self.lock().get(id).cloned();
        remembered.filter(|g| (g.tenant(), g.version()) == (tenant, version))
    }

    /// `read`, the record of `tenant`'s `id` at `version` decoded, remembered when it loaded.
    /// A record whose body disagrees with its key or version columns is answered as it
    /// decoded, never remembered under them; a damaged one is never remembered.
    pub fn keep<E>(
        &self,
        tenant: &str,
        id: &str,
        version: u64,
        read: Result<Grant, E>,
    ) -> Result<Grant, E> {
        if let Ok(g) = &read {
            if (g.tenant(), g.id(), g.version()) == (tenant, id, version) {
                let mut loaded = self.lock();
                if loaded.len() >= REMEMBERED {
                    loaded.clear();
                }
                loaded.insert(id.to_owned(), g.clone());
            }
        }
        read
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Grant>> {
        // Nothing panics while holding it; a poisoned map is still a map of checked grants.
        self.loaded.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::grant::{GrantedBy, Terms, FORMAT};
    use std::cell::Cell;

    fn grant(tenant: &str) -> Grant {
        let at: jiff::Timestamp = "2031-01-01T00:00:00Z".parse().unwrap();
        Grant::new(Terms {
            format: FORMAT.into(),
            id: "grt_01J0000000000000000000000A".into(),
            tenant: tenant.into(),
            agent_id: "agent-1".into(),
            tool: "mail.send".into(),
            rule: 1,
            rule_label: "mail.*".into(),
            approvals: 1,
            from_action: "act_01J0000000000000000000000A".into(),
            granted_by: GrantedBy {
                approver: "fin-1".into(),
                person: None,
                groups: Vec::new(),
            },
            granted_at: at,
            expires_at: at + jiff::SignedDuration::from_hours(1),
            uses: 3,
            pins: serde_json::Map::new(),
            when: Some("args.amount <= 100".into()),
        })
    }

    /// SC-GR-02: intake matches the grants as stored — a record read again at the version
    /// remembered is not decoded again; at another version, of another tenant, or where its
    /// body disagrees with its columns, it is decoded (through its checks) as if nothing
    /// were remembered, and what does not load is never remembered.
    #[test]
    fn sc_gr_02_a_grant_is_decoded_once_per_version() {
        let memo = GrantMemo::default();
        let decoded = Cell::new(0);
        let read = |tenant: &str, version: u64, stored: &Grant| {
            let decode = || {
                decoded.set(decoded.get() + 1);
                Ok::<_, &str>(stored.clone())
            };
            memo.grant(tenant, stored.id(), version, decode).unwrap()
        };
        let g = grant("acme");
        assert_eq!(read("acme", 1, &g), g);
        assert_eq!(read("acme", 1, &g), g);
        assert_eq!(decoded.get(), 1, "remembered at version 1");
        let used = g.spend("2031-01-01T00:01:00Z".parse().unwrap()).unwrap();
        assert_eq!(read("acme", 2, &used), used);
        assert_eq!(read("acme", 2, &used).uses_left(), 2);
        assert_eq!(decoded.get(), 2, "the next version decoded once");
        let other = grant("other");
        assert_eq!(read("other", 1, &other), other);
        assert_eq!(
            decoded.get(),
            3,
            "another tenant's record of that id is its own"
        );
        // A body at version 1 under a column saying 3: answered as decoded, never remembered.
        read("acme", 3, &g);
        read("acme", 3, &g);
        assert_eq!(decoded.get(), 5);
        let refused = || Err::<Grant, _>("grant: its terms do not match");
        assert!(memo.grant("acme", g.id(), 4, refused).is_err());
        assert!(memo.grant("acme", g.id(), 4, refused).is_err());
    }
}
