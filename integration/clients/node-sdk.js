// Drives the official Node SDK (`mixpanel`, pinned in package-lock.json)
// against a Tributary server over HTTPS, exactly as a customer configures
// it: `host` and `port` only; the test CA is trusted through
// NODE_EXTRA_CA_CERTS. One client authenticates with the API secret, one
// with a service account. Prints one JSON line: "<client>:<call>" → ""
// on success or the SDK's error message. The Go test
// (clients_node_test.go) reads everything back through the server's APIs.
"use strict";
const Mixpanel = require("mixpanel");

const env = (k) => {
  const v = process.env[k];
  if (!v) throw new Error(`environment variable ${k} is not set`);
  return v;
};
const url = new URL(env("TRIBUTARY_URL"));
if (url.protocol !== "https:") throw new Error("TRIBUTARY_URL must be https://");
// The SDK's defaults otherwise, keepAlive included: Node's keep-alive agent
// unrefs idle sockets, so the script still exits when it is done.
const common = { host: url.hostname, port: url.port, protocol: "https" };

const clients = {
  secret: Mixpanel.init(env("TRIBUTARY_TOKEN"), { ...common, secret: env("TRIBUTARY_SECRET") }),
  sa: Mixpanel.init(env("TRIBUTARY_TOKEN"), {
    ...common,
    credentials: new Mixpanel.ServiceAccountCredentials(env("TRIBUTARY_SA_USER"), env("TRIBUTARY_SA_SECRET"), env("TRIBUTARY_PROJECT_ID")),
  }),
};

const results = {};

// call runs fn(callback) and records what the SDK's callback reported;
// batch calls report an array of errors or null.
function call(name, fn) {
  return new Promise((resolve) => {
    let done = false;
    const finish = (err) => {
      if (done) return;
      done = true;
      if (Array.isArray(err)) err = err.length ? err.map((e) => e && e.message).join("; ") : null;
      results[name] = err ? String(err.message || err) : "";
      resolve();
    };
    try {
      fn(finish);
    } catch (e) {
      finish(e);
    }
  });
}

async function drive(mode, mp) {
  const u = `node-${mode}`; // every id and name carries the client's mode
  const hourAgo = new Date(Date.now() - 3600 * 1000);
  await call(`${mode}:track`, (cb) => mp.track(`${u} track`, { distinct_id: `${u}-user`, plan: "pro", n: 1 }, cb));
  await call(`${mode}:import`, (cb) => mp.import(`${u} import`, hourAgo, { distinct_id: `${u}-user`, $insert_id: `${u}-imp-1`, n: 2 }, cb));
  const batch = [];
  for (let i = 0; i < 120; i++) {
    // 120 events: three requests of at most 50 (the SDK's batch size)
    batch.push({ event: `${u} batch`, properties: { distinct_id: `${u}-user`, time: new Date(hourAgo.getTime() + i * 1000), $insert_id: `${u}-b-${i}`, i } });
  }
  await call(`${mode}:import_batch`, (cb) => mp.import_batch(batch, cb));

  const p = mp.people;
  const a = `${u}-ada`;
  await call(`${mode}:people.set`, (cb) => p.set(a, { name: "Ada", plan: "free", tmp: 1 }, cb));
  await call(`${mode}:people.set_once`, (cb) => p.set_once(a, { name: "Not Ada", first_seen: "2024-01-01" }, cb));
  await call(`${mode}:people.increment`, (cb) => p.increment(a, "logins", 2, cb));
  await call(`${mode}:people.increment#2`, (cb) => p.increment(a, { logins: 3 }, cb));
  await call(`${mode}:people.append`, (cb) => p.append(a, "events", "signup", cb));
  await call(`${mode}:people.union`, (cb) => p.union(a, { tags: ["a", "b"] }, cb));
  await call(`${mode}:people.union#2`, (cb) => p.union(a, { tags: ["b", "c"] }, cb));
  await call(`${mode}:people.remove`, (cb) => p.remove(a, { tags: "a" }, cb));
  await call(`${mode}:people.unset`, (cb) => p.unset(a, "tmp", cb));
  await call(`${mode}:people.track_charge`, (cb) => p.track_charge(a, 19.5, { $time: "2024-02-01T00:00:00", sku: "x1" }, cb));
  const b = `${u}-bob`;
  await call(`${mode}:people.track_charge#bob`, (cb) => p.track_charge(b, 5, cb));
  await call(`${mode}:people.clear_charges`, (cb) => p.clear_charges(b, cb));
  const c = `${u}-cid`;
  await call(`${mode}:people.set#cid`, (cb) => p.set(c, "x", 1, cb));
  await call(`${mode}:people.delete_user`, (cb) => p.delete_user(c, cb));

  const g = mp.groups;
  const gid = `${u}-acme`;
  await call(`${mode}:groups.set`, (cb) => g.set("company", gid, { size: 10, tier: "gold", tmp: true }, cb));
  await call(`${mode}:groups.set_once`, (cb) => g.set_once("company", gid, { size: 99, founded: 1999 }, cb));
  await call(`${mode}:groups.union`, (cb) => g.union("company", gid, { regions: ["eu", "us"] }, cb));
  await call(`${mode}:groups.remove`, (cb) => g.remove("company", gid, { regions: "us" }, cb));
  await call(`${mode}:groups.unset`, (cb) => g.unset("company", gid, "tmp", cb));
  const gone = `${u}-gone`;
  await call(`${mode}:groups.set#gone`, (cb) => g.set("company", gone, "x", 1, cb));
  await call(`${mode}:groups.delete_group`, (cb) => g.delete_group("company", gone, cb));
}

(async () => {
  for (const [mode, mp] of Object.entries(clients)) await drive(mode, mp);
  process.stdout.write(JSON.stringify(results) + "\n");
})().catch((e) => {
  console.error(e);
  process.exit(1);
});
