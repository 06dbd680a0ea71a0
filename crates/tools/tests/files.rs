//! File tools, the sandbox and undo/redo, on a real folder and database.

mod util;

use serde_json::json;
use util::{assert_has, Fixture};

#[test]
fn a_table_read_whole_shows_its_column_totals() {
    let f = Fixture::new();
    let rows: String = (1..=6)
        .map(|i| format!("2026-10-0{i},west,{}\n", i * 10))
        .collect();
    f.ok_text(
        "write_file",
        json!({"path": "data/sales.csv", "content": format!("date,region,amount\n{rows}")}),
    );
    let whole = f.ok_text("read_file", json!({"path": "data/sales.csv"}));
    assert!(
        whole.ends_with("7| 2026-10-06,west,60\nColumn totals (6 rows): amount 210\n"),
        "{whole}"
    );
    // A part of the table has no totals: they would read as the file's.
    let part = f.ok_text("read_file", json!({"path": "data/sales.csv", "limit": 3}));
    assert!(!part.contains("Column totals"), "{part}");
    // Nor has a file that is not a table.
    f.ok_text(
        "write_file",
        json!({"path": "n.txt", "content": "a,b\n1,2\n3,4\n"}),
    );
    assert!(!f
        .ok_text("read_file", json!({"path": "n.txt"}))
        .contains("Column totals"));
}

#[test]
fn read_write_edit_with_line_ranges() {
    let f = Fixture::new();
    let body: String = (1..=250).map(|i| format!("line {i}\n")).collect();
    assert_has(
        &f.ok_text("write_file", json!({"path": "d/a.txt", "content": body})),
        "created d/a.txt (250 lines",
    );
    let first = f.ok_text("read_file", json!({"path": "d/a.txt"}));
    assert_has(&first, "d/a.txt: lines 1-100 of 250");
    assert_has(&first, "100| line 100");
    assert_has(&first, "call read_file with offset 101");
    assert!(!first.contains("101| "));
    let last = f.ok_text("read_file", json!({"path": "d/a.txt", "offset": 241}));
    assert_has(&last, "lines 241-250 of 250");
    assert_has(
        &f.err("read_file", json!({"path": "d/a.txt", "offset": 251})),
        "offset 251 is out of range: `d/a.txt` has 250 lines",
    );
    assert_has(
        &f.err("read_file", json!({"path": "d/a.txt", "limit": 101})),
        "limit must be between 1 and 100",
    );
    assert_has(
        &f.err("read_file", json!({"path": "nope.txt"})),
        "no file or folder at `nope.txt`",
    );
    assert_has(&f.err("read_file", json!({"path": "d"})), "is a folder");
    assert_has(
        &f.err("read_file", json!({})),
        "bad arguments for read_file: missing field `path`",
    );
    assert_has(
        &f.err("read_file", json!({"path": "d/a.txt", "lines": 3})),
        "unknown field `lines`",
    );

    f.ok("edit_file", json!({"path": "d/a.txt", "action": "replace", "start_line": 2, "end_line": 3, "text": "two\nthree\nthree and a half"}));
    f.ok(
        "edit_file",
        json!({"path": "d/a.txt", "action": "delete", "start_line": 1}),
    );
    f.ok(
        "edit_file",
        json!({"path": "d/a.txt", "action": "insert", "start_line": 1, "text": "zero"}),
    );
    f.ok(
        "edit_file",
        json!({"path": "d/a.txt", "action": "insert", "start_line": 252, "text": "end"}),
    );
    let text = f.read("d/a.txt");
    assert!(
        text.starts_with("zero\ntwo\nthree\nthree and a half\nline 4\n"),
        "{text}"
    );
    assert!(text.ends_with("line 250\nend\n"));
    assert_has(
        &f.err(
            "edit_file",
            json!({"path": "d/a.txt", "action": "delete", "start_line": 300}),
        ),
        "out of range",
    );
    assert_has(&f.err("edit_file", json!({"path": "d/a.txt", "action": "replace", "start_line": 5, "end_line": 4, "text": "x"})), "out of range");
    assert_has(
        &f.err(
            "edit_file",
            json!({"path": "d/a.txt", "action": "insert", "start_line": 1}),
        ),
        "needs `text`",
    );
    assert_has(
        &f.err(
            "edit_file",
            json!({"path": "d/a.txt", "action": "rewrite", "start_line": 1}),
        ),
        "unknown variant `rewrite`",
    );

    std::fs::write(f.path("bin.dat"), [0u8, 159, 146, 150]).unwrap();
    assert_has(
        &f.err("read_file", json!({"path": "bin.dat"})),
        "binary file",
    );
    let long = "x".repeat(10_000);
    f.ok("write_file", json!({"path": "long.txt", "content": long}));
    assert_has(
        &f.ok_text("read_file", json!({"path": "long.txt"})),
        "[8000 more bytes]",
    );
    assert_has(
        &f.err(
            "write_file",
            json!({"path": "big.txt", "content": "y".repeat(5 << 20)}),
        ),
        "limit is 4 MiB",
    );
}

