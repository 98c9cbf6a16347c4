//! kharond's parsers of untrusted input, compiled from kharond's own source files for the fuzz
//! targets in `fuzz_targets/`.
//!
//! kharond is a binary crate, so nothing can depend on it. Instead of giving it a `[lib]` target
//! (which would have to take every module along: the socks module needs the proxy's handshake,
//! which needs `state`, the SSH pool and tokio), this crate includes the few files that parse,
//! with `#[path]`, at the module paths they have in kharond: `proxy/socks/wire.rs` (pure
//! functions, no I/O) and the `ssh/config` tree (which only uses its own submodules, russh's
//! algorithm names and libc). kharond itself is unchanged. The one thing `socks/wire.rs` names
//! outside those files, `crate::routing::target::Unreachable`, comes with `routing/target.rs`,
//! which needs only std.
//!
//! The PAC port's request judge (`proxy/http/request.rs`, from a head's bytes to the answer) needs
//! only httparse.

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

#[path = "../../kharond/ssh/src"]
pub mod ssh {
    pub mod config;
}
