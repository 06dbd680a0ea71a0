//! The night's training set: each sub-task's recorded tokens with its
//! advantage, the per-token marks (a stray end of turn, a call repeated to
//! no effect) and the value model's answers. The reviewer's token view
//! shows the marks this module computes, so what is shown is what trains.

use std::collections::HashMap;

use reverie_core::{ChannelId, Message, MessageId, MessageRole, TokenRole, TokenSpan};
use reverie_store::Store;
use reverie_train::data::{Segment, Sequence};

use crate::config::NightConfig;
use crate::error::NightError;
use crate::judge::JudgedTask;
use crate::value::Prediction;

/// Training sequences: each judged sub-task is its channel's recorded tokens
/// up to the sub-task's last message, with earlier replies demoted to
/// context (the advantage belongs to this sub-task's actions only); the
/// token that ended a turn by mistake is marked, and so is every token of
/// a call that repeated the one before it to no effect. Each value
/// prediction is a sequence rewarded for the accuracy of the grade it
/// wrote; the attempts of one practice task share one prediction, which
/// becomes one sequence rewarded by its mean accuracy over them (one copy
/// per attempt cost a pass each and weighed a task by its attempt count).
/// A reply the person took back trains as the transcript up to its
/// question followed by its own recorded tokens. The trainer computes no
/// image embeddings: a sub-task whose own messages show an image is left
/// out, and earlier messages that showed one leave its context.
pub fn sequences(
    store: &Store,
    tasks: &[JudgedTask],
    preds: &[Option<Prediction>],
    advs: &[Option<f32>],
    cfg: &NightConfig,
) -> Result<Vec<Sequence>, NightError> {
    let mut out = Vec::new();
    // Value answer tokens → (its sequence in `out`, sum and count of accuracies).
    let mut answers: HashMap<&[i32], (usize, f32, f32)> = HashMap::new();
    // Each channel's sub-task sequences, (channel, index in `out`), in order.
    let mut of_channels: Vec<(i64, usize)> = Vec::new();
    for ((task, pred), adv) in tasks.iter().zip(preds).zip(advs) {
        let Some(adv) = adv else { continue };
        let mut msgs = store.messages(ChannelId(task.channel))?;
        if !task.taken_back.is_empty() {
            // The transcript up to the question, then the reply taken back.
            let taken = store.retracted_messages(ChannelId(task.channel))?;
            msgs.truncate(task.first);
            msgs.extend(
                taken
                    .into_iter()
                    .filter(|m| task.taken_back.contains(&m.id.0)),
            );
        }
        let last = if task.taken_back.is_empty() {
            task.last
        } else {
            msgs.len() - 1
        };
        let flags = MessageFlags::of(store, ChannelId(task.channel))?;
        let mut span = TokenSpan::default();
        let mut marks = Vec::new();
        // Where the sub-task's first user message lies in `span`.
        let mut head = 0..0;
        // What the model saw for the sub-task's end: from the live start (a
        // compacted channel's fresh system message, an API conversation
        // whose prompt was rendered again) at or before its last message.
        let start = reverie_core::live_start(&msgs[..=last.min(msgs.len().saturating_sub(1))]);
        for (i, m) in msgs.iter().enumerate().take(last + 1).skip(start) {
            if i >= task.first && head.is_empty() && m.role == MessageRole::User {
                head = span.len()..span.len() + m.tokens.len();
            }
            if i < task.first && reverie_core::has_images(&m.tokens.ids) {
                // Earlier context that showed an image is left out, as a
                // long context's middle is (`cut`).
                continue;
            }
            let mut s = m.tokens.clone();
            if task.checked && !cfg.practice_echo {
                // No world-model targets in a practice episode.
                for r in s.roles.iter_mut() {
                    if matches!(r, TokenRole::Env | TokenRole::User) {
                        *r = TokenRole::Context;
                    }
                }
            }
            if i < task.first {
                for r in s.roles.iter_mut().filter(|r| **r == TokenRole::Action) {
                    *r = TokenRole::Context;
                }
            } else {
                let at = span.len();
                let of_message = message_marks(&msgs, i, &flags, cfg);
                marks.extend(of_message.into_iter().map(|(k, a)| (at + k, a)));
            }
            span.append(&s);
        }
        let (span, marks) = cut(span, marks, head, cfg.max_train_tokens);
        if reverie_core::has_images(&span.ids) {
            // The trainer reads token ids only; an image's positions stand
            // for embeddings it cannot compute, so the sub-task waits.
            tracing::info!(
                channel = task.channel,
                "a sub-task that shows the model an image is not trained on"
            );
        } else if span.len() >= 2 && span.count(TokenRole::Action) > 0 {
            if task.taken_back.is_empty() {
                of_channels.push((task.channel, out.len()));
            }
            out.push(Sequence {
                ids: span.ids,
                roles: span.roles,
                advantage: *adv,
                reward: None,
                group: None,
                token_advantages: marks,
                earlier: vec![],
            });
        }
        if let Some(p) = pred.as_ref().filter(|p| p.tokens.len() >= 2) {
            let accuracy = 1.0 - (p.answered() - task.reward).abs();
            let (at, sum, n) = answers.entry(&p.tokens.ids).or_insert_with(|| {
                out.push(Sequence {
                    ids: p.tokens.ids.clone(),
                    roles: p.tokens.roles.clone(),
                    advantage: 0.0,
                    reward: None,
                    group: Some("value-model".into()),
                    token_advantages: vec![],
                    earlier: vec![],
                });
                (out.len() - 1, 0.0, 0.0)
            });
            *sum += accuracy;
            *n += 1.0;
            out[*at].reward = Some(*sum / *n);
        }
    }
    Ok(fold_channels(out, &of_channels))
}

