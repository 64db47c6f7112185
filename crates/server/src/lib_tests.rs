//! The layer order of the crate doc holds: no module imports a top-level module of a layer
//! above its own and modules of one layer import each other in no circle, apart from the
//! exceptions listed here (which must still exist, so the lists only shrink).

use std::fs;
use std::path::Path;

use inferperf_wire::layers::{check, layers};

/// Imports that go up the layer order today: (file under `src/`, top-level module it uses).
const KNOWN_UPWARD: &[(&str, &str)] = &[
    // The shared memory tests register regions and run inferences through the HTTP routes.
    ("shm/shm_tests.rs", "execute"),
    ("shm/shm_tests.rs", "routes"),
    ("shm/shm_tests.rs", "state"),
];

/// Modules of one layer that import each other today.
const KNOWN_CIRCLES: &[&str] = &[];

fn src_dir() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/src"))
}

#[test]
fn no_import_goes_up_the_layer_order() {
    check(src_dir(), KNOWN_UPWARD, KNOWN_CIRCLES);
}

#[test]
fn layers_parse_the_lib_doc_in_order() {
    let lib = fs::read_to_string(src_dir().join("lib.rs")).unwrap();
    let layers = layers(&lib);
    assert_eq!(layers[0], ["cli"]);
    assert_eq!(layers[1], ["fault"]);
    assert!(layers.last().unwrap().contains(&"places".to_string()));
}
