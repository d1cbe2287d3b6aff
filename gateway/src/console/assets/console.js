// The console's shell: logging in, the views (one module each, shown by
// the location's hash) and the error line.

import {ApiError, authStrategy, clearToken, login, setToken, token} from './api.js';
import * as fleet from './fleet.js';
import * as explain from './explain.js';
import * as stacks from './stacks.js';
import * as controller from './controller.js';
import * as metrics from './metrics.js';

const VIEWS = {fleet, explain, stacks, controller, metrics};
let current = null;

export function showError(err) {
  const line = document.getElementById('error');
  if (!err) {
    line.hidden = true;
    line.textContent = '';
    return;
  }
  line.textContent = err instanceof ApiError ? err.message : String(err && err.message || err);
  line.hidden = false;
}

function showLogin() {
  if (current) VIEWS[current].hide();
  current = null;
  for (const v of document.querySelectorAll('section.view')) v.hidden = true;
  document.getElementById('login').hidden = false;
  document.getElementById('logout').hidden = true;
}

function route() {
  const name = (location.hash || '#fleet').slice(1);
  const view = VIEWS[name] ? name : 'fleet';
  if (!token()) {
    showLogin();
    return;
  }
  document.getElementById('login').hidden = true;
  if (current && current !== view) VIEWS[current].hide();
  for (const v of document.querySelectorAll('section.view')) v.hidden = v.id !== view;
  for (const a of document.querySelectorAll('header nav a')) a.classList.toggle('active', a.dataset.view === view);
  showError(null);
  if (current !== view) {
    current = view;
    VIEWS[view].show(showError);
  }
}

async function start() {
  let strategy;
  try {
    strategy = await authStrategy();
  } catch (err) {
    showError(err);
    return;
  }
  document.getElementById('who').textContent = strategy === 'noauth2' ? 'noauth2: admin' : 'Keystone';
  document.getElementById('logout').hidden = strategy === 'noauth2' || !token();
  document.getElementById('logout').addEventListener('click', () => {
    clearToken();
    showLogin();
  });
  document.getElementById('login-token').addEventListener('submit', ev => {
    ev.preventDefault();
    setToken(new FormData(ev.target).get('token').trim());
    document.getElementById('logout').hidden = false;
    route();
  });
  document.getElementById('login-password').addEventListener('submit', async ev => {
    ev.preventDefault();
    const form = new FormData(ev.target);
    try {
      await login(Object.fromEntries(form.entries()));
      ev.target.reset();
      showError(null);
      document.getElementById('logout').hidden = false;
      route();
    } catch (err) {
      showError(err);
    }
  });
  window.addEventListener('keelson-unauthorized', () => {
    showLogin();
    showError('The token was refused: log in again.');
  });
  window.addEventListener('hashchange', route);
  route();
}

start();
