//! The verdict judge, the night's default: sub-tasks are cut from the
//! record, not guessed, and each one is judged on its own with a single
//! question the small model can answer.
//!
//! A person's message opens a sub-task; the assistant's last message before
//! the person writes again closes it (harness notices open nothing). The
//! judge is shown that one request in full, what the assistant did (its
//! calls and their results, the harness's notices), its final answer, the
//! files it changed as they were when it answered, and the calculator's
//! checks; it is asked "is the final answer right?", and the reward is the
//! probability of "yes" against "no" under its own logits at the first
//! token of its reply. A sub-task whose failure the record proves (a file
//! asked to change that no tool changed, an error message for an answer:
//! `crate::verifier`) gets 0 without asking. Asked to split a window into sub-tasks and grade
//! each as JSON, the default model left a third of the requests uncovered
//! and its grades disagreed with the hidden checks more often than chance
//! (`reverie bench judge`).

use std::collections::BTreeMap;

use reverie_core::MessageRole;
use reverie_infer::{ChatMessage, Engine, Transcript};

use crate::judge::{Asked, JudgeOptions, JudgedTask, Judgement, Numbered, TaskKind, Window};

const PROMPT: &str = include_str!("../../../assets/prompts/verdict.md");

/// The question the reward is read from.
const IS_RIGHT: &str = "Is the final answer correct, and does it do exactly what the user asked, in the form they asked for? Work it out yourself where you can. If the assistant got stuck, answered something else, copied an example instead of doing the work, or did not do the task, the answer is no. Reply with one word: yes or no.";
/// The same question the other way round: a small model says "yes" to
/// most questions, so asked both ways, its leaning cancels out.
/// The question as a grade.
const GRADE: &str = "Grade the final answer from 0 to 10: 0 if it is wrong, the assistant got stuck, answered something else, copied an example instead of doing the work, or did not do the task; 10 if it is correct and does exactly what the user asked, in the form they asked for. Work it out yourself where you can. Answer with JSON: {\"reward\": N}.";
const IS_WRONG: &str = "Is the final answer wrong, or does it fail to do exactly what the user asked, in the form they asked for? Work it out yourself where you can. If the assistant got stuck, answered something else, copied an example instead of doing the work, or did not do the task, the answer is yes. Reply with one word: yes or no.";

/// Characters of the request and of the final answer shown.
const LONG: usize = 3000;
/// Characters of each step (a call, a result, a notice) shown.
const STEP: usize = 500;
/// Steps shown at most: the first and the last ones, the middle elided.
const MAX_STEPS: usize = 10;
/// Characters of each earlier message shown as context.
const CONTEXT: usize = 300;
/// The person's earlier messages shown as context, at most.
const CONTEXT_MESSAGES: usize = 6;
/// Characters of each changed file shown.
const FILE: usize = 1500;

/// A sub-task's place in its channel: the request and the final answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Span {
    pub first: usize,
    pub last: usize,
}

/// The sub-tasks of a channel's `messages` (numbered, in order): each
/// message of the person (not in `harness`) opens one, which closes on the
/// last assistant message before the person's next message. A request the
/// assistant never answered is no sub-task.
pub fn spans(messages: &[Numbered], harness: &dyn Fn(usize) -> bool) -> Vec<Span> {
    let mut out = Vec::new();
    let mut open: Option<usize> = None;
    let mut answered: Option<usize> = None;
    let mut close = |open: Option<usize>, answered: Option<usize>| {
        if let (Some(first), Some(last)) = (open, answered) {
            out.push(Span { first, last });
        }
    };
    for (i, role, _) in messages {
        match role {
            MessageRole::User if !harness(*i) => {
                close(open, answered);
                open = Some(*i);
                answered = None;
            }
            MessageRole::Assistant if open.is_some() => answered = Some(*i),
            _ => {}
        }
    }
    close(open, answered);
    out
}

