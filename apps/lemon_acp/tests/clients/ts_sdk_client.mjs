// An editor on the official ACP TypeScript SDK (@agentclientprotocol/sdk) driving `lemon acp`.
// Usage: node ts_sdk_client.mjs SDK_DIR WORKSPACE LEMON [ARGS...]
// SDK_DIR holds node_modules/@agentclientprotocol/sdk (installed by the test, outside the repo).
// Prints one JSON summary line on its own stdout: what the agent streamed and answered, and
// every raw stdout line of `lemon acp` (the test checks that each is a JSON-RPC frame).
import { spawn } from "node:child_process";
import { createRequire } from "node:module";
import { Readable, Writable } from "node:stream";
import { pathToFileURL } from "node:url";

const [sdkDir, workspace, lemon, ...lemonArgs] = process.argv.slice(2);
const entry = createRequire(`${sdkDir}/package.json`).resolve("@agentclientprotocol/sdk");
const acp = await import(pathToFileURL(entry).href);

const child = spawn(lemon, [...lemonArgs, "acp"], {
  cwd: workspace,
  env: process.env,
  stdio: ["pipe", "pipe", "inherit"],
});
const rawLines = [];
let partial = "";
let open = true; // the SDK cancels its reader once the workflow is done
const agentOut = new ReadableStream({
  cancel() {
    open = false;
  },
  start(controller) {
    child.stdout.on("data", (chunk) => {
      partial += chunk.toString("utf8");
      let nl;
      while ((nl = partial.indexOf("\n")) >= 0) {
        rawLines.push(partial.slice(0, nl));
        partial = partial.slice(nl + 1);
      }
      if (open) controller.enqueue(new Uint8Array(chunk));
    });
    child.stdout.on("end", () => {
      if (open) controller.close();
      open = false;
    });
  },
});
const stream = acp.ndJsonStream(Writable.toWeb(child.stdin), agentOut);

const updates = [];
let toolRunning;
const running = new Promise((resolve) => (toolRunning = resolve));
const app = acp
  .client({ name: "ts-sdk-test-editor" })
  .onRequest(acp.methods.client.session.requestPermission, async ({ params }) => {
    updates.push({ permission: params.toolCall.toolCallId });
    setImmediate(toolRunning); // cancel once the approval is on its way: the run must stop
    return { outcome: { outcome: "selected", optionId: "allow_once" } };
  })
  .onNotification(acp.methods.client.session.update, async ({ params }) => {
    updates.push(params.update);
  });

const summary = await app.connectWith(stream, async (ctx) => {
  const init = await ctx.request(acp.methods.agent.initialize, {
    protocolVersion: acp.PROTOCOL_VERSION,
    clientCapabilities: { fs: { readTextFile: false, writeTextFile: false } },
  });
  const session = await ctx.request(acp.methods.agent.session.new, {
    cwd: workspace,
    mcpServers: [],
  });
  const echoed = await ctx.request(acp.methods.agent.session.prompt, {
    sessionId: session.sessionId,
    prompt: [{ type: "text", text: "/echo hello from the typescript editor" }],
  });
  const text = updates
    .filter((u) => u.sessionUpdate === "agent_message_chunk")
    .map((u) => u.content.text)
    .join("");
  const chunks = updates.filter((u) => u.sessionUpdate === "agent_message_chunk").length;
  const slow = ctx.request(acp.methods.agent.session.prompt, {
    sessionId: session.sessionId,
    prompt: [{ type: "text", text: '/tool bash {"command": "sleep 60"}' }],
  });
  await running;
  await ctx.notify(acp.methods.agent.session.cancel, { sessionId: session.sessionId });
  const cancelled = await slow;
  return {
    protocolVersion: init.protocolVersion,
    agent: init.agentInfo?.name,
    sessionId: session.sessionId,
    echoStop: echoed.stopReason,
    text,
    chunks,
    cancelStop: cancelled.stopReason,
    asked: updates.filter((u) => u.permission).length,
    kinds: [...new Set(updates.map((u) => u.sessionUpdate).filter(Boolean))],
  };
});
child.stdin.end();
await new Promise((resolve) => child.on("exit", resolve));
if (partial) rawLines.push(partial);
process.stdout.write(JSON.stringify({ ...summary, rawLines }) + "\n");