#[test]
fn paths_cannot_leave_the_workspace() {
    let f = Fixture::new();
    let outside = f.dir.path().join("secret.txt");
    std::fs::write(&outside, "secret").unwrap();
    for args in [
        json!({"path": "../secret.txt"}),
        json!({"path": outside.display().to_string()}),
    ] {
        assert_has(
            &f.err("read_file", args.clone()),
            "is outside the workspace",
        );
        let mut w = args.clone();
        w["content"] = json!("pwned");
        assert_has(&f.err("write_file", w), "is outside the workspace");
    }
    std::os::unix::fs::symlink(f.dir.path(), f.path("link")).unwrap();
    assert_has(
        &f.err("read_file", json!({"path": "link/secret.txt"})),
        "symbolic link that leads out",
    );
    assert_has(
        &f.err(
            "write_file",
            json!({"path": "link/new.txt", "content": "x"}),
        ),
        "symbolic link",
    );
    assert_has(
        &f.err("delete_path", json!({"path": "link/secret.txt"})),
        "symbolic link",
    );
    assert_has(&f.err("list_dir", json!({"path": "link"})), "symbolic link");
    assert_has(
        &f.err("grep", json!({"pattern": "secret", "path": "link"})),
        "symbolic link",
    );
    assert_eq!(std::fs::read_to_string(&outside).unwrap(), "secret");
    assert!(!f.dir.path().join("new.txt").exists());
    assert_has(
        &f.err("delete_path", json!({"path": "."})),
        "workspace root cannot be deleted",
    );
}

#[test]
fn list_make_delete_info_tree() {
    let f = Fixture::new();
    f.ok("make_dir", json!({"path": "src/deep"}));
    f.ok(
        "write_file",
        json!({"path": "src/main.py", "content": "print(1)\n"}),
    );
    f.ok(
        "write_file",
        json!({"path": "README", "content": "hello\n"}),
    );
    let listing = f.ok_text("list_dir", json!({}));
    assert_has(&listing, "README  (6 bytes)");
    assert_has(&listing, "src/");
    assert_has(
        &f.ok_text("list_dir", json!({"path": "src/deep"})),
        "empty folder",
    );
    assert_has(&f.err("list_dir", json!({"path": "README"})), "is a file");
    // The workspace named in words is the root, and the result says so.
    for words in ["workspace root", "/"] {
        let named = f.ok_text("list_dir", json!({ "path": words }));
        assert_has(&named, "the workspace root is `.`, used here");
        assert_has(&named, "README  (6 bytes)");
    }
    assert_has(
        &f.ok_text("tree", json!({"path": "my workspace"})),
        "    main.py\n",
    );
    let found = f.ok_text("grep", json!({"pattern": "print", "path": "workspace"}));
    assert_has(&found, "the workspace root is `.`, used here");
    assert_has(&found, "src/main.py:1: print(1)");
    assert_has(
        &f.ok_text("glob", json!({"pattern": "*.py", "path": "/"})),
        "the workspace root is `.`, used here.\nsrc/main.py",
    );
    assert_has(
        &f.err("list_dir", json!({"path": "nowhere"})),
        "no file or folder at `nowhere`",
    );
    let info = f.ok_text("file_info", json!({"path": "src/main.py"}));
    assert_has(&info, "src/main.py: file, 9 bytes, modified 20");
    assert_has(&info, "1 lines of text");
    assert_has(
        &f.err("file_info", json!({"path": "zzz"})),
        "no file or folder at `zzz`",
    );
    let tree = f.ok_text("tree", json!({}));
    assert_has(&tree, "  src/\n    deep/\n    main.py\n");
    assert_has(
        &f.err("make_dir", json!({"path": "README"})),
        "already exists as a file",
    );
    assert_has(
        &f.err("delete_path", json!({"path": "src"})),
        "pass \"recursive\": true",
    );
    f.ok("delete_path", json!({"path": "src", "recursive": true}));
    assert!(!f.path("src").exists());
    assert_has(
        &f.err("delete_path", json!({"path": "src"})),
        "no file or folder at `src`",
    );
}