/// How much steeper than the logits the judge's reading asked both ways
/// is made. Averaged both ways, the default model's probability lies
/// within 0.45–0.58 for right and wrong answers alike (it ranks them well,
/// AUC 0.79, but says so faintly), which made the judge's part of a
/// reward smaller than the value model's noise about it. A logistic fit of
/// the hidden checks of 80 simulated requests (`reverie bench judge`) on
/// the reading's log-odds gave a slope of 9.1: 0.45 becomes 0.14 and 0.55
/// becomes 0.86, 0.5 stays the point of "right" and the order is kept.
pub const BOTH_WAYS_SHARPNESS: f32 = 9.0;

/// `p` with its log-odds multiplied by [`BOTH_WAYS_SHARPNESS`].
pub fn sharpened(p: f32) -> f32 {
    let p = p.clamp(1e-6, 1.0 - 1e-6);
    let logit = (p / (1.0 - p)).ln() * BOTH_WAYS_SHARPNESS;
    1.0 / (1.0 + (-logit).exp())
}

/// Files the assistant changed during one sub-task, as they were when it
/// answered: (path, text or why it cannot be shown).
pub type ChangedFiles = Vec<(String, String)>;

/// Judges every sub-task of `w` whose final answer lies in the window.
pub fn judge(engine: &Engine, w: &Window, options: JudgeOptions) -> Result<Judgement, String> {
    let (lo, hi) = match (w.messages.first(), w.messages.last()) {
        (Some(a), Some(b)) => (a.0, b.0),
        _ => return Err("empty window".into()),
    };
    let all = &w.channel_messages;
    let harness = |i: usize| w.harness.contains(&i);
    let mut judgement = Judgement {
        tasks: Vec::new(),
        written: Vec::new(),
        requests: Vec::new(),
    };
    for span in spans(all, &harness)
        .into_iter()
        .filter(|s| (lo..=hi).contains(&s.last))
    {
        let mut shown = Shown::of(w, span, options);
        let (proven, succeeded) = if options.verify {
            proven(w, span)
        } else {
            (Vec::new(), false)
        };
        let (p, written) = match options.asked {
            _ if succeeded => (1.0, 1.0),
            _ if !proven.is_empty() => (0.0, 0.0),
            Asked::Right => {
                let p = yes_probability(engine, &shown.ask(IS_RIGHT))?;
                (p, if p >= 0.5 { 1.0 } else { 0.0 })
            }
            Asked::BothWays => {
                let right = yes_probability(engine, &shown.ask(IS_RIGHT))?;
                let wrong = yes_probability(engine, &shown.ask(IS_WRONG))?;
                let p = sharpened((right + 1.0 - wrong) / 2.0);
                (p, if p >= 0.5 { 1.0 } else { 0.0 })
            }
            Asked::Grade => grade(engine, &shown.ask(GRADE))?,
        };
        judgement.written.push(written);
        judgement.tasks.push(JudgedTask {
            channel: w.channel.0,
            description: shown.description,
            first: span.first,
            last: span.last,
            turns: crate::judge::counted_turns(
                all.iter().map(|m| (m.0, m.1)),
                span.first,
                span.last,
            ),
            reward: p,
            reason: match proven.first() {
                Some(why) => format!(
                    "{}, proven from the record without asking the judge: {}",
                    if succeeded { "done" } else { "not done" },
                    why.trim_start_matches("[verified] ")
                ),
                None => format!(
                    "right with probability {:.0}% by the judge's logits",
                    p * 100.0
                ),
            },
            group: None,
            checked: false,
            kind: TaskKind::Judged,
            judged: None,
            feedback: None,
            evidence: {
                shown.evidence.splice(0..0, proven);
                shown.evidence
            },
            taken_back: Vec::new(),
        });
    }
    if judgement.tasks.is_empty() {
        return Err("no request was answered inside the window".into());
    }
    Ok(judgement)
}

/// What the judge is shown of one sub-task.
struct Shown {
    /// The prompt but its question.
    prompt: String,
    description: String,
    /// What it was shown beyond the messages: checks, notices, files.
    evidence: Vec<String>,
}

/// `text` cut to `max` characters, saying how much was left out.
pub(crate) fn cut(text: &str, max: usize) -> String {
    let total = text.chars().count();
    if total <= max {
        return text.trim().to_string();
    }
    let shown: String = text.chars().take(max).collect();
    format!("{} … [{} more characters]", shown.trim_end(), total - max)
}

