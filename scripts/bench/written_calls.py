"""Tool calls a model wrote into its reply's text, read back as BFCL's
checker takes them ({name: arguments}), for servers that leave calls in
the text instead of returning them as tool calls."""

import json
import re


def calls_in_text(text):
    """The calls a reply wrote as text: `<tool_call>` blocks (Hermes and
    Qwen), else every JSON object (or list of them) with a name and
    arguments, as {name: arguments} like the checker takes."""
    blocks = re.findall(r"<tool_call>(.*?)(?:</tool_call>|$)", text, re.S)
    sources = blocks or [text]
    decoder = json.JSONDecoder()
    found = []
    for source in sources:
        i = 0
        while i < len(source):
            if source[i] not in "{[":
                i += 1
                continue
            try:
                value, end = decoder.raw_decode(source, i)
            except json.JSONDecodeError:
                i += 1
                continue
            for v in value if isinstance(value, list) else [value]:
                if not isinstance(v, dict):
                    continue
                v = v.get("function", v)
                args = v.get("arguments", v.get("parameters"))
                if isinstance(args, str):
                    try:
                        args = json.loads(args)
                    except json.JSONDecodeError:
                        args = None
                if isinstance(v.get("name"), str) and isinstance(args, dict):
                    found.append({v["name"]: args})
            i = end
    return found
