/**
 * The Overview's usage (docs/portal.md, usage): requests per hour (the last 24 hours) or per UTC
 * day (the last 14) stacked by outcome, as server-rendered SVG whose bars link to the Request
 * logs filtered to that hour or day and outcome; beside it the period's totals, error rate,
 * long polls and p50/p95 latency (of the other requests); behind a <details>, the same figures
 * as a table for screen readers. No script.
 */
import type { Environment } from '../generated/schemas.ts';
import { STATUS_OF_OUTCOME } from '../request-logs/request-logs-service.ts';
import { OUTCOMES, type Outcome, type UsageBar, type UsageReport } from '../request-logs/usage.ts';
import { html, type SafeHtml } from '../web/html.ts';
import { paths } from './paths.ts';

const LABELS: Record<Outcome, string> = {
  '2xx': '2xx',
  '3xx': '3xx',
  '4xx': '4xx (not 429)',
  '429': '429 rate limited',
  '5xx': '5xx',
};

/** The Overview's choices: which environment, and 1 (24 hours) or 14 days. */
export interface UsageChoice {
  env: Environment;
  days: 1 | 14;
}

export function usageChoice(query: { usage_env?: string; usage_days?: string }): UsageChoice {
  return {
    env: query.usage_env === 'live' ? 'live' : 'sandbox',
    days: query.usage_days === '14' ? 14 : 1,
  };
}

const W = 720;
const H = 210;
const LEFT = 52;
const RIGHT = 24;
const TOP = 12;
const BOTTOM = 182;

/** 1, 2, 5, 10, 20, 50... : the first at least `n`. */
function nice(n: number): number {
  let step = 1;
  for (;;) {
    for (const m of [1, 2, 5]) if (step * m >= n) return step * m;
    step *= 10;
  }
}

/**
 * The y-axis of counts: its top (1, 2, 5, 10...) and ticks at whole requests, at most 6 of them
 * (0, 1 with one request; 0, 1, 2, 3, 4, 5 up to five; 0, 2, 4... 10 up to ten).
 */
export function countTicks(max: number): number[] {
  const top = nice(Math.max(1, max));
  const step = top <= 5 ? 1 : nice(top / 5);
  return Array.from({ length: Math.floor(top / step) + 1 }, (_, i) => i * step);
}

const ms = (value: number | null) => (value === null ? '–' : `${value} ms`);
const plural = (n: number, word: string) =>
  `${n.toLocaleString('en-US')} ${word}${n === 1 ? '' : 's'}`;

/** A bar's latency, and its long polls apart when it has any. */
function latencyOf(bar: UsageBar): string {
  const latency = `p50 ${ms(bar.p50_ms)}, p95 ${ms(bar.p95_ms)}`;
  return bar.long_polls === 0
    ? latency
    : `${latency} without ${plural(bar.long_polls, 'long poll')}`;
}

function barLabel(report: UsageReport, bar: UsageBar): string {
  return report.unit === 'hour'
    ? `${bar.start.slice(11, 16)} UTC, ${bar.start.slice(0, 10)}`
    : `${bar.start.slice(0, 10)} (UTC)`;
}

function axisLabel(report: UsageReport, bar: UsageBar): string {
  return report.unit === 'hour' ? bar.start.slice(11, 16) : bar.start.slice(5, 10);
}

/** The Request logs of one bar and outcome (the chart's links). */
function barLink(appId: string, report: UsageReport, bar: UsageBar, outcome: Outcome) {
  const query = new URLSearchParams({ env: report.environment });
  if (report.unit === 'hour') query.set('hour', `${bar.start.slice(0, 13)}:00Z`);
  else query.set('day', bar.start.slice(0, 10));
  query.set('status', STATUS_OF_OUTCOME[outcome]);
  return `${paths.logs(appId)}?${query.toString()}`;
}

function chart(appId: string, report: UsageReport, shown: readonly Outcome[]): SafeHtml {
  const ticks = countTicks(Math.max(...report.bars.map((b) => b.requests)));
  const top = ticks.at(-1)!;
  const slot = (W - LEFT - RIGHT) / report.bars.length;
  const width = Math.max(2, slot * 0.72);
  const y = (n: number) => BOTTOM - ((BOTTOM - TOP) * n) / top;
  const every = report.unit === 'hour' ? 3 : 2;
  const title = `${report.environment === 'live' ? 'Live' : 'Sandbox'} requests per ${report.unit} by outcome`;
  return html`<svg class="usage-chart" viewBox="0 0 ${W} ${H}" role="group" aria-label="${title}, ${report.unit === 'hour' ? 'the last 24 hours' : `the last ${report.bars.length} days`}, UTC">
${ticks.map(
  (n) => html`<line class="grid" x1="${LEFT}" x2="${W - RIGHT}" y1="${y(n)}" y2="${y(n)}"></line>
<text class="axis tick" x="${LEFT - 6}" y="${y(n) + 4}" text-anchor="end">${n.toLocaleString('en-US')}</text>`,
)}
${report.bars.map((bar, i) => {
  const x = LEFT + slot * i + (slot - width) / 2;
  let base = 0;
  const segments = shown
    .filter((o) => bar.outcomes[o] > 0)
    .map((o) => {
      const count = bar.outcomes[o];
      const y1 = y(base + count);
      const h = Math.max(1.5, y(base) - y1);
      base += count;
      const label = `${barLabel(report, bar)}: ${plural(count, `${LABELS[o]} request`)} of ${bar.requests} (${latencyOf(bar)}). Show them in the request logs.`;
      return html`<a href="${barLink(appId, report, bar, o)}" aria-label="${label}" data-outcome="${o}" data-start="${bar.start}" data-count="${count}"><rect class="seg seg-${o}" x="${x.toFixed(1)}" y="${y1.toFixed(1)}" width="${width.toFixed(1)}" height="${h.toFixed(1)}"><title>${label}</title></rect></a>`;
    });
  return html`${segments}${
    i % every === (report.bars.length - 1) % every
      ? html`<text class="axis" x="${(LEFT + slot * i + slot / 2).toFixed(1)}" y="${BOTTOM + 16}" text-anchor="middle">${axisLabel(report, bar)}</text>`
      : ''
  }`;
})}
<text class="axis" x="${LEFT - 6}" y="${BOTTOM + 16}" text-anchor="end">UTC</text>
</svg>`;
}

