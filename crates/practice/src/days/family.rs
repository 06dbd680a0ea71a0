//! The families of a simulated day and how a task of each is made from a
//! seed and a level: the four practice families, posed as ordinary
//! requests, and three that look like desk work — questions about files
//! in the workspace (`files`), facts saved with the notes tool and recalled
//! later in the channel (`notes`), and edits the check reads back from the
//! file (`edit`). A task brings the files it is about; its checks stay with
//! the simulator.

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde::{Deserialize, Serialize};

use crate::family::{join, Family, Task, WORDS};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DayFamily {
    Arithmetic,
    Strings,
    Ledger,
    Units,
    Files,
    Notes,
    Edit,
}

impl DayFamily {
    pub const ALL: [DayFamily; 7] = [
        DayFamily::Arithmetic,
        DayFamily::Strings,
        DayFamily::Ledger,
        DayFamily::Units,
        DayFamily::Files,
        DayFamily::Notes,
        DayFamily::Edit,
    ];

    pub fn as_str(self) -> &'static str {
        match self.practice() {
            Some(f) => f.as_str(),
            None => match self {
                DayFamily::Files => "files",
                DayFamily::Notes => "notes",
                _ => "edit",
            },
        }
    }

    pub fn parse(s: &str) -> Result<DayFamily, String> {
        DayFamily::ALL
            .into_iter()
            .find(|f| f.as_str() == s.trim())
            .ok_or_else(|| {
                format!(
                    "no day family {s:?}; the families are {}",
                    DayFamily::ALL.map(DayFamily::as_str).join(", ")
                )
            })
    }

    /// The practice family this one poses, if it is one.
    pub fn practice(self) -> Option<Family> {
        match self {
            DayFamily::Arithmetic => Some(Family::Arithmetic),
            DayFamily::Strings => Some(Family::Strings),
            DayFamily::Ledger => Some(Family::Ledger),
            DayFamily::Units => Some(Family::Units),
            _ => None,
        }
    }

    /// The tools a solver of this family needs (offered alone with
    /// `family_tools`).
    pub fn tools(self) -> &'static [&'static str] {
        match self {
            DayFamily::Files => &["list_dir", "read_file", "grep", "calculator", "python"],
            DayFamily::Notes => &["notes"],
            DayFamily::Edit => &["read_file", "edit_file", "write_file"],
            practice => practice.practice().map_or(&[], Family::tools),
        }
    }

    /// The task of `seed` at `level` (1 = easiest); the same arguments
    /// always give the same task.
    pub fn task(self, seed: u64, level: u32) -> DayTask {
        let d = level.clamp(1, 8);
        if let Some(f) = self.practice() {
            let task = f.task(seed, d);
            return DayTask {
                family: self,
                seed,
                files: Vec::new(),
                steps: vec![Step {
                    request: task.prompt.clone(),
                    hidden: Hidden::Practice(task),
                    later: false,
                }],
            };
        }
        let mut rng = StdRng::seed_from_u64(seed ^ ((self as u64) << 48) ^ 0xDA75);
        let (files, steps) = match self {
            DayFamily::Files => files_task(&mut rng, d),
            DayFamily::Notes => notes_task(&mut rng, d),
            _ => edit_task(&mut rng, d),
        };
        DayTask {
            family: self,
            seed,
            files,
            steps,
        }
    }
}

impl From<Family> for DayFamily {
    fn from(f: Family) -> DayFamily {
        match f {
            Family::Arithmetic => DayFamily::Arithmetic,
            Family::Strings => DayFamily::Strings,
            Family::Ledger => DayFamily::Ledger,
            Family::Units => DayFamily::Units,
        }
    }
}