/// Writing what a file holds changes nothing: no revision, and the
/// result says so; a file that differs, even by being longer, is written.
#[test]
fn a_write_of_what_the_file_holds_changes_nothing() {
    let f = Fixture::new();
    let args = json!({"path": "ledger.csv", "content": "account,amount\nbob,5\n"});
    assert_has(&f.ok_text("write_file", args.clone()), "created ledger.csv");
    assert_eq!(
        f.ok_text("write_file", args.clone()),
        "unchanged: `ledger.csv` already holds exactly this content (2 lines, 21 bytes); nothing was written"
    );
    assert_has(
        &f.ok_text(
            "write_file",
            json!({"path": "ledger.csv", "content": "account,amount\n"}),
        ),
        "overwrote ledger.csv",
    );
    assert_has(&f.ok_text("write_file", args), "overwrote ledger.csv");
    // Nor does an edit that puts back the lines already there.
    assert_eq!(
        f.ok_text(
            "edit_file",
            json!({"path": "ledger.csv", "action": "replace", "start_line": 2, "text": "bob,5"}),
        ),
        "unchanged: `ledger.csv` already holds these lines there; nothing was written"
    );
    // Three revisions: undone, the file is gone, not left as it was.
    for _ in 0..3 {
        f.ok("undo", json!({}));
    }
    assert!(!f.path("ledger.csv").exists());
    assert_has(&f.err("undo", json!({})), "nothing to undo");
}

#[test]
fn undo_and_redo_a_mix_of_edits_across_a_restart() {
    let f = Fixture::new();
    f.ok(
        "write_file",
        json!({"path": "notes/a.txt", "content": "one\ntwo\n"}),
    );
    f.ok(
        "edit_file",
        json!({"path": "notes/a.txt", "action": "insert", "start_line": 3, "text": "three"}),
    );
    f.ok("make_dir", json!({"path": "empty/inner"}));
    f.ok(
        "write_file",
        json!({"path": "notes/b.txt", "content": "bee\n"}),
    );
    f.ok("delete_path", json!({"path": "notes", "recursive": true}));
    assert!(!f.path("notes").exists());

    let f = f.restart();
    assert_has(
        &f.ok_text("undo", json!({})),
        "undid delete_path: deleted notes",
    );
    assert_eq!(f.read("notes/a.txt"), "one\ntwo\nthree\n");
    assert_eq!(f.read("notes/b.txt"), "bee\n");
    f.ok("undo", json!({}));
    assert!(!f.path("notes/b.txt").exists());
    f.ok("undo", json!({}));
    assert!(
        !f.path("empty").exists(),
        "make_dir undone removes the parents it made"
    );
    f.ok("undo", json!({}));
    assert_eq!(f.read("notes/a.txt"), "one\ntwo\n");

    let f = f.restart();
    f.ok("redo", json!({}));
    assert_eq!(f.read("notes/a.txt"), "one\ntwo\nthree\n");
    f.ok("redo", json!({}));
    assert!(f.path("empty/inner").is_dir());
    f.ok("undo", json!({}));
    f.ok("undo", json!({}));
    f.ok("undo", json!({}));
    assert!(!f.path("notes").exists());
    assert_has(&f.err("undo", json!({})), "nothing to undo");
    // A new edit after undo drops the redo history, as in any editor.
    f.ok("write_file", json!({"path": "c.txt", "content": "c"}));
    assert_has(&f.err("redo", json!({})), "nothing to redo");

    // Undo never overwrites a change it did not make.
    std::fs::write(f.path("c.txt"), "the user's own edit").unwrap();
    assert_has(
        &f.err("undo", json!({})),
        "`c.txt` was changed since then by something else",
    );
    assert_eq!(f.read("c.txt"), "the user's own edit");
}

