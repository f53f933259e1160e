// Opens a `vmxsim trace report` page in headless Chromium and fails on any console error,
// uncaught exception or log error (e.g. a blocked network fetch), or when the page's script
// did not finish drawing. Talks the Chrome DevTools protocol over --remote-debugging-pipe
// (fd 3: our commands, fd 4: Chromium's replies and events, NUL-separated JSON), so it
// needs nothing but node and the browser: no npm packages, no WebSocket.
//
//   node report_browser_check.mjs REPORT.html [--chromium PATH] [--timeout-ms N]
//
// Prints one JSON line {"ok", "errors": [...], "status", "drawn": {...}} on stdout.
// Exit status: 0 clean and drawn, 1 errors or not drawn, 2 the browser could not be run.
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';

const Args = process.argv.slice(2);
let Page = null, Chromium = '/usr/bin/chromium', TimeoutMs = 15000;
for (let I = 0; I < Args.length; ++I) {
  if (Args[I] === '--chromium') Chromium = Args[++I];
  else if (Args[I] === '--timeout-ms') TimeoutMs = Number(Args[++I]);
  else Page = Args[I];
}
if (!Page) {
  console.error('usage: node report_browser_check.mjs REPORT.html [--chromium PATH]');
  process.exit(2);
}

const Profile = mkdtempSync(join(tmpdir(), 'vmxsim-report-check-'));
const Browser = spawn(Chromium, [
  '--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
  '--disable-background-networking', '--disable-component-update', '--disable-sync',
  '--remote-debugging-pipe', `--user-data-dir=${Profile}`, 'about:blank',
], { stdio: ['ignore', 'ignore', 'pipe', 'pipe', 'pipe'] });

let BrowserLog = '';
Browser.stderr.on('data', D => { BrowserLog = (BrowserLog + D).slice(-4000); });

const Errors = [];
let NextId = 1;
const Waiting = new Map();
const EventWaiters = [];
let Pending = Buffer.alloc(0);

let Closing = false, Finished = false;

function finish(Code, Extra) {
  if (Finished) return;
  Finished = true;
  const Result = { ok: Code === 0, errors: Errors, ...Extra };
  process.stdout.write(JSON.stringify(Result) + '\n');
  try { Browser.kill('SIGKILL'); } catch {}
  try { rmSync(Profile, { recursive: true, force: true }); } catch {}
  process.exit(Code);
}

const Timer = setTimeout(() => {
  Errors.push(`timeout after ${TimeoutMs} ms`);
  finish(Browser.exitCode === null ? 1 : 2, { browserLog: BrowserLog });
}, TimeoutMs);

Browser.on('error', E => { clearTimeout(Timer); Errors.push(String(E)); finish(2, {}); });
Browser.on('exit', Code => {
  if (Waiting.size && !Closing) {
    clearTimeout(Timer);
    Errors.push(`chromium exited (${Code}) while waiting for a reply`);
    finish(2, { browserLog: BrowserLog });
  }
});

function send(Method, Params = {}, SessionId) {
  const Id = NextId++;
  const Msg = { id: Id, method: Method, params: Params };
  if (SessionId) Msg.sessionId = SessionId;
  Browser.stdio[3].write(JSON.stringify(Msg) + '\0');
  return new Promise((Resolve, Reject) => Waiting.set(Id, { Resolve, Reject, Method }));
}

function waitEvent(Method) {
  return new Promise(Resolve => EventWaiters.push({ Method, Resolve }));
}

function describeException(D) {
  const E = D.exceptionDetails || {};
  const Desc = E.exception && (E.exception.description || E.exception.value);
  return `exception: ${Desc || E.text} (line ${E.lineNumber}, column ${E.columnNumber})`;
}

function onEvent(M) {
  const P = M.params || {};
  if (M.method === 'Runtime.exceptionThrown')
    Errors.push(describeException(P));
  else if (M.method === 'Runtime.consoleAPICalled' &&
           ['error', 'assert', 'warning'].includes(P.type))
    Errors.push(`console.${P.type}: ` +
                (P.args || []).map(A => A.value ?? A.description ?? A.type).join(' '));
  else if (M.method === 'Log.entryAdded' && ['error', 'warning'].includes(P.entry.level))
    Errors.push(`log ${P.entry.level} (${P.entry.source}): ${P.entry.text}`);
  for (let I = 0; I < EventWaiters.length; ++I)
    if (EventWaiters[I].Method === M.method) {
      EventWaiters.splice(I, 1)[0].Resolve(P);
      break;
    }
}

Browser.stdio[4].on('data', Chunk => {
  Pending = Buffer.concat([Pending, Chunk]);
  let End;
  while ((End = Pending.indexOf(0)) >= 0) {
    const M = JSON.parse(Pending.subarray(0, End).toString('utf8'));
    Pending = Pending.subarray(End + 1);
    if (M.id !== undefined && Waiting.has(M.id)) {
      const W = Waiting.get(M.id);
      Waiting.delete(M.id);
      if (M.error) W.Reject(new Error(`${W.Method}: ${M.error.message}`));
      else W.Resolve(M.result);
    } else if (M.method) {
      onEvent(M);
    }
  }
});

async function main() {
  const { targetId } = await send('Target.createTarget', { url: 'about:blank' });
  const { sessionId } = await send('Target.attachToTarget', { targetId, flatten: true });
  // Every domain that reports problems is on before the page starts loading.
  await send('Runtime.enable', {}, sessionId);
  await send('Log.enable', {}, sessionId);
  await send('Page.enable', {}, sessionId);
  const Loaded = waitEvent('Page.loadEventFired');
  const Nav = await send('Page.navigate', { url: pathToFileURL(resolve(Page)).href }, sessionId);
  if (Nav.errorText) Errors.push(`navigation: ${Nav.errorText}`);
  await Loaded;
  // The page's script runs inline before the load event; give late errors (timers,
  // rejected promises) one more turn of the event loop to arrive.
  await new Promise(R => setTimeout(R, 200));
  const { result } = await send('Runtime.evaluate', {
    expression: `JSON.stringify({
      status: document.body.dataset.vmxsimStatus || null,
      bars: document.querySelectorAll('svg rect.bar').length,
      hist: document.querySelectorAll('svg rect.hist').length,
      points: document.querySelectorAll('svg rect.point').length,
      svgs: document.querySelectorAll('svg').length,
      title: document.title })`,
    returnByValue: true,
  }, sessionId);
  const Drawn = JSON.parse(result.value);
  if (Drawn.status !== 'drawn')
    Errors.push(`page status is ${JSON.stringify(Drawn.status)}, not "drawn"`);
  Closing = true;
  try { await Promise.race([send('Browser.close'), new Promise(R => setTimeout(R, 1000))]); } catch {}
  clearTimeout(Timer);
  finish(Errors.length ? 1 : 0, { status: Drawn.status, drawn: Drawn });
}

main().catch(E => {
  clearTimeout(Timer);
  Errors.push(String(E));
  finish(2, { browserLog: BrowserLog });
});
