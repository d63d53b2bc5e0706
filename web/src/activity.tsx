// The activity view (#/activity), loaded on first use with its chart
// library (uPlot): spend per day by directory and by model, turns and
// tokens per day, sessions started per day by their status, from the
// Activity RPC over the usage ledger; the same data as CSV.
import { useEffect, useRef, useState } from "preact/hooks";
import { ConnectError } from "@connectrpc/connect";
import uPlot from "uplot";
import "uplot/dist/uPlot.min.css";
import "./activity.css";
import type { ActivityResponse } from "./gen/claudectl/v1/claudectl_pb";
import { sessions } from "./api";
import { activityCSV, type Series } from "./logic";

const colors = ["#b35c1e", "#2f7ed8", "#3a9a3a", "#9b59b6", "#d4a017", "#c0392b", "#16a085", "#7f8c8d", "#e67e22", "#34495e"];

function Chart(props: { title: string; days: string[]; series: Series[]; money?: boolean; bars?: boolean; testid: string }) {
  const box = useRef<HTMLDivElement>(null);
  useEffect(() => {
    const el = box.current;
    if (!el || props.series.length === 0) return;
    const xs = props.days.map((d) => Date.parse(d + "T12:00:00") / 1000);
    const fmt = (v: number) => (props.money ? "$" + v.toFixed(v < 1 ? 4 : 2) : String(Math.round(v)));
    const opts: uPlot.Options = {
      width: Math.max(200, el.clientWidth),
      height: 200,
      legend: { show: true },
      // Half a day of room on each side: the first and last days' bars whole.
      scales: { x: { time: true, range: (_u, min, max) => [min - 43200, max + 43200] }, y: { range: (_u, _min, max) => [0, max > 0 ? max * 1.1 : 1] } },
      axes: [{ stroke: "#888", grid: { stroke: "#8883" } }, { stroke: "#888", grid: { stroke: "#8883" }, values: (_u, vs) => vs.map(fmt), size: 72 }],
      series: [
        { label: "day", value: (_u, v) => (v == null ? "" : new Date(v * 1000).toISOString().slice(0, 10)) },
        ...props.series.map((s, i) => ({
          label: s.name,
          stroke: colors[i % colors.length],
          fill: props.bars ? colors[i % colors.length] + "99" : undefined,
          width: 2,
          points: { show: !props.bars, size: 5 },
          value: (_u: uPlot, v: number | null) => (v == null ? "" : fmt(v)),
          ...(props.bars ? { paths: uPlot.paths.bars!({ size: [0.6, 40] }) } : {}),
        })),
      ],
    };
    const u = new uPlot(opts, [xs, ...props.series.map((s) => s.values)], el);
    const ro = new ResizeObserver(() => u.setSize({ width: Math.max(200, el.clientWidth), height: 200 }));
    ro.observe(el);
    return () => { ro.disconnect(); u.destroy(); };
  }, [props.days, props.series]);
  return (
    <figure class="chart" data-testid={props.testid}>
      <figcaption>{props.title}</figcaption>
      {props.series.length === 0 ? <p class="muted">Nothing in these days.</p> : <div ref={box} />}
    </figure>
  );
}

const sum = (s: Series) => s.values.reduce((a, b) => a + b, 0);

export function ActivityView() {
  const [days, setDays] = useState(30);
  const [data, setData] = useState<ActivityResponse | null>(null);
  const [err, setErr] = useState("");
  useEffect(() => {
    setErr("");
    sessions.activity({ days, utcOffsetMinutes: -new Date().getTimezoneOffset() }).then(setData, (e) => setErr(ConnectError.from(e).rawMessage));
  }, [days]);
  if (err) return <section><h2>Activity</h2><p class="error">{err}</p></section>;
  if (!data) return <section><h2>Activity</h2><p class="muted">Loading…</p></section>;
  const total = data.costByCwd.reduce((a, s) => a + sum(s), 0);
  const groups = [
    { metric: "cost_usd_by_directory", series: data.costByCwd },
    { metric: "cost_usd_by_model", series: data.costByModel },
    { metric: "turns", series: data.turns ? [data.turns] : [] },
    { metric: "tokens", series: data.tokens },
    { metric: "sessions_started_by_status", series: data.sessionsByStatus },
  ];
  const csv = "data:text/csv;charset=utf-8," + encodeURIComponent(activityCSV(data.days, groups));
  return (
    <section class="activity">
      <h2>Activity</h2>
      <div class="filters">
        <select aria-label="days" value={String(days)} onChange={(e) => setDays(Number((e.target as HTMLSelectElement).value))}>
          {[7, 30, 90, 365].map((d) => <option key={d} value={d}>the last {d} days</option>)}
        </select>
        <a class="button" download={`claudectl-activity-${data.days[data.days.length - 1]}.csv`} href={csv} data-testid="activity-csv">Download CSV</a>
      </div>
      <p>
        Spent <strong data-testid="activity-total">${total.toFixed(4)}</strong> in {sum(data.turns ?? { name: "", values: [] })} turns
        {data.truncated && <span class="error"> (not every turn: the ledger holds more than the daemon sums at once)</span>}
      </p>
      <table class="totals" data-testid="activity-cwds">
        <tbody>
          {data.costByCwd.map((s) => <tr key={s.name}><td class="cwd">{s.name}</td><td>${sum(s).toFixed(4)}</td></tr>)}
        </tbody>
      </table>
      <Chart testid="chart-cwd" title="Spend per day by directory" days={data.days} series={data.costByCwd} money bars />
      <Chart testid="chart-model" title="Spend per day by model" days={data.days} series={data.costByModel} money bars />
      <Chart testid="chart-turns" title="Turns per day" days={data.days} series={data.turns ? [data.turns] : []} bars />
      <Chart testid="chart-tokens" title="Tokens per day" days={data.days} series={data.tokens.filter((s) => sum(s) > 0)} />
      <Chart testid="chart-status" title="Sessions started per day, by their status now" days={data.days} series={data.sessionsByStatus} bars />
    </section>
  );
}
