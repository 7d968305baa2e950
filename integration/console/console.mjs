// Drives the web console (served by a real `tributary serve`) in headless
// Debian chromium through playwright-core, pinned in package-lock.json.
// The Go test (integration/console_test.go) starts the servers, runs this
// script and checks what it reports, then reads the server's side of each
// action back through the app API.
//
// Prints one JSON line: check name → "" when it passed, else what failed.
// Screenshots of each page go to SHOTS.
import { chromium } from "playwright-core";

const env = (k) => {
  const v = process.env[k];
  if (!v) throw new Error(`environment variable ${k} is not set`);
  return v;
};
const URL = env("CONSOLE_URL");
const SHORT = env("SHORT_TTL_URL"); // a server whose sessions last 2 s
const OWNER = [env("OWNER_USER"), env("OWNER_SECRET")];
const ANALYST = [env("ANALYST_USER"), env("ANALYST_SECRET")];
const GOOD = env("GOOD_IMPORT");
const BAD = env("BAD_IMPORT");
const BAD_RUN = env("BAD_RUN");
const RETRY = env("RETRY_IMPORT"); // its run RETRY_RUN retried a source error once
const RETRY_RUN = env("RETRY_RUN");
const BIG = env("BIG_IMPORT"); // slow enough to watch a run live
const DELETE = env("DELETE_IMPORT"); // deleted through the console
const PROJECT = env("PROJECT_ID");
const SHOTS = env("SHOTS");

const results = {};
async function check(name, f) {
  const t0 = Date.now();
  try {
    await f();
    results[name] = "";
  } catch (e) {
    results[name] = String(e && e.message ? e.message : e).slice(0, 600);
  }
  console.error(`${name}: ${results[name] ? "FAILED " + results[name] : "ok"} (${Date.now() - t0} ms)`);
}
function assert(cond, msg) {
  if (!cond) throw new Error(msg);
}

const browser = await chromium.launch({
  executablePath: env("CHROMIUM"),
  headless: true, // playwright gives each launch a fresh temporary profile (user data dir)
  args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
    "--disable-component-update", "--disable-sync"],
});

// newContext: a fresh context (no cookies) whose actions time out rather
// than hang the run.
async function newContext(opts) {
  const ctx = await browser.newContext(opts);
  ctx.setDefaultTimeout(20000);
  return ctx;
}

async function signIn(page, base, [user, secret]) {
  await page.goto(base + "/");
  await page.getByLabel("Username").fill(user);
  await page.getByLabel("Secret").fill(secret);
  await page.getByRole("button", { name: "Sign in" }).click();
}

// unlabelled lists form controls with no label and no aria-label, and
// clickable things that are not buttons or links.
async function unlabelled(page) {
  return page.evaluate(() => {
    const bad = [];
    for (const el of document.querySelectorAll("input, select, textarea")) {
      if (el.type === "hidden" || el.hidden) continue;
      if (!(el.labels && el.labels.length) && !el.getAttribute("aria-label")) bad.push(`${el.tagName}#${el.id}`);
    }
    for (const el of document.querySelectorAll("[onclick], div[role=button], span[role=button]")) bad.push(`clickable ${el.tagName}`);
    return bad;
  });
}

async function shot(page, name) {
  await page.screenshot({ path: `${SHOTS}/${name}.png` }); // the viewport: docs/console keeps some
}

// apiJSON fetches from the page as the console does (its marker header
// keeps a 401 from opening the browser's password dialog).
async function apiJSON(page, path, init) {
  return page.evaluate(async ([path, init]) => {
    init = init || {};
    const r = await fetch(path, { ...init, headers: { "X-Tributary-Console": "1", ...(init.headers || {}) } });
    return { status: r.status, body: await r.text() };
  }, [path, init]);
}

const imp = (id) => `/api/app/projects/${PROJECT}/warehouse-sources/imports/${encodeURIComponent(id)}`;

// --- A wrong secret cannot sign in.
{
  const ctx = await newContext();
  const page = await ctx.newPage();
  await check("wrong-secret", async () => {
    await signIn(page, URL, [OWNER[0], OWNER[1] + "-wrong"]);
    await page.getByText("Wrong username or secret.").waitFor({ timeout: 10000 });
    assert((await ctx.cookies()).length === 0, "a cookie was set after a wrong secret");
    const r = await apiJSON(page, "/console/session");
    assert(r.status === 401, `GET /console/session answered ${r.status}`);
    const a = await apiJSON(page, imp(GOOD));
    assert(a.status === 401, `the app API answered ${a.status} without a session`);
  });
  await check("signin-labels", async () => {
    const bad = await unlabelled(page);
    assert(bad.length === 0, `unlabelled: ${bad.join(", ")}`);
  });
  await shot(page, "signin");
  await ctx.close();
}

