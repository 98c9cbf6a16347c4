//! kharond's parsers of untrusted input, compiled from kharond's own source files for the fuzz
//! targets in `fuzz_targets/`.
//!
//! kharond is a binary crate, so nothing can depend on it. Instead of giving it a `[lib]` target
//! (which would have to take every module along: the socks module needs `proxy`, which needs
//! `state`, the SSH pool and tokio), this crate includes the few files that parse, with
//! `#[path]`: `socks/wire.rs` (pure functions, no I/O) and the `ssh/config` tree (which only
//! uses its own submodules, russh's algorithm names and libc). kharond itself is unchanged.
//! The one thing `socks/wire.rs` names outside those files, `crate::target::Unreachable`, comes
//! with `target.rs`, which needs only std.
//!
//! The PAC port's request judge (`http/request.rs`, from a head's bytes to the answer) needs only
//! httparse.

#![allow(dead_code, unused_imports, clippy::all)]

#[path = "../../kharond/src/target.rs"]
pub mod target;

#[path = "../../kharond/src/socks"]
pub mod socks {
    pub mod wire;
}

#[path = "../../kharond/src/ssh"]
pub mod ssh {
    pub mod config;
}

#[path = "../../kharond/src/http"]
pub mod http {
    pub mod request;
}
