import { expect, test, type Page } from "@playwright/test";
import path from "node:path";
import { fileURLToPath } from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));
const shots = path.join(here, "..", "screenshots");
const mock = path.join(here, "mock-backend.js");

async function open(page: Page, opts: { noModel?: boolean; pauseSleep?: boolean; contextUsed?: number } = {}) {
  await page.addInitScript((o) => {
    const w = window as unknown as Record<string, unknown>;
    if (o.noModel) w.__REVERIE_NO_MODEL__ = true;
    if (o.pauseSleep) w.__REVERIE_SLEEP_PAUSED__ = true;
    if (o.contextUsed !== undefined) w.__REVERIE_CONTEXT_USED__ = o.contextUsed;
  }, opts);
  await page.addInitScript({ path: mock });
  await page.goto("/");
}

const calls = (page: Page) =>
  page.evaluate(() => (window as unknown as { __REVERIE_MOCK__: { calls: { cmd: string; args: unknown }[] } }).__REVERIE_MOCK__.calls);

test("chat: history with a collapsed tool card, then a streamed reply with a live tool card", async ({ page }) => {
  await open(page);
  await expect(page.getByTestId("assistant-message").last()).toContainText("buy milk and water the plants");
  const card = page.getByTestId("tool-card").first();
  await expect(card).toHaveAttribute("data-status", "ok");
  await expect(card.getByTestId("tool-result")).toHaveCount(0);
  await card.getByRole("button").click();
  await expect(card.getByTestId("tool-result")).toContainText("water the plants");

  await page.getByLabel("Message").fill("Please read my notes file");
  await page.getByLabel("Message").press("Enter");
  await expect(page.getByTestId("user-message").last()).toContainText("read my notes file");
  const live = page.getByTestId("tool-card").last();
  await expect(live).toHaveAttribute("data-status", "running");
  await expect(live).toHaveAttribute("data-status", "ok");
  await expect(page.getByTestId("assistant-message").last()).toContainText("ship the reviewer");
  await expect(page.getByRole("button", { name: "Send" })).toBeVisible();
  await page.screenshot({ path: path.join(shots, "chat.png") });
});

test("chat: Shift+Enter is a new line, Stop and Esc end a reply", async ({ page }) => {
  await open(page);
  const box = page.getByLabel("Message");
  await box.fill("first line");
  await box.press("Shift+Enter");
  await box.type("slow second line");
  await expect(box).toHaveValue("first line\nslow second line");
  await box.press("Enter");
  await expect(page.getByRole("button", { name: "Stop" })).toBeVisible();
  await page.getByRole("button", { name: "Stop" }).click();
  await expect(page.getByTestId("assistant-message").last()).toContainText("[stopped]");

  await box.fill("slow again");
  await box.press("Enter");
  await expect(page.getByRole("button", { name: "Stop" })).toBeVisible();
  await box.press("Escape");
  await expect(page.getByTestId("assistant-message").last()).toContainText("[stopped]");
  expect((await calls(page)).filter((c) => c.cmd === "stop_generation")).toHaveLength(2);
});

test("chat: regenerate and edit-and-rerun", async ({ page }) => {
  await open(page);
  await page.getByTitle("Answer the last message again").click();
  await expect(page.getByTestId("assistant-message").last()).toContainText("ship the reviewer");
  expect((await calls(page)).some((c) => c.cmd === "regenerate")).toBe(true);

  await page.getByTestId("user-message").first().getByRole("button", { name: "edit" }).click();
  await page.getByLabel("Edit message").fill("What is in plans.txt?");
  await page.getByRole("button", { name: "Save and re-run" }).click();
  await expect(page.getByTestId("user-message")).toHaveCount(1);
  await expect(page.getByTestId("user-message").first()).toContainText("plans.txt");
  const edit = (await calls(page)).find((c) => c.cmd === "edit_message");
  expect(edit?.args).toMatchObject({ name: "general", message: 2, text: "What is in plans.txt?" });
});