function summary(report: UsageReport, shown: readonly Outcome[]): SafeHtml {
  const { totals } = report;
  const rate = totals.error_rate === null ? '–' : `${(totals.error_rate * 100).toFixed(1)}%`;
  return html`<dl class="usage-totals">
<dt>Requests</dt><dd data-total="requests">${totals.requests.toLocaleString('en-US')}</dd>
<dt>Error rate</dt><dd data-total="error_rate">${rate} <span class="muted">(${plural(totals.errors, 'error')})</span></dd>
${shown.map(
  (o) =>
    html`<dt><span class="swatch seg-${o}" aria-hidden="true"></span>${LABELS[o]}</dt><dd data-total="${o}">${totals.outcomes[o].toLocaleString('en-US')}</dd>`,
)}
<dt>Latency p50</dt><dd data-total="p50">${ms(totals.p50_ms)}</dd>
<dt>Latency p95</dt><dd data-total="p95">${ms(totals.p95_ms)}</dd>
${
  totals.long_polls > 0
    ? html`<dt>Long polls</dt><dd data-total="long_polls">${plural(totals.long_polls, 'long poll')} <span class="muted">(not in p50/p95)</span></dd>`
    : ''
}
</dl>`;
}

function table(report: UsageReport, shown: readonly Outcome[]): SafeHtml {
  return html`<details class="usage-table">
<summary>The figures as a table</summary>
<div class="table-wrap"><table>
<caption>${report.environment} requests per ${report.unit} (UTC) by outcome, with estimated latency percentiles (long polls left out)</caption>
<thead><tr><th scope="col">${report.unit === 'hour' ? 'Hour' : 'Day'} (UTC)</th><th scope="col">Requests</th>${shown.map((o) => html`<th scope="col">${LABELS[o]}</th>`)}<th scope="col">Long polls</th><th scope="col">p50</th><th scope="col">p95</th></tr></thead>
<tbody>
${report.bars.map(
  (bar) => html`<tr>
<th scope="row">${report.unit === 'hour' ? `${bar.start.slice(0, 10)} ${bar.start.slice(11, 16)}` : bar.start.slice(0, 10)}</th>
<td class="num">${bar.requests}</td>${shown.map((o) => html`<td class="num">${bar.outcomes[o]}</td>`)}
<td class="num">${bar.long_polls}</td><td class="num">${ms(bar.p50_ms)}</td><td class="num">${ms(bar.p95_ms)}</td>
</tr>`,
)}
</tbody>
</table></div>
</details>`;
}

function switches(appId: string, choice: UsageChoice): SafeHtml {
  const link = (env: Environment, days: number) =>
    `${paths.app(appId)}?usage_env=${env}&usage_days=${days}#usage-heading`;
  const item = (href: string, current: boolean, text: string) =>
    html`<a href="${href}"${current ? html` aria-current="true"` : ''}>${text}</a>`;
  return html`<div class="usage-switches">
<nav class="env-switch" aria-label="Usage environment">${(['sandbox', 'live'] as const).map((e) =>
    item(link(e, choice.days), e === choice.env, e === 'sandbox' ? 'Sandbox' : 'Live'),
  )}</nav>
<nav class="env-switch" aria-label="Usage period">${item(link(choice.env, 1), choice.days === 1, 'Last 24 hours')}${item(link(choice.env, 14), choice.days === 14, 'Last 14 days')}</nav>
</div>`;
}

/** The Overview's Usage section; `report` null when the request log is off (REQUEST_LOGS=false). */
export function usageSection(
  appId: string,
  choice: UsageChoice,
  report: UsageReport | null,
): SafeHtml {
  if (!report)
    return html`<section class="card" aria-labelledby="usage-heading">
<h2 id="usage-heading">Usage</h2>
<p class="muted">No usage to show: this server does not keep a request log (<code>REQUEST_LOGS=false</code>), and the usage chart is counted from it.</p>
</section>`;
  const shown = OUTCOMES.filter((o) => o !== '3xx' || report.totals.outcomes['3xx'] > 0);
  const period =
    report.unit === 'hour' ? 'the last 24 hours' : `the last ${report.bars.length} days`;
  return html`<section class="card" aria-labelledby="usage-heading">
<h2 id="usage-heading">Usage</h2>
${switches(appId, choice)}
${
  report.totals.requests === 0
    ? html`<p class="empty">No ${report.environment} requests in ${period}.</p>`
    : html`<p class="muted">${report.environment === 'live' ? 'Live' : 'Sandbox'} requests per ${report.unit} in ${period} (UTC), by outcome. Choose a bar to see its requests. Latency percentiles are estimates, and leave out long polls (<code>wait</code>), counted apart (docs/portal.md).</p>
<div class="usage">
<div class="usage-plot">
${chart(appId, report, shown)}
<ul class="legend">${shown.map((o) => html`<li><span class="swatch seg-${o}" aria-hidden="true"></span>${LABELS[o]}</li>`)}</ul>
</div>
${summary(report, shown)}
</div>
${table(report, shown)}`
}
</section>`;
}
