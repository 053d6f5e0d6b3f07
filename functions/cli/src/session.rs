//! The token `countersign login` keeps: one file, by default in the user's config directory
//! (`$XDG_CONFIG_HOME/countersign/token.json`, else `~/.config/countersign/token.json`), or where
//! `--token-file` / `COUNTERSIGN_TOKEN_FILE` says. Created with mode 0600 (its folder 0700 when
//! the CLI makes it); a file that others may read or write is refused, not used: the token signs
//! approvals.

use crate::exit::{Exit, Failure};
use serde_json::{json, Value};
use std::{
    fs,
    io::Write,
    os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt},
    path::{Path, PathBuf},
};

/// A stored sign-in: the token, the server it was asked for, and what refreshing it needs.
#[derive(Debug)]
pub struct Session {
    /// The server's base URL; the token is sent nowhere else.
    pub url: String,
    pub issuer: String,
    /// The CLI's client at the provider, the provider's token endpoint and the resource the
    /// token is for (RFC 8707): what a refresh sends again.
    pub client_id: String,
    pub token_endpoint: String,
    pub resource: String,
    pub access_token: String,
    /// `None` when the provider gave none: the sign-in then ends with the access token.
    pub refresh_token: Option<String>,
    /// Unix seconds; `None` when the provider did not say.
    pub expires_at: Option<i64>,
}

pub const AGAIN: &str = "run countersign login";

/// Where the token lives: the given file, else the user's config directory.
pub fn path(given: Option<&Path>) -> Result<PathBuf, Failure> {
    if let Some(given) = given.filter(|p| !p.as_os_str().is_empty()) {
        return Ok(given.to_owned());
    }
    let config = std::env::var_os("XDG_CONFIG_HOME")
        .filter(|d| !d.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".config")))
        .ok_or_else(|| {
            Failure::new(
                Exit::Usage,
                "neither XDG_CONFIG_HOME nor HOME is set: name the file with --token-file",
            )
        })?;
    Ok(config.join("countersign").join("token.json"))
}

fn io(what: &str, path: &Path, e: std::io::Error) -> Failure {
    Failure::new(
        Exit::Failure,
        format!("cannot {what} {}: {e}", path.display()),
    )
}

impl Session {
    /// Written beside the old file with mode 0600, then renamed over it: never a moment where
    /// the token is on disk readable by others, nor half written.
    pub fn save(&self, path: &Path) -> Result<(), Failure> {
        let dir = match path.parent() {
            Some(dir) if !dir.as_os_str().is_empty() => dir,
            _ => Path::new("."),
        };
        fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .map_err(|e| io("create", dir, e))?;
        let name = path.file_name().unwrap_or_default().to_string_lossy();
        let temp = dir.join(format!(".{name}.{}.tmp", std::process::id()));
        let _ = fs::remove_file(&temp);
        let body = json!({
            "url": self.url,
            "issuer": self.issuer,
            "client_id": self.client_id,
            "token_endpoint": self.token_endpoint,
            "resource": self.resource,
            "access_token": self.access_token,
            "refresh_token": self.refresh_token,
            "expires_at": self.expires_at,
        });
        let mut file = fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&temp)
            .map_err(|e| io("write", &temp, e))?;
        file.write_all(body.to_string().as_bytes())
            .and_then(|()| file.sync_all())
            .map_err(|e| io("write", &temp, e))?;
        fs::rename(&temp, path).map_err(|e| io("write", path, e))
    }

    /// The stored sign-in, if any. A file that group or others may read or write is refused.
    pub fn load(path: &Path) -> Result<Option<Session>, Failure> {
        let meta = match fs::metadata(path) {
            Ok(meta) => meta,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(io("read", path, e)),
        };
        let mode = meta.permissions().mode() & 0o777;
        if mode & 0o077 != 0 {
            return Err(Failure::new(
                Exit::Unauthenticated,
                format!(
                    "{} may be read by others (mode {mode:o}, not 600), so its token is not \
                     used: remove it (countersign logout) and {AGAIN}",
                    path.display()
                ),
            ));
        }
        let text = fs::read(path).map_err(|e| io("read", path, e))?;
        let stored: Value = serde_json::from_slice(&text).unwrap_or(Value::Null);
        let field = |name: &str| stored[name].as_str().map(str::to_owned);
        let needed = (
            field("url"),
            field("issuer"),
            field("client_id"),
            field("token_endpoint"),
            field("resource"),
            field("access_token"),
        );
        match needed {
            (
                Some(url),
                Some(issuer),
                Some(client_id),
                Some(token_endpoint),
                Some(resource),
                Some(access_token),
            ) => Ok(Some(Session {
                url,
                issuer,
                client_id,
                token_endpoint,
                resource,
                access_token,
                refresh_token: field("refresh_token"),
                expires_at: stored["expires_at"].as_i64(),
            })),
            _ => Err(Failure::new(
                Exit::Unauthenticated,
                format!("{} is not a stored sign-in: {AGAIN}", path.display()),
            )),
        }
    }

    /// Whether the stored token goes to `url`: only the server it was asked for.
    pub fn check_server(&self, url: &str) -> Result<(), Failure> {
        if self.url.trim_end_matches('/') == url.trim_end_matches('/') {
            return Ok(());
        }
        Err(Failure::new(
            Exit::Unauthenticated,
            format!(
                "the stored sign-in is for {}, not {url}: set COUNTERSIGN_KEY, or {AGAIN} \
                 --url {url}",
                self.url
            ),
        ))
    }

    /// Whether the access token has lapsed at `now` (with a margin for the request's way there:
    /// a token that dies in flight is a 401 the person did not earn).
    pub fn lapsed(&self, now: i64) -> bool {
        self.expires_at.is_some_and(|at| at <= now + MARGIN)
    }
}