test("chat: 👍/👎 on the reply that ends a turn, stored and taken back", async ({ page }) => {
  await open(page);
  const last = page.getByTestId("assistant-message").last();
  await expect(last).toContainText("buy milk and water the plants");
  // One rating per turn: the reply that ends it, not the tool-calling step.
  await expect(page.getByTestId("rating")).toHaveCount(1);
  await last.getByRole("button", { name: "Good reply" }).click();
  await expect(last.getByRole("button", { name: "Good reply" })).toHaveAttribute("aria-pressed", "true");
  await last.getByRole("button", { name: "Bad reply" }).click();
  await expect(last.getByRole("button", { name: "Bad reply" })).toHaveAttribute("aria-pressed", "true");
  await expect(last.getByRole("button", { name: "Good reply" })).toHaveAttribute("aria-pressed", "false");
  await last.getByRole("button", { name: "Bad reply" }).click();
  await expect(last.getByRole("button", { name: "Bad reply" })).toHaveAttribute("aria-pressed", "false");
  const rates = (await calls(page)).filter((c) => c.cmd === "rate_reply").map((c) => c.args);
  expect(rates).toEqual([
    { name: "general", message: 5, good: true },
    { name: "general", message: 5, good: false },
    { name: "general", message: 5, good: null },
  ]);
  // The stored rating comes back with the history.
  await last.getByRole("button", { name: "Good reply" }).click();
  await page.getByRole("button", { name: "# ledger" }).click();
  await expect(page.getByRole("heading", { name: "# ledger" })).toBeVisible();
  await page.getByRole("button", { name: "# general" }).click();
  await expect(page.getByTestId("assistant-message").last().getByRole("button", { name: "Good reply" })).toHaveAttribute("aria-pressed", "true");
});

test("chat: attachments by picker and the webcam, then sent with the message", async ({ page }) => {
  await open(page);
  await page.getByTestId("file-input").setInputFiles({ name: "report.pdf", mimeType: "application/pdf", buffer: Buffer.from("%PDF-1.4 test") });
  await expect(page.getByText("attachments/report.pdf")).toBeVisible();
  await page.getByRole("button", { name: "Webcam" }).click();
  const video = page.getByTestId("webcam-preview");
  await expect(video).toBeVisible();
  await page.waitForFunction(() => (document.querySelector("video") as HTMLVideoElement | null)?.videoWidth ?? 0 > 0);
  await page.getByRole("button", { name: "Capture" }).click();
  await expect(page.getByText(/attachments\/webcam-\d+\.png/)).toBeVisible();
  await page.getByLabel("Message").fill("look at these");
  await page.getByRole("button", { name: "Send" }).click();
  const sent = (await calls(page)).find((c) => c.cmd === "send_message")?.args as { text: string };
  expect(sent.text).toContain("[attached: attachments/report.pdf]");
  expect(sent.text).toMatch(/\[attached: attachments\/webcam-\d+\.png\]/);
  const saved = (await calls(page)).filter((c) => c.cmd === "save_attachment");
  expect(saved).toHaveLength(2);
});

test("chat: an image a tool shows is inline, also when the channel is opened again; attached images show a preview", async ({ page }) => {
  await open(page);
  await page.getByLabel("Message").fill("what is in the photo?");
  await page.getByRole("button", { name: "Send" }).click();
  const img = page.getByTestId("inline-image");
  await expect(img).toBeVisible();
  await expect(img).toHaveAttribute("alt", "photo.png");
  await expect.poll(() => img.evaluate((e) => (e as HTMLImageElement).naturalWidth)).toBe(8);
  await expect(page.getByTestId("assistant-message").last()).toContainText("ship the reviewer");
  // Another channel and back: the history brings the image back.
  await page.getByRole("button", { name: "# ledger" }).click();
  await expect(page.getByTestId("inline-image")).toHaveCount(0);
  await page.getByRole("button", { name: "# general" }).click();
  await expect(page.getByTestId("inline-image")).toBeVisible();

  const png = Buffer.from("iVBORw0KGgoAAAANSUhEUgAAAAgAAAAICAIAAABLbSncAAAAEUlEQVR4nGM4oaGBFTEMLQkAgl1GAWqNFmsAAAAASUVORK5CYII=", "base64");
  await page.getByTestId("file-input").setInputFiles({ name: "cat.png", mimeType: "image/png", buffer: png });
  await expect(page.getByTestId("attachment-preview")).toBeVisible();
  await expect.poll(() => page.getByTestId("attachment-preview").evaluate((e) => (e as HTMLImageElement).naturalWidth)).toBe(8);
});

