//! llama.cpp's chat layer through Reverie's shim, on tiny synthetic models
//! that carry real chat templates: the ones llama.cpp keeps for its own
//! tests (`models/templates`), read from the llama-cpp-python source
//! package on the package registry.

use std::path::{Path, PathBuf};
use std::process::Command;

use reverie_core::{ChannelId, SamplingParams, StopReason};
use reverie_gguf::synth::{self, Arch, SynthConfig};
use reverie_infer::{
    ChatParams, ChatRequest, ChatTemplates, Constraint, Engine, EngineConfig, GenerateRequest,
    ToolChoice,
};
use serde_json::{json, Value};

/// The source package the templates come from, pinned so that a test run
/// always reads the same files.
const TEMPLATE_PACKAGE: &str = "llama-cpp-python==0.3.36";

/// The folder of real chat templates, unpacked on first use into a folder
/// kept between test runs.
fn templates() -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("llama-templates");
    if dir.join("Qwen-Qwen2.5-7B-Instruct.jinja").is_file() {
        return dir;
    }
    let download = tempfile::tempdir().unwrap();
    let out = Command::new("python3")
        .args([
            "-m",
            "pip",
            "download",
            "--quiet",
            "--no-deps",
            "--no-binary",
            ":all:",
        ])
        .args(["--disable-pip-version-check", "-d"])
        .arg(download.path())
        .arg(TEMPLATE_PACKAGE)
        .output()
        .expect("python3 -m pip runs");
    assert!(
        out.status.success(),
        "could not download {TEMPLATE_PACKAGE} (the chat templates): {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let sdist = std::fs::read_dir(download.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.to_string_lossy().ends_with(".tar.gz"))
        .expect("a source archive");
    let unpack = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let status = Command::new("tar")
        .arg("xzf")
        .arg(&sdist)
        .arg("-C")
        .arg(unpack.path())
        .args(["--wildcards", "*/vendor/llama.cpp/models/templates/*.jinja"])
        .status()
        .unwrap();
    assert!(status.success(), "tar could not unpack {}", sdist.display());
    let found = std::fs::read_dir(unpack.path())
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path()
        .join("vendor/llama.cpp/models/templates");
    // Another test may have unpacked them meanwhile.
    if std::fs::rename(&found, &dir).is_err() {
        assert!(dir.join("Qwen-Qwen2.5-7B-Instruct.jinja").is_file());
    }
    dir
}

fn template(name: &str) -> String {
    std::fs::read_to_string(templates().join(name)).unwrap()
}

/// A tiny random-weight model carrying `template`.
fn model_with(dir: &Path, template: &str) -> Engine {
    let path = dir.join("model.gguf");
    let mut cfg = SynthConfig::tiny(Arch::Qwen2);
    cfg.chat_template = template.to_string();
    synth::write(&path, &cfg).unwrap();
    let config = EngineConfig {
        slots: 1,
        n_ctx: 4096,
        threads: 1,
        ..EngineConfig::default()
    };
    Engine::load(&path, config).unwrap()
}

fn weather_tool() -> Value {
    json!({"type": "function", "function": {
        "name": "get_weather",
        "description": "Today's weather in a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
    }})
}

fn request(messages: Vec<Value>, add_generation_prompt: bool) -> ChatRequest {
    ChatRequest {
        messages,
        tools: vec![weather_tool()],
        add_generation_prompt,
        enable_thinking: true,
        ..Default::default()
    }
}

fn question() -> Vec<Value> {
    vec![
        json!({"role": "system", "content": "Be brief."}),
        json!({"role": "user", "content": "What is the weather in Paris?"}),
    ]
}

/// What the template writes for an assistant turn (the text the model is
/// trained to produce), without the turn's end.
fn as_the_template_writes_it(engine: &Engine, asked: &ChatParams, assistant: Value) -> String {
    let turn = |assistant: Value| {
        let mut m = question();
        m.push(assistant);
        engine.chat_params(&request(m, false)).unwrap().prompt
    };
    let written = turn(assistant);
    let plain = turn(json!({"role": "assistant", "content": "MARKER"}));
    let end_of_turn = plain.rsplit_once("MARKER").unwrap().1;
    let reply = written
        .strip_prefix(asked.prompt.as_str())
        .expect("the template extends the prompt with the reply");
    reply.strip_suffix(end_of_turn).unwrap_or(reply).to_string()
}

