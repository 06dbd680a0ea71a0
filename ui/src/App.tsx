import { useCallback, useEffect, useState } from "react";
import { ChatView } from "./chat/ChatView";
import { Sidebar } from "./chat/Sidebar";
import { FirstRun } from "./FirstRun";
import { api, errorText } from "./ipc";
import { Reviewer } from "./review/Reviewer";
import { SettingsView } from "./SettingsView";
import { SleepView } from "./sleep/SleepView";
import type { AppStatus, ChannelView } from "./types";

type Tab = "chat" | "review" | "sleep" | "settings";

export function App() {
  const [status, setStatus] = useState<AppStatus | null>(null);
  const [channels, setChannels] = useState<ChannelView[]>([]);
  const [current, setCurrent] = useState<string | null>(null);
  const [tab, setTab] = useState<Tab>("chat");
  const [problem, setProblem] = useState<string | null>(null);

  const refresh = useCallback(() => {
    api.appStatus().then(setStatus).catch((e) => setProblem(errorText(e)));
    api
      .listChannels()
      .then((cs) => {
        setChannels(cs);
        setCurrent((cur) => (cur && cs.some((c) => c.name === cur) ? cur : (cs[0]?.name ?? null)));
      })
      .catch((e) => setProblem(errorText(e)));
  }, []);
  useEffect(() => {
    refresh();
  }, [refresh]);

  // The model loads in the background and the schedule may start a night:
  // keep the top bar current.
  useEffect(() => {
    const timer = window.setInterval(() => {
      api.appStatus().then(setStatus).catch(() => undefined);
    }, 5000);
    return () => window.clearInterval(timer);
  }, []);

  useEffect(() => {
    api
      .getSettings()
      .then((s) => (document.documentElement.dataset.theme = s.theme))
      .catch(() => undefined);
  }, []);

  const guard = (p: Promise<unknown>) => p.then(refresh).catch((e) => setProblem(errorText(e)));

  if (!status) return <div className="loading">{problem ?? "Starting Reverie…"}</div>;
  if (!status.model_path) return <FirstRun defaultModel={status.default_model} onReady={refresh} />;

  return (
    <div className="app">
      <nav className="topbar">
        <span className="brand"><img src="/icon.png" alt="" width={20} height={20} /> Reverie</span>
        {(["chat", "review", "sleep", "settings"] as Tab[]).map((t) => (
          <button key={t} className={tab === t ? "active" : ""} onClick={() => setTab(t)}>
            {t === "chat" ? "Chat" : t === "review" ? "Reviewer" : t === "sleep" ? "Sleep" : "Settings"}
          </button>
        ))}
        <span className="spacer" />
        <span className="model muted" title={status.model_path} data-testid="model-name">
          {status.sleeping ? "asleep · " : ""}
          {status.model?.name ?? status.model_path.split("/").pop()}
        </span>
      </nav>
      {problem && (
        <div className="error banner" role="alert">
          {problem} <button className="link" onClick={() => setProblem(null)}>dismiss</button>
        </div>
      )}
      {tab === "chat" && (
        <div className="chat-layout">
          <Sidebar
            channels={channels}
            current={current}
            onSelect={setCurrent}
            onCreate={(n) => guard(api.createChannel(n).then(() => setCurrent(n)))}
            onRename={(n, m) => guard(api.renameChannel(n, m).then(() => setCurrent(m)))}
            onDelete={(n) => guard(api.deleteChannel(n).then(() => setCurrent(null)))}
          />
          {current ? (
            <ChatView key={current} channel={current} />
          ) : (
            <div className="empty-chat">
              <button onClick={() => guard(api.createChannel("general").then(() => setCurrent("general")))}>Start a channel</button>
            </div>
          )}
        </div>
      )}
      {tab === "review" && <Reviewer />}
      {tab === "sleep" && <SleepView onAwake={refresh} />}
      {tab === "settings" && <SettingsView channel={current ?? "general"} onChanged={refresh} />}
    </div>
  );
}
