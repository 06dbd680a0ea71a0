// Formatting shared by every screen; pure functions, unit-tested.
import type { StopReason, TokenRole } from "./types";

export function duration(seconds: number): string {
  if (!Number.isFinite(seconds) || seconds < 0) return "–";
  const s = Math.round(seconds);
  if (s < 60) return `${s} s`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m} min ${String(s % 60).padStart(2, "0")} s`;
  const h = Math.floor(m / 60);
  return `${h} h ${String(m % 60).padStart(2, "0")} min`;
}

export function bytes(n: number): string {
  const units = ["B", "KB", "MB", "GB", "TB"];
  let v = n;
  let i = 0;
  while (v >= 1000 && i < units.length - 1) {
    v /= 1000;
    i += 1;
  }
  return i === 0 ? `${v} B` : `${v.toFixed(v < 10 ? 2 : 1)} ${units[i]}`;
}

export function percent(x: number | null | undefined): string {
  return x == null || !Number.isFinite(x) ? "–" : `${Math.round(x * 100)}%`;
}

export function signed(x: number | null | undefined, digits = 2): string {
  if (x == null || !Number.isFinite(x)) return "–";
  const s = x.toFixed(digits);
  return x > 0 ? `+${s}` : s;
}

export function clock(ms: number): string {
  const d = new Date(ms);
  return `${String(d.getHours()).padStart(2, "0")}:${String(d.getMinutes()).padStart(2, "0")}`;
}

const stopText: Record<StopReason, string | null> = {
  end_of_turn: null,
  max_tokens: "stopped at the token limit",
  cancelled: "stopped",
  stalled: "generation stalled and was ended",
  context_full: "the context is full: start a new channel",
  tool_limit: "tool calls stopped at the limit",
};

export function stopReason(r: StopReason): string | null {
  return stopText[r] ?? null;
}

export const roleLabel: Record<TokenRole, string> = {
  action: "action (sampled by the model)",
  env: "env (tool output)",
  user: "user",
  context: "context (prompt and template)",
  warning: "warning (harness notice)",
};

/** Background for a token with this advantage: green up, red down. */
export function advantageColour(a: number | null): string | undefined {
  if (a == null || a === 0) return undefined;
  const t = Math.min(1, Math.abs(a));
  const alpha = (0.15 + 0.55 * t).toFixed(2);
  return a > 0 ? `rgba(46, 160, 67, ${alpha})` : `rgba(218, 54, 51, ${alpha})`;
}

/** Arguments of a tool call, pretty when they are JSON. */
export function prettyJson(text: string): string {
  try {
    return JSON.stringify(JSON.parse(text), null, 2);
  } catch {
    return text;
  }
}

/** One line of what a tool call did, for a collapsed card. */
export function toolSummary(name: string, args: string): string {
  try {
    const v = JSON.parse(args) as Record<string, unknown>;
    const first = Object.values(v).find((x) => typeof x === "string" || typeof x === "number");
    return first === undefined ? name : `${name} ${String(first).slice(0, 60)}`;
  } catch {
    return `${name} ${args.slice(0, 60)}`;
  }
}
