import type { Settings } from "../types";
import { useSettings } from "../useSettings";

/** The families the model can practise (the held-out one is only measured). */
const FAMILIES = [
  { family: "arithmetic", what: "chained arithmetic with a calculator" },
  { family: "strings", what: "string edits with Python" },
  { family: "ledger", what: "bookkeeping in a CSV file" },
];

/** `s` with `family` practised for `tasks` tasks, or not at all (`null`). */
function withPractice(s: Settings, family: string, tasks: number | null): Settings {
  const others = s.practice.filter((p) => p.family !== family);
  return { ...s, practice: tasks == null ? others : [...others, { family, tasks }] };
}

/** When the night starts by itself, and what it practises first. */
export function Schedule() {
  const { settings: s, save, status } = useSettings();
  if (!s) return null;
  return (
    <div className="schedule">
      <h3>Schedule</h3>
      <label>
        <input type="checkbox" aria-label="Sleep at a set time" checked={s.sleep_at != null} onChange={(e) => void save({ ...s, sleep_at: e.target.checked ? "02:00" : null })} />
        Sleep every night at
        <input type="time" aria-label="Sleep time" disabled={s.sleep_at == null} value={s.sleep_at ?? "02:00"} onChange={(e) => void save({ ...s, sleep_at: e.target.value })} />
      </label>
      <label>
        <input type="checkbox" aria-label="Sleep when idle" checked={s.idle_minutes != null} onChange={(e) => void save({ ...s, idle_minutes: e.target.checked ? 60 : null })} />
        Sleep after
        <input type="number" min={1} aria-label="Idle minutes" disabled={s.idle_minutes == null} value={s.idle_minutes ?? 60} onChange={(e) => void save({ ...s, idle_minutes: Number(e.target.value) })} />
        minutes without a message (only when there is something new)
      </label>
      <h3>Practice</h3>
      <p className="muted">Before training, the model writes tasks it solves about half the time, tries each four times, and a program checks the answers.</p>
      {FAMILIES.map(({ family, what }) => {
        const batch = s.practice.find((p) => p.family === family);
        return (
          <label key={family}>
            <input type="checkbox" aria-label={`Practise ${family}`} checked={batch != null} onChange={(e) => void save(withPractice(s, family, e.target.checked ? 6 : null))} />
            Practise {what}:
            <input type="number" min={1} aria-label={`${family} tasks`} disabled={batch == null} value={batch?.tasks ?? 6} onChange={(e) => void save(withPractice(s, family, Number(e.target.value)))} />
            tasks
          </label>
        );
      })}
      {status && <p className="muted">{status}</p>}
    </div>
  );
}
