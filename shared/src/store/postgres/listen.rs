//! Many instances on one database: a committed ticket is announced with `NOTIFY` in its own
//! transaction (delivered only if it commits), every instance `LISTEN`s and arms its timer, and
//! the sweep takes turns (a row naming whose turn it is, and until when) so instances do not
//! repeat each other's work.

use super::{causes, unavailable, PostgresStore};
use crate::store::{StoreError, StoreResult};
use deadpool_postgres::GenericClient;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::mpsc;
use tokio_postgres::AsyncMessage;

/// The channel tickets are announced on. Its payload names the schema first: instances of
/// other deployments sharing the database (each in its own schema) ignore what is not theirs.
pub(super) const CHANNEL: &str = "countersign_tickets";

/// Inside a ticket's transaction: announce it at commit.
pub(super) async fn announce(tx: &impl GenericClient, tenant: &str, id: &str) -> StoreResult<()> {
    let stmt = tx
        .prepare_cached("SELECT pg_notify($1, current_schema() || ' ' || $2 || ' ' || $3)")
        .await
        .map_err(unavailable)?;
    tx.execute(&stmt, &[&CHANNEL, &tenant, &id])
        .await
        .map_err(unavailable)
        .map(drop)
}

/// Tickets committed by any instance while the listening session lasts; [`Listener::next`]
/// answers `None` when it ends (the caller listens again and polls the due index for what it
/// may have missed meanwhile).
pub struct Listener {
    payloads: mpsc::UnboundedReceiver<String>,
    schema: String,
    _session: tokio_postgres::Client,
}

impl Listener {
    /// The next ticket committed in this store's schema, as `(tenant, action id)`.
    pub async fn next(&mut self) -> Option<(String, String)> {
        while let Some(p) = self.payloads.recv().await {
            let mut parts = p.splitn(3, ' ');
            if let (Some(s), Some(tenant), Some(id)) = (parts.next(), parts.next(), parts.next()) {
                if s == self.schema {
                    return Some((tenant.to_owned(), id.to_owned()));
                }
            }
        }
        None
    }
}

impl PostgresStore {
    /// Listen for committed tickets on a session of its own (outside the pool).
    pub async fn listen(&self) -> StoreResult<Listener> {
        let (tx, payloads) = mpsc::unbounded_channel();
        let failed = |e: tokio_postgres::Error| StoreError::Unavailable(causes(&e));
        let session = match &self.tls {
            Some(tls) => {
                let (client, conn) = self.pg.connect(tls.clone()).await.map_err(failed)?;
                tokio::spawn(relay(conn, tx));
                client
            }
            None => {
                let (client, conn) = self
                    .pg
                    .connect(tokio_postgres::NoTls)
                    .await
                    .map_err(failed)?;
                tokio::spawn(relay(conn, tx));
                client
            }
        };
        let schema: String = session
            .query_one("SELECT current_schema()", &[])
            .await
            .map_err(unavailable)?
            .get(0);
        session
            .batch_execute(&format!("LISTEN {CHANNEL}"))
            .await
            .map_err(unavailable)?;
        Ok(Listener {
            payloads,
            schema,
            _session: session,
        })
    }

    /// Take the turn to sweep for `hold`, unless another instance's turn is still running:
    /// one row (`sweep_turn`) in one autocommitted statement, timed by the database's clock.
    /// Nothing is held while the pass runs its tools — no transaction (which a managed
    /// Postgres's `idle_in_transaction_session_timeout` would kill mid-pass) and no lock; a
    /// pass longer than `hold` does not keep the others from theirs (they may meet the same
    /// items: each claim is a conditional write, so only one runs each).
    pub async fn take_turn(&self, owner: &str, hold: std::time::Duration) -> StoreResult<bool> {
        let client = self.client().await?;
        let hold_ms = i64::try_from(hold.as_millis()).unwrap_or(i64::MAX);
        let taken = client
            .query_opt(
                "INSERT INTO sweep_turn AS t (id, owner, until)
                 VALUES (1, $1, now() + $2 * interval '1 millisecond')
                 ON CONFLICT (id) DO UPDATE SET owner = excluded.owner, until = excluded.until
                 WHERE t.until <= now()
                 RETURNING owner",
                &[&owner, &(hold_ms as f64)],
            )
            .await
            .map_err(unavailable)?;
        Ok(taken.is_some())
    }
}

/// Drive the listening session, passing each notification's payload on.
async fn relay<S, T>(mut conn: tokio_postgres::Connection<S, T>, tx: mpsc::UnboundedSender<String>)
where
    S: AsyncRead + AsyncWrite + Unpin,
    T: AsyncRead + AsyncWrite + Unpin,
{
    while let Some(message) = std::future::poll_fn(|cx| conn.poll_message(cx)).await {
        match message {
            Ok(AsyncMessage::Notification(n)) => {
                if tx.send(n.payload().to_owned()).is_err() {
                    return;
                }
            }
            Ok(_) => {}
            Err(e) => {
                tracing::warn!(error = %causes(&e), "the Postgres listening session ended");
                return;
            }
        }
    }
}
