//! Robustness: mutated requests never panic the parser, the infer path or the server.

use crate::execute::Env;
use crate::http::{Progress, RequestReader};
use crate::infer::infer;
use crate::models::MODELS;
use crate::state::Shared;
use crate::test_client::*;

/// A small deterministic generator so failures reproduce.
fn lcg(state: &mut u64) -> u64 {
    *state = state
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    *state >> 33
}

/// Bytes that matter to HTTP and JSON framing, for insertions.
const INTERESTING: &[u8] = b"0\r\n:;[\"-9";

fn mutate(seed: u64, input: &[u8]) -> Vec<u8> {
    let mut state = seed;
    let mut out = input.to_vec();
    for _ in 0..(1 + lcg(&mut state) % 4) {
        let at = lcg(&mut state) as usize % out.len().max(1);
        match lcg(&mut state) % 3 {
            0 if !out.is_empty() => out[at] = lcg(&mut state) as u8,
            1 if !out.is_empty() => out.truncate(at),
            _ => out.insert(
                at.min(out.len()),
                INTERESTING[lcg(&mut state) as usize % INTERESTING.len()],
            ),
        }
    }
    out
}

#[test]
fn mutated_requests_never_panic_the_reader() {
    let originals = [
        simple_binary(2),
        post_json("/v2/models/x/infer", "{\"a\":1}"),
    ];
    for (n, original) in originals.iter().enumerate() {
        for seed in 0..3000u64 {
            let bytes = mutate(seed * 7 + n as u64, original);
            let mut reader = RequestReader::default();
            let mut decoded = Vec::new();
            // Feed growing prefixes, as reads would.
            for end in (0..=bytes.len()).step_by(37).chain([bytes.len()]) {
                match reader.advance(&bytes[..end], &mut decoded) {
                    Ok(Progress::NeedMore { .. }) => {}
                    Ok(Progress::Done { consumed, .. }) => {
                        assert!(consumed <= end);
                        break;
                    }
                    Err(e) => {
                        assert!([400, 413, 415, 431].contains(&e.status), "{e:?}");
                        break;
                    }
                }
            }
        }
    }
}

#[test]
fn mutated_infer_bodies_never_panic() {
    let request = simple_binary(3);
    let split = request.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
    let body = &request[split..];
    // The JSON header is everything before the two INT32 [3,16] tensors.
    let header_len = Some(body.len() - 2 * 3 * 16 * 4);
    let shared = Shared::new(vec![None; MODELS.len()], vec![false; MODELS.len()]);
    let mut rng = 1u64;
    let mut env = Env {
        shared: &shared,
        rng: &mut rng,
    };
    for seed in 0..3000u64 {
        let mutated = mutate(seed, body);
        for model in &MODELS {
            let mut out = Vec::new();
            let _ = infer(&mut env, model, &mutated, header_len, &mut out);
        }
    }
}

#[test]
fn server_survives_garbage_connections() {
    let server = server();
    for seed in 0..40u64 {
        let mut c = Client::connect(server.addr);
        c.send(&mutate(seed, &simple_binary(1)));
        // Half-close so a request that is merely incomplete ends with EOF instead of waiting.
        c.stream.shutdown(std::net::Shutdown::Write).unwrap();
        // The server must answer (or not) and then close: read to EOF.
        let mut rest = Vec::new();
        std::io::Read::read_to_end(&mut c.stream, &mut rest).expect("server closes in time");
    }
    let mut c = Client::connect(server.addr);
    check_simple_binary(&c.request(&simple_binary(2)), 2);
}
