use reverie_core::{Home, MessageRole, TokenRole, TokenSpan};
use reverie_store::{BlobHash, NightStatus, Store, StoreError};

fn open() -> (tempfile::TempDir, Store) {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&Home::new(dir.path())).unwrap();
    (dir, store)
}

#[test]
fn messages_keep_their_exact_tokens() {
    let (_d, s) = open();
    let ch = s.create_channel("work").unwrap();
    let mut span = TokenSpan::default();
    span.extend_role(&[1, 2], TokenRole::Context);
    span.push(77, TokenRole::Action, Some(-0.5));
    span.push(78, TokenRole::Action, Some(-3.25));
    let id = s
        .append_message(ch, MessageRole::Assistant, "hi", &span)
        .unwrap();
    let msgs = s.messages(ch).unwrap();
    assert_eq!(msgs.len(), 1);
    assert_eq!(msgs[0].id, id);
    assert_eq!(msgs[0].tokens, span);
    assert_eq!(msgs[0].role, MessageRole::Assistant);
}

#[test]
fn channel_errors_say_what_to_do() {
    let (_d, s) = open();
    s.create_channel("a").unwrap();
    let err = s.create_channel("a").unwrap_err();
    assert!(matches!(err, StoreError::ChannelExists(_)));
    assert!(err.to_string().contains("pick another name"));
    let b = s.create_channel("b").unwrap();
    assert!(matches!(
        s.rename_channel(b, "a"),
        Err(StoreError::ChannelExists(_))
    ));
    s.rename_channel(b, "c").unwrap();
    assert_eq!(s.channel(b).unwrap().name, "c");
    let bad = reverie_core::ChannelId(999);
    assert!(matches!(
        s.append_message(bad, MessageRole::User, "x", &TokenSpan::default()),
        Err(StoreError::NoSuchChannelId(999))
    ));
}

