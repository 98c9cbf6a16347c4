//! `FetchObject`: one S3 `GetObject` (path-style, AWS Signature V4), made by the daemon so that it
//! takes the route a SOCKS client's connection to the same endpoint would take: direct, or a
//! channel from the endpoint's jump host chain. Emergency credentials live in object storage that
//! may be reachable only through a jump host (docs/emergency-credentials.md, "The object"); kharonctl does the Passbolt and
//! OpenPGP parts and asks the daemon for the bytes.
//!
//! ```text
//! endpoint host[:port] → dial::routed (direct | jump host) → TLS unless insecure
//!   → HTTP/1.1 GET /bucket/key signed with the caller's keys → body (at most MAX_BODY)
//! ```
//!
//! The request carries the bucket's secret key. It is only ever handed to the signer: this module
//! logs endpoint, bucket and key names, never credentials, and no error message contains them
//! (nor anything of the server's error body except its S3 error code).

use std::sync::{Arc, OnceLock};
use std::time::{Duration, SystemTime};

use http_body_util::{BodyExt as _, Empty, Limited};
use hyper::body::Bytes;
use hyper_util::rt::TokioIo;
use kharon_common::Secret;
use kharon_common::errors::{Chain, chain};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio_rustls::rustls;

use crate::routing::dial::{self, Failed, Upstream};
use crate::routing::target::Target;
use crate::state::State;
use kharon_routing::table::Route;

/// The largest object we return. Emergency credential objects hold a few armored messages (a few
/// KiB each); a larger answer is not one of them, and the whole body travels in one gRPC message.
pub const MAX_BODY: usize = 1024 * 1024;
/// How much of an error answer is read to find its S3 error code.
const MAX_ERROR_BODY: usize = 64 * 1024;
/// From the first byte sent until the whole body is in (the connect has its own timeout).
const EXCHANGE_TIMEOUT: Duration = Duration::from_secs(30);
/// The region when the bucket list names none (what Go kharon and the AWS SDKs assume).
pub const DEFAULT_REGION: &str = "us-east-1";

/// One S3 GetObject: what to fetch and with which keys. `Debug` never shows the secret key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GetObject {
    pub endpoint: String,
    pub bucket: String,
    pub key: String,
    pub access_key_id: String,
    pub secret_access_key: Secret,
    pub region: String,
    pub insecure: bool,
}

/// The object and the way it came.
#[derive(Debug)]
pub struct Fetched {
    pub body: Vec<u8>,
    pub route: Route,
}

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("endpoint {endpoint:?} is not host[:port] (no scheme, no path)")]
    BadEndpoint { endpoint: String },
    #[error("bucket name {bucket:?} is empty, too long or contains '/' or control characters")]
    BadBucket { bucket: String },
    #[error("object key is empty, too long or contains control characters")]
    BadKey,
    /// The dialer's error names the address (or the jump host and hop); a routed one says the route.
    #[error("{}", connect_failure(.0))]
    Connect(Box<Failed>),
    #[error("TLS handshake with {endpoint} failed")]
    Tls { endpoint: String, source: std::io::Error },
    #[error("HTTP exchange with {endpoint} failed: {reason}")]
    Http { endpoint: String, reason: String },
    #[error("{endpoint} did not answer within {timeout:?}")]
    Timeout { endpoint: String, timeout: Duration },
    #[error("no object {key:?} in bucket {bucket:?} at {endpoint} ({code})")]
    NotFound { endpoint: String, bucket: String, key: String, code: String },
    #[error(
        "{endpoint} refused the credentials for bucket {bucket:?} (HTTP {status}, {code}); the access \
         key in the bucket list may be wrong or lack read access"
    )]
    Denied { endpoint: String, bucket: String, status: u16, code: String },
    #[error("{endpoint} answered HTTP {status} ({code}) for {bucket}/{key}")]
    Status { endpoint: String, bucket: String, key: String, status: u16, code: String },
    #[error(
        "object {bucket}/{key} at {endpoint} is larger than {MAX_BODY} bytes; not an emergency credential object"
    )]
    TooLarge { endpoint: String, bucket: String, key: String },
    #[error("cannot sign the request for {endpoint}: {reason}")]
    Sign { endpoint: String, reason: String },
}

