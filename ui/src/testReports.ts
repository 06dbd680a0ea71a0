import type { NightReport } from "./types";

/** A night report with every section empty, for tests to fill in. */
export function nightReport(parts: Partial<NightReport> = {}): NightReport {
  return {
    since_ms: 0,
    base: "",
    judge: "",
    done: [],
    seconds: {},
    notes: [],
    practice: [],
    channels: [],
    counts: null,
    judge_agreement: null,
    tasks: [],
    memory: null,
    predictions: [],
    understanding: [],
    advantages: [],
    summary: null,
    train: null,
    export: null,
    verify: null,
    deploy: null,
    cancelled: false,
    error: null,
    ...parts,
  };
}
