// Drives mixpanel-browser (the npm package's ES module bundle, pinned in
// package-lock.json) in headless Chromium through playwright-core, on a
// page served from another origin than Tributary, so every request is a
// real cross-origin XHR (credentials included, as the SDK sends them) or
// beacon. Each scenario runs in a fresh browser context (empty cookies and
// localStorage) of one browser launch. The SDK is initialised with
// `api_host` and, per scenario, only the options under test.
//
// Prints one JSON line: "<scenario>:<call>" → "" when the SDK's callback
// reported success (1, or {status: 1}) or the failure; "<scenario>:requests"
// lists every request to Tributary whose response the page could not read
// as a success (CORS refusal, 4xx, …). The Go test (clients_browser_test.go)
// reads the stored events and profiles back.
import { chromium } from "playwright-core";

const env = (k) => {
  const v = process.env[k];
  if (!v) throw new Error(`environment variable ${k} is not set`);
  return v;
};
const PAGE = env("PAGE_URL"); // http://localhost:PORT/page.html
const API = env("TRIBUTARY_URL"); // http://127.0.0.1:PORT
const SIMPLE = env("TOKEN_SIMPLIFIED");
const ORIGINAL = env("TOKEN_ORIGINAL");
const RUN = env("RUN_ID"); // makes every id of this run unique

const results = {};
const requestLog = [];

// Installed in every page before the SDK loads: records what the page's
// JavaScript saw of each XHR to Tributary (status 0 = blocked by CORS or
// the network).
function recordXHR(api) {
  window.__xhr = [];
  const open = XMLHttpRequest.prototype.open;
  XMLHttpRequest.prototype.open = function (method, url) {
    if (String(url).startsWith(api)) {
      const rec = { method, url: String(url) };
      window.__xhr.push(rec);
      this.addEventListener("loadend", () => {
        rec.status = this.status;
        rec.body = this.status ? this.responseText : "";
        rec.done = true;
      });
    }
    return open.apply(this, arguments);
  };
}

// The steps of a scenario run in the page; each call records what its
// callback got. Returns {calls, anon} to the script.
async function inPage({ api, token, config, steps, ids }) {
  const mp = window.mixpanel;
  const calls = {};
  const pending = [];
  const ok = (r) => r === 1 || (r && r.status === 1);
  const cb = (name) => {
    let resolve;
    pending.push(new Promise((r) => (resolve = r)));
    return (r) => {
      calls[name] = ok(r) ? "" : `callback got ${JSON.stringify(r)}`;
      resolve();
    };
  };
  // inOrder makes one call and waits for its callback.
  const inOrder = (call) => {
    call();
    return pending[pending.length - 1];
  };
  await new Promise((resolve) => mp.init(token, { api_host: api, ...config, loaded: () => resolve() }));
  const anon = mp.get_distinct_id();
  mp.register({ scenario: ids.scenario }); // finds this scenario's events in the export
  for (const s of steps) {
    switch (s) {
      case "register":
        mp.register({ plan: "pro" });
        break;
      case "track-anon":
        mp.track("anon event", { n: 1 }, cb("track anon"));
        break;
      case "identify":
        mp.identify(ids.user);
        break;
      case "alias":
        mp.alias(ids.alias);
        break;
      case "people":
        // One after the other: unbatched, each is its own XHR, and
        // concurrent requests may reach the server in any order (an
        // unset before the set it undoes).
        await inOrder(() => mp.people.set({ name: "Ada", tmp: 1 }, cb("people.set")));
        await inOrder(() => mp.people.set_once({ first_seen: "2024-01-01", name: "Not Ada" }, cb("people.set_once")));
        await inOrder(() => mp.people.increment("logins", 2, cb("people.increment")));
        await inOrder(() => mp.people.append("events", "signup", cb("people.append")));
        await inOrder(() => mp.people.union("tags", ["a", "b"], cb("people.union")));
        await inOrder(() => mp.people.unset("tmp", cb("people.unset")));
        break;
      case "group":
        mp.set_group("company", ids.group, cb("set_group"));
        mp.get_group("company", ids.group).set({ tier: "gold" }, cb("get_group().set"));
        break;
      case "track-user":
        mp.track("user event", { n: 2 }, cb("track user"));
        break;
      case "track-beacon":
        mp.track("beacon event", { n: 3 }, { transport: "sendBeacon" }, cb("track sendBeacon"));
        break;
      case "track-links":
        mp.track_links("#out", "link clicked", { n: 4 });
        break;
      case "track-unload":
        mp.track("unload event", { n: 5 });
        break;
    }
  }
  await Promise.all(pending);
  return { calls, anon };
}

