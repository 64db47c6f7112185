//! The integration tests, one binary: each module runs the library or the built `inferperf`
//! binary against the in-process reference server (or a stand-in peer) on an ephemeral port.
//! `tests/alloc` holds the tests that need their own counting global allocator.

mod common;
mod triton;

mod binary;
mod faults;
mod fuzz_corpus;
mod grpc_faults;
mod input_data;
mod many_streams;
mod mpi_ranks;
mod mpi_world;
mod nothing_lost;
mod overload;
mod peer_limits;
mod profile_aiperf_files;
mod profile_compat;
mod profile_faults;
mod profile_hub;
mod profile_load_flags;
mod profile_media;
mod profile_multi_run;
mod profile_quickstart;
mod profile_telemetry;
mod profile_tutorials;
mod real_triton;
mod reconnect;
mod registry_kinds;
mod report_figures;
mod run_capi;
mod run_cuda_shm;
mod run_dataset;
mod run_grpc;
mod run_http;
mod run_kinds;
mod run_metrics;
mod run_modes;
mod run_mpi;
mod run_openai;
mod run_profile;
mod run_profile_report;
mod run_profile_streams;
mod run_profile_sweep;
mod run_rate;
mod run_sequences;
mod run_sessions;
mod run_shm;
mod run_tls;
mod serve_repository;
mod timeouts;
mod untrusted;
mod validate_replies;
