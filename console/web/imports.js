// The Imports list and an import's page: its mapping, schedule controls,
// Sync now, Preview and run history.
import { h, n, num, time, ago, duration, badge, table } from './dom.js';
import { api, imports, importPath } from './api.js';

const sorts = {
  id: (a, b) => String(a.id).localeCompare(String(b.id)),
  last_run: (a, b) => (b.last_dispatch || 0) - (a.last_dispatch || 0),
  status: (a, b) => String(a.last_run_status || '').localeCompare(String(b.last_run_status || '')),
  freshness: (a, b) => (b.newest_insert_time || 0) - (a.newest_insert_time || 0),
  next_run: (a, b) => (a.next_run || Infinity) - (b.next_run || Infinity),
};

function source(im) {
  const t = im.table_params || {};
  return `${im.source_kind} · ${t.table || (t.query ? 'query' : '–')}`;
}

// freshness is the age of an import's newest row (its insert time); a
// source clock ahead of ours reads as current.
function freshness(sec) {
  if (!sec) return '–';
  return sec * 1000 > Date.now() ? 'current' : ago(sec).replace(' ago', ' old');
}

export async function importsPage(ctx) {
  const list = (await api(imports(ctx.project.id))).results;
  const filter = h('input', { id: 'filter', type: 'search', placeholder: 'id, type, source…' });
  const sort = h('select', { id: 'sort' }, [['id', 'Import id'], ['last_run', 'Last run'], ['status', 'Status'], ['freshness', 'Freshness'], ['next_run', 'Next run']]
    .map(([v, l]) => h('option', { value: v }, l)));
  const body = h('div');
  const draw = () => {
    const q = filter.value.trim().toLowerCase();
    const rows = list.filter((im) => !q || [im.id, im.import_type, source(im), im.sync_mode, im.schedule, im.last_run_status, im.origin].join(' ').toLowerCase().includes(q))
      .sort(sorts[sort.value]);
    body.replaceChildren(table(`${rows.length} of ${list.length} imports`,
      ['Import', 'Type', 'Source', 'Sync mode', 'Schedule', 'Paused', 'Last run', 'Next run', n('Rows last run'), 'Freshness'],
      rows.map((im) => h('tr', {},
        h('th', { scope: 'row' }, h('a', { href: `#/p/${ctx.project.id}/imports/${encodeURIComponent(im.id)}` }, String(im.id)),
          im.origin === 'api' ? h('span', { class: 'tag' }, 'API') : null),
        h('td', {}, im.import_type),
        h('td', {}, source(im)),
        h('td', {}, im.sync_mode),
        h('td', {}, im.schedule),
        h('td', {}, im.paused ? h('span', { class: 'badge b-paused' }, 'paused') : 'no'),
        h('td', {}, im.last_run_status ? [badge(im.last_run_status), ' ', h('span', { class: 'muted', title: time(im.last_dispatch) }, ago(im.last_dispatch))] : 'never'),
        h('td', { title: time(im.next_run) }, im.next_run ? ago(im.next_run) : '–'),
        h('td', { class: 'n' }, num(im.last_run_num_events_imported)),
        h('td', { title: `newest row inserted ${time(im.newest_insert_time)}` }, freshness(im.newest_insert_time)))),
      { class: 'imports' }));
  };
  filter.addEventListener('input', draw);
  sort.addEventListener('change', draw);
  draw();
  return h('div', {},
    h('h1', {}, 'Imports'),
    h('div', { class: 'toolbar' },
      h('label', { for: 'filter' }, 'Filter'), filter,
      h('label', { for: 'sort' }, 'Sort by'), sort),
    body);
}

export function runsTable(ctx, id, runs) {
  return table('Run history', ['Run', 'Status', 'Trigger', 'Started', 'Duration', n('Rows read'), n('Imported'), n('Duplicates'), n('Failed')],
    runs.map((r) => h('tr', {},
      h('th', { scope: 'row' }, h('a', { href: `#/p/${ctx.project.id}/imports/${encodeURIComponent(id)}/runs/${encodeURIComponent(r.run_id)}` }, r.run_id)),
      h('td', {}, badge(r.status)),
      h('td', {}, r.trigger),
      h('td', {}, time(r.start_time)),
      h('td', {}, duration((r.end_time || Date.now() / 1000) - r.start_time)),
      h('td', { class: 'n' }, num(r.num_rows_read)),
      h('td', { class: 'n' }, num(r.num_events_imported)),
      h('td', { class: 'n' }, num(r.num_duplicates)),
      h('td', { class: 'n' }, num(r.num_rows_failed)))),
    { class: 'runs' });
}

