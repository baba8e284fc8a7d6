// The kubette trace page: the objects of a namespace, read from the API, and for the
// chosen one its sequence diagram, rendered by the server and polled every second
// (the server answers 304 while the records behind it are unchanged).
// Every URL is relative, so that the page works behind kubectl proxy with any prefix.
'use strict';

const POLL_MS = 1000;
const LIST_MS = 3000;

const KINDS = [
  { kind: 'deployment', title: 'Deployments', path: ns => `../apis/apps/v1/namespaces/${ns}/deployments`,
    state: o => `${o.status?.readyReplicas || 0}/${o.spec?.replicas ?? 1}` },
  { kind: 'replicaset', title: 'ReplicaSets', path: ns => `../apis/apps/v1/namespaces/${ns}/replicasets`,
    state: o => `${o.status?.readyReplicas || 0}/${o.spec?.replicas ?? 1}` },
  { kind: 'pod', title: 'Pods', path: ns => `../api/v1/namespaces/${ns}/pods`,
    state: o => (o.metadata.deletionTimestamp ? 'Terminating' : o.status?.phase || '') },
  { kind: 'service', title: 'Services', path: ns => `../api/v1/namespaces/${ns}/services`,
    state: o => o.spec?.type || '' },
  { kind: 'ingress', title: 'Ingresses', path: ns => `../apis/networking.k8s.io/v1/namespaces/${ns}/ingresses`,
    state: o => (o.spec?.rules || []).map(r => r.host).filter(Boolean)[0] || '' },
];

const $ = id => document.getElementById(id);
const el = (tag, props, ...children) => {
  const e = Object.assign(document.createElement(tag), props);
  e.append(...children);
  return e;
};

const state = {
  namespace: '',
  selected: null, // {kind, name}
  generation: 0, // bumped on every change of selection: stale answers are dropped
  etag: '',
  renders: 0,
  unchanged: 0,
  listKey: '',
};

async function getJSON(url) {
  const r = await fetch(url, { headers: { Accept: 'application/json' }, cache: 'no-store' });
  if (!r.ok) throw new Error(await statusMessage(r));
  return r.json();
}

// statusMessage reads a metav1.Status answer's message.
async function statusMessage(r) {
  const text = await r.text();
  try {
    const st = JSON.parse(text);
    if (st.message) return `${r.status} ${st.message}`;
  } catch (_) { /* not a Status */ }
  return `${r.status} ${text || r.statusText}`;
}

function parseHash() {
  const [ns, kind, name] = decodeURIComponent(location.hash.slice(1)).split('/');
  return { ns: ns || '', kind: kind || '', name: name || '' };
}

function setHash() {
  const s = state.selected;
  const h = s ? `${state.namespace}/${s.kind}/${s.name}` : state.namespace;
  if (decodeURIComponent(location.hash.slice(1)) !== h) history.replaceState(null, '', '#' + encodeURIComponent(h).replace(/%2F/g, '/'));
}

async function loadNamespaces() {
  const sel = $('namespace');
  const list = await getJSON('../api/v1/namespaces');
  const names = list.items.map(n => n.metadata.name).sort();
  const want = parseHash().ns || state.namespace || (names.includes('default') ? 'default' : names[0] || '');
  if (want && !names.includes(want)) names.push(want);
  sel.replaceChildren(...names.map(n => el('option', { value: n, textContent: n })));
  sel.value = want;
  state.namespace = sel.value;
}

async function loadObjects() {
  const ns = encodeURIComponent(state.namespace);
  const lists = await Promise.all(KINDS.map(k => getJSON(k.path(ns)).then(l => l.items, () => null)));
  const key = JSON.stringify(lists.map(items => items && items.map(o => [o.metadata.name, o.metadata.uid])), null) +
    JSON.stringify(lists.map((items, i) => items && items.map(KINDS[i].state)));
  if (key === state.listKey) return;
  state.listKey = key;
  const nav = $('objects');
  nav.replaceChildren();
  let count = 0;
  KINDS.forEach((k, i) => {
    const items = lists[i];
    if (items === null) return; // not served, or not allowed
    items.sort((a, b) => a.metadata.name.localeCompare(b.metadata.name));
    count += items.length;
    const ul = el('ul');
    for (const o of items) {
      const name = o.metadata.name;
      const a = el('a', { href: `#${state.namespace}/${k.kind}/${name}`, title: `${k.kind}/${name}` },
        el('span', { className: 'state', textContent: k.state(o) }), name);
      a.dataset.kind = k.kind;
      a.dataset.name = name;
      a.classList.toggle('selected', !!state.selected && state.selected.kind === k.kind && state.selected.name === name);
      ul.append(el('li', {}, a));
    }
    const section = el('section', {}, el('h3', { textContent: k.title }), items.length ? ul : el('div', { className: 'none', textContent: 'none' }));
    section.dataset.kind = k.kind;
    nav.append(section);
  });
  $('listed').textContent = `${count} objects`;
}

