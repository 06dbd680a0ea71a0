//! The window's TypeScript copy of the night report (`ui/src/nightReport.ts`)
//! is generated from the Rust types; this test fails when it drifts.
//! `REVERIE_BLESS=1 cargo test -p reverie-night --test typescript` rewrites it.

use reverie_night::report::{
    CollectedChannel, Counts, Deployment, ExportSection, MemoryReport, NightReport, Note, Summary,
    TrainReport, Verdict,
};
use reverie_night::{JudgedTask, Prediction, Stage, TaskKind};
use ts_rs::TS;

fn generated() -> String {
    let decls = [
        NightReport::decl(),
        Stage::decl(),
        Note::decl(),
        CollectedChannel::decl(),
        Counts::decl(),
        JudgedTask::decl(),
        TaskKind::decl(),
        reverie_night::JudgeAgreement::decl(),
        MemoryReport::decl(),
        Prediction::decl(),
        reverie_core::TokenSpan::decl(),
        reverie_core::TokenRole::decl(),
        Summary::decl(),
        TrainReport::decl(),
        reverie_train::loss::LossTerms::decl(),
        ExportSection::decl(),
        reverie_train::export::ExportReport::decl(),
        Verdict::decl(),
        reverie_night::FamilyCheck::decl(),
        reverie_practice::Paired::decl(),
        reverie_practice::Outcome::decl(),
        Deployment::decl(),
    ];
    let mut out = String::from(
        "// Generated from the Rust types of the night report (crates/night/src/report.rs);\n\
         // do not edit. `REVERIE_BLESS=1 cargo test -p reverie-night --test typescript`\n\
         // writes it again after they change.\n",
    );
    for d in decls {
        out.push_str("\nexport ");
        out.push_str(&d);
        out.push('\n');
    }
    out
}

#[test]
fn the_windows_night_report_type_matches_the_rust_one() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../ui/src/nightReport.ts");
    let want = generated();
    if std::env::var_os("REVERIE_BLESS").is_some() {
        std::fs::write(path, &want).unwrap();
    }
    let have = std::fs::read_to_string(path).unwrap_or_default();
    assert!(
        have == want,
        "ui/src/nightReport.ts is not what the Rust types generate; run \
         `REVERIE_BLESS=1 cargo test -p reverie-night --test typescript` and commit it"
    );
}
