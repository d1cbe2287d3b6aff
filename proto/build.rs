//! Compiles the protobuf contracts with a vendored `protoc`, so a fresh
//! machine needs no system package to build keelson.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let protoc = protoc_bin_vendored::protoc_bin_path()?;
    // SAFETY: build scripts are single-threaded; prost-build reads PROTOC.
    unsafe { std::env::set_var("PROTOC", protoc) };

    let protos = [
        "keelson/common/v1/error.proto",
        "keelson/placement/v1/placement.proto",
        "keelson/candidates/v2/candidates.proto",
        "keelson/orchestration/v1/orchestration.proto",
    ];
    let include = protoc_bin_vendored::include_path()?;
    let out_dir = std::path::PathBuf::from(std::env::var("OUT_DIR")?);
    tonic_prost_build::configure()
        .file_descriptor_set_path(out_dir.join("keelson_descriptor.bin"))
        // Every service reads and writes messages as one slice (see codec.rs).
        .codec_path("crate::codec::SliceCodec")
        .compile_protos(&protos, &[".", &include.display().to_string()])?;
    for p in protos {
        println!("cargo:rerun-if-changed={p}");
    }
    Ok(())
}
