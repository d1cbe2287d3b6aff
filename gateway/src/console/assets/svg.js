// Building the page: HTML and SVG elements with text only (never markup
// from data), and the charts.

export const SVG_NS = 'http://www.w3.org/2000/svg';

/** An HTML element with attributes and children (strings become text). */
export function h(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k === 'class') e.className = v;
    else if (k.startsWith('data-')) e.setAttribute(k, String(v));
    else e.setAttribute(k, v === true ? '' : String(v));
  }
  for (const c of children) {
    if (c === null || c === undefined) continue;
    e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return e;
}

/** An SVG element with attributes, appended to `parent` when given. */
export function s(tag, attrs, parent) {
  const e = document.createElementNS(SVG_NS, tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v !== null && v !== undefined) e.setAttribute(k, String(v));
  }
  if (parent) parent.append(e);
  return e;
}

export function text(tag, attrs, value, parent) {
  const e = s(tag, attrs, parent);
  e.textContent = String(value);
  return e;
}

const PALETTE = ['#2b6cb0', '#2f9e44', '#e8590c', '#862e9c', '#c2255c', '#0c8599', '#5c940d', '#e67700', '#495057', '#364fc7'];

export function colour(i) {
  return PALETTE[i % PALETTE.length];
}

export function clear(e) {
  while (e.firstChild) e.firstChild.remove();
}

function niceMax(v) {
  if (!(v > 0)) return 1;
  const p = Math.pow(10, Math.floor(Math.log10(v)));
  for (const m of [1, 2, 2.5, 5, 10]) if (m * p >= v) return m * p;
  return 10 * p;
}

function clock(ms) {
  const d = new Date(ms);
  return d.toTimeString().slice(0, 8);
}

/**
 * A line chart of `series` ([{name, points: [[ms, value], ...]}]) into
 * `container`, time on x; `step` draws steps instead of slopes.
 */
export function lineChart(container, series, {width = 960, height = 220, step = false, unit = ''} = {}) {
  clear(container);
  const pad = {l: 48, r: 290, t: 10, b: 24};
  const svg = s('svg', {class: 'chart', width, height, viewBox: `0 0 ${width} ${height}`, role: 'img'});
  container.append(svg);
  const all = series.flatMap(x => x.points);
  container.dataset.points = String(all.length);
  if (all.length === 0) {
    text('text', {x: pad.l, y: height / 2}, 'no data yet', svg);
    return svg;
  }
  const t0 = Math.min(...all.map(p => p[0]));
  const t1 = Math.max(...all.map(p => p[0]), t0 + 1000);
  const yMax = niceMax(Math.max(...all.map(p => p[1])));
  const x = t => pad.l + (t - t0) / (t1 - t0) * (width - pad.l - pad.r);
  const y = v => height - pad.b - v / yMax * (height - pad.t - pad.b);
  for (let i = 0; i <= 4; i++) {
    const v = yMax * i / 4;
    s('line', {class: 'grid', x1: pad.l, x2: width - pad.r, y1: y(v), y2: y(v)}, svg);
    text('text', {x: pad.l - 4, y: y(v) + 3, 'text-anchor': 'end'}, `${+v.toPrecision(3)}${unit}`, svg);
  }
  s('line', {class: 'axis', x1: pad.l, x2: width - pad.r, y1: height - pad.b, y2: height - pad.b}, svg);
  text('text', {x: pad.l, y: height - 6}, clock(t0), svg);
  text('text', {x: width - pad.r, y: height - 6, 'text-anchor': 'end'}, clock(t1), svg);
  const legend = s('g', {class: 'legend'}, svg);
  series.forEach((ser, i) => {
    if (ser.points.length === 0) return;
    let d = '';
    ser.points.forEach(([t, v], j) => {
      if (j === 0) d += `M${x(t).toFixed(1)},${y(v).toFixed(1)}`;
      else if (step) d += `H${x(t).toFixed(1)}V${y(v).toFixed(1)}`;
      else d += `L${x(t).toFixed(1)},${y(v).toFixed(1)}`;
    });
    s('path', {class: 'series', d, stroke: ser.colour || colour(i), 'data-series': ser.name}, svg);
    // The latest reading as a dot (a single reading has no line yet).
    const [lt, lv] = ser.points[ser.points.length - 1];
    s('circle', {cx: x(lt).toFixed(1), cy: y(lv).toFixed(1), r: 2.5, fill: ser.colour || colour(i)}, svg);
    const ly = pad.t + 12 + i * 15;
    s('rect', {x: width - pad.r + 10, y: ly - 8, width: 10, height: 3, fill: ser.colour || colour(i)}, legend);
    text('text', {x: width - pad.r + 24, y: ly - 4}, ser.name.length > 44 ? ser.name.slice(0, 43) + '…' : ser.name, legend);
  });
  return svg;
}
