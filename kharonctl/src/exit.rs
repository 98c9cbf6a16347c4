//! kharonctl's exit codes, as `--help` documents them.

pub const FAILED: u8 = 1;
pub const USAGE: u8 = 2;
pub const NOT_RUNNING: u8 = 3;
/// `reload`/`update`: the table was installed, the new ssh config not (or not for every jump host).
pub const PARTIAL: u8 = 4;
