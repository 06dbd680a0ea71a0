//! Regenerate is a preference: after a night on a tiny model, the reply the
//! person kept is likelier and the one they took back with ↻ less likely
//! than before, for the same question.

use reverie_agent::{CancelFlag, ChannelSession};
use reverie_core::{Home, MessageRole, SamplingParams, TokenRole, TokenSpan};
use reverie_infer::{Engine, EngineConfig};
use reverie_night::{run_night, NightConfig, TaskKind};
use reverie_store::Store;

/// log p of the reply's own tokens after `prompt`, under `engine`.
fn reply_logprob(engine: &Engine, prompt: &TokenSpan, reply: &TokenSpan) -> f32 {
    let mut ids = prompt.ids.clone();
    ids.extend(&reply.ids);
    let lps = engine.score(&ids).unwrap();
    reply
        .roles
        .iter()
        .enumerate()
        .filter(|(_, r)| **r == TokenRole::Action)
        .map(|(k, _)| lps[prompt.ids.len() + k - 1])
        .sum()
}

#[test]
fn the_kept_reply_rises_and_the_one_taken_back_falls() {
    let dir = tempfile::tempdir().unwrap();
    let home = Home::new(dir.path());
    let model = dir.path().join("tiny.gguf");
    reverie_gguf::synth::write(
        &model,
        &reverie_gguf::synth::SynthConfig::tiny(reverie_gguf::synth::Arch::Qwen2),
    )
    .unwrap();
    let store = Store::open(&home).unwrap();
    let config = EngineConfig {
        slots: 1,
        n_ctx: 1024,
        threads: 2,
        ..EngineConfig::default()
    };
    let engine = Engine::load(&model, config.clone()).unwrap();
    let question = "name a colour";
    let ask = |seed: u32| {
        let mut s = ChannelSession::open(&engine, &store, "work", "You are terse.").unwrap();
        // Untruncated sampling: the recorded log-probs are the model's own.
        let params = SamplingParams {
            temperature: 1.0,
            top_p: 1.0,
            top_k: 0,
            seed,
            max_tokens: 6,
        };
        s.send(question, &params, &CancelFlag::default(), &mut |_| {})
            .unwrap()
    };
    let first = ask(1);
    // ↻: the question and its reply are taken back, then asked again.
    let ch = store.channel_by_name("work").unwrap().unwrap().id;
    store.retract_from(ch, first.user_message).unwrap();
    let mut seed = 2;
    let second = loop {
        let again = ask(seed);
        let kept = store.messages(ch).unwrap();
        let taken = store.retracted_messages(ch).unwrap();
        let text = |ms: &[reverie_core::Message]| {
            ms.iter()
                .rfind(|m| m.role == MessageRole::Assistant)
                .map(|m| m.text.clone())
        };
        if text(&kept) != text(&taken) {
            break again;
        }
        // The same words by chance: ask again until they differ.
        store.retract_from(ch, again.user_message).unwrap();
        seed += 1;
        assert!(seed < 20, "the tiny model keeps saying the same thing");
    };
    let kept = store.messages(ch).unwrap();
    let prompt = {
        let mut p = TokenSpan::default();
        for m in kept.iter().take_while(|m| m.id != second.reply_message) {
            p.append(&m.tokens);
        }
        p
    };
    let kept_reply = kept.last().unwrap().tokens.clone();
    let taken_reply = store
        .retracted_messages(ch)
        .unwrap()
        .into_iter()
        .find(|m| m.id == first.reply_message)
        .unwrap()
        .tokens;
    let before = (
        reply_logprob(&engine, &prompt, &kept_reply),
        reply_logprob(&engine, &prompt, &taken_reply),
    );
    drop(engine);

    let mut cfg = NightConfig {
        n_ctx: 2048,
        retries: 0,
        verify_tasks: 0,
        max_perplexity_regression: 1000.0,
        ..NightConfig::default()
    };
    cfg.train.lora.rank = 4;
    cfg.train.lora.alpha = 8.0;
    cfg.train.optim.lr = 5e-3;
    cfg.train.optim.warmup_steps = 1;
    // The preference alone: no imitation of the question, and a log-ratio
    // scale at which a few steps on a tiny model can show it.
    cfg.train.loss.lambda_user = 0.0;
    cfg.train.loss.lambda_env = 0.0;
    cfg.train.loss.beta2 = 0.05;
    let out = run_night(
        &home,
        &store,
        &model,
        &cfg,
        &CancelFlag::default(),
        &mut |_| {},
    )
    .unwrap();
    let group: Vec<_> = out
        .report
        .tasks
        .iter()
        .filter(|t| t.kind == TaskKind::Preference)
        .collect();
    assert_eq!(group.len(), 2, "{:?}", out.report.tasks);
    assert_eq!((group[0].reward, group[1].reward), (1.0, 0.0));
    assert!(group[0].taken_back.is_empty() && !group[1].taken_back.is_empty());
    let deployed = out.deployed.unwrap_or_else(|| {
        panic!(
            "the night deployed nothing: {:?}",
            out.kept_reason.or(out.report.error)
        )
    });
    let trained = Engine::load(&deployed, config).unwrap();
    let after = (
        reply_logprob(&trained, &prompt, &kept_reply),
        reply_logprob(&trained, &prompt, &taken_reply),
    );
    eprintln!("log p of (kept, taken back): {before:?} before, {after:?} after");
    assert!(
        after.0 > before.0 && after.1 < before.1,
        "kept {:.3} → {:.3}, taken back {:.3} → {:.3}; advantages {:?}, losses {:?}",
        before.0,
        after.0,
        before.1,
        after.1,
        out.report.advantages,
        out.report.train.as_ref().map(|t| &t.losses)
    );
}
