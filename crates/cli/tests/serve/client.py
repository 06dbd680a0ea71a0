"""The official openai SDK against `reverie serve`: prints one JSON object
with what each check saw; the Rust test asserts on it."""
import json
import sys
import threading

import openai

base, token, model = sys.argv[1], sys.argv[2], sys.argv[3]
client = openai.OpenAI(base_url=base, api_key=token, max_retries=0, timeout=300)
out = {}

out["models"] = [m.id for m in client.models.list().data]

r = client.chat.completions.create(
    model=model,
    messages=[{"role": "user", "content": "Say hello in one word."}],
    max_tokens=16,
    temperature=0,
)
out["plain"] = {
    "content": r.choices[0].message.content,
    "finish": r.choices[0].finish_reason,
    "usage": [r.usage.prompt_tokens, r.usage.completion_tokens, r.usage.total_tokens],
}

chunks = list(
    client.chat.completions.create(
        model=model,
        messages=[{"role": "user", "content": "Count from 1 to 5."}],
        max_tokens=24,
        temperature=0,
        stream=True,
    )
)
out["stream"] = {
    "text": "".join(c.choices[0].delta.content or "" for c in chunks if c.choices),
    "finish": [c.choices[0].finish_reason for c in chunks if c.choices][-1],
    "ids": len({c.id for c in chunks}),
}

weather = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Current weather in a city",
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string"}},
                "required": ["city"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "add",
            "description": "Add two numbers",
            "parameters": {
                "type": "object",
                "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
                "required": ["a", "b"],
            },
        },
    },
]


def calls(r):
    m = r.choices[0].message
    return [(c.function.name, json.loads(c.function.arguments)) for c in (m.tool_calls or [])], r.choices[0].finish_reason


ask = [{"role": "user", "content": "What is the weather in Paris right now?"}]
out["auto"] = calls(client.chat.completions.create(model=model, messages=ask, tools=weather, max_tokens=96, temperature=0))
out["required"] = calls(
    client.chat.completions.create(model=model, messages=ask, tools=weather, tool_choice="required", max_tokens=96, temperature=0)
)
out["named"] = calls(
    client.chat.completions.create(
        model=model,
        messages=[{"role": "user", "content": "What is 2 plus 3?"}],
        tools=weather,
        tool_choice={"type": "function", "function": {"name": "add"}},
        max_tokens=96,
        temperature=0,
    )
)
out["none"] = calls(client.chat.completions.create(model=model, messages=ask, tools=weather, tool_choice="none", max_tokens=24, temperature=0))

streamed_call = list(
    client.chat.completions.create(model=model, messages=ask, tools=weather, tool_choice="required", max_tokens=96, temperature=0, stream=True)
)
deltas = [c.choices[0].delta for c in streamed_call if c.choices]
out["stream_call"] = [t.function.name for d in deltas for t in (d.tool_calls or [])]

r = client.chat.completions.create(
    model=model,
    messages=[{"role": "user", "content": "Give a city and its population."}],
    response_format={
        "type": "json_schema",
        "json_schema": {
            "name": "city",
            "schema": {
                "type": "object",
                "properties": {"city": {"type": "string"}, "population": {"type": "integer"}},
                "required": ["city", "population"],
            },
        },
    },
    max_tokens=96,
    temperature=0,
)
out["json"] = r.choices[0].message.content


def error(fn):
    try:
        fn()
        return None
    except openai.APIStatusError as e:
        return [e.status_code, type(e).__name__, (e.body or {}).get("code") if isinstance(e.body, dict) else None]


msg = [{"role": "user", "content": "hi"}]
out["errors"] = {
    "key": error(lambda: openai.OpenAI(base_url=base, api_key="wrong", max_retries=0).models.list()),
    "model": error(lambda: client.chat.completions.create(model="gpt-4o", messages=msg)),
    "temperature": error(lambda: client.chat.completions.create(model=model, messages=msg, temperature=7)),
    "overflow": error(
        lambda: client.chat.completions.create(model=model, messages=[{"role": "user", "content": "word " * 6000}], max_tokens=4)
    ),
}

# Concurrent streaming clients: every reply whole and its own.
results = {}


def worker(k):
    got = []
    for i in range(int(sys.argv[4])):
        s = client.chat.completions.create(
            model=model,
            messages=[{"role": "user", "content": f"Reply with the number {k * 100 + i}."}],
            max_tokens=8,
            temperature=0,
            stream=True,
            user=f"client-{k}",
        )
        cs = list(s)
        got.append({"ids": len({c.id for c in cs}), "finished": any(c.choices and c.choices[0].finish_reason for c in cs)})
    results[k] = got


threads = [threading.Thread(target=worker, args=(k,)) for k in range(int(sys.argv[5]))]
for t in threads:
    t.start()
for t in threads:
    t.join()
out["concurrent"] = [g for k in sorted(results) for g in results[k]]
print(json.dumps(out))
