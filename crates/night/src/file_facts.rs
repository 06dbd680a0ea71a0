//! What a request asks of the workspace's files that a program can count:
//! the lines of a file that hold a word ("count the lines with the level
//! WARN in logs/app.log"), the total of a CSV column ("add up the amount
//! column of data/sales.csv") and the file that defines a function ("which
//! file defines `count_receipt`?"). Each is read from the files as they
//! were when the answer was written; a request this cannot read whole, or
//! a file it cannot read, is left alone.

use crate::grounding::{file_names, quotes};

/// A fact of the files, worked out.
#[derive(Debug, Clone, PartialEq)]
pub enum Fact {
    /// A figure the answer must state, and how it was found.
    Figure(f64, String),
    /// The one file that defines the function asked about.
    Defines { function: String, file: String },
}

/// The fact `request` asks for, read through `read` (a file's text at the
/// answer, or `None`) over `files` (the workspace's files then).
pub fn asked(
    request: &str,
    files: &[String],
    read: &dyn Fn(&str) -> Option<String>,
) -> Option<Fact> {
    let lower = request.to_lowercase();
    if lower.contains("defines") || lower.contains("is defined") {
        return defines(request, files, read);
    }
    // The file named: by its path, or by a name only one file has.
    let path = file_names(request).into_iter().find_map(|n| {
        let mut of = files.iter().filter(|f| {
            let f = f.to_lowercase();
            f == n || f.ends_with(&format!("/{n}"))
        });
        match (of.next(), of.next()) {
            (Some(f), None) => Some(f),
            _ => None,
        }
    })?;
    let text = read(path)?;
    if lower.contains("count the lines") || lower.contains("how many lines") {
        let word = line_word(request)?;
        let n = text.lines().filter(|l| l.contains(&word)).count();
        return Some(Fact::Figure(
            n as f64,
            if n == 1 {
                format!("1 line of {path} holds {word}")
            } else {
                format!("{n} lines of {path} hold {word}")
            },
        ));
    }
    let column = column_asked(&lower)?;
    let total = column_total(&text, &column)?;
    Some(Fact::Figure(
        total,
        format!(
            "the {column} column of {path} adds up to {}",
            reverie_tools::calculator::format_number(total)
        ),
    ))
}

/// The word the lines are to hold: after "the level", "containing",
/// "that contain", "mentioning" or "with"; quoted words first.
fn line_word(request: &str) -> Option<String> {
    if let Some(q) = quotes(request).into_iter().find(|q| !q.contains('/')) {
        return Some(q);
    }
    let lower = request.to_lowercase();
    let lead = [
        "with the level ",
        "of level ",
        "containing ",
        "that contain ",
        "that mention ",
        "mentioning ",
    ]
    .iter()
    .find_map(|l| lower.find(l).map(|k| k + l.len()))?;
    let word = request[lead..]
        .split_whitespace()
        .next()?
        .trim_matches(|c: char| !c.is_alphanumeric());
    (!word.is_empty()).then(|| word.to_string())
}

/// The column named in "add up the amount column", "the total of the
/// amount column", "sum the amount column".
fn column_asked(lower: &str) -> Option<String> {
    let sums = ["add up", "total", "sum"].iter().any(|w| lower.contains(w));
    let at = lower.find(" column")?;
    let before: Vec<&str> = lower[..at].split_whitespace().collect();
    let name = before
        .last()?
        .trim_matches(|c: char| !c.is_alphanumeric() && c != '_');
    (sums && !name.is_empty() && name != "the").then(|| name.to_string())
}

/// The sum of `column` over the rows of a simple CSV (a header, commas,
/// no quoted fields); `None` where a cell is not a number.
fn column_total(text: &str, column: &str) -> Option<f64> {
    if text.contains('"') {
        return None;
    }
    let mut lines = text.lines().filter(|l| !l.trim().is_empty());
    let header: Vec<String> = lines
        .next()?
        .split(',')
        .map(|h| h.trim().to_lowercase())
        .collect();
    let k = header.iter().position(|h| h == column)?;
    lines
        .map(|l| l.split(',').nth(k)?.trim().parse::<f64>().ok())
        .sum()
}

/// Definitions of a function in the languages a workspace mostly holds.
fn defines_in(text: &str, function: &str) -> bool {
    ["def ", "fn ", "function ", "func "].iter().any(|kw| {
        text.lines().any(|l| {
            let l = l.trim_start();
            let l = l.strip_prefix("pub ").unwrap_or(l);
            let l = l.strip_prefix("async ").unwrap_or(l);
            l.strip_prefix(kw)
                .and_then(|rest| rest.strip_prefix(function))
                .is_some_and(|rest| rest.trim_start().starts_with(['(', '<']))
        })
    })
}

