// Drives headless Chromium (Debian's, through playwright-core) over the harness page for the
// browser test of the console page. Started by tests/worker/browser.rs, which runs the fake engine,
// the real worker on a generated 10,000-skill tree, and the loopback HTTP server; this script
// checks what a person would see and do, checks the files on disk, and prints the figures as
// one line `FIGURES {json}` on stdout.
//
// Environment: HARNESS_URL (the harness page with ?engine=ws://…), CONTROL_URL (the test's
// loopback server, whose POST /control/worker/{stop,start} stops and starts the worker,
// POST /control/registry/publish/<version> publishes a version of the bundle and
// POST /control/{hold,held,release}/<function> holds back the page's calls to a function in the
// engine, counts them and routes them), TREE_DIR (the worker's
// Compose folder), OUT_DIR (screenshots), CHROMIUM (default /usr/bin/chromium),
// SKILLS (the generated skill count).

import assert from 'node:assert/strict';
import { existsSync, mkdirSync, readFileSync, readdirSync, renameSync, unlinkSync, writeFileSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { chromium } from 'playwright-core';

const HARNESS_URL = need('HARNESS_URL');
const CONTROL_URL = need('CONTROL_URL');
const TREE_DIR = need('TREE_DIR');
const OUT_DIR = need('OUT_DIR');
const SKILLS = Number(need('SKILLS'));
const CHROMIUM = process.env.CHROMIUM || '/usr/bin/chromium';
/** The flags Debian's Chromium needs here: no sandbox as root, no GPU, no network of its own. */
const CHROMIUM_FLAGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];
const WAIT_MS = 20000;
const ROW_HEIGHT = 30;
/** Rows a virtualized list may have in the DOM at this viewport (visible + overscan). */
const MAX_ROWS_IN_DOM = 80;
const SHOWCASE = 'fixtures/showcase';
const SHOWCASE_FILE = 'skills/fixtures/showcase.md';

function need(name) {
  const value = process.env[name];
  if (!value) {
    console.error(`run.mjs: ${name} is not set (tests/worker/browser.rs sets it)`);
    process.exit(2);
  }
  return value;
}

const step = (text) => console.error(`  browser: ${text}`);
const disk = (rel) => readFileSync(join(TREE_DIR, rel), 'utf8');
const median = (values) => {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
};
const round = (ms) => Math.round(ms * 10) / 10;
/** A promise that fails with `what` after `ms` instead of waiting for ever. */
const within = (promise, ms, what) =>
  Promise.race([
    promise,
    new Promise((_, reject) => setTimeout(() => reject(new Error(`timed out after ${ms} ms waiting for ${what}`)), ms)),
  ]);

/** Stops or starts the worker (tests/worker/browser.rs owns the process). */
async function control(what) {
  const answer = await fetch(`${CONTROL_URL}/control/worker/${what}`, { method: 'POST' });
  assert.equal(answer.status, 200, `control ${what}`);
}

/**
 * Holds back the page's calls to `functionId` in the engine (`hold`), counts the held ones
 * (`held`) or routes them on (`release`); answers the count.
 */
async function engineCalls(what, functionId) {
  const answer = await fetch(`${CONTROL_URL}/control/${what}/${functionId}`, { method: 'POST' });
  assert.equal(answer.status, 200, `control ${what} ${functionId}`);
  return Number((await answer.text()).trim());
}

/** An edit made behind the worker's back, whole at once (staged outside the watched roots). */
function writeOnDisk(rel, text) {
  mkdirSync(dirname(join(TREE_DIR, rel)), { recursive: true });
  const staging = join(TREE_DIR, `.staging-${process.pid}-${Date.now()}`);
  writeFileSync(staging, text);
  renameSync(staging, join(TREE_DIR, rel));
}

/** The id of the generated skill whose file name ends in `-<n>.md`. */
function generatedSkillId(n) {
  const root = join(TREE_DIR, 'skills');
  const walk = (dir) => {
    for (const entry of readdirSync(dir, { withFileTypes: true })) {
      const path = join(dir, entry.name);
      if (entry.isDirectory()) {
        if (dir === root && entry.name === 'iii') continue;
        const found = walk(path);
        if (found) return found;
      } else if (entry.name.endsWith(`-${n}.md`)) return relative(root, path).slice(0, -3);
    }
    return null;
  };
  return walk(root);
}

/** The fixture (tests/browser/showcase.md, laid in the tree by tests/browser.rs) with another title. */
const SHOWCASE_TEXT = disk(SHOWCASE_FILE);
const showcase = (title) => SHOWCASE_TEXT.replace(/^title: .*$/m, `title: ${title}`);

