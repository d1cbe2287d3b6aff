// The explain form: a GET /allocation_candidates query, answered by
// keelson's /keelson/v1/placement/explain (the counts
// `keelson placement explain` prints), drawn per request group: each rule
// with the providers it excluded.

import {get} from './api.js';
import {clear, h} from './svg.js';

let report = () => {};

export function show(onError) {
  report = onError;
  const form = document.getElementById('explain-form');
  if (!form.dataset.wired) {
    form.dataset.wired = '1';
    form.addEventListener('submit', ev => {
      ev.preventDefault();
      run();
    });
  }
}

export function hide() {}

function groupName(suffix) {
  return suffix ? `group '${suffix}'` : 'the unsuffixed group';
}

/** A rule's facts, as the endpoint gives them. */
function facts(rule) {
  const out = [rule.rule];
  if (rule.resource_class) out.push(rule.amount ? `${rule.resource_class}:${rule.amount}` : rule.resource_class);
  if (rule.traits) out.push(rule.traits.join(', '));
  if (rule.largest_free !== undefined) out.push(`largest free ${rule.largest_free}`);
  if (rule.group !== undefined) out.push(groupName(rule.group));
  if (rule.provider) out.push(rule.provider);
  if (rule.room !== undefined) out.push(`room ${rule.room}`);
  if (rule.same_subtree !== undefined) out.push(`same_subtree #${rule.same_subtree + 1}`);
  return out.join(' · ');
}

function line(count, of, label, attrs, fit) {
  const fill = h('div', {class: 'fill'});
  fill.style.width = `${of > 0 ? Math.min(100, count / of * 100).toFixed(1) : 0}%`;
  return h('div', Object.assign({class: fit ? 'rule fit' : 'rule'}, attrs),
    h('span', {class: 'count'}, count), h('div', {class: 'track'}, fill), h('span', {}, label));
}

async function run() {
  const form = new FormData(document.getElementById('explain-form'));
  const query = String(form.get('query')).trim().replace(/^\?/, '');
  const version = String(form.get('microversion') || 'latest').trim();
  const out = document.getElementById('explain-answer');
  out.dataset.state = 'loading';
  let answer;
  try {
    answer = await get('placement/explain', new URLSearchParams(query), {'openstack-api-version': `placement ${version}`});
  } catch (err) {
    report(err);
    out.dataset.state = 'error';
    return;
  }
  report(null);
  clear(out);
  for (const g of answer.groups) {
    const box = h('div', {
      class: 'group', 'data-suffix': g.suffix, 'data-searched': g.searched ? 'true' : 'false',
      'data-providers': g.providers, 'data-fit': g.survivors.length,
    });
    if (!g.searched) {
      box.append(h('h2', {}, `${groupName(g.suffix)}: not searched (an earlier group found nothing)`));
      out.append(box);
      continue;
    }
    box.append(h('h2', {}, `${groupName(g.suffix)}: ${g.providers} providers, ${g.survivors.length} fit`));
    box.append(line(g.survivors.length, g.providers, 'fit', {'data-rule': 'fit', 'data-count': g.survivors.length}, true));
    for (const t of g.tallies) {
      box.append(line(t.providers, g.providers, facts(t), {
        'data-rule': t.rule, 'data-count': t.providers, 'data-class': t.resource_class || null,
      }, false));
    }
    out.append(box);
  }
  const kept = answer.trees.filter(t => t.in_answer).length;
  const trees = h('div', {class: 'group', 'data-trees': answer.trees.length, 'data-kept': kept});
  trees.append(h('h2', {}, `trees: ${answer.trees.length} considered, ${kept} in the answer`));
  const why = new Map();
  for (const t of answer.trees) {
    if (!t.dropped) continue;
    const key = facts(t.dropped);
    why.set(key, (why.get(key) || 0) + 1);
  }
  for (const [label, n] of why) trees.append(line(n, answer.trees.length, label, {'data-count': n}, false));
  trees.append(h('p', {class: 'summary', 'data-allocation-requests': answer.allocation_requests},
    `allocation requests: ${answer.allocation_requests}`));
  out.append(trees);
  out.dataset.state = 'ready';
}
