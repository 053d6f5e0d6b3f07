//! The approver page (issue 10) as the server delivers it, over real HTTP: every `/ui/` route of
//! `api::ROUTES` answers, each file carries the strict CSP, and the files themselves hold no
//! inline script, inline style or secret. What the page *does* is proven in headless Chromium
//! by `scripts/browser-test.sh` (tests/browser/).

use countersign::{api::ui::CSP, boot::embedded::Server, config::Config};
use countersign_tests::{config_toml, temp_db, ToolServer};
use std::sync::Arc;

struct Page {
    base: String,
    http: reqwest::Client,
    _server: Server,
    _tools: ToolServer,
}

async fn page() -> Page {
    page_with("").await
}

/// The page of a server whose configuration is the tests' with `extra` after it.
async fn page_with(extra: &str) -> Page {
    let tools = ToolServer::start().await;
    let text = config_toml(&tools, "10s", "5s") + extra;
    let config = Arc::new(Config::from_toml(&text).unwrap());
    let server = Server::start(config, &temp_db("ui"), "127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    Page {
        base: format!("http://{}", server.addr),
        http: reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .unwrap(),
        _server: server,
        _tools: tools,
    }
}

impl Page {
    async fn get(&self, path: &str) -> (u16, reqwest::header::HeaderMap, String) {
        let res = self
            .http
            .get(format!("{}{path}", self.base))
            .send()
            .await
            .unwrap();
        let status = res.status().as_u16();
        let headers = res.headers().clone();
        (status, headers, res.text().await.unwrap())
    }
}

fn header<'a>(h: &'a reqwest::header::HeaderMap, name: &str) -> &'a str {
    h.get(name).and_then(|v| v.to_str().ok()).unwrap_or("")
}

#[tokio::test]
async fn issue10_every_listed_ui_route_serves_its_file_with_a_strict_csp() {
    let p = page().await;
    let ui_routes: Vec<_> = countersign::api::ROUTES
        .iter()
        .filter(|(_, path, _)| path.starts_with("/ui/"))
        // An approval mail's confirmation page is no file of the page (tests/email.rs).
        .filter(|(_, path, _)| *path != countersign::api::paths::EMAIL_CONFIRM)
        .collect();
    assert_eq!(ui_routes.len(), 2, "/ui/ and /ui/{{asset}}");
    for (path, content_type) in [
        ("/ui/", "text/html"),
        ("/ui/app.js", "text/javascript"),
        ("/ui/sign-in.js", "text/javascript"),
        ("/ui/app.css", "text/css"),
        ("/ui/sign-in.json", "application/json"),
    ] {
        let (status, h, body) = p.get(path).await;
        assert_eq!(status, 200, "{path}");
        assert!(
            header(&h, "content-type").starts_with(content_type),
            "{path}"
        );
        assert_eq!(header(&h, "content-security-policy"), CSP, "{path}");
        assert_eq!(header(&h, "x-content-type-options"), "nosniff", "{path}");
        assert_eq!(header(&h, "referrer-policy"), "no-referrer", "{path}");
        assert!(!body.is_empty(), "{path}");
    }
    // The policy itself: only same-origin files, nothing inline, no framing.
    for directive in [
        "default-src 'none'",
        "script-src 'self'",
        "style-src 'self'",
        "connect-src 'self'",
        "frame-ancestors 'none'",
    ] {
        assert!(CSP.contains(directive), "{directive}");
    }
    assert!(
        !CSP.contains("unsafe"),
        "no 'unsafe-inline' or 'unsafe-eval'"
    );
}

#[tokio::test]
async fn issue10_the_page_has_no_inline_script_style_or_secret() {
    let p = page().await;
    let (_, _, html) = p.get("/ui/").await;
    let (_, _, app) = p.get("/ui/app.js").await;
    let (_, _, sign_in) = p.get("/ui/sign-in.js").await;
    let script = app + &sign_in;
    // Every <script> names a file; no style element or attribute, no inline handlers.
    for tag in html.split("<script").skip(1) {
        let open = &tag[..tag.find('>').unwrap()];
        assert!(open.contains("src="), "inline <script{open}>");
    }
    for inline in [
        "<style",
        " style=",
        "onclick=",
        "onload=",
        "onsubmit=",
        "javascript:",
    ] {
        assert!(!html.contains(inline), "the page contains {inline:?}");
    }
    // The key is typed by the person; none ships with the page, none goes into a URL.
    for secret in ["cs_", "Bearer ey", "?key=", "&key="] {
        assert!(!html.contains(secret), "page holds {secret:?}");
        assert!(!script.contains(secret), "script holds {secret:?}");
    }
    assert!(
        script.contains("sessionStorage"),
        "the key is kept per tab only"
    );
    assert!(
        !script.contains("localStorage"),
        "the key never outlives the tab"
    );
    assert!(
        !script.contains("innerHTML"),
        "server values are written as text only"
    );
}

#[tokio::test]
async fn issue10_unknown_ui_files_are_404_and_ui_redirects_to_the_page() {
    let p = page().await;
    for path in ["/ui/secret.toml", "/ui/..%2Fconfig", "/ui/app.js.map"] {
        let (status, _, body) = p.get(path).await;
        assert_eq!(status, 404, "{path}");
        assert!(body.contains("not_found"), "{path}: the API's JSON error");
    }
    let (status, h, _) = p.get("/ui").await;
    assert_eq!(status, 308);
    assert_eq!(header(&h, "location"), "ui/");
}

/// A person who opens the server's address lands on the approver page. Caught on main: `/`
/// answered a JSON `route_not_found` (404).
#[tokio::test]
async fn issue30_the_root_redirects_to_the_page() {
    let p = page().await;
    let (status, h, _) = p.get("/").await;
    assert_eq!(status, 308);
    assert_eq!(
        header(&h, "location"),
        "ui/",
        "relative: behind any path prefix"
    );
}

/// SC-ID-10: a tenant whose provider has a `page_client_id` is offered on the page
/// (`sign-in.json`: its name, issuer, the page's client, the resource and the approver's scope),
/// and the page's CSP lets it fetch from that provider's origin — and from no other.
#[tokio::test]
async fn sc_id_10_the_page_offers_the_providers_with_a_page_client() {
    let extra = "\n[tenants.acme.identity]\nissuer = \"https://login.example.com/realms/acme\"\n\
                 audience = \"https://countersign.example.com\"\npage_client_id = \"cs-page\"\n\
                 [tenants.globex.identity]\nissuer = \"https://globex.example.org\"\n\
                 audience = \"https://countersign.example.com\"\n";
    let p = page_with(extra).await;
    let (status, h, body) = p.get("/ui/sign-in.json").await;
    assert_eq!(status, 200);
    let offered: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(
        offered,
        serde_json::json!({"providers": [{
            "name": "login.example.com",
            "issuer": "https://login.example.com/realms/acme",
            "client_id": "cs-page",
            "resource": "https://countersign.example.com",
            "scope": "openid profile email countersign:approve",
        }]}),
        "globex has no page client: not offered"
    );
    for path in ["/ui/", "/ui/app.js", "/ui/sign-in.json"] {
        let (_, h, _) = p.get(path).await;
        let csp = header(&h, "content-security-policy");
        assert_eq!(
            csp,
            CSP.replace(
                "connect-src 'self';",
                "connect-src 'self' https://login.example.com;"
            ),
            "{path}"
        );
    }
    assert!(header(&h, "content-type").starts_with("application/json"));
}
