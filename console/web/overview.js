// A project's overview: events stored per day for 30 days by source (the
// daily usage counters), monthly usage by source, event names, and a quick
// event × day segmentation (the query API).
import { h, n, num, table } from './dom.js';
import { api, app } from './api.js';
import { stackedBars } from './chart.js';

const day = (d) => d.toISOString().slice(0, 10);

function lastDays(n) {
  const to = new Date();
  const from = new Date(to.getTime() - (n - 1) * 86400000);
  return { from: day(from), to: day(to) };
}

async function segmentation(project, event, days) {
  const { from, to } = lastDays(days);
  const q = new URLSearchParams({ project_id: project, event, from_date: from, to_date: to, unit: 'day', type: 'general' });
  return (await api(`/api/query/segmentation?${q}`)).data;
}

// Events per day by source come from the daily usage counters
// (…/usage/daily): the store counts each stored event under the path it
// came by (import, track, warehouse-import, amplitude) on the UTC day it
// was stored, so /track and /import are told apart without a query.
async function perDay(project) {
  const days = (await api(`${app(project)}/usage/daily?days=30`)).results.days;
  const sources = [...new Set(days.flatMap((d) => Object.keys(d.sources)))];
  const order = ['import', 'track', 'warehouse-import', 'amplitude'];
  sources.sort((a, b) => (order.indexOf(a) + 1 || 99) - (order.indexOf(b) + 1 || 99) || a.localeCompare(b));
  return stackedBars('Events stored per day, last 30 days (UTC), by source', days.map((d) => d.day),
    sources.map((name) => ({ name, values: days.map((d) => d.sources[name] || 0) })));
}

function usage(months) {
  const sources = [...new Set(months.flatMap((m) => Object.keys(m.sources)))];
  return table('Monthly usage (events stored, by source)', ['Month', ...sources.map(n), n('Total')],
    months.map((m) => h('tr', {}, h('th', { scope: 'row' }, m.month), sources.map((s) => h('td', { class: 'n' }, num(m.sources[s] || 0))), h('td', { class: 'n' }, num(m.total)))),
    { class: 'usage' });
}

function quickSegmentation(ctx, names) {
  const ev = h('select', { id: 'seg-event' }, names.map((n) => h('option', { value: n }, n)));
  const days = h('select', { id: 'seg-days' }, [7, 14, 30].map((n) => h('option', { value: n, selected: n === 14 }, `${n} days`)));
  const out = h('div', { id: 'seg-out' });
  const run = h('button', { id: 'seg-run', type: 'submit' }, 'Segment');
  const form = h('form', { class: 'toolbar', 'aria-label': 'Quick segmentation' },
    h('label', { for: 'seg-event' }, 'Event'), ev, h('label', { for: 'seg-days' }, 'Range'), days, run);
  form.addEventListener('submit', async (e) => {
    e.preventDefault();
    try {
      const d = await segmentation(ctx.project.id, ev.value, Number(days.value));
      const values = d.series.map((x) => (d.values[ev.value] || {})[x] || 0);
      out.replaceChildren(stackedBars(`${ev.value} per day`, d.series, [{ name: ev.value, values }]),
        table(`${ev.value} per day`, ['Day', n('Events')], d.series.map((x, i) => h('tr', {}, h('th', { scope: 'row' }, x), h('td', { class: 'n' }, num(values[i]))))));
      ctx.say(`Segmentation of ${ev.value} ready.`);
    } catch (err) {
      out.replaceChildren(h('p', { role: 'alert', class: 'error' }, err.message));
    }
  });
  return h('section', { 'aria-labelledby': 'seg-h' }, h('h2', { id: 'seg-h' }, 'Quick segmentation'),
    names.length ? [form, out] : h('p', {}, 'No events in the last 30 days.'));
}

export async function overviewPage(ctx) {
  const p = ctx.project.id;
  const [names, use] = await Promise.all([
    api(`/api/query/events/names?${new URLSearchParams({ project_id: p, type: 'general', limit: 100 })}`),
    api(`${app(p)}/usage`),
  ]);
  let chart;
  try {
    chart = await perDay(p);
  } catch (e) {
    chart = h('p', { role: 'alert', class: 'error' }, e.message);
  }
  return h('div', {},
    h('h1', {}, `Overview: ${ctx.project.name}`),
    h('section', { 'aria-labelledby': 'perday-h' }, h('h2', { id: 'perday-h' }, 'Events per day'), chart),
    h('section', { 'aria-labelledby': 'usage-h' }, h('h2', { id: 'usage-h' }, 'Usage'), usage(use.results.months)),
    h('section', { 'aria-labelledby': 'names-h' }, h('h2', { id: 'names-h' }, 'Event names, last 30 days'),
      h('ul', { class: 'names' }, names.map((n) => h('li', {}, n)))),
    quickSegmentation(ctx, names));
}
