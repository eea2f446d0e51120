// The console, played for the browser test (../shared/spec/console-ui.md §2–3).
//
// It connects to the engine (the loopback fake engine of test_support) over a WebSocket
// and speaks the engine's worker protocol, as the console's proxy does: it provides the
// trigger types `console:script` and `console:style`, so the engine forwards it the worker's
// asset triggers; for each one it calls the trigger's function (`iii-directory::ui-content`)
// with the trigger's config, checks and keeps the asset, injects the stylesheet and imports
// the script, then calls the module's `setup(host)` with a `host` whose calls go over the
// same socket. The page it registers is mounted inside
// `<div data-iii-ui="iii-directory" style="display:contents">`.
//
// window.__harness exposes what the test reads: the log of frames and calls, the assets, the
// first-rows timing, the theme switch, and the teardown.

import * as ReactModule from 'react';
import { createRoot } from 'react-dom/client';

const React = ReactModule.default || ReactModule;
const h = React.createElement;

const params = new URLSearchParams(location.search);
const ENGINE_URL = params.get('engine');
const BROWSER_ID = `harness-${Math.random().toString(16).slice(2, 10)}`;
/** The console's limits and retries for fetching an asset (protocol §2). */
const ASSET_MAX_BYTES = 8 * 1024 * 1024;
const ASSET_TRIES = 2;
const ASSET_TIMEOUT_MS = 3000;
const ASSET_PATH = /^(?!\/)(?:[a-z0-9][a-z0-9._-]*)(?:\/[a-z0-9][a-z0-9._-]*)*$/;
const TRIGGER_TYPES = { 'console:script': 'script', 'console:style': 'style' };

const statusLine = document.getElementById('console-status');
const log = {
  /** Every frame sent to the engine, by type. */
  sent: [],
  /**
   * Every call made through host.iii.trigger: {function_id, payload, bytes (of the answer
   * frame), ms, error, summary (of a list answer: see `summarize`)}.
   */
  calls: [],
  /** Asset loads: {path, kind, hash, trigger_id, content_type}. */
  assets: [],
  /** Refused asset triggers: {id, path, reason}. */
  refused: [],
  /** Frames from the engine that carried an error for our bindings. */
  bindingErrors: [],
  errors: [],
};

// -----------------------------------------------------------------------------------------
// The engine connection
// -----------------------------------------------------------------------------------------

function uuid() {
  return crypto.randomUUID();
}


/**
 * What a list answer held, small enough to keep in the log: whole (with `full`), unchanged,
 * or a delta with the keys of its changed rows and the removed ids.
 */
function summarize(value) {
  if (!value || typeof value !== 'object') return null;
  if (value.unchanged === true) return { kind: 'unchanged' };
  if (Array.isArray(value.changed)) {
    return { kind: 'delta', changed: value.changed.map((r) => r.id ?? r.name), removed: value.removed || [] };
  }
  for (const field of ['skills', 'prompts', 'agents']) {
    if (Array.isArray(value[field])) return { kind: value.full === true ? 'full' : 'whole', rows: value[field].length };
  }
  return null;
}

class Engine {
  constructor(url) {
    this.url = url;
    this.pending = new Map();
    this.functions = new Map();
    this.providers = new Map();
    this.listeners = new Set();
    this.state = 'connecting';
    this.queue = [];
  }

  connect() {
    this.socket = new WebSocket(this.url);
    this.socket.onopen = () => {
      this.setState('connected');
      for (const frame of this.queue.splice(0)) this.socket.send(JSON.stringify(frame));
      // Tell the engine who this connection is (the call that makes its registrations apply).
      this.send({
        type: 'invokefunction',
        invocation_id: null,
        function_id: 'engine::workers::register',
        data: { name: 'console-harness', runtime: 'browser', version: '0', os: navigator.platform, pid: 1 },
        action: { type: 'void' },
      });
    };
    this.socket.onclose = () => {
      this.setState('disconnected');
      for (const [, { reject }] of this.pending) reject(new Error('the engine connection closed'));
      this.pending.clear();
    };
    this.socket.onmessage = (event) => this.receive(JSON.parse(event.data), event.data.length);
  }

  setState(state) {
    this.state = state;
    statusLine.textContent = state;
    for (const listener of this.listeners) listener(state);
  }

