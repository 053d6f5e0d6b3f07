//! The HTTP client: the bearer key, the base URL, and API errors turned into `Failure`s.

use crate::exit::{Exit, Failure};
use reqwest::Method;
use serde_json::Value;

pub struct Client {
    base: String,
    key: String,
    http: reqwest::Client,
}

impl Client {
    pub fn new(url: &str, key: Option<&str>) -> Result<Client, Failure> {
        let key = key.filter(|k| !k.trim().is_empty()).ok_or_else(|| {
            Failure::new(
                Exit::Usage,
                "no API key: set COUNTERSIGN_KEY (or pass --key), or run countersign login",
            )
        })?;
        if !(url.starts_with("http://") || url.starts_with("https://")) {
            return Err(Failure::new(
                Exit::Usage,
                format!("--url must start with http:// or https:// (got {url:?})"),
            ));
        }
        let http = reqwest::Client::builder()
            .timeout(std::time::Duration::from_secs(60))
            .build()
            .map_err(|e| Failure::new(Exit::Failure, e.to_string()))?;
        Ok(Client {
            base: url.trim_end_matches('/').to_owned(),
            key: key.trim().to_owned(),
            http,
        })
    }

    pub async fn get(&self, path: &str) -> Result<Value, Failure> {
        self.send(Method::GET, path, None, &[]).await
    }

    pub async fn post(&self, path: &str, body: Option<Value>) -> Result<Value, Failure> {
        self.send(Method::POST, path, body, &[]).await
    }

    /// One request; a 2xx answers its JSON (`null` for an empty body).
    pub async fn send(
        &self,
        method: Method,
        path: &str,
        body: Option<Value>,
        headers: &[(&str, &str)],
    ) -> Result<Value, Failure> {
        let (status, bytes) = self.exchange(method, path, body, headers).await?;
        let value: Value = if bytes.is_empty() {
            Value::Null
        } else {
            serde_json::from_slice(&bytes).map_err(|_| {
                Failure::new(
                    Exit::Failure,
                    format!("HTTP {status}: the answer is not the API's JSON (is --url right?)"),
                )
            })?
        };
        if (200..300).contains(&status) {
            Ok(value)
        } else {
            Err(Failure::from_api(status, &value))
        }
    }

    /// A 2xx answer's bytes exactly as sent (a deed is verified byte for byte).
    pub async fn get_bytes(&self, path: &str) -> Result<Vec<u8>, Failure> {
        let (status, bytes) = self.exchange(Method::GET, path, None, &[]).await?;
        if (200..300).contains(&status) {
            return Ok(bytes);
        }
        let value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
        Err(Failure::from_api(status, &value))
    }

    async fn exchange(
        &self,
        method: Method,
        path: &str,
        body: Option<Value>,
        headers: &[(&str, &str)],
    ) -> Result<(u16, Vec<u8>), Failure> {
        let mut request = self
            .http
            .request(method, format!("{}{path}", self.base))
            .bearer_auth(&self.key)
            // Decisions made here are recorded as the CLI's (SC-CH-08); other routes ignore it.
            .header("Countersign-Channel", "cli");
        if let Some(body) = body {
            request = request.json(&body);
        }
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        let response = request.send().await.map_err(|e| {
            // reqwest's text names the URL, never the key.
            Failure::new(
                Exit::Unavailable,
                format!("cannot reach {}: {e}", self.base),
            )
        })?;
        let status = response.status().as_u16();
        let bytes = response
            .bytes()
            .await
            .map_err(|e| Failure::new(Exit::Unavailable, format!("answer cut short: {e}")))?;
        Ok((status, bytes.to_vec()))
    }
}

/// A path segment, percent-encoded (ids come from the command line).
pub fn segment(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}