fn weather_call() -> Value {
    json!({"role": "assistant", "content": "", "tool_calls": [{
        "type": "function", "id": "a1b2c3d4e",
        "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}
    }]})
}

/// Families whose templates describe tools, and whether llama.cpp gives a
/// grammar for their calls.
const FAMILIES: &[(&str, bool)] = &[
    ("Qwen-Qwen2.5-7B-Instruct.jinja", true),
    ("Qwen-Qwen3-0.6B.jinja", true),
    ("NousResearch-Hermes-3-Llama-3.1-8B-tool_use.jinja", true),
    ("meetkai-functionary-medium-v3.2.jinja", true),
    ("openai-gpt-oss-120b.jinja", true),
    ("mistralai-Mistral-Nemo-Instruct-2407.jinja", true),
    // llama.cpp reads Llama 3.x calls but has no grammar for them.
    ("meta-llama-Llama-3.1-8B-Instruct.jinja", false),
    ("meta-llama-Llama-3.2-3B-Instruct.jinja", false),
];

#[test]
fn every_family_renders_its_tools_and_reads_its_own_calls_back() {
    for &(file, has_grammar) in FAMILIES {
        let dir = tempfile::tempdir().unwrap();
        let engine = model_with(dir.path(), &template(file));
        assert!(engine.renders_tools(), "{file}: tools not rendered");
        let asked = engine.chat_params(&request(question(), true)).unwrap();
        assert!(
            asked.prompt.contains("get_weather") && asked.prompt.contains("Paris?"),
            "{file}: {}",
            asked.prompt
        );
        assert_eq!(
            !asked.grammar.is_empty(),
            has_grammar,
            "{file}: grammar {}",
            asked.grammar
        );
        if has_grammar {
            assert!(asked.grammar.contains("get_weather"), "{file}");
            assert!(asked.grammar_lazy, "{file}: free text stays free");
        }
        // Mistral's template renders the whole history anew (call ids);
        // its calls are read below from its own syntax instead.
        if file.starts_with("mistralai") {
            continue;
        }
        let reply = as_the_template_writes_it(&engine, &asked, weather_call());
        let parsed = asked.reply_parser().parse(&reply, false).unwrap();
        assert_eq!(
            parsed.tool_calls.len(),
            1,
            "{file}: {reply:?} -> {parsed:?}"
        );
        let call = &parsed.tool_calls[0];
        assert_eq!(call.name, "get_weather", "{file}");
        let args: Value = serde_json::from_str(&call.arguments).unwrap();
        assert_eq!(args, json!({"city": "Paris"}), "{file}");
        // A plain answer is content, not a call.
        let plain = json!({"role": "assistant", "content": "It is sunny."});
        let answer = asked
            .reply_parser()
            .parse(&as_the_template_writes_it(&engine, &asked, plain), false)
            .unwrap_or_else(|e| panic!("{file}: {e}"));
        assert!(answer.tool_calls.is_empty(), "{file}: {answer:?}");
        assert!(
            answer.content.contains("It is sunny."),
            "{file}: {answer:?}"
        );
    }
    let dir = tempfile::tempdir().unwrap();
    let engine = model_with(
        dir.path(),
        &template("mistralai-Mistral-Nemo-Instruct-2407.jinja"),
    );
    let asked = engine.chat_params(&request(question(), true)).unwrap();
    let parsed = asked
        .reply_parser()
        .parse(
            "[TOOL_CALLS][{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}, \"id\": \"a1b2c3d4e\"}]",
            false,
        )
        .unwrap();
    assert_eq!(parsed.tool_calls[0].name, "get_weather");
}

/// The prompt llama.cpp renders equals the one Python's Jinja renders from
/// the same template (as Hugging Face's tokenizers do), tools included.
#[test]
fn prompts_equal_the_reference_jinja_renderer() {
    const RENDER: &str = r#"
import json, sys
from datetime import datetime
import jinja2
src, data = sys.argv[1], json.loads(sys.argv[2])
env = jinja2.Environment(trim_blocks=True, lstrip_blocks=True, extensions=["jinja2.ext.loopcontrols"])
def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)
def raise_exception(msg):
    raise jinja2.exceptions.TemplateError(msg)
