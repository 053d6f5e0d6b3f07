//! Cost and errors in one place: every request asks for its consumed capacity with index
//! writes broken out (`ReturnConsumedCapacity=INDEXES`) and reports it through [`meter`].

use crate::store::StoreError;
use aws_sdk_dynamodb::{
    error::{DisplayErrorContext, SdkError},
    types::{ConsumedCapacity, ReturnConsumedCapacity},
};

/// What every request asks for: the total and the share of each index.
pub(super) const CAPACITY: ReturnConsumedCapacity = ReturnConsumedCapacity::Indexes;

/// Whether a request reads or writes: on-demand tables report one figure per request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Units {
    Read,
    Write,
}

/// Log the product's cost of one request: target `countersign::store::dynamodb`, message
/// `dynamodb consumed capacity`, fields `op`, `capacity_units` (total, indexes included),
/// `read_units`/`write_units` (the same total on its side) and `index_units` (the share of the
/// secondary indexes).
pub(super) fn meter<'a>(
    op: &'static str,
    units: Units,
    consumed: impl IntoIterator<Item = &'a ConsumedCapacity>,
) {
    let (mut total, mut index) = (0.0, 0.0);
    for c in consumed {
        total += c.capacity_units().unwrap_or(0.0);
        index += c
            .global_secondary_indexes()
            .into_iter()
            .flat_map(|m| m.values())
            .chain(
                c.local_secondary_indexes()
                    .into_iter()
                    .flat_map(|m| m.values()),
            )
            .filter_map(|i| i.capacity_units())
            .sum::<f64>();
    }
    let (read, write) = match units {
        Units::Read => (total, 0.0),
        Units::Write => (0.0, total),
    };
    tracing::info!(
        target: "countersign::store::dynamodb",
        op,
        capacity_units = total,
        read_units = read,
        write_units = write,
        index_units = index,
        "dynamodb consumed capacity"
    );
}

pub(super) fn unavailable<E, R>(op: &str, e: SdkError<E, R>) -> StoreError
where
    E: std::error::Error + 'static,
    R: std::fmt::Debug,
{
    StoreError::Unavailable(format!("{op}: {}", DisplayErrorContext(e)))
}

pub(super) fn malformed(e: impl std::fmt::Display) -> StoreError {
    StoreError::Malformed(e.to_string())
}
