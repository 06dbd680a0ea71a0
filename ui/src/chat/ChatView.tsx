import { useCallback, useEffect, useRef, useState } from "react";
import { api, errorText } from "../ipc";
import type { ChatEvent } from "../types";
import { applyEvent, endsTurn, historyToItems, isBusy, rate, streamingReply, type Item } from "./chatStore";
import { SystemPrompt } from "./SystemPrompt";
import { CameraIcon, PaperclipIcon } from "../icons";
import { ContextMeter } from "./ContextMeter";
import { Markdown } from "./Markdown";
import { Attachment } from "./Attachment";
import { ToolCard } from "./ToolCard";
import { Webcam } from "./Webcam";

function toBase64(file: Blob): Promise<string> {
  return new Promise((resolve, reject) => {
    const r = new FileReader();
    r.onload = () => resolve(String(r.result).split(",")[1] ?? "");
    r.onerror = () => reject(r.error);
    r.readAsDataURL(file);
  });
}

/** A thumb drawn in SVG, so that the buttons show on systems without an
 * emoji font; down is the same thumb turned over. */
function Thumb({ down }: { down: boolean }) {
  return (
    <svg width="14" height="14" viewBox="0 0 16 16" aria-hidden="true" style={down ? { transform: "scale(1, -1)" } : undefined}>
      <path
        d="M1.5 7h3v7.5h-3z M5.5 14.5V7.2L8.6 1.5c1.2 0 1.9.9 1.7 2.1L9.8 6h3.9c.9 0 1.6.9 1.4 1.8l-1.2 5.5c-.2.7-.8 1.2-1.5 1.2z"
        fill="currentColor"
      />
    </svg>
  );
}

/** 👍/👎 under a reply; the next night takes it as the reply's reward. A
 * second click on the chosen one takes it back. */
function Rating({ id, rating, onRate }: { id: number; rating: boolean | null; onRate: (id: number, good: boolean | null) => void }) {
  const button = (good: boolean, label: string) => (
    <button
      className={`link rate ${rating === good ? "chosen" : ""}`}
      aria-label={label}
      title={label}
      aria-pressed={rating === good}
      onClick={() => onRate(id, rating === good ? null : good)}
    >
      <Thumb down={!good} />
    </button>
  );
  return (
    <div className="rating" data-testid="rating">
      {button(true, "Good reply")}
      {button(false, "Bad reply")}
    </div>
  );
}