test("chat: files dropped on the chat are attached", async ({ page }) => {
  await open(page);
  const drop = await page.evaluateHandle(() => {
    const dt = new DataTransfer();
    dt.items.add(new File(["a,b\n1,2\n"], "table.csv", { type: "text/csv" }));
    return dt;
  });
  await page.locator("section.chat").dispatchEvent("dragover", { dataTransfer: drop });
  await expect(page.locator("section.chat")).toHaveClass(/dragging/);
  await page.locator("section.chat").dispatchEvent("drop", { dataTransfer: drop });
  await expect(page.getByText("attachments/table.csv")).toBeVisible();
  await expect(page.locator("section.chat")).not.toHaveClass(/dragging/);
  const saved = (await calls(page)).find((c) => c.cmd === "save_attachment")?.args as { fileName: string; dataBase64: string };
  expect(saved.fileName).toBe("table.csv");
  expect(Buffer.from(saved.dataBase64, "base64").toString()).toBe("a,b\n1,2\n");
});

test("channels: create, search, rename, delete; system prompt with the agent's section", async ({ page }) => {
  await open(page);
  await page.getByLabel("New channel").fill("research");
  await page.getByLabel("New channel").press("Enter");
  await expect(page.getByRole("heading", { name: "# research" })).toBeVisible();
  await page.getByLabel("Search channels").fill("led");
  await expect(page.locator(".channels li")).toHaveCount(1);
  await page.getByLabel("Search channels").fill("");
  await page.getByLabel("Rename research").click();
  await page.getByLabel("New name").fill("papers");
  await page.getByLabel("New name").press("Enter");
  await expect(page.getByRole("heading", { name: "# papers" })).toBeVisible();
  page.once("dialog", (d) => void d.accept());
  await page.getByLabel("Delete papers").click();
  await expect(page.getByRole("button", { name: "# papers" })).toHaveCount(0);

  await page.getByRole("button", { name: "System prompt" }).click();
  await expect(page.getByTestId("agent-section")).toHaveValue("- the user prefers short answers");
  await page.getByRole("button", { name: "Save" }).click();
  await expect(page.getByText("Saved.")).toBeVisible();
});

