// openclaw_names.mjs: OpenClaw 2026.9.6's tool naming (docs/tool-names.md
// §2) transcribed step by step in JavaScript, run
// under Node so that String.prototype.trim, the regular expression (per
// UTF-16 code unit) and localeCompare are the real ones. It writes
// policies/builtin/testdata/sanitizer_golden.json: catalogs and the names
// OpenClaw gives them, which the sanitizer module's tests compare with.
//
//   node guests/sanitizer/testdata/openclaw_names.mjs > policies/builtin/testdata/sanitizer_golden.json
//
// The catalogs are fixed cases plus seeded pseudo-random ones (the output
// is deterministic).

function safeServerNames(servers) {
  const taken = new Set();
  const out = [];
  for (const raw of servers) {
    let base = raw.trim().replace(/[^A-Za-z0-9_-]/g, "-");
    if (base === "") base = "mcp";
    if (!/^[A-Za-z]/.test(base)) base = "mcp-" + base;
    base = base.slice(0, 30);
    let name = base;
    for (let n = 2; taken.has(name.toLowerCase()); n++) {
      const sfx = "-" + n;
      name = base.slice(0, Math.max(1, 30 - sfx.length)) + sfx;
    }
    taken.add(name.toLowerCase());
    out.push(name);
  }
  return out;
}

function openclawNames(catalog) {
  const safe = safeServerNames(catalog.servers.map((s) => s.name));
  const entries = [];
  catalog.servers.forEach((s, si) => s.tools.forEach((raw, ti) => entries.push({ si, ti, raw })));
  entries.sort((a, b) =>
    safe[a.si].localeCompare(safe[b.si]) ||
    a.raw.localeCompare(b.raw) ||
    catalog.servers[a.si].name.localeCompare(catalog.servers[b.si].name));
  const reserved = new Set((catalog.reserved || []).map((r) => r.toLowerCase()));
  const names = catalog.servers.map((s) => s.tools.map(() => null));
  for (const e of entries) {
    const trimmed = e.raw.trim();
    if (trimmed === "") continue; // skipped
    let part = trimmed.replace(/[^A-Za-z0-9_-]/g, "-");
    if (part === "") part = "tool";
    if (!/^[A-Za-z]/.test(part)) part = "tool-" + part;
    const maxTool = Math.max(1, 64 - safe[e.si].length - 2);
    part = part.slice(0, maxTool);
    if (part === "") part = "tool";
    let name = `${safe[e.si]}__${part}`;
    for (let n = 2; reserved.has(name.toLowerCase()); n++) {
      const sfx = "-" + n;
      name = `${safe[e.si]}__${part.slice(0, Math.max(1, maxTool - sfx.length))}${sfx}`;
    }
    reserved.add(name.toLowerCase());
    names[e.si][e.ti] = name;
  }
  return { safe, names };
}

// A small deterministic PRNG (mulberry32).
function rng(seed) {
  return () => {
    seed |= 0; seed = (seed + 0x6d2b79f5) | 0;
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const long = (c, n) => c.repeat(n);
const fixed = [
  { title: "plain names", servers: [{ name: "files", tools: ["read_file", "write_file"] }, { name: "web", tools: ["fetch"] }] },
  { title: "dots, slashes, spaces", servers: [{ name: "my.server", tools: ["fs/read", "list files", "a.b.c"] }] },
  { title: "unicode and emoji", servers: [{ name: "café", tools: ["größe", "名前", "😀", "x😀y", "é"] }] },
  { title: "empty and blank names", servers: [{ name: "", tools: ["", "   ", "\t", "ok"] }, { name: "  ", tools: ["t"] }] },
  { title: "numeric server and tool names", servers: [{ name: "123", tools: ["456", "7up"] }, { name: "9", tools: ["_x", "-y"] }] },
  { title: "servers that sanitize to one name", servers: [{ name: "my server", tools: ["a"] }, { name: "my.server", tools: ["a"] }, { name: "My-Server", tools: ["a"] }] },
  { title: "tools that collide only after sanitizing", servers: [{ name: "s", tools: ["a b", "a.b", "a/b", "a-b", "a:b", "A B", "a_b"] }] },
  { title: "case-insensitive collisions", servers: [{ name: "s", tools: ["Read", "read", "READ", "rEad"] }] },
  { title: "reserved names", reserved: ["conversations_list", "s__Send"], servers: [{ name: "s", tools: ["send", "send-2"] }] },
  { title: "200-character names", servers: [{ name: long("s", 200), tools: [long("t", 200), long("t", 199) + "u"] }] },
  { title: "long server names cut to one", servers: [{ name: long("a", 40) + "1", tools: ["x"] }, { name: long("a", 40) + "2", tools: ["x"] }, { name: long("a", 30), tools: ["x"] }] },
  { title: "long tool names cut into a collision", servers: [{ name: "srv", tools: [long("x", 70) + "a", long("x", 70) + "b", long("x", 59)] }] },
  { title: "suffix collides with a natural name", servers: [{ name: "s", tools: ["a b", "a-b", "a-b-2"] }] },
  { title: "a declared server with no tools", servers: [{ name: "dup", tools: [] }, { name: "dup ", tools: ["t"] }] },
  { title: "separators inside server names", servers: [{ name: "a__b", tools: ["c"] }, { name: "a", tools: ["b__c"] }] },
  { title: "JS white space", servers: [{ name: "\u00a0srv\ufeff", tools: ["\u2003tool\u3000", "\u0085x"] }] },
  { title: "punctuation order", servers: [{ name: "p", tools: ["a!b", "a?b", "a'b", "a\"b", "a(b", "a@b", "a*b", "a\\b", "a&b", "a#b", "a%b", "a`b", "a^b", "a+b", "a<b", "a=b", "a|b", "a~b", "a$b", "a,b", "a;b"] }] },
  { title: "digits, letters and case order", servers: [{ name: "o", tools: ["a1", "a 1", "a-1", "a_1", "A-1", "a.1", "aB.c", "Ab.c", "ab.C", "ab c"] }] },
];

const alphabet = ["a", "b", "A", "B", "1", "_", "-", ".", " ", "/", ":"];
const random = [];
const r = rng(20261129);
for (let c = 0; c < 40; c++) {
  const servers = [];
  const ns = 1 + Math.floor(r() * 4);
  for (let s = 0; s < ns; s++) {
    const tools = [];
    const nt = Math.floor(r() * 12);
    for (let t = 0; t < nt; t++) {
      let len = 1 + Math.floor(r() * 5);
      if (r() < 0.1) len = 60 + Math.floor(r() * 10);
      let name = "";
      for (let i = 0; i < len; i++) name += alphabet[Math.floor(r() * alphabet.length)];
      tools.push(name);
    }
    let sname = "";
    const sl = 1 + Math.floor(r() * 3);
    for (let i = 0; i < sl; i++) sname += alphabet[Math.floor(r() * alphabet.length)];
    servers.push({ name: sname + s, tools });
  }
  random.push({ title: `random ${c}`, servers });
}

const cases = [...fixed, ...random].map((c) => {
  const { safe, names } = openclawNames(c);
  return { ...c, reserved: c.reserved || [], openclaw: { safe, names } };
});
process.stdout.write(JSON.stringify({ generator: "guests/sanitizer/testdata/openclaw_names.mjs", node: process.version, cases }, null, 1) + "\n");