fn connect_failure(failed: &Failed) -> String {
    match failed.route {
        Route::Direct => chain(&failed.error),
        Route::Jumphost(_) => failed.to_string(),
    }
}

/// The endpoint split into what the dialer, TLS and the Host header need.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Endpoint {
    /// Lowercase name or IP literal (no brackets).
    host: String,
    port: u16,
    /// The Host header: `host`, `host:port`, `[v6]:port`; no port when it is the scheme's default.
    authority: String,
}

fn parse_endpoint(endpoint: &str, insecure: bool) -> Result<Endpoint, Error> {
    let bad = || Error::BadEndpoint { endpoint: endpoint.to_owned() };
    if endpoint.is_empty()
        || endpoint.contains(['/', '?', '#', '@', '\\'])
        || endpoint.contains(char::is_whitespace)
    {
        return Err(bad());
    }
    let scheme = if insecure { "http" } else { "https" };
    let url = url::Url::parse(&format!("{scheme}://{endpoint}/")).map_err(|_| bad())?;
    let host = match url.host() {
        Some(url::Host::Domain(d)) => d.to_ascii_lowercase(),
        Some(url::Host::Ipv4(ip)) => ip.to_string(),
        Some(url::Host::Ipv6(ip)) => ip.to_string(),
        None => return Err(bad()),
    };
    let port = url.port_or_known_default().ok_or_else(bad)?;
    let host_part = if host.contains(':') { format!("[{host}]") } else { host.clone() };
    let authority = match url.port() {
        Some(p) => format!("{host_part}:{p}"),
        None => host_part,
    };
    Ok(Endpoint { host, port, authority })
}

fn check_names(req: &GetObject) -> Result<(), Error> {
    let b = &req.bucket;
    if b.is_empty() || b.len() > 255 || b.contains('/') || b.chars().any(char::is_control) {
        return Err(Error::BadBucket { bucket: b.clone() });
    }
    let k = &req.key;
    if k.is_empty() || k.len() > 1024 || k.chars().any(char::is_control) {
        return Err(Error::BadKey);
    }
    Ok(())
}

/// Path segments as S3 expects them: everything but the unreserved characters percent-encoded
/// (`/` kept between key segments), so the path we send is the one we sign.
const SEGMENT: &percent_encoding::AsciiSet =
    &percent_encoding::NON_ALPHANUMERIC.remove(b'-').remove(b'_').remove(b'.').remove(b'~');

fn object_path(bucket: &str, key: &str) -> String {
    let enc = |s: &str| percent_encoding::utf8_percent_encode(s, SEGMENT).to_string();
    let key: Vec<String> = key.split('/').map(enc).collect();
    format!("/{}/{}", enc(bucket), key.join("/"))
}

/// Fetches the object through the route a SOCKS client would get for the endpoint's host.
pub async fn fetch(state: &State, req: &GetObject) -> Result<Fetched, Error> {
    let endpoint = parse_endpoint(&req.endpoint, req.insecure)?;
    check_names(req)?;
    let target = Target::from_host(endpoint.host.as_bytes(), endpoint.port)
        .map_err(|_| Error::BadEndpoint { endpoint: req.endpoint.clone() })?;
    let (route, upstream) = dial::routed(&state.routes, &target, state.proxy.connect_timeout)
        .await
        .map_err(|failed| Error::Connect(Box::new(failed)))?;
    let result = match upstream {
        Upstream::Tcp(tcp) => exchange(tcp, &endpoint, req, SystemTime::now()).await,
        Upstream::Tunnel(tunnel) => exchange(tunnel, &endpoint, req, SystemTime::now()).await,
    };
    match &result {
        Ok(body) => tracing::info!(
            endpoint = %req.endpoint, bucket = %req.bucket, key = %req.key, via = route.label(), bytes = body.len(),
            "fetched object"
        ),
        Err(e) => {
            tracing::info!(endpoint = %req.endpoint, bucket = %req.bucket, via = route.label(), "object fetch failed: {}", Chain(e))
        }
    }
    Ok(Fetched { body: result?, route })
}

