// Checks a stream of `tenax k8s manifests` against the Kubernetes API
// schemas, so a typo in a field fails CI (docs/k8s.md, "What CI checks").
//
//   node tools/k8s-check/check.mjs FILE      (or - for stdin)
//
// The stream is "---" then one object as JSON, per object (JSON is YAML
// 1.2), so it is split on "---" lines and JSON.parse'd: no YAML library.
// For each object:
//   1. the kubernetes-models class of its apiVersion + kind is constructed
//      and validate()d: types, enums, required fields, formats. An
//      apiVersion/kind the package has no class for is an error.
//   2. unknown fields: kubernetes-models' schemas allow any extra property
//      (Kubernetes' OpenAPI has no additionalProperties: false), so
//      "replicaz" passes validate(). The same compiled validator is run
//      again over a Proxy that records which properties it reads; an object
//      it reads fields of (a schema with properties) whose own key it never
//      read is a field the schema does not have. Objects the validator
//      enumerates (maps: labels, data, resources.requests) or never enters
//      (free-form: x-kubernetes-preserve-unknown-fields) are not checked.
//   3. a ConfigMap value holding a KubeSchedulerConfiguration (not an API
//      object, so not in kubernetes-models) is parsed and checked against
//      kubescheduler.config.k8s.io/v1's field names and types below.
//   4. when the stream holds a KubeSchedulerConfiguration, every pod's
//      schedulerName other than default-scheduler must be one of its
//      profiles (a misspelt scheduler name leaves pods Pending for ever).
// Exit 0 when every object passes; 1 with one line per problem naming the
// object (kind/name) and the field; 2 for a file that cannot be read.
import { readFileSync } from "node:fs";

const problems = [];
const fail = (where, message) => problems.push(`${where}: ${message}`);

// --- reading the stream ---------------------------------------------------

function readStream(path) {
  const text = readFileSync(path === "-" ? 0 : path, "utf8");
  const docs = [];
  let current = [];
  let line = 0;
  let start = 1;
  for (const l of text.split("\n")) {
    ++line;
    if (l === "---") {
      if (current.join("").trim() !== "") docs.push({ text: current.join("\n"), line: start });
      current = [];
      start = line + 1;
    } else {
      current.push(l);
    }
  }
  if (current.join("").trim() !== "") docs.push({ text: current.join("\n"), line: start });
  return docs;
}

// --- unknown-field detection ----------------------------------------------

// Wraps `value` so that property reads are recorded per object in `log`.
function track(value, path, log) {
  if (value === null || typeof value !== "object") return value;
  const entry = { path, obj: value, read: new Set(), enumerated: false, touched: false };
  log.push(entry);
  const kids = new Map();
  return new Proxy(value, {
    get(target, key, receiver) {
      if (typeof key !== "string") return Reflect.get(target, key, receiver);
      entry.touched = true;
      entry.read.add(key);
      const v = Reflect.get(target, key, receiver);
      if (Object.hasOwn(target, key) && v !== null && typeof v === "object") {
        if (!kids.has(key)) kids.set(key, track(v, `${path}.${key}`, log));
        return kids.get(key);
      }
      return v;
    },
    has(target, key) {
      if (typeof key === "string") {
        entry.touched = true;
        entry.read.add(key);
      }
      return Reflect.has(target, key);
    },
    ownKeys(target) {
      entry.touched = true;
      entry.enumerated = true;
      return Reflect.ownKeys(target);
    },
  });
}

function unknownFields(Model, plain) {
  const log = [];
  const proxy = track(plain, "", log);
  try {
    Model.prototype.validate.call(proxy);
  } catch {
    // validate() already reported it; only the reads matter here
  }
  const unknown = [];
  for (const e of log) {
    if (Array.isArray(e.obj) || !e.touched || e.enumerated) continue;
    for (const key of Object.keys(e.obj)) {
      if (!e.read.has(key)) unknown.push(`${e.path}.${key}`.replace(/^\./, ""));
    }
  }
  return unknown;
}

// --- API objects -----------------------------------------------------------