/// Folds each sub-task's sequence into the next one of its channel when
/// that one begins with all of its tokens (the usual case: the next
/// sub-task's context is this one), as an earlier sub-task with its own
/// actions and advantage. The log-probs and the policy loss are those of
/// the separate sequences; the shared context is computed once instead of
/// once per later sub-task (on a simulated day's night, 3.3× fewer
/// tokens). `sub_tasks` lists (channel, index in `seqs`) in each
/// channel's order.
fn fold_channels(seqs: Vec<Sequence>, sub_tasks: &[(i64, usize)]) -> Vec<Sequence> {
    let mut seqs: Vec<Option<Sequence>> = seqs.into_iter().map(Some).collect();
    for pair in sub_tasks.windows(2) {
        let [(channel, a), (next_channel, b)] = [pair[0], pair[1]];
        let fits = |s: &Option<Sequence>, t: &Option<Sequence>| match (s, t) {
            (Some(s), Some(t)) => t.ids.len() > s.ids.len() && t.ids.starts_with(&s.ids),
            _ => false,
        };
        if channel != next_channel || !fits(&seqs[a], &seqs[b]) {
            continue;
        }
        let (Some(earlier), Some(later)) = (seqs[a].take(), seqs[b].as_mut()) else {
            continue;
        };
        let end = earlier.ids.len();
        // The later sequence saw the earlier actions as context.
        later.roles[..end].copy_from_slice(&earlier.roles);
        let mut marks = earlier.token_advantages;
        marks.append(&mut later.token_advantages);
        marks.sort_by_key(|m| m.0);
        later.token_advantages = marks;
        later.earlier = earlier.earlier;
        later.earlier.push(Segment {
            end,
            advantage: earlier.advantage,
        });
    }
    seqs.into_iter().flatten().collect()
}

