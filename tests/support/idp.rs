//! The real OpenID provider of the identity tests: `oidc-provider` (scripts/oidc-provider.sh
//! installs it; tests/identity/provider.mjs configures it) as a child process, and a person at
//! its pages played over plain HTTP with a cookie jar.

use serde_json::Value;
use std::{
    io::{BufRead, BufReader},
    process::{Child, Command, Stdio},
};

/// The provider process: two issuers (tenants `acme` and `globex`) and the hostile-token
/// signer. Killed when dropped.
pub struct Provider {
    child: Child,
    pub acme: String,
    pub globex: String,
    pub signer: String,
}

impl Drop for Provider {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Provider {
    pub fn start() -> Provider {
        let dir = std::env::var("COUNTERSIGN_OIDC_NODE_DIR").unwrap_or_else(|_| {
            format!(
                "{}/.cache/countersign/oidc",
                std::env::var("HOME").unwrap_or_default()
            )
        });
        // Run from the install folder, where its imports resolve (a copy per test).
        let script = format!("{dir}/provider-{}.mjs", ulid::Ulid::new());
        std::fs::copy(
            concat!(env!("CARGO_MANIFEST_DIR"), "/identity/provider.mjs"),
            &script,
        )
        .expect("oidc-provider is installed (source scripts/oidc-provider.sh)");
        let mut child = Command::new("node")
            .arg(&script)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("node runs");
        let mut line = String::new();
        let mut out = BufReader::new(child.stdout.take().unwrap());
        out.read_line(&mut line).unwrap();
        // Keep reading: the provider logs to stdout, and dies of a closed pipe.
        std::thread::spawn(move || out.lines().for_each(drop));
        let _ = std::fs::remove_file(&script);
        let v: Value = serde_json::from_str(&line).unwrap_or_else(|e| panic!("{line:?}: {e}"));
        let field = |name: &str| v[name].as_str().unwrap().to_owned();
        Provider {
            acme: field("acme"),
            globex: field("globex"),
            signer: field("signer"),
            child,
        }
    }
}

/// A person's browser, as far as the provider's pages need one: cookies kept, redirects
/// followed by hand (to see where they go).
#[derive(Default)]
pub struct Browser {
    cookies: Vec<String>,
}

impl Browser {
    /// Send `request` with the cookies, keep the ones it sets, and follow its redirects until
    /// an answer that is not one (answered with its final URL and body) — or until a redirect
    /// to a URL starting with `stop` (answered with that URL and no body).
    pub async fn follow(
        &mut self,
        http: &reqwest::Client,
        mut request: reqwest::RequestBuilder,
        stop: Option<&str>,
    ) -> (reqwest::Url, String) {
        loop {
            let answer = request
                .header("cookie", self.cookies.join("; "))
                .send()
                .await
                .unwrap();
            for c in answer.headers().get_all("set-cookie") {
                let pair = c.to_str().unwrap().split(';').next().unwrap().to_owned();
                let name = pair.split('=').next().unwrap().to_owned();
                self.cookies.retain(|k| !k.starts_with(&format!("{name}=")));
                self.cookies.push(pair);
            }
            let here = answer.url().clone();
            let Some(location) = answer.headers().get("location") else {
                let status = answer.status();
                let body = answer.text().await.unwrap();
                assert!(status.is_success(), "{here}: {status}: {body}");
                return (here, body);
            };
            let to = here.join(location.to_str().unwrap()).unwrap();
            if stop.is_some_and(|s| to.as_str().starts_with(s)) {
                return (to, String::new());
            }
            request = http.get(to);
        }
    }
}

/// The value of the hidden input `name` in an HTML form.
fn hidden(html: &str, name: &str) -> String {
    let at = html
        .find(&format!("name=\"{name}\""))
        .unwrap_or_else(|| panic!("no {name} in {html}"));
    let input = &html[html[..at].rfind('<').unwrap()..];
    let value = &input[input.find("value=\"").expect("a value") + 7..];
    value[..value.find('"').unwrap()].to_owned()
}

/// Where an HTML form posts, resolved against the page it is on.
fn action(page: &reqwest::Url, html: &str) -> reqwest::Url {
    let at = &html[html.find("action=\"").expect("a form") + 8..];
    page.join(&at[..at.find('"').unwrap()].replace("&amp;", "&"))
        .unwrap()
}

/// The person confirms a device sign-in (RFC 8628 §3.3): opens `verification_uri_complete`,
/// checks the code the provider shows against `user_code` (what the device printed), confirms
/// it, and signs in and consents at the provider's pages (the person is `ada`: provider.mjs
/// signs in the `login_hint`, or her). Answers the last page.
pub async fn confirm_device(verification_uri_complete: &str, user_code: &str) -> String {
    let http = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let mut browser = Browser::default();
    // The link carries the code: the provider answers a form that posts it with its XSRF token
    // (the page submits itself), then shows the code to confirm.
    let (page, form) = browser
        .follow(&http, http.get(verification_uri_complete), None)
        .await;
    let code = [
        ("xsrf", hidden(&form, "xsrf")),
        ("user_code", hidden(&form, "user_code")),
    ];
    let (page, confirm) = browser
        .follow(&http, http.post(action(&page, &form)).form(&code), None)
        .await;
    assert!(confirm.contains(user_code), "the code shown: {confirm}");
    let fields = ["xsrf", "user_code", "confirm"].map(|name| (name, hidden(&confirm, name)));
    let (_, done) = browser
        .follow(
            &http,
            http.post(action(&page, &confirm)).form(&fields),
            None,
        )
        .await;
    done
}
