//! Regenerate and edit as preferences: a reply the person took back (with ↻,
//! or by editing their message) and the reply that replaced it are samples
//! for the same request, so they form one group and each is measured
//! against the group (as the attempts of a practice task are): the kept
//! reply above, the taken-back ones below, unless the person's rating of
//! the kept reply says otherwise. Each trains on its own transcript (a
//! taken-back reply on the words it answered).

use reverie_core::{Message, MessageId, MessageRole};

use crate::judge::{counted_turns, JudgedTask, TaskKind};

/// One question asked again: the kept turn, as indices into the channel's
/// transcript, and every turn taken back before it.
#[derive(Debug, Clone, PartialEq)]
pub struct Regeneration {
    pub first: usize,
    pub last: usize,
    pub question: String,
    pub taken_back: Vec<TakenBack>,
}

/// A turn taken back: its messages and its model turns, counted from the
/// record as for any sub-task.
#[derive(Debug, Clone, PartialEq)]
pub struct TakenBack {
    pub messages: Vec<MessageId>,
    pub turns: u32,
}

/// A turn: its messages from the person's one on, and whether it was taken
/// back.
struct Turn<'a> {
    messages: Vec<&'a Message>,
    retracted: bool,
}

/// The channel's regenerated or edited questions. `kept` is the
/// transcript, `taken` the retracted messages. A turn taken back belongs to
/// the turn that replaced it, the next one (↻ asks the same words again, an
/// edit other words); a chain of them is one group, and a turn taken back
/// that nothing replaced is none.
pub fn regenerations(kept: &[Message], taken: &[Message]) -> Vec<Regeneration> {
    let mut all: Vec<(&Message, bool)> = kept
        .iter()
        .map(|m| (m, false))
        .chain(taken.iter().map(|m| (m, true)))
        .collect();
    all.sort_by_key(|(m, _)| m.id);
    let mut turns: Vec<Turn> = Vec::new();
    for (m, retracted) in all {
        match turns.last_mut() {
            Some(t) if m.role != MessageRole::User && t.retracted == retracted => {
                t.messages.push(m)
            }
            _ if m.role == MessageRole::User => turns.push(Turn {
                messages: vec![m],
                retracted,
            }),
            _ => {}
        }
    }
    let index = |id: MessageId| kept.iter().position(|m| m.id == id);
    let mut out: Vec<Regeneration> = Vec::new();
    let mut pending: Vec<TakenBack> = Vec::new();
    for (k, t) in turns.iter().enumerate() {
        let question = t.messages[0].text.trim();
        let replaced = k + 1 < turns.len();
        if t.retracted {
            if replaced && t.messages.len() > 1 {
                let roles = t.messages.iter().enumerate().map(|(i, m)| (i, m.role));
                pending.push(TakenBack {
                    messages: t.messages.iter().map(|m| m.id).collect(),
                    turns: counted_turns(roles, 0, t.messages.len() - 1),
                });
            } else if !replaced {
                pending.clear();
            }
            continue;
        }
        let taken_back = std::mem::take(&mut pending);
        let (Some(first), Some(last)) = (
            index(t.messages[0].id),
            index(t.messages[t.messages.len() - 1].id),
        ) else {
            continue;
        };
        if !taken_back.is_empty() && last > first {
            out.push(Regeneration {
                first,
                last,
                question: question.to_string(),
                taken_back,
            });
        }
    }
    out
}

