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
pub mod email_link;
pub mod grant;
pub mod granted;
pub mod granting;
pub mod insights;
pub mod mail;
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

pub use action::{Action, Lease, Outcome, Standing};
pub use actor::{Actor, ActorKind};
pub use audit::Event;
pub use call::Call;
pub use next::NextAction;
pub use policy::Decision;
pub use seal::SealReason;
pub use state::{State, Terminal};
pub use submission::{RunRef, Submission};
pub use ticket::{AwaitReason, Ticket};
pub use transition::{Change, Creation, Transition};
pub use window::Window;

#[cfg(test)]
pub(crate) mod fixtures;