impl Shown {
    fn ask(&self, question: &str) -> String {
        self.prompt.replace("{{question}}", question)
    }

    fn of(w: &Window, span: Span, options: JudgeOptions) -> Shown {
        let all = &w.channel_messages;
        let text = |i: usize| all.iter().find(|m| m.0 == i).map_or("", |m| m.2.as_str());
        // The person's earlier messages (a fact to recall may be in one)
        // and the answer just before this request.
        let mut before: Vec<&Numbered> = all
            .iter()
            .filter(|(i, r, _)| {
                *i < span.first && *r == MessageRole::User && !w.harness.contains(i)
            })
            .collect();
        before.drain(..before.len().saturating_sub(CONTEXT_MESSAGES));
        let previous = all
            .iter()
            .rfind(|(i, r, _)| *i < span.first && *r == MessageRole::Assistant);
        before.extend(previous);
        before.sort_by_key(|m| m.0);
        let context: Vec<String> = before
            .iter()
            .map(|(i, r, t)| format!("[{i}] {}: {}", r.as_str(), cut(t, CONTEXT)))
            .collect();
        let inside: Vec<&Numbered> = all
            .iter()
            .filter(|m| m.0 > span.first && m.0 < span.last)
            .collect();
        let mut evidence = Vec::new();
        let mut steps: Vec<String> = inside
            .iter()
            .map(|(i, r, t)| {
                let who = match r {
                    MessageRole::Assistant => "assistant (a tool call or a step)",
                    MessageRole::Tool => "tool result",
                    MessageRole::User if w.harness.contains(i) => "harness notice",
                    _ => r.as_str(),
                };
                if w.harness.contains(i) {
                    evidence.push(format!("[notice {i}] {}", cut(t, 200)));
                }
                format!("[{i}] {who}: {}", cut(t, STEP))
            })
            .collect();
        if steps.len() > MAX_STEPS {
            let left = steps.len() - MAX_STEPS;
            steps.drain(MAX_STEPS / 2..MAX_STEPS / 2 + left);
            steps.insert(MAX_STEPS / 2, format!("… {left} more steps …"));
        }
        let mut checks = if options.checks {
            let msgs = all
                .iter()
                .filter(|m| (span.first..=span.last).contains(&m.0))
                .map(|(i, r, t)| (*i, *r, t.as_str()));
            crate::claims::checks(msgs)
        } else {
            Vec::new()
        };
        if options.checks && options.traces {
            checks.extend(grounding_checks(w, span));
        }
        for (path, content) in w.changed.get(&span.last).into_iter().flatten() {
            checks.push(format!(
                "[file] {path} as it was after the answer:\n{}",
                cut(content, FILE)
            ));
        }
        evidence.extend(checks.iter().cloned());
        let request = text(span.first);
        let description = cut(
            request.lines().find(|l| !l.trim().is_empty()).unwrap_or(""),
            150,
        );
        let or_none = |v: &[String], none: &str| {
            if v.is_empty() {
                none.to_string()
            } else {
                v.join("\n")
            }
        };
        let prompt = PROMPT
            .replace(
                "{{context}}",
                &or_none(&context, "(none: this is the start)"),
            )
            .replace("{{request}}", &cut(request, LONG))
            .replace(
                "{{steps}}",
                &or_none(&steps, "(none: it answered directly)"),
            )
            .replace("{{answer}}", &cut(text(span.last), LONG))
            .replace("{{checks}}", &or_none(&checks, "(nothing to check)"));
        Shown {
            prompt,
            description,
            evidence,
        }
    }
}

