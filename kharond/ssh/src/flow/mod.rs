//! How much a path's sessions let the far side send: the receive window and the packet size a
//! session is dialled with, the window its channels are re-opened to as it goes, and the
//! measurements that decide it.
//!
//! Owns: the window rule (`window`), measuring a path while its channels carry data (`meter`),
//! and the packet size and the buffers counted in it (`packets`).

pub(crate) mod meter;
pub(crate) mod packets;
pub(crate) mod window;
