// Stacks: every project's stacks; the selected stack's resource graph
// (an arrow from a resource to each resource that requires it, nodes
// coloured by status) redrawn as it changes, and its events as they
// arrive.

import {get} from './api.js';
import {clear, h, s, text} from './svg.js';

let report = () => {};
let timer = null;
let selected = null;
let marker = null;

export function show(onError) {
  report = onError;
  tick();
}

export function hide() {
  clearTimeout(timer);
  timer = null;
}

async function tick() {
  clearTimeout(timer);
  try {
    await list();
    if (selected) await detail();
  } catch (err) {
    report(err);
  }
  if (!document.getElementById('stacks').hidden) timer = setTimeout(tick, 1000);
}

function statusClass(status) {
  if (/^INIT_/.test(status)) return 'init';
  if (/_COMPLETE$/.test(status)) return 'complete';
  if (/_IN_PROGRESS$/.test(status)) return 'progress';
  if (/_FAILED$/.test(status)) return 'failed';
  return 'init';
}

async function list() {
  const doc = await get('console/stacks');
  const body = document.querySelector('#stack-list tbody');
  clear(body);
  for (const st of doc.stacks) {
    const tr = h('tr', {'data-id': st.id, 'data-name': st.name, class: selected && selected.id === st.id ? 'selected' : null},
      h('td', {}, st.name), h('td', {}, st.project),
      h('td', {class: `status-text-${statusClass(st.status)}`}, st.status), h('td', {}, st.creation_time || ''));
    tr.addEventListener('click', () => select(st));
    body.append(tr);
  }
  document.getElementById('stacks').dataset.state = 'ready';
}

function select(stack) {
  selected = {id: stack.id, project: stack.project, name: stack.name};
  marker = null;
  clear(document.getElementById('stack-events'));
  tick();
}

async function detail() {
  const base = `console/stacks/${encodeURIComponent(selected.project)}/${encodeURIComponent(selected.id)}`;
  const graph = await get(`${base}/graph`);
  const d = document.getElementById('stack-detail');
  d.dataset.stack = graph.stack.name;
  d.dataset.status = graph.stack.status;
  document.getElementById('stack-title').textContent = graph.stack.name;
  document.getElementById('stack-status').textContent =
    `${graph.stack.status}${graph.stack.status_reason ? ': ' + graph.stack.status_reason : ''} · project ${graph.stack.project}`;
  draw(graph);
  const events = await get(`${base}/events`, marker ? {marker} : {});
  const list = document.getElementById('stack-events');
  for (const e of events.events) {
    list.append(h('li', {class: `status-text-${statusClass(e.status)}`},
      `${e.time} ${e.resource_name} ${e.status}${e.status_reason ? ' (' + e.status_reason + ')' : ''}`));
  }
  if (events.events.length) list.scrollTop = list.scrollHeight;
  marker = events.marker;
}

/** Columns by longest path from the resources nothing requires first. */
function layers(nodes, edges) {
  const preds = new Map(nodes.map(n => [n.name, []]));
  for (const [from, to] of edges) preds.get(to).push(from);
  const level = new Map();
  const visiting = new Set();
  const levelOf = name => {
    if (level.has(name)) return level.get(name);
    if (visiting.has(name)) return 0;
    visiting.add(name);
    const l = Math.max(-1, ...preds.get(name).map(levelOf)) + 1;
    visiting.delete(name);
    level.set(name, l);
    return l;
  };
  nodes.forEach(n => levelOf(n.name));
  return level;
}

function draw(graph) {
  const box = document.getElementById('stack-graph');
  clear(box);
  const nodes = [...graph.resources].sort((a, b) => a.name.localeCompare(b.name));
  const level = layers(nodes, graph.edges);
  const columns = [];
  for (const n of nodes) {
    const l = level.get(n.name);
    (columns[l] = columns[l] || []).push(n);
  }
  const W = 170, H = 30, GX = 50, GY = 12;
  const pos = new Map();
  columns.forEach((col, i) => col.forEach((n, j) => pos.set(n.name, {x: 10 + i * (W + GX), y: 10 + j * (H + GY)})));
  const width = 20 + Math.max(1, columns.length) * (W + GX) - GX;
  const height = 20 + Math.max(1, ...columns.map(c => c.length)) * (H + GY) - GY;
  const svg = s('svg', {width, height, viewBox: `0 0 ${width} ${height}`, role: 'img'});
  s('path', {d: 'M0,0 L8,4 L0,8 z', fill: '#8796a5'}, s('marker', {
    id: 'arrow', markerWidth: 8, markerHeight: 8, refX: 8, refY: 4, orient: 'auto',
  }, s('defs', {}, svg)));
  for (const [from, to] of graph.edges) {
    const a = pos.get(from), b = pos.get(to);
    const x1 = a.x + W, y1 = a.y + H / 2, x2 = b.x, y2 = b.y + H / 2, mx = (x1 + x2) / 2;
    s('path', {class: 'edge', d: `M${x1},${y1} C${mx},${y1} ${mx},${y2} ${x2},${y2}`, 'marker-end': 'url(#arrow)'}, svg);
  }
  for (const n of nodes) {
    const p = pos.get(n.name);
    const g = s('g', {class: `node status-${statusClass(n.status)}`, 'data-name': n.name, 'data-status': n.status}, svg);
    text('title', {}, `${n.name} (${n.type}): ${n.status}${n.status_reason ? ' ' + n.status_reason : ''}`, g);
    s('rect', {x: p.x, y: p.y, width: W, height: H, rx: 5}, g);
    text('text', {x: p.x + 8, y: p.y + 19}, n.name.length > 24 ? n.name.slice(0, 23) + '…' : n.name, g);
  }
  box.append(svg);
}
