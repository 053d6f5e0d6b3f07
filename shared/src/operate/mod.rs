//! Operator features: what `countersign-server` runs for an operator beside serving — the
//! store-wide invariant check (`verify`) and the policy table runner (`policy test`). Neither
//! changes a store; both stand over the ports and the domain, like the engine.

pub mod invariants;
pub mod policy_table;