// --- The owner: imports, keyboard, sync, runs, failures, preview, pause.
{
  const ctx = await newContext({ viewport: { width: 1360, height: 900 } });
  const page = await ctx.newPage();
  const pageErrors = [];
  page.on("pageerror", (e) => pageErrors.push(String(e)));
  await check("sign-in", async () => {
    await signIn(page, URL, OWNER);
    await page.getByRole("heading", { name: "Imports" }).waitFor({ timeout: 10000 });
    const c = (await ctx.cookies()).find((c) => c.name === "tributary_session");
    assert(c, "no session cookie");
    assert(c.httpOnly && c.sameSite === "Strict" && c.path === "/", `cookie attributes ${JSON.stringify({ ...c, value: "…" })}`);
    assert(c.expires > Date.now() / 1000, "the cookie does not expire");
  });
  await check("imports-list", async () => {
    for (const id of [GOOD, BAD]) await page.getByRole("link", { name: id, exact: true }).waitFor({ timeout: 5000 });
    const rows = await page.locator("table.imports tbody tr").count();
    assert(rows >= 2, `${rows} rows`);
    await page.getByLabel("Filter").fill(BAD);
    assert((await page.locator("table.imports tbody tr").count()) === 1, "the filter did not narrow the list to one import");
    await page.getByLabel("Filter").fill("");
  });
  await check("imports-labels", async () => {
    const bad = await unlabelled(page);
    assert(bad.length === 0, `unlabelled: ${bad.join(", ")}`);
  });
  await shot(page, "imports");

  // Keyboard only: Tab to the good import's link, Enter, Tab to Sync now, Enter.
  await check("keyboard-sync", async () => {
    await page.locator("body").focus();
    let reached = false;
    for (let i = 0; i < 60 && !reached; i++) {
      await page.keyboard.press("Tab");
      reached = await page.evaluate((id) => document.activeElement?.textContent === id && document.activeElement.tagName === "A", GOOD);
    }
    assert(reached, "Tab never reached the import's link");
    const outline = await page.evaluate(() => getComputedStyle(document.activeElement).outlineStyle);
    assert(outline !== "none", "the focused link has no visible outline");
    await page.keyboard.press("Enter");
    await page.getByRole("heading", { name: `Import ${GOOD}` }).waitFor({ timeout: 10000 });
    reached = false;
    for (let i = 0; i < 40 && !reached; i++) {
      await page.keyboard.press("Tab");
      reached = await page.evaluate(() => document.activeElement?.id === "sync-now");
    }
    assert(reached, "Tab never reached Sync now");
    await page.keyboard.press("Enter");
    await page.locator("#status").filter({ hasText: "Sync started" }).waitFor({ timeout: 10000 });
  });
  await check("sync-finishes", async () => {
    // The history polls while a run is going; the newest run must end SUCCEEDED.
    await page.locator("table.runs tbody tr").first().locator(".b-succeeded").waitFor({ timeout: 120000 });
  });
  await check("run-detail", async () => {
    await page.locator("table.runs tbody tr").first().getByRole("link").click();
    await page.locator("#run-facts").waitFor({ timeout: 10000 });
    const text = await page.locator("#run-facts").innerText();
    assert(/SUCCEEDED/.test(text) && /Rows read\s+[1-9]/.test(text) && /Rate/.test(text) && /Bytes/.test(text), `run facts: ${text}`);
  });
  await shot(page, "run");
  await check("live-progress", async () => {
    await page.goto(`${URL}/#/p/${PROJECT}/imports/${encodeURIComponent(BIG)}`);
    await page.getByRole("button", { name: "Sync now" }).click();
    await page.locator("table.runs tbody tr").first().getByRole("link").click();
    const live = page.locator("#live");
    await live.waitFor({ timeout: 10000 });
    await shot(page, "run-live");
    const first = await live.innerText();
    assert(/rows read/.test(first) && /rows\/s/.test(first) && /retries/.test(first), `progress: ${first}`);
    // The page polls: rows read show up while the run goes (1.5 M rows take
    // seconds even on a fast machine), then the run ends and the view goes.
    const seen = await page.waitForFunction(() => {
      const el = document.getElementById("live");
      if (!el) return "gone";
      return /[1-9][\d,]* rows read/.test(el.innerText) ? el.innerText : null;
    }, null, { timeout: 60000 });
    const during = await seen.jsonValue();
    assert(during !== "gone", "the run ended before the page showed any rows read while it ran");
    assert(/[1-9][\d,.]* rows\/s/.test(during), `no rate while running: ${during}`);
    // Server runs count the source first (connectors.Counter), so the view
    // has a total and an ETA.
    assert(/ of 1,500,000/.test(during) && /about .+ left/.test(during), `no total or ETA while running: ${during}`);
    assert((await page.locator("#live progress").count()) === 1, "no progress bar while running");
    await page.locator("#run-facts .badge:not(.b-running)").waitFor({ timeout: 180000 });
    assert((await page.locator("#run-facts .b-succeeded").count()) === 1, `the run ended ${await page.locator("#run-facts").innerText()}`);
    assert((await live.count()) === 0, "the progress view stayed after the run ended");
    const facts = await page.locator("#run-facts").innerText();
    assert(/Rows read\s+1,500,000/.test(facts), `facts after the run: ${facts}`);
  });
  await check("failures", async () => {
    await page.goto(`${URL}/#/p/${PROJECT}/imports/${encodeURIComponent(BAD)}/runs/${encodeURIComponent(BAD_RUN)}`);
    // The previous page (a run without failures) may still be shown while
    // this one loads: wait for a failure's own cell, not the "None." row.
    await page.locator("table.failures tbody tr td:not(.empty)").first().waitFor({ timeout: 10000 });
    const n = await page.locator("table.failures tbody tr").count();
    const first = await page.locator("table.failures tbody tr").first().innerText();
    assert(n > 0 && n <= 100, `${n} failure rows`);
    assert(/event/i.test(first), `first failure does not name the event: ${first}`);
  });
  await shot(page, "run-failures");
  await check("retries", async () => {
    await page.goto(`${URL}/#/p/${PROJECT}/imports/${encodeURIComponent(RETRY)}/runs/${encodeURIComponent(RETRY_RUN)}`);
    await page.locator("table.retries tbody tr td.mono").first().waitFor({ timeout: 10000 });
    const caption = await page.locator("table.retries caption").innerText();
    const first = await page.locator("table.retries tbody tr").first().innerText();
    assert(/Retries \([1-9]/.test(caption), `retries caption: ${caption}`);
    assert(/JSON/.test(first) && /\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2} UTC/.test(first), `first retry: ${first}`);
    assert(/SUCCEEDED/.test(await page.locator("#run-facts").innerText()), "the retried run did not succeed");
  });
  await shot(page, "run-retries");
  await check("preview", async () => {
    await page.goto(`${URL}/#/p/${PROJECT}/imports/${encodeURIComponent(GOOD)}`);
    await page.getByRole("button", { name: "Preview" }).click();
    await page.locator("table.columns tbody tr").first().waitFor({ timeout: 30000 });
    const cols = await page.locator("table.columns").innerText();
    assert(/event_type/.test(cols) && /event name/.test(cols), `column report: ${cols.slice(0, 300)}`);
    const recs = await page.locator("pre.records").innerText();
    assert(recs.split("\n").length >= 5 && /"\$insert_id"/.test(recs), "no records in the preview");
  });
  await check("import-labels", async () => {
    const bad = await unlabelled(page);
    assert(bad.length === 0, `unlabelled: ${bad.join(", ")}`);
  });
  await shot(page, "import");
  await check("pause-resume", async () => {
    await page.getByRole("button", { name: "Pause" }).click();
    await page.getByRole("button", { name: "Resume" }).waitFor({ timeout: 10000 });
    let r = JSON.parse((await apiJSON(page, imp(GOOD))).body);
    assert(r.results.paused === true, "the import is not paused on the server");
    await page.getByRole("button", { name: "Resume" }).click();
    await page.getByRole("button", { name: "Pause" }).waitFor({ timeout: 10000 });
    r = JSON.parse((await apiJSON(page, imp(GOOD))).body);
    assert(r.results.paused === false, "the import is still paused on the server");
  });
  await check("schedule", async () => {
    await page.getByLabel("Schedule").selectOption("@daily");
    await page.getByRole("button", { name: "Save schedule" }).click();
    await page.locator("#status").filter({ hasText: "Schedule saved" }).waitFor({ timeout: 10000 });
    const r = JSON.parse((await apiJSON(page, imp(GOOD))).body);
    assert(r.results.schedule === "@daily" && r.results.next_run > 0, `schedule ${r.results.schedule}, next run ${r.results.next_run}`);
  });
  await check("delete-import", async () => {
    await page.goto(`${URL}/#/p/${PROJECT}/imports/${encodeURIComponent(DELETE)}`);
    await page.getByRole("button", { name: "Delete import…" }).click();
    await page.getByRole("button", { name: "Cancel" }).click();
    assert(await page.locator("fieldset.confirm").isHidden(), "Cancel did not close the confirmation");
    await page.getByRole("button", { name: "Delete import…" }).click();
    await page.getByRole("button", { name: "Delete", exact: true }).click();
    await page.getByRole("heading", { name: "Imports" }).waitFor();
    await page.locator("#status").filter({ hasText: "deleted" }).waitFor({ timeout: 10000 });
    assert((await page.getByRole("link", { name: DELETE, exact: true }).count()) === 0, "the deleted import is still listed");
    const r = await apiJSON(page, imp(DELETE));
    assert(r.status === 404, `GET the deleted import: ${r.status}`);
    await page.goto(`${URL}/#/p/${PROJECT}/imports/${encodeURIComponent(GOOD)}`);
    await page.getByRole("heading", { name: `Import ${GOOD}` }).waitFor();
  });
  await check("sync-limit-429", async () => {
    // 5 API syncs per import per hour: the console shows the limit's answer.
    for (let i = 0; i < 8; i++) {
      await page.waitForFunction(() => !document.querySelector("table.runs .b-running"), null, { timeout: 120000 });
      await page.waitForTimeout(2200); // past the 2 s window in which a trigger joins the last run
      await page.getByRole("button", { name: "Sync now" }).click();
      const msg = await page.waitForFunction(() => {
        const t = document.getElementById("status").textContent + " " + (document.getElementById("action-msg")?.textContent || "");
        return /at most 5/.test(t) ? "limit" : /Sync started/.test(t) ? "started" : null;
      }, null, { timeout: 10000 });
      if ((await msg.jsonValue()) === "limit") return;
      await page.evaluate(() => { document.getElementById("status").textContent = ""; });
    }
    throw new Error("8 syncs were started without a 429");
  });
  await check("overview", async () => {
    await page.getByRole("link", { name: "Overview" }).click();
    await page.getByRole("heading", { name: /Overview/ }).waitFor({ timeout: 20000 });
    await page.locator("svg.chart rect").first().waitFor({ timeout: 20000 });
    const legend = await page.locator(".legend").first().innerText();
    assert(/warehouse-import/.test(legend), `chart legend: ${legend}`);
    // Every source is its own series (daily usage): the test stored 5
    // events through /import and 3 through /track, and synced warehouses.
    const sums = await page.locator("figure.chartbox").first().evaluate((fig) => {
      const t = fig.querySelector("details table");
      const heads = [...t.querySelectorAll("thead th")].map((th) => th.textContent.trim());
      const out = {};
      for (const tr of t.querySelectorAll("tbody tr")) {
        [...tr.querySelectorAll("td")].forEach((td, i) => { out[heads[i + 1]] = (out[heads[i + 1]] || 0) + Number(td.textContent.replace(/,/g, "")); });
      }
      return out;
    });
    assert(sums.import === 5 && sums.track === 3 && sums["warehouse-import"] > 0 && sums.amplitude === 0, `events per day by source: ${JSON.stringify(sums)}`);
    const usage = await page.locator("table.usage").innerText();
    assert(/warehouse-import/.test(usage) && /\d{4}-\d{2}/.test(usage), `usage: ${usage}`);
    assert((await page.locator("ul.names li").count()) > 0, "no event names");
    await page.getByLabel("Event", { exact: true }).selectOption({ index: 0 });
    await page.getByRole("button", { name: "Segment" }).click();
    await page.locator("#seg-out svg.chart").waitFor({ timeout: 20000 });
    const bad = await unlabelled(page);
    assert(bad.length === 0, `unlabelled: ${bad.join(", ")}`);
  });
  await shot(page, "overview");
  await check("migrations", async () => {
    await page.getByRole("link", { name: "Migrations" }).click();
    await page.getByRole("heading", { name: "Migrations" }).waitFor({ timeout: 10000 });
    await page.locator("table.migrations").waitFor({ timeout: 10000 });
  });
  await shot(page, "migrations");
  await check("sign-out", async () => {
    const cookie = (await ctx.cookies()).find((c) => c.name === "tributary_session");
    await page.getByRole("button", { name: "Sign out" }).click();
    await page.getByRole("heading", { name: "Sign in" }).waitFor({ timeout: 10000 });
    // The old cookie value is dead on the server, not only in this browser.
    const r = await fetch(URL + imp(GOOD), { headers: { Cookie: `tributary_session=${cookie.value}` } });
    assert(r.status === 401, `the signed-out session still answers ${r.status}`);
    assert(!r.headers.get("www-authenticate"), "a session's 401 carries a Basic challenge (the browser would prompt)");
  });
  await check("no-page-errors", async () => assert(pageErrors.length === 0, pageErrors.join("; ")));
  await ctx.close();
}