/// One task of a simulated day.
#[derive(Debug, Clone, PartialEq)]
pub struct DayTask {
    pub family: DayFamily,
    pub seed: u64,
    /// Files put in the channel's workspace just before the task is posed
    /// (relative path, contents), as a person drops files in a folder.
    pub files: Vec<(String, String)>,
    /// What the person asks, in order; each reply is checked.
    pub steps: Vec<Step>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Step {
    pub request: String,
    pub hidden: Hidden,
    /// Asked at the end of the channel, after the other tasks (a recall).
    pub later: bool,
}

/// What a reply is checked against. Only the simulator holds it.
#[derive(Debug, Clone, PartialEq)]
pub enum Hidden {
    /// The practice family's own check.
    Practice(Task),
    /// The last number of the reply.
    Number(i64),
    /// The reply names this (case-insensitive).
    Mentions(String),
    /// A note saved during the turn holds this.
    NoteSaved(String),
    /// The file holds these `key = value` lines, in order, and nothing else.
    Settings { path: String, lines: Vec<String> },
    /// The file holds exactly this text (up to trailing white space).
    Text { path: String, text: String },
}

impl Hidden {
    /// The answer, where it is something the person never wrote and the
    /// workspace does not show: it must not appear where a night reads.
    pub fn secret(&self) -> Option<String> {
        match self {
            Hidden::Practice(t) => Some(t.expected.clone()),
            Hidden::Number(n) => Some(n.to_string()),
            _ => None,
        }
    }
}

const MODULES: &[&str] = &[
    "billing", "invoices", "shipping", "reports", "users", "search", "export", "mailer", "catalog",
    "payments", "storage", "auth",
];

const VERBS: &[&str] = &[
    "parse", "load", "render", "send", "check", "merge", "build", "format", "fetch", "count",
];

const NOUNS: &[&str] = &[
    "invoice", "order", "customer", "report", "address", "receipt", "label", "refund", "token",
    "batch", "summary", "quote",
];

fn pick<'a>(rng: &mut StdRng, items: &[&'a str]) -> &'a str {
    items[rng.random_range(0..items.len())]
}

/// A small project: which module defines a function, how many log lines
/// carry a level, the total of a CSV column.
fn files_task(rng: &mut StdRng, d: u32) -> (Vec<(String, String)>, Vec<Step>) {
    match rng.random_range(0..3) {
        0 => {
            let n = (2 + d as usize).min(MODULES.len());
            let mut modules: Vec<&str> = MODULES.to_vec();
            let mut files = Vec::new();
            let mut all = Vec::new();
            for _ in 0..n {
                let m = modules.remove(rng.random_range(0..modules.len()));
                let mut body = format!("\"\"\"The {m} module.\"\"\"\n\n");
                for _ in 0..2 {
                    let name = loop {
                        let f = format!("{}_{}", pick(rng, VERBS), pick(rng, NOUNS));
                        if !all.iter().any(|(g, _): &(String, String)| *g == f) {
                            break f;
                        }
                    };
                    body.push_str(&format!("def {name}(data):\n    return data\n\n\n"));
                    all.push((name, format!("{m}.py")));
                }
                files.push((format!("src/{m}.py"), body));
            }
            let (function, file) = all[rng.random_range(0..all.len())].clone();
            let step = Step {
                request: format!(
                    "Look through the Python files in the src folder of my workspace: which file defines the function `{function}`? Tell me the file name."
                ),
                hidden: Hidden::Mentions(file),
                later: false,
            };
            (files, vec![step])
        }
        1 => {
            let n = 6 + 4 * d as usize;
            let level = pick(rng, &["ERROR", "WARN"]);
            let mut count = 0;
            let mut log = String::new();
            for i in 0..n {
                let l = match rng.random_range(0..5) {
                    0 => "ERROR",
                    1 => "WARN",
                    _ => "INFO",
                };
                count += (l == level) as i64;
                let what = match l {
                    "ERROR" => format!("{} failed", pick(rng, NOUNS)),
                    "WARN" => format!("{} slow", pick(rng, NOUNS)),
                    _ => format!("{} ok", pick(rng, NOUNS)),
                };
                log.push_str(&format!(
                    "2026-11-{:02} 09:{:02}:{:02} {l} {what}\n",
                    1 + i / 24,
                    i % 60,
                    (i * 7) % 60
                ));
            }
            let step = Step {
                request: format!(
                    "Please read logs/app.log in my workspace and count the lines with the level {level}. End your answer with the number."
                ),
                hidden: Hidden::Number(count),
                later: false,
            };
            (vec![("logs/app.log".into(), log)], vec![step])
        }
        _ => {
            let n = 2 + 2 * d as usize;
            let regions = ["north", "south", "east", "west"];
            let mut csv = String::from("date,region,amount\n");
            let mut total = 0;
            for i in 0..n {
                let amount: i64 = rng.random_range(10..400);
                total += amount;
                csv.push_str(&format!(
                    "2026-10-{:02},{},{amount}\n",
                    1 + i,
                    regions[rng.random_range(0..regions.len())]
                ));
            }
            let step = Step {
                request: "Please read data/sales.csv in my workspace and add up the amount column. End your answer with the total.".into(),
                hidden: Hidden::Number(total),
                later: false,
            };
            (vec![("data/sales.csv".into(), csv)], vec![step])
        }
    }
}