// settle waits until every XHR to Tributary finished and the SDK's batch
// queues in localStorage are empty (batches flush every 5 s by default).
async function settle(page, batched) {
  await page.waitForFunction(
    (batched) => {
      const busy = window.__xhr.some((r) => !r.done);
      const queued = Object.keys(localStorage).some((k) => k.startsWith("__mpq_") && localStorage.getItem(k) !== "[]");
      return !busy && (!batched || (!queued && window.__xhr.length > 0));
    },
    batched,
    { timeout: 30000, polling: 200 },
  );
}

function checkRequests(name, xhrs) {
  const bad = xhrs.filter((r) => r.status !== 200 || !(r.body === "1" || /"status":\s*1/.test(r.body)));
  results[`${name}:requests`] = bad.map((r) => `${r.method} ${new URL(r.url).pathname} → ${r.status} ${r.body}`).join("; ");
  for (const r of xhrs) requestLog.push(`${name}: ${r.method} ${r.url.replace(/data=[^&]*/, "data=…")} → ${r.status}`);
}

const scenarios = [
  // Simplified ID merge, the SDK's defaults: batched, base64 payloads.
  { name: "simplified-batch-base64", token: SIMPLE, config: {}, batched: true,
    steps: ["register", "track-anon", "identify", "people", "group", "track-user"] },
  // Original ID merge, one request per call, JSON payloads.
  { name: "original-nobatch-json", token: ORIGINAL, config: { batch_requests: false, api_payload_format: "json" }, batched: false,
    steps: ["register", "track-anon", "identify", "alias", "people", "group", "track-user"] },
  // Original ID merge, batched, JSON payloads.
  { name: "original-batch-json", token: ORIGINAL, config: { api_payload_format: "json" }, batched: true,
    steps: ["track-anon", "identify", "track-user"] },
  // Simplified, one request per call, base64.
  { name: "simplified-nobatch-base64", token: SIMPLE, config: { batch_requests: false }, batched: false,
    steps: ["track-anon", "identify", "people", "track-user"] },
];

