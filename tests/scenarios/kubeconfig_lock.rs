//! kharonctl shares a kubeconfig with kubectl as client-go does (docs/kubeconfig.md, "Sharing the
//! file with kubectl"): every change it makes (`switch`, `kubeconfig --merge`, `-o FILE`) happens
//! under `<file>.lock`, so a real `kubectl config set-context` beside it never loses its change nor
//! undoes kharonctl's; a lock kubectl holds is waited for, and one a killed client left is named
//! with what to do.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use kharon_e2e::kharonctl::{self, Output};
use kharon_e2e::{Env, inventory, wait_until};
use serde_norway::Value;

fn yaml(path: &Path) -> Value {
    serde_norway::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn names(doc: &Value, list: &str) -> Vec<String> {
    doc[list]
        .as_sequence()
        .map(|s| s.iter().filter_map(|e| e["name"].as_str().map(str::to_owned)).collect())
        .unwrap_or_default()
}

/// `kubectl config set-context NAME` on `file`: client-go's read–modify–write under its lock.
fn set_context(file: &Path, name: &str) -> std::process::Output {
    Command::new("kubectl")
        .args(["config", "set-context", name, "--cluster=c-a", "--namespace=ns"])
        .env("KUBECONFIG", file)
        .output()
        .expect("run kubectl")
}

fn ok(out: &Output) {
    assert!(out.success(), "kharonctl failed ({:?}):\n{}\n{}", out.code, out.stdout, out.stderr);
}

fn lock_of(file: &Path) -> PathBuf {
    PathBuf::from(format!("{}.lock", file.display()))
}

#[test]
fn kharonctl_and_kubectl_take_turns_on_the_kubeconfig_and_neither_loses_a_change() {
    let env = Env::new();
    let inv = env.write(
        "inventory.json",
        &inventory::to_json(&[
            inventory::routed("c-a", "jump-a", "a.example"),
            inventory::routed("c-b", "jump-b", "b.example"),
        ]),
    );
    let i = inv.to_str().unwrap();
    let file = env.home().join(".kube/config");
    let kc = [("KUBECONFIG", file.to_str().unwrap())];
    ok(&kharonctl::run_with(&env, &["kubeconfig", "--inventory", i, "--merge"], &kc));
    let lock = lock_of(&file);

    // kubectl is in the middle of a change (its lock is there): `switch` waits for it.
    std::fs::File::options().write(true).create_new(true).open(&lock).unwrap();
    let switch = kharonctl::command(&env, &["switch", "--inventory", i, "c-b"])
        .envs(kc)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(500));
    assert_ne!(yaml(&file)["current-context"], "c-b", "switch wrote while kubectl held the lock");
    // kubectl's write lands (a real kubectl's output, made on a copy while the lock blocks it),
    // then kubectl lets go.
    let copy = env.path().join("kubectl-copy");
    std::fs::copy(&file, &copy).unwrap();
    assert!(set_context(&copy, "from-kubectl").status.success());
    std::fs::rename(&copy, &file).unwrap();
    std::fs::remove_file(&lock).unwrap();
    let out = kharon_e2e::output_within(switch, Duration::from_secs(20)).expect("switch finishes");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let doc = yaml(&file);
    assert_eq!(doc["current-context"], "c-b", "{doc:?}");
    assert!(
        names(&doc, "contexts").contains(&"from-kubectl".to_owned()),
        "kubectl's change was lost: {doc:?}"
    );
    assert!(!lock.exists(), "kharonctl left its lock behind");

    // Both at once, several times: every change that was reported done is in the file. A kubectl
    // that meets kharonctl's lock fails as client-go does ("file exists"), and is run again.
    for round in 0..8 {
        let target = if round % 2 == 0 { "c-a" } else { "c-b" };
        let name = format!("k-{round}");
        let switch = kharonctl::command(&env, &["switch", "--inventory", i, target])
            .envs(kc)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut tries = 0;
        let done = wait_until(Duration::from_secs(20), || {
            tries += 1;
            let out = set_context(&file, &name);
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert!(out.status.success() || stderr.contains("config.lock: file exists"), "{stderr}");
            out.status.success()
        });
        assert!(done, "kubectl never got its turn in {tries} tries");
        let out = kharon_e2e::output_within(switch, Duration::from_secs(20)).expect("switch finishes");
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let doc = yaml(&file);
        assert_eq!(doc["current-context"], target, "round {round}: kubectl undid the switch: {doc:?}");
        let contexts = names(&doc, "contexts");
        for earlier in 0..=round {
            assert!(
                contexts.contains(&format!("k-{earlier}")),
                "round {round}: k-{earlier} lost: {contexts:?}"
            );
        }
    }

    // A lock that stays (a client killed while holding it): named, with what to do, after a wait;
    // the kubeconfig and the lock stay as they are. kubectl refuses the same way.
    std::fs::write(&lock, b"").unwrap();
    let before = std::fs::read(&file).unwrap();
    let out = kharonctl::run_with(&env, &["kubeconfig", "--inventory", i, "--merge"], &kc);
    assert_eq!(out.code, Some(1), "{out:?}");
    for part in [
        format!("kubeconfig {} is locked by {}", file.display(), lock.display()),
        "still after waiting 5s".to_owned(),
        format!("remove {} and try again", lock.display()),
    ] {
        assert!(out.stderr.contains(&part), "{part:?} missing:\n{}", out.stderr);
    }
    assert_eq!(std::fs::read(&file).unwrap(), before);
    assert!(lock.exists(), "another client's lock was removed");
    assert!(!set_context(&file, "blocked").status.success());
}