test("reviewer: sub-tasks with their figures, token colours by role, overrides stored", async ({ page }) => {
  await open(page);
  await page.getByRole("button", { name: "Reviewer" }).click();
  // uPlot: a legend entry per series (after the x entry), values on hover,
  // a click on an entry hides that series.
  const rewards = page.getByTestId("reward-chart");
  await expect(rewards.locator(".u-legend .u-series")).toHaveCount(4);
  await expect(rewards.locator("canvas")).toHaveCount(1);
  const losses = page.getByTestId("loss-chart");
  await expect(losses.locator(".u-legend .u-series")).toHaveCount(5);
  const over = rewards.locator(".u-over");
  const box = (await over.boundingBox())!;
  await page.mouse.move(box.x + box.width - 2, box.y + box.height / 2);
  await expect(rewards.locator(".u-legend .u-series").nth(1).locator(".u-value")).not.toHaveText("–");
  const oapl = losses.locator(".u-legend .u-series", { hasText: "OAPL" });
  await oapl.click();
  await expect(oapl).toHaveClass(/u-off/);
  await page.getByLabel("Filter by advantage").selectOption("negative");
  await expect(page.getByTestId("episode")).toHaveCount(1);
  await page.getByLabel("Filter by advantage").selectOption("any");
  await page.getByTestId("episode").first().click();
  const sub = page.getByTestId("subtask");
  await expect(sub).toContainText("Read todo.txt and summarise it");
  await expect(sub).toContainText("reward 90%");
  await expect(sub).toContainText("predicted 70%");
  await expect(sub).toContainText("advantage +0.20");
  await expect(sub.getByTestId("subtask-feedback")).toHaveText("rated good by you (judge said 40%)");
  await expect(sub.getByTestId("evidence")).toContainText("the judge read messages 1–2");
  await expect(page.getByTestId("offered-tools")).toHaveText("Tools offered: calculator, list_dir, read_file, notes");
  await expect(page.getByTestId("judge-agreement").first()).toHaveText("· ⚠ judge agreed with your ratings on 2 of 5");
  await page.screenshot({ path: path.join(shots, "reviewer.png") });

  await page.getByRole("button", { name: "Tokens" }).click();
  const action = page.locator('[data-role="action"]').first();
  const env = page.locator('[data-role="env"]').first();
  const colour = (l: typeof action) => l.evaluate((e) => getComputedStyle(e).color);
  expect(await colour(action)).not.toBe(await colour(env));
  const negative = page.locator('[data-role="action"]').last();
  expect(await negative.evaluate((e) => getComputedStyle(e).backgroundColor)).toMatch(/^rgba\(218, 54, 51/);
  await expect(page.locator('[data-role="warning"]')).toHaveCount(1);
  await page.screenshot({ path: path.join(shots, "tokens.png") });

  await page.getByLabel("Reward override").fill("0.3");
  await page.getByLabel("Exclude from training").check();
  const marks = (await calls(page)).filter((c) => c.cmd === "set_review_mark").map((c) => c.args);
  expect(marks.at(-1)).toEqual({ channel: 1, firstMessage: 1, lastMessage: 5, reward: 0.3, excluded: true });
});

test("sleep: confirmation, live progress with a loss chart, morning summary, rollback", async ({ page }) => {
  await open(page, { pauseSleep: true });
  await page.getByRole("button", { name: "Sleep" }).first().click();
  await page.locator(".sleep-button").click();
  const dialog = page.getByRole("dialog", { name: "Start the night" });
  await expect(dialog).toContainText("12");
  await expect(dialog).toContainText("2 min 44 s");
  await dialog.getByRole("button", { name: "Sleep" }).click();
  const progress = page.getByTestId("sleep-progress");
  await expect(progress).toBeVisible();
  await expect(page.getByTestId("train-figs")).toContainText("step 8/8");
  await expect(page.getByTestId("train-figs")).toContainText("42.5 tok/s");
  await expect(page.getByTestId("live-loss").locator(".u-legend .u-series")).toHaveCount(4);
  await expect(progress.locator(".stages li.done")).toHaveCount(6);
  await page.screenshot({ path: path.join(shots, "sleep-progress.png") });
  await page.evaluate(() => (window as unknown as { __REVERIE_RESUME_SLEEP__: () => void }).__REVERIE_RESUME_SLEEP__());
  const summary = page.getByTestId("morning-summary");
  await expect(summary).toContainText("Deployed a new checkpoint");
  await expect(summary).toContainText("41.60 → 41.20");
  // The night was judged by the model as installed, not the one it trained.
  await expect(summary.getByTestId("judge-model")).toHaveText("judged byqwen2.5-coder-0.5b-instruct-q4_k_m.gguf");
  await expect(summary.getByTestId("judge-agreement-summary")).toHaveText("your ratingsjudge agreed with your ratings on 3 of 4");
  await expect(summary.getByTestId("practice-lines")).toContainText("6 of 16 attempts passed");
  const checks = summary.getByTestId("task-checks");
  await expect(checks.getByRole("row", { name: /arithmetic/ })).toContainText("38% → 63%");
  await expect(checks.getByRole("row", { name: /arithmetic/ }).locator(".better")).toHaveCount(1);
  await expect(checks.getByRole("row", { name: /units/ })).toContainText("25% → 25%");
  await page.screenshot({ path: path.join(shots, "sleep-summary.png") });
  await page.getByRole("row", { name: /#1/ }).getByRole("button", { name: "Use this one" }).click();
  await expect(page.getByRole("row", { name: /#1/ })).toHaveClass(/active/);
  await page.getByLabel("Sleep when idle").check();
  await expect(page.getByLabel("Idle minutes")).toHaveValue("60");
  const saved = (await calls(page)).filter((c) => c.cmd === "set_settings").at(-1)?.args as { settings: { idle_minutes: number } };
  expect(saved.settings.idle_minutes).toBe(60);
  // The next night practises arithmetic first.
  await page.getByLabel("Practise arithmetic").check();
  await page.getByLabel("arithmetic tasks").fill("4");
  await expect(page.getByLabel("strings tasks")).toBeDisabled();
  const practice = (await calls(page)).filter((c) => c.cmd === "set_settings").at(-1)?.args as { settings: { practice: { family: string; tasks: number }[] } };
  expect(practice.settings.practice).toEqual([{ family: "arithmetic", tasks: 4 }]);
});

test("first run: fetch the default model with a progress bar, then chat", async ({ page }) => {
  await open(page, { noModel: true });
  await expect(page.getByRole("heading", { name: "Welcome to Reverie" })).toBeVisible();
  await page.getByLabel("GGUF file").fill("/tmp/not-a-model.txt");
  await page.getByRole("button", { name: "Use it" }).click();
  await expect(page.getByRole("alert")).toContainText("not a file");
  await page.getByRole("button", { name: /Fetch Qwen2.5/ }).click();
  await expect(page.getByTestId("fetch-progress")).toBeVisible();
  await expect(page.getByRole("button", { name: "Chat" })).toBeVisible({ timeout: 10_000 });
});

test("settings: dark theme, sampling, model choice, health", async ({ page }) => {
  await open(page);
  await page.getByRole("button", { name: "Settings" }).click();
  await expect(page.getByTestId("health")).toContainText("memory");
  await page.getByLabel("Theme").selectOption("dark");
  await expect(page.locator("html")).toHaveAttribute("data-theme", "dark");
  await page.getByLabel("GGUF file").fill("/models/other.gguf");
  await page.getByRole("button", { name: "Use this GGUF" }).click();
  await expect(page.getByRole("status")).toContainText("Now running Custom");
  await expect(page.getByTestId("projector-status")).toContainText("cannot see images");
  await page.getByLabel("Projector file").fill("/models/other.gguf");
  await page.getByRole("button", { name: "Use this projector" }).click();
  await expect(page.getByRole("status")).toContainText("not a multimodal projector");
  await page.getByLabel("Projector file").fill("/models/mmproj-other.gguf");
  await page.getByRole("button", { name: "Use this projector" }).click();
  await expect(page.getByRole("status")).toContainText("sees images now");
  await expect(page.getByTestId("projector-status")).toContainText("/models/mmproj-other.gguf");
  await page.getByRole("button", { name: "Forget the choice" }).click();
  await expect(page.getByTestId("projector-status")).toContainText("cannot see images");
  const sandbox = page.getByLabel(/Sandbox for Python/);
  await expect(sandbox).toBeChecked();
  await sandbox.uncheck();
  await expect(page.getByRole("alert")).toContainText("The sandbox is off");
  await sandbox.check();
  await expect(page.getByRole("alert")).toHaveCount(0);
  await expect(page.getByTestId("api-status")).toHaveCount(0);
  await page.getByLabel(/OpenAI-compatible API/).check();
  await expect(page.getByTestId("api-status")).toContainText("http://127.0.0.1:8080/v1");
  await page.getByLabel("Port").fill("8181");
  await expect(page.getByTestId("api-status")).toContainText("http://127.0.0.1:8181/v1");
  await page.getByLabel(/OpenAI-compatible API/).uncheck();
  await expect(page.getByTestId("api-status")).toHaveCount(0);
  await page.getByRole("button", { name: "Chat" }).click();
  await page.screenshot({ path: path.join(shots, "chat-dark.png") });
});

test("settings: the notes are cleaned on demand and each change can be undone", async ({ page }) => {
  await open(page);
  await page.getByRole("button", { name: "Settings" }).click();
  const changes = page.getByTestId("note-changes");
  await expect(changes).toContainText('hid the finished to-do "buy milk"');
  await page.getByRole("button", { name: "Clean notes now" }).click();
  await expect(page.getByTestId("notes-said")).toHaveText("Cleaned: 1 change.");
  await expect(changes.locator("li").first()).toContainText("merged 2 notes about the garden into one");
  await page.getByRole("button", { name: "Undo: merged 2 notes about the garden into one" }).click();
  await expect(changes.locator("li").first()).toContainText("(undone)");
  await expect(page.getByRole("button", { name: "Undo: merged 2 notes about the garden into one" })).toHaveCount(0);
  await page.getByRole("button", { name: "Clean notes now" }).click();
  await expect(page.getByTestId("notes-said")).toHaveText("Nothing to clean.");
});

test("replies render Markdown, tables, highlighted code with copy, maths; raw HTML stays text; links ask first", async ({ page, context }) => {
  await context.grantPermissions(["clipboard-read", "clipboard-write"]);
  await open(page);
  await page.getByLabel("Message").fill("show me some markdown");
  await page.getByLabel("Message").press("Enter");
  const reply = page.getByTestId("assistant-message").last();
  await expect(page.getByRole("button", { name: "Send" })).toBeVisible({ timeout: 15_000 });
  await expect(reply.locator("strong")).toHaveText("bold");
  await expect(reply.locator(".katex")).toHaveCount(2);
  await expect(reply.locator(".katex-display")).toHaveCount(1);
  await expect(reply.locator("th").first()).toHaveText("item");
  await expect(reply.locator("td").first()).toHaveText("milk");
  await expect(reply.locator(".hljs-keyword").first()).toHaveText("def");
  await reply.getByRole("button", { name: "Copy code" }).click();
  await expect(reply.getByRole("button", { name: "Copy code" })).toHaveText("Copied");
  expect(await page.evaluate(() => navigator.clipboard.readText())).toContain("def add(a, b):");
  // Raw HTML is shown, not run.
  await expect(reply).toContainText('<img src="x" onerror=');
  await expect(reply.locator("img")).toHaveCount(0);
  expect(await page.evaluate(() => (window as unknown as { __pwned?: boolean }).__pwned)).toBeUndefined();
  // A link asks before it opens in the browser; declining opens nothing.
  page.once("dialog", (d) => void d.dismiss());
  await reply.getByRole("link", { name: "link" }).click();
  page.once("dialog", (d) => {
    expect(d.message()).toContain("https://example.org/docs");
    void d.accept();
  });
  await reply.getByRole("link", { name: "link" }).click();
  await expect
    .poll(() => page.evaluate(() => (window as unknown as { __REVERIE_MOCK__: { state: { opened?: string[] } } }).__REVERIE_MOCK__.state.opened))
    .toEqual(["https://example.org/docs"]);
  await page.screenshot({ path: path.join(shots, "markdown.png") });
});

test("the chat header shows how full the context is and warns before it fills", async ({ page }) => {
  await open(page);
  const meter = page.getByTestId("context-meter");
  await expect(meter).toContainText("/ 8,192 tokens");
  const before = Number((await meter.textContent())?.split(" / ")[0].replace(/,/g, ""));
  await page.getByLabel("Message").fill("hello there");
  await page.getByLabel("Message").press("Enter");
  await expect(page.getByRole("button", { name: "Send" })).toBeVisible({ timeout: 15_000 });
  await expect.poll(async () => Number((await meter.textContent())?.split(" / ")[0].replace(/,/g, ""))).toBeGreaterThan(before);
  await expect(meter).not.toContainText("nearly full");

  await open(page, { contextUsed: 7000 });
  await expect(page.getByTestId("context-meter")).toContainText("7,000 / 8,192 tokens");
  await expect(page.getByTestId("context-meter")).toContainText("nearly full: start a new channel soon");
});
