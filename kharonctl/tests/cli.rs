//! The kharonctl command line itself: help that teaches and usage errors.
//! (Also makes `cargo test --workspace` build the binary the end-to-end suite runs.)

use std::process::Command;

#[test]
fn help_lists_the_subcommands_and_exit_codes() {
    let out = Command::new(env!("CARGO_BIN_EXE_kharonctl")).arg("--help").output().unwrap();
    assert!(out.status.success());
    let help = String::from_utf8_lossy(&out.stdout);
    for needle in ["status", "reload", "route", "Exit codes"] {
        assert!(help.contains(needle), "--help lacks {needle}:\n{help}");
    }
}

#[test]
fn route_without_a_host_is_a_usage_error() {
    let out = Command::new(env!("CARGO_BIN_EXE_kharonctl")).arg("route").output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("<HOST>"));
}

/// `clusters NAME emergency-credentials --help` says what it does, where the key comes from, the
/// variables for scripts, and shows an example.
#[test]
fn emergency_credentials_help_teaches_keys_variables_and_examples() {
    let out = Command::new(env!("CARGO_BIN_EXE_kharonctl"))
        .args(["clusters", "c-x", "emergency-credentials", "--help"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let help = String::from_utf8_lossy(&out.stdout);
    for needle in [
        "emergency-cedentials-buckets",
        "emergency-credentials-receive",
        "KHARON_PASSBOLT_KEY",
        "KHARON_PASSBOLT_PASSPHRASE",
        "EMR_PASSPHRASE",
        "KHARON_PASSBOLT_TOTP",
        "EMR_TOTP_TOKEN",
        "never stored",
        "--passbolt-url",
        "Examples:\n  kharonctl clusters c-example-1 emergency-credentials --merge",
    ] {
        assert!(help.contains(needle), "--help lacks {needle:?}:\n{help}");
    }
}

/// A part of a cluster id, the picker and the exit code of an ambiguous one are in `--help`
/// (and so in the man pages, which are generated from it).
#[test]
fn help_says_what_a_part_of_an_id_does_and_its_exit_code() {
    for args in [&["--help"][..], &["switch", "--help"], &["clusters", "--help"]] {
        let out = Command::new(env!("CARGO_BIN_EXE_kharonctl")).args(args).output().unwrap();
        assert!(out.status.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
        let help = String::from_utf8_lossy(&out.stdout);
        for needle in ["part of", "terminal", "2 "] {
            assert!(help.contains(needle), "{args:?} --help lacks {needle:?}:\n{help}");
        }
    }
}
