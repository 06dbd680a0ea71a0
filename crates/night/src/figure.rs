//! The figure a request asks for, where a program can work it out: a sum
//! written with numbers ("what is 17 × 23?"), steps in words ("start with
//! 20, then subtract 24 and multiply by 9") and quantities to be put in one
//! unit ("how many metres are 8 km and 850 m?"). A small judge cannot redo
//! these; a figure worked out here lets the verifier see that an answer
//! which gives no such figure did not do what was asked. Anything this
//! cannot read whole is left alone.

use reverie_tools::calculator::{evaluate, format_number};

/// What `request` works out to, and how, in words for the reviewer.
pub fn expected(request: &str) -> Option<(f64, String)> {
    let text = normalized(request);
    sentences(&text)
        .into_iter()
        .find_map(|s| steps(s).or_else(|| conversion(s)).or_else(|| sum(s)))
}

/// Whether `answer` states `value` anywhere, to the precision it writes
/// ("3.33" states 10/3; "3,713" states 3713); `None` where it states no
/// number at all (a figure in words is the judge's to read).
pub fn states(answer: &str, value: f64) -> Option<bool> {
    let given = crate::grounding::numbers(&normalized(answer));
    (!given.is_empty()).then(|| given.iter().any(|&(x, decimals)| equal(x, decimals, value)))
}

/// Whether `x`, written with `decimals` decimals, is `value` to that
/// precision.
fn equal(x: f64, decimals: usize, value: f64) -> bool {
    let tolerance = 0.5 * 10f64.powi(-(decimals as i32)) + 1e-9 * value.abs();
    (x - value).abs() <= tolerance
}

/// Whether `request` asks for its figure at the very end of the answer
/// ("End your answer with the number"): the answer's last number is then
/// the one it gives, whatever figures it quotes on the way.
pub fn wanted_last(request: &str) -> bool {
    let lower = normalized(request);
    [
        "end your answer with the number",
        "end your reply with the number",
        "end with the number",
        "finish your answer with the number",
    ]
    .iter()
    .any(|p| lower.contains(p))
}

/// Whether `answer` gives `value` as `request` asks for it: its last number
/// where the request wants the figure last, any of its numbers otherwise;
/// `None` where it writes no number.
pub fn gives(request: &str, answer: &str, value: f64) -> Option<bool> {
    if !wanted_last(request) {
        return states(answer, value);
    }
    last_number(&normalized(answer)).map(|(x, decimals)| equal(x, decimals, value))
}

/// The last number written in `text` (a time's last field, a total, a
/// signed decimal), with its decimals.
fn last_number(text: &str) -> Option<(f64, usize)> {
    text.split(|c: char| !(c.is_ascii_digit() || ".,-".contains(c)))
        .map(|w| w.trim_end_matches(['.', ',', '-']))
        .filter_map(crate::grounding::number)
        .filter_map(|n| {
            let decimals = n.split_once('.').map_or(0, |(_, d)| d.len());
            n.parse::<f64>().ok().map(|v| (v, decimals))
        })
        .next_back()
}

/// Lowercase, with the signs people type for minus, times and divided by
/// made plain.
fn normalized(text: &str) -> String {
    text.to_lowercase()
        .replace(['−', '–'], "-")
        .replace('×', "*")
        .replace('÷', "/")
}

/// The sentences of `text`: split at `?`, `!`, a new line, and a full stop
/// that ends a word (not a decimal point).
fn sentences(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut start = 0;
    let bytes = text.as_bytes();
    for (k, c) in text.char_indices() {
        let stop = match c {
            '?' | '!' | '\n' => true,
            '.' => !bytes.get(k + 1).is_some_and(u8::is_ascii_digit),
            _ => false,
        };
        if stop {
            out.push(text[start..k].trim());
            start = k + 1;
        }
    }
    out.push(text[start..].trim());
    out.retain(|s| !s.is_empty());
    out
}

fn parse_number(word: &str) -> Option<f64> {
    let w = word.trim_matches(|c: char| matches!(c, ',' | ';' | ':' | '(' | ')'));
    crate::grounding::number(w)?.parse::<f64>().ok()
}

