//! Coalescing: concurrent calls of one kind share one statement. A dispatcher takes every call
//! queued when a slot is free (at least one: a lone call goes at once, as it would alone) and
//! runs them together in a task of their own, so a caller that goes away mid-statement does
//! not abandon the others. While every slot is busy the next calls queue, so the busier the
//! database, the larger the batches: fewer round trips, statements and WAL flushes per call.

use std::{future::Future, sync::Arc};
use tokio::sync::{mpsc, oneshot, Semaphore};

/// The most calls one statement takes.
const MOST: usize = 256;

/// One call's way back to its caller.
pub(super) type Answer<R> = oneshot::Sender<R>;

pub(super) struct Batcher<T, R> {
    calls: mpsc::UnboundedSender<(T, Answer<R>)>,
}

// By hand: a derive would ask `T` and `R` to be `Clone` too.
impl<T, R> Clone for Batcher<T, R> {
    fn clone(&self) -> Self {
        Batcher {
            calls: self.calls.clone(),
        }
    }
}

impl<T: Send + 'static, R: Send + 'static> Batcher<T, R> {
    /// Dispatch calls to `run`, at most `slots` batches at a time. `run` answers every call it
    /// is given (a call it drops is answered as abandoned).
    pub(super) fn start<F, Fut>(slots: usize, run: F) -> Self
    where
        F: Fn(Vec<(T, Answer<R>)>) -> Fut + Send + 'static,
        Fut: Future<Output = ()> + Send + 'static,
    {
        let (calls, mut queued) = mpsc::unbounded_channel();
        let slots = Arc::new(Semaphore::new(slots.max(1)));
        tokio::spawn(async move {
            let mut taken = Vec::with_capacity(MOST);
            loop {
                let Ok(slot) = slots.clone().acquire_owned().await else {
                    return;
                };
                // Every sender gone: the store was dropped.
                if queued.recv_many(&mut taken, MOST).await == 0 {
                    return;
                }
                let batch = run(std::mem::take(&mut taken));
                tokio::spawn(async move {
                    batch.await;
                    drop(slot);
                });
            }
        });
        Batcher { calls }
    }

    /// Queue `call` and wait for its answer; `None` if it was abandoned (the runtime is
    /// shutting down).
    pub(super) async fn call(&self, call: T) -> Option<R> {
        let (answer, answered) = oneshot::channel();
        self.calls.send((call, answer)).ok()?;
        answered.await.ok()
    }
}
