//! The configuration a running process serves, replaced whole without a restart (SC-OPS-03).
//!
//! A reload never edits the configuration an engine holds: it builds the engine anew over the
//! same store, waker, clock and runs ([`Engine::with_config`]) and swaps it in. Each operation
//! takes the engine once — a request the router of the engine current when it arrived, a wake
//! or a sweep pass the engine current when it began — and keeps it to its end, so it sees one
//! configuration throughout: a run that started under the old one finishes under it, and a
//! ticket committed under the old one meets the new catalog at its wake (SC-RES-04: its tool's
//! entry unchanged, it runs; changed, it is sealed `catalog_changed` and never sent).
//!
//! Where a new document comes from, and when, is the process's: the local server's file on
//! SIGHUP or when it changes (`embedded`), the AWS functions' SSM parameters at most every
//! `COUNTERSIGN_CONFIG_RECHECK` (`aws`). A document that does not load leaves the current
//! engine serving; [`Live::refused`] logs and counts it.

use crate::{api::Routes, config::Config, Engine};
use axum::{extract::Request, Router};
use std::sync::{Arc, Mutex, RwLock};
use tower::ServiceExt;

/// The engine now serving, and its router.
pub struct Live {
    current: RwLock<Arc<Engine>>,
    /// The current engine's router, built by the first request it serves (its rate-limit
    /// buckets with it: a reload starts them afresh, under the new `[limits]`).
    router: Mutex<Option<(Arc<Engine>, Router)>>,
}

/// Why a new document was not applied; both keep the current configuration.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// It was read and does not load (a syntax or validation error, a secret or deed key it
    /// names that this process lacks): `config_reloads{outcome="rejected"}` and
    /// `config_rejected`, which an alarm watches.
    Rejected,
    /// It could not be read (a file gone, SSM unreachable): `outcome="unreadable"`; the next
    /// trigger tries again.
    Unreadable,
}

impl Live {
    pub fn new(engine: Arc<Engine>) -> Arc<Live> {
        Arc::new(Live {
            current: RwLock::new(engine),
            router: Mutex::new(None),
        })
    }

    /// The engine now: take it once per operation.
    pub fn engine(&self) -> Arc<Engine> {
        self.current
            .read()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .clone()
    }

    /// The router of `routes` over the engine now (a process serves one set of routes: all of
    /// them locally, one function's on AWS).
    pub fn router(&self, routes: fn(Routes) -> Routes) -> Router {
        let engine = self.engine();
        let mut cached = self
            .router
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        match &*cached {
            Some((built_for, router)) if Arc::ptr_eq(built_for, &engine) => router.clone(),
            _ => {
                let router = crate::api::served(engine.clone(), routes);
                *cached = Some((engine, router.clone()));
                router
            }
        }
    }

    /// A router that hands each request whole to the router of the engine current when it
    /// arrives: what the local server serves.
    pub fn serve(self: &Arc<Self>, routes: fn(Routes) -> Routes) -> Router {
        let live = self.clone();
        Router::new().fallback_service(tower::service_fn(move |request: Request| {
            live.router(routes).oneshot(request)
        }))
    }

    /// Serve `config` from now on (`from` names where it came from, for the log). Operations
    /// under way keep the engine they took.
    pub fn apply(&self, from: &str, config: Arc<Config>) {
        self.replace(from, |current| current.with_config(config))
    }

    /// As [`Live::apply`], the engine built by `make` from the current one.
    pub fn replace(&self, from: &str, make: impl FnOnce(&Engine) -> Engine) {
        let mut current = self
            .current
            .write()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let next = Arc::new(make(&current));
        let tenants = next.config().tenants.len();
        *current = next;
        drop(current);
        tracing::info!(from, tenants, "configuration reloaded");
        crate::telemetry::config_reload("applied");
    }

    /// A new document from `from` was not applied: the current configuration stays.
    pub fn refused(&self, from: &str, why: Refusal, error: &dyn std::fmt::Display) {
        match why {
            Refusal::Rejected => {
                tracing::error!(from, %error, "configuration not reloaded: it does not load; the previous one stays");
                crate::telemetry::config_reload("rejected");
            }
            Refusal::Unreadable => {
                tracing::warn!(from, %error, "configuration not reloaded: it cannot be read; the previous one stays");
                crate::telemetry::config_reload("unreadable");
            }
        }
    }
}
