//! The controller's Cap'n Proto contract. `controller_capnp.rs` is generated
//! from `controller.capnp` by `capnp compile -orust` and committed, so a
//! fresh machine builds without the capnp compiler; `.ci/check-capnp-drift`
//! regenerates it and fails on any difference.

// Generated code is not ours to fix: its setters unwrap and its layout
// arithmetic casts, as the capnpc plugin writes them.
#[allow(clippy::all, clippy::unwrap_used, clippy::cast_possible_truncation, unused, missing_docs)]
pub mod controller_capnp {
    include!("controller_capnp.rs");
}