/// What the record proves of `span` (`crate::verifier`): its failures, or
/// else its successes; the flag says which the lines are.
fn proven(w: &Window, span: Span) -> (Vec<String>, bool) {
    let all = &w.channel_messages;
    let text = |i: usize| all.iter().find(|m| m.0 == i).map_or("", |m| m.2.as_str());
    let read: Vec<&str> = read_before(w, span).into_iter().map(|(_, t)| t).collect();
    let said_before: Vec<&str> = all
        .iter()
        .filter(|(i, r, _)| *i < span.first && *r == MessageRole::User && !w.harness.contains(i))
        .map(|m| m.2.as_str())
        .collect();
    let files = w.files.as_ref().and_then(|f| f.past.every_file());
    let next = all
        .iter()
        .find(|(i, r, _)| *i > span.last && *r == MessageRole::User && !w.harness.contains(i))
        .map(|m| m.2.as_str());
    // A file a later request of the window changed is not read: the
    // window's workspace is that of its end.
    let changed_later: Vec<&str> = w
        .changed
        .range(span.last + 1..)
        .flat_map(|(_, files)| files.iter().map(|(p, _)| p.as_str()))
        .collect();
    let read_file = |path: &str| {
        let past = &w.files.as_ref()?.past;
        (!changed_later.contains(&path)).then(|| past.read(path).ok())?
    };
    let record = crate::verifier::Record {
        request: text(span.first),
        answer: text(span.last),
        changed: w.changed.get(&span.last).map_or(&[], Vec::as_slice),
        notes_added: w.notes_added.get(&span.last).map_or(&[], Vec::as_slice),
        files: files.as_deref(),
        read: &read,
        said_before: &said_before,
        next,
        read_file: &read_file,
    };
    match crate::verifier::prove(&record) {
        crate::verifier::Proven::Failed(lines) => (lines, false),
        crate::verifier::Proven::Done(lines) => (lines, true),
        crate::verifier::Proven::Nothing => (Vec::new(), false),
    }
}

/// What the assistant had read when it gave `span`'s final answer, each
/// with its label: the span's tool results and the person's earlier
/// messages (harness notices aside).
fn read_before(w: &Window, span: Span) -> Vec<(String, &str)> {
    w.channel_messages
        .iter()
        .filter(|(i, r, _)| match r {
            MessageRole::Tool => (span.first..span.last).contains(i),
            MessageRole::User => *i < span.first && !w.harness.contains(i),
            _ => false,
        })
        .map(|(i, r, t)| {
            let what = if *r == MessageRole::Tool {
                "tool result"
            } else {
                "the person's message"
            };
            (format!("{what} [{i}]"), t.as_str())
        })
        .collect()
}

/// Where the figures of `span`'s final answer come from: the tool results
/// of the span, the person's earlier messages, or the calculator's values of
/// the sums in any message before the answer (harness notices aside).
fn grounding_checks(w: &Window, span: Span) -> Vec<String> {
    let all = &w.channel_messages;
    let text = |i: usize| all.iter().find(|m| m.0 == i).map_or("", |m| m.2.as_str());
    let mut sources = read_before(w, span);
    let sums = crate::claims::values(
        all.iter()
            .filter(|m| m.0 < span.last && !w.harness.contains(&m.0))
            .map(|m| m.2.as_str()),
    )
    .join(" ");
    sources.push(("a calculator value".to_string(), &sums));
    crate::grounding::grounding(text(span.first), text(span.last), &sources)
}

/// The judge's two answers as tokens: what every spelling of both begins
/// with (a SentencePiece word mark, say), then the first token of each
/// spelling of "yes" and of "no".
pub(crate) struct Answers {
    pub shared: Vec<i32>,
    pub yes: Vec<i32>,
    pub no: Vec<i32>,
}

impl Answers {
    pub(crate) fn of(engine: &Engine) -> Result<Answers, String> {
        let spell = |ws: &[&str]| -> Vec<Vec<i32>> {
            ws.iter()
                .map(|w| engine.tokenize(w, false))
                .filter(|t| !t.is_empty())
                .collect()
        };
        let (yes, no) = (spell(&["yes", "Yes", "YES"]), spell(&["no", "No", "NO"]));
        if yes.is_empty() || no.is_empty() {
            return Err("this tokenizer makes no tokens of yes or no".into());
        }
        let all: Vec<&Vec<i32>> = yes.iter().chain(&no).collect();
        let mut shared = Vec::new();
        while let Some(&t) = all[0].get(shared.len()) {
            if all
                .iter()
                .all(|s| s.len() > shared.len() + 1 && s[shared.len()] == t)
            {
                shared.push(t);
            } else {
                break;
            }
        }
        let firsts = |v: &[Vec<i32>]| -> Vec<i32> {
            let mut ids: Vec<i32> = v
                .iter()
                .filter_map(|s| s.get(shared.len()).copied())
                .collect();
            ids.sort_unstable();
            ids.dedup();
            ids
        };
        let (yes, no) = (firsts(&yes), firsts(&no));
        if yes.is_empty() || no.is_empty() || yes.iter().any(|y| no.contains(y)) {
            return Err("this tokenizer does not tell yes from no by its first token".into());
        }
        Ok(Answers { shared, yes, no })
    }
}