// --- An analyst: no write controls; forged writes get 403.
{
  const ctx = await newContext({ viewport: { width: 1360, height: 900 } });
  const page = await ctx.newPage();
  await check("analyst-read-only", async () => {
    await signIn(page, URL, ANALYST);
    await page.getByRole("link", { name: GOOD, exact: true }).click();
    await page.locator("#read-only").waitFor({ timeout: 10000 });
    for (const name of ["Sync now", "Pause", "Resume", "Save schedule", "Delete import…"]) {
      assert((await page.getByRole("button", { name }).count()) === 0, `the analyst sees ${name}`);
    }
    assert((await page.getByRole("button", { name: "Preview" }).count()) === 1, "the analyst cannot preview");
  });
  await shot(page, "import-analyst");
  await check("analyst-forged-writes", async () => {
    const token = JSON.parse((await apiJSON(page, "/console/session")).body).csrf_token;
    assert(token, "no CSRF token");
    const patch = (headers) => apiJSON(page, imp(GOOD), { method: "PATCH", headers: { "Content-Type": "application/json", ...headers }, body: '{"paused":true}' });
    const sync = (headers) => apiJSON(page, imp(GOOD) + "/manual-sync", { method: "PUT", headers, body: "{}" });
    for (const [what, r] of [["PATCH without token", await patch({})], ["PATCH with token", await patch({ "X-CSRF-Token": token })],
      ["sync without token", await sync({})], ["sync with token", await sync({ "X-CSRF-Token": token })]]) {
      assert(r.status === 403, `${what}: ${r.status} ${r.body}`);
    }
    const r = JSON.parse((await apiJSON(page, imp(GOOD))).body);
    assert(r.results.paused === false, "a forged write paused the import");
  });
  await ctx.close();
}