async function modelFor(apiVersion, kind) {
  // "v1" -> kubernetes-models/v1/Kind; "apps/v1" -> kubernetes-models/apps/v1/Kind
  if (!/^([a-z0-9.-]+\/)?v[0-9]+((alpha|beta)[0-9]+)?$/.test(apiVersion) || !/^[A-Z][A-Za-z0-9]*$/.test(kind)) {
    return null;
  }
  try {
    const mod = await import(`kubernetes-models/${apiVersion}/${kind}`);
    return mod[kind] ?? null;
  } catch {
    return null;
  }
}

async function checkObject(obj, where) {
  if (obj === null || typeof obj !== "object" || Array.isArray(obj)) {
    fail(where, "is not a JSON object");
    return;
  }
  const { apiVersion, kind } = obj;
  const name = obj.metadata?.name;
  const id = `${kind ?? "?"}/${name ?? "?"}`;
  if (typeof apiVersion !== "string" || typeof kind !== "string") {
    fail(`${where} ${id}`, "needs string apiVersion and kind");
    return;
  }
  if (typeof name !== "string" || name === "") fail(`${where} ${id}`, "needs metadata.name");
  const Model = await modelFor(apiVersion, kind);
  if (!Model) {
    fail(`${where} ${id}`, `no Kubernetes schema for apiVersion ${apiVersion} kind ${kind}`);
    return;
  }
  const model = new Model(obj);
  try {
    model.validate();
  } catch (e) {
    fail(`${where} ${id}`, `schema: ${e.message}`);
  }
  for (const field of unknownFields(Model, model.toJSON())) {
    fail(`${where} ${id}`, `unknown field ${field}`);
  }
  if (kind === "ConfigMap" && obj.data && typeof obj.data === "object") {
    for (const [key, value] of Object.entries(obj.data)) {
      let parsed;
      try {
        parsed = JSON.parse(value);
      } catch {
        continue; // not JSON: not a scheduler configuration
      }
      if (parsed && typeof parsed === "object" && String(parsed.apiVersion ?? "").startsWith("kubescheduler.config.k8s.io")) {
        checkSchedulerConfig(parsed, `${where} ${id} data.${key}`);
      }
    }
  }
}

// --- KubeSchedulerConfiguration (kubescheduler.config.k8s.io/v1) ------------
// Field names and types of the Go structs in k8s.io/kube-scheduler/config/v1
// (json tags) and k8s.io/component-base/config/v1alpha1 (leaderElection,
// clientConnection). "object" = a field not descended into.

const DURATION = /^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$/;
const types = {
  string: (v) => typeof v === "string",
  bool: (v) => typeof v === "boolean",
  int: (v) => Number.isInteger(v),
  duration: (v) => typeof v === "string" && DURATION.test(v),
  number: (v) => typeof v === "number",
  object: (v) => v !== null && typeof v === "object" && !Array.isArray(v),
};
const schedulerSchema = {
  KubeSchedulerConfiguration: {
    apiVersion: "string",
    kind: "string",
    parallelism: "int",
    leaderElection: "LeaderElection",
    clientConnection: "ClientConnection",
    enableProfiling: "bool",
    enableContentionProfiling: "bool",
    percentageOfNodesToScore: "int",
    podInitialBackoffSeconds: "int",
    podMaxBackoffSeconds: "int",
    profiles: ["Profile"],
    extenders: ["Extender"],
    delayCacheUntilActive: "bool",
  },
  LeaderElection: {
    leaderElect: "bool",
    leaseDuration: "duration",
    renewDeadline: "duration",
    retryPeriod: "duration",
    resourceLock: "string",
    resourceName: "string",
    resourceNamespace: "string",
  },
  ClientConnection: { kubeconfig: "string", acceptContentTypes: "string", contentType: "string", qps: "number", burst: "int" },
  Profile: { schedulerName: "string", percentageOfNodesToScore: "int", plugins: "object", pluginConfig: ["object"] },
  Extender: {
    urlPrefix: "string",
    filterVerb: "string",
    preemptVerb: "string",
    prioritizeVerb: "string",
    weight: "int",
    bindVerb: "string",
    enableHTTPS: "bool",
    tlsConfig: "TLSConfig",
    httpTimeout: "duration",
    nodeCacheCapable: "bool",
    managedResources: ["ManagedResource"],
    ignorable: "bool",
  },
  TLSConfig: {
    insecure: "bool",
    serverName: "string",
    certFile: "string",
    keyFile: "string",
    caFile: "string",
    certData: "string",
    keyData: "string",
    caData: "string",
  },
  ManagedResource: { name: "string", ignoredByScheduler: "bool" },
};