/// P("yes") ÷ (P("yes") + P("no")) for the judge's reply to `prompt`,
/// spellings pooled.
fn yes_probability(engine: &Engine, prompt: &str) -> Result<f32, String> {
    let answers = Answers::of(engine)?;
    let mut t = Transcript::default();
    engine
        .extend_transcript(&mut t, &[ChatMessage::new(MessageRole::User, prompt)])
        .map_err(|e| e.to_string())?;
    let mut ids = t.tokens.ids.clone();
    ids.extend(&answers.shared);
    let mut p = None;
    engine
        .visit_logits_at(&ids, &[ids.len() - 1], &mut |_, logits| {
            let mass = |set: &[i32]| -> f64 {
                set.iter()
                    .map(|&id| f64::from(reverie_infer::log_prob(logits, id)).exp())
                    .sum()
            };
            let (y, n) = (mass(&answers.yes), mass(&answers.no));
            p = Some(if y + n > 0.0 { y / (y + n) } else { 0.5 });
        })
        .map_err(|e| e.to_string())?;
    p.map(|p| p as f32)
        .ok_or_else(|| "the judge's logits could not be read".into())
}

/// The expected grade ÷ 10 under the judge's logits and the grade it
/// wrote, for a JSON grade asked by `prompt`.
fn grade(engine: &Engine, prompt: &str) -> Result<(f32, f32), String> {
    let schema = serde_json::json!({
        "type": "object",
        "properties": {"reward": {"type": "integer", "minimum": 0, "maximum": 10}},
        "required": ["reward"],
        "additionalProperties": false
    });
    let (text, span) = crate::judge::ask_json(engine, prompt, schema, 0, 16)?;
    let written = serde_json::from_str::<serde_json::Value>(text.trim())
        .ok()
        .and_then(|v| v["reward"].as_u64())
        .ok_or_else(|| format!("not a grade: {text}"))?
        .min(10) as f32
        / 10.0;
    let expected = crate::grade::expected_grades(engine, &span)
        .first()
        .copied()
        .flatten()
        .unwrap_or(written);
    Ok((expected, written))
}

