//! The fake Passbolt (`harness::passbolt`) checked by a client we did not write: PyPI's
//! `passbolt-python-api` (pinned in `.ci/run`), whose `requests` session follows redirects and
//! keeps cookies by RFC 6265, with `python-gnupg` and the real `gpg` for OpenPGP. If it and
//! kharonctl (`emergency.rs`) both get through the fake the way passbolt_api's code says a client
//! does, the fake is trusted; if only kharonctl did, the fake would share its misreading.
//!
//! go-passbolt is the other client VSHN's tools use; its behaviour (Go's client follows the 302,
//! `CheckRedirect` refuses another host, the challenge is recognised by a 403 whose `header.url`
//! ends in `/mfa/verify/error.json`) is what `kharonctl/src/passbolt` follows.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use kharon_e2e::Env;
use kharon_e2e::kharonctl::Output;
use kharon_e2e::passbolt::{self, BUCKETS_ID, FakePassbolt, Options};
use pgp::composed::SignedSecretKey;
use serde_json::{Value, json};

const PASSPHRASE: &str = "python's passphrase";
const TOTP_SECRET: &[u8] = b"python-client-totp-secret";
const BUCKETS: &str = "buckets:\n- endpoint: objects.example.net\n  bucket: em\n";

fn script() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/passbolt/python_client.py")
}

/// Runs `python_client.py` against `fake` as the owner of `key`, with `otp` as the TOTP code it
/// answers a challenge with; bounded to 120 s.
fn python_client(env: &Env, fake: &FakePassbolt, key: &SignedSecretKey, otp: &str) -> Output {
    let public = passbolt::public_of(key);
    let public_file = env.write("keys/public.asc", &passbolt::armored_public(&public));
    let private_file = env.write("keys/private.asc", &passbolt::armored_secret(key));
    let gnupg = env.path().join("gnupg");
    std::fs::create_dir_all(&gnupg).unwrap();
    kharon_e2e::set_mode(&gnupg, 0o700);
    let config = json!({"PASSBOLT": {
        "SERVER": fake.url(),
        "USER_FINGERPRINT": passbolt::fingerprint(&public),
        "USER_PUBLIC_KEY_FILE": public_file,
        "USER_PRIVATE_KEY_FILE": private_file,
        "PASSPHRASE": PASSPHRASE,
        "OTP": otp,
    }});
    let child = Command::new("python3")
        .arg(script())
        .arg(config.to_string())
        .arg(BUCKETS_ID)
        .env("GNUPGHOME", &gnupg)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run python3 (pip install passbolt-python-api, see .ci/run)");
    let Some(out) = kharon_e2e::output_within(child, Duration::from_secs(120)) else {
        let _ = Command::new("gpgconf").arg("--kill").arg("all").env("GNUPGHOME", &gnupg).status();
        panic!("passbolt-python-api did not finish within 120 s; fake saw {:?}", fake.log());
    };
    Output {
        code: out.status.code(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

fn reply(out: &Output, fake: &FakePassbolt) -> Value {
    assert!(out.success(), "{}\n{}\nfake saw {:?}", out.stdout, out.stderr, fake.log());
    serde_json::from_str(out.stdout.trim()).unwrap_or_else(|e| panic!("{e}: {}", out.stdout))
}

#[test]
fn passbolt_python_api_logs_in_with_totp_through_the_mfa_redirect() {
    let env = Env::new();
    let key = passbolt::new_key(PASSPHRASE);
    let fake = FakePassbolt::start(Options {
        totp_secret: Some(TOTP_SECRET.to_vec()),
        buckets_yaml: BUCKETS.to_owned(),
        ..Options::new(passbolt::public_of(&key))
    });
    let out = python_client(&env, &fake, &key, &fake.totp_now());
    let got = reply(&out, &fake);
    // requests followed the 302, saw the 403 challenge, sent the code with the CSRF header from
    // the cookie the challenge handed out, and the session then reads and decrypts.
    assert_eq!(
        fake.log(),
        [
            "POST /auth/login.json",
            "POST /auth/login.json",
            "GET /users/me.json",
            "GET /mfa/verify/error.json",
            "POST /mfa/verify/totp.json",
            "GET /users/me.json",
            "GET /resources.json",
            &format!("GET /secrets/resource/{BUCKETS_ID}.json"),
        ]
    );
    assert_eq!(got["username"], "engineer@example.com");
    assert_eq!(got["fingerprint"], passbolt::fingerprint(&passbolt::public_of(&key)).as_str());
    assert_eq!(got["resources"].as_array().map(Vec::len), Some(3));
    assert!(got["resources"].as_array().unwrap().contains(&json!(BUCKETS_ID)));
    assert_eq!(got["password"], BUCKETS);
    assert_eq!(got["cookies"], json!(["csrfToken", "passbolt_mfa", "passbolt_session"]));
    // Python's cookiejar cannot read CakePHP's "01-Jan-1970 00:00:01 GMT+0000" either
    // (`http.cookiejar.http2time` gives None), so requests sends the cleared passbolt_mfa back
    // with the code. Upstream ignores an invalid one there (`_handleVerifiedNotRequired` refuses
    // only a valid one), which is why this client works; the fake must, and does, too.
    assert_eq!(fake.stale(), ["POST /mfa/verify/totp.json"]);
}

#[test]
fn passbolt_python_api_logs_in_without_mfa_and_is_refused_a_wrong_code() {
    let env = Env::new();
    let key = passbolt::new_key(PASSPHRASE);
    let plain = FakePassbolt::start(Options {
        buckets_yaml: BUCKETS.to_owned(),
        ..Options::new(passbolt::public_of(&key))
    });
    let got = reply(&python_client(&env, &plain, &key, ""), &plain);
    assert_eq!(got["password"], BUCKETS);
    // No challenge: the first GET hands out the CSRF cookie.
    assert_eq!(plain.log()[..3], ["POST /auth/login.json", "POST /auth/login.json", "GET /users/me.json"]);
    assert!(!plain.log().iter().any(|l| l.contains("/mfa/")), "{:?}", plain.log());
    assert_eq!(got["cookies"], json!(["csrfToken", "passbolt_session"]));

    // A code the server does not take: upstream's validation error reaches the client.
    let env = Env::new();
    let mfa = FakePassbolt::start(Options {
        totp_secret: Some(TOTP_SECRET.to_vec()),
        ..Options::new(passbolt::public_of(&key))
    });
    let now = mfa.totp_now();
    let wrong: String = now.chars().map(|c| char::from(b'0' + (c as u8 - b'0' + 5) % 10)).collect();
    let out = python_client(&env, &mfa, &key, &wrong);
    assert_ne!(out.code, Some(0), "{}", out.stdout);
    assert!(out.stderr.contains("400 Client Error"), "{}", out.stderr);
    assert!(
        out.stderr.contains(r#""message":"Something went wrong when validating the one-time password.""#)
            && out.stderr.contains(r#""isValidOtp":"This OTP is not valid.""#),
        "{}",
        out.stderr
    );
    assert_eq!(mfa.log().last().map(String::as_str), Some("POST /mfa/verify/totp.json"));
}