  send(frame) {
    log.sent.push({ type: frame.type, id: frame.id, trigger_type: frame.trigger_type, function_id: frame.function_id });
    if (this.socket && this.socket.readyState === WebSocket.OPEN) this.socket.send(JSON.stringify(frame));
    else this.queue.push(frame);
  }

  trigger(functionId, data, timeoutMs = 30000) {
    const invocationId = uuid();
    const started = performance.now();
    const entry = { function_id: functionId, payload: data, bytes: 0, ms: 0, error: null };
    log.calls.push(entry);
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.pending.delete(invocationId);
        entry.error = 'timeout';
        reject(Object.assign(new Error(`${functionId} timed out after ${timeoutMs} ms`), { code: 'timeout' }));
      }, timeoutMs);
      this.pending.set(invocationId, {
        resolve: (value, bytes) => {
          clearTimeout(timer);
          entry.bytes = bytes;
          entry.summary = summarize(value);
          entry.ms = performance.now() - started;
          resolve(value);
        },
        reject: (error) => {
          clearTimeout(timer);
          entry.error = error.message;
          entry.ms = performance.now() - started;
          reject(error);
        },
      });
      this.send({ type: 'invokefunction', invocation_id: invocationId, function_id: functionId, data });
    });
  }

  registerFunction(id, handler) {
    this.functions.set(id, handler);
    this.send({ type: 'registerfunction', id, request_format: null, response_format: null, metadata: { internal: true } });
  }

  unregisterFunction(id) {
    this.functions.delete(id);
    this.send({ type: 'unregisterfunction', id });
  }

  registerTriggerType(id, description, provider) {
    this.providers.set(id, provider);
    this.send({ type: 'registertriggertype', id, description });
  }

  registerTrigger(triggerType, functionId, config) {
    const id = uuid();
    this.send({ type: 'registertrigger', id, trigger_type: triggerType, function_id: functionId, config });
    return id;
  }

  unregisterTrigger(id, triggerType) {
    this.send({ type: 'unregistertrigger', id, trigger_type: triggerType });
  }

  async receive(frame, frameBytes) {
    switch (frame.type) {
      case 'invocationresult': {
        const waiting = this.pending.get(frame.invocation_id);
        if (!waiting) return;
        this.pending.delete(frame.invocation_id);
        if (frame.error) {
          waiting.reject(Object.assign(new Error(frame.error.message), { code: frame.error.code }));
        } else {
          waiting.resolve(frame.result, frameBytes);
        }
        return;
      }
      case 'invokefunction': {
        const handler = this.functions.get(frame.function_id);
        let reply;
        try {
          if (!handler) throw Object.assign(new Error(`Function ${frame.function_id} not found`), { code: 'function_not_found' });
          reply = { result: (await handler(frame.data)) ?? null };
        } catch (error) {
          reply = { error: { code: error.code || 'invocation_failed', message: String(error.message || error) } };
        }
        if (frame.invocation_id) {
          this.send({ type: 'invocationresult', invocation_id: frame.invocation_id, function_id: frame.function_id, ...reply });
        }
        return;
      }
      case 'registertrigger': {
        const provider = this.providers.get(frame.trigger_type);
        const ack = { type: 'triggerregistrationresult', id: frame.id, trigger_type: frame.trigger_type, function_id: frame.function_id };
        if (!provider) {
          this.send({ ...ack, error: { code: 'trigger_type_not_found', message: `no provider for ${frame.trigger_type}` } });
          return;
        }
        const refusal = provider.check(frame);
        this.send(refusal ? { ...ack, error: { code: 'trigger_registration_failed', message: refusal } } : ack);
        if (!refusal) provider.register(frame);
        return;
      }
      case 'unregistertrigger': {
        const provider = this.providers.get(frame.trigger_type);
        if (provider) provider.unregister(frame);
        return;
      }
      case 'triggerregistrationresult':
        if (frame.error) log.bindingErrors.push(frame);
        return;
      default:
    }
  }
}

// -----------------------------------------------------------------------------------------
// Theme: html[data-theme] and host.useTheme()
// -----------------------------------------------------------------------------------------

const themeListeners = new Set();
function currentTheme() {
  return document.documentElement.dataset.theme === 'dark' ? 'dark' : 'light';
}
function setTheme(theme) {
  document.documentElement.dataset.theme = theme;
  for (const listener of themeListeners) listener();
}
function useTheme() {
  return React.useSyncExternalStore(
    (listener) => {
      themeListeners.add(listener);
      return () => themeListeners.delete(listener);
    },
    currentTheme,
  );
}