/// The one file of `files` that defines the function the request names
/// between backticks or quotes.
fn defines(request: &str, files: &[String], read: &dyn Fn(&str) -> Option<String>) -> Option<Fact> {
    let function = quotes(request)
        .into_iter()
        .map(|q| q.trim_end_matches("()").to_string())
        .find(|q| !q.is_empty() && q.chars().all(|c| c.is_alphanumeric() || c == '_'))?;
    let mut found = Vec::new();
    for f in files.iter().take(200) {
        if defines_in(&read(f)?, &function) {
            found.push(f.clone());
        }
    }
    match found.as_slice() {
        [file] => Some(Fact::Defines {
            function,
            file: file.clone(),
        }),
        _ => None,
    }
}

/// Whether `answer` names `file`: its path, its last part, or that part
/// without its extension.
pub fn names(answer: &str, file: &str) -> bool {
    let lower = answer.to_lowercase();
    let last = file.rsplit('/').next().unwrap_or(file).to_lowercase();
    let stem = last.rsplit_once('.').map_or(last.as_str(), |(s, _)| s);
    lower.contains(&last) || lower.contains(stem)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn workspace() -> (Vec<String>, impl Fn(&str) -> Option<String>) {
        let files = vec![
            "data/sales.csv".to_string(),
            "logs/app.log".to_string(),
            "src/billing.py".to_string(),
            "src/shipping.py".to_string(),
        ];
        let read = |p: &str| {
            Some(
                match p {
                    "data/sales.csv" => {
                        "date,region,amount\n2026-10-01,north,120\n2026-10-02,east,35\n"
                    }
                    "logs/app.log" => {
                        "09:00 INFO ok\n09:01 WARN slow\n09:02 ERROR failed\n09:03 WARN slow\n"
                    }
                    "src/billing.py" => "def send_invoice(data):\n    return data\n",
                    "src/shipping.py" => "def count_receipt(data):\n    return data\n",
                    _ => return None,
                }
                .to_string(),
            )
        };
        (files, read)
    }

    #[test]
    fn lines_totals_and_definitions_are_read_from_the_files() {
        let (files, read) = workspace();
        let ask = |r: &str| asked(r, &files, &read);
        assert_eq!(
            ask(
                "Please read logs/app.log in my workspace and count the lines with the level WARN."
            ),
            Some(Fact::Figure(
                2.0,
                "2 lines of logs/app.log hold WARN".into()
            ))
        );
        assert_eq!(
            ask("How many lines of app.log contain \"ERROR\"?"),
            Some(Fact::Figure(
                1.0,
                "1 line of logs/app.log holds ERROR".into()
            ))
        );
        assert_eq!(
            ask("Please read data/sales.csv in my workspace and add up the amount column."),
            Some(Fact::Figure(
                155.0,
                "the amount column of data/sales.csv adds up to 155".into()
            ))
        );
        assert_eq!(
            ask("Which file defines the function `count_receipt`? Tell me the file name."),
            Some(Fact::Defines {
                function: "count_receipt".into(),
                file: "src/shipping.py".into()
            })
        );
    }

    #[test]
    fn what_cannot_be_read_whole_is_left_alone() {
        let (files, read) = workspace();
        let ask = |r: &str| asked(r, &files, &read);
        assert_eq!(
            ask("Count the lines with the level WARN in logs/old.log."),
            None
        );
        assert_eq!(ask("Add up the price column of data/sales.csv."), None);
        assert_eq!(ask("Which file defines `nothing_here`?"), None);
        assert_eq!(ask("Summarise logs/app.log for me."), None);
        let quoted = |_: &str| Some("a,\"b\"\n1,2\n".to_string());
        assert_eq!(
            asked("Add up the a column of data/sales.csv.", &files, &quoted),
            None
        );
    }

    #[test]
    fn a_file_is_named_by_its_path_its_name_or_its_stem() {
        for answer in [
            "src/shipping.py",
            "It is `shipping.py`.",
            "the shipping module",
        ] {
            assert!(names(answer, "src/shipping.py"), "{answer}");
        }
        assert!(!names(
            "The file name is `count_receipt.py`.",
            "src/shipping.py"
        ));
    }
}
