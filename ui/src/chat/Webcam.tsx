import { useEffect, useRef, useState } from "react";

/** A live preview of the camera; `onCapture` gets a PNG as base64. */
export function Webcam({ onCapture, onClose }: { onCapture: (png: string) => void; onClose: () => void }) {
  const video = useRef<HTMLVideoElement>(null);
  const [error, setError] = useState<string | null>(null);
  useEffect(() => {
    let stream: MediaStream | null = null;
    const media = navigator.mediaDevices;
    if (!media?.getUserMedia) {
      setError("This window has no camera access.");
      return;
    }
    media
      .getUserMedia({ video: true, audio: false })
      .then((s) => {
        stream = s;
        if (video.current) {
          video.current.srcObject = s;
          void video.current.play();
        }
      })
      .catch((e: unknown) => setError(`No camera: ${e instanceof Error ? e.message : String(e)}`));
    return () => stream?.getTracks().forEach((t) => t.stop());
  }, []);
  const capture = () => {
    const v = video.current;
    if (!v || !v.videoWidth) return;
    const c = document.createElement("canvas");
    c.width = v.videoWidth;
    c.height = v.videoHeight;
    c.getContext("2d")?.drawImage(v, 0, 0);
    onCapture(c.toDataURL("image/png").split(",")[1] ?? "");
  };
  return (
    <div className="modal" role="dialog" aria-label="Webcam">
      <div className="modal-body">
        <h3>Webcam</h3>
        {error ? <p className="error">{error}</p> : <video ref={video} data-testid="webcam-preview" muted playsInline />}
        <div className="row">
          <button onClick={capture} disabled={!!error}>Capture</button>
          <button className="secondary" onClick={onClose}>Close</button>
        </div>
      </div>
    </div>
  );
}
