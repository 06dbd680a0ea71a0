// The only module that talks to the Rust side. Every command has a typed
// wrapper here; `scripts/check-ipc.mjs` and the Rust test
// `src-tauri/tests/commands.rs` keep this list equal to the app's.
import { Channel, invoke } from "@tauri-apps/api/core";
import type {
  AppStatus,
  ChannelView,
  ChatEvent,
  CheckpointView,
  EpisodeSummary,
  EpisodeView,
  FetchEvent,
  HealthView,
  MessageView,
  ApiView,
  ContextView,
  ModelChoice,
  ModelView,
  ProjectorView,
  NightView,
  NoteChangeView,
  SavedAttachment,
  Settings,
  SleepEstimate,
  SleepEvent,
  SystemPromptView,
} from "./types";

function channel<T>(on: (ev: T) => void): Channel<T> {
  const ch = new Channel<T>();
  ch.onmessage = on;
  return ch;
}

export const api = {
  appStatus: () => invoke<AppStatus>("app_status"),
  fetchDefaultModel: (on: (ev: FetchEvent) => void) =>
    invoke<void>("fetch_default_model", { onEvent: channel(on) }),
  listModels: () => invoke<ModelChoice[]>("list_models"),
  chooseModel: (path: string) => invoke<ModelView>("choose_model", { path }),
  projectorStatus: () => invoke<ProjectorView>("projector_status"),
  /** Chooses the projector (null forgets the choice); the model loads again. */
  chooseProjector: (path: string | null) => invoke<ProjectorView>("choose_projector", { path }),
  getSettings: () => invoke<Settings>("get_settings"),
  setSettings: (settings: Settings) => invoke<void>("set_settings", { settings }),
  health: (name: string) => invoke<HealthView>("health", { name }),

  listChannels: () => invoke<ChannelView[]>("list_channels"),
  createChannel: (name: string) => invoke<ChannelView>("create_channel", { name }),
  renameChannel: (name: string, newName: string) =>
    invoke<void>("rename_channel", { name, newName }),
  deleteChannel: (name: string) => invoke<void>("delete_channel", { name }),
  channelHistory: (name: string) => invoke<MessageView[]>("channel_history", { name }),
  contextUsage: (name: string) => invoke<ContextView>("context_usage", { name }),
  getSystemPrompt: (name: string) => invoke<SystemPromptView>("get_system_prompt", { name }),
  setSystemPrompt: (name: string, prompt: string, agentSection: string) =>
    invoke<void>("set_system_prompt", { name, prompt, agentSection }),
  sendMessage: (name: string, text: string, on: (ev: ChatEvent) => void) =>
    invoke<void>("send_message", { name, text, onEvent: channel(on) }),
  stopGeneration: (name: string) => invoke<void>("stop_generation", { name }),
  rateReply: (name: string, message: number, good: boolean | null) =>
    invoke<void>("rate_reply", { name, message, good }),
  regenerate: (name: string, on: (ev: ChatEvent) => void) =>
    invoke<void>("regenerate", { name, onEvent: channel(on) }),
  editMessage: (name: string, message: number, text: string, on: (ev: ChatEvent) => void) =>
    invoke<void>("edit_message", { name, message, text, onEvent: channel(on) }),
  apiStatus: () => invoke<ApiView | null>("api_status"),
  openLink: (url: string) => invoke<void>("open_link", { url }),
  saveAttachment: (name: string, fileName: string, dataBase64: string) =>
    invoke<SavedAttachment>("save_attachment", { name, fileName, dataBase64 }),
  /** A stored image (by its blob hash) as a `data:` URL. */
  imageData: (blob: string) => invoke<string>("image_data", { blob }),

  listEpisodes: () =>
    invoke<EpisodeSummary[]>("list_episodes", { tzOffsetMin: new Date().getTimezoneOffset() }),
  episode: (channel: number, firstMessage: number, lastMessage: number) =>
    invoke<EpisodeView>("episode", { channel, firstMessage, lastMessage }),
  setReviewMark: (
    channel: number,
    firstMessage: number,
    lastMessage: number,
    reward: number | null,
    excluded: boolean,
  ) => invoke<void>("set_review_mark", { channel, firstMessage, lastMessage, reward, excluded }),
  listNights: () => invoke<NightView[]>("list_nights"),

  sleepEstimate: () => invoke<SleepEstimate>("sleep_estimate"),
  startSleep: () => invoke<void>("start_sleep"),
  watchSleep: (on: (ev: SleepEvent) => void) => invoke<boolean>("watch_sleep", { onEvent: channel(on) }),
  cancelSleep: () => invoke<void>("cancel_sleep"),
  listCheckpoints: () => invoke<CheckpointView[]>("list_checkpoints"),
  rollbackCheckpoint: (id: number) => invoke<string>("rollback_checkpoint", { id }),
  cleanNotes: () => invoke<NoteChangeView[]>("clean_notes"),
  noteChanges: () => invoke<NoteChangeView[]>("note_changes"),
  undoNoteChange: (id: number) => invoke<NoteChangeView>("undo_note_change", { id }),
};

export type Api = typeof api;

/** The text of a failed command (the Rust side sends a sentence). */
export function errorText(e: unknown): string {
  if (typeof e === "string") return e;
  if (e instanceof Error) return e.message;
  return JSON.stringify(e);
}
