//! The ssh_config lexer, loader and resolver (kharon-ssh-config, kharond/ssh-config) on arbitrary file
//! contents: loading never panics, and neither does resolving the chain of every Host it names
//! (tokens, `${VAR}`, ProxyJump lists, cycles). Errors are expected; their text must render.
//!
//! `Include` lines are dropped from the input: they would read arbitrary files of this machine
//! (the loader's Include handling is covered by kharon-ssh-config's unit tests).
#![no_main]

use kharon_ssh_config::SshConfig;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|input: &[u8]| {
    let Ok(text) = std::str::from_utf8(input) else { return };
    let text: String = text
        .lines()
        .filter(|l| !l.to_ascii_lowercase().contains("include"))
        .map(|l| format!("{l}\n"))
        .collect();
    let Ok(dir) = tempfile::tempdir() else { return };
    let path = dir.path().join("config");
    if std::fs::write(&path, text).is_err() {
        return;
    }
    let getenv = |name: &str| match name {
        "USER" => Some("fuzz".to_owned()),
        "HOME" => Some("/home/fuzz".to_owned()),
        "EMPTY" => Some(String::new()),
        _ => None,
    };
    match SshConfig::load(&path, None, dir.path(), &getenv) {
        Ok(config) => {
            for host in config.hosts().into_iter().take(16) {
                match config.chain(&host) {
                    Ok(chain) => {
                        let _ = format!("{chain:?}");
                    }
                    Err(e) => {
                        let _ = e.to_string();
                    }
                }
            }
        }
        Err(e) => {
            let _ = e.to_string();
        }
    }
});