export function ChatView({ channel }: { channel: string }) {
  const [items, setItems] = useState<Item[]>([]);
  const [draft, setDraft] = useState("");
  /** Files saved for the next message; images with a preview to show. */
  const [attached, setAttached] = useState<{ path: string; preview: string | null }[]>([]);
  const [problem, setProblem] = useState<string | null>(null);
  const [editing, setEditing] = useState<{ id: number; text: string } | null>(null);
  const [showPrompt, setShowPrompt] = useState(false);
  const [showCam, setShowCam] = useState(false);
  const [dragging, setDragging] = useState(false);
  const end = useRef<HTMLDivElement>(null);
  const fileInput = useRef<HTMLInputElement>(null);
  const busy = isBusy(items);

  const reload = useCallback(() => {
    api
      .channelHistory(channel)
      .then((m) => setItems(historyToItems(m)))
      .catch((e) => setProblem(errorText(e)));
  }, [channel]);

  useEffect(() => {
    setItems([]);
    setProblem(null);
    reload();
  }, [reload]);

  useEffect(() => {
    end.current?.scrollIntoView?.({ block: "end" });
  }, [items]);

  const onEvent = useCallback((ev: ChatEvent) => {
    setItems((cur) => applyEvent(cur, ev));
  }, []);

  const send = async () => {
    const text = [draft.trim(), ...attached.map((a) => `[attached: ${a.path}]`)].filter(Boolean).join("\n\n");
    if (!text || busy) return;
    setDraft("");
    setAttached([]);
    setProblem(null);
    setItems((cur) => [
      ...cur,
      { kind: "user", id: null, text },
      streamingReply(),
    ]);
    try {
      await api.sendMessage(channel, text, onEvent);
    } catch (e) {
      setItems((cur) => applyEvent(cur, { type: "error", channel: 0, message: errorText(e) }));
    }
  };

  const stop = () => void api.stopGeneration(channel).catch((e) => setProblem(errorText(e)));

  const rerun = async (run: () => Promise<void>, keepUpTo: (items: Item[]) => Item[]) => {
    setProblem(null);
    setItems((cur) => [...keepUpTo(cur), streamingReply()]);
    try {
      await run();
    } catch (e) {
      setProblem(errorText(e));
      reload();
    }
  };

  const regenerate = () =>
    rerun(
      () => api.regenerate(channel, onEvent),
      (cur) => {
        const last = cur.map((i) => i.kind).lastIndexOf("user");
        return last >= 0 ? cur.slice(0, last + 1) : cur;
      },
    );

  const saveEdit = () => {
    if (!editing) return;
    const { id, text } = editing;
    setEditing(null);
    void rerun(
      () => api.editMessage(channel, id, text, onEvent),
      (cur) => {
        const at = cur.findIndex((i) => i.kind === "user" && i.id === id);
        return [...cur.slice(0, at), { kind: "user", id: null, text }];
      },
    );
  };

  const rateReply = async (id: number, good: boolean | null) => {
    setProblem(null);
    try {
      await api.rateReply(channel, id, good);
      setItems((cur) => rate(cur, id, good));
    } catch (e) {
      setProblem(errorText(e));
    }
  };

  const attach = async (files: FileList | File[]) => {
    for (const f of Array.from(files)) {
      try {
        const data = await toBase64(f);
        const saved = await api.saveAttachment(channel, f.name, data);
        const preview = f.type.startsWith("image/") ? `data:${f.type};base64,${data}` : null;
        setAttached((a) => [...a, { path: saved.path, preview }]);
      } catch (e) {
        setProblem(`${f.name}: ${errorText(e)}`);
      }
    }
  };

  const captured = async (png: string) => {
    setShowCam(false);
    try {
      const saved = await api.saveAttachment(channel, `webcam-${Date.now()}.png`, png);
      setAttached((a) => [...a, { path: saved.path, preview: `data:image/png;base64,${png}` }]);
    } catch (e) {
      setProblem(errorText(e));
    }
  };

  return (
    <section
      className={`chat ${dragging ? "dragging" : ""}`}
      onDragOver={(e) => {
        e.preventDefault();
        setDragging(true);
      }}
      onDragLeave={() => setDragging(false)}
      onDrop={(e) => {
        e.preventDefault();
        setDragging(false);
        void attach(e.dataTransfer.files);
      }}
    >
      <header className="chat-head">
        <h2># {channel}</h2>
        <ContextMeter channel={channel} busy={busy} />
        <button className="secondary" onClick={() => setShowPrompt(true)}>System prompt</button>
      </header>
      <div className="messages" data-testid="messages" onKeyDown={(e) => e.key === "Escape" && busy && stop()}>
        {items.length === 0 && <p className="muted empty">Say something. The agent can read and write files, run Python and search your notes.</p>}
        {items.map((it, k) => {
          switch (it.kind) {
            case "user":
              return editing && editing.id === it.id ? (
                <div key={k} className="msg user editing">
                  <textarea aria-label="Edit message" value={editing.text} onChange={(e) => setEditing({ id: editing.id, text: e.target.value })} />
                  <div className="row">
                    <button onClick={saveEdit}>Save and re-run</button>
                    <button className="secondary" onClick={() => setEditing(null)}>Cancel</button>
                  </div>
                </div>
              ) : (
                <div key={k} className="msg user" data-testid="user-message">
                  <div className="bubble">{it.text}</div>
                  {it.id != null && !busy && (
                    <button className="link" onClick={() => setEditing({ id: it.id as number, text: it.text })}>edit</button>
                  )}
                </div>
              );
            case "assistant":
              if (!it.streaming && !it.text && !it.stop) return null;
              return (
                <div key={k} className="msg assistant" data-testid="assistant-message">
                  <div className="bubble md-bubble">
                    <Markdown text={it.text} />
                    {it.streaming && <span className="cursor" aria-label="generating">▍</span>}
                  </div>
                  {it.stop && <div className="stop-note">[{it.stop}]</div>}
                  {it.id != null && endsTurn(items, k) && (
                    <Rating id={it.id} rating={it.rating} onRate={(id, good) => void rateReply(id, good)} />
                  )}
                </div>
              );
            case "tool":
              return <ToolCard key={k} tool={it} />;
            case "notice":
              return <div key={k} className="notice" data-testid="notice">{it.text}</div>;
            case "stray":
              return (
                <div key={k} className="stray" data-testid="stray-end">
                  <strong>Did you mean to end your turn?</strong>{" "}
                  {it.unintended ? "No — the agent went on." : "Yes — the reply was complete."}
                </div>
              );
            case "attachment":
              return <Attachment key={k} blob={it.blob} name={it.name} image={it.image} />;
            case "error":
              return <div key={k} className="error" role="alert">{it.text}</div>;
          }
        })}
        <div ref={end} />
      </div>
      {problem && <div className="error" role="alert">{problem}</div>}
      {attached.length > 0 && (
        <div className="chips">
          {attached.map(({ path: p, preview }) => (
            <span key={p} className="chip">
              {preview ? <img className="thumb" src={preview} alt="" data-testid="attachment-preview" /> : <PaperclipIcon />} {p}{" "}
              <button aria-label={`Remove ${p}`} onClick={() => setAttached((a) => a.filter((x) => x.path !== p))}>×</button>
            </span>
          ))}
        </div>
      )}
      <div className="composer">
        <button className="icon" title="Attach files" aria-label="Attach files" onClick={() => fileInput.current?.click()}><PaperclipIcon /></button>
        <input ref={fileInput} type="file" multiple hidden data-testid="file-input" onChange={(e) => e.target.files && void attach(e.target.files)} />
        <button className="icon" title="Webcam" aria-label="Webcam" onClick={() => setShowCam(true)}><CameraIcon /></button>
        <textarea
          aria-label="Message"
          placeholder="Message the agent (Enter sends, Shift+Enter new line, Esc stops)"
          value={draft}
          rows={2}
          onChange={(e) => setDraft(e.target.value)}
          onKeyDown={(e) => {
            if (e.key === "Enter" && !e.shiftKey) {
              e.preventDefault();
              void send();
            } else if (e.key === "Escape" && busy) {
              e.preventDefault();
              stop();
            }
          }}
        />
        {busy ? (
          <button className="danger" onClick={stop}>Stop</button>
        ) : (
          <>
            <button onClick={() => void send()} disabled={!draft.trim() && attached.length === 0}>Send</button>
            <button className="secondary" title="Answer the last message again" onClick={() => void regenerate()} disabled={!items.some((i) => i.kind === "user")}>
              ↻
            </button>
          </>
        )}
      </div>
      {showPrompt && <SystemPrompt channel={channel} onClose={() => setShowPrompt(false)} />}
      {showCam && <Webcam onCapture={(p) => void captured(p)} onClose={() => setShowCam(false)} />}
    </section>
  );
}