function mappingList(im) {
  const rows = [
    ['Event name', im.event_name ? `"${im.event_name}"` : im.event_column_name],
    ['Time', im.time_column_name], ['User id', im.user_column_name], ['Device id', im.device_column_name],
    ['Insert time', im.insert_time_column_name], ['Group key', im.group_key], ['Group id', im.group_id_column],
    ['Lookback', im.lookback],
  ].filter(([, v]) => v);
  for (const [col, prop] of Object.entries(im.property_mappings || {})) rows.push([`Column ${col}`, `→ property ${prop}`]);
  return h('dl', { class: 'facts' }, rows.map(([k, v]) => [h('dt', {}, k), h('dd', {}, v)]));
}

const schedules = [['api', 'API only (manual)'], ['@hourly', 'Hourly'], ['@daily', 'Daily'], ['@weekly', 'Weekly']];

function controls(ctx, im, path, msg) {
  const say = (text, bad) => { msg.textContent = text; msg.className = bad ? 'error' : 'ok'; ctx.say(text); };
  const act = async (f) => { try { await f(); } catch (e) { say(e.message, true); } };
  const custom = !schedules.some(([v]) => v === im.schedule);
  const sel = h('select', { id: 'schedule' }, schedules.map(([v, l]) => h('option', { value: v, selected: v === im.schedule }, l)),
    h('option', { value: 'custom', selected: custom }, 'Cron expression…'));
  const cron = h('input', { id: 'cron', value: custom ? im.schedule : '', placeholder: '*/15 * * * *', hidden: !custom });
  const cronLabel = h('label', { for: 'cron', hidden: !custom }, 'Cron');
  sel.addEventListener('change', () => { cron.hidden = cronLabel.hidden = sel.value !== 'custom'; });
  return h('section', { class: 'controls', 'aria-labelledby': 'controls-h' },
    h('h2', { id: 'controls-h' }, 'Controls'),
    h('div', { class: 'toolbar' },
      h('button', { id: 'sync-now', type: 'button', onclick: () => act(async () => {
        const r = await api(`${path}/manual-sync`, { method: 'PUT', body: {} });
        say(`Sync started: run ${r.results.run_id}.`);
        ctx.reload();
      }) }, 'Sync now'),
      h('button', { id: 'pause', type: 'button', onclick: () => act(async () => {
        await api(path, { method: 'PATCH', body: { paused: !im.paused } });
        say(im.paused ? 'Resumed.' : 'Paused.');
        ctx.reload();
      }) }, im.paused ? 'Resume' : 'Pause'),
      h('label', { for: 'schedule' }, 'Schedule'), sel, cronLabel, cron,
      h('button', { id: 'save-schedule', type: 'button', onclick: () => act(async () => {
        await api(path, { method: 'PATCH', body: { schedule: sel.value === 'custom' ? cron.value.trim() : sel.value } });
        say('Schedule saved.');
        ctx.reload();
      }) }, 'Save schedule')),
    h('p', { class: 'muted' }, 'Manual syncs: at most 5 per import per hour (the app API answers 429 past that).'),
    deleteControls(ctx, im, path, say));
}

// deleteControls: Delete asks first, and says what else goes with the
// import when its data is deleted too.
function deleteControls(ctx, im, path, say) {
  const withData = h('input', { id: 'delete-data', type: 'checkbox' });
  const confirm = h('fieldset', { class: 'confirm', hidden: true },
    h('legend', {}, `Delete import ${im.id}?`),
    h('p', {}, im.origin === 'file' ? 'A file import is hidden (its file stays); ' : '', 'its runs stop.'),
    withData, ' ', h('label', { for: 'delete-data' }, 'Also delete the events and profile properties it imported'),
    h('div', { class: 'toolbar' },
      h('button', { id: 'delete-confirm', type: 'button', class: 'danger', onclick: async () => {
        try {
          await api(path, { method: 'DELETE', body: { delete_data: withData.checked } });
          // Said once the list has started to render (it clears the status).
          window.addEventListener('hashchange', () => ctx.say(`Import ${im.id} deleted.`), { once: true });
          location.hash = `#/p/${ctx.project.id}/imports`;
        } catch (e) { say(e.message, true); }
      } }, 'Delete'),
      h('button', { id: 'delete-cancel', type: 'button', onclick: () => { confirm.hidden = true; open.focus(); } }, 'Cancel')));
  const open = h('button', { id: 'delete', type: 'button', class: 'danger', onclick: () => { confirm.hidden = false; withData.focus(); } }, 'Delete import…');
  return h('div', {}, open, confirm);
}

