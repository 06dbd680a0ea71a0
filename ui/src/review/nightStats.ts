// Per-night figures for the reviewer's charts; pure, unit-tested.
import type { Loss, NightReport, NightView } from "../types";

export interface NightStats {
  labels: string[];
  meanReward: (number | null)[];
  predictionError: (number | null)[];
  /** Mean advantage of the night's sub-tasks (how much better than expected). */
  meanAdvantage: (number | null)[];
  loss: Record<keyof Loss, (number | null)[]>;
}

function mean(xs: number[]): number | null {
  return xs.length ? xs.reduce((a, b) => a + b, 0) / xs.length : null;
}

export function nightStats(nights: NightView[]): NightStats {
  const done = nights.filter((n) => n.report.summary || n.report.train);
  const terms: (keyof Loss)[] = ["total", "oapl", "env", "user"];
  const loss = Object.fromEntries(
    terms.map((t) => [t, done.map((n) => mean((n.report.train?.losses ?? []).map((l) => l[t])))]),
  ) as NightStats["loss"];
  return {
    labels: done.map((n) => `#${n.id}`),
    meanReward: done.map((n) => n.report.summary?.mean_reward ?? null),
    predictionError: done.map((n) => n.report.summary?.mean_abs_prediction_error ?? null),
    meanAdvantage: done.map((n) => mean((n.report.advantages ?? []).filter((a): a is number => a != null))),
    loss,
  };
}

/** Below this share of agreement with the person's ratings a night's
 * judge is not to be trusted: the reviewer flags the night. */
export const JUDGE_TRUST = 0.7;

/** How the night's judge fared against the person's 👍/👎: "agreed on a of
 * b" and whether that is below [`JUDGE_TRUST`]; null where nothing rated
 * was also judged. */
export function judgeAgreement(report: NightReport): { text: string; doubtful: boolean } | null {
  const a = report.judge_agreement;
  if (!a || a.compared === 0) return null;
  return {
    text: `judge agreed with your ratings on ${a.agreed} of ${a.compared}`,
    doubtful: a.agreed / a.compared < JUDGE_TRUST,
  };
}