/// `span` (with its per-token `marks`) cut to at most `max` tokens: the
/// tokens of `head` (the sub-task's first user message, at most half of
/// `max`) and then the span's last tokens, so that the question and the
/// end of the work that answered it both stay.
pub fn cut(
    span: TokenSpan,
    marks: Vec<(usize, f32)>,
    head: std::ops::Range<usize>,
    max: usize,
) -> (TokenSpan, Vec<(usize, f32)>) {
    let n = span.len();
    if n <= max || max == 0 {
        return (span, marks);
    }
    let head = head.start..head.end.min(head.start + max / 2).min(n);
    let tail_from = n - (max - head.len());
    let head = head.start..head.end.min(tail_from);
    let idx: Vec<usize> = head.clone().chain(tail_from..n).collect();
    let out = TokenSpan {
        ids: idx.iter().map(|&k| span.ids[k]).collect(),
        roles: idx.iter().map(|&k| span.roles[k]).collect(),
        logprobs: idx.iter().map(|&k| span.logprobs[k]).collect(),
    };
    let marks = marks
        .into_iter()
        .filter_map(|(k, a)| match k {
            _ if head.contains(&k) => Some((k - head.start, a)),
            _ if k >= tail_from => Some((k - tail_from + head.len(), a)),
            _ => None,
        })
        .collect();
    (out, marks)
}

/// What the store recorded about a channel's messages that marks tokens.
#[derive(Debug, Clone, Default)]
pub struct MessageFlags {
    /// Replies the agent said it did not mean to end.
    pub unintended_ends: Vec<MessageId>,
    /// Replies whose every call repeated an earlier call to no effect.
    pub repeating_calls: Vec<MessageId>,
}

impl MessageFlags {
    pub fn of(
        store: &Store,
        channel: ChannelId,
    ) -> Result<MessageFlags, reverie_store::StoreError> {
        Ok(MessageFlags {
            unintended_ends: store.unintended_ends(channel)?,
            repeating_calls: store.replies_repeating_calls(channel)?,
        })
    }
}

/// The per-token advantages training gives message `i` of a channel's
/// `msgs` inside a sub-task, as (token index in the message, advantage):
/// the token that ended a turn by mistake, and every action token of a
/// call that repeated the call just before it to no effect. The night
/// trains with these marks and the reviewer shows them.
pub fn message_marks(
    msgs: &[Message],
    i: usize,
    flags: &MessageFlags,
    cfg: &NightConfig,
) -> Vec<(usize, f32)> {
    let tokens = &msgs[i].tokens;
    if flags.unintended_ends.contains(&msgs[i].id) && !tokens.is_empty() {
        // The token that ended the turn too early.
        return vec![(tokens.len() - 1, cfg.stray_end_advantage)];
    }
    if !repeats_the_call_before(msgs, i, &flags.repeating_calls) {
        return Vec::new();
    }
    // The whole call, not just its first token: a mark on the first token
    // alone taught the model to open the same call with another token (a
    // ```json fence instead of the tag).
    let action: Vec<usize> = (0..tokens.len())
        .filter(|&k| tokens.roles[k] == TokenRole::Action)
        .collect();
    let each = cfg.repeated_call_advantage / action.len().max(1) as f32;
    action.into_iter().map(|k| (k, each)).collect()
}

/// Whether assistant message `i` is a call that repeated the turn's call
/// just before it to no effect: the store recorded every call of it as a
/// repeat (`repeating`), and the reply before it in the turn has the same
/// text.
fn repeats_the_call_before(msgs: &[Message], i: usize, repeating: &[MessageId]) -> bool {
    let is_reply = |m: &Message| m.role == MessageRole::Assistant;
    if !is_reply(&msgs[i]) || !repeating.contains(&msgs[i].id) {
        return false;
    }
    let before = msgs[..i]
        .iter()
        .rev()
        .take_while(|m| matches!(m.role, MessageRole::Tool | MessageRole::Assistant))
        .find(|m| is_reply(m));
    before.is_some_and(|b| b.text.trim() == msgs[i].text.trim())
}

