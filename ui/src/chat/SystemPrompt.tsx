import { useEffect, useState } from "react";
import { api, errorText } from "../ipc";

/** The channel's system prompt and the section the agent writes itself. */
export function SystemPrompt({ channel, onClose }: { channel: string; onClose: () => void }) {
  const [prompt, setPrompt] = useState("");
  const [section, setSection] = useState("");
  const [fallback, setFallback] = useState("");
  const [status, setStatus] = useState<string | null>(null);
  useEffect(() => {
    api
      .getSystemPrompt(channel)
      .then((v) => {
        setPrompt(v.prompt);
        setSection(v.agent_section);
        setFallback(v.default_prompt);
      })
      .catch((e) => setStatus(errorText(e)));
  }, [channel]);
  const save = () =>
    api
      .setSystemPrompt(channel, prompt, section)
      .then(() => setStatus("Saved. The agent uses it from its next message."))
      .catch((e) => setStatus(errorText(e)));
  return (
    <div className="modal" role="dialog" aria-label="System prompt">
      <div className="modal-body wide">
        <h3>System prompt of “{channel}”</h3>
        <label>
          Your prompt (empty: the default)
          <textarea rows={8} value={prompt} placeholder={fallback} onChange={(e) => setPrompt(e.target.value)} />
        </label>
        <label>
          The agent’s own section (it edits this with <code>update_sys</code>)
          <textarea rows={5} value={section} data-testid="agent-section" onChange={(e) => setSection(e.target.value)} />
        </label>
        {status && <p className="muted">{status}</p>}
        <div className="row">
          <button onClick={save}>Save</button>
          <button className="secondary" onClick={onClose}>Close</button>
        </div>
      </div>
    </div>
  );
}
