//! Startup failures: each is one clear line on stderr and a non-zero exit code.

use kharon_e2e::kharond::Kharond;
use kharon_e2e::{Env, inventory};

#[test]
fn without_inventory_or_cache_it_says_how_to_get_routing_information() {
    let env = Env::new();
    let exited = Kharond::try_start(&env, &[], &[]).err().expect("must not start");
    assert_eq!(exited.code, Some(2));
    assert!(exited.stderr.contains("kharonctl update"), "{}", exited.stderr);
    assert!(exited.stderr.contains("--inventory"), "{}", exited.stderr);
}

#[test]
fn a_corrupt_inventory_names_the_file() {
    let env = Env::new();
    let inv = env.write("broken.json", "{\"not\": \"an array\"}");
    let exited =
        Kharond::try_start(&env, &["--inventory", inv.to_str().unwrap()], &[]).err().expect("must fail");
    assert_eq!(exited.code, Some(2));
    assert!(exited.stderr.contains("broken.json"), "{}", exited.stderr);
    assert!(!exited.stderr.contains("panicked"), "{}", exited.stderr);
}

#[test]
fn a_busy_port_is_named_and_not_replaced_by_another() {
    let env = Env::new();
    let inv = env.write("inventory.json", &inventory::to_json(&[inventory::direct("c-d", "d.example")]));
    let busy = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = busy.local_addr().unwrap().to_string();
    let exited = Kharond::try_start(&env, &["--inventory", inv.to_str().unwrap(), "--listen", &addr], &[])
        .err()
        .expect("must fail on a busy port");
    assert_eq!(exited.code, Some(3));
    assert!(exited.stderr.contains(&addr), "{}", exited.stderr);
    assert!(!env.control_socket().exists(), "no control socket for a daemon that did not start");
}

#[test]
fn a_public_listen_address_needs_authentication() {
    let env = Env::new();
    let inv = env.write("inventory.json", &inventory::to_json(&[inventory::direct("c-d", "d.example")]));
    let exited =
        Kharond::try_start(&env, &["--inventory", inv.to_str().unwrap(), "--listen", "0.0.0.0:0"], &[])
            .err()
            .expect("must refuse");
    assert_eq!(exited.code, Some(2));
    assert!(exited.stderr.contains("not loopback"), "{}", exited.stderr);
}
