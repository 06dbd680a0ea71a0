// Frame times while a long reply streams in (a benchmark, not a test: run
// with `npx playwright test -c playwright.perf.config.ts`). The mock side
// streams TOKENS Markdown tokens at RATE a second; every animation frame's
// interval and every long task is recorded in the page, and the figures
// are printed as one JSON line and written to test-results/stream-perf.json.
import { expect, test } from "@playwright/test";
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));
const mock = path.join(here, "..", "e2e", "mock-backend.js");
const TOKENS = Number(process.env.TOKENS ?? 5000);
const RATE = Number(process.env.RATE ?? 50);

test("a long reply streams without dropping frames", async ({ page }) => {
  test.setTimeout(((TOKENS / RATE) * 1000) * 2 + 60_000);
  await page.addInitScript({ path: mock });
  await page.addInitScript(() => {
    const w = window as unknown as { __frames: number[]; __long: number[] };
    w.__frames = [];
    w.__long = [];
    let last = 0;
    const tick = (t: number) => {
      if (last) w.__frames.push(t - last);
      last = t;
      requestAnimationFrame(tick);
    };
    requestAnimationFrame(tick);
    new PerformanceObserver((list) => list.getEntries().forEach((e) => w.__long.push(e.duration))).observe({
      type: "longtask",
      buffered: true,
    });
  });
  await page.goto("/");
  const box = page.getByLabel("Message");
  await box.fill(`stream ${TOKENS} tokens at ${RATE} per second`);
  await page.evaluate(() => {
    const w = window as unknown as { __frames: number[]; __long: number[] };
    w.__frames.length = 0;
    w.__long.length = 0;
  });
  const started = Date.now();
  await box.press("Enter");
  await expect(page.getByRole("button", { name: "Stop" })).toHaveCount(0, { timeout: ((TOKENS / RATE) * 1000) * 2 });
  const { frames, long } = await page.evaluate(() => {
    const w = window as unknown as { __frames: number[]; __long: number[] };
    return { frames: [...w.__frames], long: [...w.__long] };
  });
  const sorted = [...frames].sort((a, b) => a - b);
  const at = (q: number) => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))];
  const report = {
    tokens: TOKENS,
    rate: RATE,
    // The reply's own pace is TOKENS / RATE seconds; longer means the page
    // could not keep up.
    stream_seconds: (Date.now() - started) / 1000,
    frames: frames.length,
    p50_ms: at(0.5),
    p95_ms: at(0.95),
    p99_ms: at(0.99),
    max_ms: sorted[sorted.length - 1],
    // A frame interval over 25 ms missed at least one 60 Hz refresh.
    missed_frame_share: frames.filter((f) => f > 25).length / Math.max(frames.length, 1),
    long_tasks: long.length,
    long_task_ms: long.reduce((a, b) => a + b, 0),
  };
  console.log(JSON.stringify(report));
  fs.mkdirSync("test-results", { recursive: true });
  fs.writeFileSync("test-results/stream-perf.json", JSON.stringify(report, null, 2));
  expect(frames.length).toBeGreaterThan(0);
});
