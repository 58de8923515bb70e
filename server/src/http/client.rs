//! Where a request comes from, for sign-in limits and logs. Behind a
//! reverse proxy every request's TCP peer is the proxy, so one attacker
//! would spend everyone's sign-in budget; `X-Forwarded-For` is believed
//! only when the peer is one of `CLUTCHCALL_TRUSTED_PROXIES` (finding 12),
//! and then read from the right, past every trusted hop, so an address a
//! client wrote into the header itself is never taken.

use std::net::{IpAddr, SocketAddr};

/// A block of addresses, e.g. `10.0.0.0/8` or `::1/128` (a bare address is /32 or /128).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Cidr {
    network: IpAddr,
    bits: u8,
}

impl std::str::FromStr for Cidr {
    type Err = String;

    fn from_str(text: &str) -> Result<Cidr, String> {
        let text = text.trim();
        let (address, bits) = text.split_once('/').map_or((text, None), |(a, b)| (a, Some(b)));
        let network: IpAddr = address.parse().map_err(|_| format!("{text:?} is not an address or CIDR block"))?;
        let max = if network.is_ipv4() { 32 } else { 128 };
        let bits = match bits {
            Some(b) => b.parse::<u8>().ok().filter(|b| *b <= max).ok_or_else(|| format!("{text:?}: the prefix length must be 0 to {max}"))?,
            None => max,
        };
        Ok(Cidr { network, bits })
    }
}

impl Cidr {
    pub fn contains(&self, ip: IpAddr) -> bool {
        fn prefix(bytes: &[u8], bits: u8) -> Vec<u8> {
            let mut out = bytes.to_vec();
            for (i, byte) in out.iter_mut().enumerate() {
                let keep = (bits as usize).saturating_sub(i * 8).min(8);
                *byte &= if keep == 0 { 0 } else { 0xffu8 << (8 - keep) };
            }
            out
        }
        match (self.network, ip.to_canonical()) {
            (IpAddr::V4(n), IpAddr::V4(a)) => prefix(&n.octets(), self.bits) == prefix(&a.octets(), self.bits),
            (IpAddr::V6(n), IpAddr::V6(a)) => prefix(&n.octets(), self.bits) == prefix(&a.octets(), self.bits),
            _ => false,
        }
    }
}

/// Parses `CLUTCHCALL_TRUSTED_PROXIES`: CIDR blocks separated by commas.
pub fn parse_trusted(text: &str) -> Result<Vec<Cidr>, String> {
    text.split(',').filter(|part| !part.trim().is_empty()).map(str::parse).collect()
}

/// The client's address: the TCP peer, unless it is a trusted proxy; then
/// `X-Forwarded-For` is walked from the right, each hop written by the
/// trusted one after it, and the first hop that is not a trusted proxy is
/// the client. The walk stops at a hop that does not parse (whatever
/// stands left of it was written by the client), and the client is then
/// the last hop a trusted proxy vouched for.
pub fn client_address(peer: IpAddr, forwarded_for: &[&str], trusted: &[Cidr]) -> IpAddr {
    let is_trusted = |ip: IpAddr| trusted.iter().any(|cidr| cidr.contains(ip));
    let mut client = peer;
    let hops = forwarded_for.iter().flat_map(|header| header.split(',')).collect::<Vec<_>>();
    for hop in hops.into_iter().rev() {
        if !is_trusted(client) {
            break;
        }
        match hop.trim().parse::<IpAddr>() {
            Ok(ip) => client = ip,
            Err(_) => break,
        }
    }
    client
}

/// The key an address's limits are kept under: the address itself, or for
/// IPv6 its /64 (one subscriber holds a whole /64, and would otherwise have
/// 2^64 sign-in budgets).
pub fn limit_key(ip: IpAddr) -> IpAddr {
    match ip.to_canonical() {
        IpAddr::V6(v6) => {
            let mut octets = v6.octets();
            octets[8..].fill(0);
            IpAddr::from(octets)
        }
        v4 => v4,
    }
}

