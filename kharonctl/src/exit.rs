//! kharonctl's exit codes, as `--help` documents them.

pub const FAILED: u8 = 1;
pub const USAGE: u8 = 2;
pub const NOT_RUNNING: u8 = 3;
/// `reload`/`update`: the table was installed, the new ssh config not (or not for every jump host).
pub const PARTIAL: u8 = 4;
/// The reader of kharonctl's output went away (`kharonctl clusters | head`): what a shell shows
/// for a program a broken pipe ended, 128 + SIGPIPE (13) (broken_pipe.rs).
pub const BROKEN_PIPE: u8 = 141;
