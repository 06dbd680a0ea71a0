import { useEffect, useState } from "react";
import { bytes } from "./format";
import { api, errorText } from "./ipc";
import { useSettings } from "./useSettings";
import type { ApiView, HealthView, ModelChoice, NoteChangeView, ProjectorView, Settings } from "./types";

export function SettingsView({ channel, onChanged }: { channel: string; onChanged: () => void }) {
  const [models, setModels] = useState<ModelChoice[]>([]);
  const [path, setPath] = useState("");
  const [projector, setProjector] = useState<ProjectorView | null>(null);
  const [projectorPath, setProjectorPath] = useState("");
  const [health, setHealth] = useState<HealthView | null>(null);
  const { settings: s, save, status, setStatus } = useSettings();
  const [busy, setBusy] = useState(false);
  const [apiView, setApiView] = useState<ApiView | null>(null);
  const apiPort = s?.api_port ?? null;

  useEffect(() => {
    api.apiStatus().then(setApiView).catch(() => setApiView(null));
  }, [apiPort]);

  useEffect(() => {
    api.listModels().then(setModels).catch((e) => setStatus(errorText(e)));
    api.projectorStatus().then(setProjector).catch(() => setProjector(null));
    api.health(channel).then(setHealth).catch((e) => setStatus(errorText(e)));
  }, [channel, setStatus]);

  const choose = async (p: string) => {
    setBusy(true);
    setStatus(`loading ${p}…`);
    try {
      const m = await api.chooseModel(p);
      setStatus(`Now running ${m.name} (${m.architecture}, ${bytes(m.file_size)}).`);
      setModels(await api.listModels());
      setProjector(await api.projectorStatus());
      onChanged();
    } catch (e) {
      setStatus(errorText(e));
    } finally {
      setBusy(false);
    }
  };


  const chooseProjector = async (p: string | null) => {
    setBusy(true);
    setStatus(p ? `loading the model with ${p}…` : "loading the model without a chosen projector…");
    try {
      const v = await api.chooseProjector(p);
      setProjector(v);
      setStatus(v.seeing ? "The model sees images now." : v.problem ?? "The model cannot see images.");
      onChanged();
    } catch (e) {
      setStatus(errorText(e));
    } finally {
      setBusy(false);
    }
  };

  const num = (v: string) => (v === "" ? 0 : Number(v));
  return (
    <div className="settings">
      {status && <p className="status" role="status">{status}</p>}
      <h3>Model</h3>
      <ul className="models">
        {models.map((m) => (
          <li key={m.path}>
            <label>
              <input type="radio" name="model" checked={m.active} disabled={busy} onChange={() => void choose(m.path)} /> {m.label}
              <span className="muted path"> {m.path}</span>
            </label>
          </li>
        ))}
      </ul>
      <form
        className="row"
        onSubmit={(e) => {
          e.preventDefault();
          if (path.trim()) void choose(path.trim());
        }}
      >
        <input aria-label="GGUF file" placeholder="/path/to/any-model.gguf" value={path} onChange={(e) => setPath(e.target.value)} />
        <button type="submit" disabled={busy}>Use this GGUF</button>
      </form>
      <h3>Images</h3>
      <p data-testid="projector-status">
        {projector?.path
          ? projector.seeing === false
            ? `Not seeing: ${projector.problem ?? projector.path}`
            : `Images reach the model through ${projector.path}.`
          : projector?.problem ?? "The model cannot see images: it has no multimodal projector (an mmproj GGUF beside it, or chosen here)."}
      </p>
      <form
        className="row"
        onSubmit={(e) => {
          e.preventDefault();
          if (projectorPath.trim()) void chooseProjector(projectorPath.trim());
        }}
      >
        <input aria-label="Projector file" placeholder="/path/to/mmproj-model.gguf" value={projectorPath} onChange={(e) => setProjectorPath(e.target.value)} />
        <button type="submit" disabled={busy}>Use this projector</button>
        {projector?.path && <button type="button" className="link" disabled={busy} onClick={() => void chooseProjector(null)}>Forget the choice</button>}
      </form>
      {s && (
        <>
          <h3>Sampling</h3>
          <div className="grid2">
            <label>Temperature<input type="number" step={0.05} min={0} max={5} value={s.sampling.temperature} onChange={(e) => void save({ ...s, sampling: { ...s.sampling, temperature: num(e.target.value) } })} /></label>
            <label>Top-p<input type="number" step={0.05} min={0.05} max={1} value={s.sampling.top_p} onChange={(e) => void save({ ...s, sampling: { ...s.sampling, top_p: num(e.target.value) } })} /></label>
            <label>Top-k<input type="number" min={0} value={s.sampling.top_k} onChange={(e) => void save({ ...s, sampling: { ...s.sampling, top_k: num(e.target.value) } })} /></label>
            <label>Max tokens<input type="number" min={1} value={s.sampling.max_tokens} onChange={(e) => void save({ ...s, sampling: { ...s.sampling, max_tokens: num(e.target.value) } })} /></label>
            <label>Seed<input type="number" min={0} value={s.sampling.seed} onChange={(e) => void save({ ...s, sampling: { ...s.sampling, seed: num(e.target.value) } })} /></label>
          </div>
          <h3>Agent</h3>
          <label><input type="checkbox" checked={s.tools} onChange={(e) => void save({ ...s, tools: e.target.checked })} /> Tools (files, Python, notes, git…)</label>
          <label>Tool calls per turn<input type="number" min={1} value={s.max_tool_calls} onChange={(e) => void save({ ...s, max_tool_calls: num(e.target.value) })} /></label>
          <label><input type="checkbox" checked={s.sandbox} onChange={(e) => void save({ ...s, sandbox: e.target.checked })} /> Sandbox for Python, jobs and git (workspace only, no network)</label>
          {!s.sandbox && (
            <p className="warning" role="alert">
              The sandbox is off: scripts the agent runs can read, change and send anything your account can.
            </p>
          )}
          <h3>API</h3>
          <label>
            <input
              type="checkbox"
              checked={s.api_port != null}
              onChange={(e) => void save({ ...s, api_port: e.target.checked ? 8080 : null })}
            />{" "}
            OpenAI-compatible API on 127.0.0.1 (for your other tools)
          </label>
          {s.api_port != null && (
            <label>Port<input type="number" min={1024} max={65535} value={s.api_port} onChange={(e) => void save({ ...s, api_port: num(e.target.value) })} /></label>
          )}
          {apiView && (
            <p className="muted" data-testid="api-status">
              Base URL <code>{apiView.base_url}</code>, key <code>{apiView.token}</code>
            </p>
          )}
          <h3>Theme</h3>
          <select aria-label="Theme" value={s.theme} onChange={(e) => void save({ ...s, theme: e.target.value as Settings["theme"] })}>
            <option value="system">system</option>
            <option value="light">light</option>
            <option value="dark">dark</option>
          </select>
        </>
      )}
      <NotesCleaning />
      <h3>Health</h3>
      <pre className="health" data-testid="health">{health?.report ?? "…"}</pre>
    </div>
  );
}

