//! Compiles `proto/kharon/v1/*.proto` with protox (pure Rust), so building needs no `protoc` on the
//! machine (docs/dependencies.md, "protox"), and sets `KHARON_VERSION`: the package version plus
//! the git commit (see `build/version.rs`), which `kharon_shared::VERSION` and both `--version`s
//! report.

#[path = "build/version.rs"]
mod version;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    // Read when the script runs, not when it was compiled: a build-script binary reused from a
    // target dir shared with another checkout would otherwise compile that checkout's protos.
    let manifest_dir = std::path::PathBuf::from(std::env::var("CARGO_MANIFEST_DIR")?);
    let proto_root = manifest_dir.join("../proto");
    let file = proto_root.join("kharon/v1/control.proto");
    let fds = protox::compile([&file], [&proto_root])?;
    tonic_prost_build::configure().build_server(true).build_client(true).compile_fds(fds)?;
    // compile_fds does not emit this for us
    println!("cargo:rerun-if-changed={}", proto_root.display());

    let build = version::describe(&manifest_dir);
    println!("cargo:rustc-env=KHARON_VERSION={} ({})", std::env::var("CARGO_PKG_VERSION")?, build.commit);
    for path in build.watch {
        println!("cargo:rerun-if-changed={}", path.display());
    }
    Ok(())
}
