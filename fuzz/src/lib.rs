//! kharond's parsers of client bytes, compiled from kharond's own source files for the fuzz
//! targets in `fuzz_targets/`: `proxy/socks/wire.rs` (pure functions, no I/O) and the PAC port's
//! request judge `proxy/http/request.rs` (from a head's bytes to the answer, needs only
//! httparse), with `#[path]`, at the module paths they have in kharond. The one thing
//! `socks/wire.rs` names outside them, `crate::routing::target::Unreachable`, comes with
//! `routing/target.rs`, which needs only std. Depending on the kharond library instead would
//! compile the whole daemon (tokio, tonic, the SSH engine) into every fuzz target.
//!
//! The ssh_config engine is a crate of its own (kharon-ssh-config), which the `ssh_config` target
//! depends on directly.

#![allow(dead_code, unused_imports, clippy::all)]

#[path = "../../kharond/src/routing"]
pub mod routing {
    pub mod target;
}

#[path = "../../kharond/src/proxy"]
pub mod proxy {
    pub mod socks {
        pub mod wire;
    }
    pub mod http {
        pub mod request;
    }
}
