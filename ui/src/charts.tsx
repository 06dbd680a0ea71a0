// A small SVG line chart: enough for rewards, losses and advantages without
// a charting library.

export interface Series {
  name: string;
  values: (number | null)[];
  colour: string;
}

interface Props {
  title: string;
  series: Series[];
  labels?: string[];
  height?: number;
  testId?: string;
}

export function LineChart({ title, series, labels, height = 160, testId }: Props) {
  const width = 480;
  const pad = { l: 44, r: 10, t: 10, b: 22 };
  const all = series.flatMap((s) => s.values.filter((v): v is number => v != null && Number.isFinite(v)));
  const n = Math.max(0, ...series.map((s) => s.values.length));
  if (all.length === 0) {
    return (
      <figure className="chart" data-testid={testId}>
        <figcaption>{title}</figcaption>
        <p className="muted">nothing to plot yet</p>
      </figure>
    );
  }
  let lo = Math.min(...all);
  let hi = Math.max(...all);
  if (hi === lo) {
    hi += 0.5;
    lo -= 0.5;
  }
  const x = (i: number) => pad.l + (n <= 1 ? 0.5 : i / (n - 1)) * (width - pad.l - pad.r);
  const y = (v: number) => pad.t + (1 - (v - lo) / (hi - lo)) * (height - pad.t - pad.b);
  const path = (vals: (number | null)[]) => {
    let d = "";
    let pen = false;
    vals.forEach((v, i) => {
      if (v == null || !Number.isFinite(v)) {
        pen = false;
        return;
      }
      d += `${pen ? "L" : "M"}${x(i).toFixed(1)},${y(v).toFixed(1)}`;
      pen = true;
    });
    return d;
  };
  const ticks = [lo, (lo + hi) / 2, hi];
  return (
    <figure className="chart" data-testid={testId}>
      <figcaption>
        {title}
        {series.map((s) => (
          <span key={s.name} className="legend">
            <i style={{ background: s.colour }} /> {s.name}
          </span>
        ))}
      </figcaption>
      <svg viewBox={`0 0 ${width} ${height}`} role="img" aria-label={title}>
        {ticks.map((t) => (
          <g key={t}>
            <line x1={pad.l} x2={width - pad.r} y1={y(t)} y2={y(t)} className="grid" />
            <text x={pad.l - 4} y={y(t) + 4} textAnchor="end" className="tick">
              {Math.abs(t) >= 100 ? t.toFixed(0) : t.toFixed(2)}
            </text>
          </g>
        ))}
        {labels && labels.length > 0 && (
          <text x={x(0)} y={height - 4} textAnchor={n <= 1 ? "middle" : "start"} className="tick">{labels[0]}</text>
        )}
        {labels && labels.length > 1 && (
          <text x={x(n - 1)} y={height - 4} textAnchor="end" className="tick">{labels[labels.length - 1]}</text>
        )}
        {series.map((s) => (
          <g key={s.name}>
            <path d={path(s.values)} fill="none" stroke={s.colour} strokeWidth={2} />
            {s.values.length <= 30 &&
              s.values.map((v, i) =>
                v == null ? null : <circle key={i} cx={x(i)} cy={y(v)} r={2.5} fill={s.colour} />,
              )}
          </g>
        ))}
      </svg>
    </figure>
  );
}