#[test]
fn the_workspace_is_read_as_it_was_at_an_earlier_moment() {
    use reverie_tools::past::PastWorkspace;
    let f = Fixture::new();
    let root = f.tools.workspace().root().to_path_buf();
    // A moment strictly between what was done before and after it.
    let tick = || {
        std::thread::sleep(std::time::Duration::from_millis(5));
        let at = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_millis() as i64;
        std::thread::sleep(std::time::Duration::from_millis(5));
        at
    };
    // The person's own file, never touched by the tools.
    std::fs::write(f.path("mine.txt"), "by hand\n").unwrap();
    f.ok("write_file", json!({"path": "a.txt", "content": "first\n"}));
    let after_first = tick();
    f.ok(
        "write_file",
        json!({"path": "a.txt", "content": "second\n"}),
    );
    f.ok(
        "write_file",
        json!({"path": "sub/b.txt", "content": "new\n"}),
    );
    let after_all = tick();
    f.ok("delete_path", json!({"path": "a.txt"}));

    let then = PastWorkspace::at(&f.store, &root, after_first).unwrap();
    assert_eq!(then.read("a.txt").unwrap(), "first\n");
    assert!(then
        .read("sub/b.txt")
        .unwrap_err()
        .contains("did not exist"));
    assert_eq!(then.read("mine.txt").unwrap(), "by hand\n");
    assert_eq!(then.files(), vec!["a.txt", "mine.txt"]);

    let later = PastWorkspace::at(&f.store, &root, after_all).unwrap();
    assert_eq!(later.read("a.txt").unwrap(), "second\n");
    assert_eq!(later.read("./sub/b.txt").unwrap(), "new\n");
    assert_eq!(later.files(), vec!["a.txt", "mine.txt", "sub/b.txt"]);

    let now = PastWorkspace::at(&f.store, &root, tick()).unwrap();
    assert!(now.read("a.txt").is_err(), "deleted since");
    assert_eq!(now.files(), vec!["mine.txt", "sub/b.txt"]);
    // Reading stays inside the workspace.
    assert!(now.read("../outside.txt").is_err());
    assert!(now.read("/etc/passwd").is_err());
}

#[test]
fn every_file_is_listed_or_none_where_the_workspace_is_too_large_to_list_whole() {
    use reverie_tools::past::PastWorkspace;
    let f = Fixture::new();
    let root = f.tools.workspace().root().to_path_buf();
    std::fs::create_dir_all(f.path("many")).unwrap();
    for i in 0..300 {
        std::fs::write(f.path(&format!("many/{i:03}.txt")), "x").unwrap();
    }
    let now = || {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_millis() as i64
    };
    let past = PastWorkspace::at(&f.store, &root, now()).unwrap();
    let every = past.every_file().expect("300 files are listed whole");
    assert_eq!(every.len(), 300);
    assert_eq!(past.files().len(), 200, "the judge's listing stays short");
    for i in 300..1000 {
        std::fs::write(f.path(&format!("many/{i:03}.txt")), "x").unwrap();
    }
    let past = PastWorkspace::at(&f.store, &root, now()).unwrap();
    assert_eq!(
        past.every_file(),
        None,
        "1000 files are more than a scan lists"
    );
}

#[test]
fn a_path_missing_its_folder_is_answered_with_where_the_file_is() {
    let f = Fixture::new();
    f.ok(
        "write_file",
        json!({"path": "data/sales.csv", "content": "amount\n3\n"}),
    );
    f.ok(
        "write_file",
        json!({"path": "old/sales.csv", "content": "amount\n"}),
    );
    let err = f.err("read_file", json!({"path": "sales.csv"}));
    assert_has(
        &err,
        "no file or folder at `sales.csv`; did you mean `data/sales.csv` or `old/sales.csv`?",
    );
    // Nothing of that name anywhere: the plain advice.
    let err = f.err("read_file", json!({"path": "nope.csv"}));
    assert_has(&err, "no file or folder at `nope.csv` (yet: write_file");
    // Only one file of that name: read_file reads it and says which.
    f.ok(
        "write_file",
        json!({"path": "logs/app.log", "content": "WARN a\nINFO b\n"}),
    );
    let read = f.ok_text("read_file", json!({"path": "app.log"}));
    assert_has(
        &read,
        "There is no `app.log`; the only file of that name is `logs/app.log`, read here.\nlogs/app.log: lines 1-2 of 2\n1| WARN a",
    );
    // Other tools still say where it is rather than act on a guess.
    let err = f.err("edit_file", json!({"path": "app.log", "action": "replace", "start_line": 1, "end_line": 1, "text": "x"}));
    assert_has(&err, "did you mean `logs/app.log`?");
}
