// A stacked bar chart as inline SVG, drawn by hand: one bar per label
// (a day), one colour per series. No chart library: this is all the
// console needs, and it keeps the page free of dependencies.
import { h, s, num } from './dom.js';

const colours = ['#2563eb', '#16a34a', '#d97706', '#9333ea', '#dc2626', '#0891b2', '#65a30d', '#db2777'];

// stackedBars draws series [{name, values[]}] over labels[]; title names
// the chart for screen readers, which also get the numbers as a table.
export function stackedBars(title, labels, series) {
  const totals = labels.map((_, i) => series.reduce((t, se) => t + (se.values[i] || 0), 0));
  const max = Math.max(1, ...totals);
  const step = niceStep(max / 4);
  const top4 = Math.ceil(max / step) * step;
  // The left margin fits the widest tick label (about 7 px a character).
  const W = 760, H = 240, left = Math.max(56, 14 + 7 * num(top4).length), bottom = 36, top = 12, right = 8;
  const plotW = W - left - right, plotH = H - top - bottom;
  const bw = plotW / Math.max(1, labels.length);
  const y = (v) => top + plotH - (v / top4) * plotH;
  const tid = `chart-${Math.random().toString(36).slice(2)}`;
  const svg = s('svg', { viewBox: `0 0 ${W} ${H}`, role: 'img', 'aria-labelledby': tid, class: 'chart' },
    s('title', { id: tid }, title));
  for (let v = 0; v <= top4; v += step) {
    svg.append(s('line', { x1: left, x2: W - right, y1: y(v), y2: y(v), class: 'grid' }),
      s('text', { x: left - 6, y: y(v) + 4, 'text-anchor': 'end', class: 'tick' }, num(v)));
  }
  labels.forEach((lab, i) => {
    let base = 0;
    series.forEach((se, k) => {
      const v = se.values[i] || 0;
      if (v > 0) {
        svg.append(s('rect', { x: left + i * bw + 1, y: y(base + v), width: Math.max(1, bw - 2), height: y(base) - y(base + v), fill: colours[k % colours.length] },
          s('title', {}, `${lab} · ${se.name}: ${num(v)}`)));
      }
      base += v;
    });
    if (i % Math.ceil(labels.length / 10) === 0) {
      svg.append(s('text', { x: left + i * bw + bw / 2, y: H - bottom + 16, 'text-anchor': 'middle', class: 'tick' }, lab.slice(5)));
    }
  });
  const legend = h('ul', { class: 'legend' }, series.map((se, k) =>
    h('li', {}, h('span', { class: 'swatch', 'data-colour': k % colours.length }), ` ${se.name}`)));
  // The swatch colours are set here (the stylesheet has no per-series rules).
  legend.querySelectorAll('.swatch').forEach((el) => { el.style.background = colours[Number(el.dataset.colour)]; });
  const data = h('details', {}, h('summary', {}, 'The numbers'),
    h('table', {}, h('caption', {}, title),
      h('thead', {}, h('tr', {}, h('th', { scope: 'col' }, 'Day'), series.map((se) => h('th', { scope: 'col' }, se.name)))),
      h('tbody', {}, labels.map((lab, i) => h('tr', {}, h('th', { scope: 'row' }, lab), series.map((se) => h('td', { class: 'n' }, num(se.values[i] || 0))))))));
  return h('figure', { class: 'chartbox' }, svg, legend, data);
}

function niceStep(x) {
  const p = Math.pow(10, Math.floor(Math.log10(Math.max(x, 1))));
  for (const m of [1, 2, 5, 10]) if (m * p >= x) return m * p;
  return 10 * p;
}
