//! The PAC port's request judge (kharond/src/http/request.rs), driven as `read_head` drives it:
//! on a growing prefix of what arrived. Besides "no panic", it checks what the reader relies on:
//! once a prefix holds a complete head, every longer prefix gives the same head length and the
//! same answer (the reader peeks, and must not change its mind when more bytes come); a prefix
//! still partial is under the size limit; and the PAC itself goes only to a request whose one
//! Host names this machine and that no web page sent.
#![no_main]

use kharon_fuzz::http::request::{self, Body, MAX_REQUEST, Parsed};
use libfuzzer_sys::fuzz_target;

fn head_len(bytes: &[u8]) -> Parsed<usize> {
    request::parse(bytes, |_, len| len)
}

fuzz_target!(|input: &[u8]| {
    let input = &input[..input.len().min(MAX_REQUEST + 64)];
    let mut settled: Option<(usize, Option<request::Reply>)> = None;
    // Every prefix would cost O(n²) on long inputs; a stride keeps each run fast and still walks
    // the boundaries (the first byte, the head's end) often across the corpus.
    let stride = (input.len() / 64).max(1);
    let mut ends: Vec<usize> = (0..=input.len()).step_by(stride).collect();
    ends.push(input.len());
    for end in ends {
        let prefix = &input[..end];
        let reply = request::judge(prefix);
        match head_len(prefix) {
            Parsed::Partial => {
                assert!(prefix.len() < MAX_REQUEST, "partial at {} bytes", prefix.len());
                assert!(reply.is_none(), "an answer before the head ended");
                assert!(settled.is_none(), "complete at a shorter prefix, partial at {end}");
            }
            Parsed::Complete(len) => {
                assert!(len <= prefix.len());
                match &settled {
                    Some((was, answer)) => {
                        assert_eq!(*was, len, "head length changed with more bytes");
                        assert_eq!(*answer, reply, "answer changed with more bytes");
                    }
                    None => settled = Some((len, reply)),
                }
            }
            Parsed::TooLarge | Parsed::Malformed => assert!(reply.is_some(), "refused without an answer"),
        }
        if let Some(r) = reply {
            if r.body == Body::Pac {
                let text = String::from_utf8_lossy(prefix).to_ascii_lowercase();
                assert!(text.contains("host:"), "PAC without a Host header");
                assert!(r.status.starts_with("200"));
            }
        }
    }
});