/// "Start with 20, then subtract 24 and multiply by 9": each step applied
/// in turn. Every word of the sentence must be a step, a number or a joint.
fn steps(sentence: &str) -> Option<(f64, String)> {
    let rest = ["start with ", "begin with ", "take the number ", "take "]
        .iter()
        .find_map(|lead| sentence.find(lead).map(|k| &sentence[k + lead.len()..]))?;
    let mut words = rest
        .split(|c: char| c.is_whitespace() || c == ',')
        .filter(|w| !w.is_empty())
        .peekable();
    let mut value = parse_number(words.next()?)?;
    let mut how = format_number(value);
    let number = |w: Option<&str>| w.and_then(parse_number);
    let mut any = false;
    while let Some(w) = words.next() {
        let (op, k) = match w {
            "then" | "and" | "it" | "finally" | "next" => continue,
            "add" | "plus" => ('+', number(words.next())?),
            "subtract" | "minus" => ('-', number(words.next())?),
            "multiply" | "divide" => {
                let by = words.next();
                let by = if by == Some("it") { words.next() } else { by };
                if by != Some("by") {
                    return None;
                }
                (
                    if w == "multiply" { '*' } else { '/' },
                    number(words.next())?,
                )
            }
            "times" => ('*', number(words.next())?),
            "double" => ('*', 2.0),
            "halve" => ('/', 2.0),
            "square" => ('*', value),
            _ => return None,
        };
        // "add 5 to it", "subtract 3 from it".
        if matches!(words.peek(), Some(&"to") | Some(&"from")) {
            words.next();
            if words.next() != Some("it") {
                return None;
            }
        }
        value = match op {
            '+' => value + k,
            '-' => value - k,
            '*' => value * k,
            _ if k == 0.0 => return None,
            _ => value / k,
        };
        how.push_str(&format!(
            " {op} {} = {}",
            format_number(k),
            format_number(value)
        ));
        any = true;
    }
    any.then_some((value, format!("step by step: {how}")))
}

/// One unit of measure: its names, what it measures and its size in that
/// quantity's base unit.
struct Unit {
    names: &'static [&'static str],
    measures: &'static str,
    size: f64,
}

#[rustfmt::skip]
const UNITS: &[Unit] = &[
    Unit { names: &["mm", "millimetre", "millimetres", "millimeter", "millimeters"], measures: "length", size: 0.001 },
    Unit { names: &["cm", "centimetre", "centimetres", "centimeter", "centimeters"], measures: "length", size: 0.01 },
    Unit { names: &["m", "metre", "metres", "meter", "meters"], measures: "length", size: 1.0 },
    Unit { names: &["km", "kilometre", "kilometres", "kilometer", "kilometers"], measures: "length", size: 1000.0 },
    Unit { names: &["inch", "inches"], measures: "length", size: 0.0254 },
    Unit { names: &["ft", "foot", "feet"], measures: "length", size: 0.3048 },
    Unit { names: &["yd", "yard", "yards"], measures: "length", size: 0.9144 },
    Unit { names: &["mile", "miles"], measures: "length", size: 1609.344 },
    Unit { names: &["mg", "milligram", "milligrams"], measures: "mass", size: 0.001 },
    Unit { names: &["g", "gram", "grams"], measures: "mass", size: 1.0 },
    Unit { names: &["kg", "kilogram", "kilograms", "kilo", "kilos"], measures: "mass", size: 1000.0 },
    Unit { names: &["t", "tonne", "tonnes"], measures: "mass", size: 1e6 },
    Unit { names: &["lb", "lbs", "pound", "pounds"], measures: "mass", size: 453.592_37 },
    Unit { names: &["oz", "ounce", "ounces"], measures: "mass", size: 28.349_523_125 },
    Unit { names: &["s", "sec", "secs", "second", "seconds"], measures: "time", size: 1.0 },
    Unit { names: &["min", "mins", "minute", "minutes"], measures: "time", size: 60.0 },
    Unit { names: &["h", "hr", "hrs", "hour", "hours"], measures: "time", size: 3600.0 },
    Unit { names: &["day", "days"], measures: "time", size: 86400.0 },
    Unit { names: &["week", "weeks"], measures: "time", size: 604_800.0 },
    Unit { names: &["ml", "millilitre", "millilitres", "milliliter", "milliliters"], measures: "volume", size: 1.0 },
    Unit { names: &["cl", "centilitre", "centilitres"], measures: "volume", size: 10.0 },
    Unit { names: &["l", "litre", "litres", "liter", "liters"], measures: "volume", size: 1000.0 },
];