// --- The owner's writes need the CSRF token too.
{
  const ctx = await newContext();
  const page = await ctx.newPage();
  await check("owner-csrf", async () => {
    await signIn(page, URL, OWNER);
    await page.getByRole("heading", { name: "Imports" }).waitFor({ timeout: 10000 });
    const r = await apiJSON(page, imp(GOOD), { method: "PATCH", headers: { "Content-Type": "application/json" }, body: '{"paused":true}' });
    assert(r.status === 403, `an owner's write without the CSRF token: ${r.status}`);
    const wrong = await apiJSON(page, imp(GOOD), { method: "PATCH", headers: { "X-CSRF-Token": "x".repeat(43) }, body: '{"paused":true}' });
    assert(wrong.status === 403, `an owner's write with a wrong CSRF token: ${wrong.status}`);
  });
  await ctx.close();
}

// --- A session expires (the second server's TTL is 2 s).
{
  const ctx = await newContext();
  const page = await ctx.newPage();
  await check("session-expires", async () => {
    await signIn(page, SHORT, OWNER);
    await page.getByRole("heading", { name: "Imports" }).waitFor({ timeout: 10000 });
    await page.waitForTimeout(3000);
    const r = await apiJSON(page, `/api/app/projects/${PROJECT}/usage`);
    assert(r.status === 401, `after the TTL the API answered ${r.status}`);
    await page.reload();
    await page.getByRole("heading", { name: "Sign in" }).waitFor({ timeout: 10000 });
  });
  await ctx.close();
}

await browser.close();
console.log(JSON.stringify(results));
