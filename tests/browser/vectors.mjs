// The shared test vectors of the server's reading rules (ui/vectors.json), run on the console
// page's copy of them (ui/page.js): how a file splits into frontmatter and body, which ids are
// valid, and what the skills list shows for a text. tests/library/vectors.rs runs the same
// file on the Rust reader, so the page and the server cannot disagree without a failure.
//
//   node --test tests/browser/vectors.mjs        (after npm ci --prefix tests/browser)
//
// page.js imports React by its bare name, which the console's import map resolves; here it
// is pointed at tests/browser/node_modules/react (the module's pure functions never render).

import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { test } from 'node:test';
import { fileURLToPath, pathToFileURL } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
const root = join(here, '..', '..');
const vectors = JSON.parse(readFileSync(join(root, 'ui', 'vectors.json'), 'utf8'));

async function loadPage() {
  const react = pathToFileURL(join(here, 'node_modules', 'react', 'index.js')).href;
  const source = readFileSync(join(root, 'ui', 'page.js'), 'utf8');
  const rewritten = source.replace(/from 'react';/, `from ${JSON.stringify(react)};`);
  assert.notEqual(rewritten, source, "page.js imports 'react'");
  const dir = mkdtempSync(join(tmpdir(), 'page-vectors-'));
  const file = join(dir, 'page.mjs');
  writeFileSync(file, rewritten);
  try {
    return await import(pathToFileURL(file).href);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

const page = await loadPage();

test('frontmatter splits as the vectors say', () => {
  for (const c of vectors.split) {
    assert.deepEqual(page.splitFrontmatter(c.text), { front: c.front, body: c.body }, c.name);
  }
});

test('ids and names are valid as the vectors say', () => {
  for (const c of vectors.skill_ids) {
    assert.equal(page.validateSkillId(c.id) === null, c.valid, `skill id ${JSON.stringify(c.id)}`);
  }
  for (const c of vectors.names) {
    assert.equal(page.validateName(c.name) === null, c.valid, `name ${JSON.stringify(c.name)}`);
  }
});

test('skill texts read as the vectors say, or are left to the server', () => {
  let local = 0;
  for (const c of vectors.skill_readings) {
    const read = page.readSkill(c.text, c.id);
    if (!c.local) {
      assert.equal(read.certain, false, `${c.name}: the page must ask the server`);
      continue;
    }
    local += 1;
    assert.equal(read.certain, true, `${c.name}: the page reads this itself`);
    assert.equal(read.emptyBody, c.refused, `${c.name}: refused`);
    assert.equal(read.frontmatter, c.frontmatter, `${c.name}: frontmatter`);
    if (!c.refused) {
      assert.equal(read.title, c.title, `${c.name}: title`);
      assert.equal(read.description, c.description, `${c.name}: description`);
    }
  }
  assert.ok(local >= 10, `${local} readings are local`);
});

// Not shared vectors: the bundles view's reading of the worker's answers (the browser test
// drives the same view against the real worker).
test('a stale plan error gives its fresh plan; an unknown plan is expired', () => {
  const fresh = { plan_id: 'plan-2', files: [] };
  const stale = page.planFailure(
    new Error(`handler error: D336 conflict: the files of bundle "m" changed; nothing was written. A fresh plan: ${JSON.stringify(fresh)}`),
  );
  assert.equal(stale.kind, 'stale');
  assert.deepEqual(stale.fresh, fresh);
  assert.equal(stale.text, 'D336 conflict: the files of bundle "m" changed; nothing was written.');
  const cut = page.planFailure(new Error('D336 conflict: changed. A fresh plan: {"plan_id": "pl'));
  assert.equal(cut.kind, 'stale');
  assert.equal(cut.fresh, null, 'a cut message gives no plan: the page plans again');
  assert.equal(page.planFailure(new Error('D337 not_found: no update plan "x"')).kind, 'expired');
  assert.equal(page.planFailure(new Error('D334 not_found: no bundle')).kind, 'other');
});

test('what apply does with a planned file follows on_conflict', () => {
  const both = { path: 'a.md', upstream: 'changed', local: 'modified', conflict: true, merge: 'conflict' };
  assert.equal(page.plannedAction(both, 'merge'), 'conflict: your copy stays, upstream lands as a.md.upstream');
  assert.equal(page.plannedAction({ ...both, merge: 'clean' }, 'merge'), 'merged three-way (clean)');
  assert.equal(page.plannedAction(both, 'keep-local'), 'your copy stays');
  assert.equal(page.plannedAction(both, 'take-upstream'), 'upstream replaces your copy');
  const edited = { path: 'b.md', upstream: 'unchanged', local: 'modified', conflict: false };
  assert.equal(page.plannedAction(edited, 'merge'), 'your copy stays');
  assert.equal(page.plannedAction({ path: 'c.md', upstream: 'removed', local: 'modified', conflict: true }, 'merge'), 'kept: you edited it');
  assert.equal(page.plannedAction({ path: 'd.md', upstream: 'removed', local: 'clean', conflict: false }, 'merge'), 'removed');
  assert.deepEqual(page.updateText({ state: 'update-available', upstream: { version: '2.0.0' } }), ['available', 'Update available: 2.0.0']);
  assert.equal(page.updateText({ state: 'unknown', reason: 'timed out' })[1], 'Unknown: timed out');
  assert.equal(page.bundleSource({ kind: 'registry', worker: 'm', version: '1.0.0', tag: 'latest' }), 'm@1.0.0 (latest)');
});

// Not shared vectors: the markdown preview on hostile text. A file holds up to 256 KiB, and the
// preview renders it when the document opens and on every keystroke of the split view. Each
// shape below took the renderer seconds to minutes (a regular expression that scanned the rest
// of the line or paragraph again from every opener, or backtracked over a run of blanks), or
// threw (a level of recursion per nested list or quote), which took the whole page down.
test('the markdown preview stays fast and shallow on hostile text', () => {
  const shapes = {
    'unclosed strong': '**a '.repeat(40000),
    'unclosed emphasis': '*a '.repeat(40000),
    'unclosed brackets': '[a '.repeat(40000),
    'unclosed strike': '~~a '.repeat(40000),
    'unclosed link targets': '[a](b'.repeat(30000),
    'unclosed link titles': '[a](b "c'.repeat(20000),
    'unclosed autolinks': '<https://a'.repeat(15000),
    'a heading with a long run of blanks': `# a${' '.repeat(100000)}x`,
    'a fence with a backtick at its end': `\`\`\`${'a'.repeat(100000)}\``,
    'a table rule with a long run of blanks': `a|b\n${' '.repeat(100000)}x`,
    'a list nested 5,000 deep': `${'- '.repeat(5000)}x`,
    'a quote nested 5,000 deep': `${'> '.repeat(5000)}x`,
  };
  const render = (blocks) => {
    for (const block of blocks) {
      if (block.text != null && block.type !== 'code') page.renderInline(block.text);
      if (block.blocks) render(block.blocks);
      for (const item of block.items || []) render(item);
      for (const cell of [...(block.head || []), ...(block.rows || []).flat()]) page.renderInline(cell);
    }
  };
  const depth = (blocks) =>
    Math.max(0, ...blocks.map((b) => 1 + Math.max(b.blocks ? depth(b.blocks) : 0, ...(b.items || []).map(depth))));
  for (const [name, text] of Object.entries(shapes)) {
    const started = performance.now();
    let blocks;
    assert.doesNotThrow(() => {
      blocks = page.parseBlocks(text);
      render(blocks);
    }, name);
    const ms = performance.now() - started;
    assert.ok(ms < 1500, `${name}: ${Math.round(ms)} ms for ${text.length} characters`);
    assert.ok(depth(blocks) <= 40, `${name}: nested ${depth(blocks)} deep`);
  }
});

// Not shared vectors: the problem markers. A skipped or salvaged file is named by its id on disk;
// its row is that id when the list has one (`dup/index` beside `dup`), else the display id
// (`solo/index` listed as `solo`). The display id first marked `dup`, a file without a problem.
test('a problem marks the row of its own id before the row its display id names', () => {
  const rows = ['dup', 'dup/index', 'solo'].map((key) => ({ key }));
  const entry = (id) => ({ family: 'skills', id, path: `/t/skills/${id}.md`, reason: `${id} is broken`, root: 'skills_folder' });
  const { byKey, orphans } = page.familyProblems('skills', rows, [entry('dup/index'), entry('solo/index')]);
  assert.deepEqual(Object.fromEntries(byKey), { 'dup/index': ['dup/index is broken'], solo: ['solo/index is broken'] });
  assert.deepEqual(orphans, []);
});

test('an unpaired surrogate is found, a pair is not', () => {
  for (const text of ['a\ud800', '\ud800b', 'a\udc00', '\udc00', 'x\udbff\udbffy']) assert.equal(page.hasUnpairedSurrogate(text), true, JSON.stringify(text));
  for (const text of ['', 'plain', '🙂', 'a\ud83d\ude42b']) assert.equal(page.hasUnpairedSurrogate(text), false, JSON.stringify(text));
});

test('text that reorders how it shows is shown marked, and counted', () => {
  // U+202E reverses what follows it: "Report \u202Eexe.jpg" shows as "Report gpj.exe".
  assert.equal(page.shownText('Report \u202Eexe.jpg'), 'Report \uFFFDexe.jpg');
  assert.equal(page.shownText('a\u202Ab\u202Bc\u202Cd\u202De\u2066f\u2067g\u2068h\u2069'), 'a\uFFFDb\uFFFDc\uFFFDd\uFFFDe\uFFFDf\uFFFDg\uFFFDh\uFFFD');
  // The marks that only place neutral characters stay: right-to-left writing needs them.
  assert.equal(page.shownText('\u05E9\u05DC\u05D5\u05DD\u200F!\u200E'), '\u05E9\u05DC\u05D5\u05DD\u200F!\u200E');
  assert.equal(page.shownText(null), null);
  assert.equal(page.reorderingCount('x\u202Ey\u2066z\u2069'), 3);
  assert.equal(page.reorderingCount('plain'), 0);
  assert.match(page.reorderingNotice(1), /holds a character that reverses/);
  assert.match(page.reorderingNotice(2), /holds 2 characters that reverse/);
});
