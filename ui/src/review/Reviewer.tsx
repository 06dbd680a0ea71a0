import { useCallback, useEffect, useMemo, useState } from "react";
import { LineChart } from "../charts";
import { percent, signed } from "../format";
import { api, errorText } from "../ipc";
import type { EpisodeSummary, EpisodeView, NightView } from "../types";
import { visibleText } from "../chat/chatStore";
import { judgeAgreement, nightStats } from "./nightStats";
import { TokenView } from "./TokenView";

type Sign = "any" | "positive" | "negative";

export function Reviewer() {
  const [episodes, setEpisodes] = useState<EpisodeSummary[]>([]);
  const [nights, setNights] = useState<NightView[]>([]);
  const [selected, setSelected] = useState<EpisodeSummary | null>(null);
  const [view, setView] = useState<EpisodeView | null>(null);
  const [mode, setMode] = useState<"conversation" | "tokens">("conversation");
  const [channel, setChannel] = useState("all");
  const [minReward, setMinReward] = useState(0);
  const [sign, setSign] = useState<Sign>("any");
  const [problem, setProblem] = useState<string | null>(null);

  const load = useCallback(() => {
    Promise.all([api.listEpisodes(), api.listNights()])
      .then(([e, n]) => {
        setEpisodes(e);
        setNights(n);
      })
      .catch((e) => setProblem(errorText(e)));
  }, []);
  useEffect(() => {
    load();
  }, [load]);

  useEffect(() => {
    if (!selected) return;
    setView(null);
    api
      .episode(selected.channel, selected.first_message, selected.last_message)
      .then(setView)
      .catch((e) => setProblem(errorText(e)));
  }, [selected]);

  const channels = useMemo(() => [...new Set(episodes.map((e) => e.channel_name))], [episodes]);
  const shown = episodes.filter(
    (e) =>
      (channel === "all" || e.channel_name === channel) &&
      (minReward === 0 || (e.mean_reward ?? 0) >= minReward) &&
      (sign === "any" ||
        (sign === "positive" ? (e.mean_advantage ?? 0) > 0 : (e.mean_advantage ?? 0) < 0)),
  );
  const stats = nightStats(nights);

  const mark = async (reward: number | null, excluded: boolean) => {
    if (!selected) return;
    try {
      await api.setReviewMark(selected.channel, selected.first_message, selected.last_message, reward, excluded);
      const updated = { ...selected, reward_override: reward, excluded };
      setSelected(updated);
      setEpisodes((es) => es.map((e) => (e.channel === updated.channel && e.first_message === updated.first_message ? updated : e)));
    } catch (e) {
      setProblem(errorText(e));
    }
  };

  return (
    <div className="reviewer">
      <aside className="episode-list">
        <h3>Days</h3>
        <div className="filters">
          <label>
            Channel
            <select aria-label="Filter by channel" value={channel} onChange={(e) => setChannel(e.target.value)}>
              <option value="all">all</option>
              {channels.map((c) => <option key={c}>{c}</option>)}
            </select>
          </label>
          <label>
            Reward ≥ {percent(minReward)}
            <input aria-label="Minimum reward" type="range" min={0} max={1} step={0.1} value={minReward} onChange={(e) => setMinReward(Number(e.target.value))} />
          </label>
          <label>
            Advantage
            <select aria-label="Filter by advantage" value={sign} onChange={(e) => setSign(e.target.value as Sign)}>
              <option value="any">any</option>
              <option value="positive">positive</option>
              <option value="negative">negative</option>
            </select>
          </label>
        </div>
        <ul>
          {shown.map((e) => (
            <li key={`${e.channel}-${e.first_message}`}>
              <button
                className={`episode ${selected?.first_message === e.first_message && selected.channel === e.channel ? "active" : ""}`}
                data-testid="episode"
                onClick={() => setSelected(e)}
              >
                <strong>{e.day}</strong> #{e.channel_name}
                <span className="muted">
                  {e.messages} msgs · {e.subtasks} sub-tasks · reward {percent(e.reward_override ?? e.mean_reward)}
                  {e.excluded ? " · excluded" : ""}
                </span>
              </button>
            </li>
          ))}
          {shown.length === 0 && <li className="muted">no episode matches</li>}
        </ul>
        <h3>Nights</h3>
        <ul className="nights">
          {nights.map((n) => {
            const judge = judgeAgreement(n.report);
            return (
              <li key={n.id} data-testid="night-row">
                night {n.id}: {n.status}
                {n.report.deploy?.checkpoint != null ? ` · checkpoint ${n.report.deploy.checkpoint}` : ""}
                {n.report.deploy?.kept ? ` · kept: ${n.report.deploy.kept}` : ""}
                {judge && (
                  <span className={judge.doubtful ? "judge-doubt" : "muted"} data-testid="judge-agreement">
                    {" · "}
                    {judge.doubtful ? "⚠ " : ""}
                    {judge.text}
                  </span>
                )}
              </li>
            );
          })}
        </ul>
      </aside>
      <section className="episode-detail">
        {problem && <div className="error" role="alert">{problem}</div>}
        <div className="charts">
          <LineChart
            title="Reward, prediction error and advantage per night"
            labels={stats.labels}
            testId="reward-chart"
            series={[
              { name: "reward", values: stats.meanReward, colour: "#2ea043" },
              { name: "|predicted − actual|", values: stats.predictionError, colour: "#d29922" },
              { name: "mean advantage", values: stats.meanAdvantage, colour: "#1f6feb" },
            ]}
          />
          <LineChart
            title="Loss terms per night"
            labels={stats.labels}
            testId="loss-chart"
            series={[
              { name: "total", values: stats.loss.total, colour: "#8b949e" },
              { name: "OAPL", values: stats.loss.oapl, colour: "#1f6feb" },
              { name: "ECHO env", values: stats.loss.env, colour: "#a371f7" },
              { name: "user", values: stats.loss.user, colour: "#db61a2" },
            ]}
          />
        </div>
        {!selected && <p className="muted">Pick a day to see what the agent did and how the night judged it.</p>}
        {selected && (
          <>
            <header className="episode-head">
              <h2>{selected.day} · #{selected.channel_name}</h2>
              <div className="row">
                <label>
                  Reward override
                  <input
                    aria-label="Reward override"
                    type="number"
                    min={0}
                    max={1}
                    step={0.1}
                    value={selected.reward_override ?? ""}
                    placeholder="judge"
                    onChange={(e) => void mark(e.target.value === "" ? null : Number(e.target.value), selected.excluded)}
                  />
                </label>
                <label>
                  <input type="checkbox" aria-label="Exclude from training" checked={selected.excluded} onChange={(e) => void mark(selected.reward_override, e.target.checked)} />
                  Exclude from training
                </label>
                <span className="muted">used by the next night</span>
              </div>
              <div className="tabs small">
                <button className={mode === "conversation" ? "active" : ""} onClick={() => setMode("conversation")}>Conversation</button>
                <button className={mode === "tokens" ? "active" : ""} onClick={() => setMode("tokens")}>Tokens</button>
              </div>
            </header>
            {view && view.offered_tools.length > 0 && (
              <p className="muted offered-tools" data-testid="offered-tools">
                Tools offered: {view.offered_tools.join(", ")}
              </p>
            )}
            {!view && <p className="muted">loading…</p>}
            {view && mode === "tokens" && <TokenView messages={view.messages} tokenText={view.token_text} />}
            {view && mode === "conversation" && (
              <div className="episode-conv">
                {view.messages
                  .filter((m) => m.role !== "system")
                  .map((m) => {
                    const starts = view.subtasks.filter((t) => t.first_message === m.id);
                    return (
                      <div key={m.id}>
                        {starts.map((t, i) => (
                          <div key={i} className="subtask" data-testid="subtask">
                            <strong>{t.description}</strong>
                            <div className="subtask-figs">
                              <span>reward {percent(t.reward)}</span>
                              {t.feedback != null && (
                                <span data-testid="subtask-feedback" className={t.feedback ? "pos" : "neg"}>
                                  rated {t.feedback ? "good" : "bad"} by you (judge said {percent(t.judged_reward)})
                                </span>
                              )}
                              <span>predicted {percent(t.predicted_reward)}</span>
                              <span>turns {t.turns} (predicted {t.predicted_turns ?? "–"})</span>
                              <span className={(t.advantage ?? 0) >= 0 ? "pos" : "neg"}>advantage {signed(t.advantage)}</span>
                              <span>understanding {percent(t.understanding)}</span>
                              <span className="muted">night {t.night}</span>
                            </div>
                            <div className="muted">{t.reason}</div>
                            {t.evidence.length > 0 && (
                              <ul className="evidence" data-testid="evidence">
                                {t.evidence.map((e, j) => (
                                  <li
                                    key={j}
                                    className={
                                      e.startsWith("[verified]") ? (t.reward >= 0.5 ? "verified pos" : "verified neg") : undefined
                                    }
                                  >
                                    {e}
                                  </li>
                                ))}
                              </ul>
                            )}
                          </div>
                        ))}
                        <div className={`msg ${m.role}`}>
                          <div className="bubble">
                            <span className="muted">{m.role}</span> {m.role === "assistant" ? visibleText(m.text) : m.text}
                          </div>
                        </div>
                      </div>
                    );
                  })}
              </div>
            )}
          </>
        )}
      </section>
    </div>
  );
}
