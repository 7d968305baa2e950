// Small DOM helpers: every page is built with h(), never from HTML
// strings, so values from the server are always text.

export function h(tag, attrs, ...children) {
  const el = tag === 'svg' || attrs?.svg ? document.createElementNS('http://www.w3.org/2000/svg', tag) : document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false || k === 'svg') continue;
    if (k.startsWith('on')) el.addEventListener(k.slice(2), v);
    else if (k === 'class') el.setAttribute('class', v);
    else el.setAttribute(k, v === true ? '' : String(v));
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const c of children) {
    if (c === undefined || c === null || c === false) continue;
    if (Array.isArray(c)) append(el, c);
    else el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
}

// s builds an SVG element.
export function s(tag, attrs, ...children) {
  return h(tag, { ...attrs, svg: true }, ...children);
}

export function num(n) {
  if (n === undefined || n === null) return '–';
  return Number(n).toLocaleString('en-US', { maximumFractionDigits: 1 });
}

export function bytes(n) {
  if (!n) return '0 B';
  const u = ['B', 'KB', 'MB', 'GB', 'TB'];
  let i = 0;
  while (n >= 1024 && i < u.length - 1) { n /= 1024; i++; }
  return `${n.toFixed(i ? 1 : 0)} ${u[i]}`;
}

// time formats unix seconds as a UTC date and time.
export function time(sec) {
  if (!sec) return '–';
  return new Date(sec * 1000).toISOString().replace('T', ' ').slice(0, 19) + ' UTC';
}

// ago says how long before now unix seconds were ("in …" when ahead).
export function ago(sec) {
  if (!sec) return '–';
  const d = Math.round(Date.now() / 1000 - sec);
  const a = Math.abs(d);
  const t = a < 90 ? `${a} s` : a < 5400 ? `${Math.round(a / 60)} min` : a < 172800 ? `${Math.round(a / 3600)} h` : `${Math.round(a / 86400)} d`;
  return d >= 0 ? `${t} ago` : `in ${t}`;
}

export function duration(sec) {
  if (sec === undefined || sec === null) return '–';
  sec = Math.round(sec);
  if (sec < 90) return `${sec} s`;
  if (sec < 5400) return `${Math.floor(sec / 60)} min ${sec % 60} s`;
  return `${Math.floor(sec / 3600)} h ${Math.round((sec % 3600) / 60)} min`;
}

export function badge(status) {
  const st = String(status || 'none');
  return h('span', { class: `badge b-${st.toLowerCase()}` }, st);
}

// n is the heading of a numeric column (right-aligned, as its cells).
export const n = (label) => h('th', { scope: 'col', class: 'n' }, label);

export function table(caption, heads, rows, attrs) {
  return h('table', attrs || {},
    h('caption', {}, caption),
    h('thead', {}, h('tr', {}, heads.map((x) => (x instanceof Node ? x : h('th', { scope: 'col' }, x))))),
    h('tbody', {}, rows.length ? rows : h('tr', {}, h('td', { colspan: heads.length, class: 'empty' }, 'None.'))));
}