#[test]
fn deleting_a_channel_removes_its_messages_and_tool_calls() {
    let (_d, s) = open();
    let ch = s.create_channel("tmp").unwrap();
    let m = s
        .append_message(ch, MessageRole::Assistant, "calling", &TokenSpan::default())
        .unwrap();
    s.record_tool_call(m, "c1", "read_file", r#"{"path":"a"}"#)
        .unwrap();
    s.finish_tool_call(m, "c1", true, "contents").unwrap();
    let calls = s.tool_calls(m).unwrap();
    assert_eq!(calls[0].ok, Some(true));
    assert_eq!(calls[0].result.as_deref(), Some("contents"));
    s.delete_channel(ch).unwrap();
    assert_eq!(s.message_count().unwrap(), 0);
    assert!(s.tool_calls(m).unwrap().is_empty());
}

#[test]
fn inconsistent_spans_are_refused() {
    let (_d, s) = open();
    let ch = s.create_channel("x").unwrap();
    let span = TokenSpan {
        ids: vec![1, 2],
        roles: vec![TokenRole::User],
        logprobs: vec![None, None],
    };
    let err = s
        .append_message(ch, MessageRole::User, "x", &span)
        .unwrap_err();
    assert!(matches!(err, StoreError::InconsistentSpan { .. }));
    assert_eq!(s.message_count().unwrap(), 0);
}

#[test]
fn blobs_are_content_addressed_and_read_only() {
    let (_d, s) = open();
    let h1 = s.put_blob("a.png", b"image bytes").unwrap();
    let h2 = s.put_blob("copy.png", b"image bytes").unwrap();
    assert_eq!(h1, h2);
    assert_eq!(h1, BlobHash::of(b"image bytes"));
    assert_eq!(s.blob(&h1).unwrap(), b"image bytes");
    let meta = std::fs::metadata(s.blob_path(&h1)).unwrap();
    assert!(meta.permissions().readonly());
    let missing = BlobHash::of(b"never stored");
    assert!(s.blob(&missing).is_err());
}

#[test]
fn images_are_numbered_once_and_lead_to_their_blob() {
    let (_d, s) = open();
    let a = s.put_blob("a.png", b"picture a").unwrap();
    let b = s.put_blob("b.png", b"picture b").unwrap();
    let na = s.image_number(&a).unwrap();
    let nb = s.image_number(&b).unwrap();
    assert!(na >= 1 && nb != na);
    assert_eq!(
        s.image_number(&a).unwrap(),
        na,
        "the same image keeps its number"
    );
    assert_eq!(s.image(nb).unwrap(), b"picture b");
    // Positions recorded with the number survive in a message's tokens.
    let ch = s.create_channel("img").unwrap();
    let mut span = TokenSpan::default();
    span.extend_role(&[5, 6], TokenRole::User);
    span.extend_role(&[reverie_core::image_token(na); 3], TokenRole::User);
    s.append_message(ch, MessageRole::User, "look", &span)
        .unwrap();
    let back = &s.messages(ch).unwrap()[0].tokens;
    assert_eq!(back.ids[2..], [reverie_core::image_token(na); 3]);
    let err = s.image(na + nb + 10).unwrap_err().to_string();
    assert!(
        err.contains("image") && err.contains("does not exist"),
        "{err}"
    );
}

#[test]
fn the_context_counts_the_tokens_of_messages_not_taken_back() {
    let (_d, s) = open();
    let ch = s.create_channel("ctx").unwrap();
    let other = s.create_channel("other").unwrap();
    let span = |n: usize| {
        let mut t = TokenSpan::default();
        t.extend_role(&vec![5; n], TokenRole::Context);
        t
    };
    assert_eq!(s.context_tokens(ch).unwrap(), 0);
    s.append_message(ch, MessageRole::User, "q", &span(7))
        .unwrap();
    let reply = s
        .append_message(ch, MessageRole::Assistant, "a", &span(30))
        .unwrap();
    s.append_message(other, MessageRole::User, "elsewhere", &span(100))
        .unwrap();
    assert_eq!(s.context_tokens(ch).unwrap(), 37);
    s.retract_from(ch, reply).unwrap();
    assert_eq!(s.context_tokens(ch).unwrap(), 7);
}

#[test]
fn a_new_channel_never_reuses_a_deleted_ones_id() {
    let (d, s) = open();
    let a = s.create_channel("a").unwrap();
    let b = s.create_channel("b").unwrap();
    s.delete_channel(b).unwrap();
    let c = s.create_channel("c").unwrap();
    assert!(c.0 > b.0, "{c:?} reuses {b:?}");
    s.delete_channel(c).unwrap();
    drop(s);
    let s = Store::open(&Home::new(d.path())).unwrap();
    let e = s.create_channel("e").unwrap();
    assert!(e.0 > c.0 && e.0 > a.0, "{e:?} after a reopen reuses an id");
}

#[test]
fn writers_of_the_same_blob_do_not_collide() {
    let (_d, s) = open();
    let s = std::sync::Arc::new(s);
    let bytes: Vec<u8> = (0..2_000_000u32).map(|i| (i % 251) as u8).collect();
    let handles: Vec<_> = (0..8)
        .map(|_| {
            let (s, bytes) = (s.clone(), bytes.clone());
            std::thread::spawn(move || {
                (0..5)
                    .map(|_| s.put_blob("same.bin", &bytes).unwrap())
                    .collect::<Vec<_>>()
            })
        })
        .collect();
    for h in handles {
        for hash in h.join().unwrap() {
            assert_eq!(s.blob(&hash).unwrap(), bytes);
        }
    }
    let dir = s.blob_path(&BlobHash::of(&bytes));
    let left: Vec<_> = std::fs::read_dir(dir.parent().unwrap())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .filter(|n| n.to_string_lossy().ends_with(".partial"))
        .collect();
    assert!(left.is_empty(), "temporary files left: {left:?}");
}

#[test]
fn a_truncated_blob_is_detected_and_written_again() {
    let (_d, s) = open();
    let h = s.put_blob("a.txt", b"the whole text").unwrap();
    let path = s.blob_path(&h);
    let mut perms = std::fs::metadata(&path).unwrap().permissions();
    #[allow(clippy::permissions_set_readonly_false)]
    perms.set_readonly(false);
    std::fs::set_permissions(&path, perms).unwrap();
    std::fs::write(&path, b"the wh").unwrap();
    assert!(matches!(s.blob(&h), Err(StoreError::BlobMismatch(_))));
    assert_eq!(s.put_blob("a.txt", b"the whole text").unwrap(), h);
    assert_eq!(s.blob(&h).unwrap(), b"the whole text");
}

#[test]
fn reopening_keeps_schema_and_data() {
    let dir = tempfile::tempdir().unwrap();
    let home = Home::new(dir.path());
    {
        let s = Store::open(&home).unwrap();
        let ch = s.ensure_channel("keep").unwrap();
        s.append_message(ch, MessageRole::User, "persist", &TokenSpan::default())
            .unwrap();
    }
    let s = Store::open(&home).unwrap();
    assert_eq!(s.schema_version().unwrap(), 11);
    let ch = s.ensure_channel("keep").unwrap();
    assert_eq!(s.messages(ch).unwrap()[0].text, "persist");
}

#[test]
fn a_newer_schema_is_refused_with_advice() {
    let dir = tempfile::tempdir().unwrap();
    let home = Home::new(dir.path());
    drop(Store::open(&home).unwrap());
    let conn = rusqlite::Connection::open(home.database()).unwrap();
    conn.pragma_update(None, "user_version", 99).unwrap();
    drop(conn);
    let err = Store::open(&home).err().unwrap();
    assert!(err.to_string().contains("upgrade Reverie"), "{err}");
}

#[test]
fn checkpoints_track_one_active_and_roll_back() {
    let (_d, s) = open();
    let night = s.start_night().unwrap();
    let base = s.add_checkpoint("/m/base.gguf", "aa", None, true).unwrap();
    let next = s
        .add_checkpoint("/m/night1.gguf", "bb", Some(night), true)
        .unwrap();
    let cps = s.checkpoints().unwrap();
    assert_eq!(cps.iter().filter(|c| c.active).count(), 1);
    assert_eq!(cps[1].parent, Some(base));
    assert!(cps[1].active);
    let back = s.activate_checkpoint(base).unwrap();
    assert!(back.active);
    assert!(!s.checkpoints().unwrap()[1].active);
    assert!(s.activate_checkpoint(next + 10).is_err());
    s.update_night(
        night,
        NightStatus::Done,
        "deploy",
        &serde_json::json!({"steps": 3}),
    )
    .unwrap();
    let n = &s.nights().unwrap()[0];
    assert_eq!(n.status, NightStatus::Done);
    assert_eq!(n.report["steps"], 3);
    assert!(n.finished_ms.is_some());
}

#[test]
fn stray_ends_are_kept_per_channel() {
    let (_d, s) = open();
    let a = s.create_channel("a").unwrap();
    let b = s.create_channel("b").unwrap();
    let m1 = s
        .append_message(
            a,
            MessageRole::Assistant,
            "Here is the plan:",
            &TokenSpan::default(),
        )
        .unwrap();
    let m2 = s
        .append_message(a, MessageRole::Assistant, "Done.", &TokenSpan::default())
        .unwrap();
    let m3 = s
        .append_message(b, MessageRole::Assistant, "Let me", &TokenSpan::default())
        .unwrap();
    s.record_stray_end(m1, true).unwrap();
    s.record_stray_end(m2, false).unwrap();
    s.record_stray_end(m3, true).unwrap();
    assert_eq!(s.unintended_ends(a).unwrap(), vec![m1]);
    assert_eq!(s.unintended_ends(b).unwrap(), vec![m3]);
}

#[test]
fn revisions_undo_redo_order_and_a_new_edit_drops_redo() {
    use reverie_store::RevisionState;
    let dir = tempfile::tempdir().unwrap();
    let s = Store::open(&Home::new(dir.path())).unwrap();
    let a = s.push_revision("/ws", "write_file", "a", "[]").unwrap();
    let b = s.push_revision("/ws", "write_file", "b", "[]").unwrap();
    s.push_revision("/other", "write_file", "x", "[]").unwrap();
    assert_eq!(s.undo_candidate("/ws").unwrap().unwrap().id, b);
    s.set_revision_state(b, RevisionState::Undone).unwrap();
    s.set_revision_state(a, RevisionState::Undone).unwrap();
    // Redo re-applies the oldest undone first.
    assert_eq!(s.redo_candidate("/ws").unwrap().unwrap().id, a);
    assert!(s.undo_candidate("/ws").unwrap().is_none());
    s.push_revision("/ws", "edit_file", "c", "[]").unwrap();
    assert!(s.redo_candidate("/ws").unwrap().is_none());
    let states: Vec<_> = s
        .revisions("/ws")
        .unwrap()
        .iter()
        .map(|r| r.state)
        .collect();
    assert_eq!(
        states,
        [
            RevisionState::Dropped,
            RevisionState::Dropped,
            RevisionState::Done
        ]
    );
    assert!(s.set_revision_state(999, RevisionState::Done).is_err());
}

#[test]
fn embeddings_cache_round_trips() {
    let dir = tempfile::tempdir().unwrap();
    let s = Store::open(&Home::new(dir.path())).unwrap();
    assert!(s.cached_embedding("m", "h").unwrap().is_none());
    s.cache_embedding("m", "h", &[0.5, -1.25, 3.0]).unwrap();
    assert_eq!(
        s.cached_embedding("m", "h").unwrap().unwrap(),
        [0.5, -1.25, 3.0]
    );
    assert!(s.cached_embedding("other", "h").unwrap().is_none());
}

#[test]
fn retracting_hides_the_tail_of_one_channel_and_keeps_the_rows() {
    let dir = tempfile::tempdir().unwrap();
    let s = Store::open(&Home::new(dir.path())).unwrap();
    let a = s.ensure_channel("a").unwrap();
    let b = s.ensure_channel("b").unwrap();
    let span = TokenSpan::default();
    let ids: Vec<_> = (0..4)
        .map(|i| {
            s.append_message(a, MessageRole::User, &format!("m{i}"), &span)
                .unwrap()
        })
        .collect();
    let other = s.append_message(b, MessageRole::User, "b0", &span).unwrap();
    assert_eq!(s.retract_from(a, ids[2]).unwrap(), 2);
    let texts: Vec<_> = s.messages(a).unwrap().into_iter().map(|m| m.text).collect();
    assert_eq!(texts, ["m0", "m1"]);
    assert_eq!(s.messages(b).unwrap().len(), 1);
    assert_eq!(s.message_count().unwrap(), 5, "retracted rows stay");
    let taken_back: Vec<_> = s
        .retracted_messages(a)
        .unwrap()
        .into_iter()
        .map(|m| m.text)
        .collect();
    assert_eq!(taken_back, ["m2", "m3"]);
    assert!(s.retracted_messages(b).unwrap().is_empty());
    let err = s.retract_from(a, other).unwrap_err().to_string();
    assert!(err.contains("message of this channel"), "{err}");
}

#[test]
fn review_marks_replace_validate_and_clear() {
    let dir = tempfile::tempdir().unwrap();
    let s = Store::open(&Home::new(dir.path())).unwrap();
    let ch = s.ensure_channel("a").unwrap();
    let (m1, m5) = (reverie_core::MessageId(1), reverie_core::MessageId(5));
    s.set_review_mark(ch, m1, m5, Some(0.2), false).unwrap();
    s.set_review_mark(ch, m1, m5, Some(0.9), true).unwrap();
    let marks = s.review_marks().unwrap();
    assert_eq!(marks.len(), 1);
    assert_eq!((marks[0].reward, marks[0].excluded), (Some(0.9), true));
    assert!(marks[0].covers(ch, reverie_core::MessageId(3)));
    assert!(!marks[0].covers(ch, reverie_core::MessageId(6)));
    let err = s.set_review_mark(ch, m1, m5, Some(1.5), false).unwrap_err();
    assert!(err.to_string().contains("between 0 and 1"), "{err}");
    let err = s.set_review_mark(ch, m5, m1, None, true).unwrap_err();
    assert!(err.to_string().contains("start before it ends"), "{err}");
    s.set_review_mark(ch, m1, m5, None, false).unwrap();
    assert!(s.review_marks().unwrap().is_empty());
}

#[test]
fn practice_episodes_keep_their_verdicts_and_kind() {
    let (_d, s) = open();
    let ch = s.ensure_channel("practice/arithmetic/1").unwrap();
    let ep = |kind, passed| reverie_store::NewEpisode {
        channel: ch,
        family: "arithmetic",
        kind,
        difficulty: 3,
        prompt: "Start with 2. Add 3.",
        expected: "5",
        passed,
        why: "the last number was 5",
    };
    use reverie_store::EpisodeKind;
    s.record_episode(&ep(EpisodeKind::Practice, true)).unwrap();
    s.record_episode(&ep(EpisodeKind::Eval, false)).unwrap();
    s.record_episode(&ep(EpisodeKind::Tasker, true)).unwrap();
    let all = s.episodes_since(0).unwrap();
    assert_eq!(all.len(), 3);
    assert_eq!((all[0].kind.as_str(), all[0].passed), ("practice", true));
    assert_eq!((all[1].kind.as_str(), all[1].passed), ("eval", false));
    assert_eq!(all[2].kind, reverie_store::EpisodeKind::Tasker);
    assert!(s.episodes_since(i64::MAX).unwrap().is_empty());
}

/// A call repeated to no effect is a field of the call; a reply counts as
/// repeating when every call of it was a repeat.
#[test]
fn replies_whose_every_call_was_a_repeat_are_found_by_their_field() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&reverie_core::Home::new(dir.path())).unwrap();
    let ch = store.create_channel("c").unwrap();
    let span = reverie_core::TokenSpan::default();
    let reply = |calls: &[(&str, bool)]| {
        let m = store
            .append_message(ch, reverie_core::MessageRole::Assistant, "call", &span)
            .unwrap();
        for (id, repeated) in calls {
            store.record_tool_call(m, id, "calculator", "{}").unwrap();
            store.finish_tool_call(m, id, true, "4").unwrap();
            if *repeated {
                store.mark_repeated_call(m, id).unwrap();
            }
        }
        m
    };
    let _fresh = reply(&[("call_1", false)]);
    let repeat = reply(&[("call_1", true)]);
    let _mixed = reply(&[("call_1", true), ("call_2", false)]);
    let both = reply(&[("call_1", true), ("call_2", true)]);
    assert_eq!(store.replies_repeating_calls(ch).unwrap(), [repeat, both]);
    assert!(store.mark_repeated_call(repeat, "call_9").is_err());
}