const FACTS: &[&str] = &[
    "the wifi password of the studio",
    "my locker code at the gym",
    "the name of the plumber",
    "the reference of my train ticket",
    "the colour we picked for the hallway",
    "the room of Friday's meeting",
];

/// A fact saved now and asked for at the end of the channel.
fn notes_task(rng: &mut StdRng, d: u32) -> (Vec<(String, String)>, Vec<Step>) {
    let n = (1 + d as usize / 2).min(3);
    let mut facts: Vec<&str> = FACTS.to_vec();
    let mut saved = Vec::new();
    for _ in 0..n {
        let what = facts.remove(rng.random_range(0..facts.len()));
        let value = format!(
            "{}-{}",
            WORDS[rng.random_range(0..WORDS.len())],
            rng.random_range(100..10_000)
        );
        saved.push((what, value));
    }
    let said: Vec<String> = saved.iter().map(|(w, v)| format!("{w} is {v}")).collect();
    let (what, value) = saved[rng.random_range(0..saved.len())].clone();
    let steps = vec![
        Step {
            request: format!(
                "Please save this in your notes so you remember it: {}.",
                said.join("; ")
            ),
            hidden: Hidden::NoteSaved(value.clone()),
            later: false,
        },
        Step {
            request: format!("What was {what}? I asked you to note it earlier."),
            hidden: Hidden::Mentions(value),
            later: true,
        },
    ];
    (Vec::new(), steps)
}

const SETTINGS: &[(&str, &[&str])] = &[
    ("port", &["8080", "9091", "3000", "5432"]),
    ("host", &["localhost", "0.0.0.0", "example.org"]),
    ("debug", &["true", "false"]),
    ("workers", &["2", "4", "8", "16"]),
    ("log_level", &["info", "debug", "warn"]),
    ("timeout", &["30", "60", "120"]),
];

/// Settings to change in an ini file, or a word to replace in a text file.
fn edit_task(rng: &mut StdRng, d: u32) -> (Vec<(String, String)>, Vec<Step>) {
    if rng.random_bool(0.5) {
        let mut lines: Vec<(String, String)> = SETTINGS
            .iter()
            .map(|(k, vs)| (k.to_string(), pick(rng, vs).to_string()))
            .collect();
        let before: String = lines.iter().map(|(k, v)| format!("{k} = {v}\n")).collect();
        let changes = (d as usize).clamp(1, 3);
        let mut asked = Vec::new();
        let mut keys: Vec<usize> = (0..lines.len()).collect();
        for _ in 0..changes {
            let i = keys.remove(rng.random_range(0..keys.len()));
            let choices: Vec<&str> = SETTINGS[i]
                .1
                .iter()
                .copied()
                .filter(|v| *v != lines[i].1)
                .collect();
            let v = pick(rng, &choices).to_string();
            asked.push(format!("`{}` to {v}", lines[i].0));
            lines[i].1 = v;
        }
        let path = "config/app.ini".to_string();
        let step = Step {
            request: format!(
                "Open config/app.ini in my workspace and change {}. Leave the other settings as they are.",
                join(&asked)
            ),
            hidden: Hidden::Settings {
                path: path.clone(),
                lines: lines.iter().map(|(k, v)| format!("{k} = {v}")).collect(),
            },
            later: false,
        };
        (vec![(path, before)], vec![step])
    } else {
        let (old, new) = [
            ("Acme", "Globex"),
            ("Tuesday", "Thursday"),
            ("Berlin", "Lisbon"),
        ][rng.random_range(0..3)];
        let n = 2 + d as usize;
        let mut text = String::from("# Team notes\n\n");
        for i in 0..n {
            let line = match (i + rng.random_range(0..3)) % 3 {
                0 => format!(
                    "- The {} review with {old} is on the agenda.\n",
                    pick(rng, NOUNS)
                ),
                1 => format!("- Send the {} before the call.\n", pick(rng, NOUNS)),
                _ => format!("- {old} asked about the {}.\n", pick(rng, NOUNS)),
            };
            text.push_str(&line);
        }
        if !text.contains(old) {
            text.push_str(&format!("- Next visit: {old}.\n"));
        }
        let path = "docs/notes.md".to_string();
        let step = Step {
            request: format!(
                "Open docs/notes.md in my workspace and replace every \"{old}\" with \"{new}\"; change nothing else."
            ),
            hidden: Hidden::Text {
                path: path.clone(),
                text: text.replace(old, new),
            },
            later: false,
        };
        (vec![(path, text)], vec![step])
    }
}
