// Line charts for rewards, losses and advantages, drawn by uPlot: hover
// for the values (in the legend), drag to zoom a range (double-click
// resets), click a legend entry to hide or show that series. Nights of
// hundreds of steps and weeks of nights stay legible.

import { useEffect, useMemo, useRef } from "react";
import uPlot from "uplot";
import "uplot/dist/uPlot.min.css";

export interface Series {
  name: string;
  values: (number | null)[];
  colour: string;
}

interface Props {
  title: string;
  series: Series[];
  /** A label per x position (e.g. the night's date); the index otherwise. */
  labels?: string[];
  height?: number;
  testId?: string;
}

/** The theme's colour for `name`, read from the page (canvas needs a value). */
function cssColour(name: string, fallback: string): string {
  const v = getComputedStyle(document.documentElement).getPropertyValue(name).trim();
  return v || fallback;
}

function format(v: number | null | undefined): string {
  if (v == null || !Number.isFinite(v)) return "–";
  return Math.abs(v) >= 100 ? v.toFixed(0) : v.toFixed(3);
}

export function LineChart({ title, series, labels, height = 180, testId }: Props) {
  const box = useRef<HTMLDivElement>(null);
  const n = Math.max(0, ...series.map((s) => s.values.length));
  const empty = !series.some((s) => s.values.some((v) => v != null && Number.isFinite(v)));
  // uPlot's data: x positions, then one row per series padded to the same length.
  const data = useMemo<uPlot.AlignedData>(
    () => [
      Array.from({ length: n }, (_, i) => i),
      ...series.map((s) => Array.from({ length: n }, (_, i) => s.values[i] ?? null)),
    ],
    [series, n],
  );
  const shape = series.map((s) => `${s.name}:${s.colour}`).join("|") + `|${height}|${(labels ?? []).join(",")}`;
  const plot = useRef<uPlot | null>(null);

  useEffect(() => {
    const el = box.current;
    if (!el || empty) return;
    const muted = cssColour("--muted", "#656d76");
    const grid = cssColour("--border", "#d0d7de");
    const axis = { stroke: muted, grid: { stroke: grid, width: 1 }, ticks: { stroke: grid, width: 1 } };
    const opts: uPlot.Options = {
      width: Math.max(240, el.clientWidth || 480),
      height,
      scales: { x: { time: false } },
      cursor: { drag: { x: true, y: false } },
      axes: [
        {
          ...axis,
          values: (_u, ticks) => ticks.map((t) => (Number.isInteger(t) ? (labels?.[t] ?? String(t)) : "")),
        },
        { ...axis, size: 50, values: (_u, ticks) => ticks.map((t) => format(t)) },
      ],
      series: [
        { label: labels ? "night" : "step", value: (_u, v) => (v == null ? "–" : (labels?.[v] ?? String(v))) },
        ...series.map((s) => ({
          label: s.name,
          stroke: s.colour,
          width: 2,
          spanGaps: false,
          points: { show: n <= 30 },
          value: (_u: uPlot, v: number | null) => format(v),
        })),
      ],
    };
    const p = new uPlot(opts, data, el);
    plot.current = p;
    const resize = new ResizeObserver(() => p.setSize({ width: Math.max(240, el.clientWidth), height }));
    resize.observe(el);
    return () => {
      resize.disconnect();
      p.destroy();
      plot.current = null;
    };
    // Rebuilt when the series or size change; new data alone is set below.
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [shape, empty]);

  useEffect(() => {
    plot.current?.setData(data);
  }, [data]);

  return (
    <figure className="chart" data-testid={testId} data-series={series.length}>
      <figcaption>{title}</figcaption>
      {empty ? <p className="muted">nothing to plot yet</p> : <div ref={box} className="plot" aria-label={title} role="img" />}
    </figure>
  );
}
