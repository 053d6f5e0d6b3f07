//! The SQLite adapter's threads: one writer with group commit, a few readers with a
//! connection each, and the checkpointer (the adapter's module documentation says why).

use super::{lock, unavailable};
use crate::store::{StoreError, StoreResult};
use rusqlite::Connection;
use std::sync::{mpsc, Arc, Mutex};
use tokio::sync::oneshot;

/// Most writes one group commit takes; the rest wait for the next (bounds a batch's latency).
const MAX_BATCH: usize = 256;

/// How long a busy writer waits for more writes before it commits ([`gathering`]). Each commit
/// writes every page it changed once into the log, whole, whatever number of writes share it,
/// so under load a batch that waits for its siblings writes fewer pages per write: with 64
/// clients ≈ 20 % fewer bytes on disk per lifecycle (BENCHMARKS.md, 2 Dec), at ≤ 1 ms more per
/// write. As PostgreSQL's `commit_delay`, it applies only when others are writing.
const GATHER: std::time::Duration = std::time::Duration::from_millis(1);

/// A batch of at least this many writes shows the store busy: the next batch gathers.
const BUSY: usize = 4;

/// How long the next batch waits for more writes, after a batch of `previous` writes: a lone
/// write (an idle store) commits at once.
fn gathering(previous: usize) -> std::time::Duration {
    match previous >= BUSY {
        true => GATHER,
        false => std::time::Duration::ZERO,
    }
}

/// How often the checkpoint thread copies the log back into the database while writes go on.
/// (SQLite's automatic checkpoint runs inside the commit that crosses 1,000 pages of log, and
/// holds up every write of that batch; a burst of claims crosses it every few batches.)
const CHECKPOINT_EVERY: std::time::Duration = std::time::Duration::from_millis(250);

/// The writer's and the checkpointer's thread names (at most 15 bytes: Linux cuts a longer one),
/// by which the bench tells their bytes on disk apart: the log's frames, the checkpoints.
pub const WRITER_THREAD: &str = "cs-sqlite-write";
pub const CHECKPOINT_THREAD: &str = "cs-sqlite-ckpt";
const READER_THREAD: &str = "cs-sqlite-read";

/// One read: runs on a reader thread, answers its caller itself.
pub(super) type Read = Box<dyn FnOnce(&mut Connection) + Send>;

/// One write: runs inside the batch's transaction, returns the rows it changed.
pub(super) type Write = Box<dyn FnOnce(&Connection) -> StoreResult<usize> + Send>;

pub(super) struct Queued {
    pub(super) write: Write,
    pub(super) answer: oneshot::Sender<StoreResult<usize>>,
}

/// Start the writer, the checkpointer (a file database) and the readers; answer the queues
/// the store sends its reads and writes to. Every thread ends when the last clone of the store
/// (its last sender) is dropped.
pub(super) fn spawn(
    writer: Arc<Mutex<Connection>>,
    readers: Vec<Arc<Mutex<Connection>>>,
    checkpointer: Option<Connection>,
) -> (mpsc::Sender<Read>, mpsc::Sender<Queued>) {
    let (writes, queue) = mpsc::channel();
    let (wrote, written) = mpsc::sync_channel(1);
    std::thread::Builder::new()
        .name(WRITER_THREAD.into())
        .spawn(move || group_commit(&writer, &queue, &wrote))
        .expect("spawn the SQLite writer thread");
    if let Some(conn) = checkpointer {
        std::thread::Builder::new()
            .name(CHECKPOINT_THREAD.into())
            .spawn(move || checkpoints(&conn, &written))
            .expect("spawn the SQLite checkpoint thread");
    }
    let (reads, jobs) = mpsc::channel::<Read>();
    let jobs = Arc::new(Mutex::new(jobs));
    for conn in readers {
        let jobs = jobs.clone();
        std::thread::Builder::new()
            .name(READER_THREAD.into())
            .spawn(move || serve_reads(&conn, &jobs))
            .expect("spawn an SQLite reader thread");
    }
    (reads, writes)
}

/// A reader thread: one read at a time from the shared queue, until the store is dropped.
fn serve_reads(conn: &Mutex<Connection>, jobs: &Mutex<mpsc::Receiver<Read>>) {
    loop {
        // The queue's lock is held only while taking a job, not while running it.
        let next = match jobs.lock() {
            Ok(jobs) => jobs.recv(),
            Err(_) => return,
        };
        let Ok(read) = next else { return };
        match conn.lock() {
            Ok(mut conn) => read(&mut conn),
            // Dropping the read answers its caller with "stopped".
            Err(_) => return,
        }
    }
}

