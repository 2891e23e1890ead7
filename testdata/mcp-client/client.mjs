// A third-party MCP client for sendonce's tests: the official TypeScript SDK, as agents
// use it, with its defaults (no roots capability). The Go tests run it as
//
//	node client.mjs SCENARIO
//
// with MCP_TRANSPORT=stdio (MCP_COMMAND: a JSON array, the server's command line) or
// MCP_TRANSPORT=http (MCP_URL, MCP_TOKEN), and MCP_ARGS (a JSON object) for the
// scenario. It prints one JSON object: what the server answered, as this client saw it.
// It judges nothing; the Go test does.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const scenario = process.argv[2];
const args = JSON.parse(process.env.MCP_ARGS || "{}");
const errors = []; // what the client's protocol layer reported (late responses, stray progress)

function transport() {
  if (process.env.MCP_TRANSPORT === "http") {
    return new StreamableHTTPClientTransport(new URL(process.env.MCP_URL), {
      requestInit: { headers: { Authorization: `Bearer ${process.env.MCP_TOKEN}` } },
    });
  }
  const [command, ...rest] = JSON.parse(process.env.MCP_COMMAND);
  return new StdioClientTransport({ command, args: rest, env: { ...process.env }, stderr: "inherit" });
}

// outcome is a call's answer: a tool result (isError, its text, its structured content)
// or the protocol error the call failed with.
async function outcome(promise) {
  try {
    const r = await promise;
    return { isError: !!r.isError, text: (r.content || []).map((c) => c.text || "").join("\n"), structured: r.structuredContent ?? null };
  } catch (e) {
    return { protocolError: { code: e.code ?? null, name: e.name, message: String(e.message) } };
  }
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

const scenarios = {
  // contract: the answers an agent gets for what it can get wrong.
  async contract(client) {
    const call = (name, a) => outcome(client.callTool({ name, arguments: a }));
    return {
      deliverOutside: await call("deliver", { to: "Bob", file: args.outside }),
      statusOutside: await call("status", { to: "Bob", file: args.outside }),
      statusMissing: await call("status", { to: "Bob", file: args.missing }),
      showOutside: await call("show", { to: "Bob", file: args.outside }),
      unknownField: await call("deliver", { to: "Bob", file: args.inside, colour: "red" }),
      missingField: await call("deliver", { to: "Bob" }),
      wrongType: await call("status", { key: 7 }),
      statusInside: await call("status", { to: "Bob", file: args.inside }),
      tools: (await client.listTools()).tools.map((t) => t.name),
      deliverInside: await call("deliver", { to: "Bob", dest_id: "xmpp:bob@localhost", file: args.inside }),
      deliverAgain: await call("deliver", { to: "Bob", dest_id: "xmpp:bob@localhost", file: args.inside }),
    };
  },

  // cancel: a delivery cancelled (notifications/cancelled) at the first progress message
  // holding args.abortOn; then what still arrived for it, and where the key stands.
  async cancel(client) {
    const controller = new AbortController();
    const before = [];
    const after = [];
    let aborted = false;
    const call = outcome(
      client.callTool({ name: "deliver", arguments: { to: "Bob", dest_id: args.dest_id, file: args.file } }, undefined, {
        signal: controller.signal,
        timeout: 120000,
        onprogress: (p) => {
          (aborted ? after : before).push(p.message || "");
          if (!aborted && (p.message || "").includes(args.abortOn)) {
            aborted = true;
            controller.abort("the agent gave up");
          }
        },
      }),
    );
    const answer = await call;
    const abortedAt = Date.now();
    await sleep(args.waitMs || 5000); // anything the server still sends for it arrives here
    let status;
    for (let i = 0; i < 120; i++) {
      status = await outcome(client.callTool({ name: "show", arguments: { to: "Bob", dest_id: args.dest_id, file: args.file } }));
      if (status.structured && status.structured.status !== "held") break;
      await sleep(500);
    }
    return { aborted, answer, progressBefore: before, progressAfter: after, waitedMs: Date.now() - abortedAt, show: status };
  },
};

const client = new Client({ name: "sendonce-ts-test", version: "1.0.0" });
client.onerror = (e) => errors.push(String(e && e.message ? e.message : e));
try {
  await client.connect(transport());
  const result = await scenarios[scenario](client);
  process.stdout.write(JSON.stringify({ ...result, clientErrors: errors }) + "\n");
} finally {
  await client.close();
}
