//! The use cases over the ports. Each public method is one API operation or one wake.
//!
//! Races are decided by the store's conditional writes; every loser re-reads and reports
//! what won.

mod approval;
mod cancel;
mod commit;
mod decisions;
mod explain;
mod grants;
mod handle;
mod handoff;
mod insights;
mod intake;
mod notifications;
mod perform;
mod quarantine;
mod query;
mod resume;
mod runs;
mod sweep;

pub use decisions::{Ruling, RulingKind, MAX_DECISIONS};
pub use handle::Engine;
pub use insights::{Insights, MAX_RANGE, MAX_READ};
pub use intake::Submitted;
pub use query::{ListFilter, SCAN_FACTOR};
pub use resume::ResumeOutcome;
pub use sweep::SweepReport;
