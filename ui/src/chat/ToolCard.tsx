import { useState } from "react";
import { prettyJson, toolSummary } from "../format";
import type { Item } from "./chatStore";

type Tool = Extract<Item, { kind: "tool" }>;

export function ToolCard({ tool }: { tool: Tool }) {
  const [open, setOpen] = useState(false);
  const status = tool.ok === null ? "running" : tool.ok ? "ok" : "failed";
  return (
    <div className={`tool-card ${status}`} data-testid="tool-card" data-status={status}>
      <button className="tool-head" onClick={() => setOpen(!open)} aria-expanded={open}>
        <span className="tool-status" aria-label={status}>
          {status === "running" ? <span className="spinner" /> : status === "ok" ? "✓" : "✗"}
        </span>
        <code>{toolSummary(tool.name, tool.arguments)}</code>
        <span className="chev">{open ? "▾" : "▸"}</span>
      </button>
      {open && (
        <div className="tool-body">
          <h4>arguments</h4>
          <pre>{prettyJson(tool.arguments)}</pre>
          <h4>result</h4>
          <pre data-testid="tool-result">{tool.result ?? "running…"}</pre>
        </div>
      )}
    </div>
  );
}