const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
  headless: true, // a fresh temporary profile (user data dir) per launch
  args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
    "--disable-component-update", "--disable-sync"],
});
const anons = {};
try {
  const newPage = async () => {
    const ctx = await browser.newContext();
    await ctx.addInitScript(recordXHR, API);
    const page = await ctx.newPage();
    page.on("console", (m) => m.type() === "error" && console.error(`page console: ${m.text()}`));
    page.on("pageerror", (e) => console.error(`page error: ${e}`));
    await page.goto(PAGE);
    await page.waitForFunction(() => window.sdkLoaded === true);
    return { ctx, page };
  };
  // An event still in the batch queue when the page is left goes out by
  // sendBeacon on visibilitychange/pagehide. Playwright does not report
  // requests of a page being unloaded, so the proof is: queued (not sent by
  // XHR) just before leaving, and stored afterwards (the Go test reads it
  // back, waiting for it); nothing else could send it, since the queue lives
  // in this origin's localStorage and the page goes to about:blank.
  // The SDK's defaults but batch_flush_interval_ms: its first flush comes
  // 5 s after init, which a slow machine can reach before the page is left,
  // and the event would go by XHR. The scenario runs first and its context
  // stays open until the others are done: closing a context cancels the
  // beacon if it has not gone out yet.
  let unloadCtx;
  {
    const { ctx, page } = await newPage();
    unloadCtx = ctx;
    const ids = { scenario: "unload", user: `unload-user-${RUN}` };
    await page.evaluate(inPage, { api: API, token: SIMPLE, config: { batch_flush_interval_ms: 10 * 60 * 1000 },
      steps: ["identify", "track-unload"], ids });
    await page.waitForFunction(() => Object.keys(localStorage).some((k) => k.startsWith("__mpq_") && localStorage.getItem(k).includes("unload event")));
    const sent = await page.evaluate(() => window.__xhr.map((r) => r.url));
    results["unload:queued at unload"] = sent.length === 0 ? "" : `sent by XHR before unload: ${sent.join(", ")}`;
    await page.goto("about:blank");
  }

  // api_transport sendBeacon (unbatched): the callback reports 1 once the
  // beacon is queued; track_links sends its event as the link navigates.
  let beaconCtx;
  const sent = new Map(); // request to Tributary → {type, path, ended}
  const beacons = () => [...sent.values()];
  {
    const { ctx, page } = await newPage();
    beaconCtx = ctx;
    const ids = { scenario: "beacon", user: `beacon-user-${RUN}` };
    ctx.on("request", (r) => r.url().startsWith(API) && sent.set(r, { type: r.resourceType(), path: new URL(r.url()).pathname, ended: false }));
    const ended = (r) => sent.has(r) && (sent.get(r).ended = true);
    ctx.on("requestfinished", ended);
    ctx.on("requestfailed", ended);
    const out = await page.evaluate(inPage, { api: API, token: SIMPLE, config: { api_transport: "sendBeacon", batch_requests: false },
      steps: ["identify", "track-beacon", "track-links"], ids });
    for (const [k, v] of Object.entries(out.calls)) results[`beacon:${k}`] = v;
    await Promise.all([page.waitForURL(/next\.html/), page.click("#out")]);
    results["beacon:track_links navigated"] = "";
    // track_links's beacon leaves as the page navigates: wait (bounded)
    // until all three events went out. Playwright does not always report
    // the end of a request of a page being left, so rather than wait for
    // it here the context stays open while the other scenarios run.
    const tracks = () => beacons().filter((b) => b.path === "/track/").length;
    for (const deadline = Date.now() + 15000; tracks() < 3 && Date.now() < deadline;) {
      await page.waitForTimeout(100);
    }
    const types = beacons().map((b) => b.type);
    results["beacon:transport"] = tracks() >= 3 && types.every((t) => t === "ping" || t === "beacon") ? "" :
      `requests to Tributary: ${JSON.stringify(beacons())}, want ≥ 3 beacons to /track/ ($identify, track, track_links)`;
    checkRequests("beacon", await page.evaluate(() => window.__xhr)); // none expected: all beacons
  }
  for (const sc of scenarios) {
    const { ctx, page } = await newPage();
    const ids = { scenario: sc.name, user: `${sc.name}-user-${RUN}`, alias: `${sc.name}-alias-${RUN}`, group: `${sc.name}-acme-${RUN}` };
    const out = await page.evaluate(inPage, { api: API, token: sc.token, config: sc.config, steps: sc.steps, ids });
    for (const [k, v] of Object.entries(out.calls)) results[`${sc.name}:${k}`] = v;
    anons[sc.name] = out.anon;
    await settle(page, sc.batched);
    checkRequests(sc.name, await page.evaluate(() => window.__xhr));
    await ctx.close();
  }
  for (const b of beacons()) requestLog.push(`beacon: ${b.type} ${b.path} ended=${b.ended}`);
  await beaconCtx.close();
  await unloadCtx.close();
} finally {
  await browser.close();
}
console.error(requestLog.join("\n"));
process.stdout.write(JSON.stringify({ ...results, "#anon": JSON.stringify(anons) }) + "\n");
