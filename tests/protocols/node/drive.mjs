// Drives deuz-django's AG-UI endpoint with the official client (@ag-ui/client).
// One JSON argument: {url, token, threadId, runId, messages?, resume?, lastEventId?,
// cutAfter?}. Prints one JSON line: the events the client's subscribers saw, the SSE
// ids of the stream, the agent's pending interrupts, the error if the run failed, and
// whether the stream was cut.
//   cutAfter: N  drops the connection after the N-th SSE id (a network cut)
//   lastEventId  rejoins: sends Last-Event-ID, records nothing on the server
import { HttpAgent } from "@ag-ui/client";

const plan = JSON.parse(process.argv[2]);
const ids = [];
let cut = false;

// The client's SSE parser reads data: lines only; this fetch notes each id: line as
// it passes (and cuts the stream after plan.cutAfter of them).
async function fetchNotingIds(url, init) {
  const response = await fetch(url, init);
  if (!response.body) return response;
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  const encoder = new TextEncoder();
  let pending = "";
  const body = new ReadableStream({
    async pull(controller) {
      const { done, value } = await reader.read();
      if (done) return controller.close();
      pending += decoder.decode(value, { stream: true });
      let out = "";
      let end;
      while ((end = pending.indexOf("\n\n")) >= 0) {
        const frame = pending.slice(0, end + 2);
        pending = pending.slice(end + 2);
        const id = frame.split("\n").find((line) => line.startsWith("id: "));
        out += frame;
        if (id) ids.push(Number(id.slice(4)));
        if (plan.cutAfter !== undefined && ids.length >= plan.cutAfter) {
          controller.enqueue(encoder.encode(out));
          await reader.cancel();
          cut = true;
          return controller.close();
        }
      }
      if (out) controller.enqueue(encoder.encode(out));
    },
  });
  return new Response(body, { status: response.status, headers: response.headers });
}

const headers = { Authorization: `Token ${plan.token}` };
if (plan.lastEventId !== undefined) headers["Last-Event-ID"] = String(plan.lastEventId);
const agent = new HttpAgent({
  url: plan.url,
  headers,
  threadId: plan.threadId,
  initialMessages: plan.messages ?? [],
  fetch: fetchNotingIds,
});
const events = [];
let error = null;
try {
  await agent.runAgent(
    { runId: plan.runId, resume: plan.resume },
    { onEvent: ({ event }) => void events.push(event) },
  );
} catch (failure) {
  error = String(failure?.message ?? failure);
}
console.log(
  JSON.stringify({ events, ids, pendingInterrupts: agent.pendingInterrupts, error, cut }),
);