// -----------------------------------------------------------------------------------------
// Pages: the registered page, mounted behind an error boundary in the worker's scope
// -----------------------------------------------------------------------------------------

const pages = new Map();
const root = createRoot(document.getElementById('page-host'));

class ErrorBoundary extends React.Component {
  constructor(props) {
    super(props);
    this.state = { error: null };
  }
  static getDerivedStateFromError(error) {
    return { error };
  }
  componentDidCatch(error) {
    log.errors.push(String(error && error.stack ? error.stack : error));
  }
  render() {
    if (this.state.error) return h('pre', { className: 'harness-page-error' }, String(this.state.error));
    return this.props.children;
  }
}

function Mounted({ page }) {
  return page.render({});
}

/** The console's settings slot (`host.configForms`): registered forms, shown on demand. */
const configForms = new Map();
let view = 'page';

function renderPages() {
  const page = view === 'settings' ? [...configForms.values()][0] : [...pages.values()][0];
  root.render(
    page
      ? h('div', { 'data-iii-ui': page.scope, style: { display: 'contents' } }, h(ErrorBoundary, { key: `${view}:${page.id}` }, h(Mounted, { page })))
      : null,
  );
}

// -----------------------------------------------------------------------------------------
// The host a module's setup() gets
// -----------------------------------------------------------------------------------------

function once(fn) {
  let done = false;
  return () => {
    if (done) return;
    done = true;
    fn();
  };
}

function makeHost(engine, scope, removers) {
  const keep = (off) => {
    removers.push(off);
    return off;
  };
  return {
    iii: {
      browserId: BROWSER_ID,
      trigger: (functionId, payload = {}, options = {}) => engine.trigger(functionId, payload, options.timeoutMs),
      on(functionId, handler) {
        const id = `${functionId}::${BROWSER_ID}`;
        engine.registerFunction(id, handler);
        return keep(once(() => engine.unregisterFunction(id)));
      },
      registerTrigger({ type, function_id, config }) {
        const id = engine.registerTrigger(type, function_id, config || {});
        return keep(once(() => engine.unregisterTrigger(id, type)));
      },
      onConnectionState(listener) {
        engine.listeners.add(listener);
        return keep(once(() => engine.listeners.delete(listener)));
      },
    },
    pages: {
      register(page) {
        const entry = { ...page, scope };
        pages.set(page.id, entry);
        renderPages();
        return keep(
          once(() => {
            if (pages.get(page.id) === entry) pages.delete(page.id);
            renderPages();
          }),
        );
      },
    },
    configForms: {
      register(form) {
        const entry = { ...form, scope };
        configForms.set(form.id, entry);
        renderPages();
        return keep(
          once(() => {
            if (configForms.get(form.id) === entry) configForms.delete(form.id);
            renderPages();
          }),
        );
      },
    },
    useTheme,
  };
}

// -----------------------------------------------------------------------------------------
// Assets: what the console does with console:script / console:style triggers
// -----------------------------------------------------------------------------------------

const assets = new Map(); // path → {kind, hash, triggerId, content}
let module = null; // {path, removers, teardown}
let firstRowsResolve;
const firstRows = new Promise((resolve) => {
  firstRowsResolve = resolve;
});
const marks = {};

async function sha16(text) {
  const digest = await crypto.subtle.digest('SHA-256', new TextEncoder().encode(text));
  return [...new Uint8Array(digest)].map((b) => b.toString(16).padStart(2, '0')).join('').slice(0, 16);
}

function checkAssetTrigger(kind) {
  return (frame) => {
    const config = frame.config || {};
    const keys = Object.keys(config);
    if (keys.length !== 1 || keys[0] !== 'path') return `config must be exactly {path}, got keys ${JSON.stringify(keys)}`;
    const path = config.path;
    if (typeof path !== 'string' || path.length < 1 || path.length > 512 || !ASSET_PATH.test(path) || path.split('/').some((s) => /^\.+$/.test(s))) {
      return `invalid asset path ${JSON.stringify(path)}`;
    }
    if (!path.endsWith(kind === 'script' ? '.js' : '.css')) return `a ${kind} path must end in ${kind === 'script' ? '.js' : '.css'}`;
    return null;
  };
}