/// For each sub-task of a channel (keyed by its final answer), the files the
/// assistant changed between the request and the answer, as they were at
/// the answer. `revisions` are (time, changed paths) of the channel's
/// workspace; `times` the messages' times by number; `read(at, path)` reads
/// a path as it was at a time.
pub fn changed_files(
    spans: &[Span],
    times: &dyn Fn(usize) -> i64,
    revisions: &[(i64, Vec<String>)],
    read: &dyn Fn(i64, &str) -> String,
) -> BTreeMap<usize, ChangedFiles> {
    let mut out = BTreeMap::new();
    for s in spans {
        let (from, to) = (times(s.first), times(s.last));
        let mut paths: Vec<&String> = revisions
            .iter()
            .filter(|(t, _)| *t > from && *t <= to)
            .flat_map(|(_, ps)| ps)
            .collect();
        paths.sort();
        paths.dedup();
        if !paths.is_empty() {
            let files = paths
                .into_iter()
                .map(|p| (p.clone(), read(to, p)))
                .collect();
            out.insert(s.last, files);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn msgs(roles: &[MessageRole]) -> Vec<Numbered> {
        roles
            .iter()
            .enumerate()
            .map(|(i, r)| (i + 1, *r, format!("m{}", i + 1)))
            .collect()
    }

    #[test]
    fn spans_open_on_the_persons_messages_and_close_on_the_last_answer() {
        use MessageRole::{Assistant as A, Tool as T, User as U};
        // 1 request, 2 call, 3 result, 4 harness notice, 5 answer,
        // 6 request, 7 answer, 8 request never answered.
        let m = msgs(&[U, A, T, U, A, U, A, U]);
        let harness = |i: usize| i == 4;
        assert_eq!(
            spans(&m, &harness),
            vec![Span { first: 1, last: 5 }, Span { first: 6, last: 7 }]
        );
        // Without the notice marked, it would open a sub-task of its own.
        assert_eq!(spans(&m, &|_| false).len(), 3);
    }

    #[test]
    fn changed_files_are_those_written_between_request_and_answer() {
        let s = [Span { first: 1, last: 3 }, Span { first: 4, last: 5 }];
        let times = |i: usize| i as i64 * 10;
        let revisions = vec![(20, vec!["a.csv".to_string()]), (45, vec!["b.txt".into()])];
        let read = |at: i64, p: &str| format!("{p}@{at}");
        let got = changed_files(&s, &times, &revisions, &read);
        assert_eq!(got[&3], vec![("a.csv".to_string(), "a.csv@30".to_string())]);
        assert_eq!(got[&5], vec![("b.txt".to_string(), "b.txt@50".to_string())]);
    }

    #[test]
    fn long_text_is_cut_with_a_count() {
        assert_eq!(cut("short", 10), "short");
        assert_eq!(cut("abcdefghij", 4), "abcd … [6 more characters]");
    }

    /// A tiny random model written into `dir` and loaded.
    fn tiny_engine(dir: &std::path::Path) -> Engine {
        let model = dir.join("tiny.gguf");
        reverie_gguf::synth::write(
            &model,
            &reverie_gguf::synth::SynthConfig::tiny(reverie_gguf::synth::Arch::Qwen2),
        )
        .unwrap();
        Engine::load(&model, reverie_infer::EngineConfig::sized(1, 4096, 0, None)).unwrap()
    }

    /// Appends one message to `ch`, a few milliseconds apart from the
    /// others so that revisions and notes fall between them.
    fn record(
        store: &reverie_store::Store,
        ch: reverie_core::ChannelId,
        role: MessageRole,
        text: &str,
        token_role: reverie_core::TokenRole,
    ) {
        std::thread::sleep(std::time::Duration::from_millis(5));
        let span = reverie_core::TokenSpan {
            ids: vec![7],
            roles: vec![token_role],
            logprobs: vec![None],
        };
        store.append_message(ch, role, text, &span).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(5));
    }

    /// Requests whose failure the record proves get 0 without the judge,
    /// a note saved as asked and a code asked back and given get 1; the
    /// others are asked about.
    #[test]
    fn failures_the_record_proves_are_not_asked_about() {
        use reverie_core::TokenRole::{Action, User};
        let dir = tempfile::tempdir().unwrap();
        let (store, services, ch, tools) = crate::judge::tests::work_channel(dir.path());
        tools
            .call(
                "write_file",
                &serde_json::json!({"path": "src/shipping.py", "content": "def count_receipt():\n"}),
            )
            .unwrap();
        tools
            .call(
                "write_file",
                &serde_json::json!({"path": "logs/app.log", "content": "INFO ok\nWARN slow\nWARN slow\n"}),
            )
            .unwrap();
        let say = |role, text: &str, token_role| record(&store, ch, role, text, token_role);
        // (request, answer, whether a note is saved before the answer)
        let day = [
            (
                "Change `port` to 9091 in app.ini.",
                "Done, the port is 9091.",
                false,
            ),
            (
                "Save this in your notes: the code is 4411.",
                "Saved.",
                false,
            ),
            (
                "Please save this in your notes: my locker is L12.",
                "Saved as a note.",
                true,
            ),
            (
                "Which file in my workspace defines `count_receipt`?",
                "It is `receipts.py`.",
                false,
            ),
            ("And which one really?", "src/shipping.py", false),
            ("What is 17 × 23?", "It is 401.", false),
            (
                "What was my locker? I saved it earlier.",
                "Your locker is L12.",
                false,
            ),
            ("And my locker, which was it?", "I do not know.", false),
            (
                "Please read logs/app.log and count the lines with the level WARN.",
                "There are 3.",
                false,
            ),
            (
                "And count the lines with the level INFO in logs/app.log, please.",
                "There is 1.",
                false,
            ),
        ];
        for (request, answer, note) in day {
            say(MessageRole::User, request, User);
            if note {
                store.add_note("locker", "L12").unwrap();
            }
            say(MessageRole::Assistant, answer, Action);
        }

        let ws = crate::judge::channel_windows(&store, &services, ch, 0, 20).unwrap();
        let engine = tiny_engine(dir.path());
        let j = judge(&engine, &ws[0], JudgeOptions::default()).unwrap();
        let proven: Vec<bool> = j
            .tasks
            .iter()
            .map(|t| {
                t.evidence
                    .first()
                    .is_some_and(|e| e.starts_with("[verified]"))
            })
            .collect();
        assert_eq!(
            proven,
            vec![true, true, true, true, false, true, true, true, true, false],
            "{:#?}",
            j.tasks
        );
        // The note saved with its code and the code asked back and given
        // are the proven successes.
        let done = [2, 6];
        for (k, ((t, w), proven)) in j.tasks.iter().zip(&j.written).zip(proven).enumerate() {
            if done.contains(&k) {
                assert_eq!((t.reward, *w), (1.0, 1.0));
                assert!(t.reason.starts_with("done, proven from the record"));
            } else if proven {
                assert_eq!((t.reward, *w), (0.0, 0.0));
                assert!(
                    t.reason.starts_with("not done, proven from the record"),
                    "{}",
                    t.reason
                );
            } else {
                assert!(t.reward > 0.0 && t.reason.contains("judge's logits"));
            }
        }
        assert!(j.tasks[5].evidence[0].contains("works out to 391"));
        assert!(j.tasks[6].evidence[0].contains("my locker is l12"));
        assert!(j.tasks[8].evidence[0].contains("2 lines of logs/app.log hold WARN"));
        assert!(j.tasks[3].evidence[0].contains("names receipts.py"));
        let asked = judge(
            &engine,
            &ws[0],
            JudgeOptions {
                verify: false,
                ..JudgeOptions::default()
            },
        )
        .unwrap();
        assert!(
            asked.tasks.iter().all(|t| t.reward > 0.0),
            "without the verifier every one is asked"
        );
    }

    /// A channel with a long request, a stopped turn and a file written
    /// twice, judged by a tiny random model.
    #[test]
    fn each_answered_request_is_judged_on_its_own_record_and_the_logits() {
        use reverie_core::TokenRole;
        let dir = tempfile::tempdir().unwrap();
        let (store, services, ch, tools) = crate::judge::tests::work_channel(dir.path());
        let say = |role, text: &str, token_role| record(&store, ch, role, text, token_role);
        let long = format!(
            "{} Set the port to 9091 in app.ini.",
            "Some background. ".repeat(50)
        );
        say(MessageRole::User, &long, TokenRole::User);
        say(
            MessageRole::Assistant,
            r#"{"name": "read_file"}"#,
            TokenRole::Action,
        );
        say(
            MessageRole::Tool,
            "error: no file config.ini",
            TokenRole::Env,
        );
        say(
            MessageRole::User,
            "This turn was stopped: the same call failed.",
            TokenRole::Warning,
        );
        tools
            .call(
                "write_file",
                &serde_json::json!({"path": "app.ini", "content": "port = 9091\n"}),
            )
            .unwrap();
        say(
            MessageRole::Assistant,
            "Done: 9091 in app.ini, config.ini was missing, 2 files checked.",
            TokenRole::Action,
        );
        say(MessageRole::User, "Now set it back to 80", TokenRole::User);
        tools
            .call(
                "write_file",
                &serde_json::json!({"path": "app.ini", "content": "port = 80\n"}),
            )
            .unwrap();
        say(MessageRole::Assistant, "Done.", TokenRole::Action);

        let ws = crate::judge::channel_windows(&store, &services, ch, 0, 10).unwrap();
        assert_eq!(ws.len(), 1);
        let w = &ws[0];
        let found = spans(&w.channel_messages, &|i| w.harness.contains(&i));
        assert_eq!(
            found,
            vec![Span { first: 0, last: 4 }, Span { first: 5, last: 6 }],
            "the harness notice opens no sub-task"
        );
        let first = Shown::of(w, found[0], JudgeOptions::default());
        assert!(
            long.len() > 600 && first.prompt.contains(long.trim()),
            "the whole request"
        );
        assert!(first
            .prompt
            .contains("[3] harness notice: This turn was stopped"));
        assert!(first.prompt.contains("port = 9091") && !first.prompt.contains("port = 80"));
        assert!(first.evidence.iter().any(|e| e.starts_with("[notice 3]")));
        // Figures of the answer the request did not hold are traced.
        assert_eq!(
            grounding_checks(w, found[0]),
            vec![
                "[check] config.ini in the final answer is in tool result [2]",
                "[check] 2 in the final answer is in no tool result, earlier message or \
                 calculator value: nothing the assistant read shows it",
            ]
        );
        assert!(first
            .prompt
            .contains("config.ini in the final answer is in tool result [2]"));
        let second = Shown::of(w, found[1], JudgeOptions::default());
        assert!(second
            .prompt
            .contains("app.ini as it was after the answer:\nport = 80"));
        assert!(
            second.prompt.contains("Done.")
                && second
                    .prompt
                    .contains("[4] assistant: Done: 9091 in app.ini")
        );

        let engine = tiny_engine(dir.path());
        let j = judge(&engine, w, JudgeOptions::default()).unwrap();
        assert_eq!(j.tasks.len(), 2);
        assert_eq!(
            (j.tasks[0].first, j.tasks[0].last, j.tasks[0].turns),
            (0, 4, 2)
        );
        assert_eq!(
            (j.tasks[1].first, j.tasks[1].last, j.tasks[1].turns),
            (5, 6, 1)
        );
        // Each answer's P(yes) ÷ (P(yes) + P(no)), read here through every
        // position's logits instead of the judge's single one.
        let answers = Answers::of(&engine).unwrap();
        let p_yes = |question: &str| -> f64 {
            let mut t = Transcript::default();
            engine
                .extend_transcript(
                    &mut t,
                    &[ChatMessage::new(MessageRole::User, first.ask(question))],
                )
                .unwrap();
            let mut ids = t.tokens.ids.clone();
            ids.extend(&answers.shared);
            let mut out = 0.0;
            engine
                .visit_logits(&ids, &mut |i, logits| {
                    if i == ids.len() - 1 {
                        let p = |s: &[i32]| -> f64 {
                            s.iter()
                                .map(|&id| f64::from(reverie_infer::log_prob(logits, id)).exp())
                                .sum()
                        };
                        out = p(&answers.yes) / (p(&answers.yes) + p(&answers.no));
                    }
                })
                .unwrap();
            out
        };
        let (right, wrong) = (p_yes(IS_RIGHT), p_yes(IS_WRONG));
        let close = |got: f32, want: f64| (got as f64 - want).abs() < 1e-3;
        let got = j.tasks[0].reward;
        let both = ((right + 1.0 - wrong) / 2.0) as f32;
        assert!(
            close(got, f64::from(sharpened(both))),
            "asked both ways: {got} vs right {right}, wrong {wrong}"
        );
        let once = JudgeOptions {
            asked: Asked::Right,
            ..JudgeOptions::default()
        };
        let j1 = judge(&engine, w, once).unwrap();
        assert!(
            close(j1.tasks[0].reward, right),
            "asked once: {} vs {right}",
            j1.tasks[0].reward
        );
        assert!(got > 0.0 && got < 1.0);
        assert_eq!(j.written[0], if got >= 0.5 { 1.0 } else { 0.0 });
    }

    #[test]
    fn sharpening_keeps_the_midpoint_and_the_order() {
        assert!((sharpened(0.5) - 0.5).abs() < 1e-6);
        let readings = [0.0, 0.45, 0.48, 0.5, 0.53, 0.58, 1.0];
        let out: Vec<f32> = readings.iter().map(|&p| sharpened(p)).collect();
        assert!(out.windows(2).all(|w| w[0] < w[1]), "{out:?}");
        // The default model's faint readings become a usable spread.
        assert!(sharpened(0.45) < 0.2 && sharpened(0.55) > 0.8, "{out:?}");
        assert!(out.iter().all(|r| (0.0..=1.0).contains(r)));
    }
}