/// TLS (unless insecure), then the signed GET, all within [`EXCHANGE_TIMEOUT`].
async fn exchange<S>(
    stream: S,
    endpoint: &Endpoint,
    req: &GetObject,
    now: SystemTime,
) -> Result<Vec<u8>, Error>
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let work = async {
        if req.insecure {
            get(stream, endpoint, req, now).await
        } else {
            let tls = tls_handshake(stream, endpoint).await?;
            get(tls, endpoint, req, now).await
        }
    };
    tokio::time::timeout(EXCHANGE_TIMEOUT, work)
        .await
        .unwrap_or_else(|_| Err(Error::Timeout { endpoint: req.endpoint.clone(), timeout: EXCHANGE_TIMEOUT }))
}

/// One client configuration: the platform's roots (`SSL_CERT_FILE`/`SSL_CERT_DIR` are honoured),
/// loaded on first use.
fn tls_config() -> Result<Arc<rustls::ClientConfig>, String> {
    static CONFIG: OnceLock<Result<Arc<rustls::ClientConfig>, String>> = OnceLock::new();
    CONFIG
        .get_or_init(|| {
            let mut roots = rustls::RootCertStore::empty();
            let found = rustls_native_certs::load_native_certs();
            for e in &found.errors {
                tracing::warn!("loading the system's CA certificates: {e}");
            }
            let (added, ignored) = roots.add_parsable_certificates(found.certs);
            tracing::debug!(added, ignored, "CA certificates for object storage");
            let provider = Arc::new(rustls::crypto::ring::default_provider());
            rustls::ClientConfig::builder_with_provider(provider)
                .with_safe_default_protocol_versions()
                .map(|b| Arc::new(b.with_root_certificates(roots).with_no_client_auth()))
                .map_err(|e| format!("TLS setup failed: {e}"))
        })
        .clone()
}

async fn tls_handshake<S>(stream: S, endpoint: &Endpoint) -> Result<tokio_rustls::client::TlsStream<S>, Error>
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let tls_err = |source| Error::Tls { endpoint: endpoint.authority.clone(), source };
    let name = rustls::pki_types::ServerName::try_from(endpoint.host.clone())
        .map_err(|e| tls_err(std::io::Error::new(std::io::ErrorKind::InvalidInput, e)))?;
    let config = tls_config().map_err(|e| tls_err(std::io::Error::other(e)))?;
    tokio_rustls::TlsConnector::from(config).connect(name, stream).await.map_err(tls_err)
}

/// Signs and sends the GET over `io` and reads the answer.
async fn get<S>(io: S, endpoint: &Endpoint, req: &GetObject, now: SystemTime) -> Result<Vec<u8>, Error>
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let http_err =
        |e: &dyn std::error::Error| Error::Http { endpoint: req.endpoint.clone(), reason: chain(e) };
    let request = signed_request(endpoint, req, now)?;
    let (mut sender, connection) =
        hyper::client::conn::http1::handshake(TokioIo::new(io)).await.map_err(|e| http_err(&e))?;
    // The connection task ends with the exchange (or when `sender` is dropped).
    let driver = tokio::spawn(async move {
        let _ = connection.await;
    });
    let response = sender.send_request(request).await.map_err(|e| http_err(&e));
    let result = match response {
        Ok(response) => read_answer(response, req).await,
        Err(e) => Err(e),
    };
    driver.abort();
    result
}

