// A plain reader of this server's OpenAPI document: every endpoint, its summary, its body's
// schema and its answers. (Any OpenAPI tool can read /openapi.json too.)
"use strict";
(async () => {
  const root = document.getElementById("api");
  const doc = await (await fetch("openapi.json")).json();
  const resolve = (s) => (s && s.$ref ? doc.components.schemas[s.$ref.split("/").pop()] : s);
  const parts = [];
  const add = (tag, text, cls) => { const n = document.createElement(tag); n.textContent = text; if (cls) n.className = cls; parts.push(n); return n; };
  add("p", `${doc.info.title} ${doc.info.version}: ${doc.info.description}`, "muted");
  for (const [path, ops] of Object.entries(doc.paths)) {
    for (const [method, op] of Object.entries(ops)) {
      add("h2", `${method.toUpperCase()} ${path}`);
      add("p", op.summary || "");
      const body = op.requestBody && op.requestBody.content["application/json"].schema;
      if (body) {
        const shown = body.oneOf ? body.oneOf.map(resolve) : [resolve(body)];
        add("pre", JSON.stringify(shown.length === 1 ? shown[0] : shown, null, 2), "source");
      }
      add("p", `answers: ${Object.keys(op.responses).join(", ")}`, "muted");
    }
  }
  root.replaceChildren(...parts);
})();