fn unit(word: &str) -> Option<&'static Unit> {
    let w = word.trim_matches(|c: char| !c.is_alphabetic());
    UNITS.iter().find(|u| u.names.contains(&w))
}

/// Words that make a sentence about quantities something other than their
/// sum in one unit.
const NOT_A_SUM: [&str; 12] = [
    "per", "each", "every", "times", "minus", "less", "left", "divided", "half", "split",
    "between", "than",
];

/// "How many metres are 8 km and 850 m?", "what is 2 h 15 min in minutes":
/// the quantities of the sentence added up in the unit asked for.
fn conversion(sentence: &str) -> Option<(f64, String)> {
    let words: Vec<&str> = sentence.split_whitespace().collect();
    if words.iter().any(|w| NOT_A_SUM.contains(w)) {
        return None;
    }
    // The unit asked for: after "how many", or last after "in"/"to"/"into".
    let (target_at, target) = match words.windows(3).position(|w| w[..2] == ["how", "many"]) {
        Some(k) => (k + 2, unit(words[k + 2])?),
        None => {
            let last = words.len().checked_sub(1)?;
            let before = words.get(last.checked_sub(1)?)?;
            if !matches!(*before, "in" | "to" | "into") {
                return None;
            }
            (last, unit(words[last])?)
        }
    };
    let mut total = 0.0;
    let mut parts = Vec::new();
    let mut k = 0;
    while k < words.len() {
        if k == target_at {
            k += 1;
            continue;
        }
        // "8 km" or "8km".
        let w = words[k];
        let split = w.find(|c: char| c.is_alphabetic()).unwrap_or(w.len());
        let (num, glued) = w.split_at(split);
        let Some(v) = parse_number(num) else {
            k += 1;
            continue;
        };
        let (u, name) = if glued.is_empty() {
            let next = words.get(k + 1).copied().unwrap_or_default();
            k += 1;
            (unit(next)?, next)
        } else {
            (unit(glued)?, glued)
        };
        if u.measures != target.measures {
            return None;
        }
        total += v * u.size;
        parts.push(format!(
            "{} {}",
            format_number(v),
            name.trim_matches(|c: char| !c.is_alphabetic())
        ));
        k += 1;
    }
    if parts.is_empty() {
        return None;
    }
    let value = total / target.size;
    let name = words[target_at].trim_matches(|c: char| !c.is_alphabetic());
    Some((value, format!("{} in {name}", parts.join(" + "))))
}

