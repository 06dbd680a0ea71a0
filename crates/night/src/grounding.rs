//! Where the figures of a final answer come from. An answer that states a
//! count, a total, a file name or a quoted text that no tool result,
//! earlier message or calculator value shows may have made it up; one that
//! states what a tool printed is at least grounded. A small judge cannot
//! trace this itself across a long record, so it is shown the trace as
//! checks.

use std::collections::BTreeSet;

/// Figures of one answer traced at most.
const MAX_FIGURES: usize = 4;

/// One line per figure of `answer` that `request` does not already hold:
/// the first of `sources` (label, text) that shows it, or that none does.
pub fn grounding(request: &str, answer: &str, sources: &[(String, &str)]) -> Vec<String> {
    let given = figures(request);
    let shown: Vec<(&String, BTreeSet<String>)> =
        sources.iter().map(|(l, t)| (l, figures(t))).collect();
    let quoted: Vec<String> = quotes(answer);
    let in_quotes = |f: &String| quoted.iter().any(|q| q.to_lowercase().contains(f.as_str()));
    let tokens = ordered_figures(answer)
        .into_iter()
        .filter(|f| !given.contains(f) && !in_quotes(f))
        .map(|f| {
            let from = shown.iter().find(|(_, fs)| fs.contains(&f));
            (f, from.map(|(l, _)| *l))
        });
    let quoted = quoted
        .iter()
        .filter(|q| !request.contains(q.as_str()))
        .map(|q| {
            let from = sources.iter().find(|(_, t)| t.contains(q.as_str()));
            (format!("\"{q}\""), from.map(|(l, _)| l))
        });
    quoted
        .chain(tokens)
        .take(MAX_FIGURES)
        .map(|(f, from)| match from {
            Some(label) => format!("[check] {f} in the final answer is in {label}"),
            None => format!(
                "[check] {f} in the final answer is in no tool result, earlier message or \
                 calculator value: nothing the assistant read shows it"
            ),
        })
        .collect()
}

/// The texts `text` quotes ('…', "…" or `…`, two to 80 characters, on one
/// line), in order.
pub(crate) fn quotes(text: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for line in text.lines() {
        for mark in ['"', '`', '\'', '“'] {
            let close = if mark == '“' { '”' } else { mark };
            let mut rest = line;
            while let Some(open) = rest.find(mark) {
                let after = &rest[open + mark.len_utf8()..];
                // An apostrophe inside a word ("it's") opens no quote.
                let inside_word = mark == '\''
                    && rest[..open]
                        .chars()
                        .next_back()
                        .is_some_and(char::is_alphanumeric);
                if inside_word {
                    rest = after;
                    continue;
                }
                let Some(end) = after.find(close) else { break };
                let q = &after[..end];
                if (2..=80).contains(&q.chars().count()) && !out.iter().any(|o| o == q) {
                    out.push(q.to_string());
                }
                rest = &after[end + close.len_utf8()..];
            }
        }
    }
    out
}

/// The file names of `text` (lowercase), in order.
pub(crate) fn file_names(text: &str) -> Vec<String> {
    ordered_figures(text)
        .into_iter()
        .filter(|f| number(f).is_none())
        .collect()
}

/// The numbers of `text`, each with the count of decimals it is written
/// with ("3.50" → (3.5, 1); "1,204" → (1204.0, 0)).
pub(crate) fn numbers(text: &str) -> Vec<(f64, usize)> {
    ordered_figures(text)
        .into_iter()
        .filter_map(|f| {
            let decimals = f.split_once('.').map_or(0, |(_, d)| d.len());
            f.parse::<f64>().ok().map(|v| (v, decimals))
        })
        .collect()
}

/// The figures of `text` (numbers and file names, normalized) as a set.
fn figures(text: &str) -> BTreeSet<String> {
    ordered_figures(text).into_iter().collect()
}

/// The figures of `text` in order of first appearance: numbers (thousands
/// separators dropped, trailing decimal zeros dropped) and file names
/// (lowercase). A number that opens a line as a list marker ("1." or "2)")
/// is none.
fn ordered_figures(text: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for line in text.lines() {
        let words = line.split(|c: char| !(c.is_alphanumeric() || "._/-,".contains(c)));
        for (k, raw) in words.filter(|w| !w.is_empty()).enumerate() {
            let word = raw.trim_end_matches(['.', ',', '-', '/']);
            let after = line.trim_start().get(word.len()..).unwrap_or("");
            let marker = k == 0
                && word.bytes().all(|b| b.is_ascii_digit())
                && (after.starts_with('.') || after.starts_with(')'));
            if marker {
                continue;
            }
            if let Some(f) = number(word)
                .or_else(|| file_name(word))
                .filter(|f| !out.contains(f))
            {
                out.push(f);
            }
        }
    }
    out
}

