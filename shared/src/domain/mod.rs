//! The pure domain: no I/O, no clock reads (every rule takes `now`), no SDK types.

pub mod action;
pub mod actor;
pub mod admission;
pub mod audit;
pub mod call;
pub mod canonical;
pub mod condition;
pub mod context;
pub mod countersign;
pub mod deed;
pub mod next;
pub mod notice;
pub mod policy;
pub mod quorum;
pub mod resume;
pub mod seal;
pub mod slack;
pub mod state;
pub mod submission;
pub mod ticket;
pub mod time;
pub mod transition;
pub mod window;

pub use action::{
    Action, Actor, ActorKind, Decision, Lease, NextAction, Outcome, RunRef, Standing, State,
    Terminal,
};
pub use audit::Event;
pub use call::Call;
pub use seal::SealReason;
pub use submission::Submission;
pub use ticket::{AwaitReason, Ticket};
pub use transition::{Change, Creation, Transition};
pub use window::Window;

#[cfg(test)]
pub(crate) mod fixtures;
