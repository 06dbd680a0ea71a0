//! The routine cleaning of the agent's notes, run by each night (and by
//! `reverie notes clean`): notes that say the same thing are merged into
//! one, notes whose to-dos are all done and notes nobody wrote or recalled
//! for half a year are put away. Every change is recorded in the store and
//! can be undone (`reverie notes undo`); nothing is deleted.

use std::collections::BTreeMap;

use reverie_store::{Note, Store, StoreError};

use crate::notes::day;

/// Word overlap (Jaccard) at which two notes count as the same note. A
/// merge keeps every line of both, so a false match loses nothing (and
/// undoes).
const SAME_NOTE: f64 = 0.7;
/// Untouched (neither written nor recalled) for this long, a note is stale.
const STALE_DAYS: i64 = 180;

fn text(n: &Note) -> String {
    format!("{}\n{}", n.title, n.body)
}

/// Whether a line is a to-do, and whether it is done.
fn todo(line: &str) -> Option<bool> {
    let l = line.trim_start().trim_start_matches(['-', '*', ' ']);
    let lower = l.to_lowercase();
    if lower.starts_with("[x]") || lower.starts_with("done:") || lower.starts_with("✓") {
        Some(true)
    } else if lower.starts_with("[ ]") || lower.starts_with("todo:") {
        Some(false)
    } else {
        None
    }
}

/// Whether every to-do of `n` is done (and it has at least one).
fn all_done(n: &Note) -> bool {
    let marks: Vec<bool> = n.body.lines().filter_map(todo).collect();
    !marks.is_empty() && marks.iter().all(|&d| d)
}

/// The newest note's body, then each line of the others it lacks.
fn merged_body(group: &[&Note]) -> String {
    let mut body = group[0].body.trim_end().to_string();
    for other in &group[1..] {
        for line in other.body.lines() {
            let l = line.trim();
            if !l.is_empty() && !body.lines().any(|b| b.trim() == l) {
                body.push('\n');
                body.push_str(line);
            }
        }
    }
    body
}

/// Cleans the notes in `store` as of `now_ms`; returns what it changed, in
/// words (the morning summary's lines).
pub fn clean(store: &Store, now_ms: i64) -> Result<Vec<String>, StoreError> {
    let notes = store.notes()?;
    let mut said = Vec::new();
    // Groups of notes that say the same thing (union-find over pairs).
    let mut root: Vec<usize> = (0..notes.len()).collect();
    fn find(root: &mut [usize], i: usize) -> usize {
        if root[i] != i {
            root[i] = find(root, root[i]);
        }
        root[i]
    }
    for i in 0..notes.len() {
        for j in i + 1..notes.len() {
            if reverie_embed::word_overlap(&text(&notes[i]), &text(&notes[j])) >= SAME_NOTE {
                let (a, b) = (find(&mut root, i), find(&mut root, j));
                root[a.max(b)] = a.min(b);
            }
        }
    }
    let mut groups: BTreeMap<usize, Vec<&Note>> = BTreeMap::new();
    for (i, n) in notes.iter().enumerate() {
        let r = find(&mut root, i);
        groups.entry(r).or_default().push(n);
    }
    let mut gone = std::collections::HashSet::new();
    for mut group in groups.into_values().filter(|g| g.len() > 1) {
        group.sort_by_key(|n| std::cmp::Reverse(n.touched_ms()));
        let ids: Vec<i64> = group.iter().map(|n| n.id).collect();
        let what = format!(
            "merged notes {} (the same note) into one: {:?}",
            ids.iter()
                .map(i64::to_string)
                .collect::<Vec<_>>()
                .join(", "),
            group[0].title
        );
        store.change_notes(&what, &ids, Some((&group[0].title, &merged_body(&group))))?;
        gone.extend(ids);
        said.push(what);
    }
    for n in notes.iter().filter(|n| !gone.contains(&n.id)) {
        let why = if all_done(n) {
            format!(
                "put away note {} ({:?}): its to-dos are all done",
                n.id, n.title
            )
        } else if now_ms - n.touched_ms() > STALE_DAYS * 86_400_000 {
            format!(
                "put away note {} ({:?}): neither written nor recalled since {}",
                n.id,
                n.title,
                day(n.touched_ms())
            )
        } else {
            continue;
        };
        store.change_notes(&why, &[n.id], None)?;
        said.push(why);
    }
    Ok(said)
}

#[cfg(test)]
mod tests {
    use super::*;
    use reverie_core::Home;

    #[test]
    fn duplicates_merge_done_and_stale_notes_go_and_undo_brings_them_back() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&Home::new(dir.path())).unwrap();
        let day = 86_400_000i64;
        let now = 20_000 * day;
        let a = store
            .add_note_at(
                "Dentist",
                "Dr. Ruiz, Tuesday at 3 pm, bring the card",
                now - day,
            )
            .unwrap();
        let b = store
            .add_note_at(
                "Dentist",
                "Dr. Ruiz, Tuesday at 3 pm, bring the card\nparking on Elm",
                now,
            )
            .unwrap();
        let done = store
            .add_note_at("Errands", "- [x] milk\n- [x] stamps", now)
            .unwrap();
        let open = store
            .add_note_at("Chores", "- [x] dishes\n- [ ] laundry", now)
            .unwrap();
        let stale = store
            .add_note_at("Old idea", "a bird feeder for the balcony", now - 400 * day)
            .unwrap();
        let said = clean(&store, now).unwrap();
        assert_eq!(said.len(), 3, "{said:?}");
        let left = store.notes().unwrap();
        let ids: Vec<i64> = left.iter().map(|n| n.id).collect();
        assert!(ids.contains(&open), "an open to-do stays");
        for gone in [a, b, done, stale] {
            assert!(!ids.contains(&gone), "{gone} should be put away: {said:?}");
        }
        let merged = left.iter().find(|n| n.title == "Dentist").unwrap();
        assert_eq!(
            merged.body,
            "Dr. Ruiz, Tuesday at 3 pm, bring the card\nparking on Elm"
        );
        assert!(said[0].contains("merged notes"), "{}", said[0]);
        assert!(said.iter().any(|s| s.contains("to-dos are all done")));
        assert!(said
            .iter()
            .any(|s| s.contains("neither written nor recalled since")));
        // Cleaning again changes nothing.
        assert!(clean(&store, now).unwrap().is_empty());
        // Every change undoes: the notes come back, the merged one goes.
        for c in store.note_changes().unwrap() {
            store.undo_note_change(c.id).unwrap();
        }
        let mut back: Vec<i64> = store.notes().unwrap().iter().map(|n| n.id).collect();
        back.sort();
        assert_eq!(back, vec![a, b, done, open, stale]);
        let err = store.undo_note_change(1).unwrap_err().to_string();
        assert!(err.contains("not yet undone"), "{err}");
    }
}
