//! Compiles `proto/karl.proto` with the pure-Rust `protox` compiler, so a fresh
//! machine needs no system `protoc`.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let proto_dir = "../proto";
    let proto = "../proto/karl.proto";
    println!("cargo:rerun-if-changed={proto}");
    let fds = protox::compile([proto], [proto_dir])?;
    tonic_prost_build::configure()
        .build_server(true)
        .build_client(true)
        .compile_fds(fds)?;
    Ok(())
}
