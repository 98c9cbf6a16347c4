//! The SOCKS5 handshake parsers (kharond/src/proxy/socks/wire.rs), driven as kharond's reader drives
//! them: each message grows by what arrived (at least what the parser says it still needs), and
//! the next message starts where the parser said the last one ended. Besides "no panic", it
//! checks what the reader relies on: `Need` is never 0, a parsed message's length lies inside the
//! bytes read and its ranges inside its length, and the verdict does not depend on how the bytes
//! arrived (one at a time, exactly what was asked for, or everything at once).
#![no_main]

use kharon_fuzz::proxy::socks::wire::{self, Address, Parse, Violation};
use libfuzzer_sys::fuzz_target;

/// How the client's bytes arrive.
#[derive(Clone, Copy)]
enum Reads {
    OneByte,
    Exact,
    All,
}

/// Reads one message from `input[*at..]` as kharond's `read_message` does; `None`: cut short.
fn read<T: std::fmt::Debug>(
    input: &[u8],
    at: &mut usize,
    reads: Reads,
    parse: fn(&[u8]) -> Result<Parse<T>, Violation>,
) -> Option<(Result<T, Violation>, usize)> {
    let mut len = 0;
    loop {
        let buf = &input[*at..*at + len];
        match parse(buf) {
            Ok(Parse::Done(message, used)) => {
                assert!(used > 0 && used <= len, "a message of {used} bytes in {len} read");
                *at += used;
                return Some((Ok(message), used));
            }
            Ok(Parse::Need(more)) => {
                assert!(more > 0, "Need(0) would make the reader spin");
                let left = input.len() - *at - len;
                if left == 0 {
                    return None;
                }
                len += match reads {
                    Reads::OneByte => 1,
                    Reads::Exact => more.min(left),
                    Reads::All => left,
                };
            }
            Err(violation) => {
                // Every violation either has an answer or is closed silently; both must be decidable.
                let _ = violation.answer();
                *at += len;
                return Some((Err(violation), len));
            }
        }
    }
}

/// The whole handshake: greeting, then credentials when the first input byte is odd (as if a
/// password were configured), then the request. Returns a comparable summary.
fn handshake(input: &[u8], reads: Reads) -> String {
    let Some((&mode, input)) = input.split_first() else { return String::new() };
    let mut at = 0;
    let mut out = String::new();
    let Some((greeting, _)) = read(input, &mut at, reads, wire::greeting) else { return out };
    out += &format!("{greeting:?};");
    if greeting.is_err() {
        return out;
    }
    if mode & 1 == 1 {
        let start = at;
        let Some((credentials, len)) = read(input, &mut at, reads, wire::credentials) else {
            return out;
        };
        if let Ok(c) = &credentials {
            assert!(c.username.end <= len && c.password.end <= len && c.username.start < c.username.end);
            let _ = (&input[start..][c.username.clone()], &input[start..][c.password.clone()]);
        }
        out += &format!("{credentials:?};");
        if credentials.is_err() {
            return out;
        }
    }
    let start = at;
    let Some((request, len)) = read(input, &mut at, reads, wire::request) else { return out };
    if let Ok(wire::ConnectRequest { address: Address::Name(range), .. }) = &request {
        assert!(range.end <= len, "name range {range:?} past the {len} bytes read");
        let _ = &input[start..][range.clone()];
    }
    out += &format!("{request:?}");
    // How far a refused message was read depends on the chunks it came in (the reader judges a
    // field once it has it); what a complete handshake took as its own must not.
    if request.is_ok() {
        out += &format!(";{at}");
    }
    out
}

fuzz_target!(|input: &[u8]| {
    let exact = handshake(input, Reads::Exact);
    assert_eq!(handshake(input, Reads::OneByte), exact);
    assert_eq!(handshake(input, Reads::All), exact);
});
