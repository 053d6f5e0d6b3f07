//! The SDK's HTTP client: the SDK's requests sent with reqwest, the client every function
//! already links for webhooks, notifications and HTTP tools.
//!
//! Why not the SDK's own client (`aws-smithy-http-client`): it is a second hyper client with
//! HTTP/2 and the system's root store always compiled in — ≈ 0.36 MB of every function's zip
//! (intake 3.55 → 3.19 MB, resume 2.97 → 2.60; BENCHMARKS.md) — for requests that are small,
//! buffered HTTP/1.1 calls to one regional endpoint. One stack now serves both.
//!
//! What the SDK relies on is kept: the connect and read timeouts it asks for, and transport
//! failures classified the way its retry policy reads them (a timeout, an I/O failure — both
//! retried — or other). A retried write that had landed is the store's to tell apart: it comes
//! back as a lost condition, which the engine resolves by reading back (`docs/contract.md`,
//! SC-EDGE-04).

use aws_smithy_runtime_api::client::{
    http::{
        HttpClient, HttpConnector, HttpConnectorFuture, HttpConnectorSettings, SharedHttpClient,
        SharedHttpConnector,
    },
    orchestrator::{HttpRequest, HttpResponse},
    result::ConnectorError,
    runtime_components::RuntimeComponents,
};
use aws_smithy_types::body::SdkBody;
use std::sync::Mutex;
use std::time::Duration;

/// The timeouts a connector was made for; the SDK asks once per attempt, so connectors are
/// kept per pair (one pair in practice: the functions set only the connect timeout).
type Timeouts = (Option<Duration>, Option<Duration>);

/// The SDK's [`HttpClient`] over reqwest (rustls with ring, the bundled web roots).
#[derive(Debug, Default)]
pub struct ReqwestHttpClient {
    connectors: Mutex<Vec<(Timeouts, SharedHttpConnector)>>,
}

/// The client the SDK configurations are built with.
pub fn https_client() -> SharedHttpClient {
    SharedHttpClient::new(ReqwestHttpClient::default())
}

impl HttpClient for ReqwestHttpClient {
    fn http_connector(
        &self,
        settings: &HttpConnectorSettings,
        _components: &RuntimeComponents,
    ) -> SharedHttpConnector {
        self.connector_for((settings.connect_timeout(), settings.read_timeout()))
    }
}

impl ReqwestHttpClient {
    fn connector_for(&self, key: Timeouts) -> SharedHttpConnector {
        let mut connectors = self.connectors.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((_, c)) = connectors.iter().find(|(k, _)| *k == key) {
            return c.clone();
        }
        let connector = SharedHttpConnector::new(Connector::new(key));
        connectors.push((key, connector.clone()));
        connector
    }
}

#[derive(Debug)]
struct Connector {
    client: reqwest::Client,
}

impl Connector {
    fn new((connect, read): Timeouts) -> Connector {
        // No proxy from the environment and no redirect (an AWS endpoint answers, never sends
        // the SDK elsewhere), as every outbound client.
        let mut builder = crate::target::direct();
        if let Some(t) = connect {
            builder = builder.connect_timeout(t);
        }
        if let Some(t) = read {
            builder = builder.read_timeout(t);
        }
        // Building fails only when the TLS backend cannot start, which no request could survive.
        let client = builder.build().expect("reqwest client with rustls builds");
        Connector { client }
    }
}

impl HttpConnector for Connector {
    fn call(&self, request: HttpRequest) -> HttpConnectorFuture {
        let client = self.client.clone();
        HttpConnectorFuture::new(async move {
            let request = to_reqwest(request)?;
            let response = client.execute(request).await.map_err(transport)?;
            from_reqwest(response).await
        })
    }
}

/// The SDK's request as reqwest's. Every request the functions make (DynamoDB, Scheduler, SSM)
/// has a body in memory; a streaming one is refused rather than read here.
fn to_reqwest(request: HttpRequest) -> Result<reqwest::Request, ConnectorError> {
    let request = request
        .try_into_http1x()
        .map_err(|e| ConnectorError::user(e.into()))?;
    let (parts, body) = request.into_parts();
    let bytes = body
        .bytes()
        .ok_or_else(|| ConnectorError::user("a streaming request body is not supported".into()))?
        .to_vec();
    let request = axum::http::Request::from_parts(parts, bytes);
    reqwest::Request::try_from(request).map_err(|e| ConnectorError::user(e.into()))
}

/// reqwest's response, read whole, as the SDK's.
async fn from_reqwest(response: reqwest::Response) -> Result<HttpResponse, ConnectorError> {
    let (status, headers) = (response.status(), response.headers().clone());
    // reqwest reports a body cut short as a decoding error; to the SDK it is a transport
    // failure like any other I/O one (the answer was lost on the way, so the request may be
    // retried), unless it was the read timeout.
    let body = response.bytes().await.map_err(|e| {
        if e.is_timeout() {
            ConnectorError::timeout(e.into())
        } else {
            ConnectorError::io(e.into())
        }
    })?;
    let mut answer = axum::http::Response::new(SdkBody::from(body));
    *answer.status_mut() = status;
    *answer.headers_mut() = headers;
    HttpResponse::try_from(answer).map_err(|e| ConnectorError::other(e.into(), None))
}

