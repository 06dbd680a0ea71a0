import { useEffect, useState } from "react";
import { api } from "../ipc";
import type { ContextView } from "../types";

/** Past this share of the context the meter warns. */
const NEARLY_FULL = 0.8;

/**
 * Tokens this conversation uses out of the model's context, refreshed when
 * a turn ends; it warns before the context fills.
 */
export function ContextMeter({ channel, busy }: { channel: string; busy: boolean }) {
  const [usage, setUsage] = useState<ContextView | null>(null);
  useEffect(() => {
    if (busy) return;
    let live = true;
    api
      .contextUsage(channel)
      .then((u) => live && setUsage(u))
      .catch(() => live && setUsage(null));
    return () => {
      live = false;
    };
  }, [channel, busy]);
  if (!usage || usage.size === 0) return null;
  const full = usage.used >= usage.size * NEARLY_FULL;
  return (
    <div className={`context-meter${full ? " full" : ""}`} data-testid="context-meter" title="Tokens of this conversation out of the model's context">
      <meter aria-label="Context used" min={0} max={usage.size} low={usage.size * 0.6} high={usage.size * NEARLY_FULL} optimum={0} value={usage.used} />
      <span>
        {usage.used.toLocaleString("en")} / {usage.size.toLocaleString("en")} tokens
      </span>
      {full && <span className="context-warning">nearly full: start a new channel soon</span>}
    </div>
  );
}
