//! Records which vendored llama.cpp this binary links, so `reverie bench
//! decode` can build llama.cpp's own `llama-bench` from the same source.
fn main() {
    let lock = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../Cargo.lock");
    println!("cargo:rerun-if-changed={}", lock.display());
    let text = std::fs::read_to_string(&lock).unwrap_or_default();
    let mut version = "unknown".to_string();
    let mut lines = text.lines();
    while let Some(line) = lines.next() {
        if line.trim() == "name = \"llama-cpp-sys-2\"" {
            if let Some(v) = lines.next().and_then(|l| l.split('"').nth(1)) {
                version = v.to_string();
            }
        }
    }
    println!("cargo:rustc-env=REVERIE_LLAMA_SYS_VERSION={version}");
}
