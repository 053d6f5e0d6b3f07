//! The runs under way in this process, so a shutdown can stop new claims and wait for the
//! claimed ones to finish and commit (SC-EDGE-05).

use tokio::sync::watch;

#[derive(Debug, Clone, Copy, Default)]
struct Count {
    draining: bool,
    running: usize,
}

#[derive(Debug)]
pub(super) struct Runs(watch::Sender<Count>);

/// Held by one run from before its claim until its result committed.
#[must_use]
pub(super) struct Running<'a>(&'a Runs);

impl Runs {
    pub(super) fn new() -> Self {
        Runs(watch::channel(Count::default()).0)
    }

    /// A slot for a new claim; `None` once draining began. Checked and counted in one step, so
    /// no claim slips in after [`Runs::drain`] started counting.
    pub(super) fn enter(&self) -> Option<Running<'_>> {
        let mut entered = false;
        self.0.send_if_modified(|c| {
            entered = !c.draining;
            if entered {
                c.running += 1;
            }
            entered
        });
        // `then`, not `then_some`: a `Running` built and dropped would count a run that never was.
        entered.then(|| Running(self))
    }

    /// Refuse new claims, then wait until every run under way has ended.
    pub(super) async fn drain(&self) {
        self.0.send_modify(|c| c.draining = true);
        let mut count = self.0.subscribe();
        let _ = count.wait_for(|c| c.running == 0).await;
    }
}

impl Drop for Running<'_> {
    fn drop(&mut self) {
        self.0 .0.send_modify(|c| c.running -= 1);
    }
}

#[cfg(test)]
mod tests {
    use super::Runs;

    #[tokio::test]
    async fn drain_waits_for_runs_under_way_and_refuses_new_ones() {
        let runs = std::sync::Arc::new(Runs::new());
        let running = runs.enter().expect("not draining");
        let drained = tokio::spawn({
            let runs = runs.clone();
            async move { runs.drain().await }
        });
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        assert!(runs.enter().is_none(), "no new run once draining");
        assert!(!drained.is_finished(), "a run is still under way");
        drop(running);
        drained.await.unwrap();
    }
}
