import { describe, expect, it } from "vitest";
import { nightReport } from "../testReports";
import type { NightReport, NightView } from "../types";
import { judgeAgreement, nightStats } from "./nightStats";

const night = (id: number, report: Partial<NightReport>): NightView => ({
  id,
  started_ms: 0,
  finished_ms: 1,
  status: "done",
  stage: "deploy",
  report: nightReport(report),
});

describe("night stats", () => {
  it("averages each loss term per night and skips nights that never judged", () => {
    const s = nightStats([
      night(1, {
        summary: { tasks: 2, mean_reward: 0.5, mean_predicted: 0.4, mean_abs_prediction_error: 0.1 },
        advantages: [0.3, null, -0.1],
        train: { data: null, sequences: 2, without_signal: 0, steps: 2, tokens: 10, losses: [{ total: 1, oapl: 0.5, env: 0.3, user: 0.2 }, { total: 3, oapl: 1.5, env: 0.7, user: 0.8 }] },
      }),
      night(2, { cancelled: true }),
      night(3, { summary: { tasks: 0, mean_reward: null, mean_predicted: null, mean_abs_prediction_error: null } }),
    ]);
    expect(s.labels).toEqual(["#1", "#3"]);
    expect(s.meanReward).toEqual([0.5, null]);
    expect(s.loss.total).toEqual([2, null]);
    expect(s.loss.oapl).toEqual([1, null]);
    expect(s.predictionError).toEqual([0.1, null]);
    expect(s.meanAdvantage[0]).toBeCloseTo(0.1);
    expect(s.meanAdvantage[1]).toBeNull();
  });

  it("flags a night whose judge disagreed with the person's ratings", () => {
    const agreement = (agreed: number, compared: number) =>
      judgeAgreement(nightReport({ judge_agreement: { rated: compared + 1, compared, agreed, missed_failures: 0 } }));
    expect(agreement(4, 5)).toEqual({ text: "judge agreed with your ratings on 4 of 5", doubtful: false });
    expect(agreement(2, 5)?.doubtful).toBe(true);
    expect(agreement(0, 0)).toBeNull();
    expect(judgeAgreement(nightReport())).toBeNull();
  });
});
