//! Images through llama.cpp's mtmd, on a synthetic text model paired with a
//! synthetic LLaVA-style projector.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use reverie_core::{image_token, ChannelId, MessageRole, SamplingParams, TokenRole};
use reverie_gguf::projector;
use reverie_gguf::synth::{self, Arch, SynthConfig};
use reverie_infer::{
    ChatMessage, Completion, Engine, EngineConfig, GenerateRequest, ImageRun, InferError,
    Transcript,
};

struct Pair {
    _dir: tempfile::TempDir,
    model: PathBuf,
    mmproj: PathBuf,
}

fn pair() -> Pair {
    let dir = tempfile::tempdir().unwrap();
    let cfg = SynthConfig::tiny(Arch::Llama);
    let model = dir.path().join("model.gguf");
    synth::write(&model, &cfg).unwrap();
    let mmproj = dir.path().join("mmproj.gguf");
    projector::write(&mmproj, cfg.n_embd, 5).unwrap();
    Pair {
        _dir: dir,
        model,
        mmproj,
    }
}

fn config(mmproj: Option<&Path>) -> EngineConfig {
    EngineConfig {
        slots: 1,
        n_ctx: 1024,
        threads: 1,
        mmproj: mmproj.map(Path::to_path_buf),
        ..EngineConfig::default()
    }
}

fn red() -> Vec<u8> {
    projector::picture(40, 1)
}

fn stripes() -> Vec<u8> {
    projector::picture(40, 4)
}

/// Serves image 1 and image 2, two different pictures.
fn source() -> reverie_infer::ImageSource {
    Arc::new(|n| match n {
        1 => Ok(red()),
        2 => Ok(stripes()),
        _ => Err(format!("no image {n}")),
    })
}

fn prompt_with(engine: &Engine, number: u32, bytes: &[u8]) -> Transcript {
    let positions = engine.image_positions(bytes).unwrap();
    let msg = ChatMessage::new(MessageRole::User, "What is in this picture?")
        .with_image(ImageRun { number, positions });
    let mut t = Transcript::default();
    engine.extend_transcript(&mut t, &[msg]).unwrap();
    t
}

fn reply(engine: &Engine, ch: i64, prompt: &[i32]) -> Completion {
    let req = GenerateRequest::new(ChannelId(ch), prompt.to_vec(), SamplingParams::greedy(6));
    engine.generate(req).unwrap().complete().unwrap()
}

#[test]
fn an_image_reaches_the_model_and_its_positions_are_recorded() {
    let p = pair();
    let engine = Engine::load(&p.model, config(Some(&p.mmproj))).unwrap();
    assert!(engine.can_see());
    engine.set_image_source(source());
    assert_eq!(
        engine.image_positions(&red()).unwrap(),
        projector::IMAGE_TOKENS
    );

    let t = prompt_with(&engine, 1, &red());
    let ids = &t.tokens.ids;
    let at: Vec<usize> = (0..ids.len()).filter(|&i| ids[i] < 0).collect();
    assert_eq!(at.len(), projector::IMAGE_TOKENS);
    assert!(at.windows(2).all(|w| w[1] == w[0] + 1), "one run");
    assert!(at.iter().all(|&i| ids[i] == image_token(1)));
    assert!(at.iter().all(|&i| t.tokens.roles[i] == TokenRole::User));
    // The image follows the message's text and precedes the end of its turn.
    let text = engine.detokenize(&ids[..at[0]], true);
    assert!(text.ends_with("What is in this picture?"), "{text:?}");
    assert!(ids.last().unwrap() >= &0);

    let a = reply(&engine, 1, ids);
    let stripes_prompt = prompt_with(&engine, 2, &stripes());
    let b = reply(&engine, 2, &stripes_prompt.tokens.ids);
    assert_ne!(
        (a.ids.clone(), a.logprobs.clone()),
        (b.ids.clone(), b.logprobs.clone()),
        "the picture changes what the model computes"
    );

    // The one slot holds the striped prompt now: it reuses its cache up to
    // the image that differs, and the result is what it computed before.
    let again = reply(&engine, 1, ids);
    assert_eq!(again.usage.reused_tokens, at[0]);
    assert_eq!(again.ids, a.ids);
    for (x, y) in again.logprobs.iter().zip(&a.logprobs) {
        assert!((x - y).abs() < 1e-4, "{x} vs {y}");
    }
}

/// Why a generation of `prompt` that starts fails.
fn failure(engine: &Engine, prompt: Vec<i32>) -> String {
    let req = GenerateRequest::new(ChannelId(1), prompt, SamplingParams::greedy(2));
    engine
        .generate(req)
        .unwrap()
        .complete()
        .unwrap_err()
        .to_string()
}

#[test]
fn image_failures_say_what_is_wrong() {
    let p = pair();
    // A text-only engine refuses a prompt with an image.
    let text_only = Engine::load(&p.model, config(None)).unwrap();
    assert!(!text_only.can_see());
    let mut prompt = text_only.tokenize("look", false);
    prompt.extend([image_token(1); 4]);
    prompt.extend(text_only.tokenize("now", false));
    let err = text_only
        .generate(GenerateRequest::new(
            ChannelId(1),
            prompt.clone(),
            SamplingParams::greedy(2),
        ))
        .err()
        .unwrap()
        .to_string();
    assert!(err.contains("projector"), "{err}");
    drop(text_only);

    let engine = Engine::load(&p.model, config(Some(&p.mmproj))).unwrap();
    // No source set yet: the generation fails and says why.
    let t = prompt_with(&engine, 1, &red());
    let err = failure(&engine, t.tokens.ids.clone());
    assert!(err.contains("no image source"), "{err}");
    // A source that lost the image.
    engine.set_image_source(Arc::new(|n| Err(format!("blob of image {n} is missing"))));
    let err = failure(&engine, t.tokens.ids.clone());
    assert!(err.contains("missing"), "{err}");
    // A run whose length this projector would not make.
    engine.set_image_source(source());
    let err = failure(&engine, prompt);
    assert!(err.contains("another projector"), "{err}");
    // Bytes that are no image.
    let err = engine
        .image_positions(b"not a picture")
        .unwrap_err()
        .to_string();
    assert!(err.contains("could not be decoded"), "{err}");
    // A prompt may not end in an image.
    let err = engine
        .generate(GenerateRequest::new(
            ChannelId(1),
            vec![5, image_token(1)],
            SamplingParams::greedy(2),
        ))
        .err()
        .unwrap()
        .to_string();
    assert!(err.contains("end in text"), "{err}");
    // Scoring is for text.
    let err = engine.score(&t.tokens.ids).unwrap_err().to_string();
    assert!(err.contains("text only"), "{err}");
    drop(engine);

    // A projector made for another width, and a file that is no GGUF.
    let narrow = p.model.with_file_name("narrow.gguf");
    projector::write(&narrow, 32, 1).unwrap();
    let err = Engine::load(&p.model, config(Some(&narrow))).err().unwrap();
    assert!(matches!(err, InferError::Load { .. }), "{err}");
    assert!(err.to_string().contains("embedding width"), "{err}");
    let junk = p.model.with_file_name("junk.gguf");
    std::fs::write(&junk, b"nothing").unwrap();
    assert!(Engine::load(&p.model, config(Some(&junk))).is_err());
}