/// A transport failure as the SDK's retry policy reads it: timeouts and I/O failures (refused,
/// reset, a body cut short) are transient; anything else is not retried.
fn transport(e: reqwest::Error) -> ConnectorError {
    if e.is_timeout() {
        ConnectorError::timeout(e.into())
    } else if e.is_connect() || e.is_request() || e.is_body() {
        ConnectorError::io(e.into())
    } else {
        ConnectorError::other(e.into(), None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    fn request(url: &str, body: &'static [u8]) -> HttpRequest {
        let request = axum::http::Request::builder()
            .method("POST")
            .uri(url)
            .header("x-amz-target", "DynamoDB_20120810.UpdateItem")
            // The SDK sets its own length (it is part of what it signs).
            .header("content-length", body.len())
            .body(SdkBody::from(body))
            .unwrap();
        HttpRequest::try_from(request).unwrap()
    }

    /// One connection: reads a request whole, keeps it, answers `answer` (or nothing at all).
    async fn one_answer(answer: Option<&'static str>) -> (String, tokio::task::JoinHandle<String>) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/", listener.local_addr().unwrap());
        let served = tokio::spawn(async move {
            let (mut socket, _) = listener.accept().await.unwrap();
            let mut seen = Vec::new();
            let mut buf = [0u8; 4096];
            while !String::from_utf8_lossy(&seen).contains("{\"k\":1}") {
                let n = socket.read(&mut buf).await.unwrap();
                assert!(n > 0, "the request arrived whole");
                seen.extend_from_slice(&buf[..n]);
            }
            match answer {
                Some(a) => socket.write_all(a.as_bytes()).await.unwrap(),
                None => tokio::time::sleep(Duration::from_secs(5)).await,
            }
            String::from_utf8_lossy(&seen).into_owned()
        });
        (url, served)
    }

    /// The SDK's request reaches the wire as it was made (method, headers, body), and the
    /// answer comes back to it whole: status, headers and body — a service error is an answer.
    #[tokio::test]
    async fn sc_ops_02_sdk_requests_and_answers_cross_reqwest_unchanged() {
        let answer = "HTTP/1.1 400 Bad Request\r\ncontent-type: application/x-amz-json-1.0\r\n\
            x-amzn-requestid: R1\r\ncontent-length: 24\r\nconnection: close\r\n\r\n\
            {\"__type\":\"Conditional\"}";
        let (url, served) = one_answer(Some(answer)).await;
        let connector = Connector::new((Some(Duration::from_secs(2)), None));
        let response = connector.call(request(&url, b"{\"k\":1}")).await.unwrap();
        let seen = served.await.unwrap().to_ascii_lowercase();
        assert!(seen.starts_with("post / http/1.1\r\n"), "{seen}");
        assert!(
            seen.contains("x-amz-target: dynamodb_20120810.updateitem\r\n"),
            "{seen}"
        );
        // Sent once: AWS refuses a request with two lengths.
        assert_eq!(seen.matches("content-length:").count(), 1, "{seen}");
        assert!(seen.contains("content-length: 7\r\n"), "{seen}");
        assert_eq!(response.status().as_u16(), 400);
        assert_eq!(response.headers().get("x-amzn-requestid"), Some("R1"));
        assert_eq!(
            response.body().bytes(),
            Some(&b"{\"__type\":\"Conditional\"}"[..])
        );
    }

    /// Transport failures reach the SDK's retry policy as it classifies them: a refused
    /// connection and a body cut short are I/O (this test caught the second reaching the SDK as
    /// "other", not retried: reqwest calls it a decoding error), an answer slower than the read
    /// timeout is a timeout (all transient),
    /// and a streaming body, which no function sends, is refused before anything is sent.
    #[tokio::test]
    async fn sc_ops_02_sdk_transport_failures_keep_their_kind() {
        let closed = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/", closed.local_addr().unwrap());
        drop(closed);
        let connector = Connector::new((Some(Duration::from_secs(2)), None));
        let refused = connector
            .call(request(&url, b"{\"k\":1}"))
            .await
            .unwrap_err();
        assert!(refused.is_io(), "{refused:?}");

        // An answer whose body is cut short (it promises 10 bytes, sends 3, closes): I/O.
        let (url, _served) =
            one_answer(Some("HTTP/1.1 200 OK\r\ncontent-length: 10\r\n\r\n{\"a")).await;
        let cut = connector
            .call(request(&url, b"{\"k\":1}"))
            .await
            .unwrap_err();
        assert!(cut.is_io(), "{cut:?}");

        let (url, _served) = one_answer(None).await;
        let slow = Connector::new((None, Some(Duration::from_millis(200))));
        let timed_out = slow.call(request(&url, b"{\"k\":1}")).await.unwrap_err();
        assert!(timed_out.is_timeout(), "{timed_out:?}");

        // A body that is not in memory (as a stream's, once read) has no bytes to send.
        let streaming = axum::http::Request::builder()
            .uri(url.as_str())
            .body(SdkBody::taken())
            .unwrap();
        let refused = connector
            .call(HttpRequest::try_from(streaming).unwrap())
            .await
            .unwrap_err();
        assert!(refused.is_user(), "{refused:?}");
    }

    /// Caught on main (issue 28, item 7): reqwest follows up to 10 redirects, and an AWS
    /// endpoint never sends the SDK elsewhere: a 3xx is the answer, given to the SDK as it came.
    #[tokio::test]
    async fn sc_ops_02_sdk_redirects_are_answers_not_followed() {
        let elsewhere = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        elsewhere.set_nonblocking(true).unwrap();
        let answer: &'static str = Box::leak(
            format!(
                "HTTP/1.1 307 Temporary Redirect\r\nlocation: http://{}/\r\n\
                 content-length: 0\r\nconnection: close\r\n\r\n",
                elsewhere.local_addr().unwrap()
            )
            .into_boxed_str(),
        );
        let (url, _served) = one_answer(Some(answer)).await;
        let timeouts = (Some(Duration::from_secs(2)), Some(Duration::from_secs(2)));
        let response = Connector::new(timeouts)
            .call(request(&url, b"{\"k\":1}"))
            .await
            .unwrap();
        assert_eq!(response.status().as_u16(), 307);
        let followed = elsewhere.accept();
        assert!(
            matches!(&followed, Err(e) if e.kind() == std::io::ErrorKind::WouldBlock),
            "nothing connected to the redirect's target: {followed:?}"
        );
    }

    /// Caught on main (issue 28, item 7): the SDK's requests went through a proxy named in the
    /// environment. The child is this test binary running [`proxied_child_connects_directly`]
    /// with `HTTP_PROXY`, `HTTPS_PROXY` and `ALL_PROXY` pointing at a listener that counts: it
    /// sees no connection, and the child's request reaches its endpoint directly.
    #[tokio::test]
    async fn sc_ops_02_sdk_requests_ignore_proxies_in_the_environment() {
        let proxy = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let proxy_url = format!("http://{}", proxy.local_addr().unwrap());
        let reached = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let counted = reached.clone();
        tokio::spawn(async move {
            while proxy.accept().await.is_ok() {
                counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            }
        });
        let mut child = std::process::Command::new(std::env::current_exe().unwrap());
        child.args([
            "--exact",
            "boot::aws::http::tests::proxied_child_connects_directly",
        ]);
        child.args(["--ignored", "--nocapture"]);
        for name in [
            "HTTP_PROXY",
            "HTTPS_PROXY",
            "ALL_PROXY",
            "http_proxy",
            "all_proxy",
        ] {
            child.env(name, &proxy_url);
        }
        let out = tokio::task::spawn_blocking(move || child.output().unwrap())
            .await
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success() && stdout.contains("1 passed"),
            "{stdout}"
        );
        assert_eq!(reached.load(std::sync::atomic::Ordering::SeqCst), 0);
    }

    /// The child of [`sc_ops_02_sdk_requests_ignore_proxies_in_the_environment`].
    #[tokio::test]
    #[ignore = "run by sc_ops_02_sdk_requests_ignore_proxies_in_the_environment"]
    async fn proxied_child_connects_directly() {
        assert!(std::env::var("HTTP_PROXY").is_ok(), "run by its parent");
        let answer = "HTTP/1.1 200 OK\r\ncontent-length: 2\r\nconnection: close\r\n\r\n{}";
        let (url, served) = one_answer(Some(answer)).await;
        let timeouts = (Some(Duration::from_secs(2)), Some(Duration::from_secs(2)));
        let response = Connector::new(timeouts)
            .call(request(&url, b"{\"k\":1}"))
            .await
            .unwrap();
        assert_eq!(response.status().as_u16(), 200);
        served.await.unwrap();
    }

    /// The SDK asks for a connector per attempt (`http_connector`, which passes its settings'
    /// timeouts here): one per pair of timeouts is made and kept.
    #[test]
    fn sc_ops_02_sdk_connectors_are_kept_per_timeouts() {
        let client = ReqwestHttpClient::default();
        let a = (Some(Duration::from_secs(3)), None);
        let b = (Some(Duration::from_secs(1)), None);
        client.connector_for(a);
        client.connector_for(a);
        client.connector_for(b);
        assert_eq!(client.connectors.lock().unwrap().len(), 2);
    }
}
