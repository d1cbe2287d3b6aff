// The gateway's metrics as charts: requests per second and latency
// (p50, p99 from the histogram's buckets) per route, from two readings
// of the counters two seconds apart.

import {get} from './api.js';
import {clear, h, lineChart} from './svg.js';

let report = () => {};
let timer = null;
let previous = null;
// Two minutes of points per route.
const KEEP = 60;
const points = new Map();

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
    const reading = await get('console/metrics');
    if (previous) record(previous, reading);
    previous = reading;
    draw(reading);
  } catch (err) {
    report(err);
  }
  if (!document.getElementById('metrics').hidden) timer = setTimeout(tick, 2000);
}

/** Series summed over method and status, by API and route. */
function byRoute(reading) {
  const out = new Map();
  for (const x of reading.series) {
    const key = `${x.api} ${x.route}`;
    const r = out.get(key) || {api: x.api, route: x.route, count: 0, errors: 0, buckets: reading.buckets.map(() => 0)};
    r.count += x.count;
    if (x.status >= 500) r.errors += x.count;
    x.buckets.forEach((b, i) => { r.buckets[i] += b; });
    out.set(key, r);
  }
  return out;
}

/** The latency below which a fraction q of `count` requests fell. */
function quantile(bounds, cumulative, count, q) {
  if (count <= 0) return null;
  const want = q * count;
  let below = 0, lower = 0;
  for (let i = 0; i < bounds.length; i++) {
    if (cumulative[i] >= want) {
      const inBucket = cumulative[i] - below;
      const frac = inBucket > 0 ? (want - below) / inBucket : 1;
      return (lower + (bounds[i] - lower) * frac) * 1000;
    }
    below = cumulative[i];
    lower = bounds[i];
  }
  return bounds[bounds.length - 1] * 1000;
}

function record(before, after) {
  const dt = (after.at - before.at) / 1000;
  if (dt <= 0) return;
  const a = byRoute(before);
  for (const [key, r] of byRoute(after)) {
    const b = a.get(key) || {count: 0, buckets: r.buckets.map(() => 0)};
    const n = r.count - b.count;
    const delta = r.buckets.map((v, i) => v - b.buckets[i]);
    const p = points.get(key) || [];
    p.push({at: after.at, rate: n / dt, p50: quantile(after.buckets, delta, n, 0.5), p99: quantile(after.buckets, delta, n, 0.99)});
    while (p.length > KEEP) p.shift();
    points.set(key, p);
  }
}

function draw(reading) {
  const routes = [...points.entries()]
    .map(([key, p]) => ({key, p, rate: p.reduce((s, x) => s + x.rate, 0)}))
    .filter(r => r.rate > 0)
    .sort((x, y) => y.rate - x.rate)
    .slice(0, 8);
  lineChart(document.getElementById('metrics-rate'),
    routes.map(r => ({name: r.key, points: r.p.map(x => [x.at, x.rate])})), {unit: ''});
  const latency = [];
  for (const r of routes.slice(0, 4)) {
    latency.push({name: `${r.key} p50`, points: r.p.filter(x => x.p50 !== null).map(x => [x.at, x.p50])});
    latency.push({name: `${r.key} p99`, points: r.p.filter(x => x.p99 !== null).map(x => [x.at, x.p99])});
  }
  lineChart(document.getElementById('metrics-latency'), latency, {unit: ''});
  const body = document.querySelector('#metrics-table tbody');
  clear(body);
  const totals = [...byRoute(reading).entries()].sort((x, y) => y[1].count - x[1].count);
  for (const [key, r] of totals) {
    const last = (points.get(key) || []).slice(-1)[0];
    const all = quantile(reading.buckets, r.buckets, r.count, 0.5);
    const all99 = quantile(reading.buckets, r.buckets, r.count, 0.99);
    body.append(h('tr', {'data-route': r.route, 'data-api': r.api, 'data-count': r.count},
      h('td', {}, r.api), h('td', {}, r.route), h('td', {}, r.count),
      h('td', {}, last ? last.rate.toFixed(2) : '–'),
      h('td', {}, all === null ? '–' : all.toFixed(1)), h('td', {}, all99 === null ? '–' : all99.toFixed(1)),
      h('td', {}, r.errors)));
  }
  document.getElementById('metrics').dataset.state = 'ready';
}