/** The notes' routine cleaning on demand, what it and the nights changed,
 * and an undo for each change. */
function NotesCleaning() {
  const [changes, setChanges] = useState<NoteChangeView[] | null>(null);
  const [said, setSaid] = useState("");
  useEffect(() => {
    api.noteChanges().then(setChanges).catch((e) => setSaid(errorText(e)));
  }, []);
  const clean = async () => {
    try {
      const before = changes?.length ?? 0;
      const now = await api.cleanNotes();
      setChanges(now);
      const made = now.length - before;
      setSaid(made > 0 ? `Cleaned: ${made} change${made === 1 ? "" : "s"}.` : "Nothing to clean.");
    } catch (e) {
      setSaid(errorText(e));
    }
  };
  const undo = async (id: number) => {
    try {
      await api.undoNoteChange(id);
      setChanges(await api.noteChanges());
      setSaid("Undone.");
    } catch (e) {
      setSaid(errorText(e));
    }
  };
  return (
    <>
      <h3>Notes</h3>
      <p className="muted">
        Each night merges duplicate notes and hides finished to-dos and notes untouched for half a year. Every change can be
        undone.
      </p>
      <button onClick={() => void clean()}>Clean notes now</button>
      {said && <span className="muted" data-testid="notes-said"> {said}</span>}
      {changes && changes.length > 0 && (
        <ul className="note-changes" data-testid="note-changes">
          {changes.slice(0, 20).map((c) => (
            <li key={c.id}>
              <span className={c.undone ? "muted" : ""}>
                {new Date(c.at_ms).toLocaleDateString()} · {c.what}
                {c.undone && " (undone)"}
              </span>{" "}
              {!c.undone && (
                <button className="small" aria-label={`Undo: ${c.what}`} onClick={() => void undo(c.id)}>
                  Undo
                </button>
              )}
            </li>
          ))}
        </ul>
      )}
    </>
  );
}
