//! Where a webhook may connect (SC-SEC-08). A prompt-injected agent cannot choose a tool's URL,
//! but a tenant's catalog must not reach the host's own network by accident either: https only,
//! and public addresses only, unless the tenant lists the host (`allow_http_hosts`,
//! `allow_private_hosts`). Checked when the config loads (the URL's scheme and an address
//! written in it) and again on every connection (each address a name resolves to), so a name
//! that later resolves inward is refused too. Redirects are never followed (the client's policy),
//! and no proxy is used: the address judged is the target's own ([`direct`]).

use reqwest::dns::{Addrs, Name, Resolve, Resolving};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

/// Why a target was refused; travels inside reqwest's error from the resolver.
#[derive(Debug, thiserror::Error)]
#[error("the webhook target resolves to a non-public address")]
pub struct TargetRefused;

/// The URL's host, with IPv6 brackets removed.
pub fn host(url: &reqwest::Url) -> Option<&str> {
    url.host_str()
        .map(|h| h.trim_start_matches('[').trim_end_matches(']'))
}

/// A host written as an address that is not public; names are judged when they resolve.
pub fn literal_is_private(host: &str) -> bool {
    host.parse::<IpAddr>().is_ok_and(|ip| !is_public(ip))
}

/// Does the public internet route to this address? Private, loopback, link-local (the cloud
/// metadata endpoint 169.254.169.254), shared, documentation, reserved and multicast ranges,
/// and their IPv4-mapped forms, are not.
pub fn is_public(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => public_v4(v4),
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => public_v4(v4),
            None => public_v6(v6),
        },
    }
}

fn public_v4(ip: Ipv4Addr) -> bool {
    let [a, b, c, _] = ip.octets();
    !(ip.is_private()
        || ip.is_loopback()
        || ip.is_link_local()
        || ip.is_unspecified()
        || ip.is_broadcast()
        || ip.is_documentation()
        || ip.is_multicast()
        || a == 0
        || (a == 100 && (64..128).contains(&b)) // shared address space (CGNAT)
        || (a == 192 && b == 0 && c == 0) // IETF protocol assignments
        || (a == 198 && (18..20).contains(&b)) // benchmarking
        || a >= 240) // reserved
}

fn public_v6(ip: Ipv6Addr) -> bool {
    let first = ip.segments()[0];
    !(ip.is_loopback()
        || ip.is_unspecified()
        || ip.is_multicast()
        || (first & 0xfe00) == 0xfc00 // unique local
        || (first & 0xffc0) == 0xfe80 // link-local
        || first == 0x2001 && ip.segments()[1] == 0x0db8 // documentation
        || (first == 0x0064 && ip.segments()[1] == 0xff9b)) // NAT64: an IPv4 address inside
}

/// The resolver of the client for tools whose host is not allowed private addresses: every
/// address a name resolves to must be public, and only those checked addresses are connected to.
pub struct PublicOnly;

impl Resolve for PublicOnly {
    fn resolve(&self, name: Name) -> Resolving {
        Box::pin(async move {
            let found: Vec<SocketAddr> =
                tokio::net::lookup_host((name.as_str(), 0)).await?.collect();
            if found.iter().any(|a| !is_public(a.ip())) {
                return Err(Box::new(TargetRefused) as Box<dyn std::error::Error + Send + Sync>);
            }
            Ok(Box::new(found.into_iter()) as Addrs)
        })
    }
}

/// How every outbound client starts — tools, MCP, notifications, the AWS SDK's: straight to the
/// target. reqwest would otherwise send through a proxy named in the environment
/// (`HTTP_PROXY`, `HTTPS_PROXY`, `ALL_PROXY`): the rules above would judge the proxy's address,
/// not the target's, and the proxy would connect wherever the target's name resolves. There is
/// no proxy setting (docs/security.md). A 3xx is an answer: no redirect is followed.
pub fn direct() -> reqwest::ClientBuilder {
    reqwest::Client::builder()
        .no_proxy()
        .redirect(reqwest::redirect::Policy::none())
        .user_agent(concat!("countersign/", env!("CARGO_PKG_VERSION")))
}

/// The HTTP clients for calls to configured targets (webhooks, notification endpoints): one that
/// connects only to public addresses, one for hosts the tenant allows private; both [`direct`].
pub struct Clients {
    public: reqwest::Client,
    private: reqwest::Client,
}

impl Clients {
    /// `timeout` bounds every request (None: each request sets its own).
    pub fn new(timeout: Option<std::time::Duration>) -> Self {
        let client = || {
            let builder = direct();
            match timeout {
                Some(t) => builder.timeout(t),
                None => builder,
            }
        };
        Clients {
            public: client()
                .dns_resolver(std::sync::Arc::new(PublicOnly))
                .build()
                .expect("an HTTP client builds"),
            private: client().build().expect("an HTTP client builds"),
        }
    }

    /// The client to reach `url` with, or `None` when the URL itself names a non-public address
    /// the tenant does not allow (such an address is never resolved, so check it here; the
    /// config did too).
    pub fn for_url(&self, url: &str, allow_private: bool) -> Option<&reqwest::Client> {
        if allow_private {
            return Some(&self.private);
        }
        let inward = reqwest::Url::parse(url)
            .ok()
            .and_then(|u| host(&u).map(literal_is_private));
        (inward == Some(false)).then_some(&self.public)
    }
}

/// Was this request refused by [`PublicOnly`]?
pub fn refused(e: &reqwest::Error) -> bool {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(err) = source {
        if err.is::<TargetRefused>() {
            return true;
        }
        source = err.source();
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sc_sec_08_only_public_addresses_are_public() {
        let cases = [
            ("93.184.215.14", true),
            ("2606:4700::1111", true),
            ("8.8.8.8", true),
            ("127.0.0.1", false),
            ("10.1.2.3", false),
            ("172.16.0.1", false),
            ("192.168.1.1", false),
            ("169.254.169.254", false),
            ("100.64.0.1", false),
            ("0.0.0.0", false),
            ("255.255.255.255", false),
            ("224.0.0.1", false),
            ("198.18.0.1", false),
            ("::1", false),
            ("::", false),
            ("fd00::1", false),
            ("fe80::1", false),
            ("::ffff:127.0.0.1", false),
            ("::ffff:169.254.169.254", false),
            ("64:ff9b::a9fe:a9fe", false),
            ("2001:db8::1", false),
        ];
        for (ip, public) in cases {
            assert_eq!(is_public(ip.parse().unwrap()), public, "{ip}");
        }
    }

    #[tokio::test]
    async fn sc_sec_08_a_name_resolving_inward_is_refused() {
        let name: Name = "localhost".parse().unwrap();
        let error = PublicOnly.resolve(name).await.err().expect("refused");
        assert!(error.is::<TargetRefused>(), "{error}");
    }
}
