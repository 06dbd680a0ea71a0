import { useEffect, useState } from "react";
import { api, errorText } from "./ipc";
import type { Settings } from "./types";

/** The saved settings, a `save` that writes them (the theme applies at
 * once), and a line saying how the last load or save went. */
export function useSettings() {
  const [settings, setSettings] = useState<Settings | null>(null);
  const [status, setStatus] = useState<string | null>(null);
  useEffect(() => {
    api.getSettings().then(setSettings).catch((e) => setStatus(errorText(e)));
  }, []);
  const save = (next: Settings) =>
    api
      .setSettings(next)
      .then(() => {
        setSettings(next);
        setStatus("Saved.");
        document.documentElement.dataset.theme = next.theme;
      })
      .catch((e) => setStatus(errorText(e)));
  return { settings, save, status, setStatus };
}
