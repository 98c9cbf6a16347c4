//! The PAC port's request judge (kharond/src/proxy/http/request.rs), driven as `read_head` drives it:
//! on a growing prefix of what arrived. Besides "no panic", it checks what the reader relies on:
//! once a prefix holds a complete head, every longer prefix gives the same head length and the
//! same verdict (the reader peeks, and must not change its mind when more bytes come); a prefix
//! still partial is under the size limit; a head refused before its end says the rest is unread;
//! and the PAC itself goes only to a request whose one Host names this machine and that no web
//! page sent.
#![no_main]

use kharon_fuzz::proxy::http::request::{self, Body, Judged, MAX_REQUEST};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|input: &[u8]| {
    let input = &input[..input.len().min(MAX_REQUEST + 64)];
    let mut settled: Option<Judged<()>> = None;
    // Every prefix would cost O(n²) on long inputs; a stride keeps each run fast and still walks
    // the boundaries (the first byte, the head's end) often across the corpus.
    let stride = (input.len() / 64).max(1);
    let mut ends: Vec<usize> = (0..=input.len()).step_by(stride).collect();
    ends.push(input.len());
    for end in ends {
        let prefix = &input[..end];
        let judged = request::judge(prefix, |_| ());
        match &judged {
            Judged::Partial => {
                assert!(prefix.len() < MAX_REQUEST, "partial at {} bytes", prefix.len());
                assert!(settled.is_none(), "complete at a shorter prefix, partial at {end}");
            }
            Judged::Proxy { len, .. } | Judged::Answer { len: Some(len), .. } => {
                assert!(*len <= prefix.len());
                match &settled {
                    Some(was) => assert_eq!(*was, judged, "head length or answer changed with more bytes"),
                    None => settled = Some(judged.clone()),
                }
            }
            // Refused before its end (too large, malformed): answered all the same.
            Judged::Answer { len: None, reply } => assert!(!reply.whole_request_read),
        }
        if let Judged::Answer { reply, .. } = &judged {
            if reply.body == Body::Pac {
                let text = String::from_utf8_lossy(prefix).to_ascii_lowercase();
                assert!(text.contains("host:"), "PAC without a Host header");
                assert!(reply.status.starts_with("200"));
            }
        }
    }
});
