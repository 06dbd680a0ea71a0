import { useCallback, useEffect, useState } from "react";
import { LineChart } from "../charts";
import { clock, duration, percent } from "../format";
import { api, errorText } from "../ipc";
import type { CheckpointView, FamilyCheck, NightReport, SleepEstimate, SleepEvent } from "../types";
import { applySleepEvent, fractionDone, idle, startProgress, STAGES, type SleepProgress } from "./sleepStore";
import { MoonIcon } from "../icons";
import { Schedule } from "./Schedule";
import { judgeAgreement } from "../review/nightStats";

/** The last part of a path, for a model shown by its file's name. */
function fileName(path: string): string {
  return path.split(/[\\/]/).pop() ?? path;
}

/** The morning summary's line on the judge against the person's ratings. */
function JudgeRow({ report }: { report: NightReport }) {
  const judge = judgeAgreement(report);
  if (!judge) return null;
  return (
    <tr data-testid="judge-agreement-summary" className={judge.doubtful ? "judge-doubt" : ""}>
      <th>your ratings</th>
      <td>
        {judge.doubtful ? "⚠ " : ""}
        {judge.text}
      </td>
    </tr>
  );
}

export function SleepView({ onAwake }: { onAwake: () => void }) {
  const [progress, setProgress] = useState<SleepProgress>(idle);
  const [estimate, setEstimate] = useState<SleepEstimate | null>(null);
  const [confirming, setConfirming] = useState(false);
  const [checkpoints, setCheckpoints] = useState<CheckpointView[]>([]);
  const [problem, setProblem] = useState<string | null>(null);

  const onEvent = useCallback(
    (ev: SleepEvent) => {
      setProgress((p) => applySleepEvent(p, ev));
      if (ev.kind !== "progress") {
        onAwake();
        void api.listCheckpoints().then(setCheckpoints);
      }
    },
    [onAwake],
  );

  useEffect(() => {
    api.listCheckpoints().then(setCheckpoints).catch((e) => setProblem(errorText(e)));
    // One subscription for every night: the one running now (started by
    // the schedule, say, whose events so far are replayed), the last one
    // (its summary), and those started from here.
    api.watchSleep(onEvent).catch((e) => setProblem(errorText(e)));
  }, [onEvent]);

  const ask = async () => {
    setProblem(null);
    try {
      setEstimate(await api.sleepEstimate());
      setConfirming(true);
    } catch (e) {
      setProblem(errorText(e));
    }
  };

  const start = async () => {
    setConfirming(false);
    setProgress(startProgress());
    try {
      await api.startSleep();
    } catch (e) {
      setProgress(idle);
      setProblem(errorText(e));
    }
  };

  const rollback = async (id: number) => {
    try {
      await api.rollbackCheckpoint(id);
      setCheckpoints(await api.listCheckpoints());
      onAwake();
    } catch (e) {
      setProblem(errorText(e));
    }
  };

  const o = progress.outcome;
  return (
    <div className="sleep">
      {problem && <div className="error" role="alert">{problem}</div>}
      {!progress.running && (
        <div className="sleep-start">
          <button className="sleep-button" onClick={() => void ask()}>
            <MoonIcon size={20} /> Sleep
          </button>
          <p className="muted">The agent judges its day, learns from it, and wakes up on the new model only if it is not worse.</p>
        </div>
      )}
      {confirming && estimate && (
        <div className="modal" role="dialog" aria-label="Start the night">
          <div className="modal-body">
            <h3>Sleep now?</h3>
            <p>
              The agent will judge <strong>{estimate.messages}</strong> messages from <strong>{estimate.channels}</strong> channels with its own model, predict what it
              expected, train a LoRA on the difference, merge and export it, and check it against the current model.
            </p>
            <p>
              This takes roughly <strong>{duration(estimate.seconds)}</strong>. Chat waits until it is done; messages sent meanwhile are answered in the morning. If
              the new model is worse, the current one stays.
            </p>
            <div className="row">
              <button onClick={() => void start()}>Sleep</button>
              <button className="secondary" onClick={() => setConfirming(false)}>Not now</button>
            </div>
          </div>
        </div>
      )}
      {progress.running && (
        <div className="sleep-progress" data-testid="sleep-progress">
          <h2>Sleeping… {percent(fractionDone(progress))}</h2>
          <progress max={1} value={fractionDone(progress)} />
          <ol className="stages">
            {STAGES.map((s) => (
              <li key={s} className={progress.done[s] !== undefined ? "done" : progress.stage === s ? "current" : ""}>
                {s}
                {progress.done[s] !== undefined && <span className="muted"> {duration(progress.done[s] as number)}</span>}
                {progress.stage === s && progress.item && (
                  <span className="muted"> {progress.item.index + 1}/{progress.item.count} {progress.item.label}</span>
                )}
              </li>
            ))}
          </ol>
          {progress.steps.length > 0 && (
            <div className="train-figs" data-testid="train-figs">
              step {progress.steps[progress.steps.length - 1].step}/{progress.totalSteps} · {progress.tokensPerS?.toFixed(1)} tok/s · about {duration(progress.etaS ?? NaN)} left
            </div>
          )}
          <LineChart
            title="Training loss"
            testId="live-loss"
            series={[
              { name: "total", values: progress.steps.map((s) => s.loss), colour: "#8b949e" },
              { name: "OAPL", values: progress.steps.map((s) => s.oapl), colour: "#1f6feb" },
              { name: "ECHO env", values: progress.steps.map((s) => s.env), colour: "#a371f7" },
            ]}
          />
          <button className="danger" onClick={() => void api.cancelSleep().catch((e) => setProblem(errorText(e)))}>Cancel (keep the current model)</button>
        </div>
      )}
      {o && (
        <div className={`morning ${o.kind}`} data-testid="morning-summary">
          <h2>Good morning</h2>
          {o.kind === "failed" ? (
            <p className="error">The night stopped: {o.message}. The current model is kept.</p>
          ) : (
            <>
              <p>
                {o.deployed ? (
                  <>Deployed a new checkpoint: <code>{o.deployed}</code></>
                ) : (
                  <>Kept the current model: {o.keptReason}</>
                )}
              </p>
              <table>
                <tbody>
                  <tr><th>sub-tasks judged</th><td>{o.report.summary?.tasks ?? 0}</td></tr>
                  {(o.report.judge || o.report.base) && (
                    <tr data-testid="judge-model"><th>judged by</th><td><code>{fileName(o.report.judge || o.report.base)}</code></td></tr>
                  )}
                  <tr><th>mean reward</th><td>{percent(o.report.summary?.mean_reward)}</td></tr>
                  <tr><th>mean predicted</th><td>{percent(o.report.summary?.mean_predicted)}</td></tr>
                  <JudgeRow report={o.report} />
                  <tr><th>training steps</th><td>{o.report.train?.steps ?? 0}</td></tr>
                  <tr>
                    <th>perplexity on the sanity text</th>
                    <td>
                      {o.report.verify?.perplexity_before?.toFixed(2) ?? "–"} → {o.report.verify?.perplexity_after?.toFixed(2) ?? "–"}
                    </td>
                  </tr>
                </tbody>
              </table>
              {(o.report.practice?.length ?? 0) > 0 && (
                <ul className="practice-lines" data-testid="practice-lines">
                  {o.report.practice?.map((l, i) => <li key={i}>{l}</li>)}
                </ul>
              )}
              {(o.report.verify?.tasks?.length ?? 0) > 0 && <TaskChecks checks={o.report.verify?.tasks ?? []} />}
              {progress.notes.length > 0 && (
                <details>
                  <summary>{progress.notes.length} notes</summary>
                  <ul>{progress.notes.map((n, i) => <li key={i}>{n}</li>)}</ul>
                </details>
              )}
            </>
          )}
        </div>
      )}
      <h3>Checkpoints</h3>
      <table className="checkpoints">
        <tbody>
          {checkpoints.map((c) => (
            <tr key={c.id} className={c.active ? "active" : ""}>
              <td>{c.active ? "●" : ""}</td>
              <td>#{c.id}</td>
              <td>{c.night != null ? `night ${c.night}` : "base"}</td>
              <td>{clock(c.created_ms)}</td>
              <td className="path">{c.path}</td>
              <td>
                {!c.active && c.exists && !progress.running && (
                  <button className="secondary" onClick={() => void rollback(c.id)}>Use this one</button>
                )}
                {!c.exists && <span className="muted">file gone</span>}
              </td>
            </tr>
          ))}
          {checkpoints.length === 0 && (
            <tr><td className="muted">No checkpoints yet: the first night keeps the model you started with as checkpoint 1.</td></tr>
          )}
        </tbody>
      </table>
      <Schedule />
    </div>
  );
}

/** Tasks solved per family by the old and the new model, as paired bars. */
function TaskChecks({ checks }: { checks: FamilyCheck[] }) {
  return (
    <table className="task-checks" data-testid="task-checks">
      <caption>Tasks solved, old model → new model</caption>
      <tbody>
        {checks.map((c) => (
          <tr key={c.family}>
            <th>
              {c.family} <span className="muted">level {c.level}, {c.tasks} tasks</span>
            </th>
            <td>
              <div className="bar before" style={{ width: `${c.before * 100}%` }} title={`before: ${percent(c.before)}`} />
              <div className="bar after" style={{ width: `${c.after * 100}%` }} title={`after: ${percent(c.after)}`} />
            </td>
            <td className={c.after > c.before ? "better" : c.after < c.before ? "worse" : ""}>
              {percent(c.before)} → {percent(c.after)}
            </td>
          </tr>
        ))}
      </tbody>
    </table>
  );
}
