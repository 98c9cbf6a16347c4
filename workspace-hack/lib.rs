//! No code: this crate only exists for its dependency features (see its Cargo.toml).
