//! Stage 2, judge: the deployed model rewards the sub-tasks of the day's
//! channels in windows of messages; practice episodes bring their checks'
//! verdicts instead; then the person's 👍/👎 and the reviewer's marks
//! apply.

use std::collections::HashSet;

use reverie_core::{ChannelId, MessageId, MessageRole};

use crate::error::NightError;
use crate::event::Stage;
use crate::feedback::{self, JudgeAgreement};
use crate::judge::{channel_windows, judge_window, JudgeOptions, JudgedTask, TaskKind};
use crate::run::NightRun;
use crate::stages::Next;

pub fn run(night: &mut NightRun<'_>) -> Result<Next, NightError> {
    let (store, cfg) = (night.store, night.cfg);
    let (practised, checked) =
        crate::practice::episode_tasks(store, night.report.since_ms, cfg.stopped_pass_reward)?;
    let services = std::sync::Arc::new(reverie_tools::Services::new(night.home));
    let mut all = Vec::new();
    for c in &night.report.channels {
        if checked.contains(&c.channel) {
            continue;
        }
        all.extend(channel_windows(
            store,
            &services,
            ChannelId(c.channel),
            c.from,
            cfg.window,
        )?);
    }
    let mut tasks = Vec::new();
    for (i, w) in all.iter().enumerate() {
        let label = format!("channel {} messages {}", w.channel.0, w.messages.len());
        night.item(Stage::Judge, i, all.len(), label)?;
        match judge_window(night.engine()?, w, cfg.retries, JudgeOptions::default()) {
            Ok(j) => {
                for r in &j.requests {
                    night.note(Stage::Judge, format!("channel {}: {r}", w.channel.0));
                }
                tasks.extend(j.tasks)
            }
            Err(why) => night.note(
                Stage::Judge,
                format!("skipped a window of channel {}: {why}", w.channel.0),
            ),
        }
    }
    apply_feedback(night, &mut tasks, &checked)?;
    add_regenerations(night, &mut tasks)?;
    if !practised.is_empty() {
        let proposals = practised
            .iter()
            .filter(|t| t.kind == TaskKind::Tasker)
            .count();
        let episodes = practised.len() - proposals;
        let s = |n: usize| if n == 1 { "" } else { "s" };
        night.note(
            Stage::Judge,
            format!(
                "{episodes} practice episode{} rewarded by their checks, {proposals} tasker proposal{} by their solvers' pass rates",
                s(episodes),
                s(proposals)
            ),
        );
    }
    tasks.extend(practised);
    let marks = store.review_marks()?;
    let ids = |ch: i64| {
        store
            .messages(ChannelId(ch))
            .map(|ms| ms.iter().map(|m| m.id).collect())
            .unwrap_or_default()
    };
    let (tasks, changes) = crate::review::apply(tasks, &marks, &ids);
    for c in changes {
        night.note(Stage::Judge, c);
    }
    night.report.tasks = tasks;
    Ok(Next::Continue)
}

/// Each question tonight that the person asked again with ↻ becomes a
/// group: the kept reply (rewarded by their rating if they gave one, else
/// 1) and every reply taken back (0).
fn add_regenerations(
    night: &mut NightRun<'_>,
    tasks: &mut Vec<JudgedTask>,
) -> Result<(), NightError> {
    let store = night.store;
    let channels: Vec<(i64, usize)> = night
        .report
        .channels
        .iter()
        .map(|c| (c.channel, c.from))
        .collect();
    let mut groups = 0;
    for (ch, from) in channels {
        let taken = store.retracted_messages(ChannelId(ch))?;
        if taken.is_empty() {
            continue;
        }
        let kept = store.messages(ChannelId(ch))?;
        let rated = store.feedback(ChannelId(ch))?;
        for r in crate::preferences::regenerations(&kept, &taken) {
            if r.first < from {
                continue;
            }
            let reply = kept[r.last].id;
            let reward = rated.iter().find(|f| f.message == reply).map_or(1.0, |f| {
                if f.good {
                    1.0
                } else {
                    0.0
                }
            });
            tasks.extend(crate::preferences::tasks(ch, &r, &kept, reward));
            groups += 1;
        }
    }
    if groups > 0 {
        let s = if groups == 1 { "" } else { "s" };
        night.note(
            Stage::Judge,
            format!("{groups} question{s} asked again with ↻: each kept reply is ranked above the replies taken back"),
        );
    }
    Ok(())
}

/// The person's ratings set the rewards of the sub-tasks their replies end
/// (practice channels keep their checks), and the judge's agreement with
/// them goes in the report.
fn apply_feedback(
    night: &mut NightRun<'_>,
    tasks: &mut Vec<JudgedTask>,
    practice: &HashSet<i64>,
) -> Result<(), NightError> {
    let store = night.store;
    for ch in store.channels()? {
        if practice.contains(&ch.id.0) {
            continue;
        }
        let ratings = store.feedback(ch.id)?;
        if ratings.is_empty() {
            continue;
        }
        let msgs = store.messages(ch.id)?;
        let ids: Vec<MessageId> = msgs.iter().map(|m| m.id).collect();
        let from = night
            .report
            .channels
            .iter()
            .find(|c| c.channel == ch.id.0)
            .map_or(usize::MAX, |c| c.from);
        let rated = feedback::tonight(&ratings, &ids, from, night.report.since_ms);
        let transcript: Vec<(MessageRole, String)> =
            msgs.into_iter().map(|m| (m.role, m.text)).collect();
        for n in feedback::apply(tasks, ch.id.0, &rated, &transcript) {
            night.note(Stage::Judge, n);
        }
    }
    let agreement = JudgeAgreement::of(tasks);
    if agreement.rated > 0 {
        if let Some(rate) = agreement.rate() {
            night.note(
                Stage::Judge,
                format!(
                    "the judge agreed with your ratings on {} of {} sub-tasks ({:.0} %)",
                    agreement.agreed,
                    agreement.compared,
                    rate * 100.0
                ),
            );
        }
        night.report.judge_agreement = Some(agreement);
    }
    Ok(())
}
