//! Echo targets on loopback: every byte a client sends comes back, and its EOF closes the
//! connection.
//!
//! - [`EchoServer`]: in this process, one thread per connection; for a few dozen connections.
//! - [`EchoProcess`]: `tests/fixtures/echo_server.py` in a child process (one asyncio loop), for
//!   thousands: their sockets then count against the child's descriptor limit, not the test's.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};

pub struct EchoServer {
    addr: SocketAddr,
}

impl EchoServer {
    pub fn start() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind echo server");
        let addr = listener.local_addr().expect("addr");
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { continue };
                std::thread::spawn(move || echo(stream));
            }
        });
        Self { addr }
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }
}

fn echo(mut stream: TcpStream) {
    let mut buf = [0u8; 16 * 1024];
    loop {
        match stream.read(&mut buf) {
            Ok(0) | Err(_) => return,
            Ok(n) => {
                if stream.write_all(&buf[..n]).is_err() {
                    return;
                }
            }
        }
    }
}

pub struct EchoProcess {
    child: Child,
    addr: SocketAddr,
}

impl EchoProcess {
    pub fn start() -> Self {
        let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fixtures/echo_server.py");
        let mut child = Command::new("python3")
            .arg(&script)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn python3 echo server");
        let stdout = child.stdout.take().expect("echo server stdout");
        let mut line = String::new();
        BufReader::new(stdout).read_line(&mut line).expect("read echo server port");
        let port: u16 = match line.trim().parse() {
            Ok(port) => port,
            Err(_) => {
                let _ = child.kill();
                panic!("no port from {}: {line:?}", script.display());
            }
        };
        Self { child, addr: SocketAddr::from(([127, 0, 0, 1], port)) }
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for EchoProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
