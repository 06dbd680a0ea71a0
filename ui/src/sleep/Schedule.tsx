import { useSettings } from "../useSettings";

/** When the night starts by itself: a time of day, or after a while idle. */
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
      {status && <p className="muted">{status}</p>}
    </div>
  );
}
