// iii-directory's page for the iii console (the console's injectable UI protocol).
//
// A plain ES module, no build step: React comes from the console through its import map
// ('react'), and nothing else is imported. The default export `setup(host)` registers one page,
// "Directory", and returns its teardown. The page browses and edits what this worker serves:
// skills, system prompts and agent profiles, through the worker's own `directory::*`
// functions (`host.iii.trigger`), and follows changes live through the three
// `directory::*::on-change` trigger types (`host.iii.on` + `host.iii.registerTrigger`). Its
// Bundles tab shows what downloads landed against the bundles lock and updates them (check,
// plan, apply) through `directory::skills::bundles::*`.
//
// Every rule of styles.css is scoped under [data-iii-ui="iii-directory"]; class names here
// start with `dir-`.

import * as ReactModule from 'react';

const React = typeof ReactModule.createElement === 'function' ? ReactModule : ReactModule.default;
const {
  createElement: h,
  Fragment,
  useCallback,
  useEffect,
  useLayoutEffect,
  useMemo,
  useRef,
  useState,
  useSyncExternalStore,
} = React;

const PAGE = { id: 'directory', title: 'Directory' };
/** Row height in pixels; styles.css gives `.dir-row` the same height. */
const ROW_HEIGHT = 30;
/** Rows rendered above and below the visible window, so fast scrolling shows no gaps. */
const OVERSCAN = 10;
/** Below this width the page shows the list or the document, not both. */
const NARROW_WIDTH = 760;
/** The browser functions bound to the on-change trigger types: `<prefix>::<family>`. */
const LIVE_FUNCTION_PREFIX = 'iii-directory::ui::on-change';
/** Read and write calls give up after this long (the console's default is longer). */
const CALL_TIMEOUT_MS = 20000;
/** The index's health, with the files it skips (`directory::index::status`). */
const STATUS = 'directory::index::status';
/** The skipped files are asked for again this long after a change. */
const STATUS_AFTER_CHANGE_MS = 800;
/** How often the page asks for a worker that went away. */
const PROBE_MS = 1500;
/** How often the page checks, while shown, that the worker is still there. */
const HEARTBEAT_MS = 20000;
/** The worker's dry run of a proposed text (`src/dry_run.rs`). */
const UI_CHECK = 'iii-directory::ui-check';
/** The editor asks the dry run this long after the last keystroke. */
const CHECK_DEBOUNCE_MS = 350;
/** Id rules of the contract: a skill id is `/`-separated segments, names are one segment. */
const SEGMENT = /^[a-z0-9_-]{1,64}$/;
const MAX_SKILL_ID_BYTES = 1024;
const MAX_EXTENDS_HOPS = 8;

// -----------------------------------------------------------------------------------------
// The three families
// -----------------------------------------------------------------------------------------

const utf8 = new TextEncoder();
const byteLength = (text) => utf8.encode(text).length;

/**
 * What differs between skills, system prompts and agent profiles: function ids, the request
 * key, the list field, the row shape, the id rule, and a starting file for `create`.
 */
const FAMILIES = {
  skills: {
    label: 'Skills',
    noun: 'skill',
    key: 'id',
    list: 'directory::skills::list',
    get: 'directory::skills::get',
    create: 'directory::skills::create',
    update: 'directory::skills::update',
    /** The update's refusal when the file changed since the text its `base` names was read. */
    changedOnDisk: 'D118',
    remove: 'directory::skills::delete',
    trigger: 'directory::skills::on-change',
    event: 'skills',
    revisioned: true,
    rowsOf: (answer) => answer.skills,
    row: (r) => ({
      key: r.id,
      title: r.title || r.id,
      description: r.description || '',
      bytes: typeof r.bytes === 'number' ? r.bytes : null,
      modified: r.modified_at || '',
      tag: r.type || null,
    }),
    stampOfRow: (row) => `${row.modified}|${row.bytes}`,
    stampOfDoc: (doc) => `${doc.modified_at || ''}|${byteLength(doc.raw || '')}`,
    validate: validateSkillId,
    /** The list shows `<ns>/index` as `<ns>`; writes answer with the id on disk. */
    displayKey: (id) => (id.endsWith('/index') ? id.slice(0, -'/index'.length) : id),
    renames: false,
    idHint: 'segments of a-z 0-9 - _ separated by /, e.g. mailer/retries',
    template: (id) => `# ${titleOf(id.split('/').pop())}\n\nWhat this skill is for, and when to use it.\n`,
  },
  prompts: {
    label: 'System prompts',
    noun: 'system prompt',
    key: 'name',
    list: 'directory::system-prompts::list',
    get: 'directory::system-prompts::get',
    create: 'directory::system-prompts::create',
    update: 'directory::system-prompts::update',
    /** The update's refusal when the file changed since the text its `base` names was read. */
    changedOnDisk: 'D215',
    remove: 'directory::system-prompts::delete',
    trigger: 'directory::system-prompts::on-change',
    event: 'system-prompts',
    revisioned: true,
    rowsOf: (answer) => answer.prompts,
    row: (r) => ({
      key: r.name,
      title: r.name,
      description: r.description || '',
      bytes: null,
      modified: r.modified_at || '',
      tag: r.builtin ? 'bundled' : null,
    }),
    stampOfRow: (row) => row.modified,
    stampOfDoc: (doc) => doc.modified_at || '',
    validate: validateName,
    displayKey: (name) => name,
    /** An update answers the effective name: a `name:` in the frontmatter renames the prompt. */
    renames: true,
    idHint: 'a-z 0-9 - _, at most 64 characters',
    template: (name) => `---\ndescription: ${titleOf(name)} identity prompt.\n---\nYou are ${titleOf(name)}.\n`,
  },
  agents: {
    label: 'Agent profiles',
    noun: 'agent profile',
    key: 'id',
    list: 'directory::agents::list',
    get: 'directory::agents::get',
    create: 'directory::agents::create',
    update: 'directory::agents::update',
    /** The update's refusal when the file changed since the text its `base` names was read. */
    changedOnDisk: 'D416',
    remove: 'directory::agents::delete',
    trigger: 'directory::agents::on-change',
    event: 'agents',
    revisioned: true,
    rowsOf: (answer) => answer.agents,
    row: (r) => ({
      key: r.id,
      title: `${r.logo ? `${r.logo} ` : ''}${r.name || r.id}`,
      description: r.description || '',
      bytes: null,
      modified: r.modified_at || '',
      tag: r.builtin ? 'bundled' : r.inheritance_error ? 'broken extends' : null,
      extends: r.extends || null,
      inheritanceError: r.inheritance_error || null,
    }),
    stampOfRow: (row) => row.modified,
    stampOfDoc: (doc) => doc.modified_at || '',
    /**
     * Its answer resolves its `extends` chain (the system prompt, the inherited fields): the
     * list's delta carries its row when a profile up the chain changed, its own file unchanged.
     */
    resolves: true,
    validate: validateName,
    displayKey: (id) => id,
    renames: false,
    idHint: 'a-z 0-9 - _, at most 64 characters',
    template: (id) => `---\nname: ${titleOf(id)}\ndescription: \nextends: iii\n---\n`,
  },
};
const FAMILY_KEYS = Object.keys(FAMILIES);

function titleOf(id) {
  const words = id.replace(/[-_]+/g, ' ').trim();
  return words ? words[0].toUpperCase() + words.slice(1) : id;
}

/** The contract's skill id rule; returns what is wrong, or null. */
export function validateSkillId(id) {
  if (!id) return 'the id is empty';
  if (id.startsWith('/') || id.endsWith('/')) return 'the id may not start or end with /';
  if (byteLength(id) > MAX_SKILL_ID_BYTES) return `the id is longer than ${MAX_SKILL_ID_BYTES} bytes`;
  const segments = id.split('/');
  for (let i = 0; i < segments.length; i += 1) {
    if (!SEGMENT.test(segments[i])) {
      return `segment ${i + 1} ("${segments[i]}") must be 1 to 64 of a-z 0-9 - _`;
    }
  }
  return null;
}

/** The contract's name rule (system prompt names, agent ids); returns what is wrong, or null. */
export function validateName(name) {
  if (!name) return 'the name is empty';
  return SEGMENT.test(name) ? null : 'the name must be 1 to 64 of a-z 0-9 - _';
}

function messageOf(error) {
  return (error && (error.message || (error.error && error.error.message))) || String(error);
}

/**
 * What a failed call says about the connection: `worker-missing` (the engine has no such
 * function, or the call stopped because its worker went away), `timeout`, `disconnected`
 * (the console's own connection to the engine), or `null` for an answer of the worker itself.
 */
export function classifyFailure(error) {
  const code = error && (error.code || (error.error && error.error.code));
  const message = messageOf(error);
  if (/\bD\d{3} [a-z_]+:/.test(message)) return null;
  if (code === 'function_not_found' || /\bFunction \S+ not found\b/.test(message)) return 'worker-missing';
  if (code === 'invocation_stopped' || /^Invocation stopped/.test(message)) return 'worker-missing';
  if (code === 'timeout' || /\btimed? ?out\b/i.test(message)) return 'timeout';
  if (/connection (was )?(closed|lost)|not connected|socket (is )?closed/i.test(message)) return 'disconnected';
  return null;
}

/**
 * A worker message without its "Next: call directory::…" tail: those steps are bus calls for
 * an agent or a script, which a person on this page cannot make (the page offers its own).
 */
export function withoutBusSteps(message) {
  return message.replace(/\s*Next: call [\s\S]*$/, '');
}

/** Whether a failed read says the document does not exist (any family's `not_found`). */
function isNotFound(text) {
  return /^D\d{3} not_found:/.test(text || '');
}

/**
 * The text to show for a failed call: the worker's own errors from the contract's code on
 * (`D113 invalid_input: …`); the engine's and the connection's said as a sentence with the
 * next step.
 */
export function errorText(error) {
  const message = messageOf(error);
  const coded = /\bD\d{3} [a-z_]+:/.exec(message);
  if (coded) return withoutBusSteps(message.slice(coded.index));
  switch (classifyFailure(error)) {
    case 'worker-missing':
      return 'The iii-directory worker is not running (the engine does not know its functions). Start it (iii-directory --url ws://<engine>); this page reconnects by itself when it is back.';
    case 'timeout':
      return 'The worker did not answer in time. It may be busy (a large reindex); try again in a moment.';
    case 'disconnected':
      return 'The console lost its connection to the engine. It reconnects by itself, and this page follows.';
    default:
      return message.replace(/^handler error: /, '');
  }
}

// -----------------------------------------------------------------------------------------
// Lists: the request and the merge of its answer (one seam for the refresh protocol)
// -----------------------------------------------------------------------------------------

/** 0 is never a list revision, so the first answer is the whole list. */
const NO_REVISION = 0;

/**
 * The request that refreshes a family's list: the revision the page holds, as
 * `since_revision`. The answer is `{unchanged, revision}`, what changed since
 * (`{revision, changed, removed}`), or the whole list with `full: true` (the first call, a
 * revision the index no longer remembers, a rebuilt index, a change of what is visible);
 * `mergeListAnswer` applies each.
 */
export function listRequest(familyKey, state) {
  if (!FAMILIES[familyKey].revisioned) return {};
  const request = { since_revision: state.revision == null ? NO_REVISION : state.revision };
  if (state.withoutDescriptions) request.include_description = false;
  return request;
}

/**
 * Whether a failed list call is worth asking again without descriptions: the worker refuses
 * (`D120 too_large`) a whole list longer than the engine carries in one message, and a tree
 * of tens of thousands of skills gets there mostly through its descriptions.
 */
export function retryWithoutDescriptions(familyKey, state, message) {
  return familyKey === 'skills' && !state.withoutDescriptions && /^D120 too_large:/.test(message);
}

/**
 * Applies a list answer to a family's state `{rows, revision}`, returning the new state (the
 * same rows array when nothing changed). Understands the whole answer (`{skills, revision}`,
 * also with `full: true`), `{unchanged, revision}`, and a delta
 * `{revision, changed: [row], removed: [id]}`.
 */
export function mergeListAnswer(familyKey, state, answer) {
  const family = FAMILIES[familyKey];
  const revision = typeof answer.revision === 'number' ? answer.revision : null;
  if (answer.unchanged === true && state.rows) {
    return { rows: state.rows, revision };
  }
  const whole = family.rowsOf(answer);
  if (Array.isArray(whole)) {
    return { rows: whole.map(normalize(family)).sort(rowOrder), revision };
  }
  if (state.rows && (Array.isArray(answer.changed) || Array.isArray(answer.removed))) {
    if (!(answer.changed || []).length && !(answer.removed || []).length) return { rows: state.rows, revision };
    const held = new Map(state.rows.map((row) => [row.key, row]));
    for (const key of answer.removed || []) held.delete(key);
    for (const raw of answer.changed || []) {
      const row = normalize(family)(raw);
      held.set(row.key, row);
    }
    const rows = [...held.values()].sort(rowOrder);
    return { rows, revision };
  }
  throw new Error(`unexpected answer from ${family.list}`);
}

/**
 * The page's row order: by the id shown. (The server sorts skills by their id on disk, where
 * `<ns>/index`, shown as `<ns>`, comes after `<ns>/a`; one order for whole answers and merged
 * deltas keeps rows from jumping when a delta lands.)
 */
function rowOrder(a, b) {
  return a.key < b.key ? -1 : a.key > b.key ? 1 : 0;
}

/**
 * The characters that reorder how the text around them shows: the bidirectional embeddings,
 * overrides and isolates (U+202A-U+202E, U+2066-U+2069). `evil\u202Egpj.md` shows as
 * `evildm.jpg`, so a person reviewing a file here would read another text than the agent it is
 * served to. The marks U+200E and U+200F stay: they only place neutral characters, and
 * right-to-left writing needs them.
 */
const REORDERING = /[\u202A-\u202E\u2066-\u2069]/g;

/** `text` as the page shows text a file supplies: each reordering character as U+FFFD. */
export function shownText(text) {
  return typeof text === 'string' ? text.replace(REORDERING, '\uFFFD') : text;
}

/** How many reordering characters `text` holds (the editor, which cannot mark them, says so). */
export function reorderingCount(text) {
  return typeof text === 'string' ? (text.match(REORDERING) || []).length : 0;
}

function normalize(family) {
  return (raw) => {
    const row = family.row(raw);
    row.title = shownText(row.title);
    row.description = shownText(row.description);
    row.stamp = family.stampOfRow(row);
    row.search = `${row.key}\n${row.title}\n${row.description}`.toLowerCase();
    return row;
  };
}

/** Rows matching every word of the query (case-insensitive, on id, title and description). */
export function filterRows(rows, query) {
  const words = query.toLowerCase().split(/\s+/).filter(Boolean);
  if (words.length === 0) return rows;
  return rows.filter((row) => words.every((word) => row.search.includes(word)));
}

// -----------------------------------------------------------------------------------------
// The store: lists of the three families, refreshed on demand and on change events
// -----------------------------------------------------------------------------------------

