// Line icons drawn inline, so the window needs no icon font or emoji font.

const props = { width: 16, height: 16, viewBox: "0 0 24 24", fill: "none", stroke: "currentColor", strokeWidth: 2, strokeLinecap: "round", strokeLinejoin: "round" } as const;

export const PaperclipIcon = () => (
  <svg {...props} aria-hidden="true">
    <path d="M21 12.5l-8.5 8.5a5 5 0 0 1-7-7L14 5.5a3.5 3.5 0 0 1 5 5L10.5 19a2 2 0 0 1-3-3L15 8.5" />
  </svg>
);

export const CameraIcon = () => (
  <svg {...props} aria-hidden="true">
    <path d="M4 7h3l2-3h6l2 3h3v12H4z" />
    <circle cx="12" cy="13" r="3.5" />
  </svg>
);

export const MoonIcon = ({ size = 16 }: { size?: number }) => (
  <svg {...props} width={size} height={size} aria-hidden="true">
    <path d="M20 14.5A8 8 0 0 1 9.5 4a8 8 0 1 0 10.5 10.5z" />
  </svg>
);
