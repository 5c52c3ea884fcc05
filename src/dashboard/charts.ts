import { html, type SafeHtml } from '../core/html.ts';

const WIDTH = 720;
const HEIGHT = 180;
const LEFT = 36;
const BOTTOM = 22;
const TOP = 8;

/**
 * A figure per day (alerts sent, revenue) as an SVG bar chart, drawn on the server (the dashboard
 * runs no scripts). Screen readers get a one-line summary; `format` writes a value as people read
 * it (an amount in its currency), the axis included.
 */
export function dailyBarChart(days: Array<{ day: string; value: number }>, label: string, format: (value: number) => string = String): SafeHtml {
  const max = Math.max(1, ...days.map((d) => d.value));
  const top = niceCeiling(max);
  const plotWidth = WIDTH - LEFT - 4;
  const plotHeight = HEIGHT - BOTTOM - TOP;
  const step = plotWidth / days.length;
  const barWidth = Math.max(2, step * 0.7);
  const total = days.reduce((sum, d) => sum + d.value, 0);
  const busiest = days.reduce((a, b) => (b.value > a.value ? b : a), days[0]!);
  const summary = `${label}: ${format(total)} in ${days.length} days${total > 0 ? `, most on ${busiest.day} (${format(busiest.value)})` : ''}.`;
  const bars = days.map((d, i) => {
    const h = (d.value / top) * plotHeight;
    const x = LEFT + i * step + (step - barWidth) / 2;
    const y = TOP + plotHeight - h;
    return html`<rect class="day" x="${x.toFixed(1)}" y="${y.toFixed(1)}" width="${barWidth.toFixed(1)}" height="${h.toFixed(1)}"><title>${d.day}: ${format(d.value)}</title></rect>`;
  });
  const ticks = [0, top / 2, top].map((value) => {
    const y = TOP + plotHeight - (value / top) * plotHeight;
    return html`<line x1="${LEFT}" x2="${WIDTH}" y1="${y.toFixed(1)}" y2="${y.toFixed(1)}"></line><text x="${LEFT - 6}" y="${(y + 4).toFixed(1)}" text-anchor="end">${format === String ? formatTick(value) : format(value)}</text>`;
  });
  const first = days[0]?.day ?? '';
  const last = days.at(-1)?.day ?? '';
  return html`<figure class="chart">
<svg viewBox="0 0 ${WIDTH} ${HEIGHT}" role="img" aria-label="${summary}">${ticks}${bars}
<text x="${LEFT}" y="${HEIGHT - 4}">${first}</text><text x="${WIDTH}" y="${HEIGHT - 4}" text-anchor="end">${last}</text></svg>
<figcaption class="muted">${summary}</figcaption>
</figure>`;
}

/** A bar in a table cell, as wide as the value's share of the largest (the numbers stay in their own cell). */
export function inlineBar(value: number, max: number): SafeHtml {
  const width = max > 0 ? Math.round((value / max) * 100) : 0;
  return html`<span class="bar" style="width: ${Math.max(width, value > 0 ? 2 : 0)}%" aria-hidden="true"></span>`;
}

function niceCeiling(value: number): number {
  if (value <= 4) return 4;
  const magnitude = 10 ** Math.floor(Math.log10(value));
  for (const factor of [1, 2, 2.5, 5, 10]) if (factor * magnitude >= value) return factor * magnitude;
  return 10 * magnitude;
}

function formatTick(value: number): string {
  return Number.isInteger(value) ? String(value) : value.toFixed(1);
}
