// A run's page: its figures, live progress while it runs (polled), the
// source errors it retried and the first 100 failures.
import { h, n, num, bytes, time, duration, badge, table } from './dom.js';
import { api, importPath } from './api.js';

async function findRun(path, runID, limit) {
  const runs = (await api(`${path}/history?limit=${limit}`)).results.runs;
  return runs.find((r) => r.run_id === runID);
}

function facts(r) {
  const end = r.end_time || Date.now() / 1000;
  const rows = [
    ['Status', badge(r.status)], ['Trigger', r.trigger], ['Started', time(r.start_time)], ['Ended', r.end_time ? time(r.end_time) : 'running'],
    ['Duration', duration(end - r.start_time)], ['Rows read', num(r.num_rows_read)], ['Imported', num(r.num_events_imported)],
    ['Duplicates', num(r.num_duplicates)], ['Failed', num(r.num_rows_failed)], ['Bytes', bytes(r.bytes)],
    ['Rate', `${num(r.rows_per_second)} rows/s`],
  ];
  // What a mirror run did to the table's rows ("mirror": {num_inserted, …});
  // shown when the server sends it.
  const m = r.mirror || {};
  for (const k of ['num_inserted', 'num_updated', 'num_deleted', 'num_unchanged']) {
    if (m[k] !== undefined) rows.push([`Rows ${k.replace('num_', '')}`, num(m[k])]);
  }
  if (r.reason) rows.push(['Reason', r.reason]);
  return h('dl', { class: 'facts', id: 'run-facts' }, rows.map(([k, v]) => [h('dt', {}, k), h('dd', {}, v)]));
}

function progress(r) {
  if (r.status !== 'RUNNING') return null;
  const p = r.progress || {};
  return h('section', { 'aria-labelledby': 'progress-h', id: 'live' },
    h('h2', { id: 'progress-h' }, 'Progress'),
    p.percent !== undefined ? h('progress', { max: 100, value: p.percent.toFixed(1), 'aria-label': 'Rows read of the source total' }) : null,
    h('p', {}, `${num(r.num_rows_read)} rows read`, p.rows_total ? ` of ${num(p.rows_total)}` : '',
      ` · ${num(r.rows_per_second)} rows/s`, p.eta_seconds !== undefined ? ` · about ${duration(p.eta_seconds)} left`
        : r.num_rows_read ? ' · ETA unknown (the source did not report a total)' : ' · ETA once the first rows are read',
      ` · ${p.retries || 0} retries`));
}

// Transient source errors the run retried (each retry resumed from the
// last committed batch), with when and why.
function retries(r) {
  const rs = r.retries || [];
  return table(`Retries (${rs.length || 'none'})`, ['Time', 'Error'],
    rs.map((x) => h('tr', {}, h('td', {}, time(x.at)), h('td', { class: 'mono' }, x.error))),
    { class: 'retries' });
}

function failures(r) {
  const fs = r.failures || [];
  return table(`Failures (${fs.length ? `first ${fs.length} of ${num(r.num_rows_failed)}` : 'none'})`, [n('Row'), 'Key', 'Field', 'Message'],
    fs.map((f) => h('tr', {}, h('td', { class: 'n' }, f.row), h('td', { class: 'mono' }, f.key || ''), h('td', {}, f.field || f.column || ''), h('td', {}, f.message))),
    { class: 'failures' });
}

export async function runPage(ctx, id, runID) {
  const path = importPath(ctx.project.id, id);
  let r = await findRun(path, runID, 1000);
  if (!r) return h('div', {}, h('h1', {}, 'Run not found'), h('p', {}, `No run ${runID} in the history of import ${id}.`));
  const box = h('div');
  const draw = () => box.replaceChildren(facts(r), progress(r) || '',
    h('section', { 'aria-labelledby': 'retries-h' }, h('h2', { id: 'retries-h' }, 'Retries'), retries(r)),
    h('section', { 'aria-labelledby': 'failures-h' }, h('h2', { id: 'failures-h' }, 'Failures'), failures(r)));
  draw();
  if (r.status === 'RUNNING') {
    ctx.poll(async () => {
      r = (await findRun(path, runID, 50)) || r;
      draw();
      if (r.status !== 'RUNNING') ctx.say(`Run ${r.status.toLowerCase()}.`);
      return r.status === 'RUNNING';
    }, 1000);
  }
  return h('div', {},
    h('p', {}, h('a', { href: `#/p/${ctx.project.id}/imports/${encodeURIComponent(id)}` }, `← Import ${id}`)),
    h('h1', {}, `Run ${runID}`), box);
}
