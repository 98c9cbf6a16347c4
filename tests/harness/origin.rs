//! An HTTP/1.1 origin server in a child process (`tests/fixtures/http_origin.py`, Python's
//! `http.server`): files of a directory (a bare git repository, for git's dumb HTTP protocol) and
//! `POST /echo`, which answers with the request as it arrived. A server kharon did not write, for
//! what a client behind the HTTP proxy reaches.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

pub struct Origin {
    child: Child,
    port: u16,
}

impl Origin {
    /// Serves `dir` on 127.0.0.1 (a port of its own), until dropped.
    pub fn start(dir: &Path) -> Self {
        let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fixtures/http_origin.py");
        let mut child = Command::new("python3")
            .arg(&script)
            .arg(dir)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn python3 http origin");
        let stdout = child.stdout.take().expect("origin stdout");
        let mut line = String::new();
        BufReader::new(stdout).read_line(&mut line).expect("read the origin's port");
        let port: u16 = match line.trim().parse() {
            Ok(port) => port,
            Err(_) => {
                let _ = child.kill();
                panic!("no port from {}: {line:?}", script.display());
            }
        };
        Self { child, port }
    }

    pub fn port(&self) -> u16 {
        self.port
    }
}

impl Drop for Origin {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
