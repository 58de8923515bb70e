//! Requests to integrators' endpoints, and only to public addresses: a
//! webhook URL must not reach into the network ClutchCall runs in (server-
//! side request forgery). Every name is resolved by `PublicOnly`, an IP
//! literal is checked before sending, and redirects are not followed (a
//! public endpoint could redirect to a private one).
//! `CLUTCHCALL_WEBHOOK_ALLOW_PRIVATE=1` lifts the rule (tests, labs).

use reqwest::dns::{Addrs, Name, Resolve, Resolving};
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

/// A receiver that does not answer within this is a failed attempt.
pub const TIMEOUT: Duration = Duration::from_secs(10);

/// Whether `ip` is on the public internet (not loopback, private, link-
/// local, shared, multicast, documentation or unspecified).
pub fn is_public(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => {
            let [a, b, ..] = v4.octets();
            !(v4.is_loopback()
                || v4.is_private()
                || v4.is_link_local()
                || v4.is_unspecified()
                || v4.is_broadcast()
                || v4.is_multicast()
                || v4.is_documentation()
                || a == 0
                || (a == 192 && b == 0 && v4.octets()[2] == 0) // IETF protocol assignments 192.0.0/24
                || (a == 100 && (64..128).contains(&b)) // shared (CGNAT) 100.64/10
                || (a == 198 && (18..20).contains(&b)) // benchmarking 198.18/15
                || a >= 240)
        }
        IpAddr::V6(v6) => {
            let s = v6.segments();
            if v6.is_loopback() || v6.is_unspecified() {
                return false;
            }
            // Forms that carry an IPv4 address are judged by it: mapped and
            // compatible (::ffff:a.b.c.d, ::a.b.c.d), NAT64 (64:ff9b::/96)
            // and 6to4 (2002::/16).
            if let Some(v4) = v6.to_ipv4() {
                return is_public(IpAddr::V4(v4));
            }
            if s[..6] == [0x64, 0xff9b, 0, 0, 0, 0] {
                return is_public(IpAddr::V4(std::net::Ipv4Addr::new((s[6] >> 8) as u8, s[6] as u8, (s[7] >> 8) as u8, s[7] as u8)));
            }
            if s[0] == 0x2002 {
                return is_public(IpAddr::V4(std::net::Ipv4Addr::new((s[1] >> 8) as u8, s[1] as u8, (s[2] >> 8) as u8, s[2] as u8)));
            }
            !(v6.is_multicast()
                || (s[0] & 0xfe00) == 0xfc00 // unique local fc00::/7
                || (s[0] & 0xffc0) == 0xfe80 // link-local fe80::/10
                || (s[0] & 0xffc0) == 0xfec0 // site-local fec0::/10
                || (s[0] == 0x2001 && s[1] == 0) // Teredo 2001::/32 (reaches behind NATs)
                || (s[0] == 0x2001 && s[1] == 0x0db8)) // documentation
        }
    }
}

/// Resolves names to their public addresses only.
struct PublicOnly {
    allow_private: bool,
}

impl Resolve for PublicOnly {
    fn resolve(&self, name: Name) -> Resolving {
        let allow_private = self.allow_private;
        Box::pin(async move {
            let host = name.as_str().to_string();
            let found: Vec<SocketAddr> = tokio::net::lookup_host((host.as_str(), 0)).await?.collect();
            let kept: Vec<SocketAddr> = found.into_iter().filter(|a| allow_private || is_public(a.ip())).collect();
            if kept.is_empty() {
                return Err(format!("{host} resolves to no public address").into());
            }
            Ok(Box::new(kept.into_iter()) as Addrs)
        })
    }
}

/// What became of one request.
pub struct Answer {
    /// The receiver's status; `None` when none came (`error` says why).
    pub status: Option<u16>,
    pub error: Option<String>,
    pub latency_ms: i64,
}

pub struct Outbound {
    client: reqwest::Client,
    allow_private: bool,
}

impl Outbound {
    pub fn new(allow_private: bool) -> anyhow::Result<Arc<Outbound>> {
        let client = reqwest::Client::builder()
            .dns_resolver(Arc::new(PublicOnly { allow_private }))
            .redirect(reqwest::redirect::Policy::none())
            // A proxy from the environment would resolve the name itself,
            // past `PublicOnly`.
            .no_proxy()
            .timeout(TIMEOUT)
            .connect_timeout(Duration::from_secs(5))
            .user_agent(concat!("ClutchCall-Webhooks/", env!("CARGO_PKG_VERSION")))
            .build()?;
        Ok(Arc::new(Outbound { client, allow_private }))
    }

