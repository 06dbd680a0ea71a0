//! An image a tool loads reaches a multimodal model, is recorded with the
//! store's number for its blob, and replays after its file is gone.

use std::sync::Arc;

use reverie_agent::{CancelFlag, ChannelSession, ToolSetup};
use reverie_core::{image_number, Home, MessageRole, SamplingParams, StopReason, TokenRole};
use reverie_gguf::projector;
use reverie_gguf::synth::{self, Arch, SynthConfig};
use reverie_infer::{Constraint, Engine, EngineConfig};
use reverie_store::Store;
use reverie_tools::{Services, Toolbox};

const LOAD_PHOTO: &str = r#"root ::= "<tool_call>\n{\"name\": \"load_image\", \"arguments\": {\"path\": \"photo.bmp\"}}\n</tool_call>""#;

fn seeing_engine(dir: &std::path::Path) -> Engine {
    let model = dir.join("m.gguf");
    let mut cfg = SynthConfig::tiny(Arch::Qwen2);
    // A token per byte: the tool definitions alone take thousands.
    cfg.n_ctx = 16384;
    synth::write(&model, &cfg).unwrap();
    let mmproj = dir.join("mmproj.gguf");
    projector::write(&mmproj, cfg.n_embd, 9).unwrap();
    Engine::load(
        &model,
        EngineConfig {
            slots: 1,
            n_ctx: 16384,
            threads: 1,
            mmproj: Some(mmproj),
            ..EngineConfig::default()
        },
    )
    .unwrap()
}

/// A data folder with its store and services, and an engine that sees
/// through the store.
fn setup() -> (tempfile::TempDir, Arc<Store>, Arc<Services>, Engine) {
    let dir = tempfile::tempdir().unwrap();
    let home = Home::new(dir.path().join("home"));
    let store = Arc::new(Store::open(&home).unwrap());
    let services = Arc::new(Services::new(&home));
    let engine = seeing_engine(dir.path());
    reverie_agent::show_images(&engine, &store);
    (dir, store, services, engine)
}

#[test]
fn a_loaded_image_is_seen_recorded_and_replayed_from_its_blob() {
    let (dir, store, services, engine) = setup();
    let id = store.ensure_channel("look").unwrap();
    let ws = services.default_workspace(id);
    std::fs::create_dir_all(&ws).unwrap();
    let photo = projector::picture(48, 3);
    std::fs::write(ws.join("photo.bmp"), &photo).unwrap();

    let mut setup = ToolSetup::new(Toolbox::open(store.clone(), id, services.clone()).unwrap());
    setup.max_calls = 1;
    let mut s = ChannelSession::open(&engine, &store, "look", "Be brief.")
        .unwrap()
        .with_tools(setup);
    s.set_reply_constraint(Some(Constraint::Gbnf(LOAD_PHOTO.into())));
    let out = s
        .send(
            "What is in photo.bmp?",
            &SamplingParams::greedy(256),
            &CancelFlag::default(),
            &mut |_| {},
        )
        .unwrap();
    assert_eq!(out.tool_calls, 1);
    assert_eq!(out.reason, StopReason::ToolLimit);

    let msgs = store.messages(id).unwrap();
    let tool = msgs.iter().find(|m| m.role == MessageRole::Tool).unwrap();
    assert!(
        tool.text.starts_with("loaded bmp image `photo.bmp`") && !tool.text.contains("cannot see"),
        "{}",
        tool.text
    );
    let at: Vec<usize> = (0..tool.tokens.len())
        .filter(|&i| tool.tokens.ids[i] < 0)
        .collect();
    assert_eq!(at.len(), projector::IMAGE_TOKENS);
    assert!(at.iter().all(|&i| tool.tokens.roles[i] == TokenRole::Env));
    let number = image_number(tool.tokens.ids[at[0]]).unwrap();
    assert_eq!(
        store.image(number).unwrap(),
        photo,
        "the record leads to the bytes"
    );

    // The file goes; the conversation goes on, and a fresh session (as
    // after a restart) replays the recorded tokens, image included.
    std::fs::remove_file(ws.join("photo.bmp")).unwrap();
    s.set_reply_constraint(None);
    let first = s
        .send(
            "Describe it.",
            &SamplingParams::greedy(6),
            &CancelFlag::default(),
            &mut |_| {},
        )
        .unwrap();
    drop(s);
    let msgs = store.messages(id).unwrap();
    let last_reply = msgs
        .iter()
        .rposition(|m| m.role == MessageRole::Assistant)
        .unwrap();
    let before_reply: Vec<i32> = msgs[..last_reply]
        .iter()
        .flat_map(|m| m.tokens.ids.clone())
        .collect();
    assert!(reverie_core::has_images(&before_reply));
    let again = dir.path().join("again");
    std::fs::create_dir_all(&again).unwrap();
    let fresh = seeing_engine(&again);
    reverie_agent::show_images(&fresh, &store);
    let replay = fresh
        .generate(reverie_infer::GenerateRequest::new(
            id,
            before_reply,
            SamplingParams::greedy(6),
        ))
        .unwrap()
        .complete()
        .unwrap();
    let recorded = &msgs[last_reply].tokens;
    assert_eq!(first.reason, replay.reason);
    assert_eq!(
        replay.ids[..],
        recorded.ids[..replay.ids.len().min(recorded.len())],
        "the replay samples what was recorded"
    );
}

#[test]
fn an_image_the_person_attaches_goes_to_the_model_with_the_message() {
    let (_dir, store, services, engine) = setup();
    let id = store.ensure_channel("attach").unwrap();
    let ws = services.default_workspace(id);
    std::fs::create_dir_all(ws.join("attachments")).unwrap();
    let cat = projector::picture(40, 6);
    std::fs::write(ws.join("attachments/cat.bmp"), &cat).unwrap();
    std::fs::write(ws.join("attachments/notes.txt"), "not a picture").unwrap();
    let setup = ToolSetup::new(Toolbox::open(store.clone(), id, services.clone()).unwrap());
    let mut s = ChannelSession::open(&engine, &store, "attach", "Be brief.")
        .unwrap()
        .with_tools(setup);
    s.send(
        "What animal is this?\n\n[attached: attachments/cat.bmp]\n\n[attached: attachments/notes.txt]\n\n[attached: attachments/gone.png]",
        &SamplingParams::greedy(4),
        &CancelFlag::default(),
        &mut |_| {},
    )
    .unwrap();
    let msgs = store.messages(id).unwrap();
    let user = msgs.iter().find(|m| m.role == MessageRole::User).unwrap();
    let images: Vec<(i32, TokenRole)> = user
        .tokens
        .ids
        .iter()
        .zip(&user.tokens.roles)
        .filter(|(&i, _)| i < 0)
        .map(|(&i, &r)| (i, r))
        .collect();
    // The picture only: the text file and the missing file are not images.
    assert_eq!(images.len(), projector::IMAGE_TOKENS);
    assert!(images.iter().all(|&(_, r)| r == TokenRole::User));
    let number = image_number(images[0].0).unwrap();
    assert_eq!(store.image(number).unwrap(), cat);
}