function traceURL(format) {
  const s = state.selected;
  const q = new URLSearchParams({ kind: s.kind, namespace: state.namespace, name: s.name, format });
  if ($('all').checked) q.set('all', 'true');
  return 'api/trace?' + q;
}

function select(kind, name) {
  state.selected = kind && name ? { kind, name } : null;
  state.generation++;
  state.etag = '';
  for (const a of document.querySelectorAll('nav a')) {
    a.classList.toggle('selected', !!state.selected && a.dataset.kind === kind && a.dataset.name === name);
  }
  $('diagram').replaceChildren();
  $('error').hidden = true;
  $('head').hidden = !state.selected;
  $('hint').hidden = !!state.selected;
  setHash();
  if (!state.selected) return;
  $('title').textContent = `${kind}/${name}`;
  for (const f of ['mermaid', 'text', 'svg']) $('dl-' + f).href = traceURL(f) + '&download=1';
  poll(state.generation);
}

// poll fetches the diagram unless it is unchanged, then polls again a second later.
async function poll(generation) {
  if (generation !== state.generation) return;
  const headers = state.etag ? { 'If-None-Match': state.etag } : {};
  const diagram = $('diagram');
  try {
    const r = await fetch(traceURL('svg'), { cache: 'no-store', headers });
    if (generation !== state.generation) return;
    if (r.status === 304) {
      state.unchanged++;
      diagram.dataset.unchanged = state.unchanged;
    } else if (r.ok) {
      const text = await r.text();
      const doc = new DOMParser().parseFromString(text, 'image/svg+xml');
      if (doc.querySelector('parsererror')) throw new Error('the server sent an SVG that does not parse');
      if (generation !== state.generation) return;
      diagram.replaceChildren(document.importNode(doc.documentElement, true));
      state.etag = r.headers.get('ETag') || '';
      state.renders++;
      diagram.dataset.renders = state.renders;
      $('updated').textContent = `changed ${new Date().toLocaleTimeString()}`;
      $('error').hidden = true;
    } else {
      throw new Error(await statusMessage(r));
    }
  } catch (e) {
    if (generation !== state.generation) return;
    $('error').textContent = e.message;
    $('error').hidden = false;
  }
  setTimeout(() => poll(generation), POLL_MS);
}

async function refreshList() {
  try {
    await loadObjects();
  } catch (e) {
    $('listed').textContent = e.message;
  }
  setTimeout(refreshList, LIST_MS);
}

function followHash() {
  const h = parseHash();
  if (h.ns && h.ns !== state.namespace) {
    state.namespace = h.ns;
    $('namespace').value = h.ns;
    state.listKey = '';
    loadObjects().catch(e => { $('listed').textContent = e.message; });
  }
  const s = state.selected;
  if (h.kind !== (s ? s.kind : '') || h.name !== (s ? s.name : '')) select(h.kind, h.name);
}

async function start() {
  try {
    await loadNamespaces();
  } catch (e) {
    $('error').textContent = `namespaces: ${e.message}`;
    $('error').hidden = false;
    state.namespace = parseHash().ns || 'default';
  }
  $('namespace').addEventListener('change', () => {
    state.namespace = $('namespace').value;
    state.listKey = '';
    select('', '');
    loadObjects().catch(e => { $('listed').textContent = e.message; });
  });
  $('all').addEventListener('change', () => {
    const s = state.selected;
    if (s) select(s.kind, s.name);
  });
  window.addEventListener('hashchange', followHash);
  const h = parseHash();
  refreshList();
  if (h.kind && h.name) select(h.kind, h.name);
  else setHash();
}

start();