#[cfg(test)]
mod tests {
    use super::{cut, sequences};
    use crate::config::NightConfig;
    use crate::judge::JudgedTask;
    use reverie_core::{Home, MessageRole, TokenRole, TokenSpan};
    use reverie_store::Store;
    use reverie_train::data::Sequence;

    #[test]
    fn a_long_sub_task_keeps_its_first_user_message_and_its_end() {
        let mut span = TokenSpan::default();
        let roles = [TokenRole::Context, TokenRole::User, TokenRole::Action];
        for k in 0..100 {
            // 0..10 system, 10..20 the question, then the work.
            let role = roles[usize::from(k >= 10) + usize::from(k >= 20)];
            span.push(k, role, None);
        }
        let marks = vec![(5, -1.0), (15, -1.0), (50, -1.0), (95, -1.0)];
        let (short, kept) = cut(span.clone(), marks.clone(), 10..20, 30);
        assert_eq!(short.len(), 30);
        assert!(short.is_consistent());
        let want: Vec<i32> = (10..20).chain(80..100).collect();
        assert_eq!(short.ids, want, "the question, then the last 20 tokens");
        assert_eq!(short.roles[0], TokenRole::User);
        assert_eq!(
            kept,
            vec![(5, -1.0), (25, -1.0)],
            "marks follow their tokens"
        );
        // Short enough: untouched.
        let (same, same_marks) = cut(span.clone(), marks.clone(), 10..20, 100);
        assert_eq!((same.ids, same_marks), (span.ids.clone(), marks));
        // A question longer than half the budget keeps its start.
        let (short, _) = cut(span, vec![], 0..90, 30);
        let want: Vec<i32> = (0..15).chain(85..100).collect();
        assert_eq!(short.ids, want);
    }

    /// `ids` all of `role`, actions with a log-prob.
    fn span(ids: &[i32], role: TokenRole) -> TokenSpan {
        let mut s = TokenSpan::default();
        for &i in ids {
            s.push(i, role, (role == TokenRole::Action).then_some(-0.5));
        }
        s
    }

    /// A judged sub-task of `channel` from message `first` to `last`.
    fn judged(channel: i64, first: usize, last: usize) -> JudgedTask {
        JudgedTask {
            channel,
            description: "t".into(),
            first,
            last,
            turns: 1,
            reward: 1.0,
            reason: String::new(),
            group: None,
            checked: false,
            kind: crate::judge::TaskKind::Judged,
            judged: None,
            feedback: None,
            evidence: Vec::new(),
            taken_back: Vec::new(),
        }
    }

