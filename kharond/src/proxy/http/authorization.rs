//! `Proxy-Authorization: Basic` on every HTTP proxy request, CONNECT and absolute-form alike: with
//! `[socks] username` and `password` set, a request needs exactly one
//! `Proxy-Authorization: Basic base64(username:password)`, compared in constant time by the same
//! gated check as SOCKS5's ([`Credentials::check`]: at most 10 wrong guesses answered a second);
//! else 407 with `Proxy-Authenticate: Basic realm="kharon"` ([`CHALLENGE`]).
//!
//! The parse that finds a head's end only decodes them ([`demand`]); the check waits its turn
//! afterwards ([`check`]). The header is never logged and never forwarded, and the decoded
//! credentials are wiped once judged. Without a password, none is asked for, as with SOCKS.

use base64::Engine;
use zeroize::Zeroizing;

use crate::proxy::credentials::{Caller, Credentials};

/// Sent with every 407.
pub const CHALLENGE: &str = "Proxy-Authenticate: Basic realm=\"kharon\"\r\n";

/// The body of every 407: what to set.
pub const HOW: &str = "kharond needs the [socks] username and password: curl --proxy-user USER:PASSWORD, or \
                       http://USER:PASSWORD@HOST:PORT as the proxy URL\n";

/// Decoded `user:password` of a `Proxy-Authorization`, wiped when dropped.
pub struct Given {
    decoded: Zeroizing<Vec<u8>>,
    colon: usize,
}

/// Why a request's credentials do not let it through.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Problem {
    #[error("without Proxy-Authorization, but [socks] username and password are set")]
    Missing,
    #[error("with a Proxy-Authorization that is not one `Basic base64(user:password)`")]
    Malformed,
    #[error("with a wrong username or password")]
    Wrong,
}

/// The credentials a request carries, decoded but not checked, when kharond requires them
/// (`auth`); `None` when it does not.
pub fn demand(
    headers: &[httparse::Header<'_>],
    auth: Option<&Credentials>,
) -> Result<Option<Given>, Problem> {
    match auth {
        Some(_) => given(headers).map(Some),
        None => Ok(None),
    }
}

/// Passes `given` through the gated check when kharond requires credentials (`auth`); `caller` is
/// who asks (credentials.rs).
pub async fn check(auth: Option<&Credentials>, given: Option<&Given>, caller: Caller) -> Result<(), Problem> {
    match (auth, given) {
        (Some(expected), Some(given)) => {
            let (username, password) = given.decoded.split_at(given.colon);
            if expected.check(username, &password[1..], caller).await { Ok(()) } else { Err(Problem::Wrong) }
        }
        // `demand` asks for credentials whenever a password is set; should it not have, this is
        // still no way in.
        (Some(_), None) => Err(Problem::Missing),
        (None, _) => Ok(()),
    }
}

fn given(headers: &[httparse::Header<'_>]) -> Result<Given, Problem> {
    let mut given = headers.iter().filter(|h| h.name.eq_ignore_ascii_case("proxy-authorization"));
    let header = match (given.next(), given.next()) {
        (None, _) => return Err(Problem::Missing),
        (Some(header), None) => header,
        (Some(_), Some(_)) => return Err(Problem::Malformed),
    };
    let value = header.value.trim_ascii();
    let split = value.iter().position(|b| *b == b' ').ok_or(Problem::Malformed)?;
    let (scheme, token) = value.split_at(split);
    if !scheme.eq_ignore_ascii_case(b"basic") {
        return Err(Problem::Malformed);
    }
    let decoded = Zeroizing::new(
        base64::engine::general_purpose::STANDARD
            .decode(token.trim_ascii())
            .map_err(|_| Problem::Malformed)?,
    );
    // RFC 7617: the user-id ends at the first colon; the password may hold more.
    let colon = decoded.iter().position(|b| *b == b':').ok_or(Problem::Malformed)?;
    Ok(Given { decoded, colon })
}