function checkStruct(value, typeName, path, where) {
  const fields = schedulerSchema[typeName];
  if (!types.object(value)) {
    fail(where, `${path || typeName} must be an object`);
    return;
  }
  for (const [key, v] of Object.entries(value)) {
    const t = fields[key];
    const at = path ? `${path}.${key}` : key;
    if (t === undefined) {
      fail(where, `unknown field ${at} in ${typeName} (known: ${Object.keys(fields).join(", ")})`);
    } else if (Array.isArray(t)) {
      if (!Array.isArray(v)) fail(where, `${at} must be a list`);
      else v.forEach((item, i) => checkValue(item, t[0], `${at}[${i}]`, where));
    } else {
      checkValue(v, t, at, where);
    }
  }
}

function checkValue(v, t, at, where) {
  if (schedulerSchema[t]) checkStruct(v, t, at, where);
  else if (!types[t](v)) fail(where, `${at} must be a ${t}, got ${JSON.stringify(v)}`);
}

const profiles = new Set();

function checkSchedulerConfig(config, where) {
  if (config.apiVersion !== "kubescheduler.config.k8s.io/v1") {
    fail(where, `apiVersion ${config.apiVersion}: want kubescheduler.config.k8s.io/v1`);
  }
  if (config.kind !== "KubeSchedulerConfiguration") fail(where, `kind ${config.kind}: want KubeSchedulerConfiguration`);
  checkStruct(config, "KubeSchedulerConfiguration", "", where);
  for (const [i, p] of (Array.isArray(config.profiles) ? config.profiles : []).entries()) {
    if (typeof p?.schedulerName === "string") profiles.add(p.schedulerName);
    else fail(where, `profiles[${i}] needs a schedulerName`);
  }
  for (const [i, e] of (Array.isArray(config.extenders) ? config.extenders : []).entries()) {
    if (typeof e?.urlPrefix !== "string" || !/^https?:\/\/[^/]+/.test(e.urlPrefix)) {
      fail(where, `extenders[${i}].urlPrefix must be an http(s) URL`);
    }
    if (e?.weight !== undefined && !(Number.isInteger(e.weight) && e.weight > 0)) {
      fail(where, `extenders[${i}].weight must be a positive integer`);
    }
  }
}

// Pod templates name a scheduler profile that exists.
function podSpecs(obj) {
  const t = obj.spec?.template?.spec;
  return t ? [t] : [];
}

// --- main -------------------------------------------------------------------

const path = process.argv[2];
if (!path) {
  console.error("usage: node check.mjs FILE (a stream of `tenax k8s manifests`, or - for stdin)");
  process.exit(2);
}
let docs;
try {
  docs = readStream(path);
} catch (e) {
  console.error(`k8s-check: ${path}: ${e.message}`);
  process.exit(2);
}
if (docs.length === 0) fail(path, "holds no objects");
const objects = [];
for (const d of docs) {
  const where = `${path}:${d.line}`;
  let obj;
  try {
    obj = JSON.parse(d.text);
  } catch (e) {
    fail(where, `not JSON: ${e.message}`);
    continue;
  }
  objects.push({ obj, where });
  await checkObject(obj, where);
}
for (const { obj, where } of objects) {
  for (const spec of podSpecs(obj)) {
    const s = spec.schedulerName;
    if (profiles.size > 0 && s !== undefined && s !== "default-scheduler" && !profiles.has(s)) {
      fail(`${where} ${obj.kind}/${obj.metadata?.name}`,
           `schedulerName ${s} is no profile of the KubeSchedulerConfiguration in the stream (${[...profiles].join(", ")})`);
    }
  }
}
if (problems.length > 0) {
  for (const p of problems) console.error(`k8s-check: ${p}`);
  console.error(`k8s-check: ${problems.length} problem(s) in ${objects.length} object(s)`);
  process.exit(1);
}
console.log(`k8s-check: ${objects.length} objects match the Kubernetes API schemas (kubernetes-models)`);