    #[test]
    fn a_sub_task_that_shows_an_image_is_left_out() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&Home::new(dir.path())).unwrap();
        let ch = store.create_channel("c").unwrap();
        let image = reverie_core::image_token(1);
        let msgs = [
            (MessageRole::User, vec![2, 3], TokenRole::User),
            (MessageRole::Assistant, vec![4], TokenRole::Action),
            (MessageRole::Tool, vec![5, image, image], TokenRole::Env),
            (MessageRole::Assistant, vec![8, 9], TokenRole::Action),
            (MessageRole::User, vec![10], TokenRole::User),
            (MessageRole::Assistant, vec![11], TokenRole::Action),
        ];
        for (role, ids, r) in &msgs {
            store
                .append_message(ch, *role, "m", &span(ids, *r))
                .unwrap();
        }
        let seqs = sequences(
            &store,
            &[judged(ch.0, 0, 3), judged(ch.0, 4, 5)],
            &[None, None],
            &[Some(0.5), Some(0.5)],
            &NightConfig::default(),
        )
        .unwrap();
        // The first sub-task saw the image; the second trains without the
        // message that showed it.
        assert_eq!(seqs.len(), 1, "{seqs:?}");
        assert_eq!(seqs[0].ids, vec![2, 3, 4, 8, 9, 10, 11]);
    }

    #[test]
    fn a_channels_sub_tasks_train_as_one_sequence_unless_one_was_cut() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&Home::new(dir.path())).unwrap();
        let ch = store.create_channel("c").unwrap();
        let msgs = [
            (MessageRole::User, vec![1, 2], TokenRole::User),
            (MessageRole::Assistant, vec![3, 4], TokenRole::Action),
            (MessageRole::User, vec![5], TokenRole::User),
            (MessageRole::Assistant, vec![6, 7], TokenRole::Action),
        ];
        for (role, ids, r) in &msgs {
            store
                .append_message(ch, *role, "m", &span(ids, *r))
                .unwrap();
        }
        let other = store.create_channel("other").unwrap();
        store
            .append_message(
                other,
                MessageRole::User,
                "m",
                &span(&[1, 2], TokenRole::User),
            )
            .unwrap();
        store
            .append_message(
                other,
                MessageRole::Assistant,
                "m",
                &span(&[3, 4, 9], TokenRole::Action),
            )
            .unwrap();
        let tasks = [
            judged(ch.0, 0, 1),
            judged(ch.0, 2, 3),
            judged(other.0, 0, 1),
        ];
        let advs = [Some(0.5), Some(-0.5), Some(0.25)];
        let seqs = sequences(
            &store,
            &tasks,
            &[None, None, None],
            &advs,
            &NightConfig::default(),
        )
        .unwrap();
        assert_eq!(seqs.len(), 2, "{seqs:?}");
        let one = &seqs[0];
        assert_eq!(one.ids, vec![1, 2, 3, 4, 5, 6, 7]);
        use TokenRole::{Action, User};
        assert_eq!(
            one.roles,
            vec![User, User, Action, Action, User, Action, Action],
            "the first sub-task's actions are actions again"
        );
        assert_eq!(
            one.segments(),
            vec![(0..4, 0.5), (4..7, -0.5)],
            "each sub-task keeps its own advantage"
        );
        // Another channel that begins with the same tokens stays apart.
        assert_eq!(seqs[1].ids, vec![1, 2, 3, 4, 9]);
        assert!(seqs[1].earlier.is_empty());

        // A later sub-task cut to fit no longer holds the earlier one whole.
        let short = NightConfig {
            max_train_tokens: 5,
            ..NightConfig::default()
        };
        let seqs = sequences(&store, &tasks[..2], &[None, None], &advs[..2], &short).unwrap();
        assert_eq!(seqs.len(), 2, "{seqs:?}");
        assert!(seqs.iter().all(|s| s.earlier.is_empty()));
    }

    #[test]
    fn a_compacted_channel_trains_on_what_followed_its_fresh_system_prompt() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&Home::new(dir.path())).unwrap();
        let ch = store.create_channel("c").unwrap();
        let msgs = [
            (MessageRole::System, vec![1], TokenRole::Context),
            (MessageRole::User, vec![2, 3], TokenRole::User),
            (MessageRole::Assistant, vec![4], TokenRole::Action),
            // Compacted: a fresh system prompt with the summary.
            (MessageRole::System, vec![5, 6], TokenRole::Context),
            (MessageRole::User, vec![7], TokenRole::User),
            (MessageRole::Assistant, vec![8, 9], TokenRole::Action),
        ];
        for (role, ids, r) in &msgs {
            store
                .append_message(ch, *role, "m", &span(ids, *r))
                .unwrap();
        }
        assert_eq!(
            store.context_tokens(ch).unwrap(),
            5,
            "the meter counts the live context"
        );
        let task = judged(ch.0, 4, 5);
        let seqs = sequences(
            &store,
            std::slice::from_ref(&task),
            &[None],
            &[Some(0.5)],
            &NightConfig::default(),
        )
        .unwrap();
        assert_eq!(
            seqs[0].ids,
            vec![5, 6, 7, 8, 9],
            "what the model saw, no more"
        );
        // A sub-task that spans the fresh start trains on what the model
        // saw for its end.
        let spanning = JudgedTask {
            first: 1,
            ..task.clone()
        };
        let seqs = sequences(
            &store,
            &[spanning],
            &[None],
            &[Some(0.5)],
            &NightConfig::default(),
        )
        .unwrap();
        assert_eq!(seqs[0].ids, vec![5, 6, 7, 8, 9]);
    }

    #[test]
    fn an_unintended_end_marks_its_last_token() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&Home::new(dir.path())).unwrap();
        let ch = store.create_channel("c").unwrap();
        store
            .append_message(
                ch,
                MessageRole::User,
                "q",
                &span(&[1, 2, 3], TokenRole::User),
            )
            .unwrap();
        let early = store
            .append_message(
                ch,
                MessageRole::Assistant,
                "Here:",
                &span(&[4, 5], TokenRole::Action),
            )
            .unwrap();
        store
            .append_message(ch, MessageRole::User, "?", &span(&[6], TokenRole::Warning))
            .unwrap();
        store
            .append_message(
                ch,
                MessageRole::Assistant,
                "no",
                &span(&[7, 8], TokenRole::Action),
            )
            .unwrap();
        store.record_stray_end(early, true).unwrap();
        let task = judged(ch.0, 0, 3);
        let seqs = sequences(
            &store,
            &[task],
            &[None],
            &[Some(0.5)],
            &NightConfig::default(),
        )
        .unwrap();
        assert_eq!(seqs.len(), 1);
        // ids 1 2 3 4 5 6 7 8: the reply [4, 5] ended at position 4
        assert_eq!(seqs[0].token_advantages, vec![(4, -1.0)]);
        assert_eq!(seqs[0].ids[4], 5);
    }

    #[test]
    fn a_value_answer_shared_by_attempts_is_one_sequence_with_their_mean_accuracy() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&Home::new(dir.path())).unwrap();
        let made = std::cell::Cell::new(0);
        let attempt = |reward| {
            made.set(made.get() + 1);
            let ch = store
                .create_channel(&format!("attempt {}", made.get()))
                .unwrap();
            let mut s = TokenSpan::default();
            s.push(1, TokenRole::User, None);
            store
                .append_message(ch, MessageRole::User, "q", &s)
                .unwrap();
            JudgedTask {
                description: "practice: q".into(),
                reward,
                group: Some("q".into()),
                checked: true,
                kind: crate::judge::TaskKind::Practice,
                ..judged(ch.0, 0, 0)
            }
        };
        let answer = |ids: &[i32], answered| {
            let mut tokens = TokenSpan::default();
            for &i in ids {
                tokens.push(i, TokenRole::Action, Some(-0.1));
            }
            Some(crate::value::Prediction {
                reward: 0.5,
                turns: 1,
                tokens,
                answered: Some(answered),
            })
        };
        let tasks = [attempt(1.0), attempt(0.0), attempt(0.0), attempt(1.0)];
        let shared = answer(&[7, 8, 9], 0.25);
        let preds = [
            shared.clone(),
            shared.clone(),
            shared,
            answer(&[7, 8, 10], 1.0),
        ];
        let seqs = sequences(
            &store,
            &tasks,
            &preds,
            &[Some(0.0); 4],
            &NightConfig::default(),
        )
        .unwrap();
        let value: Vec<&Sequence> = seqs
            .iter()
            .filter(|s| s.group.as_deref() == Some("value-model"))
            .collect();
        assert_eq!(value.len(), 2, "{seqs:?}");
        assert_eq!(value[0].ids, [7, 8, 9]);
        // Accuracies 0.25, 0.75 and 0.75 for the grade 0.25.
        assert!((value[0].reward.unwrap() - 1.75 / 3.0).abs() < 1e-6);
        assert_eq!(value[1].reward, Some(1.0));
    }

    #[test]
    fn a_call_repeated_to_no_effect_shares_its_mark_over_the_call() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&Home::new(dir.path())).unwrap();
        let ch = store.create_channel("c").unwrap();
        // Each message: [context token, action tokens...] so the mark must
        // skip the scaffolding.
        let mut next = 0;
        let mut add = |role: MessageRole, text: &str, n_action: usize| {
            let mut s = TokenSpan::default();
            let tok_role = match role {
                MessageRole::User => TokenRole::User,
                MessageRole::Tool => TokenRole::Env,
                _ => TokenRole::Context,
            };
            s.push(next, tok_role, None);
            next += 1;
            for _ in 0..n_action {
                s.push(next, TokenRole::Action, Some(-0.5));
                next += 1;
            }
            store.append_message(ch, role, text, &s).unwrap()
        };
        // A reply's call as the agent records it; `repeated`: the turn
        // already made it with the same result.
        let called = |reply, repeated: bool| {
            store
                .record_tool_call(reply, "call_1", "calculator", "{}")
                .unwrap();
            store
                .finish_tool_call(reply, "call_1", true, "2+2 = 4")
                .unwrap();
            if repeated {
                store.mark_repeated_call(reply, "call_1").unwrap();
            }
        };
        let call = r#"{"name": "calculator", "arguments": {"expression": "2+2"}}"#;
        let hint = "2+2 = 4\n\n(Same call and result as earlier in this turn: use it and answer.)";
        add(MessageRole::User, "2+2?", 0); // 0
        let first = add(MessageRole::Assistant, call, 2); // 1 2 3
        called(first, false);
        add(MessageRole::Tool, "2+2 = 4", 0); // 4
        let again = add(MessageRole::Assistant, call, 2); // 5 6 7: repeated, marked at 6 and 7
        called(again, true);
        add(MessageRole::Tool, hint, 0); // 8
        add(
            MessageRole::Assistant,
            r#"{"name": "list_files", "arguments": {}}"#,
            2,
        ); // 9 10 11
        add(MessageRole::Tool, "(empty)", 0); // 12
        let later = add(MessageRole::Assistant, call, 2); // 13 14 15: not the call just before, not marked
        called(later, true);
        add(MessageRole::Tool, hint, 0); // 16
        add(MessageRole::Assistant, "4", 1); // 17 18
        let task = judged(ch.0, 0, 10);
        let cfg = NightConfig {
            repeated_call_advantage: -0.7,
            ..NightConfig::default()
        };
        let seqs = sequences(
            &store,
            std::slice::from_ref(&task),
            &[None],
            &[Some(0.5)],
            &cfg,
        )
        .unwrap();
        assert_eq!(seqs[0].token_advantages, vec![(6, -0.35), (7, -0.35)]);
        let roles = |seq: &Sequence, role| seq.roles.iter().filter(|&&r| r == role).count();
        assert_eq!(
            (
                roles(&seqs[0], TokenRole::Env),
                roles(&seqs[0], TokenRole::User)
            ),
            (4, 1)
        );

        // Without ECHO on practice, a practice episode trains the policy
        // only: its tool results and prompts are context.
        let checked = JudgedTask {
            checked: true,
            ..task
        };
        let no_echo = NightConfig {
            practice_echo: false,
            ..cfg.clone()
        };
        let policy_only = sequences(
            &store,
            std::slice::from_ref(&checked),
            &[None],
            &[Some(0.5)],
            &no_echo,
        )
        .unwrap();
        assert_eq!(policy_only[0].ids, seqs[0].ids);
        assert_eq!(roles(&policy_only[0], TokenRole::Env), 0);
        assert_eq!(roles(&policy_only[0], TokenRole::User), 0);
        assert_eq!(
            roles(&policy_only[0], TokenRole::Action),
            roles(&seqs[0], TokenRole::Action)
        );
        let echo = NightConfig {
            practice_echo: true,
            ..cfg
        };
        let with_echo = sequences(&store, &[checked], &[None], &[Some(0.5)], &echo).unwrap();
        assert_eq!(with_echo[0].roles, seqs[0].roles);
    }
}