function createStore(host) {
  const empty = () => ({ rows: null, revision: null, error: null, loading: false });
  let state = {
    skills: empty(),
    prompts: empty(),
    agents: empty(),
    live: 'off',
    liveError: null,
    /** `up`, or `missing` while the worker's functions are not there (it stopped, it crashed). */
    worker: 'up',
    /** `connected`, or `reconnecting` while the console's own engine connection is down. */
    engine: 'connected',
    /** Counts the recoveries, so the open document reads itself again after one. */
    recoveries: 0,
    /** Files the index skips or serves with a problem (`index::status`), or null before. */
    skipped: null,
  };
  const listeners = new Set();
  const running = {};
  const again = {};
  let probe = null;
  let heartbeat = null;
  /** Unsaved drafts (the editor's text) by `<family>:<key>`, kept while the user moves around. */
  const drafts = new Map();
  /**
   * The file text each draft was started from (by the same key): a read of the document that
   * finds something else on disk means another writer changed it under the draft.
   */
  const draftBases = new Map();
  let disposed = false;

  const publish = (next) => {
    state = next;
    for (const listener of listeners) listener();
  };
  const patch = (familyKey, fields) => publish({ ...state, [familyKey]: { ...state[familyKey], ...fields } });

  /** One list call at a time per family; a change during a call asks for one more call. */
  function refresh(familyKey) {
    if (running[familyKey]) {
      again[familyKey] = true;
      return running[familyKey];
    }
    running[familyKey] = (async () => {
      do {
        again[familyKey] = false;
        const current = state[familyKey];
        if (current.rows == null) patch(familyKey, { loading: true });
        try {
          const family = FAMILIES[familyKey];
          const answer = await watched(family.list, listRequest(familyKey, current));
          if (disposed) return;
          const merged = mergeListAnswer(familyKey, state[familyKey], answer);
          if (merged.rows !== state[familyKey].rows || state[familyKey].error || state[familyKey].loading) {
            patch(familyKey, { ...merged, error: null, loading: false });
          } else {
            // Same rows: the revision is not shown, so keep it without a re-render.
            state[familyKey].revision = merged.revision;
          }
        } catch (error) {
          if (disposed) return;
          const message = errorText(error);
          if (retryWithoutDescriptions(familyKey, state[familyKey], message)) {
            // The whole list again, without descriptions (one opens a skill to read it).
            patch(familyKey, { withoutDescriptions: true, revision: null });
            again[familyKey] = true;
            continue;
          }
          patch(familyKey, { error: message, loading: false });
        }
      } while (again[familyKey] && !disposed);
    })().finally(() => {
      running[familyKey] = null;
    });
    return running[familyKey];
  }

  /** A call that tells the store what it learnt about the worker and the engine. */
  async function watched(functionId, payload) {
    try {
      const answer = await call(host, functionId, payload);
      if (state.worker !== 'up' || state.engine !== 'connected') recovered();
      return answer;
    } catch (error) {
      const failure = classifyFailure(error);
      if (failure === 'worker-missing' && !disposed) {
        if (state.worker !== 'missing') publish({ ...state, worker: 'missing' });
        startProbe();
      } else if (failure === 'disconnected' && !disposed && state.engine !== 'reconnecting') {
        publish({ ...state, engine: 'reconnecting' });
        startProbe();
      }
      throw error;
    }
  }

  /** Back: the lists catch up from the revisions they hold, the open document reads again. */
  function recovered() {
    stopProbe();
    publish({ ...state, worker: 'up', engine: 'connected', recoveries: state.recoveries + 1 });
    for (const familyKey of FAMILY_KEYS) {
      if (state[familyKey].rows != null || state[familyKey].error) refresh(familyKey);
    }
    refreshStatus();
  }

  /** While the worker is gone, asks for it every PROBE_MS until it answers. */
  function startProbe() {
    if (probe || disposed) return;
    probe = setInterval(() => {
      watched(STATUS, {}).then((status) => applyStatus(status), () => {});
    }, PROBE_MS);
  }

  function stopProbe() {
    if (probe) clearInterval(probe);
    probe = null;
  }

  function applyStatus(status) {
    if (!disposed && status && Array.isArray(status.skipped)) publish({ ...state, skipped: status.skipped });
  }

  /** The skipped files (and, as a heartbeat, whether the worker is still there). */
  function refreshStatus() {
    return watched(STATUS, {}).then(applyStatus, () => {});
  }

  let statusTimer = null;
  return {
    get: () => state,
    call: watched,
    refreshStatus,
    /** The skipped files again shortly after a change (one call for a burst of changes). */
    statusSoon() {
      if (statusTimer || disposed) return;
      statusTimer = setTimeout(() => {
        statusTimer = null;
        refreshStatus();
      }, STATUS_AFTER_CHANGE_MS);
    },
    /** Asks for the worker at once (the Retry button), rather than at the next probe. */
    retry() {
      refreshStatus();
      for (const familyKey of FAMILY_KEYS) if (state[familyKey].error) refresh(familyKey);
    },
    /** The console's connection state, from its listener: `connected` or anything else. */
    setEngine(connected) {
      if (connected && state.engine !== 'connected') recovered();
      else if (!connected && state.engine !== 'reconnecting') publish({ ...state, engine: 'reconnecting' });
    },
    /** Checks on the worker every HEARTBEAT_MS while the page is shown. */
    startHeartbeat() {
      if (!heartbeat) heartbeat = setInterval(() => {
        if (typeof document === 'undefined' || document.visibilityState !== 'hidden') refreshStatus();
      }, HEARTBEAT_MS);
      return () => {
        clearInterval(heartbeat);
        heartbeat = null;
      };
    },
    subscribe(listener) {
      listeners.add(listener);
      return () => listeners.delete(listener);
    },
    refresh,
    setLive(live, liveError = null) {
      publish({ ...state, live, liveError });
    },
    drafts,
    draftBases,
    /**
     * Keeps (or with `null` drops) a draft; the list hears of it when a key gains or loses one.
     * A new draft remembers `base`, the file text it starts from; dropping it forgets that.
     */
    setDraft(key, text, base) {
      const had = drafts.has(key);
      if (text == null) {
        drafts.delete(key);
        draftBases.delete(key);
      } else {
        drafts.set(key, text);
        if (!draftBases.has(key) && base != null) draftBases.set(key, base);
      }
      if (had !== drafts.has(key)) publish({ ...state });
    },
    dispose() {
      disposed = true;
      stopProbe();
      if (heartbeat) clearInterval(heartbeat);
      listeners.clear();
    },
  };
}

function call(host, functionId, payload) {
  return host.iii.trigger(functionId, payload, { timeoutMs: CALL_TIMEOUT_MS });
}

// -----------------------------------------------------------------------------------------
// Live updates: browser functions bound to the on-change trigger types while the page is open
// -----------------------------------------------------------------------------------------

function createLive(host, store) {
  let offs = null;
  let users = 0;

  function bind() {
    offs = [];
    try {
      for (const familyKey of FAMILY_KEYS) {
        const local = `${LIVE_FUNCTION_PREFIX}::${familyKey}`;
        offs.push(host.iii.on(local, () => {
          store.refresh(familyKey);
          store.statusSoon();
          return null;
        }));
        offs.push(
          host.iii.registerTrigger({
            type: FAMILIES[familyKey].trigger,
            function_id: `${local}::${host.iii.browserId}`,
            config: {},
          }),
        );
      }
      store.setLive('on');
    } catch (error) {
      unbind();
      store.setLive('failed', errorText(error));
    }
  }

  function unbind() {
    for (const off of (offs || []).reverse()) {
      try {
        if (typeof off === 'function') off();
      } catch {
        // The connection is already gone; the engine dropped the bindings with it.
      }
    }
    offs = null;
  }

  return {
    /** The page calls this when it mounts; the returned function when it unmounts. */
    use() {
      users += 1;
      if (users === 1) bind();
      return () => {
        users -= 1;
        if (users === 0 && offs) {
          unbind();
          store.setLive('off');
        }
      };
    },
    dispose() {
      users = 0;
      if (offs) unbind();
    },
  };
}

// -----------------------------------------------------------------------------------------
// Markdown: a small renderer to React elements. Text is never parsed as HTML (React escapes
// it), raw HTML in the source shows as text, and only http(s) links become links.
// -----------------------------------------------------------------------------------------

/** The URL when it is an absolute http(s) URL, else null. */
export function safeUrl(url) {
  const trimmed = String(url || '').trim();
  return /^https?:\/\/[^\s]+$/i.test(trimmed) ? trimmed : null;
}

// -----------------------------------------------------------------------------------------
// The server's reading rules, for the editor's instant feedback. Each is checked against the
// server by ui/vectors.json (run by the Rust tests on the real reader, and by
// tests/browser/vectors.mjs on these functions), and where the page cannot be sure (YAML beyond
// plain `key: value` lines) it says so and asks the server (`iii-directory::ui-check`).
// -----------------------------------------------------------------------------------------

/**
 * Splits `---` frontmatter from the body exactly as the server does (`doc/frontmatter.rs`):
 * the opening fence is `---` and a line ending at the very start, the closing one a line of
 * exactly `---` (nothing after the dashes, not even blanks). `front` is the text between the
 * fences as it is (a CRLF file keeps its `\r`), `null` without a closed block.
 */
export function splitFrontmatter(text) {
  const opener = text.startsWith('---\n') ? 4 : text.startsWith('---\r\n') ? 5 : 0;
  if (!opener) return { front: null, body: text };
  let from = opener - 1;
  for (;;) {
    const fence = text.indexOf('\n---', from);
    if (fence < 0) return { front: null, body: text };
    const after = fence + 4;
    let bodyStart;
    if (text[after] === '\n') bodyStart = after + 1;
    else if (text.startsWith('\r\n', after)) bodyStart = after + 2;
    else if (after === text.length || (after === text.length - 1 && text[after] === '\r')) bodyStart = text.length;
    else {
      // `----`, `--- x`, `---  `: not a fence; look further.
      from = after;
      continue;
    }
    return { front: text.slice(opener, Math.max(fence, opener)), body: text.slice(bodyStart) };
  }
}

/** Frontmatter as `[key, value]` pairs for display (a value keeps its indented or list lines). */
export function frontmatterPairs(front) {
  const pairs = [];
  for (const line of front.replace(/\r$/, '').split(/\r?\n/)) {
    const key = /^([A-Za-z0-9_][A-Za-z0-9_.-]*):(?:\s+(.*)|\s*)$/.exec(line);
    if (key) pairs.push([key[1], key[2] || '']);
    else if (pairs.length > 0 && line.trim()) {
      const last = pairs[pairs.length - 1];
      last[1] = last[1] ? `${last[1]}\n${line.trim()}` : line.trim();
    }
  }
  return pairs;
}

/** The frontmatter keys the server reads whose value is a string. */
const STRING_KEYS = new Set(['title', 'name', 'type', 'function_id', 'description', 'logo', 'model', 'reasoning_effort', 'icon', 'color', 'extends']);
const PLAIN_KEY = /^[A-Za-z0-9_][A-Za-z0-9_-]*$/;

/**
 * Whether `value` (already trimmed) is a YAML plain scalar that every YAML reader takes as the
 * same string: no indicator at its start, no `: ` or ` #` inside, nothing that reads as a
 * number, a boolean or null.
 */
