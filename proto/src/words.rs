//! The word each control API enum value is shown as, in tables and in JSON alike, so the two
//! cannot drift apart. A value this build does not know (a newer kharond) reads as its enum's
//! unspecified value, as prost's getters do.

use super::v1::{ChainState, ConnectionState, ReloadResult, Via};

impl ChainState {
    /// "idle", "connecting", "connected", "failed", "asking", "login-required"; "unknown" when
    /// unspecified.
    pub fn word(self) -> &'static str {
        match self {
            ChainState::Idle => "idle",
            ChainState::Connecting => "connecting",
            ChainState::Connected => "connected",
            ChainState::Failed => "failed",
            ChainState::Asking => "asking",
            ChainState::LoginRequired => "login-required",
            ChainState::Unspecified => "unknown",
        }
    }
}

impl ReloadResult {
    /// "ok", "partial", "failed"; "unknown" when unspecified.
    pub fn word(self) -> &'static str {
        match self {
            ReloadResult::Ok => "ok",
            ReloadResult::Partial => "partial",
            ReloadResult::Failed => "failed",
            ReloadResult::Unspecified => "unknown",
        }
    }
}

impl ConnectionState {
    /// "handshake", "dialing", "open", "half-closed"; "unknown" when unspecified.
    pub fn word(self) -> &'static str {
        match self {
            ConnectionState::Handshake => "handshake",
            ConnectionState::Dialing => "dialing",
            ConnectionState::Open => "open",
            ConnectionState::HalfClosed => "half-closed",
            ConnectionState::Unspecified => "unknown",
        }
    }
}

impl Via {
    /// "jumphost" or "direct", the routing model's words ([`kharon_routing::table::Via`]).
    /// Unspecified reads "direct": a route that names no jump host is direct.
    pub fn word(self) -> &'static str {
        let via = match self {
            Via::Jumphost => kharon_routing::table::Via::Jumphost,
            Via::Direct | Via::Unspecified => kharon_routing::table::Via::Direct,
        };
        via.as_str()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The words are an interface (scripts read them from `-o json`); the proto names are not.
    #[test]
    fn every_value_has_its_word() {
        let chain = [
            ChainState::Unspecified,
            ChainState::Idle,
            ChainState::Connecting,
            ChainState::Connected,
            ChainState::Failed,
        ];
        assert_eq!(chain.map(ChainState::word), ["unknown", "idle", "connecting", "connected", "failed"]);
        let reload =
            [ReloadResult::Unspecified, ReloadResult::Ok, ReloadResult::Partial, ReloadResult::Failed];
        assert_eq!(reload.map(ReloadResult::word), ["unknown", "ok", "partial", "failed"]);
        let connection = [
            ConnectionState::Unspecified,
            ConnectionState::Handshake,
            ConnectionState::Dialing,
            ConnectionState::Open,
            ConnectionState::HalfClosed,
        ];
        assert_eq!(
            connection.map(ConnectionState::word),
            ["unknown", "handshake", "dialing", "open", "half-closed"]
        );
        assert_eq!(
            [Via::Unspecified, Via::Direct, Via::Jumphost].map(Via::word),
            ["direct", "direct", "jumphost"]
        );
    }
}
