// Generated from the Rust types of the night report (crates/night/src/report.rs);
// do not edit. `REVERIE_BLESS=1 cargo test -p reverie-night --test typescript`
// writes it again after they change.

export type NightReport = { 
/**
 * Messages from this time on (ms since the epoch) are the night's day.
 */
since_ms: number, 
/**
 * The model the day ran on: the base of training.
 */
base: string, 
/**
 * The judge and value model (empty in reports from before it was
 * chosen apart from `base`: then `base`).
 */
judge: string, 
/**
 * Stages finished, in order; a resumed night starts after the last.
 */
done: Array<Stage>, 
/**
 * Wall time of each finished stage.
 */
seconds: { [key in string]?: number }, 
/**
 * Something skipped or kept, and why.
 */
notes: Array<Note>, 
/**
 * One line per practice batch: family, level, attempts passed.
 */
practice: Array<string>, channels: Array<CollectedChannel>, counts: Counts | null, 
/**
 * The judge's sub-tasks, then the practice episodes with their checks.
 */
tasks: Array<JudgedTask>, 
/**
 * The judge against the person's 👍/👎, where they rated replies.
 */
judge_agreement: JudgeAgreement | null, memory: MemoryReport | null, 
/**
 * The value model's prediction for each of `tasks`.
 */
predictions: Array<Prediction | null>, 
/**
 * The understanding score of each of `tasks` that was sampled.
 */
understanding: Array<number | null>, 
/**
 * The advantage of each of `tasks` (none: not trained on).
 */
advantages: Array<number | null>, summary: Summary | null, train: TrainReport | null, export: ExportSection | null, verify: Verdict | null, deploy: Deployment | null, cancelled: boolean, 
/**
 * Why the night stopped, when it failed (it resumes on the next sleep).
 */
error: string | null, };

export type Stage = "practice" | "collect" | "judge" | "predict" | "understand" | "advantage" | "train" | "export" | "verify" | "deploy";

export type Note = { stage: Stage | null, message: string, };

export type CollectedChannel = { channel: number, name: string, from: number, };

export type Counts = { messages: number, channels: number, };

export type JudgedTask = { channel: number, description: string, first: number, last: number, turns: number, 
/**
 * In `[0, 1]`.
 */
reward: number, reason: string, 
/**
 * Attempts of one practice task share a group: each is judged against
 * the group's pass rate instead of the value model's guess.
 */
group?: string | null, 
/**
 * Rewarded by a program (a practice or tasker episode), not judged.
 */
checked?: boolean, 
/**
 * Reports written before kinds were recorded hold judged tasks here.
 */
kind: TaskKind, 
/**
 * The judge's own grade where the person's rating replaced it.
 */
judged?: number | null, 
/**
 * The person's 👍 (true) or 👎 on the reply that ends it.
 */
feedback?: boolean | null, 
/**
 * What the judge was shown beyond the messages and what it asked for:
 * calculator checks, reads, pages.
 */
evidence?: Array<string>, 
/**
 * A reply the person took back: its messages (ids), which train in
 * place of `first..=last`'s after the transcript before `first`.
 */
taken_back?: Array<number>, };

export type TaskKind = "judged" | "practice" | "tasker" | "rated" | "preference";

export type JudgeAgreement = { 
/**
 * Sub-tasks whose reward a rating set.
 */
rated: number, 
/**
 * Of those, the ones the judge had also graded.
 */
compared: number, agreed: number, 
/**
 * The judge called a 👎 reply good.
 */
missed_failures: number, };

export type MemoryReport = { 
/**
 * Sub-tasks of finished nights it holds.
 */
entries: number, 
/**
 * How nearness was measured: an embedding model's name or word overlap.
 */
similarity: string, 
/**
 * Distinct descriptions the value model was asked about.
 */
asked: number | null, };

export type Prediction = { 
/**
 * The expected reward under the model's distribution over grades (the
 * baseline of the task's advantage), or the answered grade where that
 * distribution could not be read.
 */
reward: number, turns: number, tokens: TokenSpan, 
/**
 * The grade the answer wrote, ÷ 10: its tokens are the training
 * sequence, so its accuracy is what they are rewarded for.
 */
answered: number | null, };

export type TokenSpan = { ids: Array<number>, roles: Array<TokenRole>, logprobs: Array<number | null>, };

export type TokenRole = "context" | "action" | "env" | "user" | "warning";

export type Summary = { tasks: number, mean_reward: number | null, mean_predicted: number | null, mean_abs_prediction_error: number | null, };

export type TrainReport = { 
/**
 * The night's training set (`reverie train --data` takes it).
 */
data: string | null, sequences: number, 
/**
 * Sequences left out: no advantage, mark, reward or ECHO tokens.
 */
without_signal: number, steps: number, losses: Array<LossTerms>, tokens: number, };

export type LossTerms = { oapl: number, env: number, user: number, total: number, };

export type ExportSection = { path: string, report: ExportReport, };

export type ExportReport = { tensors: number, merged: number, quantized: number, kept: number, bytes: number, };

export type Verdict = { ok: boolean, 
/**
 * Why not, when not.
 */
why: string, perplexity_before: number | null, perplexity_after: number | null, 
/**
 * The earlier night whose measurement of the old model was reused.
 */
perplexity_before_from_night: number | null, 
/**
 * Success on the same tasks with the old and the new model.
 */
tasks: Array<FamilyCheck>, };

export type FamilyCheck = { family: string, level: number, tasks: number, before: number, after: number, 
/**
 * Task by task: gained, lost and how likely that split is by chance.
 */
paired: Paired, before_outcomes: Array<Outcome>, after_outcomes: Array<Outcome>, 
/**
 * The earlier night that had already measured the old model on these
 * tasks (as the model it deployed), when those results were reused
 * instead of measured again.
 */
before_from_night: number | null, };

export type Paired = { 
/**
 * Tasks attempted in both runs.
 */
tasks: number, 
/**
 * Failed before, passed after.
 */
gained: number, 
/**
 * Passed before, failed after.
 */
lost: number, 
/**
 * Exact two-sided McNemar test: the chance, if the change made no
 * difference, that the tasks whose outcome changed would split between
 * gained and lost at least this unevenly. 1 when nothing changed.
 */
p_value: number, };

export type Outcome = { prompt: string, passed: boolean, };

export type Deployment = { checkpoint: number | null, path: string | null, kept: string | null, };
