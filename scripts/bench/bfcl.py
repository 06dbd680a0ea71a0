"""BFCL's AST-checked categories against one OpenAI-compatible server.

Each case's functions are turned into OpenAI tools by bfcl_eval's own
converter, the question is sent with `tools` (greedy, a fixed seed), the
reply's tool calls are decoded and graded by bfcl_eval's own AST checker.
Prints one JSON object: per category the cases run, accuracy, the share of
replies that wrote a call the server did not return as a tool call
(unparsed), the share with no call at all, request errors and seconds per
case (and, with `--cases FILE`, one JSON line per case: the question,
the reply, the calls and the checker's verdict). A call written into the
text is also read from it and graded
(`text_accuracy`: what a client that parses the reply's text itself would
get), so a server that leaves calls in the text is not scored on its
parser alone.

    python bfcl.py --base-url http://127.0.0.1:8080/v1 --api-key KEY \
        --model M --categories live_simple,live_multiple --limit 100
"""

import argparse
import json
import sys
import time
from pathlib import Path

import bfcl_eval
import openai
from bfcl_eval.constants.enums import Language, ModelStyle
from bfcl_eval.constants.type_mappings import GORILLA_TO_OPENAPI
from bfcl_eval.eval_checker.ast_eval.ast_checker import ast_checker
from bfcl_eval.model_handler.utils import convert_to_tool
from written_calls import calls_in_text

# A function-calling model of the checker's table whose tool names use "_"
# for ".", as OpenAI-style tools must: the checker maps them back.
CHECKER_MODEL = "gpt-4o-2024-11-20-FC"

def load(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def run_category(client, model, category, limit, seed, max_tokens, log):
    data = Path(bfcl_eval.__file__).parent / "data"
    cases = load(data / f"BFCL_v4_{category}.json")[:limit]
    answers = {
        a["id"]: a["ground_truth"]
        for a in load(data / "possible_answer" / f"BFCL_v4_{category}.json")
    }
    tally = {"correct": 0, "text_correct": 0, "unparsed": 0, "no_call": 0, "errors": 0}

    def check(decoded):
        result = ast_checker(
            case["function"],
            decoded,
            answers[case["id"]],
            Language.PYTHON,
            category,
            CHECKER_MODEL,
        )
        return result

    seconds = 0.0
    for i, case in enumerate(cases):
        # Already in the OpenAI shape: {"type": "function", "function": ...}.
        tools = convert_to_tool(
            case["function"], GORILLA_TO_OPENAPI, ModelStyle.OPENAI_COMPLETIONS
        )
        started = time.time()
        try:
            reply = client.chat.completions.create(
                model=model,
                messages=case["question"][0],
                tools=tools,
                temperature=0,
                seed=seed,
                max_tokens=max_tokens,
            )
        except openai.APIError as e:
            seconds += time.time() - started
            tally["errors"] += 1
            print(f"{case['id']}: {str(e)[:300]}", file=sys.stderr)
            continue
        seconds += time.time() - started
        message = reply.choices[0].message
        calls = message.tool_calls or []
        seen = {"id": case["id"], "question": case["question"][0][-1]["content"],
                "content": message.content,
                "calls": [[c.function.name, c.function.arguments] for c in calls]}
        if not calls:
            # A call the server did not return is one a reader of the text
            # finds (a reply that only mentions "name": is not one).
            from_text = calls_in_text(message.content or "")
            seen["verdict"] = "unparsed" if from_text else "no_call"
            tally[seen["verdict"]] += 1
            tally["text_correct"] += bool(from_text) and check(from_text)["valid"]
        else:
            try:
                decoded = [{c.function.name: json.loads(c.function.arguments)} for c in calls]
            except (json.JSONDecodeError, TypeError):
                decoded = None
                seen["verdict"] = "unparsed"
                tally["unparsed"] += 1
            if decoded is not None:
                result = check(decoded)
                seen["verdict"] = "right" if result["valid"] else "wrong"
                seen["why"] = result.get("error")
                tally["correct"] += result["valid"]
                tally["text_correct"] += result["valid"]
        if log:
            log.write(json.dumps(seen) + "\n")
            log.flush()
        if (i + 1) % 20 == 0:
            print(f"{category}: {i + 1}/{len(cases)}", file=sys.stderr)
    n = max(len(cases), 1)
    return {
        "cases": len(cases),
        "correct": tally["correct"],
        "accuracy": tally["correct"] / n,
        "text_correct": tally["text_correct"],
        "text_accuracy": tally["text_correct"] / n,
        "unparsed_share": tally["unparsed"] / n,
        "no_call_share": tally["no_call"] / n,
        "errors": tally["errors"],
        "seconds_per_case": seconds / n,
    }


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--base-url", required=True)
    ap.add_argument("--api-key", default="none")
    ap.add_argument("--model", default="default")
    ap.add_argument("--categories", default="live_simple,live_multiple")
    ap.add_argument("--limit", type=int, default=100)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--max-tokens", type=int, default=512)
    ap.add_argument("--cases", help="write one JSON line per case here")
    a = ap.parse_args()
    log = open(a.cases, "w") if a.cases else None
    client = openai.OpenAI(
        base_url=a.base_url, api_key=a.api_key, timeout=900, max_retries=0
    )
    out = {
        c: run_category(client, a.model, c, a.limit, a.seed, a.max_tokens, log)
        for c in a.categories.split(",")
        if c
    }
    print(json.dumps(out))


if __name__ == "__main__":
    main()
