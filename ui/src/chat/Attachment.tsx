import { useEffect, useState } from "react";
import { api, errorText } from "../ipc";
import { PaperclipIcon } from "../icons";

/** A file a tool showed in the chat: an image inline (read from the store
 * by its blob hash), anything else by name. */
export function Attachment({ blob, name, image }: { blob: string; name: string; image: boolean }) {
  const [src, setSrc] = useState<string | null>(null);
  const [problem, setProblem] = useState<string | null>(null);
  useEffect(() => {
    if (!image) return;
    let live = true;
    api.imageData(blob).then(
      (url) => live && setSrc(url),
      (e) => live && setProblem(errorText(e)),
    );
    return () => {
      live = false;
    };
  }, [blob, image]);
  if (image && src) {
    return (
      <figure className="inline-image">
        <img src={src} alt={name} data-testid="inline-image" />
        <figcaption>{name}</figcaption>
      </figure>
    );
  }
  return (
    <div className="notice">
      <PaperclipIcon /> {name}
      {problem && <span className="muted"> ({problem})</span>}
    </div>
  );
}