/// Seconds before its end at which a token counts as lapsed.
const MARGIN: i64 = 15;

/// The failure when the token lapsed and cannot be renewed.
pub fn expired(why: Option<&str>) -> Failure {
    let why = why.map_or(String::new(), |w| format!(" ({w})"));
    Failure::new(
        Exit::Unauthenticated,
        format!("token expired{why}: {AGAIN}"),
    )
}

/// `countersign logout`: forget the token (nothing to do when there is none).
pub fn remove(path: &Path) -> Result<bool, Failure> {
    match fs::remove_file(path) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(io("remove", path, e)),
    }
}

/// A 401 while signed in: the provider or the server no longer takes the token.
pub fn lapsed(failure: Failure) -> Failure {
    match failure.exit {
        Exit::Unauthenticated => Failure::new(failure.exit, format!("{failure}: {AGAIN}")),
        _ => failure,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn session(expires_at: Option<i64>) -> Session {
        Session {
            url: "https://cs.example.com/".into(),
            issuer: "https://login.example.com".into(),
            client_id: "countersign-cli".into(),
            token_endpoint: "https://login.example.com/token".into(),
            resource: "https://cs.example.com".into(),
            access_token: "t".into(),
            refresh_token: None,
            expires_at,
        }
    }

    /// SC-ID-09: a token goes only to the server it was asked for, and counts as lapsed a
    /// little before its end.
    #[test]
    fn sc_id_09_a_token_goes_only_to_its_server_while_it_lasts() {
        let s = session(Some(100));
        assert!(s.check_server("https://cs.example.com").is_ok());
        let other = s.check_server("https://evil.example.com").unwrap_err();
        assert!(other.message.contains("not https://evil"), "{other}");
        assert!(!s.lapsed(100 - MARGIN - 1));
        assert!(s.lapsed(100 - MARGIN));
        assert!(!session(None).lapsed(i64::MAX - MARGIN));
        let e = expired(None);
        assert_eq!(e.exit, Exit::Unauthenticated);
        assert_eq!(e.message, "token expired: run countersign login");
    }

    /// SC-ID-09: the file is written 0600; a file others may read is refused with the reason.
    #[test]
    fn sc_id_09_the_token_file_is_0600_and_a_readable_one_is_refused() {
        let dir = std::env::temp_dir().join(format!("cs-session-{}", std::process::id()));
        let file = dir.join("nested").join("token.json");
        let s = session(Some(100));
        s.save(&file).unwrap();
        let mode = fs::metadata(&file).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        let folder = fs::metadata(file.parent().unwrap()).unwrap();
        assert_eq!(folder.permissions().mode() & 0o777, 0o700);
        assert_eq!(Session::load(&file).unwrap().unwrap().access_token, "t");
        fs::set_permissions(&file, fs::Permissions::from_mode(0o644)).unwrap();
        let refused = Session::load(&file).unwrap_err();
        assert_eq!(refused.exit, Exit::Unauthenticated);
        assert!(refused.message.contains("mode 644"), "{refused}");
        assert!(remove(&file).unwrap());
        assert!(!remove(&file).unwrap());
        let _ = fs::remove_dir_all(dir);
    }
}
