// Declares the app's own commands so that each gets an `allow-<name>`
// permission, which `capabilities/default.json` grants to the main window.
include!("src/command_names.rs");

fn main() {
    tauri_build::try_build(
        tauri_build::Attributes::new()
            .app_manifest(tauri_build::AppManifest::new().commands(COMMANDS)),
    )
    .expect("tauri build script");
}