env.filters["tojson"] = tojson
env.globals["raise_exception"] = raise_exception
env.globals["strftime_now"] = lambda f: datetime.now().strftime(f)
sys.stdout.write(env.from_string(open(src).read()).render(**data))
"#;
    for file in [
        "Qwen-Qwen2.5-7B-Instruct.jinja",
        "NousResearch-Hermes-3-Llama-3.1-8B-tool_use.jinja",
        "meta-llama-Llama-3.2-3B-Instruct.jinja",
    ] {
        let dir = tempfile::tempdir().unwrap();
        let engine = model_with(dir.path(), &template(file));
        let ours = engine
            .chat_params(&request(question(), true))
            .unwrap()
            .prompt;
        let data = json!({
            "messages": question(), "tools": [weather_tool()],
            "add_generation_prompt": true, "bos_token": "<s>", "eos_token": "<|im_end|>",
        });
        let out = Command::new("python3")
            .args(["-c", RENDER])
            .arg(templates().join(file))
            .arg(data.to_string())
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{file}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(ours, String::from_utf8_lossy(&out.stdout), "{file}");
    }
}

#[test]
fn a_template_llama_cpp_cannot_read_is_a_clear_error() {
    let err = ChatTemplates::new("{% for m in messages %}{{ m.content }", "<s>", "</s>")
        .err()
        .expect("an unclosed tag is refused");
    assert!(
        err.to_string().contains("cannot read this chat template"),
        "{err}"
    );
    // A model whose template has no tools keeps Reverie's own tool prompt.
    let dir = tempfile::tempdir().unwrap();
    let engine = model_with(dir.path(), &template("google-gemma-2-2b-it.jinja"));
    assert!(!engine.renders_tools());
}

fn forecast_tool() -> Value {
    json!({"type": "function", "function": {
        "name": "forecast",
        "description": "The forecast",
        "parameters": {"type": "object", "properties": {
            "unit": {"type": "string", "enum": ["c", "f"]},
            "days": {"type": "integer", "minimum": 1, "maximum": 9}
        }, "required": ["unit", "days"]}
    }})
}

fn sampled(
    engine: &Engine,
    prompt: &[i32],
    seed: u32,
    max_tokens: usize,
    constraint: Option<Constraint>,
) -> (String, Vec<i32>, StopReason) {
    let params = SamplingParams {
        temperature: 1.0,
        top_p: 1.0,
        top_k: 0,
        seed,
        max_tokens,
    };
    let mut req = GenerateRequest::new(ChannelId(1), prompt.to_vec(), params);
    if let Some(c) = constraint {
        req = req.with_constraint(c);
    }
    let out = engine.generate(req).unwrap().complete().unwrap();
    (out.text, out.ids, out.reason)
}

/// `gbnf` awake from the first token, holding one call (of one or more
/// calls, comma-separated: the format's parallel calls).
fn awake(gbnf: &str) -> Constraint {
    let forced: String = gbnf
        .lines()
        .map(|l| match l.starts_with("root ::= ") {
            true => "root ::= tool-call\n".to_string(),
            false => format!("{l}\n"),
        })
        .collect();
    Constraint::Gbnf(forced)
}