/// The group's sub-tasks: the kept turn rewarded `kept_reward` (1 unless
/// the person rated it), each taken-back turn 0.
pub fn tasks(
    channel: i64,
    r: &Regeneration,
    kept: &[Message],
    kept_reward: f32,
) -> Vec<JudgedTask> {
    let group = format!("regenerated: {channel}/{}", kept[r.first].id.0);
    let short: String = r.question.chars().take(100).collect();
    let roles = kept.iter().enumerate().map(|(i, m)| (i, m.role));
    let task = |reward: f32, taken_back: Vec<i64>, turns: u32, what: &str| JudgedTask {
        channel,
        description: short.clone(),
        first: r.first,
        last: r.last,
        turns,
        reward,
        reason: what.to_string(),
        group: Some(group.clone()),
        checked: false,
        kind: TaskKind::Preference,
        judged: None,
        feedback: None,
        evidence: Vec::new(),
        taken_back,
    };
    let mut out = vec![task(
        kept_reward,
        Vec::new(),
        counted_turns(roles, r.first, r.last),
        "the reply kept after ↻ or an edit",
    )];
    for t in &r.taken_back {
        let ids = t.messages.iter().map(|m| m.0).collect();
        out.push(task(
            0.0,
            ids,
            t.turns,
            "a reply taken back with ↻ or an edit",
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use reverie_core::{ChannelId, TokenSpan};

    fn msg(id: i64, role: MessageRole, text: &str) -> Message {
        Message {
            id: MessageId(id),
            channel: ChannelId(1),
            role,
            text: text.into(),
            created_ms: 0,
            tokens: TokenSpan::default(),
        }
    }

    use MessageRole::{Assistant, System, Tool, User};

    #[test]
    fn a_regenerated_reply_and_its_replacement_form_a_group() {
        // 2–3 asked and answered, taken back; 4–7 asked again, answered
        // with a tool; 8–9 taken back and never asked again.
        let taken = [
            msg(2, User, "17 * 3?"),
            msg(3, Assistant, "41"),
            msg(8, User, "and 2 + 2?"),
            msg(9, Assistant, "5"),
        ];
        let kept = [
            msg(1, System, "sys"),
            msg(4, User, "17 * 3?"),
            msg(5, Assistant, "<tool_call>"),
            msg(6, Tool, "51"),
            msg(7, Assistant, "51"),
        ];
        let got = regenerations(&kept, &taken);
        assert_eq!(
            got,
            vec![Regeneration {
                first: 1,
                last: 4,
                question: "17 * 3?".into(),
                taken_back: vec![TakenBack {
                    messages: vec![MessageId(2), MessageId(3)],
                    turns: 1,
                }],
            }],
            "8–9 were never asked again: no group"
        );
        let ts = tasks(1, &got[0], &kept, 1.0);
        assert_eq!(ts.len(), 2);
        assert_eq!((ts[0].reward, ts[0].turns), (1.0, 2));
        assert!(ts[0].taken_back.is_empty());
        assert_eq!((ts[1].reward, ts[1].taken_back.clone()), (0.0, vec![2, 3]));
        assert_eq!(ts[0].group, ts[1].group);
        assert!(ts.iter().all(|t| t.kind == TaskKind::Preference));
    }

    #[test]
    fn a_chain_of_regenerations_is_one_group_and_an_edit_is_another() {
        let taken = [
            msg(1, User, "name a colour"),
            msg(2, Assistant, "red"),
            msg(3, User, "name a colour"),
            msg(4, Assistant, "blue"),
            msg(7, User, "pick a number"),
            msg(8, Assistant, "7"),
        ];
        let kept = [
            msg(5, User, "name a colour"),
            msg(6, Assistant, "green"),
            // An edit: other words replaced "pick a number".
            msg(9, User, "pick a big number"),
            msg(10, Assistant, "1000"),
        ];
        let got = regenerations(&kept, &taken);
        assert_eq!(got.len(), 2, "{got:?}");
        let taken_back: Vec<_> = got[0].taken_back.iter().map(|t| &t.messages).collect();
        assert_eq!(
            taken_back,
            [
                &vec![MessageId(1), MessageId(2)],
                &vec![MessageId(3), MessageId(4)]
            ]
        );
        assert_eq!((got[0].first, got[0].last), (0, 1));
        assert_eq!(tasks(1, &got[0], &kept, 1.0).len(), 3);
        // The edit: the kept "pick a big number" above the reply to the
        // words it replaced.
        assert_eq!((got[1].first, got[1].last), (2, 3));
        assert_eq!(got[1].question, "pick a big number");
        assert_eq!(
            got[1].taken_back,
            vec![TakenBack {
                messages: vec![MessageId(7), MessageId(8)],
                turns: 1,
            }]
        );
        let ts = tasks(1, &got[1], &kept, 1.0);
        assert_eq!((ts[0].reward, ts[1].reward), (1.0, 0.0));
    }
}