/// Records each request's client address (`app::functions::ClientAddress`)
/// for the server functions' limits and the REST handlers alike.
pub async fn record(
    axum::extract::State(trusted): axum::extract::State<std::sync::Arc<Vec<Cidr>>>,
    mut request: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    let peer = request.extensions().get::<axum::extract::ConnectInfo<SocketAddr>>().map(|info| info.0.ip());
    if let Some(peer) = peer {
        let forwarded: Vec<&str> = request.headers().get_all("x-forwarded-for").iter().filter_map(|v| v.to_str().ok()).collect();
        let client = client_address(peer, &forwarded, &trusted);
        request.extensions_mut().insert(app::functions::ClientAddress(client));
    }
    next.run(request).await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(text: &str) -> IpAddr {
        text.parse().unwrap()
    }

    #[test]
    fn s12_forwarded_for_is_believed_only_from_trusted_proxies() {
        let trusted = parse_trusted("10.0.0.0/8, ::1").unwrap();
        // A direct client cannot choose its address by writing the header.
        assert_eq!(client_address(ip("203.0.113.9"), &["1.2.3.4"], &trusted), ip("203.0.113.9"));
        // Behind the proxy: the address the proxy saw, not what the client wrote before it.
        assert_eq!(client_address(ip("10.1.2.3"), &["6.6.6.6, 198.51.100.7"], &trusted), ip("198.51.100.7"));
        assert_eq!(client_address(ip("10.1.2.3"), &["198.51.100.7", "10.9.9.9"], &trusted), ip("198.51.100.7"), "past every trusted hop");
        assert_eq!(client_address(ip("::1"), &[], &trusted), ip("::1"), "no header: the peer");
        assert_eq!(client_address(ip("10.1.2.3"), &["not an address"], &trusted), ip("10.1.2.3"));
        assert_eq!(client_address(ip("10.1.2.3"), &["1.1.1.1"], &[]), ip("10.1.2.3"), "nothing trusted by default");
        // A client writing garbage before the proxy's entry is still charged as itself.
        assert_eq!(client_address(ip("10.1.2.3"), &["x, 198.51.100.7"], &trusted), ip("198.51.100.7"));
        // Every hop in a trusted block is a proxy vouching for the one left of it;
        // an unreadable hop ends the walk at the last vouched-for address.
        assert_eq!(client_address(ip("10.1.2.3"), &["6.6.6.6, 10.7.7.7"], &trusted), ip("6.6.6.6"));
        assert_eq!(client_address(ip("10.1.2.3"), &["x, 10.7.7.7"], &trusted), ip("10.7.7.7"));
    }

    #[test]
    fn s12_ipv6_limits_are_kept_per_64() {
        assert_eq!(limit_key(ip("2001:db8:1:2:aaaa::1")), limit_key(ip("2001:db8:1:2:bbbb::9")));
        assert_ne!(limit_key(ip("2001:db8:1:2::1")), limit_key(ip("2001:db8:1:3::1")));
        assert_eq!(limit_key(ip("198.51.100.7")), ip("198.51.100.7"));
        assert_eq!(limit_key(ip("::ffff:198.51.100.7")), ip("198.51.100.7"));
    }

    #[test]
    fn cidr_blocks_parse_and_match() {
        let block: Cidr = "192.168.4.0/22".parse().unwrap();
        assert!(block.contains(ip("192.168.7.255")) && !block.contains(ip("192.168.8.0")));
        assert!("0.0.0.0/0".parse::<Cidr>().unwrap().contains(ip("8.8.8.8")));
        assert!("::ffff:0:0/96".parse::<Cidr>().is_ok());
        assert!("10.0.0.0/33".parse::<Cidr>().is_err() && "bogus".parse::<Cidr>().is_err());
        assert!(parse_trusted("").unwrap().is_empty());
    }
}