/// A random-weight model made to open a call writes only calls to the
/// offered tool with arguments its schema allows; left free (the grammar
/// asleep), it writes exactly what it writes without one.
#[test]
fn the_lazy_grammar_holds_calls_to_the_schema_and_leaves_free_text_alone() {
    let dir = tempfile::tempdir().unwrap();
    let engine = model_with(dir.path(), &template("Qwen-Qwen2.5-7B-Instruct.jinja"));
    let mut t = reverie_infer::Transcript::default();
    t.tools = vec![forecast_tool()];
    engine
        .extend_transcript(
            &mut t,
            &[reverie_infer::ChatMessage::new(
                reverie_core::MessageRole::User,
                "Forecast?",
            )],
        )
        .unwrap();
    let calling = engine
        .tool_calling(&t, &[forecast_tool()], ToolChoice::Auto)
        .unwrap();
    let Some(Constraint::Lazy { gbnf, .. }) = calling.constraint.clone() else {
        panic!("a lazy grammar: {:?}", calling.constraint)
    };
    let forced = awake(&gbnf);
    let (mut calls, mut cut) = (0, 0);
    for seed in 0..200 {
        // The grammar awake from the first token: the model must call.
        let (text, _, reason) = sampled(&engine, &t.tokens.ids, seed, 1500, Some(forced.clone()));
        let partial = reason == StopReason::MaxTokens;
        cut += usize::from(partial);
        let parsed = calling.parser.parse(&text, partial).unwrap();
        assert!(
            !parsed.tool_calls.is_empty() || partial,
            "seed {seed}: {text:?}"
        );
        for c in parsed.tool_calls {
            assert_eq!(c.name, "forecast", "seed {seed}");
            if partial {
                continue;
            }
            let args: Value = serde_json::from_str(&c.arguments).unwrap();
            assert!(
                ["c", "f"].contains(&args["unit"].as_str().unwrap()),
                "seed {seed}: {args}"
            );
            assert!(
                (1..=9).contains(&args["days"].as_i64().unwrap()),
                "seed {seed}: {args}"
            );
            assert_eq!(args.as_object().unwrap().len(), 2, "seed {seed}: {args}");
            calls += 1;
        }
    }
    assert!(
        calls >= 190 && cut <= 10,
        "{calls} complete calls, {cut} replies cut off, over 200 seeds"
    );
    for seed in 0..200 {
        let free = sampled(&engine, &t.tokens.ids, seed, 48, None);
        let lazy = sampled(&engine, &t.tokens.ids, seed, 48, calling.constraint.clone());
        assert_eq!(
            free.1, lazy.1,
            "seed {seed}: the sleeping grammar changed free text"
        );
    }
}

/// A tool whose arguments are one of two whole objects (python's `code` or
/// `path`): a model made to call it writes one alternative, never both.
#[test]
fn a_call_holds_to_one_alternative_of_its_schema() {
    let dir = tempfile::tempdir().unwrap();
    let engine = model_with(dir.path(), &template("Qwen-Qwen2.5-7B-Instruct.jinja"));
    let code = json!({"type": "string", "maxLength": 8});
    let path = json!({"type": "string", "maxLength": 8});
    let tool = json!({"type": "function", "function": {
        "name": "python",
        "description": "Run Python",
        "parameters": {
            "type": "object",
            "properties": {"code": code, "path": path},
            "oneOf": [
                {"type": "object", "properties": {"code": code}, "required": ["code"]},
                {"type": "object", "properties": {"path": path}, "required": ["path"]}
            ]
        }
    }});
    let mut t = reverie_infer::Transcript::default();
    t.tools = vec![tool.clone()];
    engine
        .extend_transcript(
            &mut t,
            &[reverie_infer::ChatMessage::new(
                reverie_core::MessageRole::User,
                "Run it",
            )],
        )
        .unwrap();
    let calling = engine.tool_calling(&t, &[tool], ToolChoice::Auto).unwrap();
    let Some(Constraint::Lazy { gbnf, .. }) = calling.constraint.clone() else {
        panic!("a lazy grammar: {:?}", calling.constraint)
    };
    let forced = awake(&gbnf);
    let mut seen = std::collections::BTreeSet::new();
    for seed in 0..60 {
        let (text, _, reason) = sampled(&engine, &t.tokens.ids, seed, 400, Some(forced.clone()));
        if reason == StopReason::MaxTokens {
            continue;
        }
        for c in calling.parser.parse(&text, false).unwrap().tool_calls {
            let args: Value = serde_json::from_str(&c.arguments).unwrap();
            let keys: Vec<&String> = args.as_object().unwrap().keys().collect();
            assert_eq!(keys.len(), 1, "seed {seed}: {args}");
            seen.insert(keys[0].clone());
        }
    }
    assert_eq!(seen.len(), 2, "both alternatives are reachable: {seen:?}");
}
