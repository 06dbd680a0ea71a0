// The night's progress as the window shows it, folded from SleepEvents.
import type { NightReport, SleepEvent, Stage } from "../types";

export const STAGES: Stage[] = ["practice", "collect", "judge", "predict", "understand", "advantage", "train", "export", "verify", "deploy"];

export interface StepPoint {
  step: number;
  loss: number;
  oapl: number;
  env: number;
  user: number;
}

export interface SleepProgress {
  running: boolean;
  stage: Stage | null;
  done: Partial<Record<Stage, number>>;
  item: { index: number; count: number; label: string } | null;
  steps: StepPoint[];
  totalSteps: number;
  tokensPerS: number | null;
  etaS: number | null;
  notes: string[];
  outcome:
    | null
    | { kind: "finished"; night: number; deployed: string | null; keptReason: string | null; report: NightReport }
    | { kind: "failed"; message: string };
}

export const idle: SleepProgress = {
  running: false,
  stage: null,
  done: {},
  item: null,
  steps: [],
  totalSteps: 0,
  tokensPerS: null,
  etaS: null,
  notes: [],
  outcome: null,
};

export function startProgress(): SleepProgress {
  return { ...idle, running: true };
}

export function applySleepEvent(p: SleepProgress, ev: SleepEvent): SleepProgress {
  if (ev.kind === "started") return startProgress();
  if (ev.kind === "failed") return { ...p, running: false, outcome: { kind: "failed", message: ev.message } };
  if (ev.kind === "finished") {
    return {
      ...p,
      running: false,
      item: null,
      outcome: { kind: "finished", night: ev.night, deployed: ev.deployed, keptReason: ev.kept_reason, report: ev.report },
    };
  }
  const e = ev.event;
  switch (e.type) {
    case "stage_started":
      return { ...p, running: true, stage: e.stage, item: null };
    case "item":
      return { ...p, item: { index: e.index, count: e.count, label: e.label } };
    case "train_step":
      return {
        ...p,
        stage: "train",
        steps: [...p.steps, { step: e.step, loss: e.loss, oapl: e.oapl, env: e.env, user: e.user }],
        totalSteps: e.total,
        tokensPerS: e.tokens_per_s,
        etaS: e.eta_s,
      };
    case "note":
      return { ...p, notes: [...p.notes, `${e.stage}: ${e.message}`] };
    case "stage_finished":
      return { ...p, done: { ...p.done, [e.stage]: e.seconds }, item: null };
  }
}

/** Share of the night done, counting the stages done and the current
 * stage's items or steps. */
export function fractionDone(p: SleepProgress): number {
  const finished = STAGES.filter((s) => p.done[s] !== undefined).length;
  let inStage = 0;
  if (p.stage === "train" && p.totalSteps > 0) inStage = p.steps.length / p.totalSteps;
  else if (p.item && p.item.count > 0) inStage = p.item.index / p.item.count;
  return Math.min(1, (finished + (p.stage && p.done[p.stage] === undefined ? inStage : 0)) / STAGES.length);
}
