// Amplitude migrations of the project, with state and progress; polled
// while one is going.
import { h, n, num, badge, table } from './dom.js';
import { api } from './api.js';

function jobsTable(jobs) {
  return table('Amplitude migrations', ['Job', 'State', 'Range (UTC hours)', 'Progress', n('Events imported'), n('Duplicates'), n('Failed'), n('Profiles'), 'Updated'],
    jobs.map((j) => h('tr', {},
      h('th', { scope: 'row', class: 'mono' }, j.job_id),
      h('td', {}, badge(j.state), j.needs_credentials ? h('span', { class: 'tag' }, 'needs credentials') : null, j.error ? h('div', { class: 'error' }, j.error) : null),
      h('td', {}, `${j.start} → ${j.end}`),
      h('td', {}, h('progress', { max: j.hours_total || 1, value: j.hours_done, 'aria-label': `Hours done of job ${j.job_id}` }), ` ${j.hours_done}/${j.hours_total} h`),
      h('td', { class: 'n' }, num(j.events_imported)),
      h('td', { class: 'n' }, num(j.events_duplicate)),
      h('td', { class: 'n' }, num(j.events_failed)),
      h('td', { class: 'n' }, num(j.profiles_updated)),
      h('td', {}, j.updated_at ? j.updated_at.replace('T', ' ').slice(0, 19) : '–'))),
    { class: 'migrations' });
}

const going = (jobs) => jobs.some((j) => ['queued', 'exporting', 'loading'].includes(j.state) && !j.needs_credentials);

export async function migrationsPage(ctx) {
  const load = async () => (await api(`/amplitude?project_id=${ctx.project.id}`)).jobs;
  let jobs;
  try {
    jobs = await load();
  } catch (e) {
    return h('div', {}, h('h1', {}, 'Migrations'), h('p', { role: 'alert', class: 'error' },
      e.status === 404 ? 'The migration service listens on another address here (migrate_listen).' : e.message));
  }
  const box = h('div', {}, jobsTable(jobs));
  if (going(jobs)) ctx.poll(async () => { jobs = await load(); box.replaceChildren(jobsTable(jobs)); return going(jobs); }, 2000);
  return h('div', {}, h('h1', {}, 'Migrations'),
    h('p', { class: 'muted' }, 'Start one with POST /amplitude (see docs/migration.md); its progress shows here.'), box);
}