function previewSection(ctx, path) {
  const out = h('div', { id: 'preview-out' });
  const btn = h('button', { id: 'preview', type: 'button' }, 'Preview');
  btn.addEventListener('click', async () => {
    btn.disabled = true;
    out.replaceChildren(h('p', { class: 'muted' }, 'Reading a sample…'));
    try {
      const p = (await api(`${path}/preview?limit=20`)).results;
      out.replaceChildren(...[
        p.config_error ? h('p', { role: 'alert', class: 'error' }, `The import is not valid: ${p.config_error}`) : null,
        h('p', {}, `${p.records.length} records mapped from ${p.rows_read} rows read; ${p.refused.length} rows refused.`),
        table('Columns', ['Column', 'Source type', 'Becomes', n('Nulls'), 'Example', 'Note'],
          p.columns.map((c) => h('tr', {}, h('th', { scope: 'row' }, c.column), h('td', {}, c.source_type), h('td', {}, c.property || c.role),
            h('td', { class: 'n' }, num(c.nulls)), h('td', { class: 'mono' }, c.example || ''), h('td', {}, [c.renamed && 'renamed', c.flattened && 'flattened', c.note].filter(Boolean).join(', ')))),
          { class: 'columns' }),
        table('Refused rows', [n('Row'), 'Key', 'Field', 'Message'],
          p.refused.map((f) => h('tr', {}, h('td', { class: 'n' }, f.row), h('td', {}, f.key || ''), h('td', {}, f.field || f.column || ''), h('td', {}, f.message))),
          { class: 'refused' }),
        h('h3', {}, 'Records'),
        h('pre', { class: 'records', tabindex: 0, 'aria-label': 'Records the sync would write' }, p.records.map((r) => JSON.stringify(r)).join('\n')),
      ].filter(Boolean));
      ctx.say('Preview ready.');
    } catch (e) {
      out.replaceChildren(h('p', { role: 'alert', class: 'error' }, e.message));
    } finally {
      btn.disabled = false;
    }
  });
  return h('section', { 'aria-labelledby': 'preview-h' }, h('h2', { id: 'preview-h' }, 'Preview'),
    h('p', { class: 'muted' }, 'A dry run: reads a sample through the source and maps it, writing nothing.'), btn, out);
}

export async function importPage(ctx, id) {
  const path = importPath(ctx.project.id, id);
  const [im, hist] = await Promise.all([api(path), api(`${path}/history?limit=30`)]);
  const imp = im.results;
  const msg = h('p', { id: 'action-msg', role: 'alert' });
  const runsBox = h('div', {}, runsTable(ctx, id, hist.results.runs));
  const watch = () => ctx.poll(async () => {
    const r = (await api(`${path}/history?limit=30`)).results.runs;
    runsBox.replaceChildren(runsTable(ctx, id, r));
    return r.some((x) => x.status === 'RUNNING');
  }, 1500);
  if (hist.results.runs.some((x) => x.status === 'RUNNING')) watch();
  return h('div', {},
    h('p', {}, h('a', { href: `#/p/${ctx.project.id}/imports` }, '← Imports')),
    h('h1', {}, `Import ${imp.id}`),
    h('p', {}, badge(imp.last_run_status || 'never run'), ' ', imp.paused ? h('span', { class: 'badge b-paused' }, 'paused') : null,
      ` ${imp.import_type} · ${imp.sync_mode} · ${source(imp)} · schedule ${imp.schedule}`,
      imp.next_run ? ` · next run ${ago(imp.next_run)}` : '', imp.file ? ` · ${imp.file}` : ''),
    ctx.canWrite ? controls(ctx, imp, path, msg) : h('p', { class: 'muted', id: 'read-only' }, `Read-only: your role (${ctx.project.role}) cannot change imports.`),
    msg,
    h('section', { 'aria-labelledby': 'mapping-h' }, h('h2', { id: 'mapping-h' }, 'Mapping'), mappingList(imp)),
    previewSection(ctx, path),
    h('section', { 'aria-labelledby': 'runs-h' }, h('h2', { id: 'runs-h' }, 'Runs'), runsBox));
}