/// A sum written with numbers after "what is", "calculate" and the like:
/// "what is 17 * 23", "calculate (2 + 3) * 4".
fn sum(sentence: &str) -> Option<(f64, String)> {
    let asks = [
        "what is ",
        "what's ",
        "how much is ",
        "calculate ",
        "compute ",
        "work out ",
        "evaluate ",
    ];
    let (at, lead) = asks
        .iter()
        .filter_map(|a| sentence.find(a).map(|k| (k, a.len())))
        .min()?;
    let expr = crate::claims::operators_as_symbols(&sentence[at + lead..]);
    let expr = expr.trim().trim_end_matches(['.', ',', ':', ';']);
    let operators =
        expr.chars().filter(|c| "+*/^".contains(*c)).count() + expr.matches(" - ").count();
    let only_arithmetic = expr
        .chars()
        .all(|c| c.is_ascii_digit() || " .+-*/^()%".contains(c));
    if !only_arithmetic || operators == 0 {
        return None;
    }
    let v = evaluate(expr).ok()?;
    Some((v, format!("{expr} = {}", format_number(v))))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn value(request: &str) -> Option<f64> {
        expected(request).map(|(v, _)| v)
    }

    #[test]
    fn steps_in_words_are_applied_in_turn() {
        let r = "Quick one: Start with 20, then subtract 24 and multiply by 9. What is the result? End your answer with the number.";
        assert_eq!(
            expected(r),
            Some((-36.0, "step by step: 20 - 24 = -4 * 9 = -36".to_string()))
        );
        assert_eq!(
            value("Start with 12, then multiply by 3, divide by 4 and add 5."),
            Some(14.0)
        );
        assert_eq!(value("Take 7, add 5 to it, then double it."), Some(24.0));
        // A word that is no step leaves the sentence alone.
        assert_eq!(value("Start with 12, then think about 3."), None);
        assert_eq!(value("Start with 12, then divide by 0."), None);
    }

    #[test]
    fn quantities_are_added_in_the_unit_asked_for() {
        assert_eq!(
            value("How many metres are 8 km and 850 m? End your answer with the number."),
            Some(8850.0)
        );
        assert_eq!(
            value("Hi! How many minutes are 3 hours and 10 minutes?"),
            Some(190.0)
        );
        assert_eq!(value("How many grams are 3 kg and 713 g?"), Some(3713.0));
        assert_eq!(value("What is 2h 15min in minutes?"), Some(135.0));
        let (v, how) = expected("Convert 1.5 km to metres.").unwrap();
        assert_eq!((v, how.as_str()), (1500.0, "1.5 km in metres"));
        // Mixed quantities, or not a sum: left alone.
        assert_eq!(value("How many metres are 8 km and 3 kg?"), None);
        assert_eq!(value("How many minutes per day are 3 hours?"), None);
        assert_eq!(value("How many files are in the folder?"), None);
        assert_eq!(value("How many lines in 3 files mention 2 km?"), None);
    }

    #[test]
    fn a_sum_asked_for_is_worked_out_and_a_sum_merely_mentioned_is_not() {
        assert_eq!(value("What is 17 × 23?"), Some(391.0));
        assert_eq!(value("Please calculate (2 + 3) * 4 − 1."), Some(19.0));
        assert_eq!(value("what's 12 times 12"), Some(144.0));
        assert_eq!(value("Write a function that returns 2 + 2."), None);
        assert_eq!(value("What is the version after 2.0?"), None);
        assert_eq!(value("What is 2026-12-05?"), None);
    }

    #[test]
    fn an_answer_states_a_figure_to_its_own_precision() {
        assert_eq!(states("The total is 3,713 g.", 3713.0), Some(true));
        assert_eq!(states("It comes to 3.33", 10.0 / 3.0), Some(true));
        assert_eq!(states("The result is −36.", -36.0), Some(true));
        assert_eq!(states("The answer is 16000.", 8850.0), Some(false));
        assert_eq!(states("4 + 31 = 35", 271.0), Some(false));
        assert_eq!(states("no figure at all", 1.0), None);
    }

    #[test]
    fn a_figure_asked_for_last_is_the_answer_s_last_number() {
        let asked = "Count the lines with the level ERROR. End your answer with the number.";
        assert!(wanted_last(asked));
        // A copied log quotes the right count on the way and ends on a time.
        let copied = "5| 09:04:28 ERROR quote failed\n14| 09:13:31 ERROR summary failed\n\nIf this answers the question, say so.";
        assert_eq!(gives(asked, copied, 3.0), Some(false));
        assert_eq!(states(copied, 4.0), Some(true), "any figure: 4 is there");
        assert_eq!(gives(asked, "26 * 3 * 12 / 6 = 156", 156.0), Some(true));
        assert_eq!(gives(asked, "The answer is 0.", 0.0), Some(true));
        assert_eq!(gives(asked, "It is −48.2098765", -3.0), Some(false));
        assert_eq!(gives(asked, "The total is 1,451.", 1451.0), Some(true));
        assert_eq!(gives(asked, "I could not tell.", 3.0), None);
        // Not asked for last: any of the answer's figures will do.
        assert_eq!(gives("How many lines hold ERROR?", copied, 4.0), Some(true));
    }
}
