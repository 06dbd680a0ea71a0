//! Stage 2, judge: the deployed model rewards the sub-tasks of the day's
//! channels in windows of messages; practice episodes bring their checks'
//! verdicts instead; then the reviewer's marks apply.

use reverie_core::{ChannelId, MessageRole};

use crate::error::NightError;
use crate::event::Stage;
use crate::judge::{judge_window, windows, TaskKind};
use crate::run::NightRun;
use crate::stages::Next;

pub fn run(night: &mut NightRun<'_>) -> Result<Next, NightError> {
    let (store, cfg) = (night.store, night.cfg);
    let (practised, checked) =
        crate::practice::episode_tasks(store, night.report.since_ms, cfg.stopped_pass_reward)?;
    let mut all = Vec::new();
    for c in &night.report.channels {
        if checked.contains(&c.channel) {
            continue;
        }
        let msgs: Vec<(MessageRole, String)> = store
            .messages(ChannelId(c.channel))?
            .into_iter()
            .map(|m| (m.role, m.text))
            .collect();
        all.extend(windows(ChannelId(c.channel), &msgs, c.from, cfg.window));
    }
    let mut tasks = Vec::new();
    for (i, w) in all.iter().enumerate() {
        let label = format!("channel {} messages {}", w.channel.0, w.messages.len());
        night.item(Stage::Judge, i, all.len(), label)?;
        match judge_window(night.engine()?, w, cfg.retries) {
            Ok(j) => {
                for (a, b) in &j.reads {
                    let read =
                        format!("the judge read messages {a}–{b} of channel {}", w.channel.0);
                    night.note(Stage::Judge, read);
                }
                tasks.extend(j.tasks)
            }
            Err(why) => night.note(
                Stage::Judge,
                format!("skipped a window of channel {}: {why}", w.channel.0),
            ),
        }
    }
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