#[test]
fn replies_are_rated_and_a_rating_can_be_changed_or_taken_back() {
    let (_d, s) = open();
    let ch = s.create_channel("work").unwrap();
    let other = s.create_channel("other").unwrap();
    let span = TokenSpan::default();
    let ask = s
        .append_message(ch, MessageRole::User, "17 × 3?", &span)
        .unwrap();
    let reply = s
        .append_message(ch, MessageRole::Assistant, "51", &span)
        .unwrap();
    assert_eq!(s.last_reply(ch).unwrap(), Some(reply));
    assert_eq!(s.last_reply(other).unwrap(), None);

    s.set_feedback(ch, reply, Some(false)).unwrap();
    s.set_feedback(ch, reply, Some(true)).unwrap();
    let rated = s.feedback(ch).unwrap();
    assert_eq!(rated.len(), 1, "rating again replaces");
    assert_eq!((rated[0].message, rated[0].good), (reply, true));

    let err = s.set_feedback(ch, ask, Some(true)).unwrap_err().to_string();
    assert!(err.contains("only the assistant's replies"), "{err}");
    let err = s.set_feedback(other, reply, Some(true)).unwrap_err();
    assert!(matches!(err, StoreError::NotFound { .. }), "{err}");

    s.set_feedback(ch, reply, None).unwrap();
    assert!(s.feedback(ch).unwrap().is_empty());

    // A retracted reply keeps no rating in the transcript and takes no new one.
    s.set_feedback(ch, reply, Some(true)).unwrap();
    s.retract_from(ch, ask).unwrap();
    assert!(s.feedback(ch).unwrap().is_empty());
    assert_eq!(s.last_reply(ch).unwrap(), None);
    let err = s
        .set_feedback(ch, reply, Some(false))
        .unwrap_err()
        .to_string();
    assert!(err.contains("taken back"), "{err}");
}

#[test]
fn every_note_keeps_the_notes_a_cleaning_hid() {
    let (_d, s) = open();
    let a = s.add_note_at("a", "one", 1_000).unwrap();
    s.add_note_at("b", "two", 2_000).unwrap();
    s.change_notes("merged", &[a], None).unwrap();
    assert_eq!(s.notes().unwrap().len(), 1, "the hidden note is not listed");
    let every: Vec<(i64, String)> = s
        .every_note()
        .unwrap()
        .into_iter()
        .map(|n| (n.created_ms, n.body))
        .collect();
    assert_eq!(every, vec![(1_000, "one".into()), (2_000, "two".into())]);
}
