// What the chat shows: stored messages and live events folded into one list
// of items. Pure functions, unit-tested; the components only render.
import { stopReason } from "../format";
import type { ChatEvent, MessageView } from "../types";

export type Item =
  | { kind: "user"; id: number | null; text: string }
  | {
      kind: "assistant";
      id: number | null;
      text: string;
      streaming: boolean;
      stop: string | null;
      /** The person's 👍 (true) or 👎 (false). */
      rating: boolean | null;
    }
  | {
      kind: "tool";
      callId: string;
      name: string;
      arguments: string;
      result: string | null;
      ok: boolean | null;
    }
  | { kind: "notice"; text: string }
  | { kind: "stray"; unintended: boolean }
  | { kind: "attachment"; blob: string; name: string; image: boolean }
  | { kind: "error"; text: string };

const TOOL_BLOCK = /<tool_call>[\s\S]*?(<\/tool_call>|$)/g;
const THINK_BLOCK = /<think>[\s\S]*?(<\/think>|$)/g;

/** The reply as a person reads it: tool-call markup (shown as cards) and
 * reasoning are taken out. */
export function visibleText(text: string): string {
  return text.replace(TOOL_BLOCK, "").replace(THINK_BLOCK, "").trim();
}

/** A reply that was nothing but a bare tool call (`{"name": ...}`, maybe in
 * a json fence), which small models write instead of the markup: its card
 * says it all. */
export function isBareCall(text: string): boolean {
  const body = visibleText(text).replace(/^```(json)?\s*/, "").replace(/```$/, "").trim();
  if (!body.startsWith("{") || !body.endsWith("}")) return false;
  try {
    const v = JSON.parse(body) as Record<string, unknown>;
    return typeof v === "object" && v !== null && "name" in v;
  } catch {
    return false;
  }
}

export function historyToItems(messages: MessageView[]): Item[] {
  const items: Item[] = [];
  for (const m of messages) {
    if (m.role === "user") items.push({ kind: "user", id: m.id, text: m.text });
    if (m.role === "assistant") {
      const text = m.tool_calls.length > 0 && isBareCall(m.text) ? "" : visibleText(m.text);
      if (text || m.tool_calls.length === 0) {
        items.push({ kind: "assistant", id: m.id, text, streaming: false, stop: null, rating: m.feedback });
      }
      for (const t of m.tool_calls) {
        items.push({
          kind: "tool",
          callId: t.call_id,
          name: t.name,
          arguments: t.arguments,
          result: t.result,
          ok: t.ok,
        });
        for (const a of t.attachments ?? []) items.push({ kind: "attachment", ...a });
      }
      if (m.stray_end) items.push({ kind: "stray", unintended: true });
    }
  }
  return items;
}

/** A reply as it starts to stream. */
export function streamingReply(text = ""): Item {
  return { kind: "assistant", id: null, text, streaming: true, stop: null, rating: null };
}

/** Whether item `k` is a finished reply that ends the agent's turn (the
 * reply a person rates): nothing but tool cards and notes follow it before
 * the next message. */
export function endsTurn(items: Item[], k: number): boolean {
  const it = items[k];
  if (it?.kind !== "assistant" || it.id == null || it.streaming) return false;
  for (const next of items.slice(k + 1)) {
    if (next.kind === "user") return true;
    if (next.kind === "assistant" || next.kind === "tool") return false;
  }
  return true;
}

/** The list with reply `id` rated `good` (null takes the rating back). */
export function rate(items: Item[], id: number, good: boolean | null): Item[] {
  return items.map((it) => (it.kind === "assistant" && it.id === id ? { ...it, rating: good } : it));
}

function lastStreaming(items: Item[]): number {
  for (let i = items.length - 1; i >= 0; i--) {
    const it = items[i];
    if (it.kind === "assistant" && it.streaming) return i;
    if (it.kind === "user" || (it.kind === "assistant" && !it.streaming)) return -1;
  }
  return -1;
}

/** Folds one live event into the list; returns a new list. */
export function applyEvent(items: Item[], ev: ChatEvent): Item[] {
  const out = items.slice();
  const i = lastStreaming(out);
  switch (ev.type) {
    case "token": {
      if (i >= 0) {
        const it = out[i] as Extract<Item, { kind: "assistant" }>;
        out[i] = { ...it, text: it.text + ev.piece };
      } else {
        out.push(streamingReply(ev.piece));
      }
      return out;
    }
    case "tool_call_started":
      if (i >= 0) {
        const it = out[i] as Extract<Item, { kind: "assistant" }>;
        out[i] = { ...it, streaming: false, text: isBareCall(it.text) ? "" : it.text };
      }
      out.push({
        kind: "tool",
        callId: ev.call_id,
        name: ev.name,
        arguments: ev.arguments,
        result: null,
        ok: null,
      });
      return out;
    case "tool_call_finished": {
      // The model reads the result and goes on: the turn stays open.
      const done = out.map((it) =>
        it.kind === "tool" && it.callId === ev.call_id ? { ...it, result: ev.result, ok: ev.ok } : it,
      );
      if (!done.some((it) => it.kind === "tool" && it.ok === null)) {
        done.push(streamingReply());
      }
      return done;
    }
    case "attachment":
      out.push({ kind: "attachment", blob: ev.blob, name: ev.name, image: ev.image });
      return out;
    case "notice":
      out.push({ kind: "notice", text: ev.text });
      return out;
    case "turn_end": {
      const stop = stopReason(ev.reason);
      if (i >= 0) {
        out[i] = { ...(out[i] as Extract<Item, { kind: "assistant" }>), streaming: false, stop, id: ev.message };
      } else if (stop) {
        out.push({ kind: "notice", text: stop });
      }
      return out;
    }
    case "stray_end":
      if (i >= 0) out[i] = { ...(out[i] as Extract<Item, { kind: "assistant" }>), streaming: false };
      out.push({ kind: "stray", unintended: ev.unintended });
      return out;
    case "error":
      if (i >= 0) out[i] = { ...(out[i] as Extract<Item, { kind: "assistant" }>), streaming: false };
      out.push({ kind: "error", text: ev.message });
      return out;
  }
}

/** Whether a turn is still going (its reply has not ended). */
export function isBusy(items: Item[]): boolean {
  return lastStreaming(items) >= 0 || items.some((it) => it.kind === "tool" && it.ok === null);
}
