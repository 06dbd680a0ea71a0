import { describe, expect, it } from "vitest";
import type { ChatEvent, MessageView } from "../types";
import { applyEvent, endsTurn, historyToItems, isBareCall, isBusy, rate, visibleText, type Item } from "./chatStore";

const ch = 1;
const run = (events: ChatEvent[], start: Item[] = []) => events.reduce(applyEvent, start);

describe("chat store", () => {
  it("streams tokens into one reply and ends it with the stop reason", () => {
    const items = run([
      { type: "token", channel: ch, id: 1, piece: "Hel", logprob: -0.1 },
      { type: "token", channel: ch, id: 2, piece: "lo", logprob: -0.2 },
    ]);
    expect(items).toHaveLength(1);
    expect(isBusy(items)).toBe(true);
    const done = applyEvent(items, { type: "turn_end", channel: ch, message: 7, reason: "cancelled" });
    expect(done[0]).toEqual({ kind: "assistant", id: 7, text: "Hello", streaming: false, stop: "stopped", rating: null });
    expect(isBusy(done)).toBe(false);
  });

  it("turns a tool call into a card that fills in when it finishes", () => {
    const items = run([
      { type: "token", channel: ch, id: 1, piece: '<tool_call>{"name":"read_file"}</tool_call>', logprob: 0 },
      { type: "tool_call_started", channel: ch, call_id: "c1", name: "read_file", arguments: '{"path":"a.txt"}' },
    ]);
    expect(items[1]).toMatchObject({ kind: "tool", name: "read_file", ok: null });
    expect(isBusy(items)).toBe(true);
    const after = run(
      [
        { type: "tool_call_finished", channel: ch, call_id: "c1", ok: true, result: "1: hi" },
        { type: "token", channel: ch, id: 3, piece: "It says hi.", logprob: 0 },
        { type: "turn_end", channel: ch, message: 9, reason: "end_of_turn" },
      ],
      items,
    );
    expect(after[1]).toMatchObject({ kind: "tool", ok: true, result: "1: hi" });
    expect(isBusy(applyEvent(items, { type: "tool_call_finished", channel: ch, call_id: "c1", ok: true, result: "" }))).toBe(
      true,
    );
    expect(after[2]).toMatchObject({ kind: "assistant", text: "It says hi.", stop: null, id: 9 });
    expect(visibleText((after[0] as { text: string }).text)).toBe("");
  });

  it("hides a reply that was only a bare JSON tool call, live and stored", () => {
    const bare = '{"name": "python", "arguments": {"code": "print(17*23)"}}';
    const live = run([
      { type: "token", channel: ch, id: 1, piece: bare, logprob: 0 },
      { type: "tool_call_started", channel: ch, call_id: "c", name: "python", arguments: "{}" },
    ]);
    expect(live[0]).toMatchObject({ kind: "assistant", text: "" });
    const stored = historyToItems([
      { id: 1, role: "assistant", text: "```json\n" + bare + "\n```", created_ms: 0, tool_calls: [{ call_id: "c", name: "python", arguments: "{}", result: "391", ok: true, attachments: [] }], stray_end: false, feedback: null },
    ]);
    expect(stored.map((i) => i.kind)).toEqual(["tool"]);
    expect(isBareCall("The answer is {x}")).toBe(false);
  });

  it("shows the end-of-turn question and errors as their own items", () => {
    const items = run([
      { type: "token", channel: ch, id: 1, piece: "First,", logprob: 0 },
      { type: "stray_end", channel: ch, message: 3, unintended: true },
      { type: "error", channel: ch, message: "the model stalled" },
    ]);
    expect(items.map((i) => i.kind)).toEqual(["assistant", "stray", "error"]);
  });

  it("folds stored messages: tool results into cards, markup out of replies", () => {
    const msgs: MessageView[] = [
      { id: 1, role: "system", text: "sys", created_ms: 0, tool_calls: [], stray_end: false, feedback: null },
      { id: 2, role: "user", text: "read a.txt", created_ms: 0, tool_calls: [], stray_end: false, feedback: null },
      {
        id: 3,
        role: "assistant",
        text: '<think>hmm</think><tool_call>{"name":"read_file","arguments":{"path":"a.txt"}}</tool_call>',
        created_ms: 0,
        tool_calls: [
          { call_id: "c", name: "read_file", arguments: '{"path":"a.txt"}', result: "1: hi", ok: true, attachments: [] },
          { call_id: "d", name: "load_image", arguments: '{"path":"a.png"}', result: "loaded", ok: true, attachments: [{ blob: "ff", name: "a.png", image: true }] },
        ],
        stray_end: false,
        feedback: null,
      },
      { id: 4, role: "tool", text: "1: hi", created_ms: 0, tool_calls: [], stray_end: false, feedback: null },
      { id: 5, role: "assistant", text: "It says hi.", created_ms: 0, tool_calls: [], stray_end: true, feedback: null },
    ];
    const items = historyToItems(msgs);
    expect(items.map((i) => i.kind)).toEqual(["user", "tool", "tool", "attachment", "assistant", "stray"]);
    expect(items[3]).toEqual({ kind: "attachment", blob: "ff", name: "a.png", image: true });
  });

  it("offers a rating on the reply that ends each turn, and keeps the stored one", () => {
    const msgs: MessageView[] = [
      { id: 1, role: "user", text: "17*3?", created_ms: 0, tool_calls: [], stray_end: false, feedback: null },
      {
        id: 2,
        role: "assistant",
        text: "Let me check.",
        created_ms: 0,
        tool_calls: [{ call_id: "c", name: "python", arguments: "{}", result: "51", ok: true, attachments: [] }],
        stray_end: false,
        feedback: null,
      },
      { id: 3, role: "tool", text: "51", created_ms: 0, tool_calls: [], stray_end: false, feedback: null },
      { id: 4, role: "assistant", text: "51", created_ms: 0, tool_calls: [], stray_end: false, feedback: false },
      { id: 5, role: "user", text: "thanks", created_ms: 0, tool_calls: [], stray_end: false, feedback: null },
      { id: 6, role: "assistant", text: "You're welcome.", created_ms: 0, tool_calls: [], stray_end: false, feedback: null },
    ];
    const items = historyToItems(msgs);
    expect(items.map((i) => i.kind)).toEqual(["user", "assistant", "tool", "assistant", "user", "assistant"]);
    const rateable = items.map((_, k) => endsTurn(items, k));
    expect(rateable).toEqual([false, false, false, true, false, true]);
    expect(items[3]).toMatchObject({ id: 4, rating: false });
    const rated = rate(items, 6, true);
    expect(rated[5]).toMatchObject({ id: 6, rating: true });
    expect(rate(rated, 6, null)[5]).toMatchObject({ rating: null });
    // A reply still streaming is not rated yet.
    const live = run([{ type: "token", channel: ch, id: 1, piece: "Hi", logprob: 0 }]);
    expect(endsTurn(live, 0)).toBe(false);
  });
});