/// `word` as a number in one spelling: "1,204.50" → "1204.5".
pub(crate) fn number(word: &str) -> Option<String> {
    let digits = word.strip_prefix('-').unwrap_or(word);
    let (whole, frac) = digits.split_once('.').unwrap_or((digits, ""));
    let groups: Vec<&str> = whole.split(',').collect();
    let grouped = groups.len() > 1
        && (1..=3).contains(&groups[0].len())
        && groups[1..].iter().all(|g| g.len() == 3);
    let all_digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    if !groups.iter().all(|g| all_digits(g)) || (groups.len() > 1 && !grouped) {
        return None;
    }
    if !frac.is_empty() && !all_digits(frac) {
        return None;
    }
    let frac = frac.trim_end_matches('0');
    let sign = if word.starts_with('-') { "-" } else { "" };
    let whole = groups.concat();
    Some(if frac.is_empty() {
        format!("{sign}{whole}")
    } else {
        format!("{sign}{whole}.{frac}")
    })
}

/// `word` as a file name: a name with an extension that has a letter
/// ("notes.txt", "src/main.rs", "main.c" but not "e.g"), lowercase.
fn file_name(word: &str) -> Option<String> {
    let (stem, ext) = word.rsplit_once('.')?;
    let ok_ext = (1..=5).contains(&ext.len())
        && ext.chars().all(|c| c.is_ascii_alphanumeric())
        && ext.chars().any(|c| c.is_ascii_alphabetic());
    let named = stem.chars().filter(|c| c.is_alphanumeric()).count();
    let ok_stem = named >= 2 && !stem.ends_with('/') && !stem.ends_with('.');
    (ok_ext && ok_stem).then(|| word.to_lowercase())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sources<'a>(v: &[(&str, &'a str)]) -> Vec<(String, &'a str)> {
        v.iter().map(|(l, t)| (l.to_string(), *t)).collect()
    }

    #[test]
    fn a_figure_a_tool_printed_is_traced_to_it_and_one_nobody_printed_is_not() {
        let got = grounding(
            "How many lines of app.log say ERROR?",
            "app.log has 7 ERROR lines, out of 1,204 in all.",
            &sources(&[("tool result [4]", "7\n"), ("message [1]", "hello")]),
        );
        assert_eq!(
            got,
            vec![
                "[check] 7 in the final answer is in tool result [4]".to_string(),
                "[check] 1204 in the final answer is in no tool result, earlier message or \
                 calculator value: nothing the assistant read shows it"
                    .to_string(),
            ],
            "app.log was in the request, so it is not traced"
        );
    }

    #[test]
    fn spellings_of_one_number_match_and_list_markers_are_no_figures() {
        let got = grounding(
            "Total of the amount column?",
            "1. I read the file.\n2) The total is 1204.50 in budget.csv.",
            &sources(&[("tool result [3]", "total: 1,204.5 from Budget.CSV")]),
        );
        assert_eq!(
            got,
            vec![
                "[check] 1204.5 in the final answer is in tool result [3]",
                "[check] budget.csv in the final answer is in tool result [3]",
            ]
        );
        assert_eq!(number("12,34"), None, "not a thousands separator");
        assert_eq!(number("-3.000"), Some("-3".into()));
        assert_eq!(file_name("v2.0"), None);
        assert_eq!(file_name("e.g"), None);
        assert_eq!(file_name("main.c"), Some("main.c".into()));
        assert_eq!(
            file_names("See `count_receipt.py` and src/my_app/main.rs, 3.5 times."),
            vec!["count_receipt.py", "src/my_app/main.rs"]
        );
    }

    #[test]
    fn quoted_text_is_traced_by_what_contains_it() {
        let got = grounding(
            "Reverse 'stone', then upper-case it.",
            "It's \"ENOTS\". I also tried `enots` and 'stone'.",
            &sources(&[("tool result [2]", "print(s[::-1].upper())\nENOTS\n")]),
        );
        assert_eq!(
            got,
            vec![
                "[check] \"ENOTS\" in the final answer is in tool result [2]".to_string(),
                "[check] \"enots\" in the final answer is in no tool result, earlier message \
                 or calculator value: nothing the assistant read shows it"
                    .to_string(),
            ],
            "the request's own 'stone' is not traced"
        );
    }

    #[test]
    fn an_answer_that_repeats_the_request_has_nothing_to_trace() {
        assert!(grounding("What is 17 times 3?", "17 times 3.", &[]).is_empty());
        let many = "1 2 3 4 5 6 7 8 9";
        assert_eq!(grounding("", &format!("x {many}"), &[]).len(), MAX_FIGURES);
    }
}
