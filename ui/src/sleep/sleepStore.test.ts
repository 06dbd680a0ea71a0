import { describe, expect, it } from "vitest";
import { nightReport } from "../testReports";
import type { SleepEvent } from "../types";
import { applySleepEvent, fractionDone, startProgress } from "./sleepStore";

const progress = (event: Extract<SleepEvent, { kind: "progress" }>["event"]): SleepEvent => ({ kind: "progress", event });

describe("sleep store", () => {
  it("follows stages, items and training steps to the morning summary", () => {
    const events: SleepEvent[] = [
      progress({ type: "stage_started", stage: "practice" }),
      progress({ type: "item", stage: "practice", index: 2, count: 8, label: "arithmetic level 2: pass" }),
      progress({ type: "stage_finished", stage: "practice", seconds: 40 }),
      progress({ type: "stage_started", stage: "collect" }),
      progress({ type: "stage_finished", stage: "collect", seconds: 0.1 }),
      progress({ type: "stage_started", stage: "judge" }),
      progress({ type: "item", stage: "judge", index: 1, count: 4, label: "channel 1" }),
    ];
    let p = events.reduce(applySleepEvent, startProgress());
    expect(p.stage).toBe("judge");
    expect(p.item?.count).toBe(4);
    expect(fractionDone(p)).toBeCloseTo((2 + 0.25) / 10);
    p = applySleepEvent(p, progress({ type: "train_step", step: 1, total: 4, loss: 2, oapl: 1.5, env: 0.4, user: 0.1, tokens_per_s: 50, eta_s: 30 }));
    expect(p.stage).toBe("train");
    expect(p.steps).toHaveLength(1);
    expect(p.etaS).toBe(30);
    p = applySleepEvent(p, progress({ type: "note", stage: "verify", message: "perplexity rose 40%" }));
    p = applySleepEvent(p, { kind: "finished", night: 3, deployed: null, kept_reason: "perplexity rose 40%", report: nightReport() });
    expect(p.running).toBe(false);
    expect(p.notes).toEqual(["verify: perplexity rose 40%"]);
    expect(p.outcome).toMatchObject({ kind: "finished", keptReason: "perplexity rose 40%" });
  });

  it("a new night starts from a clean view", () => {
    const old = applySleepEvent(startProgress(), progress({ type: "stage_finished", stage: "collect", seconds: 1 }));
    const fresh = applySleepEvent(old, { kind: "started" });
    expect(fresh).toEqual(startProgress());
  });

  it("a failure ends the night with its message", () => {
    const p = applySleepEvent(startProgress(), { kind: "failed", message: "disk full" });
    expect(p).toMatchObject({ running: false, outcome: { kind: "failed", message: "disk full" } });
  });
});
