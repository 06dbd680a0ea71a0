//! `reverie bench tools` grades calls a reference server left in its
//! reply's text by reading them back (scripts/bench/written_calls.py):
//! Hermes blocks, fenced and bare JSON, lists, string arguments; text
//! without a call gives none.

use std::path::Path;
use std::process::Command;

#[test]
fn calls_written_as_text_are_read_back() {
    let scripts = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/bench");
    let check = r#"
import json
from written_calls import calls_in_text as f
cases = [
    ('<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>',
     [{"get_weather": {"city": "Paris"}}]),
    ('<tool_call>{"name": "a", "arguments": {"x": 1}}</tool_call><tool_call>{"name": "b", "arguments": {}}',
     [{"a": {"x": 1}}, {"b": {}}]),
    ('```json\n{"name": "a", "arguments": {"x": 1}}\n```\nthen {"name": "b", "parameters": {"y": 2}}',
     [{"a": {"x": 1}}, {"b": {"y": 2}}]),
    ('[{"name": "a", "arguments": "{\\"x\\": 1}"}]', [{"a": {"x": 1}}]),
    ('{"type": "function", "function": {"name": "a", "arguments": {"x": 1}}}', [{"a": {"x": 1}}]),
    ('no call here {"foo": 1} and {"name": "a"} and {"name": "b", "arguments": "not json"}', []),
    ('{"name": "a", "arguments": {"x": 1}', []),
]
for text, want in cases:
    got = f(text)
    assert got == want, (text, got, want)
print(len(cases))
"#;
    let out = Command::new("python3")
        .arg("-c")
        .arg(check)
        .current_dir(&scripts)
        .output()
        .expect("python3 runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "7");
}
