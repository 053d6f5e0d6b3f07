//! The local server's configuration file: read and loaded at start, and again on SIGHUP or
//! when its content changes (SC-OPS-03), the running configuration kept when the new one does
//! not load.

use crate::{
    boot::live::{Live, Refusal},
    config::{Config, ConfigError},
};
use std::{
    path::{Path, PathBuf},
    sync::Arc,
};

/// The local server's configuration from its text: parsed, the deed keys it names read, and
/// the secrets of its tools and notifications checked — at start and at every reload alike.
pub fn load_config(text: &str) -> Result<Config, ConfigError> {
    let config = Config::from_toml(text)?.read_keys()?;
    // The process that runs tools checks its webhook secrets where it boots.
    crate::tools::secrets::check(&config, &Default::default(), false)?;
    // And it sends the notifications: their secrets too.
    crate::notify::check_secrets(&config, &Default::default(), false)?;
    Ok(config)
}

/// The configuration file's text (an error names the file).
pub fn read_config(path: &Path) -> Result<String, ConfigError> {
    std::fs::read_to_string(path)
        .map_err(|e| ConfigError(format!("cannot read {}: {e}", path.display())))
}

/// How often the local server looks at its configuration file for a change (a `stat`; the
/// file is read and hashed only when its time or length moved).
pub const CONFIG_POLL: std::time::Duration = std::time::Duration::from_secs(2);

/// The configuration file and what it held when last looked at.
pub(super) struct ConfigFile {
    path: PathBuf,
    /// Modification time and length at the last look (`None`: unreadable then), and the
    /// SHA-256 of the text last read: a `touch`, or the same text written again, is no change.
    stat: Option<(Option<std::time::SystemTime>, u64)>,
    digest: [u8; 32],
}

impl ConfigFile {
    pub(super) fn new(path: PathBuf, booted: &str) -> ConfigFile {
        ConfigFile {
            path,
            // Unknown: the first look reads the file, in case it changed since the start.
            stat: Some((None, u64::MAX)),
            digest: sha256(booted),
        }
    }

    /// Look at the file; on a change (or when `forced`: SIGHUP) load it and serve it, or keep
    /// the current configuration if it does not load. A file that stays unreadable is
    /// reported once, not at every look.
    fn look(&mut self, live: &Live, forced: bool) {
        let from = self.path.display().to_string();
        let stat = std::fs::metadata(&self.path).map(|m| (m.modified().ok(), m.len()));
        let text = match stat {
            Ok(stat) if !forced && self.stat == Some(stat) => return,
            Ok(stat) => read_config(&self.path).map(|text| (stat, text)),
            Err(e) => Err(ConfigError(format!("cannot read {from}: {e}"))),
        };
        let (stat, text) = match text {
            Ok(read) => read,
            Err(e) => {
                if forced || self.stat.is_some() {
                    live.refused(&from, Refusal::Unreadable, &e);
                }
                self.stat = None;
                return;
            }
        };
        self.stat = Some(stat);
        let digest = sha256(&text);
        if !forced && digest == self.digest {
            return;
        }
        self.digest = digest;
        match load_config(&text) {
            Ok(config) => live.apply(&from, Arc::new(config)),
            Err(e) => live.refused(&from, Refusal::Rejected, &e),
        }
    }
}

fn sha256(text: &str) -> [u8; 32] {
    use sha2::Digest;
    sha2::Sha256::digest(text.as_bytes()).into()
}

/// Look at the configuration file every `every`, and load it on every SIGHUP.
pub(super) async fn watch_config(
    live: Arc<Live>,
    mut file: ConfigFile,
    every: std::time::Duration,
) {
    use tokio::signal::unix::{signal, SignalKind};
    let mut hangups = match signal(SignalKind::hangup()) {
        Ok(s) => Some(s),
        Err(e) => {
            tracing::warn!(error = %e, "cannot listen for SIGHUP; the configuration file is still watched");
            None
        }
    };
    let mut poll = tokio::time::interval(every);
    poll.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        let forced = tokio::select! {
            Some(()) = hangup(&mut hangups) => true,
            _ = poll.tick() => false,
        };
        file.look(&live, forced);
    }
}

async fn hangup(hangups: &mut Option<tokio::signal::unix::Signal>) -> Option<()> {
    match hangups {
        Some(s) => s.recv().await,
        None => std::future::pending().await,
    }
}
