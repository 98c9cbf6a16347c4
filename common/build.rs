//! Sets `KHARON_VERSION`: the package version plus the git commit (see `build/version.rs`), which
//! `kharon_common::VERSION` and both `--version`s report.

#[path = "build/version.rs"]
mod version;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    // Read when the script runs, not when it was compiled: a build-script binary reused from a
    // target dir shared with another checkout would otherwise describe that checkout.
    let manifest_dir = std::path::PathBuf::from(std::env::var("CARGO_MANIFEST_DIR")?);
    let build = version::describe(&manifest_dir);
    println!("cargo:rustc-env=KHARON_VERSION={} ({})", std::env::var("CARGO_PKG_VERSION")?, build.commit);
    for path in build.watch {
        println!("cargo:rerun-if-changed={}", path.display());
    }
    Ok(())
}