async function fetchAsset(engine, frame) {
  let lastError;
  for (let attempt = 0; attempt < ASSET_TRIES; attempt += 1) {
    try {
      return await engine.trigger(frame.function_id, { path: frame.config.path }, ASSET_TIMEOUT_MS);
    } catch (error) {
      lastError = error;
    }
  }
  throw lastError;
}

function assetProvider(engine, kind) {
  return {
    check: checkAssetTrigger(kind),
    async register(frame) {
      const path = frame.config.path;
      try {
        const answer = await fetchAsset(engine, frame);
        if (!answer || typeof answer.content !== 'string') throw new Error('content is not a string');
        if (answer.content.length > ASSET_MAX_BYTES) throw new Error('content is over 8 MiB');
        const hash = await sha16(answer.content);
        const previous = assets.get(path);
        const record = { kind, hash, triggerId: frame.id, content: answer.content, contentType: answer.content_type || null };
        assets.set(path, record);
        log.assets.push({ path, kind, hash, trigger_id: frame.id, content_type: record.contentType, bytes: answer.content.length });
        if (previous && previous.hash === hash) return;
        await apply(engine, path, record);
      } catch (error) {
        log.refused.push({ id: frame.id, path, reason: String(error.message || error) });
      }
    },
    unregister(frame) {
      // The console drops the asset from what it serves, but an open tab keeps the page it
      // mounted (as console 0.23 does when the worker goes away): the page itself must say that
      // its worker is gone. A registration of the same bytes later is a no-op for that tab.
      for (const [, record] of assets) {
        if (record.triggerId === frame.id) record.gone = true;
      }
    },
  };
}

async function apply(engine, path, record) {
  if (record.kind === 'style') {
    let style = document.querySelector(`style[data-asset="${path}"]`);
    if (!style) {
      style = document.createElement('style');
      style.dataset.asset = path;
      document.head.appendChild(style);
    }
    style.textContent = record.content;
    return;
  }
  unloadModule();
  const url = URL.createObjectURL(new Blob([record.content], { type: 'text/javascript' }));
  const imported = await import(url);
  URL.revokeObjectURL(url);
  const scope = path.split('/')[0];
  const removers = [];
  marks.setupStart = performance.now();
  const teardown = imported.default(makeHost(engine, scope, removers));
  module = { path, removers, teardown: typeof teardown === 'function' ? teardown : null, exports: imported };
  window.__harness.module = imported;
}

function unloadModule() {
  if (!module) return;
  const { removers, teardown } = module;
  module = null;
  if (teardown) teardown();
  for (const off of removers.reverse()) off();
}

function remove(path, record) {
  if (record.kind === 'style') document.querySelector(`style[data-asset="${path}"]`)?.remove();
  else if (module && module.path === path) unloadModule();
}

// -----------------------------------------------------------------------------------------
// Start
// -----------------------------------------------------------------------------------------

/** Resolves after the browser has painted the current DOM (a frame, then a task). */
function afterPaint() {
  return new Promise((resolve) => requestAnimationFrame(() => setTimeout(resolve, 0)));
}

// The first list rows on screen, measured from the call of setup().
new MutationObserver((_, observer) => {
  if (marks.setupStart != null && document.querySelector('#page-host .dir-row')) {
    observer.disconnect();
    marks.firstRowsInDom = performance.now();
    afterPaint().then(() => {
      marks.firstRowsPainted = performance.now();
      firstRowsResolve(marks.firstRowsPainted - marks.setupStart);
    });
  }
}).observe(document.getElementById('page-host'), { childList: true, subtree: true });

const engine = new Engine(ENGINE_URL);
window.__harness = {
  browserId: BROWSER_ID,
  log,
  marks,
  firstRows,
  afterPaint,
  setTheme,
  assets: () => [...assets.entries()].filter(([, a]) => !a.gone).map(([path, a]) => ({ path, kind: a.kind, hash: a.hash, contentType: a.contentType })),
  trigger: (functionId, payload) => engine.trigger(functionId, payload || {}),
  teardown: () => unloadModule(),
  /** Shows the registered page (`page`) or the registered settings form (`settings`). */
  show(which) {
    view = which;
    renderPages();
  },
  configForms: () => [...configForms.keys()],
  module: null,
};
engine.registerTriggerType('console:script', 'Injectable UI scripts (harness)', assetProvider(engine, 'script'));
engine.registerTriggerType('console:style', 'Injectable UI styles (harness)', assetProvider(engine, 'style'));
engine.connect();