fn signed_request(
    endpoint: &Endpoint,
    req: &GetObject,
    now: SystemTime,
) -> Result<http::Request<Empty<Bytes>>, Error> {
    use aws_sigv4::http_request::{
        PayloadChecksumKind, PercentEncodingMode, SignableBody, SignableRequest, SigningSettings,
        UriPathNormalizationMode, sign,
    };
    let sign_err =
        |e: &dyn std::error::Error| Error::Sign { endpoint: req.endpoint.clone(), reason: chain(e) };
    let path = object_path(&req.bucket, &req.key);
    let scheme = if req.insecure { "http" } else { "https" };
    let uri = format!("{scheme}://{}{path}", endpoint.authority);
    let mut request = http::Request::get(path.as_str())
        .header(http::header::HOST, endpoint.authority.as_str())
        .header(http::header::USER_AGENT, concat!("kharond/", env!("CARGO_PKG_VERSION")))
        .body(Empty::<Bytes>::new())
        .map_err(|e| sign_err(&e))?;

    // S3 wants the payload hash header, single encoding and the path as sent (no normalisation).
    let mut settings = SigningSettings::default();
    settings.payload_checksum_kind = PayloadChecksumKind::XAmzSha256;
    settings.percent_encoding_mode = PercentEncodingMode::Single;
    settings.uri_path_normalization_mode = UriPathNormalizationMode::Disabled;
    let identity = aws_credential_types::Credentials::new(
        req.access_key_id.clone(),
        req.secret_access_key.as_str().to_owned(),
        None,
        None,
        "kharonctl",
    )
    .into();
    let region = if req.region.is_empty() { DEFAULT_REGION } else { req.region.as_str() };
    let params = aws_sigv4::sign::v4::SigningParams::builder()
        .identity(&identity)
        .region(region)
        .name("s3")
        .time(now)
        .settings(settings)
        .build()
        .map_err(|e| sign_err(&e))?
        .into();
    let headers = [("host", endpoint.authority.as_str())];
    let signable = SignableRequest::new("GET", uri, headers.into_iter(), SignableBody::Bytes(&[]))
        .map_err(|e| sign_err(&e))?;
    let (instructions, _signature) = sign(signable, &params).map_err(|e| sign_err(&e))?.into_parts();
    instructions.apply_to_request_http1x(&mut request);
    Ok(request)
}

async fn read_answer(
    response: http::Response<hyper::body::Incoming>,
    req: &GetObject,
) -> Result<Vec<u8>, Error> {
    let status = response.status();
    let http_err =
        |e: &dyn std::error::Error| Error::Http { endpoint: req.endpoint.clone(), reason: chain(e) };
    if status == http::StatusCode::OK {
        let too_large = || Error::TooLarge {
            endpoint: req.endpoint.clone(),
            bucket: req.bucket.clone(),
            key: req.key.clone(),
        };
        let announced = response
            .headers()
            .get(http::header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<u64>().ok());
        if announced.is_some_and(|n| n > MAX_BODY as u64) {
            return Err(too_large());
        }
        return match Limited::new(response.into_body(), MAX_BODY).collect().await {
            Ok(collected) => Ok(collected.to_bytes().to_vec()),
            Err(e) if e.is::<http_body_util::LengthLimitError>() => Err(too_large()),
            Err(e) => Err(http_err(&*e)),
        };
    }
    let body = Limited::new(response.into_body(), MAX_ERROR_BODY)
        .collect()
        .await
        .map(|c| c.to_bytes().to_vec())
        .unwrap_or_default();
    let code =
        error_code(&body).unwrap_or_else(|| status.canonical_reason().unwrap_or("no reason").to_owned());
    let (endpoint, bucket, key) = (req.endpoint.clone(), req.bucket.clone(), req.key.clone());
    Err(match status.as_u16() {
        404 => Error::NotFound { endpoint, bucket, key, code },
        401 | 403 => Error::Denied { endpoint, bucket, status: status.as_u16(), code },
        other => Error::Status { endpoint, bucket, key, status: other, code },
    })
}

