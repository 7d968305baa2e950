// Drives mixpanel-import (pinned in package-lock.json) against a Tributary
// server over HTTPS (the test CA trusted through NODE_EXTRA_CA_CERTS).
//
// mixpanel-import 3.1.43 has no option for a custom API host: its URLs
// come from a fixed table per `region` (Job#endpoints, read through the
// Job#url getter), and its default `undici` transport connects to pools
// opened on api.mixpanel.com at load time. So this script replaces only the
// scheme and host of what Job#url returns, and selects the `got`
// transport (a documented option); request shapes, auth headers, batching,
// compression and the handling of answers are the package's own.
//
// Prints one JSON line: "<case>" → "" on success or what went wrong;
// "#export:<case>" → the number of records the export wrote.
"use strict";
const fs = require("fs");
const os = require("os");
const path = require("path");
const mpImport = require("mixpanel-import");
const Job = require("mixpanel-import/components/job.js");

const env = (k) => {
  const v = process.env[k];
  if (!v) throw new Error(`environment variable ${k} is not set`);
  return v;
};
const target = new URL(env("TRIBUTARY_URL"));
const urlGetter = Object.getOwnPropertyDescriptor(Job.prototype, "url").get;
Object.defineProperty(Job.prototype, "url", {
  get() {
    const u = new URL(urlGetter.call(this));
    u.protocol = target.protocol;
    u.host = target.host;
    return u.toString();
  },
});

const sa = { acct: env("TRIBUTARY_SA_USER"), pass: env("TRIBUTARY_SA_SECRET"), project: env("TRIBUTARY_PROJECT_ID") };
const secret = { secret: env("TRIBUTARY_SECRET") };
// maxRetries: a transient 429 or 5xx under CI load is retried, as the
// package does by default, but 3 times (got backs off 1, 2, 4 s) rather
// than the default 10, so a server that keeps refusing fails within the
// test's timeout. (0 would not turn retries off: the package reads
// `maxRetries || 10`.)
const common = { transport: "got", region: "US", verbose: false, logs: false, showProgress: false, maxRetries: 3 };
const results = {};

async function run(name, creds, data, opts, want) {
  try {
    const s = await mpImport(creds, data, { ...common, ...opts });
    const problem = [];
    if (s.success !== want) problem.push(`success ${s.success}, want ${want}`);
    if (s.failed) problem.push(`failed ${s.failed}`);
    if (problem.length) problem.push(`responses ${JSON.stringify(s.responses).slice(0, 600)} errors ${JSON.stringify(s.errors).slice(0, 600)}`);
    results[name] = problem.join("; ");
  } catch (e) {
    results[name] = `threw: ${e && e.message}`;
  }
}

function events(prefix, n) {
  const base = Math.floor(Date.now() / 1000) - 7200;
  return Array.from({ length: n }, (_, i) => ({
    event: `${prefix} event`,
    properties: { time: base + i, distinct_id: `${prefix}-user-${i % 5}`, $insert_id: `${prefix}-${i}`, i },
  }));
}

(async () => {
  // Events: service account (strict, gzip: the package's defaults) and API secret with strict off.
  await run("events:service-account", sa, events("mi-sa", 250), { recordType: "event" }, 250);
  await run("events:secret strict=0", secret, events("mi-secret", 20), { recordType: "event", strict: false, compress: false }, 20);

  // Profiles: the package's default shape has no $token in the updates
  // when no token is given; the credential in the header names the project.
  const users = (prefix) => [
    { $distinct_id: `${prefix}-ada`, $set: { name: "Ada", plan: "pro" } },
    { $distinct_id: `${prefix}-bob`, $set: { name: "Bob", plan: "free" } },
  ];
  await run("users:secret", secret, users("mi-secret"), { recordType: "user" }, 2);
  await run("users:service-account", sa, users("mi-sa"), { recordType: "user" }, 2);
  await run("groups:secret", secret, [{ $group_key: "company", $group_id: "mi-acme", $set: { tier: "gold" } }],
    { recordType: "group", groupKey: "company" }, 1);

  // Export: the raw event export to a local folder.
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "mi-export-"));
  const day = (d) => new Date(Date.now() + d * 86400e3).toISOString().slice(0, 10);
  try {
    await mpImport(sa, null, { ...common, recordType: "export", start: day(-2), end: day(1), where: dir });
    const lines = fs.readFileSync(path.join(dir, "events.json"), "utf8").split("\n").filter((l) => l.trim());
    for (const l of lines) JSON.parse(l); // every line must be an event object
    results["export:service-account"] = "";
    results["#export:service-account"] = String(lines.length);
  } catch (e) {
    results["export:service-account"] = `threw: ${e && e.message}`;
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
  process.stdout.write(JSON.stringify(results) + "\n");
})().catch((e) => {
  console.error(e);
  process.exit(1);
});
