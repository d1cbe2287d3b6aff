// The controller: every node's ctrlstatus, and the term and the primary
// over time (from the gateway's samples, every two seconds).

import {get} from './api.js';
import {clear, colour, h, lineChart, s, text} from './svg.js';

let report = () => {};
let timer = null;

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
    render(await get('console/controller'));
  } catch (err) {
    report(err);
  }
  if (!document.getElementById('controller').hidden) timer = setTimeout(tick, 2000);
}

const ROLE_COLOUR = {PRIMARY: '#2f9e44', STANDBY: '#2b6cb0', ELECTING: '#e8a317', INIT: '#adb5bd', UNREACHABLE: '#d9480f'};

function render(doc) {
  const summary = document.getElementById('controller-summary');
  const body = document.querySelector('#controller-nodes tbody');
  clear(body);
  if (!doc.configured) {
    summary.textContent = 'No controller is configured for this gateway ([controller] peers).';
    document.getElementById('controller').dataset.state = 'ready';
    return;
  }
  let primary = '', term = 0;
  for (const n of doc.nodes) {
    if (n.error) {
      body.append(h('tr', {'data-address': n.address}, h('td', {}, '?'), h('td', {}, n.address),
        h('td', {class: 'status-text-failed'}, 'UNREACHABLE'), h('td', {colspan: 5}, n.error)));
      continue;
    }
    const st = n.status;
    if (st.responderRole === 'PRIMARY') primary = st.responderName;
    term = Math.max(term, st.term);
    body.append(h('tr', {'data-address': n.address, 'data-name': st.responderName, 'data-role': st.responderRole},
      h('td', {}, st.responderName), h('td', {}, n.address), h('td', {}, st.responderRole), h('td', {}, st.term),
      h('td', {}, st.primaryName || 'unknown'), h('td', {}, st.quorum ? 'yes' : 'no'),
      h('td', {}, `${st.appliedLsn} / ${st.committedLsn}${st.fenced ? ' (fenced)' : ''}`),
      h('td', {title: st.configChecksum}, st.configVersion ? `v${st.configVersion}` : 'none')));
  }
  summary.textContent = primary ? `primary ${primary}, term ${term}` : `no primary known (term ${term})`;
  summary.dataset.primary = primary;
  summary.dataset.term = String(term);
  timeline(doc.history);
  document.getElementById('controller').dataset.state = 'ready';
}

/** A lane per node coloured by its role over time, then the term. */
function timeline(history) {
  const box = document.getElementById('controller-timeline');
  clear(box);
  const lanes = [...new Set(history.flatMap(x => x.nodes.map(n => n.address)))].sort();
  const laneBox = h('div', {});
  box.append(laneBox);
  if (history.length > 0 && lanes.length > 0) {
    const width = 960, laneH = 18, pad = 160;
    const height = lanes.length * (laneH + 4) + 24;
    const t0 = history[0].at, t1 = Math.max(history[history.length - 1].at, t0 + 1000);
    const x = t => pad + (t - t0) / (t1 - t0) * (width - pad - 10);
    const svg = s('svg', {class: 'chart', width, height, viewBox: `0 0 ${width} ${height}`, role: 'img'});
    lanes.forEach((addr, i) => {
      const y = 6 + i * (laneH + 4);
      const first = history.flatMap(x => x.nodes).find(n => n.address === addr && n.name);
      text('text', {x: 6, y: y + 13}, first ? `${first.name} (${addr})` : addr, svg);
      history.forEach((sample, j) => {
        const n = sample.nodes.find(m => m.address === addr);
        if (!n) return;
        const end = j + 1 < history.length ? history[j + 1].at : t1;
        const r = s('rect', {class: 'band', x: x(sample.at), y, width: Math.max(1, x(end) - x(sample.at)), height: laneH,
          fill: ROLE_COLOUR[n.role] || '#adb5bd'}, svg);
        text('title', {}, `${n.role}${n.term !== undefined ? ', term ' + n.term : ''}`, r);
      });
    });
    const legend = Object.entries(ROLE_COLOUR).map(([role, c], i) => [role, c, i]);
    for (const [role, c, i] of legend) {
      s('rect', {x: pad + i * 110, y: height - 14, width: 10, height: 10, fill: c}, svg);
      text('text', {x: pad + i * 110 + 14, y: height - 5}, role, svg);
    }
    laneBox.append(svg);
  }
  const termBox = h('div', {id: 'controller-terms'});
  box.append(termBox);
  // The highest term any node reported, and the primary's name per sample.
  const terms = history.map(x => [x.at, Math.max(0, ...x.nodes.map(n => n.term || 0))]);
  lineChart(termBox, [{name: 'term', points: terms, colour: colour(0)}], {height: 160, step: true});
}
