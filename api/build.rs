fn main() -> Result<(), Box<dyn std::error::Error>> {
    #[cfg(feature = "grpc")]
    {
        let protoc = protoc_bin_vendored::protoc_bin_path()?;
        // SAFETY: build scripts are single-threaded; nothing else reads the environment concurrently.
        unsafe { std::env::set_var("PROTOC", protoc) };
        println!("cargo:rerun-if-changed=../proto/tessera.proto");
        tonic_prost_build::configure().compile_protos(&["../proto/tessera.proto"], &["../proto"])?;
    }
    Ok(())
}