/// The `<Code>` of an S3 error document, if it is a plain word (it goes into our message; anything
/// else the server sent does not).
fn error_code(body: &[u8]) -> Option<String> {
    let text = std::str::from_utf8(body).ok()?;
    let start = text.find("<Code>")? + "<Code>".len();
    let end = start + text[start..].find("</Code>")?;
    let code = text[start..end].trim();
    (!code.is_empty() && code.len() <= 64 && code.chars().all(|c| c.is_ascii_alphanumeric() || c == '.'))
        .then(|| code.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

    fn request() -> GetObject {
        GetObject {
            endpoint: "objects.example.net:9000".into(),
            bucket: "emergency".into(),
            key: "em-abc".into(),
            access_key_id: "AKIDTEST".into(),
            secret_access_key: "very-secret-key".into(),
            region: String::new(),
            insecure: true,
        }
    }

    #[test]
    fn endpoints_parse_with_default_ports_and_brackets() {
        let e = parse_endpoint("Objects.Example.net", false).unwrap();
        assert_eq!(
            (e.host.as_str(), e.port, e.authority.as_str()),
            ("objects.example.net", 443, "objects.example.net")
        );
        let e = parse_endpoint("objects.example.net:9000", true).unwrap();
        assert_eq!((e.port, e.authority.as_str()), (9000, "objects.example.net:9000"));
        assert_eq!(parse_endpoint("s3.local", true).unwrap().port, 80);
        let e = parse_endpoint("[::1]:9000", true).unwrap();
        assert_eq!((e.host.as_str(), e.authority.as_str()), ("::1", "[::1]:9000"));
        for bad in
            ["", "https://objects.example.net", "a/b", "host:notaport", "a b", "user@host", "host:70000"]
        {
            let err = parse_endpoint(bad, false).unwrap_err();
            assert!(err.to_string().contains("not host[:port]"), "{bad}: {err}");
        }
    }

    #[test]
    fn names_are_checked_and_paths_encoded() {
        let mut r = request();
        check_names(&r).unwrap();
        r.bucket = "a/b".into();
        assert!(matches!(check_names(&r), Err(Error::BadBucket { .. })));
        r.bucket = "ok".into();
        r.key = "bad\nkey".into();
        assert!(matches!(check_names(&r), Err(Error::BadKey)));
        assert_eq!(object_path("b", "dir/em-1 2+3"), "/b/dir/em-1%202%2B3");
    }

    #[test]
    fn error_codes_are_read_only_when_plain_words() {
        let doc = b"<?xml version=\"1.0\"?><Error><Code>NoSuchKey</Code><Message>x</Message></Error>";
        assert_eq!(error_code(doc).as_deref(), Some("NoSuchKey"));
        assert_eq!(error_code(b"<Error><Code>a b <script></Code></Error>"), None);
        assert_eq!(error_code(b"not xml"), None);
    }

    #[test]
    fn debug_output_hides_the_secret_key() {
        let shown = format!("{:?}", request());
        assert!(!shown.contains("very-secret-key"), "{shown}");
        assert!(shown.contains("AKIDTEST"), "{shown}");
    }

    /// Plays the S3 server on the other end of an in-memory stream: reads the request head,
    /// answers with `answer`, and returns the head it read.
    async fn serve_once(mut server: tokio::io::DuplexStream, answer: Vec<u8>) -> String {
        let mut head = Vec::new();
        let mut buf = [0u8; 1024];
        while !head.windows(4).any(|w| w == b"\r\n\r\n") {
            let n = server.read(&mut buf).await.unwrap();
            assert!(n > 0, "client closed before sending a request");
            head.extend_from_slice(&buf[..n]);
        }
        server.write_all(&answer).await.unwrap();
        server.flush().await.unwrap();
        String::from_utf8(head).unwrap()
    }

    async fn run(answer: Vec<u8>) -> (Result<Vec<u8>, Error>, String) {
        let (client, server) = tokio::io::duplex(64 * 1024);
        let req = request();
        let endpoint = parse_endpoint(&req.endpoint, req.insecure).unwrap();
        let server = tokio::spawn(serve_once(server, answer));
        let result =
            exchange(client, &endpoint, &req, SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000))
                .await;
        (result, server.await.unwrap())
    }

    #[tokio::test]
    async fn the_request_is_path_style_and_signed_for_s3() {
        let (result, head) = run(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello".to_vec()).await;
        assert_eq!(result.unwrap(), b"hello");
        let lower = head.to_ascii_lowercase();
        assert!(head.starts_with("GET /emergency/em-abc HTTP/1.1\r\n"), "{head}");
        assert!(lower.contains("host: objects.example.net:9000\r\n"), "{head}");
        assert!(lower.contains("x-amz-date: 20231114t221320z\r\n"), "{head}");
        // SHA-256 of the empty body.
        assert!(
            lower.contains(
                "x-amz-content-sha256: e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
            ),
            "{head}"
        );
        assert!(
            head.contains("AWS4-HMAC-SHA256 Credential=AKIDTEST/20231114/us-east-1/s3/aws4_request"),
            "{head}"
        );
        assert!(!head.contains("very-secret-key"), "{head}");
    }

    #[tokio::test]
    async fn s3_errors_become_clear_errors() {
        let xml = "<Error><Code>NoSuchKey</Code><Message>The specified key does not exist.</Message></Error>";
        let answer = format!("HTTP/1.1 404 Not Found\r\nContent-Length: {}\r\n\r\n{xml}", xml.len());
        let (result, _) = run(answer.into_bytes()).await;
        let err = result.unwrap_err();
        assert!(matches!(err, Error::NotFound { .. }), "{err}");
        assert_eq!(
            err.to_string(),
            "no object \"em-abc\" in bucket \"emergency\" at objects.example.net:9000 (NoSuchKey)"
        );
        assert_eq!(crate::control::service::fetch_status(&err).code(), tonic::Code::NotFound);

        let xml = "<Error><Code>SignatureDoesNotMatch</Code></Error>";
        let answer = format!("HTTP/1.1 403 Forbidden\r\nContent-Length: {}\r\n\r\n{xml}", xml.len());
        let err = run(answer.into_bytes()).await.0.unwrap_err();
        assert!(
            err.to_string().contains("refused the credentials")
                && err.to_string().contains("SignatureDoesNotMatch"),
            "{err}"
        );
        assert_eq!(crate::control::service::fetch_status(&err).code(), tonic::Code::PermissionDenied);
    }

    #[tokio::test]
    async fn a_body_over_the_limit_is_refused() {
        let announced = format!("HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n", MAX_BODY + 1);
        let err = run(announced.into_bytes()).await.0.unwrap_err();
        assert!(matches!(err, Error::TooLarge { .. }), "{err}");
        // Without a length: chunked, cut off at the limit while reading.
        let mut chunked = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n".to_vec();
        let chunk = vec![b'x'; 60_000];
        for _ in 0..(MAX_BODY / chunk.len() + 2) {
            chunked.extend_from_slice(format!("{:x}\r\n", chunk.len()).as_bytes());
            chunked.extend_from_slice(&chunk);
            chunked.extend_from_slice(b"\r\n");
        }
        chunked.extend_from_slice(b"0\r\n\r\n");
        let (client, server) = tokio::io::duplex(8 * 1024 * 1024);
        let req = request();
        let endpoint = parse_endpoint(&req.endpoint, true).unwrap();
        let server = tokio::spawn(serve_once(server, chunked));
        let err = exchange(client, &endpoint, &req, SystemTime::now()).await.unwrap_err();
        assert!(matches!(err, Error::TooLarge { .. }), "{err}");
        let _ = server.await;
    }
}
