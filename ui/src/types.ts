import type { FamilyCheck, LossTerms, NightReport, Stage } from "./nightReport";

// Mirrors of what the Rust commands send (src-tauri/src/*.rs).

export type StopReason =
  | "end_of_turn"
  | "max_tokens"
  | "cancelled"
  | "stalled"
  | "context_full"
  | "tool_limit";

export type ChatEvent =
  | { type: "token"; channel: number; id: number; piece: string; logprob: number }
  | { type: "tool_call_started"; channel: number; call_id: string; name: string; arguments: string }
  | { type: "tool_call_finished"; channel: number; call_id: string; ok: boolean; result: string }
  | { type: "attachment"; channel: number; blob: string; name: string; image: boolean }
  | { type: "notice"; channel: number; text: string }
  | { type: "turn_end"; channel: number; message: number | null; reason: StopReason }
  | { type: "stray_end"; channel: number; message: number; unintended: boolean }
  | { type: "error"; channel: number; message: string };

export interface ChannelView {
  id: number;
  name: string;
  created_ms: number;
  workspace: string;
}

export interface ToolCallView {
  call_id: string;
  name: string;
  arguments: string;
  result: string | null;
  ok: boolean | null;
  /** Files the call showed in the chat. */
  attachments: { blob: string; name: string; image: boolean }[];
}

export type MessageRole = "system" | "user" | "assistant" | "tool";

/** How full a channel's context is (tokens). */
export interface ContextView {
  used: number;
  size: number;
}

export interface MessageView {
  id: number;
  role: MessageRole;
  text: string;
  created_ms: number;
  tool_calls: ToolCallView[];
  stray_end: boolean;
  /** The person's 👍 (true) or 👎 (false) on this reply. */
  feedback: boolean | null;
}

export interface SystemPromptView {
  prompt: string;
  default_prompt: string;
  agent_section: string;
}

export interface ModelView {
  path: string;
  name: string;
  architecture: string;
  file_size: number;
  n_params: number;
  n_ctx_train: number;
}

export interface AppStatus {
  version: string;
  home: string;
  model_path: string | null;
  model: ModelView | null;
  sleeping: boolean;
  default_model: string;
}

export type FetchEvent =
  | { kind: "download"; index: number; count: number; package: string }
  | { kind: "assemble"; written: number; total: number }
  | { kind: "verify" }
  | { kind: "done"; path: string }
  | { kind: "failed"; message: string };

/** The multimodal projector that lets the model see images. */
export interface ProjectorView {
  path: string | null;
  /** The loaded model sees images (null: no model loaded yet). */
  seeing: boolean | null;
  problem: string | null;
}

export interface ModelChoice {
  path: string;
  label: string;
  active: boolean;
}

export interface SamplingParams {
  temperature: number;
  top_p: number;
  top_k: number;
  seed: number;
  max_tokens: number;
}

export interface Settings {
  sampling: SamplingParams;
  tools: boolean;
  max_tool_calls: number;
  sleep_at: string | null;
  idle_minutes: number | null;
  theme: "light" | "dark" | "system";
  /** Practice batches each night starts with. */
  practice: { family: string; tasks: number }[];
  /** Python, jobs and git confined to the workspace. */
  sandbox: boolean;
  /** The OpenAI-compatible API's port on 127.0.0.1; null while off. */
  api_port: number | null;
}

/** Where the running API listens and the token it wants. */
export interface ApiView {
  base_url: string;
  token: string;
}

export interface HealthView {
  report: string;
  model: ModelView | null;
  sleeping: boolean;
}

export interface SavedAttachment {
  path: string;
  bytes: number;
}

export interface SubTaskView {
  night: number;
  description: string;
  first_message: number;
  last_message: number;
  turns: number;
  reward: number;
  predicted_reward: number | null;
  predicted_turns: number | null;
  advantage: number | null;
  understanding: number | null;
  reason: string;
  /** The judge's grade where the person's rating set `reward`. */
  judged_reward: number | null;
  /** The person's 👍 (true) or 👎 (false) on the reply that ends it. */
  feedback: boolean | null;
  /** What the judge was shown beyond the messages and asked for. */
  evidence: string[];
}

export interface EpisodeSummary {
  channel: number;
  channel_name: string;
  day: string;
  first_message: number;
  last_message: number;
  messages: number;
  subtasks: number;
  mean_reward: number | null;
  mean_advantage: number | null;
  reward_override: number | null;
  excluded: boolean;
}

export type TokenRole = "context" | "action" | "env" | "user" | "warning";

export interface TokenView {
  piece: string;
  role: TokenRole;
  advantage: number | null;
}

export interface EpisodeMessage {
  id: number;
  role: MessageRole;
  text: string;
  created_ms: number;
  tokens: TokenView[];
}

export interface EpisodeView {
  channel: number;
  messages: EpisodeMessage[];
  subtasks: SubTaskView[];
  token_text: boolean;
  /** The tools the agent was told of in this episode. */
  offered_tools: string[];
}

// The night's record, generated from its Rust types (see nightReport.ts).
export type { FamilyCheck, NightReport, Stage };
export type Loss = LossTerms;

export interface NightView {
  id: number;
  started_ms: number;
  finished_ms: number | null;
  status: "running" | "done" | "failed" | "cancelled" | string;
  stage: string;
  report: NightReport;
}

export type NightEvent =
  | { type: "stage_started"; stage: Stage }
  | { type: "item"; stage: Stage; index: number; count: number; label: string }
  | {
      type: "train_step";
      step: number;
      total: number;
      loss: number;
      oapl: number;
      env: number;
      user: number;
      tokens_per_s: number;
      eta_s: number;
    }
  | { type: "note"; stage: Stage; message: string }
  | { type: "stage_finished"; stage: Stage; seconds: number };

export type SleepEvent =
  | { kind: "started" }
  | { kind: "progress"; event: NightEvent }
  | {
      kind: "finished";
      night: number;
      deployed: string | null;
      kept_reason: string | null;
      report: NightReport;
    }
  | { kind: "failed"; message: string };

export interface SleepEstimate {
  messages: number;
  channels: number;
  seconds: number;
  model: string | null;
  running: boolean;
}

/** One change the notes' routine cleaning made (by a night or on demand). */
export interface NoteChangeView {
  id: number;
  at_ms: number;
  what: string;
  undone: boolean;
}

export interface CheckpointView {
  id: number;
  path: string;
  night: number | null;
  created_ms: number;
  active: boolean;
  exists: boolean;
}
