//! Grants as they loaded, remembered by id and version, for [`super::Grants::grants_for`]:
//! intake reads an agent's live grants for a tool on every call the policy would hold for a
//! person, and decoding each one again — its JSON, its digest checked — then compiling its
//! condition cost twelve times the rest of such a submit beside 164 grants (BENCHMARKS.md,
//! issue 33). A stored grant changes only by a write that raises its version (a use, a
//! revocation), so a record read at a version remembered is the grant remembered: the store
//! still reads every record, with its version and liveness, on every call — only the decoding
//! is skipped. What is remembered was decoded through the grant's own checks.

use crate::domain::grant::Grant;
use crate::store::StoreResult;
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
    pub fn grant(
        &self,
        tenant: &str,
        id: &str,
        version: u64,
        decode: impl FnOnce() -> StoreResult<Grant>,
    ) -> StoreResult<Grant> {
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
    pub fn keep(
        &self,
        tenant: &str,
        id: &str,
        version: u64,
        read: StoreResult<Grant>,
    ) -> StoreResult<Grant> {
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