const browser = await chromium.launch({ executablePath: CHROMIUM, args: CHROMIUM_FLAGS, headless: true });
const figures = {};
const problems = [];
const context = await browser.newContext({ viewport: { width: 1360, height: 860 }, deviceScaleFactor: 1 });
const page = await context.newPage();
try {
  page.setDefaultTimeout(WAIT_MS);
  page.on('pageerror', (error) => problems.push(`page error: ${error.message}`));
  page.on('console', (message) => {
    if (message.type() === 'error') problems.push(`console error: ${message.text()}`);
  });

  const root = page.locator('[data-iii-ui="iii-directory"]');
  const filter = root.locator('.dir-filter');
  const count = root.locator('.dir-count');
  const editor = root.locator('textarea.dir-editor');
  const docTitle = root.locator('.dir-doc-title h2');
  const dirtyBadge = root.locator('.dir-badge--dirty');
  const button = (name) => root.getByRole('button', { name, exact: true });
  const row = (key) => root.locator(`.dir-row[data-key="${key}"]`);
  const calls = () => page.evaluate(() => window.__harness.log.calls.map((c) => ({ ...c })));
  const listCalls = async (since) => (await calls()).slice(since).filter((c) => c.function_id === 'directory::skills::list');
  const open = async (key) => {
    await filter.fill(key);
    await row(key).click();
    await root.locator(`.dir-doc-id`, { hasText: key }).waitFor();
    await root.locator('.dir-badge', { hasText: 'saving' }).waitFor({ state: 'detached' });
  };
  const waitDisk = async (rel, predicate, what) => {
    const deadline = Date.now() + WAIT_MS;
    while (!predicate(existsSync(join(TREE_DIR, rel)) ? disk(rel) : null)) {
      assert.ok(Date.now() < deadline, `timed out waiting for ${rel} to ${what}`);
      await new Promise((r) => setTimeout(r, 25));
    }
  };

  // ---- Load: the console's asset triggers, setup, the first rows -------------------------
  step('loading the harness');
  await page.goto(HARNESS_URL);
  figures.setup_to_first_rows_ms = round(
    await within(page.evaluate(() => window.__harness.firstRows), 4 * WAIT_MS, 'the first list rows'),
  );
  const total = SKILLS;
  await page.waitForFunction(
    (least) => {
      const text = document.querySelector('[data-iii-ui="iii-directory"] .dir-count')?.textContent || '';
      const match = /^[\d,]+ of ([\d,]+)$/.exec(text);
      return match && Number(match[1].replace(/,/g, '')) >= least;
    },
    total,
  );
  const shown = Number((await count.textContent()).split(' of ')[1].replace(/,/g, ''));
  assert.ok(shown >= total, `the list shows ${shown} skills, the tree has at least ${total}`);
  figures.rows = shown;
  const rowsInDom = await root.locator('.dir-row').count();
  assert.ok(rowsInDom > 10 && rowsInDom <= MAX_ROWS_IN_DOM, `${rowsInDom} rows in the DOM for ${shown} skills`);
  figures.rows_in_dom = rowsInDom;

  const assets = await page.evaluate(() => window.__harness.assets());
  assert.deepEqual(
    assets.map((a) => [a.path, a.kind, a.contentType]).sort(),
    [
      ['iii-directory/page.js', 'script', 'text/javascript; charset=utf-8'],
      ['iii-directory/styles.css', 'style', 'text/css; charset=utf-8'],
    ],
  );
  assert.deepEqual(await page.evaluate(() => window.__harness.log.refused), []);

  // Every stylesheet rule is scoped under the worker's wrapper; no @font-face.
  const unscoped = await page.evaluate(() => {
    const sheet = [...document.styleSheets].find((s) => s.ownerNode && s.ownerNode.dataset.asset === 'iii-directory/styles.css');
    const bad = [];
    let rules = 0;
    const visit = (list) => {
      for (const rule of list) {
        if (rule instanceof CSSStyleRule) {
          rules += 1;
          for (const selector of rule.selectorText.split(',')) {
            if (!selector.trim().startsWith('[data-iii-ui="iii-directory"]')) bad.push(selector.trim());
          }
        } else if (rule instanceof CSSFontFaceRule) bad.push('@font-face');
        else if (rule.cssRules) visit(rule.cssRules);
      }
    };
    visit(sheet.cssRules);
    return { bad, rules };
  });
  assert.deepEqual(unscoped.bad, [], 'unscoped CSS rules');
  assert.ok(unscoped.rules > 50, `${unscoped.rules} rules parsed`);

  // Live: one browser function and one binding per family.
  await root.locator('.dir-live--on').waitFor();
  const browserId = await page.evaluate(() => window.__harness.browserId);
  const sent = await page.evaluate(() => window.__harness.log.sent);
  for (const family of ['skills', 'system-prompts', 'agents']) {
    const key = family === 'system-prompts' ? 'prompts' : family;
    const fn = `iii-directory::ui::on-change::${key}::${browserId}`;
    assert.ok(sent.some((f) => f.type === 'registerfunction' && f.id === fn), `registerfunction ${fn}`);
    assert.ok(
      sent.some((f) => f.type === 'registertrigger' && f.trigger_type === `directory::${family}::on-change` && f.function_id === fn),
      `registertrigger for ${family}`,
    );
  }
  assert.deepEqual(await page.evaluate(() => window.__harness.log.bindingErrors), []);

  // ---- Scrolling: the end of the list, still only the rows in view -------------------------
  step('scrolling to the end');
  await root.locator('.dir-list').evaluate((list) => {
    list.scrollTop = list.scrollHeight;
    list.dispatchEvent(new Event('scroll'));
  });
  await root.locator(`.dir-row[style*="translateY(${(shown - 1) * ROW_HEIGHT}px)"]`).waitFor();
  assert.ok((await root.locator('.dir-row').count()) <= MAX_ROWS_IN_DOM);

  // ---- Filtering: keystroke to repaint ---------------------------------------------------
  step('timing filter keystrokes');
  await page.evaluate(() => {
    window.__measureKey = () =>
      new Promise((resolve) => {
        const host = document.getElementById('page-host');
        const input = document.querySelector('[data-iii-ui="iii-directory"] .dir-filter');
        let keyAt = null;
        let lastMutation = null;
        let paintedMutation = null;
        let paintedAt = null;
        let quietFrames = 0;
        const started = performance.now();
        input.addEventListener('keydown', (event) => (keyAt = event.timeStamp), { once: true, capture: true });
        const observer = new MutationObserver(() => (lastMutation = performance.now()));
        observer.observe(host, { subtree: true, childList: true, characterData: true, attributes: true });
        const tick = () => {
          if (keyAt != null && lastMutation != null) {
            if (lastMutation !== paintedMutation) {
              paintedMutation = lastMutation;
              paintedAt = performance.now();
              quietFrames = 0;
            } else quietFrames += 1;
          }
          if (quietFrames >= 3 || performance.now() - started > 3000) {
            observer.disconnect();
            resolve(paintedAt == null ? null : paintedAt - keyAt);
            return;
          }
          requestAnimationFrame(tick);
        };
        requestAnimationFrame(tick);
      });
  });
  await filter.fill('');
  await filter.focus();
  const keystrokes = [];
  for (const key of [...'stream'].concat(Array(6).fill('Backspace'))) {
    await page.evaluate(() => {
      window.__measured = window.__measureKey();
    });
    await page.keyboard.press(key);
    const ms = await within(page.evaluate(() => window.__measured), WAIT_MS, 'a keystroke repaint');
    if (ms != null) keystrokes.push(ms);
  }
  assert.ok(keystrokes.length >= 10, `measured ${keystrokes.length} keystrokes`);
  figures.filter_keystroke_ms = { median: round(median(keystrokes)), max: round(Math.max(...keystrokes)), samples: keystrokes.length };

  const unique = generatedSkillId(1234);
  assert.ok(unique, 'the generated tree has skill number 1234');
  await filter.fill('');
  for (const key of '-1234') await page.keyboard.press(key);
  await count.filter({ hasText: /^1 of / }).waitFor();
  assert.equal(await root.locator('.dir-row').count(), 1);
  assert.equal(await root.locator('.dir-row').getAttribute('data-key'), unique);

  // ---- Reading: rendered markdown, frontmatter apart, nothing unsafe ------------------------
  step('opening a skill');
  await open(SHOWCASE);
  await docTitle.filter({ hasText: 'Showcase' }).waitFor();
  const preview = root.locator('.dir-preview');
  await preview.locator('.dir-front dt', { hasText: 'description' }).waitFor();
  // The title shows once: in the header, not again as the body's first heading.
  assert.equal(await preview.locator('.dir-md h1').count(), 0, 'the repeated H1 is left out');
  assert.equal(await docTitle.textContent(), 'Showcase');
  assert.equal(await preview.locator('.dir-md h2').textContent(), 'A list');
  assert.equal(await preview.locator('.dir-md strong').first().textContent(), 'bold');
  assert.equal(await preview.locator('.dir-md a[href="https://example.com/docs"]').getAttribute('rel'), 'noopener noreferrer nofollow');
  assert.equal(await preview.locator('.dir-md a').count(), 1, 'only the https link is a link');
  assert.equal(await preview.locator('.dir-md script, .dir-md img').count(), 0);
  assert.equal(await preview.locator('.dir-md ul ul li').textContent(), 'nested');
  assert.equal(await preview.locator('.dir-md ol li').count(), 2);
  assert.equal(await preview.locator('.dir-md td').last().textContent(), '1');
  assert.equal(await preview.locator('.dir-md td').first().evaluate((td) => getComputedStyle(td).overflowWrap), 'normal', 'words stay whole in tables');

  // ---- Hostile markdown: a list nested thousands deep threw (a level of recursion each) and
  // took the whole page down; a paragraph of openers without closers froze the tab ----------
  step('hostile markdown');
  const HOSTILE = 'fixtures/hostile';
  writeOnDisk(
    `skills/${HOSTILE}.md`,
    `# Hostile\n\n${'- '.repeat(3000)}deepest\n\n${'> '.repeat(3000)}quoted\n\n${'*a '.repeat(20000)}\n\n${'[a '.repeat(20000)}\n\n# b${' '.repeat(20000)}c\n`,
  );
  const hostileAt = Date.now();
  await open(HOSTILE);
  await preview.locator('.dir-md p', { hasText: 'quoted' }).waitFor();
  const hostileText = await preview.locator('.dir-md').textContent();
  for (const shown of ['deepest', '*a *a', '[a [a']) assert.ok(hostileText.includes(shown), `the preview shows ${shown}`);
  assert.match(await preview.locator('.dir-md h1').textContent(), /^b\s+c$/);
  assert.ok(Date.now() - hostileAt < WAIT_MS / 2, `the hostile file took ${Date.now() - hostileAt} ms to show`);
  assert.equal(await page.locator('.harness-page-error').count(), 0, 'the page is still there');
  assert.deepEqual(problems, []);
  await open(SHOWCASE);
  unlinkSync(join(TREE_DIR, `skills/${HOSTILE}.md`));

  // ---- Text that reorders itself: shown marked, and said so -------------------------------
  step('reordering characters');
  const REORDERED = 'fixtures/reordered';
  // U+202E shows what follows it reversed: without the page's care the title reads "Report
  // gpj.exe" where the file says "Report exe.jpg".
  writeOnDisk(`skills/${REORDERED}.md`, '---\ndescription: Opens \u202Eexe.jpg\n---\n# Report \u2066gpj\u2069.exe\n\nRun \u202Etpircs\n');
  await open(REORDERED);
  const reorderedRow = await row(REORDERED).textContent();
  assert.ok(!/[\u202A-\u202E\u2066-\u2069]/.test(reorderedRow), `the row holds no reordering character: ${JSON.stringify(reorderedRow)}`);
  assert.ok(reorderedRow.includes('Report \uFFFDgpj\uFFFD.exe') && reorderedRow.includes('Opens \uFFFDexe.jpg'), reorderedRow);
  const reorderedPreview = await preview.locator('.dir-md').textContent();
  assert.ok(reorderedPreview.includes('Run \uFFFDtpircs') && !reorderedPreview.includes('\u202E'), reorderedPreview);
  assert.match(await root.locator('.dir-reordering').textContent(), /holds 4 characters that reverse/);
  await open(SHOWCASE);
  assert.equal(await root.locator('.dir-reordering').count(), 0, 'a plain text says nothing of it');
  unlinkSync(join(TREE_DIR, `skills/${REORDERED}.md`));

  // ---- The splitter: drag it, and the width is remembered ------------------------------------
  step('the splitter');
  const listPane = root.locator('.dir-pane--list');
  const splitter = root.locator('.dir-splitter');
  const widthBefore = (await listPane.boundingBox()).width;
  const grip = await splitter.boundingBox();
  await page.mouse.move(grip.x + grip.width / 2, grip.y + 200);
  await page.mouse.down();
  await page.mouse.move(grip.x + grip.width / 2 + 120, grip.y + 200, { steps: 6 });
  await page.mouse.up();
  const widthAfter = (await listPane.boundingBox()).width;
  assert.ok(Math.abs(widthAfter - widthBefore - 120) <= 2, `the list went from ${widthBefore} to ${widthAfter} px`);
  assert.equal(Number(await page.evaluate(() => localStorage.getItem('iii-directory:list-width'))), Math.round(widthAfter));
  assert.equal(await preview.locator('.dir-md pre code').textContent(), 'iii trigger directory::skills::list');
  assert.match(await preview.locator('.dir-md').textContent(), /<script>window.__pwned = true<\/script> stay text/);
  assert.match(await preview.locator('.dir-md').textContent(), /snake_case_words/);
  assert.equal(await page.evaluate(() => window.__pwned), undefined);

  // ---- Editing: save with Ctrl+S, the file on disk changes, the list follows ---------------
  step('editing and saving');
  await button('Edit').click();
  const edited = showcase('Showcase, edited');
  await editor.fill(edited);
  await dirtyBadge.waitFor();
  await editor.press('Control+s');
  await dirtyBadge.waitFor({ state: 'detached' });
  await waitDisk(SHOWCASE_FILE, (text) => text === edited, 'hold the edit');
  await row(SHOWCASE).locator('.dir-cell--title', { hasText: 'Showcase, edited' }).waitFor();

  // Save timing: Ctrl+S to the page showing the document saved (no unsaved marker, no
  // "saving…"), the last save putting the edited text back.
  const saves = [];
  for (const title of ['Save 1', 'Save 2', 'Save 3', 'Save 4', 'Showcase, edited']) {
    const text = showcase(title);
    step(`timing a save (${title})`);
    await editor.fill(text);
    await dirtyBadge.waitFor();
    await page.evaluate(() => {
      window.__saved = new Promise((resolve) => {
        const host = document.getElementById('page-host');
        let keyAt = null;
        document.addEventListener('keydown', (event) => (keyAt = event.timeStamp), { once: true, capture: true });
        const done = () => keyAt != null && !host.querySelector('.dir-badge--dirty') && ![...host.querySelectorAll('.dir-badge')].some((b) => b.textContent.startsWith('saving'));
        const observer = new MutationObserver(() => {
          if (done()) {
            observer.disconnect();
            window.__harness.afterPaint().then(() => resolve(performance.now() - keyAt));
          }
        });
        observer.observe(host, { subtree: true, childList: true, characterData: true });
      });
    });
    await editor.press('Control+s');
    saves.push(await within(page.evaluate(() => window.__saved), WAIT_MS, 'a save to show'));
    await waitDisk(SHOWCASE_FILE, (disk) => disk === text, `hold ${title}`);
    // The list has the save too (its change event came back) before the next edit.
    await row(SHOWCASE).locator('.dir-cell--title', { hasText: title }).waitFor();
    await page.waitForTimeout(150);
  }
  figures.save_ms = { median: round(median(saves)), max: round(Math.max(...saves)), samples: saves.length };

  // ---- Split view: the preview follows the draft -----------------------------------------
  await button('Split').click();
  await editor.fill(edited.replace('# Showcase', '# Draft heading'));
  await root.locator('.dir-split .dir-md h1', { hasText: 'Draft heading' }).waitFor();
  await button('Revert').click();
  await root.locator('.dir-split .dir-md h1', { hasText: 'Showcase' }).waitFor();
  await button('Edit').click();

  // ---- A coded error next to the editor; nothing written -----------------------------------
  step('a coded error');
  await editor.fill('---\ntitle: Empty\n---\n');
  await button('Save').click();
  const error = root.locator('.dir-pane--doc .dir-error');
  await error.filter({ hasText: /^D113 invalid_input: / }).waitFor();
  assert.equal(disk(SHOWCASE_FILE), edited, 'a refused save writes nothing');
  // A text holding an unpaired UTF-16 surrogate (pasted from a broken source) is no text a
  // file can hold, and a call carrying it was never answered: the save said, 20 s later, that
  // the worker was busy. The page says what is wrong at once and sends nothing.
  const updatesBefore = (await calls()).filter((c) => c.function_id === 'directory::skills::update').length;
  await editor.evaluate((box, text) => {
    Object.getOwnPropertyDescriptor(HTMLTextAreaElement.prototype, 'value').set.call(box, text.replace('Some', 'S\ud800ome'));
    box.dispatchEvent(new Event('input', { bubbles: true }));
  }, edited);
  await dirtyBadge.waitFor();
  const brokenAt = Date.now();
  await button('Save').click();
  await error.filter({ hasText: /unpaired surrogate/ }).waitFor({ timeout: 5000 });
  assert.ok(Date.now() - brokenAt < 5000, 'said at once');
  assert.equal((await calls()).filter((c) => c.function_id === 'directory::skills::update').length, updatesBefore, 'nothing sent');
  assert.equal(disk(SHOWCASE_FILE), edited);
  // The next save that asks first does not leave the last one's error beside its question.
  await editor.fill(edited.replace(/^title: .*$/m, 'title: [unclosed'));
  await button('Save').click();
  await root.locator('.dir-ask').waitFor();
  assert.equal(await error.count(), 0, 'the earlier error is gone');
  await button('Keep editing').click();
  await button('Revert').click();
  assert.equal(await editor.inputValue(), edited);
  await dirtyBadge.waitFor({ state: 'detached' });

  // ---- Broken frontmatter: the server's reading is shown, and a save asks first ---------------
  step('a broken-frontmatter save asks first');
  const broken = edited.replace(/^title: .*$/m, 'title: [unclosed');
  await editor.fill(broken);
  const check = root.locator('.dir-check--problem');
  await check.filter({ hasText: 'not valid YAML' }).waitFor();
  await check.filter({ hasText: 'The list will show Showcase' }).waitFor();
  await button('Save').click();
  const ask = root.locator('.dir-ask');
  await ask.filter({ hasText: 'The server will read this differently' }).waitFor();
  await page.waitForTimeout(300);
  assert.equal(disk(SHOWCASE_FILE), edited, 'nothing is written before the answer');
  mkdirSync(OUT_DIR, { recursive: true });
  await page.screenshot({ path: join(OUT_DIR, 'ask-before-save.png') });
  await button('Keep editing').click();
  await ask.waitFor({ state: 'detached' });
  assert.equal(await editor.inputValue(), broken, 'the draft stays');
  await editor.press('Control+s');
  await ask.waitFor();
  await button('Save anyway').click();
  await waitDisk(SHOWCASE_FILE, (text) => text === broken, 'hold the broken frontmatter');
  await dirtyBadge.waitFor({ state: 'detached' });
  await root.locator('.dir-badge', { hasText: 'saving' }).waitFor({ state: 'detached' });
  // Back to the clean text (the steps below start from it).
  await editor.fill(edited);
  await editor.press('Control+s');
  await waitDisk(SHOWCASE_FILE, (text) => text === edited, 'hold the edit again');
  await dirtyBadge.waitFor({ state: 'detached' });

  // ---- Create (with the id rules) and delete ------------------------------------------------
  step('creating and deleting');
  await button('New').click();
  const newId = root.locator('#dir-new-id');
  await newId.fill('Bad Id');
  await root.locator('.dir-field-error').waitFor();
  assert.equal(await button('Create').isDisabled(), true);
  await newId.fill(SHOWCASE);
  await button('Create').click();
  await root.locator('.dir-pane--doc .dir-error').filter({ hasText: /^D114 invalid_input: / }).waitFor();
  const created = 'fixtures/made-in-browser';
  await newId.fill(created);
  // The list's refresh comes after the new document's own read here (held back 1.5 s): until it
  // lists the document, its absence from the list is no "Deleted on disk" (the page said so).
  await page.evaluate(() => {
    window.__seenNotices = [];
    window.__noticeWatch = new MutationObserver(() => {
      for (const notice of document.querySelectorAll('[data-iii-ui] .dir-notice')) window.__seenNotices.push(notice.textContent);
    });
    window.__noticeWatch.observe(document.getElementById('page-host'), { subtree: true, childList: true, characterData: true });
    const send = WebSocket.prototype.send;
    window.__plainSend = send;
    WebSocket.prototype.send = function slowLists(data) {
      if (typeof data === 'string' && data.includes('"function_id":"directory::skills::list"')) setTimeout(() => send.call(this, data), 1500);
      else send.call(this, data);
    };
  });
  await button('Create').click();
  await root.locator('.dir-doc-id', { hasText: created }).waitFor();
  await waitDisk(`skills/${created}.md`, (text) => text != null && text.startsWith('# Made in browser'), 'be created');
  await count.filter({ hasText: new RegExp(`of ${(shown + 1).toLocaleString('en')}$`) }).waitFor();
  assert.deepEqual(
    await page.evaluate(() => {
      window.__noticeWatch.disconnect();
      WebSocket.prototype.send = window.__plainSend;
      return window.__seenNotices;
    }),
    [],
    'no notice while the list catches up with a document just created',
  );
  await root.getByRole('button', { name: 'Delete…' }).click();
  await root.locator('.dir-confirm').getByRole('button', { name: 'Delete', exact: true }).click();
  await waitDisk(`skills/${created}.md`, (text) => text == null, 'be deleted');
  // Nothing open: the list takes the whole width.
  await root.locator('.dir-pane--doc').waitFor({ state: 'detached' });
  const fullWidth = (await root.locator('.dir-pane--list').boundingBox()).width;
  assert.ok(fullWidth > 1300, `the list alone is ${fullWidth} px wide`);
  await count.filter({ hasText: new RegExp(`of ${shown.toLocaleString('en')}$`) }).waitFor();

  // ---- Live: an edit on disk appears without a reload; one list call per change --------------
  step('external edits');
  await open(SHOWCASE);
  await button('Preview').click();
  await page.waitForTimeout(1500);
  // (Its heartbeat, `index::status` every 20 s, aside.)
  const notHeartbeat = async () => (await calls()).filter((c) => c.function_id !== 'directory::index::status').length;
  const idleFrom = await notHeartbeat();
  await page.waitForTimeout(1500);
  assert.equal(await notHeartbeat(), idleFrom, 'an idle page makes no calls');
  const external = [];
  const perChange = [];
  for (let n = 1; n <= 3; n += 1) {
    const title = `Changed outside ${n}`;
    await page.evaluate((needle) => {
      window.__seen = new Promise((resolve) => {
        const host = document.getElementById('page-host');
        const observer = new MutationObserver(() => {
          const heading = host.querySelector('.dir-doc-title h2');
          if (heading && heading.textContent === needle) {
            observer.disconnect();
            window.__harness.afterPaint().then(() => resolve(performance.timeOrigin + performance.now()));
          }
        });
        observer.observe(host, { subtree: true, childList: true, characterData: true });
      });
    }, title);
    const before = (await calls()).length;
    const writtenAt = performance.timeOrigin + performance.now();
    writeOnDisk(SHOWCASE_FILE, showcase(title));
    const seenAt = await within(page.evaluate(() => window.__seen), WAIT_MS, `the page to show "${title}"`);
    external.push(seenAt - writtenAt);
    await page.waitForTimeout(600);
    const lists = await listCalls(before);
    perChange.push(lists.length);
    assert.equal(lists.length, 1, `one skills::list per change, saw ${lists.length}`);
    assert.ok('since_revision' in lists[0].payload, 'the refresh asks with the revision it holds');
    // An idle page's refresh after one change receives that one row, not the whole list.
    assert.deepEqual(
      lists[0].summary,
      { kind: 'delta', changed: [SHOWCASE], removed: [] },
      `the refresh after one change holds only the changed row: ${JSON.stringify(lists[0].summary)}`,
    );
  }
  figures.external_edit_to_screen_ms = { median: round(median(external)), max: round(Math.max(...external)), samples: external.length };
  figures.list_calls_per_change = perChange;
  const allLists = await listCalls(0);
  figures.first_list_answer_bytes = allLists[0].bytes;
  figures.list_answer_bytes = allLists[allLists.length - 1].bytes;
  // The wire part of the figures: the first list call, and the refreshes after an edit.
  figures.first_list_call_ms = round(allLists[0].ms);
  figures.refresh_list_call_ms = round(median(allLists.slice(-3).map((c) => c.ms)));

  // ---- A change on disk under an unsaved draft -----------------------------------------------
  step('a change on disk under a draft');
  await button('Edit').click();
  await editor.fill('my unsaved draft\n');
  await dirtyBadge.waitFor();
  const underDraft = showcase('Changed under the draft');
  writeOnDisk(SHOWCASE_FILE, underDraft);
  await root.locator('.dir-notice', { hasText: 'Changed on disk' }).waitFor();
  assert.equal(await editor.inputValue(), 'my unsaved draft\n', 'the draft is kept');
  await button('Load the disk version').click();
  await page.waitForFunction(
    (text) => document.querySelector('[data-iii-ui="iii-directory"] textarea.dir-editor')?.value === text,
    underDraft,
  );
  await dirtyBadge.waitFor({ state: 'detached' });

  // ---- A kept draft read again after a change on disk: said, never written over ---------------
  step('a kept draft read again after a change on disk');
  const draft2 = `${underDraft}DRAFT2\n`;
  await editor.fill(draft2);
  await dirtyBadge.waitFor();
  // Another document, the file changed meanwhile, then back: the draft is there, and so is the
  // change (the document is read again, and compared with the text the draft started from).
  await open(unique);
  // Leaving the console (closing the tab, reloading) with a draft kept asks first.
  const leaving = () =>
    page.evaluate(() => {
      const event = new Event('beforeunload', { cancelable: true });
      window.dispatchEvent(event);
      return event.defaultPrevented;
    });
  assert.equal(await leaving(), true, 'leaving with an unsaved draft asks first');
  const external2 = `${underDraft}EXTERNAL2\n`;
  writeOnDisk(SHOWCASE_FILE, external2);
  await filter.fill(SHOWCASE);
  await row(SHOWCASE).click();
  await root.locator('.dir-notice', { hasText: 'Changed on disk' }).waitFor();
  await button('Edit').click();
  assert.equal(await editor.inputValue(), draft2, 'the draft is kept');
  await button('Load the disk version').click();
  await page.waitForFunction(
    (text) => document.querySelector('[data-iii-ui="iii-directory"] textarea.dir-editor')?.value === text,
    external2,
  );
  await dirtyBadge.waitFor({ state: 'detached' });
  assert.equal(await leaving(), false, 'leaving without a draft does not ask');

  // A save a moment after a write on disk, before its change event can reach the page: the save
  // reads the file first, and asks instead of writing over it.
  step('a save right after a write on disk');
  const draft3 = `${external2}DRAFT3\n`;
  await editor.fill(draft3);
  await dirtyBadge.waitFor();
  const external3 = `${external2}EXTERNAL3\n`;
  writeOnDisk(SHOWCASE_FILE, external3);
  await editor.press('Control+s');
  await root.locator('.dir-notice', { hasText: 'Changed on disk' }).waitFor();
  await page.waitForTimeout(300);
  assert.equal(disk(SHOWCASE_FILE), external3, 'the change on disk stays');
  assert.equal(await editor.inputValue(), draft3, 'the draft stays');
  // Keeping the draft is a choice; the save after it writes the draft.
  await button('Keep my draft').click();
  await editor.press('Control+s');
  await waitDisk(SHOWCASE_FILE, (text) => text === draft3, 'hold the kept draft');
  await dirtyBadge.waitFor({ state: 'detached' });
  await root.locator('.dir-badge', { hasText: 'saving' }).waitFor({ state: 'detached' });

  // Ctrl+S with the focus in the filter saves the open draft (not the browser's "Save page as").
  const draft4 = `${draft3}DRAFT4\n`;
  await editor.fill(draft4);
  await dirtyBadge.waitFor();
  await filter.focus();
  await page.keyboard.press('Control+s');
  await waitDisk(SHOWCASE_FILE, (text) => text === draft4, 'hold the draft saved from the filter');
  await dirtyBadge.waitFor({ state: 'detached' });
  await root.locator('.dir-badge', { hasText: 'saving' }).waitFor({ state: 'detached' });

  // A write that lands after the save's read and before its update (the update held in the
  // engine meanwhile): the read saw nothing to ask about, and the worker, handed the text the
  // draft started from as `base`, writes nothing over the other writer's bytes. The page shows
  // the change as the read would have, and keeps the draft.
  step("a write between the save's read and its update");
  const UPDATE = 'directory::skills::update';
  const draft5 = `${draft4}DRAFT5\n`;
  await editor.fill(draft5);
  await dirtyBadge.waitFor();
  await engineCalls('hold', UPDATE);
  const savedFrom = (await calls()).length;
  await editor.press('Control+s');
  const heldBy = Date.now() + WAIT_MS;
  while ((await engineCalls('held', UPDATE)) !== 1) {
    assert.ok(Date.now() < heldBy, 'the update reaches the engine');
    await page.waitForTimeout(20);
  }
  const external5 = `${draft4}EXTERNAL5\n`;
  writeOnDisk(SHOWCASE_FILE, external5);
  assert.equal(await engineCalls('release', UPDATE), 1, 'one update released');
  await root.locator('.dir-notice', { hasText: 'Changed on disk' }).waitFor();
  await root.locator('.dir-badge', { hasText: 'saving' }).waitFor({ state: 'detached' });
  const update = (await calls()).slice(savedFrom).find((c) => c.function_id === UPDATE);
  assert.equal(update.payload.base, draft4, 'the update carries the text the draft started from');
  assert.match(update.error || '', /D118 conflict: /, 'the worker refuses the update');
  assert.equal(disk(SHOWCASE_FILE), external5, "the other writer's bytes stay");
  assert.equal(await editor.inputValue(), draft5, 'the draft stays');
  assert.equal(await root.locator('.dir-error').count(), 0, 'said as the change it is, not as an error');
  // The disk's text is the document's now: keeping the draft saves it over that, knowingly.
  await button('Keep my draft').click();
  await editor.press('Control+s');
  await waitDisk(SHOWCASE_FILE, (text) => text === draft5, 'hold the draft kept over the change');
  await dirtyBadge.waitFor({ state: 'detached' });
  await root.locator('.dir-badge', { hasText: 'saving' }).waitFor({ state: 'detached' });
  await button('Preview').click();

  // ---- The list-refresh seam: deltas merge (the since_revision protocol) -----------------------
  const merged = await page.evaluate(() => {
    const { mergeListAnswer } = window.__harness.module;
    const r = (id, title) => ({ id, title, type: null, function_id: null, disable_model_invocation: false, description: '', bytes: 1, modified_at: '' });
    const state = mergeListAnswer('skills', { rows: null, revision: null }, { skills: [r('a', 'A'), r('b', 'B'), r('c', 'C')], revision: 4 });
    const same = mergeListAnswer('skills', state, { unchanged: true, revision: 4 });
    const delta = mergeListAnswer('skills', state, { revision: 5, changed: [r('b', 'B2'), r('d', 'D')], removed: ['a'] });
    const full = mergeListAnswer('skills', delta, { full: true, skills: [r('z', 'Z')], revision: 6 });
    return {
      same: same.rows === state.rows,
      delta: delta.rows.map((x) => `${x.key}:${x.title}`),
      revision: delta.revision,
      full: full.rows.map((x) => x.key),
    };
  });
  assert.deepEqual(merged, { same: true, delta: ['b:B2', 'c:C', 'd:D'], revision: 5, full: ['z'] });

  // ---- A whole list longer than the engine carries: asked again without descriptions ----------
  const fallback = await page.evaluate(() => {
    const { listRequest, retryWithoutDescriptions } = window.__harness.module;
    const refused = 'D120 too_large: the answer is 17682351 bytes of JSON, more than the 16760832 the iii engine carries in one message.';
    return {
      first: retryWithoutDescriptions('skills', { revision: null }, refused),
      again: retryWithoutDescriptions('skills', { revision: null, withoutDescriptions: true }, refused),
      other: retryWithoutDescriptions('skills', { revision: null }, 'D110 not_found: skill "x" does not exist.'),
      agents: retryWithoutDescriptions('agents', { revision: null }, refused),
      request: listRequest('skills', { revision: null, withoutDescriptions: true }),
      later: listRequest('skills', { revision: 7, withoutDescriptions: true }),
      usual: listRequest('skills', { revision: 7 }),
    };
  });
  assert.deepEqual(fallback, {
    first: true,
    again: false,
    other: false,
    agents: false,
    request: { since_revision: 0, include_description: false },
    later: { since_revision: 7, include_description: false },
    usual: { since_revision: 7 },
  });

  // ---- System prompts and agent profiles -------------------------------------------------------
  step('system prompts and agent profiles');
  await root.getByRole('tab', { name: /System prompts/ }).click();
  await root.locator('.dir-row[data-key^="prompt-"]').first().click();
  await root.locator('.dir-front dt', { hasText: 'description' }).waitFor();
  // A text the server refuses (a list where the description is one string): the save says why,
  // once, without the bus's next steps, and offers no "Save anyway".
  step('a refused prompt save');
  await button('Edit').click();
  await editor.fill('---\ndescription: [a, b]\n---\nList description.\n');
  await root.locator('.dir-check-refused', { hasText: 'D213' }).waitFor();
  await editor.press('Control+s');
  const promptError = root.locator('.dir-pane--doc .dir-error');
  await promptError.filter({ hasText: /^D213 / }).waitFor();
  assert.equal(await root.locator('.dir-ask').count(), 0, 'no "Save anyway" for a refused text');
  assert.doesNotMatch(await promptError.textContent(), /Next: call/);
  assert.equal(await root.locator('.dir-check-refused').count(), 0, 'the refusal is said once');
  await button('Revert').click();
  // A bundled prompt cannot be deleted, and the page says so instead of offering it; it is not
  // read-only (an update writes the user's own copy), and the page does not say it is.
  await filter.fill('iii-runtime');
  await row('iii-runtime').click();
  await root.locator('.dir-read-only').waitFor();
  assert.equal(await root.getByRole('button', { name: 'Delete…' }).isDisabled(), true);
  assert.match(await root.locator('.dir-read-only').textContent(), /cannot be deleted; a save writes your own copy/);
  await root.getByRole('tab', { name: /Agent profiles/ }).click();
  await open('chain-c');
  const chain = root.locator('.dir-chain .dir-chip');
  await chain.nth(3).waitFor();
  assert.deepEqual(await chain.allTextContents(), ['chain-c', 'chain-b', 'chain-a', 'iii']);
  // A profile up the chain changes on disk: the open profile's own file did not, but what it
  // resolves to did (the list's delta carries its row), and the page shows it (it kept the old).
  const resolved = root.locator('.dir-resolved');
  await resolved.locator('summary').click();
  await resolved.locator('.dir-md', { hasText: 'First link.' }).waitFor();
  writeOnDisk('agents/chain-a.md', '---\nname: Chain A\nextends: iii\n---\nFirst link, changed up the chain.\n');
  await resolved.locator('.dir-md', { hasText: 'First link, changed up the chain.' }).waitFor();
  await open('broken-x');
  await root.locator('.dir-chain .dir-chip--warn', { hasText: 'unknown' }).waitFor();
  await root.locator('.dir-warning', { hasText: /^D415 invalid_input: / }).waitFor();

  // ---- The agent profile form: it edits the frontmatter, exactly, and leaves the body ------------
  step('the profile form');
  const profileFile = 'agents/chain-b.md';
  const profileBefore = disk(profileFile);
  await open('chain-b');
  await button('Fields').click();
  const form = root.locator('.dir-form');
  await form.waitFor();
  // Text boxes and selects are one height, wherever they sit in the form.
  const heights = await form.locator('.dir-input').evaluateAll((boxes) => boxes.map((box) => Math.round(box.getBoundingClientRect().height)));
  assert.ok(heights.length >= 7 && heights.every((height) => height === heights[0]), `the form's boxes are ${heights.join(', ')} px high`);
  assert.equal(await form.locator('input[name="name"]').inputValue(), 'Chain B');
  await form.locator('input[name="description"]').fill('Reviews: the second link');
  await form.getByLabel('Colour').selectOption('teal');
  await form.getByLabel('Reasoning effort').selectOption('high');
  await form.getByLabel('Search skills to add').fill('showcase');
  await form.locator('.dir-suggestion[data-key="fixtures/showcase"]').click();
  await form.getByLabel('Extends').selectOption('chain-c');
  // The resolved chain shows the choice at once, loop included.
  await form.locator('.dir-chain .dir-chip--warn', { hasText: 'loop' }).waitFor();
  await form.getByLabel('Extends').selectOption('iii');
  assert.deepEqual(await form.locator('.dir-chain .dir-chip').allTextContents(), ['chain-b', 'iii']);
  await page.screenshot({ path: join(OUT_DIR, 'profile-form.png') });
  await button('Save').click();
  const expectedProfile = '---\nname: Chain B\nextends: iii\ndescription: "Reviews: the second link"\ncolor: teal\nreasoning_effort: high\nskills:\n  - fixtures/showcase\n---\nSecond link.\n';
  await waitDisk(profileFile, (text) => text === expectedProfile, 'hold the form\'s edit');
  const profileAfter = disk(profileFile);
  assert.equal(profileAfter.slice(profileAfter.lastIndexOf('---\n') + 4), profileBefore.slice(profileBefore.lastIndexOf('---\n') + 4), 'the body is unchanged');
  const linesBefore = profileBefore.split('\n');
  const linesAfter = profileAfter.split('\n');
  const diff = [...linesBefore.filter((line) => !linesAfter.includes(line)).map((line) => `-${line}`), ...linesAfter.filter((line) => !linesBefore.includes(line)).map((line) => `+${line}`)];
  figures.profile_form_diff = diff;
  // The raw text is one click away, and shows the same file.
  await button('Edit').click();
  assert.equal(await editor.inputValue(), expectedProfile);
  // An icon the server refuses: its refusal shows once, in the error of the save.
  await editor.fill(expectedProfile.replace('color: teal\n', 'color: teal\nicon: bogus\n'));
  await root.locator('.dir-check-refused').waitFor();
  await button('Save').click();
  await root.locator('.dir-pane--doc .dir-error').waitFor();
  assert.equal(await root.locator('.dir-check-refused').count(), 0, 'the refusal is said once');
  await button('Revert').click();
  await button('Preview').click();

  // ---- Problems where they are made: markers on rows, and a filter of their own ---------------
  step('problem markers');
  await filter.fill('');
  const brokenMarker = row('broken-x').locator('.dir-marker');
  await brokenMarker.waitFor();
  assert.match(await brokenMarker.getAttribute('title'), /^broken extends: D415 /);
  assert.equal(await row('chain-c').locator('.dir-marker').count(), 0, 'a sound profile has no marker');
  await root.locator('.dir-problems').click();
  await count.filter({ hasText: /with problems$/ }).waitFor();
  assert.deepEqual(await root.locator('.dir-row').evaluateAll((rows) => rows.map((r) => r.dataset.key)), ['broken-x']);
  await root.locator('.dir-problems').click();
  // Skipped files: the index's own list (index::status), in the skills' problems filter.
  await root.getByRole('tab', { name: /Skills/ }).click();
  const skippedFile = 'skills/bad/Not Valid.md';
  writeOnDisk(skippedFile, '# Not valid\n\nIts id breaks the rules.\n');
  await root.locator('.dir-problems').click();
  await filter.fill('not valid');
  const skippedRow = root.locator('.dir-row[data-key$="/bad/Not Valid.md"]');
  await skippedRow.waitFor({ timeout: 3 * WAIT_MS });
  assert.match(await skippedRow.locator('.dir-marker').getAttribute('title'), /id/);
  await skippedRow.click();
  await root.locator('.dir-pane--doc .dir-warning').waitFor();
  assert.match(await root.locator('.dir-pane--doc code').textContent(), /bad\/Not Valid\.md$/);
  await page.screenshot({ path: join(OUT_DIR, 'problems.png') });
  await filter.fill('');
  await root.locator('.dir-problems').click();
  await root.getByRole('tab', { name: /Agent profiles/ }).click();

  // ---- A remembered document deleted on disk while another tab is shown ---------------------------
  step('a remembered document deleted while away');
  const doomed = 'fixtures/doomed';
  writeOnDisk(`skills/${doomed}.md`, '# Doomed\n');
  await root.getByRole('tab', { name: /Skills/ }).click();
  await filter.fill(doomed);
  await row(doomed).click();
  await root.locator('.dir-doc-id', { hasText: doomed }).waitFor();
  await root.getByRole('tab', { name: /Agent profiles/ }).click();
  unlinkSync(join(TREE_DIR, `skills/${doomed}.md`));
  await page.waitForTimeout(1000);
  await root.getByRole('tab', { name: /Skills/ }).click();
  await root.locator('.dir-notice--gone', { hasText: `Deleted on disk. skill ${doomed} no longer exists.` }).waitFor();
  await root.locator('.dir-pane--doc').waitFor({ state: 'detached' });
  assert.equal(await root.locator('.dir-error--read').count(), 0, 'no raw not_found and no useless Retry');
  await root.getByRole('tab', { name: /Agent profiles/ }).click();

  // ---- A skill another tool owns (under the agents skills root) ---------------------------------
  // The server refuses its update and delete (D116); the page asks its dry run and offers neither.
  step('a skill under the agents skills root');
  await root.getByRole('tab', { name: /Skills/ }).click();
  await open('agent-tool');
  await root.locator('.dir-read-only', { hasText: /^D116 .*agents skills root/ }).waitFor();
  assert.equal(await root.getByRole('button', { name: 'Delete…' }).isDisabled(), true);
  assert.doesNotMatch(await root.locator('.dir-read-only').textContent(), /Next: call/);
  await filter.fill('');
  await root.getByRole('tab', { name: /Agent profiles/ }).click();

  // ---- The worker stopped and started under the open page ----------------------------------------
  step('the worker stopped and started under the open page');
  await root.getByRole('tab', { name: /Skills/ }).click();
  await open(SHOWCASE);
  await root.locator('.dir-live--on').waitFor();
  await control('stop');
  // The page learns it from its next call: opening another document.
  await filter.fill('iii-directory/finding-functions');
  await row('iii-directory/finding-functions').click();
  const readError = root.locator('.dir-pane--doc .dir-error--read');
  await readError.filter({ hasText: 'The iii-directory worker is not running' }).waitFor();
  assert.doesNotMatch(await readError.textContent(), /not found in namespace|Function directory::/, 'no raw engine message');
  await root.locator('.dir-live--missing', { hasText: 'Worker not running' }).waitFor();
  await root.locator('.dir-banner', { hasText: 'worker is not running' }).waitFor();
  await page.screenshot({ path: join(OUT_DIR, 'worker-not-running.png') });
  // A retry while it is still gone asks again, and says so again.
  const beforeRetry = (await calls()).length;
  await readError.getByRole('button', { name: 'Retry' }).click();
  await page.waitForFunction((n) => window.__harness.log.calls.length > n && window.__harness.log.calls.slice(n).every((c) => c.error || c.ms), beforeRetry);
  await readError.filter({ hasText: 'The iii-directory worker is not running' }).waitFor();
  const backFrom = (await calls()).length;
  await control('start');
  // Back by itself: Live again, the open document read, the list caught up from its revision.
  await root.locator('.dir-live--on').waitFor({ timeout: 6 * WAIT_MS });
  await readError.waitFor({ state: 'detached' });
  await root.locator('.dir-banner').waitFor({ state: 'detached' });
  await docTitle.filter({ hasText: /./ }).waitFor();
  await root.locator('.dir-pane--doc .dir-md').waitFor();
  const caughtUp = (await listCalls(backFrom)).filter((c) => !c.error);
  assert.ok(caughtUp.length >= 1 && caughtUp.every((c) => c.payload.since_revision > 0), `the list asks with its revision: ${JSON.stringify(caughtUp.map((c) => c.payload))}`);
  // Live updates reach the page again (the engine hands the page's bindings to the new worker).
  writeOnDisk(SHOWCASE_FILE, showcase('After the restart'));
  await filter.fill(SHOWCASE);
  await row(SHOWCASE).locator('.dir-cell--title', { hasText: 'After the restart' }).waitFor({ timeout: 3 * WAIT_MS });
  writeOnDisk(SHOWCASE_FILE, underDraft);
  await row(SHOWCASE).locator('.dir-cell--title', { hasText: 'Changed under the draft' }).waitFor();

  // ---- Themes: light and dark, from the console's variables ------------------------------------
  step('themes and screenshots');
  await root.getByRole('tab', { name: /Skills/ }).click();
  // A real document for the pictures: one of the worker's bundled skills.
  await open('iii-directory/authoring-skills');
  await docTitle.filter({ hasText: 'Authoring skills and system prompts' }).waitFor();
  await root.locator('.dir-md h2', { hasText: 'Frontmatter' }).waitFor();
  await filter.fill('');
  await page.evaluate(() => document.activeElement && document.activeElement.blur());
  await page.mouse.move(0, 0);
  mkdirSync(OUT_DIR, { recursive: true });
  const background = () => root.locator('.dir').evaluate((el) => getComputedStyle(el).backgroundColor);
  assert.equal(await root.locator('.dir').getAttribute('data-theme'), 'light');
  assert.equal(await background(), 'rgb(255, 255, 255)');
  await page.screenshot({ path: join(OUT_DIR, 'light.png') });
  await page.evaluate(() => window.__harness.setTheme('dark'));
  await root.locator('.dir[data-theme="dark"]').waitFor();
  assert.equal(await background(), 'rgb(16, 19, 23)');
  assert.equal(await root.locator('.dir-md').evaluate((el) => getComputedStyle(el).color), 'rgb(223, 228, 234)');
  await page.screenshot({ path: join(OUT_DIR, 'dark.png') });
  await page.evaluate(() => window.__harness.setTheme('light'));

  // ---- A 700 px console: the header holds on one line --------------------------------------------
  step('a 700 px layout');
  await page.setViewportSize({ width: 700, height: 800 });
  await root.locator('.dir--narrow').waitFor();
  const header = await root.locator('.dir-header').boundingBox();
  assert.ok(header.height < 56, `the header is ${header.height} px high (one line)`);
  for (const tab of await root.locator('.dir-tab').all()) {
    const box = await tab.boundingBox();
    assert.ok(box.height < 32, `a tab wraps: ${await tab.textContent()} is ${box.height} px high`);
  }
  const liveBox = await root.locator('.dir-live').boundingBox();
  assert.ok(liveBox.height < 24 && liveBox.y > header.y && liveBox.y + liveBox.height < header.y + header.height, 'the live state sits on the header line');
  await page.screenshot({ path: join(OUT_DIR, 'narrow-700.png') });

  // ---- A narrow console: the list, or the document with a way back --------------------------
  step('a narrow layout');
  await page.setViewportSize({ width: 640, height: 800 });
  await root.locator('.dir--narrow').waitFor();
  assert.equal(await root.locator('.dir-pane--list').count(), 0, 'the open document fills a narrow page');
  await button('← List').click();
  await root.locator('.dir-pane--list').waitFor();
  assert.equal(await root.locator('.dir-pane--doc').count(), 0);
  await filter.fill('iii-directory/finding-functions');
  await row('iii-directory/finding-functions').click();
  await root.locator('.dir-pane--doc .dir-doc-id', { hasText: 'iii-directory/finding-functions' }).waitFor();
  assert.equal(await root.locator('.dir-pane--list').count(), 0);
  // Back to the list as it was left: its filter, and where it was scrolled to.
  await button('← List').click();
  await root.locator('.dir-pane--list').waitFor();
  assert.equal(await filter.inputValue(), 'iii-directory/finding-functions');
  await filter.fill('-1');
  await root.locator('.dir-list').evaluate((list, top) => {
    list.scrollTop = top;
    list.dispatchEvent(new Event('scroll'));
  }, 100 * ROW_HEIGHT);
  const deep = root.locator(`.dir-row[style*="translateY(${105 * ROW_HEIGHT}px)"]`);
  await deep.hover();
  const scrolledTo = await root.locator('.dir-list').evaluate((list) => list.scrollTop);
  assert.ok(scrolledTo > 2000, `the list is scrolled to ${scrolledTo}`);
  await deep.click();
  await root.locator('.dir-pane--list').waitFor({ state: 'detached' });
  await button('← List').click();
  await root.locator('.dir-pane--list').waitFor();
  assert.equal(await filter.inputValue(), '-1', 'the filter is kept');
  assert.equal(await root.locator('.dir-list').evaluate((list) => list.scrollTop), scrolledTo, 'the scroll position is kept');
  // The keyboard in a narrow page: the arrows move through the list from where it is scrolled
  // (opening each row took the list away at the first press), Enter opens the row they are on,
  // and ← List brings the keyboard back to the list, on that row.
  await root.locator('.dir-list').focus();
  await page.keyboard.press('ArrowDown');
  await page.keyboard.press('ArrowDown');
  assert.equal(await root.locator('.dir-pane--doc').count(), 0, 'the arrows open nothing in a narrow page');
  const activeRow = root.locator('.dir-row--active');
  const activeKey = await activeRow.getAttribute('data-key');
  assert.ok(Number(/translateY\((\d+)px\)/.exec(await activeRow.getAttribute('style'))[1]) >= scrolledTo, 'from where the list is scrolled');
  assert.equal(await root.locator('.dir-list').getAttribute('aria-activedescendant'), await activeRow.getAttribute('id'));
  await page.keyboard.press('Enter');
  await root.locator('.dir-pane--doc .dir-doc-id', { hasText: activeKey }).waitFor();
  await button('← List').click();
  await root.locator('.dir-pane--list').waitFor();
  assert.equal(await page.evaluate(() => document.activeElement.classList.contains('dir-list')), true, 'the keyboard is back in the list');
  assert.equal(await activeRow.getAttribute('data-key'), activeKey);
  await page.setViewportSize({ width: 1360, height: 860 });
  await root.locator('.dir-pane--list').waitFor();

  // ---- A whole list longer than the engine carries (16 MiB in one message) ---------------------
  // 70 skills with descriptions of 250,000 bytes: the change's delta and the whole list are
  // refused (D120); the page asks for the whole list again without descriptions, and says so.
  step('a list longer than the engine carries');
  await filter.fill('');
  const listed = async () => Number((await root.locator('.dir-count').textContent()).split(' of ')[1].replace(/\D/g, ''));
  const before = await listed();
  const longDescription = 'd'.repeat(250000);
  for (let i = 0; i < 70; i++) {
    const n = String(i).padStart(2, '0');
    writeOnDisk(`skills/long-${n}.md`, `---\ndescription: ${longDescription}\n---\n# Long ${n}\n`);
  }
  await root.locator('.dir-notice--list', { hasText: 'Descriptions are left out' }).waitFor();
  await filter.fill('long-69');
  await row('long-69').waitFor();
  assert.equal(await row('long-69').locator('.dir-cell--description').textContent(), '');
  await filter.fill('');
  await page.waitForFunction(
    (count) => document.querySelector('[data-iii-ui="iii-directory"] .dir-count')?.textContent.replace(/\D/g, '').endsWith(String(count)),
    before + 70,
  );

  // ---- The settings form, in the console's settings slot, against the configuration worker ------
  step('the settings form');
  assert.deepEqual(await page.evaluate(() => window.__harness.configForms()), ['iii-directory']);
  await page.evaluate(() => window.__harness.show('settings'));
  const settings = root.locator('.dir-settings[role="form"]');
  await settings.waitFor();
  const setting = (key) => settings.locator(`.dir-setting[data-key="${key}"]`);
  await setting('skills_folder').locator('.dir-badge--restart').waitFor();
  assert.equal(await setting('download_timeout_ms').locator('.dir-badge--restart').count(), 0, 'a live setting needs no restart');
  assert.match(await setting('download_timeout_ms').locator('.dir-setting-help').textContent(), /Default: \d+\./);
  const stored = async () => (await page.evaluate(() => window.__harness.trigger('configuration::get', { id: 'iii-directory' }))).value;
  const original = await stored();
  await setting('download_timeout_ms').locator('input').fill('45000');
  await setting('inject_hint').locator('input').setChecked(!original.inject_hint);
  await page.screenshot({ path: join(OUT_DIR, 'settings.png') });
  await settings.getByRole('button', { name: 'Save settings' }).click();
  await settings.locator('.dir-settings-saved', { hasText: 'Saved download_timeout_ms, inject_hint. They apply now.' }).waitFor();
  const savedValue = await stored();
  assert.equal(savedValue.download_timeout_ms, 45000);
  assert.equal(savedValue.inject_hint, !original.inject_hint);
  assert.equal(savedValue.skills_folder, original.skills_folder, 'the other settings are kept');
  // A restart-required change is saved and said to wait for a restart, with everything saved
  // beside it (the worker keeps its whole configuration until then), and so is a later save.
  await setting('auto_download').locator('input').setChecked(!original.auto_download);
  await settings.getByRole('button', { name: 'Save settings' }).click();
  const waiting = 'The worker keeps its whole current configuration until it restarts (auto_download needs a restart)';
  await settings.locator('.dir-settings-saved', { hasText: waiting }).waitFor();
  await setting('download_timeout_ms').locator('input').fill('46000');
  await settings.getByRole('button', { name: 'Save settings' }).click();
  await settings.locator('.dir-settings-saved', { hasText: `Saved download_timeout_ms. ${waiting}` }).waitFor();
  // A value the worker rejects (a folder its layout rules refuse) is stored, and the worker keeps
  // its configuration: the form says that, not "Saved", and the last notice goes.
  await setting('skills_folder').locator('input').fill('/');
  await settings.getByRole('button', { name: 'Save settings' }).click();
  await settings.locator('.dir-error', { hasText: 'the worker rejected it' }).waitFor();
  assert.match(await settings.locator('.dir-error').textContent(), /filesystem root/);
  assert.equal(await settings.locator('.dir-settings-saved').count(), 0, 'no "Saved" beside the rejection');
  await setting('skills_folder').locator('input').fill(original.skills_folder);
  await setting('auto_download').locator('input').setChecked(original.auto_download);
  await setting('download_timeout_ms').locator('input').fill(String(original.download_timeout_ms));
  await setting('inject_hint').locator('input').setChecked(original.inject_hint);
  await settings.getByRole('button', { name: 'Save settings' }).click();
  await settings.locator('.dir-settings-saved', { hasText: 'Saved ' }).waitFor();
  assert.deepEqual(await stored(), original, 'the settings are back as they were');
  await page.evaluate(() => window.__harness.show('page'));
  await root.locator('.dir-header').waitFor();

  // ---- Bundles: status → check for updates → plan → apply, with a stale and an unknown plan ----
  // tests/worker/browser.rs serves `mailer` 1.0.0 on the loopback registry stand-in and
  // publishes 2.0.0 on /control/registry/publish/2.0.0.
  step('bundles: status, check, plan, apply');
  const BUNDLE = 'skills/mailer';
  const bundleFile = (rel) => `${BUNDLE}/${rel}`;
  const onDisk = (rel) => (existsSync(join(TREE_DIR, rel)) ? disk(rel) : null);
  const downloaded = await page.evaluate(() => window.__harness.trigger('directory::skills::download_from_registry', { worker: 'mailer' }));
  assert.equal(downloaded.namespace, 'mailer');
  const v1 = {};
  for (const name of ['SKILL.md', 'notes.md', 'both.md', 'merge.md', 'gone.md']) v1[name] = disk(bundleFile(name));
  // Edits here: notes.md (upstream leaves it), both.md's line upstream changes too (a conflict),
  // merge.md's first line where upstream changes its last (a clean merge); a file of our own.
  writeOnDisk(bundleFile('notes.md'), v1['notes.md'].replace('note 1', 'note 1, mine'));
  writeOnDisk(bundleFile('both.md'), v1['both.md'].replace('both 1', 'both 1, mine'));
  writeOnDisk(bundleFile('merge.md'), v1['merge.md'].replace('merge 1', 'merge 1, mine'));
  writeOnDisk(bundleFile('mine.md'), '# Mine\n');
  const published = await fetch(`${CONTROL_URL}/control/registry/publish/2.0.0`, { method: 'POST' });
  assert.equal(published.status, 200, 'publish mailer 2.0.0');

  await root.getByRole('tab', { name: 'Bundles' }).click();
  const bundles = root.locator('.dir-bundles');
  const mailer = bundles.locator('.dir-bundle[data-namespace="mailer"]');
  await mailer.waitFor();
  assert.equal(await mailer.getAttribute('data-state'), 'modified');
  assert.equal(await mailer.locator('.dir-state').textContent(), 'modified');
  assert.match(await mailer.locator('.dir-bundle-source').textContent(), /^mailer@1\.0\.0/);
  const filesLine = (label) => mailer.locator('.dir-bundle-files', { hasText: label });
  assert.equal(await filesLine('Modified here').textContent(), 'Modified here: both.md, merge.md, notes.md');
  assert.equal(await filesLine('Untracked').textContent(), 'Untracked: mine.md');

  await bundles.getByRole('button', { name: 'Check for updates', exact: true }).click();
  await mailer.locator('.dir-update--available', { hasText: 'Update available: 2.0.0' }).waitFor();

  await mailer.getByRole('button', { name: 'Plan update of mailer' }).click();
  const plan = bundles.locator('.dir-plan');
  await plan.waitFor();
  assert.match(await plan.locator('h3').textContent(), /mailer@1\.0\.0.*→ mailer@2\.0\.0/);
  const planRow = (path) => plan.locator(`tr[data-path="${path}"]`);
  const cells = async (path) => (await planRow(path).locator('td').allTextContents()).map((t) => t.trim());
  assert.deepEqual(await cells('both.md'), ['both.md', 'changed', 'modified', 'conflict: your copy stays, upstream lands as both.md.upstream']);
  assert.deepEqual(await cells('merge.md'), ['merge.md', 'changed', 'modified', 'merged three-way (clean)']);
  assert.deepEqual(await cells('notes.md'), ['notes.md', 'unchanged', 'modified', 'your copy stays']);
  assert.deepEqual(await cells('gone.md'), ['gone.md', 'removed', 'clean', 'removed']);
  assert.deepEqual(await cells('scripts/send.sh'), ['scripts/send.sh', 'added', 'absent', 'added']);
  assert.deepEqual(await cells('SKILL.md'), ['SKILL.md', 'changed', 'clean', 'updated']);
  const planCount = async (key) => Number(await plan.locator(`[data-count="${key}"] strong`).textContent());
  assert.deepEqual(
    [await planCount('added'), await planCount('changed'), await planCount('removed'), await planCount('conflicts'), await planCount('merges')],
    [1, 3, 1, 1, 1],
  );
  await plan.locator('.dir-review li', { hasText: 'adds scripts/send.sh (executable)' }).waitFor();
  // The choice changes what the table says apply does.
  await plan.getByLabel('Take upstream').check();
  assert.equal((await cells('both.md'))[3], 'upstream replaces your copy');
  await plan.getByLabel('Merge').check();
  mkdirSync(OUT_DIR, { recursive: true });
  await page.screenshot({ path: join(OUT_DIR, 'bundles-plan.png') });

  // A file changes after the plan: apply refuses it (D336), nothing is written, a fresh plan shows.
  const firstPlan = await plan.getAttribute('data-plan-id');
  writeOnDisk(bundleFile('notes.md'), v1['notes.md'].replace('note 1', 'note 1, mine again'));
  const beforeStale = onDisk(bundleFile('SKILL.md'));
  await plan.getByRole('button', { name: 'Apply', exact: true }).click();
  const problem = bundles.locator('.dir-plan-problem');
  await problem.filter({ hasText: /^D336 conflict: / }).waitFor();
  assert.match(await problem.textContent(), /nothing was written\. Below is a fresh plan made from what is on disk now: review it and apply again\./);
  await page.waitForFunction(
    (old) => {
      const id = document.querySelector('[data-iii-ui="iii-directory"] .dir-plan')?.getAttribute('data-plan-id');
      return id && id !== old;
    },
    firstPlan,
  );
  assert.equal(onDisk(bundleFile('SKILL.md')), beforeStale, 'a stale plan writes nothing');

  // The plan is dropped from the worker's memory (32 newer plans push it out): D337, and the
  // page offers to plan again.
  await page.evaluate(async () => {
    for (let i = 0; i < 32; i++) await window.__harness.trigger('directory::skills::bundles::plan-update', { namespace: 'mailer' });
  });
  await plan.getByRole('button', { name: 'Apply', exact: true }).click();
  await problem.filter({ hasText: /^D337 not_found: / }).waitFor();
  assert.match(await problem.textContent(), /Make a fresh plan\./);
  await plan.waitFor({ state: 'detached' });
  await problem.getByRole('button', { name: 'Plan again' }).click();
  await plan.waitFor();

  // Apply, merging: the result on screen, then on disk.
  await plan.getByRole('button', { name: 'Apply', exact: true }).click();
  const result = bundles.locator('.dir-result');
  await result.waitFor();
  assert.match(await result.locator('h3').textContent(), /Applied: mailer is now at mailer@2\.0\.0/);
  assert.equal(await result.locator('.dir-result-merged').textContent(), 'Merged three-way: merge.md');
  assert.equal(await result.locator('.dir-result-removed').textContent(), 'Removed (upstream removed them): gone.md');
  assert.match(await result.locator('.dir-result-kept_local').textContent(), /notes\.md/);
  await result.locator('.dir-result-conflicts li', { hasText: 'both.md kept as you have it; the upstream text is in both.md.upstream' }).waitFor();
  const v2 = (text, line) => text.replace(line, `${line}, from 2.0.0`);
  assert.equal(onDisk(bundleFile('SKILL.md')), v2(v1['SKILL.md'], 'line 3'));
  assert.equal(onDisk(bundleFile('merge.md')), v2(v1['merge.md'].replace('merge 1', 'merge 1, mine'), 'merge 5'));
  assert.equal(onDisk(bundleFile('both.md')), v1['both.md'].replace('both 1', 'both 1, mine'));
  assert.equal(onDisk(bundleFile('both.md.upstream')), v2(v1['both.md'], 'both 1'));
  assert.equal(onDisk(bundleFile('notes.md')), v1['notes.md'].replace('note 1', 'note 1, mine again'));
  assert.equal(onDisk(bundleFile('gone.md')), null);
  assert.equal(onDisk(bundleFile('scripts/send.sh')), '#!/bin/sh\necho sent\n');
  assert.equal(onDisk(bundleFile('mine.md')), '# Mine\n');
  const locked = JSON.parse(disk('skills/iii-bundles.lock.json'));
  assert.equal(locked.bundles.mailer.source.version, '2.0.0');
  await mailer.locator('.dir-bundle-source', { hasText: 'mailer@2.0.0' }).waitFor();
  await filesLine('Open conflicts').filter({ hasText: 'both.md.upstream' }).waitFor();
  await bundles.getByRole('button', { name: 'Check for updates', exact: true }).click();
  await mailer.locator('.dir-update--current', { hasText: 'Up to date' }).waitFor();
  await page.screenshot({ path: join(OUT_DIR, 'bundles-applied.png') });

  // The conflict settled by hand (upstream's text taken, the copy left behind): the view
  // follows the change on disk by itself, the copy is stale and said so, and the next apply
  // removes it.
  writeOnDisk(bundleFile('both.md'), onDisk(bundleFile('both.md.upstream')));
  await mailer.locator('.dir-bundle-stale', { hasText: 'both.md.upstream' }).waitFor();
  await mailer.getByRole('button', { name: 'Plan update of mailer' }).click();
  await planRow('both.md').locator('td', { hasText: 'removes the stale both.md.upstream' }).waitFor();
  await plan.getByRole('button', { name: 'Apply', exact: true }).click();
  await result.locator('.dir-result-upstream_copies_removed', { hasText: 'both.md.upstream' }).waitFor();
  assert.equal(onDisk(bundleFile('both.md.upstream')), null);
  await mailer.locator('.dir-bundle-stale').waitFor({ state: 'detached' });
  await root.getByRole('tab', { name: /^Skills/ }).click();
  await root.locator('.dir-header').waitFor();

  // ---- Teardown: the page goes, and so do its bindings ------------------------------------------
  step('teardown');
  const sentBefore = (await page.evaluate(() => window.__harness.log.sent)).length;
  await page.evaluate(() => window.__harness.teardown());
  await root.waitFor({ state: 'detached' });
  const after = (await page.evaluate(() => window.__harness.log.sent)).slice(sentBefore);
  assert.deepEqual(
    after.filter((f) => f.type === 'unregistertrigger').map((f) => f.trigger_type).sort(),
    ['directory::agents::on-change', 'directory::skills::on-change', 'directory::system-prompts::on-change'],
  );
  assert.equal(after.filter((f) => f.type === 'unregisterfunction').length, 3);
  assert.deepEqual(await page.evaluate(() => window.__harness.log.errors), []);
  assert.deepEqual(problems, []);
} catch (error) {
  console.error(`run.mjs failed: ${error.stack || error}`);
  mkdirSync(OUT_DIR, { recursive: true });
  await page.screenshot({ path: join(OUT_DIR, 'failure.png') }).catch(() => {});
  console.error(`the page at the failure: ${join(OUT_DIR, 'failure.png')}`);
  if (problems.length) console.error(`also seen in the page:\n${problems.join('\n')}`);
  await browser.close();
  process.exit(1);
}
await browser.close();
console.log(`FIGURES ${JSON.stringify(figures)}`);
