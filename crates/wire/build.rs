//! Compiles `proto/*.proto` into Rust messages (prost) at build time. protox parses the files
//! in pure Rust, so no `protoc` needs to be installed. In the repository the crate's `proto` is
//! a link to the top-level `proto/`; `cargo package` copies the files it points to.

fn main() {
    let files = [
        "proto/grpc_service.proto",
        "proto/model_config.proto",
        "proto/health.proto",
        "proto/tfserving.proto",
    ];
    for f in files {
        println!("cargo:rerun-if-changed={f}");
    }
    let descriptors = match protox::compile(files, ["proto"]) {
        Ok(d) => d,
        Err(e) => panic!("cannot compile the .proto files: {e}"),
    };
    if let Err(e) = prost_build::Config::new().compile_fds(descriptors) {
        panic!("cannot generate Rust code from the .proto files: {e}");
    }
}