    /// Why `url` may not be sent to, in a sentence (`None`: it may).
    pub async fn refused(&self, url: &str) -> Option<String> {
        let parsed = match reqwest::Url::parse(url.trim()) {
            Ok(u) if matches!(u.scheme(), "http" | "https") => u,
            _ => return Some("The URL must start with https:// (or http://).".into()),
        };
        let Some(host) = parsed.host_str().map(|h| h.trim_start_matches('[').trim_end_matches(']').to_string()) else {
            return Some("The URL has no host.".into());
        };
        if self.allow_private {
            return None;
        }
        let addresses: Vec<IpAddr> = match host.parse::<IpAddr>() {
            Ok(ip) => vec![ip],
            Err(_) => match tokio::net::lookup_host((host.as_str(), 0)).await {
                Ok(found) => found.map(|a| a.ip()).collect(),
                Err(_) => return Some(format!("{host} does not resolve.")),
            },
        };
        if addresses.is_empty() || !addresses.iter().copied().any(is_public) {
            return Some(format!("{host} is not a public address: webhooks go only to the public internet."));
        }
        None
    }

    /// POSTs `body` with `headers`; never follows a redirect.
    pub async fn post(&self, url: &str, headers: Vec<(&'static str, String)>, body: Vec<u8>) -> Answer {
        let started = std::time::Instant::now();
        let elapsed = || started.elapsed().as_millis() as i64;
        // An IP literal is not resolved, so it is checked here.
        if let Some(why) = self.literal_refused(url) {
            return Answer { status: None, error: Some(why), latency_ms: 0 };
        }
        let mut request = self.client.post(url).header(reqwest::header::CONTENT_TYPE, "application/json").body(body);
        for (name, value) in headers {
            request = request.header(name, value);
        }
        match request.send().await {
            Ok(response) => Answer { status: Some(response.status().as_u16()), error: None, latency_ms: elapsed() },
            Err(e) => Answer { status: None, error: Some(reason(&e)), latency_ms: elapsed() },
        }
    }

    fn literal_refused(&self, url: &str) -> Option<String> {
        let host = reqwest::Url::parse(url).ok()?.host_str()?.trim_start_matches('[').trim_end_matches(']').to_string();
        let ip = host.parse::<IpAddr>().ok()?;
        (!self.allow_private && !is_public(ip)).then(|| format!("{ip} is not a public address"))
    }
}

/// A failed request, in a few words for the delivery log.
fn reason(e: &reqwest::Error) -> String {
    if e.is_timeout() {
        format!("no answer within {} s", TIMEOUT.as_secs())
    } else if e.is_connect() {
        let mut source: Option<&dyn std::error::Error> = Some(e);
        let mut deepest = e.to_string();
        while let Some(s) = source {
            deepest = s.to_string();
            source = s.source();
        }
        format!("could not connect: {deepest}")
    } else {
        e.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_public_addresses_are_public() {
        for private in [
            "127.0.0.1", "10.1.2.3", "172.16.0.1", "192.168.1.1", "169.254.169.254", "0.0.0.0", "100.64.0.1", "192.0.0.8", "::1", "fd00::1",
            "fe80::1", "fec0::1", "::ffff:10.0.0.1", "::a00:1", "64:ff9b::a9fe:a9fe", "2002:a00:1::1", "2001:0:4136:e378::1", "224.0.0.1",
        ] {
            assert!(!is_public(private.parse().unwrap()), "{private}");
        }
        for public in ["1.1.1.1", "8.8.8.8", "2606:4700:4700::1111", "::ffff:8.8.8.8"] {
            assert!(is_public(public.parse().unwrap()), "{public}");
        }
    }

    #[tokio::test]
    async fn a_private_or_unknown_host_is_refused_unless_allowed() {
        let strict = Outbound::new(false).unwrap();
        assert!(strict.refused("http://127.0.0.1:9/hook").await.is_some());
        assert!(strict.refused("http://[::1]:9/hook").await.is_some());
        assert!(strict.refused("http://localhost:9/hook").await.is_some());
        assert!(strict.refused("ftp://example.com/").await.is_some());
        let answer = strict.post("http://169.254.169.254/latest/meta-data", vec![], vec![]).await;
        assert_eq!(answer.status, None, "never sent");
        let lab = Outbound::new(true).unwrap();
        assert_eq!(lab.refused("http://127.0.0.1:9/hook").await, None);
    }
}