/// The checkpoint thread: after writes, at most every [`CHECKPOINT_EVERY`], copy the log back
/// into the database (PASSIVE: never waits for, nor holds up, the writer or the readers; once
/// all is copied the writer starts the log from its beginning again). Ends with the writer.
fn checkpoints(conn: &Connection, written: &mpsc::Receiver<()>) {
    let mut next = std::time::Instant::now();
    while written.recv().is_ok() {
        while let Some(left) = next.checked_duration_since(std::time::Instant::now()) {
            if let Err(mpsc::RecvTimeoutError::Disconnected) = written.recv_timeout(left) {
                return;
            }
        }
        if let Err(e) = conn.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |_| Ok(())) {
            tracing::warn!(error = %e, "SQLite checkpoint failed; the next one retries");
        }
        next = std::time::Instant::now() + CHECKPOINT_EVERY;
    }
}

/// The writer thread: take what has queued (at least one write, and, when the store is busy,
/// what comes within [`GATHER`]), run each in its own savepoint of one transaction, commit
/// once, then answer every caller with its own outcome.
fn group_commit(
    conn: &Mutex<Connection>,
    queue: &mpsc::Receiver<Queued>,
    wrote: &mpsc::SyncSender<()>,
) {
    let mut previous = 0;
    while let Ok(first) = queue.recv() {
        let until = std::time::Instant::now() + gathering(previous);
        let mut batch = vec![first];
        while batch.len() < MAX_BATCH {
            let next = match until.checked_duration_since(std::time::Instant::now()) {
                Some(left) if !left.is_zero() => queue.recv_timeout(left).ok(),
                _ => queue.try_recv().ok(),
            };
            match next {
                Some(next) => batch.push(next),
                None => break,
            }
        }
        previous = batch.len();
        let answers = match lock(conn) {
            Ok(conn) => commit_batch(&conn, batch),
            Err(e) => {
                let e = e.to_string();
                batch
                    .into_iter()
                    .map(|q| (q.answer, Err(StoreError::Unavailable(e.clone()))))
                    .collect()
            }
        };
        for (answer, outcome) in answers {
            // A caller that gave up (its request was dropped) needs no answer.
            let _ = answer.send(outcome);
        }
        // Full: a checkpoint is due anyway. Disconnected: in memory, no log.
        let _ = wrote.try_send(());
    }
}

type Answer = (oneshot::Sender<StoreResult<usize>>, StoreResult<usize>);

fn commit_batch(conn: &Connection, batch: Vec<Queued>) -> Vec<Answer> {
    if let Err(e) = conn.execute_batch("BEGIN IMMEDIATE") {
        let e = e.to_string();
        return batch
            .into_iter()
            .map(|q| (q.answer, Err(StoreError::Unavailable(e.clone()))))
            .collect();
    }
    let mut answers: Vec<Answer> = batch
        .into_iter()
        .map(|q| (q.answer, in_savepoint(conn, q.write)))
        .collect();
    if let Err(e) = conn.execute_batch("COMMIT") {
        // Nothing of the batch is durable: every write fails, even those whose condition held.
        let _ = conn.execute_batch("ROLLBACK");
        for (_, outcome) in &mut answers {
            *outcome = Err(StoreError::Unavailable(format!("group commit failed: {e}")));
        }
    }
    answers
}

/// One write in its own savepoint: on any error only this write is undone.
fn in_savepoint(conn: &Connection, write: Write) -> StoreResult<usize> {
    run(conn, "SAVEPOINT write")?;
    let outcome = write(conn);
    let ended = if outcome.is_ok() {
        run(conn, "RELEASE write")
    } else {
        run(conn, "ROLLBACK TO write").and_then(|()| run(conn, "RELEASE write"))
    };
    ended.and(outcome)
}

/// A statement without parameters, from the connection's statement cache.
fn run(conn: &Connection, sql: &str) -> StoreResult<()> {
    conn.prepare_cached(sql)
        .and_then(|mut s| s.execute([]))
        .map(drop)
        .map_err(unavailable)
}

#[cfg(test)]
mod tests {
    use super::{gathering, BUSY, CHECKPOINT_THREAD, GATHER, READER_THREAD, WRITER_THREAD};
    use std::time::Duration;

    /// A lone write on an idle store commits at once; a batch that found the store busy makes
    /// the next one wait for its siblings (what saves bytes on disk under load).
    #[test]
    fn sc_edge_03_only_a_busy_writer_gathers() {
        for previous in 0..BUSY {
            assert_eq!(gathering(previous), Duration::ZERO, "{previous}");
        }
        assert_eq!(gathering(BUSY), GATHER);
        assert_eq!(gathering(256), GATHER);
    }

    /// Linux keeps 15 bytes of a thread's name; the bench tells the threads apart by them.
    #[test]
    fn sc_edge_03_store_thread_names_fit_linux() {
        for name in [WRITER_THREAD, CHECKPOINT_THREAD, READER_THREAD] {
            assert!(name.len() <= 15, "{name}");
        }
        assert_ne!(WRITER_THREAD, CHECKPOINT_THREAD);
        assert_ne!(READER_THREAD, WRITER_THREAD);
    }
}