export function plainScalar(value) {
  if (!value) return false;
  if (/^[[\]{}"'|>&*!%@`#,]/.test(value)) return false;
  if (/^[-?:](\s|$)/.test(value)) return false;
  if (/:(\s|$)|\s#|\t/.test(value)) return false;
  if (/^[-+.]?\d/.test(value) || /^\.(inf|nan)$/i.test(value)) return false;
  if (/^(true|false|yes|no|on|off|y|n|null|~)$/i.test(value)) return false;
  return true;
}

/**
 * A double-quoted YAML scalar that is also a JSON string (escapes both read alike: `\"`, `\\`,
 * `\n`, `\t`, `\uXXXX`…): its text, else null.
 */
export function doubleQuoted(value) {
  if (!/^"(?:[^"\\\u0000-\u001f]|\\["\\/bfnrt]|\\u[0-9a-fA-F]{4})*"$/.test(value)) return null;
  try {
    return JSON.parse(value);
  } catch {
    return null;
  }
}

/** A string as a YAML scalar: plain when that reads back the same, else double-quoted. */
export function yamlScalar(value) {
  return plainScalar(value) && value === value.trim() ? value : JSON.stringify(value);
}

/**
 * `text` with one frontmatter key set to `value` (a string, a list of strings, or empty to
 * remove the key), every other byte as it was: the other keys, their order, the line endings,
 * the body. A text without a block gets one.
 */
export function withFrontmatterField(text, key, value) {
  const { front, body } = splitFrontmatter(text);
  const eol = /^---\r\n/.test(text) || (front == null && text.includes('\r\n')) ? '\r\n' : '\n';
  const lines = front ? front.replace(/\r$/, '').split(/\r?\n/) : [];
  let start = lines.findIndex((line) => line.startsWith(`${key}:`) && /^[^:]*:( |$)/.test(line));
  let end = start + 1;
  if (start >= 0) while (end < lines.length && /^( |- |-$)/.test(lines[end])) end += 1;
  const empty = value == null || (Array.isArray(value) ? value.length === 0 : String(value).trim() === '');
  const rendered = empty
    ? []
    : Array.isArray(value)
      ? [`${key}:`, ...value.map((item) => `  - ${yamlScalar(item)}`)]
      : [`${key}: ${yamlScalar(String(value).trim())}`];
  if (start >= 0) lines.splice(start, end - start, ...rendered);
  else lines.push(...rendered);
  const block = lines.length ? lines.join(eol) + eol : '';
  if (front == null) return `---${eol}${block}---${eol}${text}`;
  const opener = text.startsWith('---\r\n') ? '---\r\n' : '---\n';
  const closing = text.slice(0, text.length - body.length);
  const tail = closing.slice(closing.lastIndexOf('---') + 3);
  return `${opener}${block}---${tail}${body}`;
}

/**
 * Reads a frontmatter block made only of plain `key: value` lines (and `- item` lists under an
 * empty key): `{fields, order}` where `fields` maps each key to its string (or list), or `null`
 * when the block holds anything else (quotes, flow collections, block scalars, continuation
 * lines, numbers, repeated keys, tabs…): there the page does not guess and asks the server.
 */
export function plainFrontmatter(front) {
  const fields = {};
  const order = [];
  let listKey = null;
  const lines = front.replace(/\r$/, '').split(/\r?\n/);
  for (const line of lines) {
    if (/^ *$/.test(line) || /^ *#/.test(line)) continue;
    const item = /^( *)- (.*)$/.exec(line);
    if (item) {
      const value = serverTrim(item[2]);
      const entry = doubleQuoted(value) ?? (plainScalar(value) ? value : null);
      if (listKey == null || entry == null) return null;
      if (!Array.isArray(fields[listKey])) fields[listKey] = [];
      fields[listKey].push(entry);
      continue;
    }
    const pair = /^([^\s:][^:]*?):(?: (.*)|)$/.exec(line);
    if (!pair || !PLAIN_KEY.test(pair[1]) || line.includes('\t')) return null;
    const key = pair[1];
    if (Object.prototype.hasOwnProperty.call(fields, key)) return null;
    const value = serverTrim(pair[2] || '');
    order.push(key);
    if (value === '') {
      fields[key] = null;
      listKey = key;
      continue;
    }
    listKey = null;
    const quoted = doubleQuoted(value);
    if (quoted != null) fields[key] = quoted;
    else if (plainScalar(value)) fields[key] = value;
    else return null;
  }
  // The shapes the server requires: strings where it reads strings, a list for `skills`.
  for (const key of order) {
    const value = fields[key];
    if (STRING_KEYS.has(key) && Array.isArray(value)) return null;
    if (key === 'skills' && typeof value === 'string') return null;
    if (key === 'disable-model-invocation' && value != null) return null;
  }
  return { fields, order };
}

const MIN_FENCE = 3;

/**
 * White space as the server trims it (Rust's `char::is_whitespace`, Unicode White_Space).
 * JavaScript's `trim` differs in two characters: U+0085 is white space to the server, U+FEFF is
 * not (ui/vectors.json holds both).
 */
const SERVER_SPACE = /[\t-\r \u0085\u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]/;

function serverTrimStart(text) {
  let start = 0;
  while (start < text.length && SERVER_SPACE.test(text[start])) start += 1;
  return text.slice(start);
}

function serverTrimEnd(text) {
  let end = text.length;
  while (end > 0 && SERVER_SPACE.test(text[end - 1])) end -= 1;
  return text.slice(0, end);
}

const serverTrim = (text) => serverTrimEnd(serverTrimStart(text));

/** One body line for the title and description rules (`doc/markdown.rs`). */
function classifyLine(raw, state) {
  const start = serverTrimStart(raw);
  const trimmed = serverTrimEnd(start);
  if (state.fence) {
    const chars = [...trimmed];
    if (chars.length >= state.fence.len && chars.every((c) => c === state.fence.marker)) state.fence = null;
    return { kind: 'code' };
  }
  const marker = start[0] === '`' || start[0] === '~' ? start[0] : null;
  if (marker) {
    let len = 0;
    while (start[len] === marker) len += 1;
    if (len >= MIN_FENCE && !(marker === '`' && start.slice(len).includes('`'))) {
      state.fence = { marker, len };
      return { kind: 'code' };
    }
  }
  if (!trimmed) return { kind: 'blank' };
  if (start.startsWith('#')) {
    const rest = start.slice(1);
    const text = rest.startsWith(' ') ? serverTrim(rest.slice(1)) : '';
    return { kind: 'heading', text: text || null };
  }
  if (trimmed.startsWith('>')) return { kind: 'quote' };
  if (state.afterText) {
    if (/^=+$/.test(trimmed)) return { kind: 'underline', levelOne: true };
    if (/^-+$/.test(trimmed)) return { kind: 'underline', levelOne: false };
  }
  return { kind: 'text', text: trimmed };
}

function bodyLines(body) {
  const raws = body.split('\n');
  if (raws.length && raws[raws.length - 1] === '') raws.pop();
  const state = { fence: null, afterText: false };
  return raws.map((raw) => {
    const line = classifyLine(raw.endsWith('\r') ? raw.slice(0, -1) : raw, state);
    state.afterText = line.kind === 'text';
    return line;
  });
}

/** A body's title (its first `# ` heading, or a `===` setext heading) and description. */
export function titleAndDescription(body) {
  const lines = bodyLines(body);
  let title = null;
  let run = [];
  for (const line of lines) {
    if (line.kind === 'heading' && line.text) {
      title = line.text;
      break;
    }
    if (line.kind === 'underline' && line.levelOne) {
      title = run.join(' ');
      break;
    }
    if (line.kind === 'text') run.push(line.text);
    else run = [];
  }
  const collected = [];
  for (const line of lines) {
    if (line.kind === 'text') collected.push(line.text);
    else if (line.kind === 'underline') collected.length = 0;
    else if (collected.length) break;
  }
  return { title, description: collected.join(' ') };
}

const trimmedOrNull = (value) => (typeof value === 'string' && serverTrim(value) ? serverTrim(value) : null);

/**
 * What the server's skills list would show for a skill's text, when the page can tell:
 * `{certain, frontmatter, title, description, emptyBody}`. `certain: false` when the block is
 * more than plain lines (the server's dry run answers then).
 */
export function readSkill(text, id) {
  // A leading byte-order mark is not content (the server drops it when it decodes a file).
  const { front, body } = splitFrontmatter(text.startsWith('\ufeff') ? text.slice(1) : text);
  const emptyBody = serverTrim(body) === '';
  let fields = {};
  let frontmatter = 'absent';
  if (front != null) {
    const plain = plainFrontmatter(front);
    if (!plain) return { certain: false, frontmatter: null, title: null, description: null, emptyBody };
    fields = plain.fields;
    frontmatter = 'yaml';
  }
  const read = titleAndDescription(body);
  return {
    certain: true,
    frontmatter,
    title: trimmedOrNull(fields.title) || trimmedOrNull(fields.name) || read.title || id,
    description: trimmedOrNull(fields.description) || read.description,
    emptyBody,
  };
}

// The preview renders a file of up to 256 KiB when it opens and on every keystroke of the split
// view, so no rule here may cost more than a pass over its line: the line rules below are
// anchored and never backtrack over a run of blanks (the closing `#`s of a heading, a fence's
// info string and a table's rule line are read by hand), inline spans are bounded (INLINE),
// and lists and quotes nest at most MAX_NESTING deep (the rest of a deeper one shows as its
// text).
const FENCE_OPEN = /^ {0,3}(`{3,}|~{3,})/;
const HEADING_OPEN = /^ {0,3}(#{1,6})(?=[ \t]|$)/;
const RULE = /^ {0,3}([-*_])(?:[ \t]*\1){2,}[ \t]*$/;
const QUOTE = /^ {0,3}>[ \t]?/;
const ITEM = /^( {0,3})([-*+]|\d{1,9}[.)])(?:[ \t]+(.*)|[ \t]*$)/;
const TABLE_CELL_RULE = /^[ \t]*:?-+:?[ \t]*$/;
const MAX_NESTING = 8;

const isBlank = (c) => c === ' ' || c === '\t';

/** `line` without the spaces and tabs at its end. */
function trimBlanksEnd(line) {
  let end = line.length;
  while (end > 0 && isBlank(line[end - 1])) end -= 1;
  return line.slice(0, end);
}

/** A fenced code block's opening line: `{marker, lang}`, or null (no backtick after the marker). */
function fenceOf(line) {
  const open = FENCE_OPEN.exec(line);
  if (!open) return null;
  const rest = line.slice(open[0].length);
  if (rest.includes('`')) return null;
  return { marker: open[1], lang: /^[ \t]*([^`\s]*)/.exec(rest)[1] };
}

/** An ATX heading: `{level, text}` without its closing `#`s, or null. */
function headingOf(line) {
  const open = HEADING_OPEN.exec(line);
  if (!open) return null;
  const rest = line.slice(open[0].length);
  if (/[\u2028\u2029]/.test(rest)) return null;
  let start = 0;
  while (start < rest.length && isBlank(rest[start])) start += 1;
  let text = trimBlanksEnd(rest.slice(start));
  let hashes = text.length;
  while (hashes > 0 && text[hashes - 1] === '#') hashes -= 1;
  if (hashes < text.length && hashes > 0 && isBlank(text[hashes - 1])) text = trimBlanksEnd(text.slice(0, hashes));
  return { level: open[1].length, text };
}

/** A table's rule line (`| --- | :-: |`): cells of dashes, each with an optional colon either side. */
function isTableRule(line) {
  let start = 0;
  while (start < line.length && isBlank(line[start])) start += 1;
  let text = trimBlanksEnd(line.slice(start));
  if (text.startsWith('|')) text = text.slice(1);
  if (text.endsWith('|')) text = text.slice(0, -1);
  return text.split('|').every((cell) => TABLE_CELL_RULE.test(cell));
}

function startsBlock(line) {
  return fenceOf(line) != null || headingOf(line) != null || RULE.test(line) || QUOTE.test(line) || ITEM.test(line);
}

/** Markdown text to a list of block descriptions (pure; rendered by `renderBlocks`). */
export function parseBlocks(text, depth = 0) {
  if (depth > MAX_NESTING) return text.trim() ? [{ type: 'paragraph', text: text.trim() }] : [];
  const lines = text.replace(/\r\n?/g, '\n').split('\n');
  const blocks = [];
  let i = 0;
  while (i < lines.length) {
    const line = lines[i];
    if (!line.trim()) {
      i += 1;
      continue;
    }
    const fence = fenceOf(line);
    if (fence) {
      const { marker } = fence;
      const body = [];
      i += 1;
      while (i < lines.length && !new RegExp(`^ {0,3}${marker[0]}{${marker.length},}[ \\t]*$`).test(lines[i])) {
        body.push(lines[i]);
        i += 1;
      }
      i += 1;
      blocks.push({ type: 'code', lang: fence.lang, text: body.join('\n') });
      continue;
    }
    const heading = headingOf(line);
    if (heading) {
      blocks.push({ type: 'heading', level: heading.level, text: heading.text });
      i += 1;
      continue;
    }
    if (RULE.test(line)) {
      blocks.push({ type: 'rule' });
      i += 1;
      continue;
    }
    if (QUOTE.test(line)) {
      const inner = [];
      while (i < lines.length && lines[i].trim() && (QUOTE.test(lines[i]) || !startsBlock(lines[i]))) {
        inner.push(lines[i].replace(QUOTE, ''));
        i += 1;
      }
      blocks.push({ type: 'quote', blocks: parseBlocks(inner.join('\n'), depth + 1) });
      continue;
    }
    if (ITEM.test(line)) {
      const list = parseList(lines, i, depth);
      blocks.push(list.block);
      i = list.next;
      continue;
    }
    if (line.includes('|') && i + 1 < lines.length && isTableRule(lines[i + 1]) && lines[i + 1].includes('-')) {
      const table = parseTable(lines, i);
      blocks.push(table.block);
      i = table.next;
      continue;
    }
    const para = [];
    while (i < lines.length && lines[i].trim() && (para.length === 0 || !startsBlock(lines[i]))) {
      para.push(lines[i].trim());
      i += 1;
    }
    blocks.push({ type: 'paragraph', text: para.join('\n') });
  }
  return blocks;
}

function parseList(lines, start, depth) {
  const first = ITEM.exec(lines[start]);
  const ordered = /\d/.test(first[2]);
  const startNumber = ordered ? parseInt(first[2], 10) : 1;
  const items = [];
  let i = start;
  while (i < lines.length) {
    const item = ITEM.exec(lines[i]);
    if (!item || /\d/.test(item[2]) !== ordered) break;
    const indent = item[1].length + item[2].length + 1;
    const body = [item[3] || ''];
    i += 1;
    while (i < lines.length) {
      const next = lines[i];
      if (!next.trim()) {
        // A blank line ends the item unless content indented under it follows.
        const after = lines[i + 1];
        if (after !== undefined && after.trim() && after.search(/\S/) >= indent) {
          body.push('');
          i += 1;
          continue;
        }
        break;
      }
      if (ITEM.test(next) && next.search(/\S/) < indent) break;
      if (next.search(/\S/) < 2 && startsBlock(next)) break;
      body.push(next.slice(Math.min(indent, next.search(/\S/))));
      i += 1;
    }
    items.push(parseBlocks(body.join('\n'), depth + 1));
    while (i < lines.length && !lines[i].trim() && i + 1 < lines.length && ITEM.test(lines[i + 1])) i += 1;
  }
  return { block: { type: 'list', ordered, start: startNumber, items }, next: i };
}

function splitRow(line) {
  let text = line.trim();
  if (text.startsWith('|')) text = text.slice(1);
  if (text.endsWith('|') && !text.endsWith('\\|')) text = text.slice(0, -1);
  const cells = [];
  let cell = '';
  for (let i = 0; i < text.length; i += 1) {
    if (text[i] === '\\' && text[i + 1] === '|') {
      cell += '|';
      i += 1;
    } else if (text[i] === '|') {
      cells.push(cell.trim());
      cell = '';
    } else cell += text[i];
  }
  cells.push(cell.trim());
  return cells;
}

function parseTable(lines, start) {
  const head = splitRow(lines[start]);
  const align = splitRow(lines[start + 1]).map((spec) =>
    spec.startsWith(':') && spec.endsWith(':') ? 'center' : spec.endsWith(':') ? 'right' : null,
  );
  const rows = [];
  let i = start + 2;
  while (i < lines.length && lines[i].trim() && lines[i].includes('|')) {
    rows.push(splitRow(lines[i]));
    i += 1;
  }
  return { block: { type: 'table', head, align, rows }, next: i };
}

/**
 * Inline syntax, one alternative per group set: 1–2 code span, 3–5 link or image (label, URL
 * with one level of balanced parentheses), 6 autolink, 7–8 strong, 9–10 emphasis,
 * 11 strikethrough, 12 backslash escape, 13 hard line break. A span reaches at most 1,000
 * characters from its opener (and the blanks around a link's URL and title 32), a link's label
 * holds no unescaped `[`, and a hard break's spaces are tried from the first of them only: an
 * opener without a closer costs what it may reach, not the rest of the paragraph (a paragraph
 * of such openers was quadratic).
 */
const INLINE =
  /(`+)([\s\S]{0,1000}?[^`])\1(?!`)|(!?)\[((?:\\.|[^[\]\\]){0,1000})\]\(\s{0,32}<?((?:[^\s()<>]|\([^\s()<>]{0,1000}\)){0,1000})>?(?:\s{1,32}(?:"[^"]{0,1000}"|'[^']{0,1000}'))?\s{0,32}\)|<(https?:\/\/[^\s>]{1,1000})>|(\*\*|__)(?=\S)([\s\S]{0,1000}?\S)\7|(\*|_)(?=[^\s*_])([\s\S]{0,1000}?[^\s\\])\9|~~(?=\S)([\s\S]{0,1000}?\S)~~|\\([!-/:-@[-`{-~])|((?<! ) {2,}|\\)\n/g;

/** Inline markdown to React children. */
export function renderInline(text, keyPrefix = 'i') {
  const out = [];
  let last = 0;
  let n = 0;
  const key = () => `${keyPrefix}.${(n += 1)}`;
  const regex = new RegExp(INLINE.source, 'g');
  let m;
  while ((m = regex.exec(text)) !== null) {
    const at = m.index;
    // `_` emphasis only between word boundaries, so snake_case stays text.
    const underscored = m[7] === '__' || m[9] === '_';
    if (underscored && (/\w/.test(text[at - 1] || '') || /\w/.test(text[regex.lastIndex] || ''))) {
      regex.lastIndex = at + 1;
      continue;
    }
    if (at > last) out.push(text.slice(last, at));
    if (m[1] !== undefined) {
      out.push(h('code', { key: key() }, m[2].replace(/^ (.*) $/, '$1')));
    } else if (m[4] !== undefined) {
      const image = m[3] === '!';
      const url = safeUrl(m[5]);
      const children = renderInline(m[4] || (image ? m[5] : ''), `${keyPrefix}.${n}`);
      out.push(
        url
          ? h('a', { key: key(), href: url, target: '_blank', rel: 'noopener noreferrer nofollow' }, children)
          : h('span', { key: key(), className: 'dir-md-nolink', title: m[5] }, children),
      );
    } else if (m[6] !== undefined) {
      out.push(h('a', { key: key(), href: m[6], target: '_blank', rel: 'noopener noreferrer nofollow' }, m[6]));
    } else if (m[8] !== undefined) {
      out.push(h('strong', { key: key() }, renderInline(m[8], `${keyPrefix}.${n}`)));
    } else if (m[10] !== undefined) {
      out.push(h('em', { key: key() }, renderInline(m[10], `${keyPrefix}.${n}`)));
    } else if (m[11] !== undefined) {
      out.push(h('del', { key: key() }, renderInline(m[11], `${keyPrefix}.${n}`)));
    } else if (m[12] !== undefined) {
      out.push(m[12]);
    } else if (m[13] !== undefined) {
      out.push(h('br', { key: key() }));
    }
    last = regex.lastIndex;
  }
  if (last < text.length) out.push(text.slice(last));
  return out;
}

function renderBlocks(blocks, keyPrefix = 'b') {
  return blocks.map((block, index) => {
    const key = `${keyPrefix}.${index}`;
    switch (block.type) {
      case 'heading':
        return h(`h${block.level}`, { key }, renderInline(block.text, key));
      case 'paragraph':
        return h('p', { key }, renderInline(block.text, key));
      case 'code':
        return h('pre', { key, className: 'dir-md-code', 'data-lang': block.lang || undefined }, h('code', null, block.text));
      case 'rule':
        return h('hr', { key });
      case 'quote':
        return h('blockquote', { key }, renderBlocks(block.blocks, key));
      case 'list':
        return h(
          block.ordered ? 'ol' : 'ul',
          { key, start: block.ordered && block.start !== 1 ? block.start : undefined },
          block.items.map((item, n) => h('li', { key: n }, renderListItem(item, `${key}.${n}`))),
        );
      case 'table':
        return h(
          'div',
          { key, className: 'dir-md-table' },
          h(
            'table',
            null,
            h('thead', null, h('tr', null, block.head.map((cell, n) => h('th', { key: n, style: cellStyle(block.align[n]) }, renderInline(cell, `${key}.h${n}`))))),
            h(
              'tbody',
              null,
              block.rows.map((row, r) =>
                h('tr', { key: r }, block.head.map((_, n) => h('td', { key: n, style: cellStyle(block.align[n]) }, renderInline(row[n] || '', `${key}.${r}.${n}`)))),
              ),
            ),
          ),
        );
      default:
        return null;
    }
  });
}

function cellStyle(align) {
  return align ? { textAlign: align } : undefined;
}

/** A list item whose only block is a paragraph renders without the paragraph (tight list). */
function renderListItem(blocks, key) {
  if (blocks.length === 1 && blocks[0].type === 'paragraph') return renderInline(blocks[0].text, key);
  return renderBlocks(blocks, key);
}

/** A body's blocks without a first level-1 heading that repeats `title` (shown in the header). */
export function withoutRepeatedTitle(blocks, title) {
  const first = blocks[0];
  if (title && first && first.type === 'heading' && first.level === 1 && first.text.trim() === title.trim()) return blocks.slice(1);
  return blocks;
}

function Markdown({ text, title = null }) {
  const blocks = useMemo(() => withoutRepeatedTitle(parseBlocks(shownText(text)), title), [text, title]);
  return h('div', { className: 'dir-md' }, renderBlocks(blocks));
}

// -----------------------------------------------------------------------------------------
// Small formatting helpers
// -----------------------------------------------------------------------------------------

function formatBytes(bytes) {
  if (bytes == null) return '';
  if (bytes < 1024) return `${bytes} B`;
  if (bytes < 1024 * 1024) return `${(bytes / 1024).toFixed(1)} KB`;
  return `${(bytes / 1024 / 1024).toFixed(1)} MB`;
}

/** `2026-11-30T16:13:04.5+00:00` → `2026-11-30 16:13` (UTC, as the worker reports it). */
function formatModified(modified) {
  if (!modified) return 'bundled';
  return modified.slice(0, 16).replace('T', ' ');
}

const numberFormat = new Intl.NumberFormat('en');

// -----------------------------------------------------------------------------------------
// The list
// -----------------------------------------------------------------------------------------

function useElementSize(ref) {
  const [size, setSize] = useState({ width: 0, height: 0 });
  useLayoutEffect(() => {
    const element = ref.current;
    if (!element) return undefined;
    const measure = () => setSize({ width: element.clientWidth, height: element.clientHeight });
    measure();
    if (typeof ResizeObserver !== 'function') return undefined;
    const observer = new ResizeObserver(measure);
    observer.observe(element);
    return () => observer.disconnect();
  }, [ref]);
  return size;
}

/**
 * The problems the page knows for a family: `{byKey: Map(key → [sentence]), orphans: [row]}`.
 * A row's come from its own answer (an agent profile's broken `extends`) and from the files
 * the index skips or serves with a problem (`index::status`, each named by family and id);
 * a skipped file that is no row of the list becomes a row of its own (`orphans`), shown in
 * the problems filter with its path and reason.
 */
export function familyProblems(familyKey, rows, skipped) {
  const byKey = new Map();
  const add = (key, sentence) => {
    if (!byKey.has(key)) byKey.set(key, []);
    byKey.get(key).push(sentence);
  };
  const keys = new Set((rows || []).map((row) => row.key));
  for (const row of rows || []) {
    if (row.inheritanceError) add(row.key, `broken extends: ${row.inheritanceError}`);
  }
  const orphans = [];
  const event = FAMILIES[familyKey].event;
  for (const entry of skipped || []) {
    const mine = entry.family === event || (entry.family == null && familyKey === 'skills');
    if (!mine) continue;
    const id = entry.id || null;
    const shown = id && familyKey === 'skills' ? FAMILIES.skills.displayKey(id) : id;
    // Its own id first: `dup/index` is a row of its own beside `dup`, and is shown as `dup`
    // only when no `dup` exists.
    const key = id && keys.has(id) ? id : shown && keys.has(shown) ? shown : null;
    if (key) {
      add(key, entry.reason);
      continue;
    }
    const name = String(entry.path).split('/').pop();
    orphans.push({
      key: `skipped:${entry.path}`,
      title: id || name,
      description: entry.reason,
      bytes: null,
      modified: '',
      tag: 'skipped',
      skipped: entry,
      stamp: '',
      search: `${id || ''}\n${entry.path}\n${entry.reason}`.toLowerCase(),
    });
    add(`skipped:${entry.path}`, entry.reason);
  }
  return { byKey, orphans };
}

/**
 * Only the rows in view (plus a margin) are in the document, whatever the list's length. The
 * arrow keys open the row they move to beside the document (`openOnMove`); in a narrow page,
 * where an open document takes the list's place, they move a highlight (`active`, starting at
 * `initialActive`) and Enter opens it. `autoFocus` takes the keyboard on mount (back from a
 * document in a narrow page).
 */
function VirtualList({ rows, selectedKey, dirtyKeys, problems, onSelect, showSize, resetToken, scrollMemory, openOnMove = true, initialActive = null, autoFocus = false }) {
  const scroller = useRef(null);
  const { height } = useElementSize(scroller);
  const [scrollTop, setScrollTop] = useState(0);
  const [activeKey, setActiveKey] = useState(initialActive);
  const cursorKey = openOnMove ? selectedKey : activeKey;
  useLayoutEffect(() => {
    if (autoFocus && scroller.current) scroller.current.focus({ preventScroll: true });
  }, []); // eslint-disable-line react-hooks/exhaustive-deps

  // A new filter shows its first rows, or keeps the open document's row in view. A list shown
  // again (back from a document in a narrow page, another tab) is where it was left.
  const latest = useRef({ rows, selectedKey });
  latest.current = { rows, selectedKey };
  const remembered = useRef(scrollMemory && scrollMemory.token === resetToken ? scrollMemory.top : null);
  useLayoutEffect(() => {
    const element = scroller.current;
    const { rows: current, selectedKey: key } = latest.current;
    const at = key == null ? -1 : current.findIndex((row) => row.key === key);
    const view = element ? element.clientHeight : 0;
    let top = at < 0 ? 0 : Math.max(0, at * ROW_HEIGHT - Math.floor(view / 2));
    if (remembered.current != null) {
      top = remembered.current;
      remembered.current = null;
    }
    if (element) element.scrollTop = top;
    setScrollTop(element ? element.scrollTop : 0);
  }, [resetToken]);

  const first = Math.max(0, Math.floor(scrollTop / ROW_HEIGHT) - OVERSCAN);
  const last = Math.min(rows.length, Math.ceil((scrollTop + (height || 600)) / ROW_HEIGHT) + OVERSCAN);

  const move = (delta) => {
    if (rows.length === 0) return;
    const element = scroller.current;
    const at = rows.findIndex((row) => row.key === cursorKey);
    // With nothing highlighted yet, a narrow page's list starts from the first row in view.
    const inView = openOnMove || !element ? 0 : Math.ceil(element.scrollTop / ROW_HEIGHT);
    const next = Math.max(0, Math.min(rows.length - 1, at < 0 ? inView : at + delta));
    if (openOnMove) onSelect(rows[next].key);
    else setActiveKey(rows[next].key);
    if (element) {
      const top = next * ROW_HEIGHT;
      if (top < element.scrollTop) element.scrollTop = top;
      else if (top + ROW_HEIGHT > element.scrollTop + element.clientHeight) element.scrollTop = top + ROW_HEIGHT - element.clientHeight;
    }
  };

  const onKeyDown = (event) => {
    const step = { ArrowDown: 1, ArrowUp: -1, PageDown: 10, PageUp: -10 }[event.key];
    if (step) {
      event.preventDefault();
      move(step);
    } else if (event.key === 'Enter' && !openOnMove && activeKey != null && rows.some((row) => row.key === activeKey)) {
      event.preventDefault();
      onSelect(activeKey);
    }
  };

  const cursorIndex = cursorKey == null ? -1 : rows.findIndex((row) => row.key === cursorKey);
  const visible = [];
  for (let index = first; index < last; index += 1) {
    const row = rows[index];
    const selected = row.key === selectedKey;
    const active = !openOnMove && row.key === activeKey;
    visible.push(
      h(
        'div',
        {
          key: row.key,
          id: `dir-option-${index}`,
          className: `dir-row${selected ? ' dir-row--selected' : ''}${active ? ' dir-row--active' : ''}${problems.has(row.key) ? ' dir-row--problem' : ''}`,
          role: 'option',
          'aria-selected': selected,
          'data-key': row.key,
          style: { transform: `translateY(${index * ROW_HEIGHT}px)` },
          onClick: () => onSelect(row.key),
        },
        h(
          'span',
          { className: 'dir-cell dir-cell--id', title: row.key },
          dirtyKeys.has(row.key) ? h('span', { className: 'dir-dot', title: 'unsaved draft' }) : null,
          problems.has(row.key) ? h('span', { className: 'dir-marker', role: 'img', 'aria-label': 'has problems', title: problems.get(row.key).join('\n') }, '!') : null,
          row.skipped ? row.skipped.path.split('/').slice(-2).join('/') : row.key,
        ),
        h('span', { className: 'dir-cell dir-cell--title', title: row.title }, row.title),
        h('span', { className: 'dir-cell dir-cell--description', title: row.description }, row.description),
        showSize ? h('span', { className: 'dir-cell dir-cell--size' }, formatBytes(row.bytes)) : null,
        h('span', { className: 'dir-cell dir-cell--modified', title: row.modified }, row.skipped ? 'skipped' : formatModified(row.modified)),
      ),
    );
  }

  return h(
    'div',
    {
      className: 'dir-list',
      ref: scroller,
      role: 'listbox',
      tabIndex: 0,
      'aria-label': 'Documents',
      'aria-activedescendant': cursorIndex >= first && cursorIndex < last ? `dir-option-${cursorIndex}` : undefined,
      onScroll: (event) => {
        setScrollTop(event.currentTarget.scrollTop);
        if (scrollMemory) {
          scrollMemory.top = event.currentTarget.scrollTop;
          scrollMemory.token = resetToken;
        }
      },
      onKeyDown,
    },
    h('div', { className: 'dir-list-space', style: { height: rows.length * ROW_HEIGHT } }, visible),
  );
}

function ListPane({ familyKey, list, skipped, selectedKey, dirtyKeys, onSelect, onNew, onRetry, onProblems, view, onView, scrollMemory, narrow, lastOpened, returning }) {
  const family = FAMILIES[familyKey];
  // The filter lives with the page, not with this pane: a narrow page takes the list away while
  // a document is open, and "← List" must bring back the list as it was left.
  const query = view.query || '';
  const problemsOnly = !!view.problemsOnly;
  const setQuery = (value) => onView({ query: value });
  const setProblemsOnly = (value) => onView({ problemsOnly: value });
  const problems = useMemo(() => familyProblems(familyKey, list.rows, skipped), [familyKey, list.rows, skipped]);
  const all = list.rows || [];
  const rows = useMemo(
    () => (problemsOnly ? all.filter((row) => problems.byKey.has(row.key)).concat(problems.orphans) : all),
    [problemsOnly, all, problems],
  );
  // Filtering 10,000 rows takes a few milliseconds, so it runs in the keystroke's own frame
  // (a deferred filter, useDeferredValue, costs a second frame before the list repaints).
  const shownQuery = query;
  const filtered = useMemo(() => filterRows(rows, shownQuery), [rows, shownQuery]);
  const showSize = familyKey === 'skills';

  return h(
    'section',
    { className: 'dir-pane dir-pane--list', 'aria-label': `${family.label} list` },
    h(
      'div',
      { className: 'dir-toolbar' },
      h('input', {
        className: 'dir-filter',
        type: 'search',
        placeholder: `Filter ${family.label.toLowerCase()}`,
        'aria-label': `Filter ${family.label.toLowerCase()}`,
        value: query,
        onChange: (event) => setQuery(event.target.value),
        spellCheck: false,
      }),
      h(
        'button',
        {
          type: 'button',
          className: `dir-button dir-problems${problemsOnly ? ' dir-problems--on' : ''}`,
          'aria-pressed': problemsOnly,
          title: 'Only the documents with problems, and the files the index skips',
          onClick: () => {
            // The index's skipped files, fresh, when the filter opens.
            if (!problemsOnly) onProblems();
            setProblemsOnly(!problemsOnly);
          },
        },
        `Problems ${numberFormat.format(problems.byKey.size)}`,
      ),
      h('button', { type: 'button', className: 'dir-button', onClick: onNew }, 'New'),
    ),
    h(
      'div',
      { className: 'dir-count', 'aria-live': 'polite' },
      list.loading && !list.rows
        ? 'Loading…'
        : `${numberFormat.format(filtered.length)} of ${numberFormat.format(rows.length)}${problemsOnly ? ' with problems' : ''}`,
    ),
    list.error
      ? h(
          'div',
          { className: 'dir-error dir-error--read', role: 'alert' },
          list.error,
          h('button', { type: 'button', className: 'dir-button', onClick: onRetry }, 'Retry'),
        )
      : null,
    list.withoutDescriptions
      ? h(
          'div',
          { className: 'dir-notice dir-notice--list' },
          'Descriptions are left out: the whole list is longer than the engine carries in one message. Open a skill to read it.',
        )
      : null,
    h(
      'div',
      { className: `dir-head${showSize ? '' : ' dir-head--nosize'}` },
      h('span', { className: 'dir-cell dir-cell--id' }, family.key),
      h('span', { className: 'dir-cell dir-cell--title' }, familyKey === 'agents' ? 'name' : 'title'),
      h('span', { className: 'dir-cell dir-cell--description' }, 'description'),
      showSize ? h('span', { className: 'dir-cell dir-cell--size' }, 'size') : null,
      h('span', { className: 'dir-cell dir-cell--modified' }, 'modified (UTC)'),
    ),
    h(
      'div',
      { className: `dir-list-wrap${showSize ? '' : ' dir-list-wrap--nosize'}` },
      h(VirtualList, {
        rows: filtered,
        selectedKey,
        dirtyKeys,
        problems: problems.byKey,
        onSelect: (key) => onSelect(key, key.startsWith('skipped:') ? problems.orphans.find((o) => o.key === key) : null),
        showSize,
        resetToken: `${familyKey}\n${shownQuery}\n${problemsOnly}`,
        scrollMemory,
        openOnMove: !narrow,
        initialActive: narrow ? lastOpened : null,
        autoFocus: returning,
      }),
    ),
  );
}

// -----------------------------------------------------------------------------------------
// Reading and editing one document
// -----------------------------------------------------------------------------------------

/** The `extends` chain of an agent profile from the list rows: `{chain, problem}`. */
export function extendsChain(rows, id) {
  const byKey = new Map(rows.map((row) => [row.key, row]));
  const chain = [id];
  let current = byKey.get(id);
  while (current && current.extends) {
    const parent = current.extends;
    if (chain.includes(parent)) return { chain: [...chain, parent], problem: 'loop' };
    if (chain.length > MAX_EXTENDS_HOPS) return { chain, problem: 'too deep' };
    chain.push(parent);
    current = byKey.get(parent);
    if (!current) return { chain, problem: 'unknown' };
  }
  return { chain, problem: null };
}

function Frontmatter({ front }) {
  if (front == null) return null;
  const pairs = frontmatterPairs(front);
  return h(
    'div',
    { className: 'dir-front', 'aria-label': 'Frontmatter' },
    h('div', { className: 'dir-front-label' }, 'Frontmatter'),
    pairs.length === 0
      ? h('pre', { className: 'dir-front-raw' }, shownText(front) || '(empty)')
      : h(
          'dl',
          null,
          pairs.map(([key, value], n) =>
            h(Fragment, { key: n }, h('dt', null, shownText(key)), h('dd', null, shownText(value))),
          ),
        ),
  );
}

function AgentDetails({ doc, rows }) {
  const { chain, problem } = extendsChain(rows, doc.id);
  return h(
    'div',
    { className: 'dir-agent' },
    h(
      'div',
      { className: 'dir-chain', 'aria-label': 'extends chain' },
      h('span', { className: 'dir-chain-label' }, 'Extends chain'),
      chain.map((id, n) =>
        h(
          Fragment,
          { key: n },
          n > 0 ? h('span', { className: 'dir-chain-arrow', 'aria-hidden': true }, '→') : null,
          h('span', { className: `dir-chip${n === 0 ? ' dir-chip--self' : ''}` }, id),
        ),
      ),
      problem ? h('span', { className: 'dir-chip dir-chip--warn' }, problem) : null,
    ),
    doc.inheritance_error ? h('div', { className: 'dir-warning' }, doc.inheritance_error) : null,
    h(
      'dl',
      { className: 'dir-facts' },
      h('dt', null, 'model'),
      h('dd', null, shownText(doc.model) || 'decided by the send'),
      h('dt', null, 'reasoning effort'),
      h('dd', null, doc.reasoning_effort || '—'),
      h('dt', null, 'skills'),
      h('dd', null, doc.skills && doc.skills.length ? shownText(doc.skills.join(', ')) : 'every skill'),
      doc.unknown_skills && doc.unknown_skills.length
        ? h(Fragment, null, h('dt', null, 'unknown skills'), h('dd', { className: 'dir-warn-text' }, shownText(doc.unknown_skills.join(', '))))
        : null,
    ),
    h(
      'details',
      { className: 'dir-resolved' },
      h('summary', null, 'Resolved system prompt'),
      h(Markdown, { text: doc.system_prompt || '' }),
    ),
  );
}

/**
 * Whether `text` holds an unpaired UTF-16 surrogate (pasted from a broken source): no file can
 * hold it, and a call carrying it is never answered (its JSON does not decode on the way).
 */
export function hasUnpairedSurrogate(text) {
  if (typeof text.isWellFormed === 'function') return !text.isWellFormed();
  return /[\ud800-\udbff](?![\udc00-\udfff])|(?:^|[^\ud800-\udbff])[\udc00-\udfff]/.test(text);
}

const UNPAIRED_SURROGATE =
  'The text holds a broken character (an unpaired surrogate, probably pasted from a broken source) that no file can hold. Remove it or paste it again, then save.';

/** Asks the worker how it would read `content` as the document `id` of a family. */
function dryRun(store, familyKey, id, content) {
  return store.call(UI_CHECK, { family: FAMILIES[familyKey].event, id, content });
}

/** Whether the page itself knows the server reads `text`'s frontmatter as shown. */
export function readsAsShown(text) {
  const { front } = splitFrontmatter(text);
  return front == null || plainFrontmatter(front) != null;
}

/**
 * Whether the server would read a text differently from what the page shows: its frontmatter
 * block is not YAML (the server takes only its plain lines) or is ignored (a recognised key
 * of the wrong shape or given twice).
 */
export function readsDifferently(answer) {
  return !!answer && (answer.frontmatter === 'salvaged' || answer.frontmatter === 'ignored');
}

/** The sentence for a dry run's frontmatter finding. */
function frontmatterFinding(answer) {
  if (answer.frontmatter === 'salvaged') {
    return `The frontmatter is not valid YAML (${answer.frontmatter_error}). The server reads only its plain "key: value" lines, and check lists the file.`;
  }
  if (answer.frontmatter === 'ignored') {
    return `The frontmatter is ignored: ${answer.frontmatter_error}. The server reads the body alone, and check lists the file.`;
  }
  return null;
}

/**
 * The server's reading of the editor's text, asked a moment after the last keystroke:
 * `{text, answer, error}` for the latest text asked about (`null` while nothing is asked).
 */
function useDryRun(store, familyKey, id, text) {
  const [result, setResult] = useState(null);
  useEffect(() => {
    if (text == null) {
      setResult(null);
      return undefined;
    }
    if (hasUnpairedSurrogate(text)) {
      setResult({ text, answer: null, error: UNPAIRED_SURROGATE });
      return undefined;
    }
    let live = true;
    const timer = setTimeout(() => {
      dryRun(store, familyKey, id, text).then(
        (answer) => live && setResult({ text, answer, error: null }),
        (failure) => live && setResult({ text, answer: null, error: errorText(failure) }),
      );
    }, CHECK_DEBOUNCE_MS);
    return () => {
      live = false;
      clearTimeout(timer);
    };
  }, [store, familyKey, id, text]);
  return result;
}

/**
 * Why the open document cannot be deleted (or changed), as the server would say it, or `null`. A
 * skill under an agents skills root is read-only by a rule the server owns (its roots), so the
 * page asks the dry run about the text on disk once per read instead of guessing from the path;
 * a bundled skill (no file) is read-only, and a bundled prompt or profile cannot be deleted, by
 * what the list and `get` say (an update of one writes the user's own copy).
 */
function useReadOnly(store, familyKey, id, row, doc) {
  const [refusal, setRefusal] = useState(null);
  const onDisk = familyKey === 'skills' && doc != null && doc.path !== '';
  useEffect(() => {
    setRefusal(null);
    if (!onDisk) return undefined;
    let live = true;
    dryRun(store, familyKey, id, doc.raw || '').then(
      (answer) => live && answer && answer.refused && /^D116 /.test(answer.refused) && setRefusal(withoutBusSteps(answer.refused)),
      () => {},
    );
    return () => {
      live = false;
    };
  }, [store, familyKey, id, onDisk, doc && doc.stamp]); // eslint-disable-line react-hooks/exhaustive-deps
  if (familyKey !== 'skills' && row && row.tag === 'bundled') return BUNDLED_COPY_ON_SAVE;
  if (familyKey === 'skills' && doc != null && doc.path === '') return BUNDLED_READ_ONLY;
  return onDisk ? refusal : null;
}

const BUNDLED_READ_ONLY = 'Bundled with the worker: read-only, it cannot be deleted.';
/** A bundled system prompt or agent profile: its update writes a file of the user's own. */
const BUNDLED_COPY_ON_SAVE = 'Bundled with the worker: it cannot be deleted; a save writes your own copy, which takes its place.';

/** What the server will make of the draft, under the editor. */
/** What the document pane says of a text holding `count` reordering characters. */
export function reorderingNotice(count) {
  const them = count === 1 ? 'a character that reverses' : `${count} characters that reverse`;
  return `This text holds ${them} the order in which the text around it shows (U+202A-U+202E, U+2066-U+2069): the editor hides ${count === 1 ? 'it' : 'them'}, and the list and preview show each as \uFFFD. An agent reads the text in its stored order.`;
}

function CheckStrip({ familyKey, check, text, error }) {
  if (!check || check.text !== text) return null;
  if (check.error) return null;
  const { answer } = check;
  // A refused save shows its error next to the editor already: said once.
  const refused = answer.refused && withoutBusSteps(answer.refused) !== error ? withoutBusSteps(answer.refused) : null;
  const finding = frontmatterFinding(answer);
  const shows = answer.title != null
    ? h(Fragment, null, 'The list will show ', h('strong', null, shownText(answer.title)), answer.description ? ` — ${shownText(answer.description)}` : '')
    : null;
  return h(
    'div',
    { className: `dir-check${finding || answer.refused ? ' dir-check--problem' : ''}`, 'aria-live': 'polite', 'data-family': familyKey },
    refused ? h('div', { className: 'dir-check-refused' }, `A save would be refused: ${refused}`) : null,
    finding ? h('div', { className: 'dir-check-frontmatter' }, finding) : null,
    shows ? h('div', { className: 'dir-check-shows' }, shows) : null,
  );
}

const Preview = React.forwardRef(function Preview({ text, familyKey, doc, rows, title }, ref) {
  const { front, body } = splitFrontmatter(text);
  return h(
    'div',
    { className: 'dir-preview', ref },
    h(Frontmatter, { front }),
    familyKey === 'agents' && doc ? h(AgentDetails, { doc, rows }) : null,
    body.trim() ? h(Markdown, { text: body, title }) : h('p', { className: 'dir-muted' }, 'No body.'),
  );
});

/** Scrolls `target` to the same fraction of its height as `source` (split view). */
function followScroll(source, target) {
  if (!source || !target) return;
  const range = source.scrollHeight - source.clientHeight;
  const fraction = range > 0 ? source.scrollTop / range : 0;
  target.scrollTop = fraction * (target.scrollHeight - target.clientHeight);
}

/** The server's agent profile rules the form offers as choices (`rules/agent.rs`). */
const PROFILE_ICONS = ['agent', 'code', 'search', 'terminal', 'database', 'test', 'review', 'docs', 'design'];
const PROFILE_COLORS = ['neutral', 'blue', 'purple', 'teal', 'green', 'amber', 'rose'];
const REASONING_EFFORTS = ['minimal', 'low', 'medium', 'high'];
const SKILL_SUGGESTIONS = 8;

function Field({ label, hint, children }) {
  return h('label', { className: 'dir-field' }, h('span', { className: 'dir-field-label' }, label), children, hint ? h('span', { className: 'dir-muted dir-field-hint' }, hint) : null);
}

function Choice({ value, options, onChange, label }) {
  const known = options.includes(value) || !value;
  return h(
    'select',
    { className: 'dir-input', value: value || '', 'aria-label': label, onChange: (event) => onChange(event.target.value) },
    h('option', { value: '' }, '—'),
    known ? null : h('option', { value }, `${value} (not allowed)`),
    options.map((option) => h('option', { key: option, value: option }, option)),
  );
}

/** Skills picked from the skills list, with search; the chosen ones as removable chips. */
function SkillPicker({ value, skills, onChange }) {
  const [query, setQuery] = useState('');
  const chosen = value || [];
  const suggestions = useMemo(() => {
    if (!query.trim() || !skills) return [];
    return filterRows(skills, query).filter((row) => !chosen.includes(row.key)).slice(0, SKILL_SUGGESTIONS);
  }, [query, skills, chosen]);
  return h(
    'div',
    { className: 'dir-skill-picker' },
    h(
      'div',
      { className: 'dir-chips' },
      chosen.length === 0 ? h('span', { className: 'dir-muted' }, 'every skill (no filter)') : null,
      chosen.map((id) =>
        h(
          'span',
          { key: id, className: 'dir-chip' },
          id,
          h('button', { type: 'button', className: 'dir-chip-remove', 'aria-label': `remove ${id}`, onClick: () => onChange(chosen.filter((x) => x !== id)) }, '×'),
        ),
      ),
    ),
    h('input', {
      className: 'dir-input',
      type: 'search',
      placeholder: skills ? 'Search skills to add' : 'Loading the skills…',
      'aria-label': 'Search skills to add',
      value: query,
      spellCheck: false,
      onChange: (event) => setQuery(event.target.value),
    }),
    suggestions.length
      ? h(
          'ul',
          { className: 'dir-suggestions', role: 'listbox', 'aria-label': 'Skills' },
          suggestions.map((row) =>
            h(
              'li',
              { key: row.key },
              h(
                'button',
                {
                  type: 'button',
                  className: 'dir-suggestion',
                  'data-key': row.key,
                  onClick: () => {
                    onChange([...chosen, row.key]);
                    setQuery('');
                  },
                },
                h('code', null, row.key),
                ' ',
                h('span', { className: 'dir-muted' }, row.title),
              ),
            ),
          ),
        )
      : null,
  );
}

/**
 * An agent profile's frontmatter as fields. Each change rewrites only its own key in the text
 * (`withFrontmatterField`), so the body and every other line stay as they were; the raw text
 * stays one click away.
 */
function ProfileForm({ store, id, text, agents, onChange, onRaw }) {
  const skills = useSyncExternalStore(store.subscribe, () => store.get().skills.rows);
  useEffect(() => {
    if (skills == null) store.refresh('skills');
  }, [store, skills]);
  const { front } = splitFrontmatter(text);
  const plain = front == null ? { fields: {} } : plainFrontmatter(front);
  if (!plain) {
    return h(
      'div',
      { className: 'dir-form dir-form--off' },
      h('p', null, 'This frontmatter holds more than plain "key: value" lines (quotes, folded text, comments after values…), so the fields cannot edit it without changing more than one key.'),
      h('button', { type: 'button', className: 'dir-button', onClick: onRaw }, 'Edit the raw text'),
    );
  }
  const f = plain.fields;
  const set = (key) => (value) => onChange(withFrontmatterField(text, key, value));
  const text1 = (key, label, hint, extra = {}) =>
    h(Field, { label, hint }, h('input', { className: 'dir-input', name: key, value: f[key] || '', spellCheck: false, onChange: (event) => set(key)(event.target.value), ...extra }));
  const parents = (agents || []).map((row) => row.key).filter((key) => key !== id);
  // The chain as it will resolve once saved: this profile with the extends chosen here.
  const { chain, problem } = extendsChain(
    (agents || []).map((row) => (row.key === id ? { ...row, extends: f.extends || null } : row)),
    id,
  );
  return h(
    'div',
    { className: 'dir-form', role: 'form', 'aria-label': 'Agent profile fields' },
    text1('name', 'Name', 'required'),
    text1('description', 'Description'),
    h(
      'div',
      { className: 'dir-form-row' },
      text1('logo', 'Logo', 'one emoji, at most 16 bytes', { maxLength: 16 }),
      h(Field, { label: 'Colour' }, h(Choice, { label: 'Colour', value: f.color, options: PROFILE_COLORS, onChange: set('color') })),
      h(Field, { label: 'Icon' }, h(Choice, { label: 'Icon', value: f.icon, options: PROFILE_ICONS, onChange: set('icon') })),
    ),
    h(
      'div',
      { className: 'dir-form-row' },
      text1('model', 'Model', 'empty: decided by the send'),
      h(Field, { label: 'Reasoning effort' }, h(Choice, { label: 'Reasoning effort', value: f.reasoning_effort, options: REASONING_EFFORTS, onChange: set('reasoning_effort') })),
    ),
    h(Field, { label: 'Skills', hint: 'the skills this profile may use' }, h(SkillPicker, { value: Array.isArray(f.skills) ? f.skills : [], skills, onChange: set('skills') })),
    h(
      Field,
      { label: 'Extends' },
      h(Choice, { label: 'Extends', value: f.extends, options: parents, onChange: set('extends') }),
      h(
        'div',
        { className: 'dir-chain', 'aria-label': 'resolved chain' },
        chain.map((link, n) =>
          h(Fragment, { key: n }, n > 0 ? h('span', { className: 'dir-chain-arrow', 'aria-hidden': true }, '→') : null, h('span', { className: `dir-chip${n === 0 ? ' dir-chip--self' : ''}` }, link)),
        ),
        problem ? h('span', { className: 'dir-chip dir-chip--warn' }, problem) : null,
      ),
    ),
  );
}

function DocumentPane({ host, store, familyKey, selectedKey, row, rows, onSelect, onBack, onClose, onGone, saveRef }) {
  const family = FAMILIES[familyKey];
  const draftKey = `${familyKey}:${selectedKey}`;
  const [doc, setDoc] = useState(null);
  const [draft, setDraftState] = useState(null);
  const [mode, setMode] = useState('preview');
  const [busy, setBusy] = useState('loading');
  const [error, setError] = useState(null);
  const [notice, setNotice] = useState(null);
  const [confirmDelete, setConfirmDelete] = useState(false);
  /** A save held back because the server would read the text differently: its dry run. */
  const [ask, setAsk] = useState(null);
  /** Why the document could not be read (with a Retry). */
  const [readError, setReadError] = useState(null);
  /** The split view's preview, which follows the editor's scrolling. */
  const previewRef = useRef(null);
  const sequence = useRef(0);
  const reloadedFor = useRef(null);
  /**
   * Whether the list has shown this document since it opened. A document just created (or a
   * system prompt just renamed) is read before the list's refresh lists it: its absence until
   * then is no deletion.
   */
  const listed = useRef(false);
  if (row) listed.current = true;

  const base = doc ? doc.raw || '' : '';
  const text = draft == null ? base : draft;
  const dirty = doc != null && draft != null && draft !== base;
  const check = useDryRun(store, familyKey, selectedKey, dirty ? text : null);

  const latestDraft = useRef(null);
  const docRef = useRef(null);
  docRef.current = doc;
  const setDraft = useCallback(
    (value) => {
      latestDraft.current = value;
      setDraftState(value);
      // A new draft starts from the text on screen: the one later reads are compared with.
      store.setDraft(draftKey, value, docRef.current ? docRef.current.raw || '' : null);
    },
    [store, draftKey],
  );

  /**
   * Whether `raw`, the file as just read, is neither the kept draft nor the text the draft
   * was started from: another writer changed the file under the draft. Every read that keeps
   * a draft asks this (the page coming back to the document, a retry, the worker back), or a
   * later save would write the draft over that change without a word.
   */
  const changedUnderDraft = useCallback(
    (raw) => {
      const kept = store.drafts.get(draftKey);
      const basis = store.draftBases.get(draftKey);
      return kept != null && basis != null && kept !== raw && basis !== raw;
    },
    [store, draftKey],
  );

  /** Reads the document; `keepDraft` leaves an edit in progress alone. */
  const load = useCallback(
    async (keepDraft) => {
      const mine = (sequence.current += 1);
      // What the editor held when the read began: text typed while it is on its way is the
      // user's, and a read that started before it must not take it away.
      const draftAtStart = latestDraft.current;
      setBusy((b) => b || 'loading');
      try {
        const answer = await store.call(family.get, { [family.key]: selectedKey, raw: true });
        if (mine !== sequence.current) return;
        const loaded = { ...answer, raw: answer.raw || '' };
        loaded.stamp = family.stampOfDoc(loaded);
        setDoc(loaded);
        if (!keepDraft) {
          if (latestDraft.current === draftAtStart) setDraft(null);
          setNotice(null);
        } else if (store.drafts.get(draftKey) === loaded.raw) {
          setDraft(null);
          setNotice(null);
        } else {
          setNotice(changedUnderDraft(loaded.raw) ? 'changed' : null);
        }
        setError(null);
        setReadError(null);
      } catch (failure) {
        if (mine !== sequence.current) return;
        const text = errorText(failure);
        if (isNotFound(text)) {
          // Deleted on disk while it was not on screen (another tab shown, the page away): said
          // as the live notice says it. A draft stays on screen to be created again; with none
          // there is nothing to show, and the selection goes.
          setReadError(null);
          if (store.drafts.has(draftKey)) setNotice('deleted-dirty');
          else if (onGone) onGone(selectedKey);
          return;
        }
        setReadError(text);
      } finally {
        if (mine === sequence.current) setBusy(null);
      }
    },
    [family, selectedKey, setDraft, store, draftKey, changedUnderDraft, onGone],
  );

  // The worker came back (or the console reconnected): read the document again, keeping a
  // draft.
  const recoveries = useSyncExternalStore(store.subscribe, () => store.get().recoveries);
  const seenRecoveries = useRef(recoveries);
  useEffect(() => {
    if (recoveries === seenRecoveries.current) return;
    seenRecoveries.current = recoveries;
    load(true);
  }, [recoveries, load]);

  useEffect(() => {
    const saved = store.drafts.get(draftKey);
    latestDraft.current = saved == null ? null : saved;
    setDraftState(latestDraft.current);
    setDoc(null);
    setNotice(null);
    setError(null);
    setConfirmDelete(false);
    setBusy('loading');
    load(true);
  }, [draftKey]); // eslint-disable-line react-hooks/exhaustive-deps

  // The disk changed under the open document (another writer, an editor, git): reload a clean
  // document; keep a draft and say so.
  const seenRow = useRef(null);
  useEffect(() => {
    if (!doc || busy || rows == null) return;
    if (!row) {
      if (listed.current) setNotice(dirty ? 'deleted-dirty' : 'deleted');
      return;
    }
    // A document that resolves others (`family.resolves`) is read again when the list brings a
    // new row for it, even with its own file unchanged: a profile up its chain changed.
    const carried = family.resolves && seenRow.current != null && seenRow.current !== row;
    seenRow.current = row;
    if (row.stamp === doc.stamp && !carried) {
      if (notice === 'deleted' || notice === 'deleted-dirty') setNotice(null);
      return;
    }
    if (reloadedFor.current !== row.stamp || carried) {
      // Once per new row stamp: if the two stamps disagree for some other reason, no loop. A
      // draft stays, and the read compares the file with the text the draft started from.
      reloadedFor.current = row.stamp;
      load(dirty);
    }
  }, [row, doc && doc.stamp, busy, dirty, rows == null]); // eslint-disable-line react-hooks/exhaustive-deps

  const save = useCallback(async (confirmed) => {
    // A save may start while the last one's read-back is on its way (`loading`).
    if (!dirty || (busy && busy !== 'loading')) return;
    const content = draft;
    setAsk(null);
    // An earlier save's error is not this one's.
    setError(null);
    if (hasUnpairedSurrogate(content)) {
      setError(UNPAIRED_SURROGATE);
      return;
    }
    if (confirmed !== true && !readsAsShown(content)) {
      // The server's reading first: a text it would read differently asks before it is saved.
      // (A text of plain frontmatter lines reads the same on both sides, ui/vectors.json.)
      let answer = check && check.text === content ? check.answer : null;
      if (!answer) answer = await dryRun(store, familyKey, selectedKey, content).catch(() => null);
      if (answer && answer.refused) {
        // The server would refuse it whatever the answer: nothing to offer but the reason.
        setError(withoutBusSteps(answer.refused));
        return;
      }
      if (readsDifferently(answer)) {
        setAsk(answer);
        return;
      }
    }
    setBusy('saving');
    /** The disk's text, shown with the "changed on disk" notice; the draft stays. */
    const showChanged = (current) => {
      if (current) {
        const loaded = { ...current, raw: current.raw || '' };
        loaded.stamp = family.stampOfDoc(loaded);
        // A read already on its way must not put an older text back.
        sequence.current += 1;
        setDoc(loaded);
      }
      setNotice('changed');
    };
    try {
      // The text the draft started from: the update is sent with it as `base`, and the worker
      // writes only a file that still holds it (or holds the draft already), under the lock
      // its write takes. That is the guarantee; the read below is the fast path, which asks
      // before sending anything when the change has already landed.
      const basis = store.draftBases.has(draftKey) ? store.draftBases.get(draftKey) : base;
      // The file as it is now: another writer's change of a moment ago may not have reached
      // this page yet (its change event comes after the write). `get` reads the disk, so a
      // difference from the draft's starting text asks first. A failed read leaves the answer
      // to the update.
      const current = await store.call(family.get, { [family.key]: selectedKey, raw: true }).catch(() => null);
      if (current) {
        const raw = current.raw || '';
        if (raw !== basis && raw !== content) {
          showChanged(current);
          return;
        }
      }
      const request = { [family.key]: selectedKey, content };
      if (typeof basis === 'string') request.base = basis;
      let answer;
      try {
        answer = await store.call(family.update, request);
      } catch (failure) {
        // A write that landed between that read and the update: the worker wrote nothing, and
        // the page says so as it does when the read finds it.
        if (!errorText(failure).startsWith(`${family.changedOnDisk} `)) throw failure;
        const now = await store.call(family.get, { [family.key]: selectedKey, raw: true }).catch(() => null);
        // Without the disk's text the notice's "keep my draft" would keep the old base, and
        // every later save be refused the same way: the refusal itself is said instead.
        if (now) showChanged(now);
        else setError(errorText(failure));
        return;
      }
      const savedKey = family.renames && answer ? answer[family.key] : null;
      setDoc((current) => ({ ...current, raw: content, stamp: null }));
      // What was typed while the save was on its way stays a draft, now based on the saved text.
      if (latestDraft.current === content) setDraft(null);
      else store.draftBases.set(draftKey, content);
      setNotice(null);
      if (savedKey && savedKey !== selectedKey) onSelect(savedKey);
      else {
        // Saved once the worker answers (the file is on disk): the page says so then, and
        // reads the document back (its new stamp) without "saving…" on screen.
        setBusy('loading');
        await load(true);
      }
    } catch (failure) {
      setError(errorText(failure));
    } finally {
      setBusy(null);
    }
  }, [dirty, busy, draft, check, base, draftKey, family, familyKey, selectedKey, setDraft, load, onSelect, store]);

  // Ctrl+S reaches the page wherever its focus is (the filter, the list): DirectoryPage asks
  // the open document through this.
  useEffect(() => {
    if (!saveRef) return undefined;
    saveRef.current = save;
    return () => {
      if (saveRef.current === save) saveRef.current = null;
    };
  }, [saveRef, save]);

  const revert = () => {
    setDraft(null);
    setError(null);
    setAsk(null);
  };

  const remove = async () => {
    setBusy('deleting');
    setError(null);
    try {
      await store.call(family.remove, { [family.key]: selectedKey });
      setDraft(null);
      onSelect(null);
    } catch (failure) {
      setError(errorText(failure));
      setBusy(null);
    }
    setConfirmDelete(false);
  };

  // A read-only document's delete is refused (D116 and the like), so it is not offered.
  const readOnly = useReadOnly(store, familyKey, selectedKey, row, doc);

  const editor = h('textarea', {
    className: 'dir-editor',
    'aria-label': `${family.noun} file`,
    value: text,
    spellCheck: false,
    onChange: (event) => setDraft(event.target.value === base ? null : event.target.value),
    onScroll: mode === 'split' ? (event) => followScroll(event.currentTarget, previewRef.current) : undefined,
  });
  const shownTitle = row ? row.title : selectedKey;

  const body =
    mode === 'fields'
      ? h(ProfileForm, {
          store,
          id: selectedKey,
          text,
          agents: rows,
          onChange: (next) => setDraft(next === base ? null : next),
          onRaw: () => setMode('edit'),
        })
      : mode === 'edit'
      ? editor
      : mode === 'split'
        ? h('div', { className: 'dir-split' }, editor, h(Preview, { ref: previewRef, text, familyKey, doc, rows: rows || [], title: shownTitle }))
        : h(Preview, { text, familyKey, doc, rows: rows || [], title: shownTitle });

  return h(
    'section',
    { className: 'dir-pane dir-pane--doc', 'aria-label': `${family.noun} ${selectedKey}` },
    h(
      'div',
      { className: 'dir-doc-head' },
      onBack ? h('button', { type: 'button', className: 'dir-button dir-button--quiet', onClick: onBack }, '← List') : null,
      h(
        'div',
        { className: 'dir-doc-title' },
        h('h2', null, shownTitle),
        h('code', { className: 'dir-doc-id' }, selectedKey),
        dirty ? h('span', { className: 'dir-badge dir-badge--dirty' }, 'unsaved') : null,
        busy === 'saving' ? h('span', { className: 'dir-badge' }, 'saving…') : null,
      ),
      h(
        'div',
        { className: 'dir-modes', role: 'group', 'aria-label': 'View' },
        (familyKey === 'agents' ? ['preview', 'fields', 'edit', 'split'] : ['preview', 'edit', 'split']).map((m) =>
          h('button', { key: m, type: 'button', className: `dir-mode${mode === m ? ' dir-mode--on' : ''}`, 'aria-pressed': mode === m, onClick: () => setMode(m) }, titleOf(m)),
        ),
      ),
      onClose ? h('button', { type: 'button', className: 'dir-button dir-button--quiet dir-close', 'aria-label': 'Close the document', title: 'Close (the list takes the whole width)', onClick: onClose }, '×') : null,
    ),
    h(
      'div',
      { className: 'dir-actions' },
      h('button', { type: 'button', className: 'dir-button dir-button--primary', disabled: !dirty || (!!busy && busy !== 'loading'), onClick: () => save(), title: 'Save (Ctrl+S / ⌘S)' }, 'Save'),
      h('button', { type: 'button', className: 'dir-button', disabled: !dirty || !!busy, onClick: revert }, 'Revert'),
      confirmDelete
        ? h(
            'span',
            { className: 'dir-confirm' },
            `Delete ${selectedKey}? The file is removed.`,
            h('button', { type: 'button', className: 'dir-button dir-button--danger', onClick: remove, disabled: !!busy }, 'Delete'),
            h('button', { type: 'button', className: 'dir-button', onClick: () => setConfirmDelete(false) }, 'Cancel'),
          )
        : h('button', { type: 'button', className: 'dir-button dir-button--quiet', disabled: !!busy || !doc || readOnly != null, title: readOnly != null ? 'Cannot be deleted' : undefined, onClick: () => setConfirmDelete(true) }, 'Delete…'),
      readOnly != null ? h('span', { className: 'dir-muted dir-read-only' }, readOnly) : null,
    ),
    readError
      ? h(
          'div',
          { className: 'dir-error dir-error--read', role: 'alert' },
          readError,
          h('button', { type: 'button', className: 'dir-button', onClick: () => load(true) }, 'Retry'),
        )
      : null,
    error ? h('div', { className: 'dir-error', role: 'alert' }, error) : null,
    ask
      ? h(
          'div',
          { className: 'dir-notice dir-ask', role: 'alertdialog', 'aria-label': 'Save anyway?' },
          h('strong', null, 'The server will read this differently. '),
          frontmatterFinding(ask),
          ask.title != null ? h('span', null, ` The list will show "${shownText(ask.title)}"${ask.description ? ` — ${shownText(ask.description).replace(/\.$/, '')}` : ''}.`) : null,
          h('div', { className: 'dir-actions' },
            h('button', { type: 'button', className: 'dir-button dir-button--danger', onClick: () => save(true) }, 'Save anyway'),
            h('button', { type: 'button', className: 'dir-button', onClick: () => setAsk(null) }, 'Keep editing'),
          ),
        )
      : null,
    dirty && !ask ? h(CheckStrip, { familyKey, check, text, error }) : null,
    reorderingCount(text) ? h('div', { className: 'dir-notice dir-reordering', role: 'note' }, reorderingNotice(reorderingCount(text))) : null,
    notice === 'changed'
      ? h(
          'div',
          { className: 'dir-notice', role: 'alert' },
          h('strong', null, 'Changed on disk. '),
          'This file changed on disk while you have unsaved edits. ',
          h('button', { type: 'button', className: 'dir-button', onClick: () => load(false) }, 'Load the disk version'),
          h(
            'button',
            {
              type: 'button',
              className: 'dir-button',
              onClick: () => {
                // The draft now answers the disk's text: a save writes it without asking again.
                if (doc) store.draftBases.set(draftKey, doc.raw || '');
                setNotice(null);
              },
            },
            'Keep my draft',
          ),
        )
      : null,
    notice === 'deleted' || notice === 'deleted-dirty'
      ? h(
          'div',
          { className: 'dir-notice', role: 'alert' },
          h('strong', null, 'Deleted on disk. '),
          notice === 'deleted-dirty' ? 'Your unsaved edits are still here; create it again to keep them.' : 'This document no longer exists.',
        )
      : null,
    doc || draft != null ? h('div', { className: 'dir-doc-body' }, body) : h('div', { className: 'dir-muted dir-doc-body' }, busy === 'loading' ? 'Loading…' : ''),
  );
}

function SkippedPane({ entry, onBack }) {
  return h(
    'section',
    { className: 'dir-pane dir-pane--doc', 'aria-label': 'Skipped file' },
    onBack ? h('button', { type: 'button', className: 'dir-button dir-button--quiet', onClick: onBack }, '← List') : null,
    h('h2', null, entry.id || entry.path.split('/').pop()),
    h('div', { className: 'dir-warning' }, entry.reason),
    h(
      'dl',
      { className: 'dir-facts' },
      h('dt', null, 'path'),
      h('dd', null, h('code', null, entry.path)),
      h('dt', null, 'root'),
      h('dd', null, entry.root),
    ),
    h('p', { className: 'dir-muted' }, 'The index does not serve this file. Fix it on disk (or run iii-directory check); the list follows by itself.'),
  );
}

function CreatePane({ store, familyKey, onCreated, onCancel }) {
  const family = FAMILIES[familyKey];
  const [id, setId] = useState('');
  const [error, setError] = useState(null);
  const [busy, setBusy] = useState(false);
  const problem = id ? family.validate(id) : null;

  const create = async (event) => {
    event.preventDefault();
    if (!id || problem || busy) return;
    setBusy(true);
    setError(null);
    try {
      const answer = await store.call(family.create, { [family.key]: id, content: family.template(id) });
      onCreated(family.displayKey((answer && answer[family.key]) || id));
    } catch (failure) {
      setError(errorText(failure));
      setBusy(false);
    }
  };

  return h(
    'section',
    { className: 'dir-pane dir-pane--doc', 'aria-label': `New ${family.noun}` },
    h('h2', null, `New ${family.noun}`),
    h(
      'form',
      { className: 'dir-create', onSubmit: create },
      h('label', { htmlFor: 'dir-new-id' }, family.key),
      h('input', {
        id: 'dir-new-id',
        className: 'dir-input',
        value: id,
        autoFocus: true,
        spellCheck: false,
        'aria-invalid': !!problem,
        onChange: (event) => setId(event.target.value),
      }),
      h('div', { className: problem ? 'dir-field-error' : 'dir-muted' }, problem || family.idHint),
      h(
        'div',
        { className: 'dir-actions' },
        h('button', { type: 'submit', className: 'dir-button dir-button--primary', disabled: !id || !!problem || busy }, 'Create'),
        h('button', { type: 'button', className: 'dir-button', onClick: onCancel }, 'Cancel'),
      ),
    ),
    error ? h('div', { className: 'dir-error', role: 'alert' }, error) : null,
    h('p', { className: 'dir-muted' }, 'The new file starts from a short template; edit it after creating.'),
  );
}

// -----------------------------------------------------------------------------------------
// The page
// -----------------------------------------------------------------------------------------

// -----------------------------------------------------------------------------------------
// Bundles: what downloads landed, against the bundles lock, and their updates (plan, apply)
// -----------------------------------------------------------------------------------------

const BUNDLES = {
  list: 'directory::skills::bundles::list',
  checkUpdates: 'directory::skills::bundles::check-updates',
  planUpdate: 'directory::skills::bundles::plan-update',
  apply: 'directory::skills::bundles::apply',
};
/** What apply does with a file changed on both sides (`on_conflict`), the default first. */
const ON_CONFLICT = [
  ['merge', 'Merge', 'merged three-way where the merge is clean; otherwise your copy stays and the upstream text lands beside it as <name>.upstream'],
  ['keep-local', 'Keep mine', 'your copy stays as it is, nothing beside it'],
  ['take-upstream', 'Take upstream', 'the upstream text replaces your copy: your edits to those files are lost'],
];
/** How long the bundles view waits after a change on disk before it reads the statuses again. */
const BUNDLES_REFRESH_MS = 300;
const BUNDLE_STATES = {
  clean: 'every file as it landed',
  modified: 'files edited here',
  missing: 'files gone from disk',
  untracked: 'files here the bundle did not bring',
};

/** `registry mailer@1.2.3` or `repo <url> skills/x @ <commit>`. */
export function bundleSource(source) {
  if (!source) return '';
  if (source.kind === 'repo') {
    const commit = source.commit ? source.commit.slice(0, 12) : '?';
    return `${source.repo} ${source.folder} @ ${commit}`;
  }
  return `${source.worker}@${source.version || '?'}${source.tag ? ` (${source.tag})` : ''}`;
}

/** One check-updates answer for a bundle, as a short text: [kind, text]. */
export function updateText(entry) {
  if (!entry) return ['none', ''];
  switch (entry.state) {
    case 'current':
      return ['current', 'Up to date'];
    case 'update-available': {
      const to = entry.upstream && (entry.upstream.version || (entry.upstream.commit || '').slice(0, 12));
      return ['available', to ? `Update available: ${to}` : 'Update available'];
    }
    case 'pinned':
      return ['pinned', 'Pinned (no tag or branch to follow)'];
    default:
      return ['unknown', `Unknown: ${entry.reason || 'the source did not answer'}`];
  }
}

/**
 * What a failed plan or apply means for the person: `stale` (D336: the files or the lock moved
 * since the plan; the message carries a fresh plan, parsed here when it came whole), `expired`
 * (D337), or `other`; with the text to show.
 */
export function planFailure(error) {
  const text = errorText(error);
  if (/^D336 /.test(text)) {
    const at = text.indexOf('A fresh plan: ');
    let fresh = null;
    if (at >= 0) {
      try {
        fresh = JSON.parse(text.slice(at + 'A fresh plan: '.length));
      } catch {
        fresh = null;
      }
    }
    const said = at >= 0 ? text.slice(0, at).trim() : text;
    return { kind: 'stale', text: said, fresh };
  }
  if (/^D337 /.test(text)) return { kind: 'expired', text, fresh: null };
  return { kind: 'other', text, fresh: null };
}

/** What apply would do with one planned file under `onConflict` (a sentence for the table). */
export function plannedAction(file, onConflict) {
  const conflict = file.conflict === true;
  if (file.upstream === 'removed') {
    if (file.local === 'modified') return onConflict === 'take-upstream' ? 'removed (your edits go)' : 'kept: you edited it';
    return file.local === 'clean' || file.local === 'same' ? 'removed' : 'nothing';
  }
  if (conflict) {
    if (onConflict === 'take-upstream') return 'upstream replaces your copy';
    if (onConflict === 'keep-local') return 'your copy stays';
    return file.merge === 'clean' ? 'merged three-way (clean)' : `conflict: your copy stays, upstream lands as ${file.path}.upstream`;
  }
  if (file.local === 'modified' || file.local === 'present') {
    return onConflict === 'take-upstream' ? 'upstream replaces your copy' : 'your copy stays';
  }
  if (file.upstream === 'unchanged' && file.local === 'clean') return 'nothing';
  if (file.local === 'same') return 'already upstream';
  if (file.local === 'missing') return 'restored from upstream';
  return file.upstream === 'added' ? 'added' : 'updated';
}

function FileList({ label, names, className }) {
  if (!names || names.length === 0) return null;
  return h(
    'div',
    { className: `dir-bundle-files ${className || ''}` },
    h('span', { className: 'dir-muted' }, `${label}: `),
    names.map((name, i) => h(Fragment, { key: name }, i ? ', ' : null, h('code', null, name))),
  );
}

function BundleRow({ bundle, update, planning, onPlan }) {
  const [kind, text] = updateText(update);
  const stale = bundle.stale_upstream_copies || [];
  const live = (bundle.upstream_copies || []).filter((c) => !stale.includes(c));
  return h(
    'li',
    { className: 'dir-bundle', 'data-namespace': bundle.namespace, 'data-state': bundle.state },
    h(
      'div',
      { className: 'dir-bundle-head' },
      h('strong', { className: 'dir-bundle-name' }, bundle.namespace),
      h('span', { className: `dir-state dir-state--${bundle.state}`, title: BUNDLE_STATES[bundle.state] || '' }, bundle.state),
      h('span', { className: 'dir-bundle-source', title: bundle.landed_at ? `landed ${bundle.landed_at}` : '' }, bundleSource(bundle.source)),
      h('span', { className: 'dir-muted' }, `${numberFormat.format(bundle.files)} file${bundle.files === 1 ? '' : 's'}`),
      text ? h('span', { className: `dir-update dir-update--${kind}` }, text) : null,
      h(
        'button',
        { type: 'button', className: 'dir-button', disabled: planning, onClick: onPlan, 'aria-label': `Plan update of ${bundle.namespace}` },
        planning ? 'Planning…' : 'Plan update',
      ),
    ),
    h(FileList, { label: 'Modified here', names: bundle.modified }),
    h(FileList, { label: 'Missing', names: bundle.missing }),
    h(FileList, { label: 'Untracked', names: bundle.untracked }),
    h(FileList, { label: 'Open conflicts (upstream text beside the file)', names: live }),
    stale.length
      ? h(
          'div',
          { className: 'dir-bundle-files dir-warn-text dir-bundle-stale' },
          `Stale upstream copies (their conflict is settled; delete them, or the next update removes them): `,
          stale.map((name, i) => h(Fragment, { key: name }, i ? ', ' : null, h('code', null, name))),
        )
      : null,
  );
}

function ReviewList({ review }) {
  if (!review) return null;
  const groups = [
    ['executables', 'executable'],
    ['scripts', 'script'],
    ['hidden', 'hidden name, not downloaded'],
    ['large', 'large file'],
  ];
  const items = groups.flatMap(([key, what]) => (review[key] || []).map((path) => ({ key: `${key}:${path}`, path, what })));
  if (items.length === 0) return h('p', { className: 'dir-muted dir-review' }, 'Review: no executables, scripts, hidden names or large files among what the update adds or changes.');
  return h(
    'div',
    { className: 'dir-warning dir-review', role: 'note' },
    h('strong', null, 'Review before you apply: '),
    h(
      'ul',
      null,
      items.map((item) => h('li', { key: item.key }, 'adds ', h('code', null, item.path), ` (${item.what})`)),
    ),
  );
}

function PlanView({ plan, onConflict, setOnConflict, applying, onApply, onDiscard }) {
  const summary = plan.summary || {};
  const counts = [
    ['added', 'added upstream'],
    ['changed', 'changed upstream'],
    ['removed', 'removed upstream'],
    ['modified_locally', 'modified here'],
    ['conflicts', 'conflicts'],
    ['merges', 'clean merges'],
    ['upstream_copies_removed', 'stale copies removed'],
  ];
  const files = plan.files || [];
  return h(
    'section',
    { className: 'dir-plan', 'aria-label': 'Update plan', 'data-plan-id': plan.plan_id },
    h(
      'h3',
      null,
      `Update plan for ${plan.namespace}: `,
      h('code', null, bundleSource(plan.from)),
      ' → ',
      h('code', null, bundleSource(plan.to)),
    ),
    h('p', { className: 'dir-muted' }, `Nothing is written until you apply. The plan is valid until ${String(plan.expires_at || '').slice(0, 19).replace('T', ' ')} UTC.`),
    h(
      'ul',
      { className: 'dir-plan-summary' },
      counts.map(([key, label]) => h('li', { key, 'data-count': key }, h('strong', null, numberFormat.format(summary[key] || 0)), ` ${label}`)),
    ),
    plan.base_problem ? h('div', { className: 'dir-warning' }, `The locked version could not be fetched again for merging (${plan.base_problem}); files changed on both sides are treated as conflicts.`) : null,
    h(ReviewList, { review: plan.review }),
    files.length === 0
      ? h('p', { className: 'dir-muted' }, 'Nothing to change: the bundle is already as upstream has it.')
      : h(
          'table',
          { className: 'dir-plan-files' },
          h('thead', null, h('tr', null, ['File', 'Upstream', 'Here', 'Apply does'].map((c) => h('th', { key: c }, c)))),
          h(
            'tbody',
            null,
            files.map((file) => {
              const copy = file.upstream_copy;
              const removesCopy = copy && (copy.removed_by || []).includes(onConflict);
              return h(
                'tr',
                { key: file.path, 'data-path': file.path, className: file.conflict ? 'dir-plan-conflict' : '' },
                h('td', null, h('code', null, file.path)),
                h('td', null, file.upstream),
                h('td', null, file.local),
                h(
                  'td',
                  null,
                  plannedAction(file, onConflict),
                  copy ? h('div', { className: 'dir-muted' }, removesCopy ? `removes the stale ${copy.path}` : `keeps ${copy.path}`) : null,
                ),
              );
            }),
          ),
        ),
    h(
      'fieldset',
      { className: 'dir-plan-choice' },
      h('legend', null, 'A file changed both here and upstream:'),
      ON_CONFLICT.map(([value, label, help]) =>
        h(
          'label',
          { key: value },
          h('input', { type: 'radio', name: 'dir-on-conflict', value, checked: onConflict === value, onChange: () => setOnConflict(value) }),
          ` ${label}`,
          h('span', { className: 'dir-muted' }, ` — ${help}`),
        ),
      ),
    ),
    h(
      'div',
      { className: 'dir-actions' },
      h('button', { type: 'button', className: 'dir-button dir-button--primary', disabled: applying, onClick: onApply }, applying ? 'Applying…' : 'Apply'),
      h('button', { type: 'button', className: 'dir-button dir-button--quiet', disabled: applying, onClick: onDiscard }, 'Discard plan'),
    ),
  );
}

function ApplyResult({ result, onClose }) {
  const lists = [
    ['written', 'Written'],
    ['merged', 'Merged three-way'],
    ['kept_local', 'Kept as you have them'],
    ['removed', 'Removed (upstream removed them)'],
    ['upstream_copies_removed', 'Stale upstream copies removed'],
  ];
  const conflicts = result.conflicts || [];
  return h(
    'section',
    { className: 'dir-result', 'aria-label': 'Applied', role: 'status' },
    h('h3', null, `Applied: ${result.namespace} is now at `, h('code', null, bundleSource(result.source))),
    lists.map(([key, label]) => h(FileList, { key, label, names: result[key], className: `dir-result-${key}` })),
    conflicts.length
      ? h(
          'div',
          { className: 'dir-warning dir-result-conflicts' },
          h('strong', null, 'Conflicts to settle by hand: '),
          h(
            'ul',
            null,
            conflicts.map((c) =>
              h(
                'li',
                { key: c.path },
                h('code', null, c.path),
                c.upstream_copy ? [' kept as you have it; the upstream text is in ', h('code', { key: 'c' }, c.upstream_copy)] : ' kept as you have it',
              ),
            ),
          ),
        )
      : null,
    h('button', { type: 'button', className: 'dir-button dir-button--quiet', onClick: onClose }, 'Close'),
  );
}

/**
 * The bundles view. `changes` moves whenever a family's list changed (the live on-change
 * triggers refresh those lists): a bundle's files may be among them, so its status is read
 * again, at most once per BUNDLES_REFRESH_MS.
 */
function BundlesPane({ host, changes }) {
  const [list, setList] = useState({ rows: null, error: null, loading: false });
  const [updates, setUpdates] = useState({ byNamespace: null, checking: false, error: null });
  const [planning, setPlanning] = useState(null);
  const [plan, setPlan] = useState(null);
  const [onConflict, setOnConflict] = useState('merge');
  const [applying, setApplying] = useState(false);
  const [problem, setProblem] = useState(null);
  const [result, setResult] = useState(null);
  const alive = useRef(true);
  useEffect(() => () => {
    alive.current = false;
  }, []);

  const refresh = useCallback(async () => {
    setList((current) => ({ ...current, loading: true }));
    try {
      const answer = await call(host, BUNDLES.list, {});
      if (alive.current) setList({ rows: answer.bundles || [], error: null, loading: false });
    } catch (error) {
      if (alive.current) setList((current) => ({ ...current, error: errorText(error), loading: false }));
    }
  }, [host]);
  useEffect(() => {
    refresh();
  }, [refresh]);
  const seenChanges = useRef(changes);
  useEffect(() => {
    if (seenChanges.current === changes) return undefined;
    seenChanges.current = changes;
    const timer = setTimeout(refresh, BUNDLES_REFRESH_MS);
    return () => clearTimeout(timer);
  }, [changes, refresh]);

  const check = async () => {
    setUpdates((current) => ({ ...current, checking: true, error: null }));
    try {
      const answer = await call(host, BUNDLES.checkUpdates, {});
      const byNamespace = {};
      for (const entry of answer.bundles || []) byNamespace[entry.namespace] = entry;
      if (alive.current) setUpdates({ byNamespace, checking: false, error: null });
    } catch (error) {
      if (alive.current) setUpdates((current) => ({ ...current, checking: false, error: errorText(error) }));
    }
  };

  const makePlan = async (namespace) => {
    setPlanning(namespace);
    setProblem(null);
    setResult(null);
    try {
      const answer = await call(host, BUNDLES.planUpdate, { namespace });
      if (!alive.current) return;
      setPlan(answer);
      setOnConflict('merge');
    } catch (error) {
      if (alive.current) setProblem({ kind: 'other', text: errorText(error), namespace });
    } finally {
      if (alive.current) setPlanning(null);
    }
  };

  const apply = async () => {
    if (!plan) return;
    setApplying(true);
    setProblem(null);
    try {
      const answer = await call(host, BUNDLES.apply, { plan_id: plan.plan_id, on_conflict: onConflict });
      if (!alive.current) return;
      setResult(answer);
      setPlan(null);
      refresh();
    } catch (error) {
      if (!alive.current) return;
      const failure = planFailure(error);
      if (failure.kind === 'stale') {
        // The worker kept the fresh plan it made; show it in place of the old one.
        let fresh = failure.fresh;
        if (!fresh) {
          try {
            fresh = await call(host, BUNDLES.planUpdate, { namespace: plan.namespace });
          } catch {
            fresh = null;
          }
        }
        setProblem({ ...failure, namespace: plan.namespace });
        setPlan(fresh);
        refresh();
      } else {
        setProblem({ ...failure, namespace: plan.namespace });
        if (failure.kind === 'expired') setPlan(null);
      }
    } finally {
      if (alive.current) setApplying(false);
    }
  };

  const rows = list.rows;
  const byNamespace = updates.byNamespace;
  return h(
    'section',
    { className: 'dir-pane dir-bundles', 'aria-label': 'Bundles' },
    h(
      'div',
      { className: 'dir-toolbar' },
      h('span', { className: 'dir-count' }, rows ? `${numberFormat.format(rows.length)} bundle${rows.length === 1 ? '' : 's'} in the lock` : 'Loading bundles…'),
      h('span', { style: { flex: 1 } }),
      h('button', { type: 'button', className: 'dir-button', disabled: updates.checking || !rows || rows.length === 0, onClick: check }, updates.checking ? 'Checking…' : 'Check for updates'),
      h('button', { type: 'button', className: 'dir-button dir-button--quiet', disabled: list.loading, onClick: refresh }, 'Refresh'),
    ),
    list.error ? h('div', { className: 'dir-error dir-warning', role: 'alert' }, list.error) : null,
    updates.error ? h('div', { className: 'dir-error dir-warning', role: 'alert' }, updates.error) : null,
    h(
      'div',
      { className: 'dir-bundles-body' },
      problem
        ? h(
            'div',
            { className: `dir-error dir-warning dir-plan-problem dir-plan-problem--${problem.kind}`, role: 'alert' },
            problem.kind === 'stale'
              ? `${problem.text} ${plan ? 'Below is a fresh plan made from what is on disk now: review it and apply again.' : 'Make a fresh plan and review it.'}`
              : problem.kind === 'expired'
                ? `${problem.text} Plans live ten minutes in the worker's memory (and not across a restart). Make a fresh plan.`
                : problem.text,
            problem.kind === 'expired' && problem.namespace
              ? h('button', { type: 'button', className: 'dir-button', onClick: () => makePlan(problem.namespace) }, 'Plan again')
              : null,
          )
        : null,
      result ? h(ApplyResult, { result, onClose: () => setResult(null) }) : null,
      plan
        ? h(PlanView, {
            plan,
            onConflict,
            setOnConflict,
            applying,
            onApply: apply,
            onDiscard: () => {
              setPlan(null);
              setProblem(null);
            },
          })
        : null,
      rows && rows.length === 0
        ? h('p', { className: 'dir-empty' }, 'No bundle in the lock yet. A download (directory::skills::download_from_registry or download_from_repo) records what it lands there.')
        : null,
      rows
        ? h(
            'ul',
            { className: 'dir-bundle-list' },
            rows.map((bundle) =>
              h(BundleRow, {
                key: bundle.namespace,
                bundle,
                update: byNamespace ? byNamespace[bundle.namespace] : null,
                planning: planning === bundle.namespace,
                onPlan: () => makePlan(bundle.namespace),
              }),
            ),
          )
        : null,
    ),
  );
}

function DirectoryPage({ host, store, live, useTheme }) {
  const theme = useTheme();
  const state = useSyncExternalStore(store.subscribe, store.get);
  const [familyKey, setFamilyKey] = useState('skills');
  /** The bundles view in place of the three families' list and document. */
  const [bundlesOn, setBundlesOn] = useState(false);
  const [selection, setSelection] = useState({ skills: null, prompts: null, agents: null });
  const [creating, setCreating] = useState(false);
  /** Each family's filter and problems toggle, and where its list was scrolled to. */
  const [views, setViews] = useState({ skills: {}, prompts: {}, agents: {} });
  const scrollMemory = useRef({ skills: {}, prompts: {}, agents: {} });
  /** A remembered document found deleted on disk when it was shown again: `{familyKey, key}`. */
  const [gone, setGone] = useState(null);
  /** The open document's save, for Ctrl+S wherever the focus is in the page. */
  const saveShortcut = useRef(null);
  const root = useRef(null);
  const { width } = useElementSize(root);
  const narrow = width > 0 && width < NARROW_WIDTH;

  useEffect(() => live.use(), [live]);
  useEffect(() => {
    store.refreshStatus();
    return store.startHeartbeat();
  }, [store]);
  useEffect(() => {
    store.refresh(familyKey);
  }, [store, familyKey]);

  const list = state[familyKey];
  const selectedKey = selection[familyKey];
  const row = useMemo(
    () => (list.rows && selectedKey != null ? list.rows.find((r) => r.key === selectedKey) : undefined),
    [list.rows, selectedKey],
  );
  const dirtyKeys = useMemo(() => {
    const keys = new Set();
    for (const key of store.drafts.keys()) {
      if (key.startsWith(`${familyKey}:`)) keys.add(key.slice(familyKey.length + 1));
    }
    return keys;
  }, [store, familyKey, state]);

  /** A skipped file picked in the problems filter (no document to open: its path and reason). */
  const [orphan, setOrphan] = useState(null);
  const select = useCallback(
    (key, skippedRow = null) => {
      setCreating(false);
      setGone(null);
      setOrphan(skippedRow);
      setSelection((current) => ({ ...current, [familyKey]: key }));
    },
    [familyKey],
  );

  const docOpen = creating || selectedKey != null;
  /**
   * A narrow page's way back from a document to the list: the keyboard returns to the list, on
   * the row of the document just closed (per family).
   */
  const lastOpened = useRef({});
  const returning = useRef(false);
  const back = useCallback(() => {
    lastOpened.current[familyKey] = selectedKey;
    returning.current = true;
    select(null);
  }, [familyKey, selectedKey, select]);
  useEffect(() => {
    returning.current = false;
  });
  const showList = !narrow || !docOpen;
  // With nothing open the list takes the whole width; beside a document it is as wide as the
  // splitter left it (remembered across visits).
  const showDoc = docOpen;
  const [listWidth, setListWidth] = useState(readListWidth);
  const split = showList && showDoc && !narrow;
  const shownListWidth = clampListWidth(listWidth == null ? Math.round(width * DEFAULT_LIST_FRACTION) : listWidth, width);

  const onGone = useCallback(
    (key) => {
      select(null);
      setGone({ familyKey, key });
    },
    [select, familyKey],
  );
  const onKeyDown = (event) => {
    if ((event.ctrlKey || event.metaKey) && !event.altKey && event.key.toLowerCase() === 's' && saveShortcut.current) {
      // The open document's save, not the browser's "Save page as".
      event.preventDefault();
      saveShortcut.current();
    }
  };

  return h(
    'div',
    { className: `dir${narrow ? ' dir--narrow' : ''}`, 'data-theme': theme, ref: root, onKeyDown },
    h(
      'header',
      { className: 'dir-header' },
      h('h1', { className: 'dir-title' }, 'Directory'),
      h(
        'nav',
        { className: 'dir-tabs', role: 'tablist', 'aria-label': 'Family' },
        FAMILY_KEYS.map((key) =>
          h(
            'button',
            {
              key,
              type: 'button',
              role: 'tab',
              'aria-selected': !bundlesOn && key === familyKey,
              className: `dir-tab${!bundlesOn && key === familyKey ? ' dir-tab--on' : ''}`,
              onClick: () => {
                setCreating(false);
                setBundlesOn(false);
                setFamilyKey(key);
              },
            },
            FAMILIES[key].label,
            state[key].rows ? h('span', { className: 'dir-tab-count' }, numberFormat.format(state[key].rows.length)) : null,
          ),
        ),
        h(
          'button',
          {
            type: 'button',
            role: 'tab',
            'aria-selected': bundlesOn,
            className: `dir-tab${bundlesOn ? ' dir-tab--on' : ''}`,
            onClick: () => setBundlesOn(true),
          },
          'Bundles',
        ),
      ),
      h(ConnectionBadge, { state }),
    ),
    state.worker === 'missing' || state.engine === 'reconnecting'
      ? h(
          'div',
          { className: 'dir-banner', role: 'status' },
          state.engine === 'reconnecting'
            ? 'The console lost its connection to the engine and is reconnecting. This page catches up by itself when it is back.'
            : 'The iii-directory worker is not running. Start it (iii-directory --url ws://<engine>) and this page catches up by itself; your unsaved edits stay here.',
          h('button', { type: 'button', className: 'dir-button', onClick: () => store.retry() }, 'Retry now'),
        )
      : null,
    !bundlesOn && gone && gone.familyKey === familyKey
      ? h(
          'div',
          { className: 'dir-notice dir-notice--gone', role: 'status' },
          h('strong', null, 'Deleted on disk. '),
          `${FAMILIES[familyKey].noun} ${gone.key} no longer exists.`,
          h('button', { type: 'button', className: 'dir-button dir-button--quiet', onClick: () => setGone(null) }, 'Dismiss'),
        )
      : null,
    bundlesOn
      ? h(BundlesPane, { host, changes: FAMILY_KEYS.map((key) => state[key].revision).join(':') })
      : h(
          'div',
          {
            className: `dir-body${split ? ' dir-body--split' : ''}`,
            style: split ? { gridTemplateColumns: `${shownListWidth}px ${SPLITTER_WIDTH}px minmax(0, 1fr)` } : undefined,
          },
          showList
            ? h(ListPane, {
                key: familyKey,
                familyKey,
                list,
                skipped: state.skipped,
                selectedKey,
                dirtyKeys,
                onSelect: select,
                onNew: () => setCreating(true),
                onRetry: () => store.refresh(familyKey),
                onProblems: () => store.refreshStatus(),
                view: views[familyKey],
                onView: (patch) => setViews((all) => ({ ...all, [familyKey]: { ...all[familyKey], ...patch } })),
                scrollMemory: scrollMemory.current[familyKey],
                narrow,
                lastOpened: lastOpened.current[familyKey] || null,
                returning: returning.current,
              })
            : null,
          split
            ? h(Splitter, {
                width: shownListWidth,
                onChange: (next, done) => {
                  const clamped = clampListWidth(next, width);
                  setListWidth(clamped);
                  if (done) writeListWidth(clamped);
                },
              })
            : null,
          showDoc
            ? creating
              ? h(CreatePane, {
                  key: `new:${familyKey}`,
                  store,
                  familyKey,
                  onCreated: (key) => {
                    setCreating(false);
                    setSelection((current) => ({ ...current, [familyKey]: key }));
                    store.refresh(familyKey);
                  },
                  onCancel: () => setCreating(false),
                })
              : orphan && orphan.key === selectedKey
                ? h(SkippedPane, { entry: orphan.skipped, onBack: narrow ? back : null })
              : selectedKey != null
                ? h(DocumentPane, {
                    key: `${familyKey}:${selectedKey}`,
                    host,
                    store,
                    familyKey,
                    selectedKey,
                    row,
                    rows: list.rows,
                    onSelect: select,
                    onBack: narrow ? back : null,
                    onClose: narrow ? null : () => select(null),
                    onGone,
                    saveRef: saveShortcut,
                  })
                : null
            : null,
        ),
  );
}

const LIST_WIDTH_KEY = 'iii-directory:list-width';
const SPLITTER_WIDTH = 6;
const DEFAULT_LIST_FRACTION = 0.4;
const MIN_LIST_WIDTH = 280;
const MIN_DOC_WIDTH = 360;

function readListWidth() {
  try {
    const stored = Number(globalThis.localStorage && globalThis.localStorage.getItem(LIST_WIDTH_KEY));
    return Number.isFinite(stored) && stored > 0 ? stored : null;
  } catch {
    return null;
  }
}

function writeListWidth(value) {
  try {
    globalThis.localStorage.setItem(LIST_WIDTH_KEY, String(Math.round(value)));
  } catch {
    // Storage refused (private mode, quota): the width holds for this visit only.
  }
}

/** The list's width within what leaves the document room. */
export function clampListWidth(value, total) {
  const max = Math.max(MIN_LIST_WIDTH, total - MIN_DOC_WIDTH - SPLITTER_WIDTH);
  return Math.round(Math.min(Math.max(value, MIN_LIST_WIDTH), max));
}

/** The handle between the list and the document: drag it, or use the arrow keys. */
function Splitter({ width, onChange }) {
  const onPointerDown = (event) => {
    event.preventDefault();
    const handle = event.currentTarget;
    const startX = event.clientX;
    handle.setPointerCapture(event.pointerId);
    const at = (e) => width + e.clientX - startX;
    const move = (e) => onChange(at(e), false);
    const up = (e) => {
      handle.removeEventListener('pointermove', move);
      handle.removeEventListener('pointerup', up);
      onChange(at(e), true);
    };
    handle.addEventListener('pointermove', move);
    handle.addEventListener('pointerup', up);
  };
  const onKeyDown = (event) => {
    const step = { ArrowLeft: -24, ArrowRight: 24 }[event.key];
    if (step) {
      event.preventDefault();
      onChange(width + step, true);
    }
  };
  return h('div', {
    className: 'dir-splitter',
    role: 'separator',
    'aria-orientation': 'vertical',
    'aria-label': 'Resize the list',
    'aria-valuenow': width,
    tabIndex: 0,
    onPointerDown,
    onKeyDown,
  });
}

/** What the page knows of its connection, in the header: Live, or why not. */
export function connectionLabel(state) {
  if (state.engine === 'reconnecting') return ['reconnecting', 'Reconnecting…'];
  if (state.worker === 'missing') return ['missing', 'Worker not running'];
  if (state.live === 'on') return ['on', 'Live'];
  if (state.live === 'failed') return ['failed', 'Not live'];
  return ['off', 'Offline'];
}

function ConnectionBadge({ state }) {
  const [kind, label] = connectionLabel(state);
  return h('span', { className: `dir-live dir-live--${kind}`, title: kind === 'failed' ? state.liveError || '' : '' }, label);
}

// -----------------------------------------------------------------------------------------
// The settings form: the worker's entry in the engine's configuration worker
// -----------------------------------------------------------------------------------------

/** The worker's configuration entry (`src/worker/configuration.rs`). */
const CONFIG_ENTRY = 'iii-directory';

/** A form value as the schema's type wants it, or `undefined` when it cannot be one. */
export function settingValue(schema, raw) {
  if (schema.type === 'boolean') return raw === true;
  if (schema.type === 'integer' || schema.type === 'number') {
    if (String(raw).trim() === '') return undefined;
    const n = Number(raw);
    return Number.isFinite(n) && (schema.type === 'number' || Number.isInteger(n)) ? n : undefined;
  }
  return String(raw);
}

/** The keys whose values differ between two settings objects, in the schema's order. */
export function changedSettings(properties, before, after) {
  return Object.keys(properties).filter((key) => JSON.stringify(before[key]) !== JSON.stringify(after[key]));
}

/** How long a save waits for the worker to refuse the value it was handed, and how often it looks. */
const REFUSAL_WAIT_MS = 1500;
const REFUSAL_POLL_MS = 150;

/** The worker's refusals of configuration values (`index::status`), or `null` if it cannot say. */
async function configurationRefusals(store) {
  try {
    const status = await store.call(STATUS, {});
    return (status && status.configuration && status.configuration.refused) || [];
  } catch {
    return null;
  }
}

/**
 * What the worker said when it did not apply a value saved after `before` (its refusals then):
 * `{rejected}` (the reason) when the value breaks its rules (folder layout and the like),
 * `{waiting}` (the keys) when a key needs a restart, which keeps the whole current configuration
 * until then; `null` when it applied it. The configuration worker stores any value that fits
 * the schema; only `index::status` and the worker's log say what became of it.
 */
async function refusalAfter(store, before) {
  if (before == null) return null;
  const seen = new Set(before.map((entry) => `${entry.at}\n${entry.what}`));
  const deadline = Date.now() + REFUSAL_WAIT_MS;
  for (;;) {
    const now = await configurationRefusals(store);
    for (const { what } of (now || []).filter((entry) => !seen.has(`${entry.at}\n${entry.what}`)).reverse()) {
      const rejected = /^configuration rejected \((.*)\); keeping the current configuration/s.exec(what);
      if (rejected) return { rejected: rejected[1] };
      const waiting = /^configuration change of (.*?) needs a restart/.exec(what);
      if (waiting) return { waiting: waiting[1] };
    }
    if (Date.now() >= deadline) return null;
    await new Promise((resolve) => setTimeout(resolve, REFUSAL_POLL_MS));
  }
}

function SettingsForm({ store, theme }) {
  const [entry, setEntry] = useState(null);
  const [draft, setDraft] = useState({});
  const [error, setError] = useState(null);
  const [saved, setSaved] = useState(null);
  const [busy, setBusy] = useState(false);

  const read = useCallback(async () => {
    setError(null);
    try {
      // The value and the schema are two calls of the configuration worker.
      const [stored, described] = await Promise.all([
        store.call('configuration::get', { id: CONFIG_ENTRY }),
        store.call('configuration::schema', { id: CONFIG_ENTRY }),
      ]);
      setEntry({ value: stored && stored.value, schema: described && described.schema });
      setDraft({});
    } catch (failure) {
      setError(errorText(failure));
    }
  }, [store]);
  useEffect(() => {
    read();
  }, [read]);

  if (error && !entry) {
    return h('div', { className: 'dir dir-settings', 'data-theme': theme }, h('div', { className: 'dir-error dir-error--read', role: 'alert' }, error, h('button', { type: 'button', className: 'dir-button', onClick: read }, 'Retry')));
  }
  if (!entry) return h('div', { className: 'dir dir-settings dir-muted', 'data-theme': theme }, 'Loading the settings…');
  const properties = (entry.schema && entry.schema.properties) || {};
  const stored = entry.value || {};
  const current = { ...stored, ...draft };
  const changed = changedSettings(properties, stored, current);
  const invalid = Object.keys(draft).filter((key) => draft[key] === undefined);

  const save = async () => {
    setBusy(true);
    setError(null);
    // A notice of an earlier save does not stand next to this one's outcome.
    setSaved(null);
    try {
      const before = await configurationRefusals(store);
      await store.call('configuration::set', { id: CONFIG_ENTRY, value: current });
      const refusal = await refusalAfter(store, before);
      // (Read first: a read clears the form's error.)
      await read();
      if (refusal && refusal.rejected) {
        setError(`Stored, but the worker rejected it and keeps its current configuration: ${refusal.rejected}`);
      } else {
        const restart = changed.filter((key) => properties[key]['x-restart-required']);
        setSaved({ changed, restart, waiting: refusal && refusal.waiting });
      }
    } catch (failure) {
      setError(errorText(failure));
    } finally {
      setBusy(false);
    }
  };

  return h(
    'div',
    { className: 'dir dir-settings', 'data-theme': theme, role: 'form', 'aria-label': 'iii-directory settings' },
    h('p', { className: 'dir-muted' }, entry.schema && entry.schema.description),
    Object.entries(properties).map(([key, schema]) => {
      const value = current[key];
      const isDefault = JSON.stringify(value) === JSON.stringify(schema.default);
      const input =
        schema.type === 'boolean'
          ? h('input', { type: 'checkbox', name: key, checked: value === true, onChange: (event) => setDraft({ ...draft, [key]: event.target.checked }) })
          : h('input', {
              className: 'dir-input',
              name: key,
              type: schema.type === 'string' ? 'text' : 'number',
              value: draft[key] === undefined && key in draft ? '' : value == null ? '' : String(value),
              spellCheck: false,
              onChange: (event) => setDraft({ ...draft, [key]: settingValue(schema, event.target.value) }),
            });
      return h(
        'div',
        { key, className: `dir-setting${changed.includes(key) ? ' dir-setting--changed' : ''}`, 'data-key': key },
        h(
          'div',
          { className: 'dir-setting-head' },
          h('label', null, h('code', null, key), ' ', schema.type === 'boolean' ? input : null),
          schema['x-restart-required'] ? h('span', { className: 'dir-badge dir-badge--restart' }, 'restart required') : null,
          isDefault ? null : h('span', { className: 'dir-badge' }, 'changed from default'),
        ),
        schema.type === 'boolean' ? null : input,
        h('div', { className: 'dir-muted dir-setting-help' }, schema.description, ` Default: ${JSON.stringify(schema.default)}.`),
      );
    }),
    error ? h('div', { className: 'dir-error', role: 'alert' }, error) : null,
    saved
      ? h(
          'div',
          { className: 'dir-notice dir-settings-saved', role: 'status' },
          saved.changed.length === 0 ? 'Nothing changed.' : `Saved ${saved.changed.join(', ')}.`,
          saved.waiting
            ? ` The worker keeps its whole current configuration until it restarts (${saved.waiting} needs a restart): nothing saved here applies before then.`
            : saved.restart.length
              ? ` ${saved.restart.join(', ')} take${saved.restart.length === 1 ? 's' : ''} effect after the worker restarts; the rest apply now.`
              : saved.changed.length
                ? ' They apply now.'
                : '',
        )
      : null,
    h(
      'div',
      { className: 'dir-actions' },
      h('button', { type: 'button', className: 'dir-button dir-button--primary', disabled: busy || changed.length === 0 || invalid.length > 0, onClick: save }, 'Save settings'),
      h('button', { type: 'button', className: 'dir-button', disabled: busy || Object.keys(draft).length === 0, onClick: () => setDraft({}) }, 'Revert'),
    ),
  );
}

/**
 * Registers the settings form in the console's settings slot, where the console has one
 * (`host.configForms`, feature-tested; older consoles have none and get no form).
 */
function registerSettings(host, store, useTheme) {
  const slot = host.configForms;
  if (!slot || typeof slot.register !== 'function') return () => {};
  const render = () => h(ThemedSettings, { store, useTheme });
  try {
    const off = slot.register({ id: CONFIG_ENTRY, configuration_id: CONFIG_ENTRY, title: 'iii-directory', render });
    return typeof off === 'function' ? off : () => {};
  } catch {
    return () => {};
  }
}

function ThemedSettings({ store, useTheme }) {
  const theme = useTheme();
  return h(SettingsForm, { store, theme });
}

/** The console's theme hook when it offers one, else the light theme. */
function themeHook(host) {
  return typeof host.useTheme === 'function' ? host.useTheme : () => 'light';
}

/**
 * Follows the console's connection to the engine through its listener, where it has one
 * (consoles name it differently; feature-tested): `onChange(true|false)`.
 */
function listenToConnection(host, onChange) {
  const iii = host.iii || {};
  const subscribe = iii.onConnectionState || iii.onConnectionChange;
  if (typeof subscribe !== 'function') return () => {};
  try {
    const off = subscribe.call(iii, (value) => {
      const status = typeof value === 'string' ? value : value && (value.state || value.status);
      onChange(status === 'connected' || status === 'open' || value === true);
    });
    return typeof off === 'function' ? off : () => {};
  } catch {
    return () => {};
  }
}

/**
 * While a draft is unsaved, leaving the console (closing its tab, reloading it, following a link
 * out) asks first: the drafts live in this module's memory only.
 */
function guardUnsavedDrafts(store) {
  if (typeof window === 'undefined' || typeof window.addEventListener !== 'function') return () => {};
  const onBeforeUnload = (event) => {
    if (store.drafts.size === 0) return;
    event.preventDefault();
    // Older browsers ask only when a return value is set.
    event.returnValue = '';
  };
  window.addEventListener('beforeunload', onBeforeUnload);
  return () => window.removeEventListener('beforeunload', onBeforeUnload);
}

/**
 * The module's entry point for the console: registers the page and returns the teardown,
 * which removes the page and unbinds the live triggers.
 */
export default function setup(host) {
  const store = createStore(host);
  const live = createLive(host, store);
  const useTheme = themeHook(host);
  const render = () => h(DirectoryPage, { host, store, live, useTheme });
  const removePage = host.pages.register({ id: PAGE.id, title: PAGE.title, render });
  const removeListener = listenToConnection(host, (connected) => store.setEngine(connected));
  const removeSettings = registerSettings(host, store, useTheme);
  const removeLeaveGuard = guardUnsavedDrafts(store);
  let done = false;
  return () => {
    if (done) return;
    done = true;
    removeListener();
    removeSettings();
    removeLeaveGuard();
    live.dispose();
    store.dispose();
    if (typeof removePage === 'function') {
      try {
        removePage();
      } catch {
        // The console already removed it.
      }
    }
  };
}
