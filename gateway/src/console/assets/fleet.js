// The fleet: provider trees, each provider's capacity against use per
// class as bars, its traits and aggregates; filtered by trait, aggregate
// and class and searched by name or uuid on the server, a page at a time.

import {get} from './api.js';
import {clear, h} from './svg.js';

let report = () => {};
let nextMarker = null;
let shown = 0;
// Only the latest load draws: an earlier answer arriving late is dropped.
let generation = 0;

export function show(onError) {
  report = onError;
  const form = document.getElementById('fleet-filters');
  if (!form.dataset.wired) {
    form.dataset.wired = '1';
    form.addEventListener('submit', ev => {
      ev.preventDefault();
      load(false);
    });
    document.getElementById('fleet-more').addEventListener('click', () => load(true));
  }
  load(false);
}

export function hide() {}

function filters() {
  const q = new URLSearchParams();
  for (const [k, v] of new FormData(document.getElementById('fleet-filters')).entries()) {
    if (String(v).trim()) q.set(k, String(v).trim());
  }
  return q;
}

function fillChoices(select, values) {
  const keep = select.value;
  while (select.options.length > 1) select.remove(1);
  for (const v of values) select.add(new Option(v, v));
  if (keep && !values.includes(keep)) select.add(new Option(keep, keep));
  select.value = keep;
}

async function load(more) {
  const section = document.getElementById('fleet');
  section.dataset.state = 'loading';
  const q = filters();
  if (more && nextMarker) q.set('marker', nextMarker);
  const mine = ++generation;
  let page;
  try {
    page = await get('console/fleet', q);
  } catch (err) {
    if (mine !== generation) return;
    report(err);
    section.dataset.state = 'error';
    return;
  }
  if (mine !== generation) return;
  const form = document.getElementById('fleet-filters');
  fillChoices(form.elements.trait, page.choices.traits);
  fillChoices(form.elements.member_of, page.choices.aggregates);
  fillChoices(form.elements.resource_class, page.choices.resource_classes);
  const trees = document.getElementById('fleet-trees');
  if (!more) {
    clear(trees);
    shown = 0;
  }
  trees.append(render(page.providers, trees));
  shown += page.providers.length;
  nextMarker = page.next_marker;
  document.getElementById('fleet-more').hidden = !nextMarker;
  const summary = document.getElementById('fleet-summary');
  summary.textContent = `${shown} of ${page.total} providers in the selected trees` +
    (page.matched !== page.total ? `, ${page.matched} match the filters (the rest shown faded for context)` : '');
  summary.dataset.total = String(page.total);
  summary.dataset.matched = String(page.matched);
  // Ready once the browser has laid out and painted the new rows (the
  // frame after this one), which is what the benchmark times.
  requestAnimationFrame(() => setTimeout(() => {
    if (mine !== generation) return;
    section.dataset.state = 'ready';
    document.documentElement.dataset.fleetRendered = String(performance.now());
  }, 0));
}

/** The providers as trees: a block per tree, children indented. */
function render(providers, container) {
  const fragment = document.createDocumentFragment();
  const byUuid = new Map(providers.map(p => [p.uuid, p]));
  const depth = new Map();
  const depthOf = p => {
    if (depth.has(p.uuid)) return depth.get(p.uuid);
    let d = 0;
    const seen = new Set([p.uuid]);
    for (let q = byUuid.get(p.parent_provider_uuid); q && !seen.has(q.uuid); q = byUuid.get(q.parent_provider_uuid)) {
      seen.add(q.uuid);
      d++;
    }
    depth.set(p.uuid, d);
    return d;
  };
  // A tree split across pages continues in the block already drawn.
  const blocks = new Map();
  for (const b of container.querySelectorAll('.tree')) blocks.set(b.dataset.root, b);
  for (const p of providers) {
    let block = blocks.get(p.root_provider_uuid);
    if (!block) {
      block = h('div', {class: 'tree', 'data-root': p.root_provider_uuid});
      blocks.set(p.root_provider_uuid, block);
      fragment.append(block);
    }
    block.append(row(p, depthOf(p)));
  }
  return fragment;
}

function row(p, depth) {
  const chips = h('div', {class: 'chips'});
  for (const t of p.traits) chips.append(h('span', {class: 'chip', title: 'trait'}, t));
  for (const a of p.aggregates) chips.append(h('span', {class: 'chip agg', title: 'aggregate'}, a));
  const who = h('div', {class: `depth${Math.min(depth, 3)}`},
    h('div', {class: 'name'}, p.name),
    h('div', {class: 'uuid'}, `${p.uuid} · generation ${p.generation}`),
    chips);
  const bars = h('div', {class: 'bars'});
  for (const [rc, inv] of Object.entries(p.inventories)) bars.append(bar(rc, inv.used, inv.capacity, inv));
  // Use of a class without inventory (an audit finding) shows as full.
  for (const [rc, used] of Object.entries(p.usages)) {
    if (!(rc in p.inventories)) bars.append(bar(rc, used, 0, null));
  }
  return h('div', {
    class: p.matched ? 'provider' : 'provider unmatched',
    'data-uuid': p.uuid, 'data-name': p.name, 'data-matched': p.matched ? 'true' : 'false',
  }, who, bars);
}

function bar(rc, used, capacity, inv) {
  const ratio = capacity > 0 ? used / capacity : (used > 0 ? Infinity : 0);
  const fill = h('div', {class: 'fill'});
  fill.style.width = `${Math.min(100, ratio * 100).toFixed(1)}%`;
  const title = inv
    ? `${rc}: ${used} used of ${capacity} (total ${inv.total}, reserved ${inv.reserved}, ratio ${inv.allocation_ratio}, ` +
      `min ${inv.min_unit}, max ${inv.max_unit}, step ${inv.step_size})`
    : `${rc}: ${used} used without inventory`;
  return h('div', {
    class: 'bar' + (ratio > 1 ? ' over' : ratio >= 0.9 ? ' high' : ''),
    'data-class': rc, 'data-used': used, 'data-capacity': capacity, title,
  }, h('div', {class: 'label'}, h('span', {}, rc), h('span', {}, `${used} / ${capacity}`)),
  h('div', {class: 'track'}, fill));
}
