//! Stage 1, collect: the channels with messages since the last night; and
//! the routine cleaning of the agent's notes, whose changes the morning
//! summary lists.

use crate::error::NightError;
use crate::report::{CollectedChannel, Counts};
use crate::run::NightRun;
use crate::stages::Next;

pub fn run(night: &mut NightRun<'_>) -> Result<Next, NightError> {
    let since = night.report.since_ms;
    let mut channels = Vec::new();
    let mut messages = 0;
    for c in night.store.channels()? {
        let msgs = night.store.messages(c.id)?;
        if let Some(from) = msgs.iter().position(|m| m.created_ms >= since) {
            messages += msgs.len() - from;
            channels.push(CollectedChannel {
                channel: c.id.0,
                name: c.name,
                from,
            });
        }
    }
    night.report.counts = Some(Counts {
        messages,
        channels: channels.len(),
    });
    night.report.channels = channels;
    if night.cfg.clean_notes {
        for line in reverie_tools::note_cleaning::clean(night.store, crate::trigger::now_ms())? {
            night.note(
                crate::event::Stage::Collect,
                format!("notes: {line} (`reverie notes undo` brings it back)"),
            );
        }
    }
    Ok(Next::Continue)
}
