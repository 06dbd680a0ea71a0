//! Builds the chat shim (native/chat_shim.cpp) against the llama.cpp sources
//! that llama-cpp-sys-2 compiled, so its C++ types match the static
//! libraries it links with.

use std::path::{Path, PathBuf};

fn main() {
    println!("cargo:rerun-if-changed=native/chat_shim.cpp");
    println!("cargo:rerun-if-env-changed=DEP_LLAMA_ROOT");
    let root = std::env::var("DEP_LLAMA_ROOT")
        .expect("llama-cpp-sys-2 did not report its build folder (DEP_LLAMA_ROOT)");
    let src = llama_source(Path::new(&root));
    cc::Build::new()
        .cpp(true)
        .file("native/chat_shim.cpp")
        .include(&src)
        .include(src.join("common"))
        .include(src.join("include"))
        .include(src.join("ggml/include"))
        .include(src.join("vendor"))
        .flag_if_supported("-std=c++17")
        .flag_if_supported("-Wno-unused-parameter")
        .flag_if_supported("-Wno-unused-function")
        .pic(true)
        .compile("reverie_chat_shim");
}

/// The llama.cpp source folder CMake configured, read from its cache.
fn llama_source(root: &Path) -> PathBuf {
    let cache = root.join("build").join("CMakeCache.txt");
    let text = std::fs::read_to_string(&cache)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", cache.display()));
    let dir = text
        .lines()
        .find_map(|l| l.strip_prefix("CMAKE_HOME_DIRECTORY:INTERNAL="))
        .unwrap_or_else(|| panic!("{} names no source folder", cache.display()));
    let dir = PathBuf::from(dir.trim());
    assert!(
        dir.join("common").join("chat.h").is_file(),
        "{} has no common/chat.h; llama-cpp-sys-2 must be built with its `common` feature",
        dir.display()
    );
    dir
}
