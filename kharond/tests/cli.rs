//! The kharond command line itself: help that teaches and usage errors that say what is wrong.
//! (Also makes `cargo test --workspace` build the binary the end-to-end suite runs.)

use std::process::Command;

#[test]
fn help_lists_flags_examples_and_exit_codes() {
    let out = Command::new(env!("CARGO_BIN_EXE_kharond")).arg("--help").output().unwrap();
    assert!(out.status.success());
    let help = String::from_utf8_lossy(&out.stdout);
    for needle in [
        "--listen",
        "--inventory",
        "--ssh-config",
        "--control-socket",
        "--config",
        "Exit codes",
        "socks5h://",
    ] {
        assert!(help.contains(needle), "--help lacks {needle}:\n{help}");
    }
}

#[test]
fn an_unknown_flag_is_a_usage_error() {
    let out = Command::new(env!("CARGO_BIN_EXE_kharond")).arg("--no-such-flag").output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--no-such-flag"));
}
